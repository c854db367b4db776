# Session 58: the whole GPU test file on the tree (kkt_solve without its o_s clear, its partial chunk
# storing only Aβ's lower blocks), every call with Aβ's buffer NaN-filled first (the tests'
# QLA_ABETA_POISON), errors against session 43's record of main's kernels.
# Kernels: .gpu-p/tlc58t.tar.xz (build_tests_kernels.sh). Carry .gpu and that tar.
# Begin with `source .gpu/prelude.sh && `.
t0=$SECONDS
source bench_serving/results/h200-session26/scripts/common.sh || exit 1
whole_test_file tree 420
echo "call $((SECONDS - t0)) s"
