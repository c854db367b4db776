#!/bin/bash
# Session 14, call 1 (nvidia-h200-x2, after uploading .gpu-vllm-s parts 00-06 (46 MiB each: the tree is 12 MiB); carry part07 and
# .work/s14). The kernels are built here first (32 cores; the CPU machine would take hours), into
# the bundle's TILELANG_CACHE_DIR, which stays for the next calls while the machine is warm. Main with the l2norm pass (kernels/hopper/qk_norm.py), qla_serve.gdn_gating
# and the vLLM adapter on views of its conv output.
# GPU 0: tests/test_hopper_gpu.py; then prep_ab.py (vLLM's prep + qla against gating + qla's pass);
#        then kernels.py --backends qla with QLA_BENCH_INPUTS=packed-l2norm and contiguous.
# GPU 1: gpu_vllm_check.sh --ref triton, random weights (greedy tokens, qla one-call steps vs triton).
source .gpu-vllm-s/prelude.sh || exit 1
export TILELANG_DEFAULT_TARGET=nvidia/nvidia-h100 FLA_FLASH_QLA=0
t0=$SECONDS
python3 -m pip install -q --no-deps --no-build-isolation -e . > "$OUT/pip.log" 2>&1
python3 bench_serving/gpu_prebuild.py --processes 32 --heads 16/32,2/8 --packed-l2norm --host-profile \
  > "$OUT/prebuild.log" 2>&1
echo "prebuild rc=$? $((SECONDS - t0)) s"
python3 -m qla_serve.cli warmup --heads 16/32 --heads 2/8 --engine vllm --processes 32 > "$OUT/warmup.log" 2>&1
echo "warmup rc=$? $((SECONDS - t0)) s"; tail -n 2 "$OUT/warmup.log"
MIXES=1x32768,1x8192,8192x4,16384+16384,1024x8,7000+600+300+200+92,1x2048
(
  export CUDA_VISIBLE_DEVICES=0
  QLA_ERR_LOG="$OUT/errors.jsonl" timeout 260 python3 -m pytest -m gpu -s -p no:cacheprovider -rA \
    tests/test_hopper_gpu.py > "$OUT/tests.log" 2>&1
  echo "gpu0 tests rc=$? $((SECONDS - t0)) s: $(tail -n 1 "$OUT/tests.log")"
  timeout 120 python3 bench_serving/prep_ab.py --out "$OUT/prep" > "$OUT/prep.log" 2>&1
  echo "gpu0 prep_ab rc=$? $((SECONDS - t0)) s"
  for inputs in packed-l2norm contiguous; do
    QLA_BENCH_INPUTS=$inputs timeout 75 python3 bench_serving/kernels.py --backends qla --heads 16/32,2/8 \
      --mixes $MIXES --budget-s 60 --out "$OUT/b-$inputs" > "$OUT/b-$inputs.log" 2>&1
    echo "gpu0 bench $inputs rc=$? $((SECONDS - t0)) s"
  done
) &
(
  export CUDA_VISIBLE_DEVICES=1
  OUT="$OUT/check" WEIGHTS=random timeout -k 20 --signal=INT $(( 545 - (SECONDS - t0) )) \
    bash bench_serving/gpu_vllm_check.sh --ref triton --startup-timeout 400 > "$OUT/check.log" 2>&1
  echo "gpu1 check rc=$? $((SECONDS - t0)) s"
) &
wait
grep -h "passed\|failed\|Error" "$OUT/tests.log" | tail -n 8
cat "$OUT/prep/prep_ab.md" 2>/dev/null
tail -n 15 "$OUT/check.log"
python3 - "$OUT" <<'PY'
import json, sys, os
out = sys.argv[1]
def rows(d):
    try: return {(r["heads"], r["mix"]): r for r in json.load(open(os.path.join(out, d, "kernels.json")))["rows"]}
    except Exception as e: return {}
c, p = rows("b-contiguous"), rows("b-packed-l2norm")
print("heads mix | contiguous gpu ms | packed+l2norm pass gpu ms | ratio")
for key in c:
    a, b = c[key].get("qla_gpu_ms"), p.get(key, {}).get("qla_gpu_ms")
    print(key, "|", a, "|", b, "|", None if not (a and b) else round(b / a, 3))
PY
cd "$OUT" && tar -czf /tmp/all.tar.gz . && rm -rf ./* && mv /tmp/all.tar.gz "$OUT/all.tar.gz"
