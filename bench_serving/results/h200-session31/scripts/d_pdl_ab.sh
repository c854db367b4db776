# Prepared in session 31, not run: programmatic dependent launch (PDL) between kkt_solve and the walk.
# pdl  = the walk (phase 0, both forms) waits for kkt_solve's grid (griddepcontrol.wait) only in the
#        two loader warps that read γ and Aβ, so TileLang launches it with programmatic stream
#        serialization: its CTAs start, read their tables, load their start states (persistent form)
#        and q/k/v while kkt_solve's last CTAs finish (kkt_solve triggers at its exit).
# pdlt = pdl + kkt_solve triggers at its top (the walk's CTAs may take SMs as kkt's last wave drains).
# Expected: a few µs a call (the walk's ramp and start-state loads), i.e. the short rows (2/8 1024×8,
# 16×512, 64×128 at ~50-70 µs of GPU time; 0.83-0.87 of FlashQLA). 1. the alternatives' GPU tests
# (oracle, walk forms, in-kernel l2norm, gate inputs, CUDA-graph replay); 2. kernel_ab.sh timing.
# Carry: .gpu-p/tlc26, tlc28, tlcab, tlc30b, tlc31p (.tar.xz: the PDL kernels), .work/ab.
t0=$SECONDS
source bench_serving/results/h200-session26/scripts/common.sh || exit 1
echo "setup $((SECONDS - t0)) s"
AB_BLOCK_V= AB_DEADLINE=${TESTS_S:-220} \
  AB_TEST_K="${TEST_K:-test_matches_oracle or test_walk_forms or in_kernel or gate_inputs or test_cuda_graph_replay}" \
  bash bench_serving/kernel_ab.sh $OUT/tests pdl=.work/ab/fused_fwd_pdl.py pdlt=.work/ab/fused_fwd_pdl.py+.work/ab/kkt_solve_trig.py
echo "tests $((SECONDS - t0)) s"; for l in pdl pdlt; do echo "$l: $(grep -E "passed|failed" $OUT/tests/tests-$l.log | tail -n 1)"; done
AB_TESTS=0 AB_BLOCK_V=plan AB_HEADS=${HEADS:-2/8,16/32,8/32,16/48} AB_MIXES=${MIXES:-1024x8,16x512,64x128,8192x4,1x2048} \
  AB_DEADLINE=${AB_S:-260} bash bench_serving/kernel_ab.sh $OUT/ab pdl=.work/ab/fused_fwd_pdl.py \
  pdlt=.work/ab/fused_fwd_pdl.py+.work/ab/kkt_solve_trig.py > /dev/null
echo "ab $((SECONDS - t0)) s"; cat $OUT/ab/ab.md 2>/dev/null | head -40
finish
