# Session 49: the output warpgroup (fused_fwd's output_warpgroup, on main behind QLA_O_WG since this
# session; session 48 built it on a branch that a new checkout did not keep). QLA_O_WG=1: the
# consumers hand X's bf16 copy and Uᵀ to WG_P through shared memory and WG_P makes
# O = scale · e^γ ⊙ Q Xbᵀ + P U; QLA_O_WG=2 also stores those hand-offs under the consumers' Wᵀ Aβᵀ and
# update, issued without their wait. Unset, every kernel is the default walk's.
# Calls on one warm machine (it keeps .gpu-cache/ between calls that come within 30 s):
#   MODE=prep  builds every kernel the quick tests and the A/B need (16 processes; whatever a carried
#              .gpu-p/tlc*.tar.xz holds is not rebuilt), then the quick GPU tests (QUICK_K) in
#              modes 1 and 2: a wrong hand-off or a hang shows here. The modes that pass are written
#              to .gpu-cache/owg-pass for the next call; the kernels compiled here come back as
#              $OUT/tlc49-HHMMSS.tar.xz (carry them in .gpu-p/ to a later lease). ~5-6 min, estimated
#              with no cache carried; if the tests found no time, call MODE=prep again.
#   MODE=ab    kernel_ab.sh: the tree (switch off) against O (mode 1) and A (mode 2), the passing
#              ones, AB_HEADS × AB_MIXES at AB_BLOCK_V, each label in its own process, the SM clock
#              and power sampled beside it (smi.csv).                                        ~8 min
#   MODE=tests-build, then MODE=tests: the whole GPU test file's kernels in mode ${OWG:-1} (~5 min),
#              then the file, errors against session 43's record (~7 min).
#   MODE=table kernel_bench.py's table (TABLE_HEADS, default 16/64,16/32) in mode ${OWG:-1}, FlashQLA
#              and FLA in the same run (session 50).
t0=$SECONDS
source bench_serving/results/h200-session26/scripts/common.sh || exit 1
echo "setup $((SECONDS - t0)) s"
HEADS=${AB_HEADS:-16/64,16/32,2/8}
PASS=.gpu-cache/owg-pass
case "${MODE:-prep}" in
prep)
  # Builds first: mode 1's with every core (the quick tests' variants, QUICK_CONFIGS, and the
  # bench's; it also builds what the modes share: kkt_solve, CP phase 1, the combines), then mode 2's
  # and the default walk's bench kernels side by side. ~20 variants, some 250 kernels with no cache
  # (~2-3 min estimated, not measured). Each build stops in time for the tests; a second MODE=prep
  # call on the same warm machine finds what the first built and carries on.
  END=${PREP_END:-570}
  TLC=tlc49-$(date +%H%M%S).tar.xz      # this call's new kernels (a second call's are its own)
  left() { echo $(( END - (SECONDS - t0) )); }
  upto() { local t=$(( $(left) - $1 )); [ $t -gt 10 ] && echo $t || echo 10; }   # (timeout 0 would mean none)
  QLA_O_WG=1 timeout $(upto 240) python3 bench_serving/gpu_prebuild.py --processes 16 --heads $HEADS \
    --block-v 64,128 --test-configs $QUICK_CONFIGS > $OUT/build-1.log 2>&1
  echo "build 1 rc=$? $((SECONDS - t0)) s: $(tail -n 1 $OUT/build-1.log)"
  QLA_O_WG=2 timeout $(upto 200) python3 bench_serving/gpu_prebuild.py --processes 10 --heads $HEADS \
    --block-v 64,128 --test-configs $QUICK_CONFIGS > $OUT/build-2.log 2>&1 &
  timeout $(upto 200) python3 bench_serving/gpu_prebuild.py --processes 6 --no-tests --heads $HEADS \
    --block-v 64,128 > $OUT/build-0.log 2>&1 &
  wait
  echo "builds 2, 0: $((SECONDS - t0)) s: $(tail -qn 1 $OUT/build-2.log $OUT/build-0.log | tr '\n' ' ')"
  compiled_here
  (cd $TILELANG_CACHE_DIR && find 0.1.15/linux-x86_64/kernels -mindepth 1 -maxdepth 1 -newer $STAMP -print0 \
     | tar --null -T - -cJf $OUT/$TLC) && ls -la $OUT/$TLC
  # the quick GPU tests (8 cases) in each mode, if there is time for them
  : > $PASS
  for m in 1 2; do
    s=$(( $(left) - 15 )); [ $s -gt 100 ] && s=100
    if [ $s -lt 40 ]; then echo "mode $m: no time left for its quick tests (call MODE=prep again)"; continue; fi
    QLA_O_WG=$m TESTS_LOG=tests-owg$m-quick TEST_K="${TEST_K:-$QUICK_K}" gpu_tests $s && echo $m >> $PASS
    errs_vs_main tests-owg$m-quick; cp $OUT/err-compare.txt $OUT/err-compare-owg$m.txt
  done
  echo "modes that passed: $(cat $PASS | tr '\n' ' ')"
  compiled_here
  # at most 8 files come back: the kernels, the two error comparisons and one tar of the rest
  (cd $OUT && tar -czf all.tar.gz --exclude=all.tar.gz --exclude="$TLC" . \
     && find . -type f ! -name all.tar.gz ! -name "$TLC" ! -name 'err-compare-owg*' ! -name gpu.txt -delete)
  exit 0
  ;;
