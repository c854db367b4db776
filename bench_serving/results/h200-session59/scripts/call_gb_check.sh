# Session 59: the GVA-3 GPU test (gva3-fp32-kv-g3: 2 key heads, 6 value heads, so kkt_solve's G = 3)
# on the tree (kkt_solve with g and β padded to whole rounds of its threads: ../../h200-session58/kkt_solve_gb.patch)
# and on Z (main's kkt_solve before it, .work/ab/kkt_solve_z.py), outputs NaN-poisoned first as in
# every GPU test; the two error records compared case by case (same math on the same g and β values:
# the errors must be bit-equal). Kernels: .gpu-p/tlc59g.tar.xz (the tree's) and .gpu-p/tlc59z.tar.xz
# (Z's). Carry .gpu and both tars; begin with `source .gpu/prelude.sh && `. ~1 min.
t0=$SECONDS
source bench_serving/results/h200-session26/scripts/common.sh || exit 1
AB_TESTS=1 AB_TEST_TREE=1 AB_TEST_LABELS="tree Z" AB_TEST_K=gva3 AB_PREBUILD=0 AB_BLOCK_V="" AB_DEADLINE=200 \
  bash bench_serving/kernel_ab.sh $OUT/ab Z=.work/ab/kkt_solve_z.py > $OUT/ab.log 2>&1
grep "^\[ab\]" $OUT/ab.log
python3 bench_serving/err_compare.py $OUT/ab/errors-tree.jsonl $OUT/ab/errors-Z.jsonl > $OUT/err-compare-tree-vs-Z.txt 2>&1
cat $OUT/err-compare-tree-vs-Z.txt
compiled_here
finish
(cd $OUT && find . -type f ! -name all.tar.gz ! -name 'err-compare-*' ! -name gpu.txt -delete)
echo "call $((SECONDS - t0)) s"
