# SUPERSEDED: use bench_serving/results/h200-session49/scripts/call_owg.sh (the form is on main since
# session 49; the branch and the caches this script names were not kept).
# Session 48: run from the branch exp/o-warpgroup. QLA_O_WG=1 takes the output off the consumers'
# chain: they hand X's bf16 copy and Uᵀ to WG_P through shared memory, and WG_P makes
# O = scale · e^γ ⊙ Q Xbᵀ + P U (fused_fwd's o_wg). QLA_O_WG=2 also stores those hand-offs under the
# consumers' X Kᵀ and update, issued without their wait (o_wg_async). Off, every kernel is main's.
# Carry .gpu-p/tlc44…46 (main's kernels) and .gpu-p/tlc48o.tar.xz (both modes' walks of the tests'
# variants and of 16/32, 16/64, 2/8, both V-blocks, built on the CPU machine).
#   MODE=ab (default): a quick subset of the GPU tests in each mode (a wrong hand-off or a hang shows
#     here, and then that mode is not timed), then kernel_ab.sh: the tree (switch off) against O
#     (mode 1) and A (mode 2), the same files, AB_HEADS × AB_MIXES at AB_BLOCK_V, each label in its
#     own process, with the SM clock and power sampled beside it (smi.csv).
#   MODE=tests: the whole GPU test file in mode ${OWG:-1}, errors against session 43's record.
t0=$SECONDS
source bench_serving/results/h200-session26/scripts/common.sh || exit 1
echo "setup $((SECONDS - t0)) s"
if [ "${MODE:-ab}" = tests ]; then
  QLA_O_WG=${OWG:-1} TESTS_LOG=tests-owg${OWG:-1} gpu_tests ${TESTS_S:-420}
  errs_vs_main tests-owg${OWG:-1}
else
  labels=(); envs=""
  for m in 1 2; do
    QLA_O_WG=$m TESTS_LOG=tests-owg$m-quick TEST_K="${TEST_K:-$QUICK_K}" gpu_tests ${TESTS_S:-90}
    if [ $? -eq 0 ]; then
      l=$([ $m = 1 ] && echo O || echo A); labels+=("$l=kernels/hopper/fused_fwd.py"); envs="$envs $l:QLA_O_WG=$m"
    else
      echo "mode $m: quick tests did not pass, not timed"
    fi
    errs_vs_main tests-owg$m-quick; cp $OUT/err-compare.txt $OUT/err-compare-owg$m.txt
  done
  if [ ${#labels[@]} -eq 0 ]; then compiled_here; finish; exit 0; fi
  nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_event_reasons.active \
    --format=csv -lms 250 > $OUT/smi.csv 2>&1 &
  SMI=$!
  AB_TESTS=0 AB_PREBUILD=0 AB_BLOCK_V="${AB_BLOCK_V:-plan}" AB_LABEL_ENV="${envs# }" AB_HEADS=${AB_HEADS:-16/64,16/32,2/8} \
    AB_MIXES=${AB_MIXES:-1x32768,8192x4,16384+16384,1024x8} AB_DEADLINE=$(( ${AB_END:-500} - (SECONDS - t0) )) \
    bash bench_serving/kernel_ab.sh $OUT/ab "${labels[@]}" > $OUT/ab.log 2>&1
  kill $SMI
  echo "ab $((SECONDS - t0)) s"; grep "^\[ab\]" $OUT/ab.log; cat $OUT/ab/ab.md 2>/dev/null | head -40
fi
compiled_here
finish
