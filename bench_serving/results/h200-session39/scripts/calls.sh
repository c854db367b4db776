# Session 39's calls as run (each lease began with the runbook's uploads U1, U2; the first call
# after them began `cat .gpu/part0 .gpu/part1 > .gpu/site.tar.xz && rm .gpu/part0 .gpu/part1 &&
# cp .gpu/tlc3*.tar.xz .gpu-p/` and carried .gpu-p/tlc34.tar.xz and .gpu-p/tlc38.tar.xz). Not meant
# to run as one script.
# lease 1
SWEEP_S=420 bash bench_serving/results/h200-session39/scripts/a_cp_short_sweep.sh                     # A  -> a-cp-short/
SWEEP_S=420 bash bench_serving/results/h200-session39/scripts/a_cp_short_sweep.sh                     # A2 -> a2-cp-short/
# lease 2 (interim rule: min_seq_chunks 48, min_chunks 8, no rider charge; c1e990c)
TESTS_S=380 bash bench_serving/results/h200-session37/scripts/b_tests.sh                              # -> c-tests-first/
HEADS=2/8,4/16,8/32 CALL_S=430 AGREE_S=50 bash bench_serving/results/h200-session36/scripts/c_table.sh     # -> table-b/
HEADS=16/32,16/64,16/48 CALL_S=440 AGREE_S=60 bash bench_serving/results/h200-session36/scripts/c_table.sh # -> table-c/
# lease 3 (final rule: min_chunks 16, rider_us 0.07)
SWEEP_S=200 TABLE_S=200 bash bench_serving/results/h200-session39/scripts/b_riders.sh                 # -> b-riders/
TESTS_S=330 bash bench_serving/results/h200-session37/scripts/b_tests.sh                              # -> c-tests/
# lease 4 (branch exp/cp-riders-from-pool at 7b5e75e; carried .gpu-p/tlc39.tar.xz too: its 147
# phase-3 and combine kernels, built by `gpu_prebuild.py --processes 2` on the CPU machine, 1,310 s)
TESTS_S=110 SWEEP_S=130 bash bench_serving/results/h200-session39/scripts/d_riders_pool.sh            # -> d-riders-pool/
# then, on the CPU machine: python bench_serving/results/h200-session39/merge_table.py     -> table/
#                           python bench_serving/results/h200-session39/eval_cp_short.py   -> eval_cp_short.txt
