# Session 58: the whole GPU test file on the tree (kkt_solve without its o_s clear, its partial chunk
# storing only Aβ's lower blocks), every call with Aβ's buffer NaN-filled first (the tests'
# QLA_ABETA_POISON), errors against session 43's record of main's kernels.
# Kernels: .gpu-p/tlc58t.tar.xz (build_tests_kernels.sh). Carry .gpu and that tar.
# Begin with `source .gpu/prelude.sh && `.
t0=$SECONDS
source bench_serving/results/h200-session26/scripts/common.sh || exit 1
TESTS_LOG=tests-tree gpu_tests ${TESTS_S:-420}
errs_vs_main tests-tree; cp $OUT/err-compare.txt $OUT/err-compare-tree.txt
compiled_here
finish
(cd $OUT && find . -type f ! -name all.tar.gz ! -name 'err-compare-*.txt' ! -name gpu.txt ! -name tests-tree.log -delete)
echo "call $((SECONDS - t0)) s"