ab)
  labels=(); envs=""
  for m in $(cat $PASS 2>/dev/null); do
    l=$([ $m = 1 ] && echo O || echo A); labels+=("$l=kernels/hopper/fused_fwd.py"); envs="$envs $l:QLA_O_WG=$m"
  done
  if [ ${#labels[@]} -eq 0 ]; then echo "no mode passed its quick tests (or MODE=prep has not run here)"; finish; exit 0; fi
  nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_event_reasons.active \
    --format=csv -lms 250 > $OUT/smi.csv 2>&1 &
  SMI=$!
  AB_TESTS=0 AB_PREBUILD=0 AB_BLOCK_V="${AB_BLOCK_V:-plan}" AB_LABEL_ENV="${envs# }" AB_HEADS=$HEADS \
    AB_MIXES=${AB_MIXES:-1x32768,8192x4,16384+16384,1024x8} AB_DEADLINE=$(( ${AB_END:-560} - (SECONDS - t0) )) \
    bash bench_serving/kernel_ab.sh $OUT/ab "${labels[@]}" > $OUT/ab.log 2>&1
  kill $SMI
  echo "ab $((SECONDS - t0)) s"; grep "^\[ab\]" $OUT/ab.log; cat $OUT/ab/ab.md 2>/dev/null | head -40
  ;;
tests-build)
  # every kernel of the whole GPU test file in mode OWG (~400 with only prep's cache: ~5 min, estimated)
  QLA_O_WG=${OWG:-1} timeout ${BUILD_S:-540} python3 bench_serving/gpu_prebuild.py --processes 16 --heads 2/8 \
    --block-v 64,128 > $OUT/build-tests-owg${OWG:-1}.log 2>&1
  echo "build rc=$? $((SECONDS - t0)) s: $(tail -n 1 $OUT/build-tests-owg${OWG:-1}.log)"
  ;;
tests)
  QLA_O_WG=${OWG:-1} TESTS_LOG=tests-owg${OWG:-1} gpu_tests ${TESTS_S:-540}
  errs_vs_main tests-owg${OWG:-1}
  ;;
table)
  # (session 50) issue 3's and 4's rows with mode OWG on, against FlashQLA and FLA in the same run
  # (kernel_bench records QLA_O_WG in the JSON's versions)
  QLA_O_WG=${OWG:-1} python3 bench_serving/kernel_bench.py --heads ${TABLE_HEADS:-16/64,16/32} --isolate --no-prewarm \
    --backends qla,flashqla,fla --out $OUT/table --budget-s ${TABLE_S:-500} > $OUT/table.log 2>&1
  echo "table rc=$? $((SECONDS - t0)) s"; tail -n 30 $OUT/table/kernels.md 2>/dev/null
  ;;
esac
compiled_here
finish
