# The next H200 lease (none since session 47): the persistent walk's V-block sweep (bv_sweep.sh,
# ~3 min), which decides whether the H200 gets a PERSISTENT_COST_US entry (its plan keeps session 7's
# rule until then). Compare with h200-session63/bv-sweep/ (the H100's) as tests/test_cp.py does.
# Carry .gpu and .gpu-p/tlc63.tar.xz, tree slimmed. Begin with `source .gpu/prelude.sh && `.
t0=$SECONDS
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)
echo "GPU: $name"
[[ "$name" == *H200* ]] || [ -n "${ANY_GPU:-}" ] || { echo "not an H200: nothing to do (ANY_GPU=1 runs it anyway)"; exit 0; }
source bench_serving/results/h200-session26/scripts/common.sh || exit 1
bash bench_serving/results/h200-session63/scripts/bv_sweep.sh
compiled_here
finish
(cd $OUT && find . -type f ! -name all.tar.gz ! -name gpu.txt -delete)
echo "call $((SECONDS - t0)) s"
