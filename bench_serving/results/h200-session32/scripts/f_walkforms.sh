# Session 32 (run as one inline command, kept here): the walk's two forms on mixes with few long
# sequences beside many short ones (runbook item 4, persistent_pays). kernels.py times the plan's
# form and the other one in the same process (qla_walk / qla_other_walk). Note: "8192*2" and
# "4096*2" are COUNT*LENGTH terms, i.e. 8192 (4096) sequences of 2 tokens — not the two 8192-token
# sequences that were meant; those rows are kept as they ran. Carry: .gpu-p/tlc26, tlc28, tlcab, tlc30b.
source bench_serving/results/h200-session26/scripts/common.sh >/dev/null 2>&1; t0=$SECONDS
timeout 400 python3 bench_serving/kernels.py --backends qla --heads 16/32,2/8,8/32 \
  --mixes "16384+64*16,8192*2+32*32,4096*2+16*64,7000+600+300+200+92,256x1+4096,2048+16*128" \
  --no-accuracy --no-agreement --budget-s 330 --out $OUT/walkforms > $OUT/walkforms.log 2>&1
echo "rc=$? $((SECONDS-t0)) s"
finish
