# Session 64: issue 3's whole table (all six head configs × twelve mixes; issue 4's sixteen rows among
# them) on an H200 in ONE call, QLA / FlashQLA / FLA each in its own process, none of them compiling:
# carry .gpu, .gpu-p/tlc63b.tar.xz (QLA's 90 table kernels) and .gpu-p/tlcfq013.tar.xz (FlashQLA's 45,
# bench_serving/prebuild_flashqla.py), tree slimmed (gpu_slim_tree.sh out h200-session53/scripts
# h200-session64/scripts). On the H100 the six heads took 187 + 152 s in two calls. Any other GPU
# returns at once (ANY_GPU=1 runs it anyway). Begin with `source .gpu/prelude.sh && `.
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)
echo "GPU: $name"
[[ "$name" == *H200* ]] || [ -n "${ANY_GPU:-}" ] || { echo "not an H200: nothing to do"; exit 0; }
TABLE_HEADS=${TABLE_HEADS:-16/32,2/8,8/32,16/64,16/48,4/16} CALL_END=${CALL_END:-570} \
  bash bench_serving/results/h200-session53/scripts/call_table.sh
