# Session 46 (prepared on the CPU machine, no device that session): run from the branch
# exp/fused-abeta. QLA_FUSED_ABETA=1 makes the walk's WG_P build each chunk's Aβ itself (kkt_solve's
# scheme, into the walk's Aβ buffer, one chunk ahead of the consumers), so that only γ is made before
# the walk (kkt_solve.build_gate_cumsum) and Aβ never goes through HBM. Off, every kernel is main's.
#   MODE=ab (default; ~560 s):
#     1. a quick subset of the GPU tests with the switch on (TESTS_S=110: plain walk at both V-blocks,
#        GVA 1/2/8, single tokens, a partial chunk, CP with tail starts): a wrong or hung fused walk
#        shows here, and then the fused walk is not timed (the call runs session 44's kkt-persist A/B
#        instead, when .work/ab/kkt_solve_persist.py is carried);
#     2. kernel_ab.sh: tree (main's kernels, the switch off) against F (the same files, switch on),
#        AB_HEADS × AB_MIXES at the plan's V-block and at V-block 64 (where WG_P has 160 registers and
#        no spill; at 128 it has 64 and spills 4 STL / ~46 LDL), each label in its own process; the
#        table's qla_ms ratios F/tree are the answer.
#   MODE=ncu (~300 s): ncu_walk.sh of the fused walk at 16/32 1×32768 with CP (issue 4's row): WG_P's
#     busy share and the consumers' wait on ab_ready, by role (h200-session42/exp/ncu_roles.py reads
#     the output walk's source page).
#   MODE=tests (~450 s): the whole GPU test file with the switch on (every prefill the tests run takes
#     the fused walk: plain, CP partials, CP output; the persistent form is off under the switch),
#     then its oracle errors against session 43's record of main (bench_serving/err_compare.py).
# Carry .gpu-p/tlc44.tar.xz, tlc45, tlc46 (main's kernels) and tlc47 (the fused walks and γ kernels of
# the tests' variants and the bench's 16/32, 16/64, 2/8, built on the CPU machine).
t0=$SECONDS
source bench_serving/results/h200-session26/scripts/common.sh || exit 1
ab() {   # NAME LABEL=FILE … : kernel_ab.sh into $OUT/NAME on AB_HEADS × AB_MIXES until AB_END s into the call
  local name=$1; shift
  AB_TESTS=0 AB_PREBUILD=0 AB_HEADS=${AB_HEADS:-16/32,16/64,2/8} AB_MIXES=${AB_MIXES:-1x32768,8192x4,1024x8,16x512} \
    AB_DEADLINE=$(( ${AB_END:-560} - (SECONDS - t0) )) bash bench_serving/kernel_ab.sh $OUT/$name "$@" > $OUT/$name.log 2>&1
  echo "$name $((SECONDS - t0)) s"; grep "^\[ab\]" $OUT/$name.log; cat $OUT/$name/ab.md 2>/dev/null | head -40
}
echo "setup $((SECONDS - t0)) s"
if [ "${MODE:-ab}" = tests ]; then
  QLA_FUSED_ABETA=1 TESTS_LOG=tests-fused gpu_tests ${TESTS_S:-420}
  errs_vs_main tests-fused
elif [ "${MODE:-ab}" = ncu ]; then
  QLA_FUSED_ABETA=1 QLA_CP=1 timeout -k 5 ${NCU_S:-480} bash bench_serving/ncu_walk.sh $OUT/ncu-fused 16/32 1x32768
else
  QLA_FUSED_ABETA=1 TESTS_LOG=tests-fused-quick \
    TEST_K="${TEST_K:-(gva1-fp32-vk-g30-bv128 or gva2-bf16-kv-g3-bv64 or gva8 or single-tokens or under-one-chunk or P8-tail) and not kkt-forms}" \
    gpu_tests ${TESTS_S:-110}
  if [ $? -ne 0 ]; then
    # A wrong or hung fused walk: nothing of it worth timing. The rest of the call goes to session
    # 44's A/B (its persistent kkt_solve as label P against the tree's, the switch off), when its
    # file is carried: .work/ab/kkt_solve_persist.py (git show exp/kkt-persist:kernels/hopper/kkt_solve.py).
    echo "fused quick tests did not pass: their A/B skipped"
    [ -f .work/ab/kkt_solve_persist.py ] && AB_BLOCK_V=plan ab ab-kkt P=.work/ab/kkt_solve_persist.py
    compiled_here; finish; exit 0
  fi
  AB_LABEL_ENV="F:QLA_FUSED_ABETA=1" AB_BLOCK_V="${AB_BLOCK_V:-plan 64}" ab ab F=kernels/hopper/fused_fwd.py
fi
compiled_here
finish
