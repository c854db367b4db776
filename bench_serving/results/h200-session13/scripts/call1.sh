#!/bin/bash
# Session 13, call 1 (nvidia-h200-x2, .gpu pack): three same-run A/Bs on main (c5af0b2 + the
# packed-input bench option).
# carry [".gpu", ".work/tlc15.tar.xz", ".work/ab13"]; command `bash .work/ab13/call1.sh`.
# GPU 0: kernel_ab.sh: main against exp/kkt-v3-tf32's kkt_solve.py (label tf32; its GPU tests too).
# GPU 1: exp/kkt-bounds (a package copy in .work/ab13/site-bounds: its plan changes too): its GPU
#        tests, then kernels.py --backends qla from main and from the copy, alternately; then main
#        with QLA_BENCH_INPUTS=packed-l2norm (q/k/v as views of one packed buffer, l2norm in kernel).
source .gpu/prelude.sh || exit 1
export TILELANG_DEFAULT_TARGET=nvidia/nvidia-h100 FLA_FLASH_QLA=0
t0=$SECONDS
mkdir -p "$TILELANG_CACHE_DIR" && tar -xJf .work/tlc15.tar.xz -C "$TILELANG_CACHE_DIR"
python3 -m pip install -q --no-deps --no-build-isolation -e . > "$OUT/pip.log" 2>&1
echo "setup $((SECONDS - t0)) s"
MIXES=1x32768,1x8192,8192x4,16384+16384,1024x8,16x512,7000+600+300+200+92
(
  export CUDA_VISIBLE_DEVICES=0
  AB_TESTS=1 AB_BLOCK_V=plan AB_DEADLINE=$(( 520 - (SECONDS - t0) )) AB_MIXES=$MIXES \
    bash bench_serving/kernel_ab.sh "$OUT/kab" tf32=.work/ab13/kkt_solve_tf32.py > "$OUT/kab.log" 2>&1
  echo "gpu0 kab rc=$? $((SECONDS - t0)) s"
) &
(
  export CUDA_VISIBLE_DEVICES=1
  site=$PWD/.work/ab13/site-bounds
  (cd $site && PYTHONPATH=$site:$PYTHONPATH QLA_ERR_LOG="$OUT/errors-bounds.jsonl" timeout 230 python3 -m pytest -m gpu -s \
     -p no:cacheprovider -rA tests/test_hopper_gpu.py > "$OUT/tests-bounds.log" 2>&1)
  echo "gpu1 bounds tests rc=$? $((SECONDS - t0)) s: $(tail -n 1 "$OUT/tests-bounds.log")"
  for r in 1 2; do
    timeout 70 python3 bench_serving/kernels.py --backends qla --heads 16/32,2/8 --mixes $MIXES --budget-s 55 \
      --out "$OUT/b-tree$r" > "$OUT/b-tree$r.log" 2>&1
    (cd $site && PYTHONPATH=$site:$PYTHONPATH timeout 70 python3 bench_serving/kernels.py --backends qla --heads 16/32,2/8 \
      --mixes $MIXES --budget-s 55 --out "$OUT/b-bounds$r" > "$OUT/b-bounds$r.log" 2>&1)
    echo "gpu1 bounds round $r $((SECONDS - t0)) s"
  done
  QLA_BENCH_INPUTS=packed-l2norm timeout $(( 525 - (SECONDS - t0) )) python3 bench_serving/kernels.py --backends qla \
    --heads 16/32,2/8 --mixes $MIXES,1x2048 --budget-s $(( 500 - (SECONDS - t0) )) --out "$OUT/packed" > "$OUT/packed.log" 2>&1
  echo "gpu1 packed rc=$? $((SECONDS - t0)) s"
) &
wait
cat "$OUT/kab/ab.md" 2>/dev/null | head -40
grep -h "passed\|failed" "$OUT"/kab/tests-*.log "$OUT/tests-bounds.log" | tail -n 3
python3 - "$OUT" <<'PY'
import json, sys, os
out = sys.argv[1]
def rows(d):
    try: return {(r["heads"], r["mix"]): r for r in json.load(open(os.path.join(out, d, "kernels.json")))["rows"]}
    except Exception as e: return {}
t = [rows(f"b-tree{i}") for i in (1, 2)]; b = [rows(f"b-bounds{i}") for i in (1, 2)]; p = rows("packed")
print("heads mix | tree gpu ms (2 runs) | bounds | kkt-only tree/bounds | packed-l2norm gpu ms | packed/tree")
for key in t[0]:
    g = lambda d, k="qla_gpu_ms": d.get(key, {}).get(k)
    f = lambda x: "-" if x is None else f"{x:.4f}"
    tg = [g(d) for d in t]; bg = [g(d) for d in b]
    tm = min([x for x in tg if x] or [None]) if any(tg) else None
    pg = g(p)
    print(key, "|", " ".join(f(x) for x in tg), "|", " ".join(f(x) for x in bg), "|",
          f(g(t[0], "qla_kkt_only_ms")), f(g(b[0], "qla_kkt_only_ms")), "|", f(pg), "|",
          f(pg / tm if pg and tm else None))
PY
cd "$OUT" && tar -czf /tmp/all.tar.gz . && rm -rf ./* && mv /tmp/all.tar.gz "$OUT/all.tar.gz"
