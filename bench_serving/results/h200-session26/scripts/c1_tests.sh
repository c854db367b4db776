#!/bin/bash
# Session 26 call C1: the whole GPU test set (hopper + conv) with FlashQLA's JIT prewarmed beside
# it (its kernels land in the same TileLang cache, which comes back as $OUT/flashqla-cache.tar.xz for
# later calls); then the CP sweep of the 7000+600+300+200+92 rows (the 7000-token sequence is under
# min_seq_chunks: does a split pay there?).
t0=$SECONDS
source bench_serving/results/h200-session26/scripts/common.sh
echo "setup $((SECONDS - t0)) s"
ls $TILELANG_CACHE_DIR/0.1.15/linux-x86_64/kernels > $OUT/qla-cache-list.txt 2>/dev/null
( timeout 330 python3 -c "
import sys; sys.argv=['kernels.py']; sys.path.insert(0,'bench_serving')
import kernels
heads=[(16,32),(2,8),(16,64),(16,48),(8,32),(4,16)]
print('prewarm s', kernels.prewarm(heads, list(kernels.SEQLENS), timeout_s=320, jobs=8))
" > $OUT/fq_prewarm.log 2>&1 ) &
pw=$!
QLA_ERR_LOG=$OUT/errs.jsonl timeout -k 10 ${TEST_S:-320} python3 -m pytest -q -m gpu tests/test_hopper_gpu.py tests/test_conv.py -rs \
  -p no:cacheprovider > $OUT/gpu_tests.log 2>&1
echo "tests rc=$? $((SECONDS - t0)) s"; grep -E "passed|failed|error" $OUT/gpu_tests.log | tail -5
wait $pw; echo "prewarm done $((SECONDS - t0)) s"; tail -2 $OUT/fq_prewarm.log
(cd $TILELANG_CACHE_DIR/0.1.15/linux-x86_64/kernels && ls | grep -vxF -f $OUT/qla-cache-list.txt > $OUT/new-list.txt;
 tar -cJf $OUT/flashqla-cache.tar.xz -T $OUT/new-list.txt --transform 's,^,0.1.15/linux-x86_64/kernels/,' 2>/dev/null)
echo "new cache entries: $(wc -l < $OUT/new-list.txt), $(du -h $OUT/flashqla-cache.tar.xz | cut -f1)"
left=$(( ${CALL_S:-585} - (SECONDS - t0) ))
timeout -k 5 $(( left - 15 )) python3 bench_serving/kernels.py --cp-sweep --heads 16/32,8/32,4/16,2/8,16/48,16/64 \
  --mixes 7000+600+300+200+92,1x4096 --cp-parts 1,2,3,4,8 --cp-block-v 64,128 --out $OUT/sweep7000 \
  --budget-s $(( left - 30 )) > $OUT/sweep7000.log 2>&1
echo "sweep7000 rc=$? $((SECONDS - t0)) s"; grep -E "^\[cp-sweep\]" $OUT/sweep7000.log | tail -40 | cut -c1-160
finish
