# Session 56: issue 3's table with FlashInfer 0.6.14 back in it (last timed in session 8, on kernels
# since rewritten): QLA, FlashInfer and FlashQLA on the same inputs, each backend in its own process
# (--isolate), FlashInfer's CuTe DSL JIT and FlashQLA's TileLang JIT inside their own shares.
# Needs .gpu, .gpu-p/tlc54.tar.xz (main's bench kernels) and .gpu-fi (bench_serving/gpu_pack_flashinfer.sh:
# prelude + part00 with .gpu in one call, part01 in this one). Begin with
#   source .gpu/prelude.sh && source .gpu-fi/prelude.sh && bash bench_serving/results/h200-session56/scripts/call_fi.sh
t0=$SECONDS
source bench_serving/results/h200-session26/scripts/common.sh || exit 1
END=${CALL_END:-560}
python3 - > $OUT/fi-import.txt 2>&1 <<'PY'
import flashinfer, flashinfer.gdn_prefill
from flashinfer.gdn_kernels import chunk_gated_delta_rule_sm90, cp_delta_rule_dsl_sm90
print("flashinfer", flashinfer.__version__, "sm90:", chunk_gated_delta_rule_sm90 is not None,
      "cp sm90:", cp_delta_rule_dsl_sm90 is not None)
PY
echo "import rc=$? $((SECONDS - t0)) s"; tail -n 3 $OUT/fi-import.txt
timeout -k 5 $(( END - (SECONDS - t0) - 10 )) python3 bench_serving/kernel_bench.py --heads "${TABLE_HEADS:-16/32,2/8}" \
  --isolate --no-prewarm --backends "${BACKENDS:-qla,flashinfer,flashqla}" --out $OUT/table \
  --budget-s $(( END - (SECONDS - t0) - 50 )) > $OUT/table.log 2>&1
echo "table rc=$? $((SECONDS - t0)) s"; grep -E "^\[bench\]|of [0-9]+|Error|error" $OUT/table.log | cut -c1-220 | tail -n 30
compiled_here
finish
(cd $OUT && find . -type f ! -name all.tar.gz ! -name gpu.txt ! -name 'kernels.*' ! -name fi-import.txt -delete; rm -rf table/isolated-*)
echo "call $((SECONDS - t0)) s"
