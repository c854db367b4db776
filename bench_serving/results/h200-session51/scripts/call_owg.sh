# Session 51: session 49's lease plan for the output warpgroup (QLA_O_WG; h200-session49/scripts/
# call_owg.sh) in ONE call, since 809 s of device time were left: every kernel it needs was built on
# the CPU machine and travels as .gpu-p/tlc51.tar.xz (common.sh unpacks every .gpu-p/tlc*.tar.xz), so nothing compiles.
#   1. the quick GPU tests (common.sh's QUICK_K) in modes 1 and 2: a wrong hand-off or a hang shows here;
#   2. kernel_ab.sh: the tree (switch off) against O (mode 1) and A (mode 2), the modes that passed,
#      AB_HEADS × AB_MIXES at the plan's V-block, each label in its own process;
#   3. the whole GPU test file in the faster mode, if one is ≥ 3 % faster than the tree over the
#      A/B's rows (sum of qla_ms), errors against session 43's record of main's kernels.
# After this call the form left main: `git apply bench_serving/results/h200-session51/o-warpgroup.patch`
# first to run it again.
t0=$SECONDS
source bench_serving/results/h200-session26/scripts/common.sh || exit 1
echo "setup $((SECONDS - t0)) s"
END=${CALL_END:-520}
left() { echo $(( END - (SECONDS - t0) )); }
pass=()
for m in 1 2; do
  QLA_O_WG=$m TESTS_LOG=tests-owg$m-quick TEST_K="$QUICK_K" gpu_tests 75 && pass+=($m)
  errs_vs_main tests-owg$m-quick; cp $OUT/err-compare.txt $OUT/err-compare-owg$m.txt
done
echo "modes that passed: ${pass[*]}"
labels=(); envs=""
for m in "${pass[@]}"; do
  l=$([ $m = 1 ] && echo O || echo A); labels+=("$l=kernels/hopper/fused_fwd.py"); envs="$envs $l:QLA_O_WG=$m"
done
if [ ${#labels[@]} -gt 0 ]; then
  ab_s=$(( $(left) - ${FULL_TESTS_S:-250} )); [ $ab_s -lt ${AB_MIN_S:-150} ] && ab_s=${AB_MIN_S:-150}
  nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_event_reasons.active \
    --format=csv -lms 250 > $OUT/smi.csv 2>&1 &
  SMI=$!
  AB_TESTS=0 AB_PREBUILD=0 AB_BLOCK_V=plan AB_LABEL_ENV="${envs# }" AB_HEADS=${AB_HEADS:-16/64,16/32,2/8} \
    AB_MIXES=${AB_MIXES:-1x32768,16384+16384,8192x4,1024x8} AB_DEADLINE=$ab_s \
    bash bench_serving/kernel_ab.sh $OUT/ab "${labels[@]}" > $OUT/ab.log 2>&1
  kill $SMI
  echo "ab $((SECONDS - t0)) s"; grep "^\[ab\]" $OUT/ab.log; cat $OUT/ab/ab.md 2>/dev/null | head -20
  # the faster mode over the rows every label timed, if it beats the tree by 3 %
  win=$(python3 - "$OUT/ab" <<'PY'
import glob, json, os, sys
runs = {}
for p in glob.glob(os.path.join(sys.argv[1], "*-bvplan", "kernels.json")):
    rows = json.load(open(p))["rows"]
    runs[os.path.basename(os.path.dirname(p))[:-len("-bvplan")]] = {(r["heads"], r["mix"]): r.get("qla_ms") for r in rows}
if "tree" in runs:
    keys = [k for k in runs["tree"] if all(r.get(k) for r in runs.values())]
    total = {l: sum(r[k] for k in keys) for l, r in runs.items()}
    best = min((l for l in total if l != "tree"), key=total.get, default=None)
    print(f"sums over {len(keys)} rows: {total}", file=sys.stderr)
    if best and keys and total[best] <= 0.97 * total["tree"]:
        print({"O": 1, "A": 2}[best])
PY
)
  echo "faster mode: ${win:-none}"
  if [ -n "$win" ] && [ $(left) -gt 120 ]; then
    QLA_O_WG=$win TESTS_LOG=tests-owg$win gpu_tests $(( $(left) - 10 ))
    errs_vs_main tests-owg$win; cp $OUT/err-compare.txt $OUT/err-compare-owg$win-full.txt
  fi
fi
compiled_here
finish
(cd $OUT && find . -type f ! -name all.tar.gz ! -name 'err-compare-owg*' ! -name gpu.txt -delete)
echo "call $((SECONDS - t0)) s"
