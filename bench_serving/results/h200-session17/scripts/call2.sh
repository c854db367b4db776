#!/bin/bash
# Session 17, calls 2 and 3 (same warm H200 as call 1). Issue 7's matrix (preset h200, full shape)
# with $BACKENDS, resumable in .work/bench-h200-gpu0. PYSPY=1: py-spy samples the first vLLM engine
# process this call starts (all threads, --idle, and a second recording of GIL holders only), to
# see where a GDN layer's host time goes in the server.
source .gpu-vllm-s/prelude.sh || exit 1
export TILELANG_DEFAULT_TARGET=nvidia/nvidia-h100 FLA_FLASH_QLA=0 QLA_WARMUP=0
t0=$SECONDS
python3 -m pip install -q --no-deps --no-build-isolation -e . > "$OUT/pip.log" 2>&1
[ -d .work/qwen3-next-80b-8l-e512 ] || python3 bench_serving/tiny_model.py .work/qwen3-next-80b-8l-e512 \
  --preset qwen3-next-80b-8l-e512 --no-weights > "$OUT/prep.log" 2>&1
echo "setup $((SECONDS - t0)) s"
if [ "${PYSPY:-0}" = 1 ]; then
  (
    # the engine process is the one holding the GPU (its title is set only with setproctitle)
    for i in $(seq 1 300); do
      pid=$(nvidia-smi --query-compute-apps=pid --format=csv,noheader 2>/dev/null | head -1 | tr -d ' ')
      [ -z "$pid" ] && pid=$(pgrep -f "VLLM::EngineCore" | head -1)
      [ -n "$pid" ] && break; sleep 1
    done
    ps -o pid,args -p "$pid" > "$OUT/pyspy-target.txt" 2>&1
    if [ -z "$pid" ]; then echo "no engine process" > "$OUT/pyspy.log"; exit 0; fi
    spy=.work/pyspy/bin/py-spy
    PYTHONPATH=.work/pyspy $spy record --pid "$pid" --nonblocking --idle --threads --rate 200 --format raw \
      --duration 500 -o "$OUT/pyspy-idle.txt" > "$OUT/pyspy.log" 2>&1 &
    PYTHONPATH=.work/pyspy $spy record --pid "$pid" --nonblocking --gil --threads --rate 200 --format raw \
      --duration 500 -o "$OUT/pyspy-gil.txt" >> "$OUT/pyspy.log" 2>&1 &
    wait
  ) &
fi
left=$(( ${CALL_S:-560} - (SECONDS - t0) ))
PRESET=h200 SHAPES=full BACKENDS=$BACKENDS DEADLINE=$left RESULTS=$PWD/.work/bench-h200-gpu0 OUT=$OUT/m \
  bash bench_serving/run_h200.sh > "$OUT/m.log" 2>&1
echo "matrix rc=$? $((SECONDS - t0)) s"
pkill -INT -f "py-spy record" 2>/dev/null; sleep 3
f=$OUT/m/full/summary.md
[ -f $f ] && sed -n '/| backend | workload | prefill steps/,/^$/p' $f
for x in pyspy-idle.txt pyspy-gil.txt; do [ -f "$OUT/$x" ] && gzip -f "$OUT/$x"; done
tail -n 5 "$OUT/pyspy.log" 2>/dev/null
