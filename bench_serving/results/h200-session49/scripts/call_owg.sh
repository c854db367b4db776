# Session 49: the output warpgroup (fused_fwd's output_warpgroup, on main behind QLA_O_WG since this
# session; session 48 built it on a branch that a new checkout did not keep). QLA_O_WG=1: the
# consumers hand X's bf16 copy and Uᵀ to WG_P through shared memory and WG_P makes
# O = scale · e^γ ⊙ Q Xbᵀ + P U; QLA_O_WG=2 also stores those hand-offs under the consumers' X Kᵀ and
# update, issued without their wait. Unset, every kernel is the default walk's.
# Calls on one warm machine (it keeps .gpu-cache/ between calls that come within 30 s):
#   MODE=prep  builds every kernel the quick tests and the A/B need (16 processes; whatever a carried
#              .gpu-p/tlc*.tar.xz holds is not rebuilt), then the quick GPU tests (QUICK_K) in
#              modes 1 and 2: a wrong hand-off or a hang shows here. The modes that pass are written
#              to .gpu-cache/owg-pass for the next call; the kernels compiled here come back as
#              $OUT/tlc49.tar.xz (carry it as .gpu-p/tlc49.tar.xz to a later lease).      ~6-8 min
#   MODE=ab    kernel_ab.sh: the tree (switch off) against O (mode 1) and A (mode 2), the passing
#              ones, AB_HEADS × AB_MIXES at AB_BLOCK_V, each label in its own process, the SM clock
#              and power sampled beside it (smi.csv).                                        ~8 min
#   MODE=tests the whole GPU test file in mode ${OWG:-1}, errors against session 43's record. ~7 min
t0=$SECONDS
source bench_serving/results/h200-session26/scripts/common.sh || exit 1
echo "setup $((SECONDS - t0)) s"
HEADS=${AB_HEADS:-16/64,16/32,2/8}
PASS=.gpu-cache/owg-pass
case "${MODE:-prep}" in
prep)
  # the default walk's kernels first (kkt_solve, CP phase 1 and the l2norm/gating passes are the
  # same in every mode), then the two modes' walks side by side
  timeout 300 python3 bench_serving/gpu_prebuild.py --processes 16 --heads $HEADS --block-v 64,128 > $OUT/build-0.log 2>&1
  echo "build 0 rc=$? $((SECONDS - t0)) s: $(tail -n 1 $OUT/build-0.log)"
  for m in 1 2; do
    QLA_O_WG=$m timeout 240 python3 bench_serving/gpu_prebuild.py --processes 8 --heads $HEADS --block-v 64,128 \
      > $OUT/build-$m.log 2>&1 &
  done
  wait
  echo "builds 1, 2: $((SECONDS - t0)) s: $(tail -qn 1 $OUT/build-1.log $OUT/build-2.log | tr '\n' ' ')"
  compiled_here
  (cd $TILELANG_CACHE_DIR && find 0.1.15/linux-x86_64/kernels -mindepth 1 -maxdepth 1 -newer $STAMP -print0 \
     | tar --null -T - -cJf $OUT/tlc49.tar.xz) && ls -la $OUT/tlc49.tar.xz
  : > $PASS
  for m in 1 2; do
    QLA_O_WG=$m TESTS_LOG=tests-owg$m-quick TEST_K="${TEST_K:-$QUICK_K}" gpu_tests ${TESTS_S:-100} && echo $m >> $PASS
    errs_vs_main tests-owg$m-quick; cp $OUT/err-compare.txt $OUT/err-compare-owg$m.txt
  done
  echo "modes that passed: $(cat $PASS | tr '\n' ' ')"
  compiled_here
  # at most 8 files come back: the kernels, the two error comparisons and one tar of the rest
  (cd $OUT && tar -czf all.tar.gz --exclude=all.tar.gz --exclude=tlc49.tar.xz . \
     && find . -type f ! -name all.tar.gz ! -name tlc49.tar.xz ! -name 'err-compare-owg*' ! -name gpu.txt -delete)
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
tests)
  QLA_O_WG=${OWG:-1} TESTS_LOG=tests-owg${OWG:-1} gpu_tests ${TESTS_S:-480}
  errs_vs_main tests-owg${OWG:-1}
  ;;
esac
compiled_here
finish
