# Session 31, call A: 1. where the kernels.py process's extra host time comes from (session 30's
# d_host_diag.sh, plus launch cost before/after a torch.profiler session in one process: gpu_ms()
# profiles every row, so every later row's serving timing would pay any overhead the profiler
# leaves behind); 2. the whole GPU test file at session 30's kkt_solve (its CP cases not rerun since).
# Carry: .gpu-p/tlc26, tlc28, tlcab, tlc30b (.tar.xz).
t0=$SECONDS
source bench_serving/results/h200-session26/scripts/common.sh || exit 1
echo "setup $((SECONDS - t0)) s"
for teardown in unset 1; do
[ $teardown = 1 ] && export TEARDOWN_CUPTI=1
echo "TEARDOWN_CUPTI=$teardown" >> $OUT/profiler_launch.log
python3 - >> $OUT/profiler_launch.log 2>&1 <<'PY'
import time, torch
from torch.profiler import ProfilerActivity, profile
x = torch.ones(1024, device="cuda")
def launch_us(n=2000):
    best = 1e9
    for _ in range(5):
        torch.cuda.synchronize(); t = time.perf_counter()
        for _ in range(n):
            x.add_(1.0)
        best = min(best, (time.perf_counter() - t) / n * 1e6)
    torch.cuda.synchronize(); return best
print("before profiler: %.2f us per launch" % launch_us())
with profile(activities=[ProfilerActivity.CUDA]):
    for _ in range(10): x.add_(1.0)
    torch.cuda.synchronize()
print("after one profiler session: %.2f us per launch" % launch_us())
PY
done; unset TEARDOWN_CUPTI
cat $OUT/profiler_launch.log
python3 bench_serving/host_profile.py --heads 16/32 --mixes 1x8192,16x512 > $OUT/host_profile.log 2>&1
echo "host_profile $((SECONDS - t0)) s"; grep '^{' $OUT/host_profile.log | cut -c1-220
for run in 1x8192,16x512:0 1x32768,1x16384,1x8192,16x512:0 1x32768,1x16384,1x8192,16x512:1; do
  mixes=${run%:*}; td=${run#*:}   # session 30's d_host_diag.sh, then its second run with TEARDOWN_CUPTI=1
  if [ $td = 1 ]; then export TEARDOWN_CUPTI=1; mixes_out=$mixes-teardown; else unset TEARDOWN_CUPTI; mixes_out=$mixes; fi
  python3 bench_serving/kernels.py --backends qla --heads 16/32 --mixes $mixes --no-prewarm --no-accuracy \
    --no-agreement --out $OUT/k-$mixes_out > $OUT/k-$mixes_out.log 2>&1
  echo "kernels.py $mixes_out $((SECONDS - t0)) s"
  python3 -c "import json,sys; [print(r['mix'], round(r['qla_serving_ms'],3), round(r['qla_gpu_ms'],3), {k[9:]: round(v) for k, v in r.items() if k.startswith('qla_host') and v}) for r in json.load(open(sys.argv[1]))['rows']]" $OUT/k-$mixes_out/kernels.json
done; unset TEARDOWN_CUPTI
echo "diag $((SECONDS - t0)) s"
timeout -k 5 ${TESTS_S:-260} python3 -m pytest -m gpu -p no:cacheprovider -rA tests/test_hopper_gpu.py \
  > $OUT/tests.log 2>&1
echo "tests rc=$? $((SECONDS - t0)) s: $(tail -n 1 $OUT/tests.log)"
grep -E "^(FAILED|ERROR)" $OUT/tests.log | cut -c1-200
finish
