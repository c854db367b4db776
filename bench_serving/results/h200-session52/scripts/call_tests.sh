# Session 52, call 4: the whole GPU test file on main (tests/test_hopper_gpu.py), which no call had
# run since session 43 (sessions 47-52 ran the quick subset on experiments only). Every kernel it
# needs was built on the CPU machine (.gpu-p/tlc52e.tar.xz: the 378 entries that gpu_prebuild.py --heads 2/8 --block-v 64,128 looks up). Errors against session
# 43's record of the same kernels.
t0=$SECONDS
source bench_serving/results/h200-session26/scripts/common.sh || exit 1
whole_test_file main 420
echo "call $((SECONDS - t0)) s"
