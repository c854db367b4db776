# Session 52, call 2: where main's kkt_solve spends its time, by removing one part at a time
# (timing only: these files' outputs are wrong, so no tests). Labels: M = main without the merges
# (steps 2 and 3), D = also without the operand scatters (L's and X_II's: only the diagonal blocks
# reach Aβ), N = main without the forward substitution (X_II = I, everything else kept). The row's
# qla_kkt_only_gpu_ms is kkt_solve alone. Kernels: .gpu-p/tlc52.tar.xz + tlc52b.tar.xz (the ablations');
# their files: carry .work/ab after scripts/kernel_files.sh.
t0=$SECONDS
source bench_serving/results/h200-session26/scripts/common.sh || exit 1
E=.work/ab
AB_TESTS=0 AB_PREBUILD=0 AB_BLOCK_V=plan AB_HEADS=16/64,16/32 AB_MIXES=1x32768,8192x4 AB_DEADLINE=${AB_DEADLINE:-240} \
  bash bench_serving/kernel_ab.sh $OUT/ab M=$E/kkt_solve_abl_nomerge.py D=$E/kkt_solve_abl_diagonly.py \
  N=$E/kkt_solve_abl_nosolve.py > $OUT/ab.log 2>&1
grep "^\[ab\]" $OUT/ab.log
python3 bench_serving/results/h200-session52/scripts/kkt_only.py $OUT/ab tree M D N
compiled_here
finish
(cd $OUT && find . -type f ! -name all.tar.gz ! -name gpu.txt ! -name ab.md -delete)
echo "call $((SECONDS - t0)) s"
