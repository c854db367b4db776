# Session 58, for the next lease (any H100 or H200): kkt_phase_probe.py, how one value head's serial
# work in kkt_solve divides between L, the diagonal inverses, the merges and the store. Carry .gpu and
# .gpu-p/tlc58p.tar.xz (the eight probe kernels, built by `kkt_phase_probe.py --build-only` through
# gpu_cache_subset.sh). ~1 min. Begin with `source .gpu/prelude.sh && `.
t0=$SECONDS
source bench_serving/results/h200-session26/scripts/common.sh || exit 1
timeout 240 python3 bench_serving/results/h200-session58/scripts/kkt_phase_probe.py --out $OUT/probe > $OUT/probe.log 2>&1
echo "probe rc=$? $((SECONDS - t0)) s"; grep -v TileLang $OUT/probe.log | tail -6
compiled_here
finish
echo "call $((SECONDS - t0)) s"
