# Session 53, call 3: the whole GPU test file on the tree (Aβ in panels), every call with Aβ's buffer
# NaN-filled first (the tests' QLA_ABETA_POISON), errors against session 43's record of main's
# kernels; before it, the poisoning shown to catch a walk that reads Aβ's unwritten blocks: label X
# = the tree's kkt_solve with main's walk (which loads whole 64×64 tiles), quick tests, expected to
# FAIL. Kernels: .gpu-p/tlc53t.tar.xz (built on the CPU machine). Carry .gpu, that tar, .work/ab.
t0=$SECONDS
source bench_serving/results/h200-session26/scripts/common.sh || exit 1
source bench_serving/results/h200-session53/scripts/ab_labels.sh
AB_TESTS=1 AB_TEST_LABELS=X AB_TEST_K="$QUICK_K" AB_BLOCK_V="" AB_DEADLINE=${MUT_S:-150} \
  bash bench_serving/kernel_ab.sh $OUT/mut X=$X > $OUT/mut.log 2>&1
echo "mutation X (expected to fail): $(grep '^\[ab\]' $OUT/mut.log)"
grep -E "^FAILED" $OUT/mut/tests-X.log | cut -c1-160 | head -10
whole_test_file tree 400
echo "call $((SECONDS - t0)) s"
