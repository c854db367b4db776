# Session 38, calls B–E as run (after the uploads U1, U2 of the runbook; B's command began with
# `cat .gpu/part0 .gpu/part1 > .gpu/site.tar.xz && rm .gpu/part0 .gpu/part1 && cp .gpu/tlc3*.tar.xz .gpu-p/`
# and carried .gpu-p/tlc34.tar.xz and .gpu-p/tlc38.tar.xz, the split kkt_solve forms built on the CPU
# machine by `bench_serving/gpu_prebuild.py --processes 2`). Not meant to run as one script.
TESTS_S=380 bash bench_serving/results/h200-session37/scripts/b_tests.sh                          # B
HEADS=2/8,4/16,8/32 CALL_S=430 AGREE_S=50 bash bench_serving/results/h200-session36/scripts/c_table.sh      # C
HEADS=16/32,16/64,16/48 CALL_S=440 AGREE_S=60 bash bench_serving/results/h200-session36/scripts/c_table.sh  # D
HEADS=2/8 CALL_S=220 AGREE_S=30 bash bench_serving/results/h200-session36/scripts/c_table.sh                # E
