# Session 56, call A (short; it also carries .gpu and .gpu-fi's first part up for call_fi.sh):
# kernel_bench.accuracy() is seeded since session 55, so two runs in one process must print
# identical errors (they came from the global generator before).
source bench_serving/results/h200-session26/scripts/common.sh > $OUT/common.log 2>&1 || exit 1
cd bench_serving && python3 - <<'PY' 2>&1 | tee $OUT/acc_check.txt
import kernel_bench as kb
a = kb.accuracy(backends=("qla",)); b = kb.accuracy(backends=("qla",))
print("run1", a); print("run2", b); print("identical:", a == b)
PY
