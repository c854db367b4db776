# Session 33, call C: U₀ᵀ = Vᵀ Aβᵀ made by WG_P a chunk ahead (off the consumers' chain) and left
# in bf16 in place of each consumer's V tile, in the order of the consumers' Uᵀ fragment
# (.work/ab/fused_fwd_u0.py, label u0; exp/walk-u0-in-wgp.patch): the consumers load it into Uᵀ's
# accumulator instead of running a synchronous 64×64×64 GEMM per chunk (FLA also keeps U₀ in bf16).
# 1. u0's GPU tests (walk forms, oracle cases without CP, CUDA graph); 2. kernels.py --backends qla
# per label, phase-0 rows only (the CP kernels were not prebuilt). Carry: .gpu-p/tlc26, tlc28,
# tlcab, tlc30b (the checkout's kernels), tlc33c (u0's phase-0 walks: built on the CPU machine by a
# copy of gpu_prebuild.py mapping hopper.fwd_kernel(var, persistent=True/False) over its variants
# instead of hopper.build_variant), .work/ab (fused_fwd_u0.py = the checkout's fused_fwd.py with
# exp/walk-u0-in-wgp.patch applied).
t0=$SECONDS
source bench_serving/results/h200-session26/scripts/common.sh || exit 1
echo "setup $((SECONDS - t0)) s"
AB_BLOCK_V= AB_DEADLINE=${TESTS_S:-120} \
  AB_TEST_K="${TEST_K:-(test_walk_forms or test_matches_oracle or test_cuda_graph_replay) and not 32k and not cp}" \
  bash bench_serving/kernel_ab.sh $OUT/tests u0=.work/ab/fused_fwd_u0.py
echo "tests $((SECONDS - t0)) s: $(grep -E "passed|failed" $OUT/tests/tests-u0.log | tail -n 1)"
grep -E "^(FAILED|ERROR)" $OUT/tests/tests-u0.log | cut -c1-200 | head -20
# the bench heads' CP kernels for u0 (not prebuilt), 16 cores, so the timed runs only load
AB_BUILD_ONLY=1 AB_SKIP_TREE=1 AB_TESTS=0 AB_PROCESSES=16 AB_HEADS=${HEADS:-16/32,16/64} \
  bash bench_serving/kernel_ab.sh $OUT/build u0=.work/ab/fused_fwd_u0.py
echo "build $((SECONDS - t0)) s"
AB_TESTS=0 AB_BLOCK_V=plan AB_HEADS=${HEADS:-16/32,16/64} AB_MIXES=${MIXES:-16x512,1024x8,64x128,8192x4} \
  AB_DEADLINE=${AB_S:-200} bash bench_serving/kernel_ab.sh $OUT/ab u0=.work/ab/fused_fwd_u0.py > /dev/null
echo "ab $((SECONDS - t0)) s"; cat $OUT/ab/ab.md 2>/dev/null | head -30
finish
