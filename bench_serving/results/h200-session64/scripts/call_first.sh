# Session 64, the lease's first call, for whichever GPU comes. Carry .gpu, .gpu-p/tlcfq013.tar.xz (FlashQLA
# 0.1.3's forward kernels for all six heads, built on the CPU machine by bench_serving/prebuild_flashqla.py) and .gpu-p/tlc63b.tar.xz (the
# table's 90 kernels on main since session 63), tree slimmed (gpu_slim_tree.sh out h200-session53/scripts
# h200-session64/scripts). Begin with `source .gpu/prelude.sh && `.
# - H200 (none lent since session 47): issue 3's table, FIRST_HEADS (default 16/32, 2/8 and 8/32: issue 4's
#   roofline row and its fewest-heads row first) with FlashQLA and FLA, the rest in the next call.
# - H100: issue 3's short-item rows at 16/64 and 16/48 against FlashQLA in the same call (session 62
#   had them at 0.752 and 0.755 before session 63's paired state store; 16/32 is 0.731 since).
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)
echo "GPU: $name"
if [[ "$name" == *H200* ]]; then
  TABLE_HEADS=${FIRST_HEADS:-16/32,2/8,8/32} bash bench_serving/results/h200-session53/scripts/call_table.sh
else
  TABLE_HEADS=16/64,16/48 TABLE_MIXES=64x128,16x512,256x1+4096,1024x8 \
    bash bench_serving/results/h200-session53/scripts/call_table.sh
fi
