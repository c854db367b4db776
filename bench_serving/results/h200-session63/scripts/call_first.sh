# Session 63, first call: the GPU decides the order.
# - On an H200 (none lent since session 47): session 62's V-block sweep of the persistent walk, both
#   widths forced (its calls 3-4: the six heads' named rows, then the ad-hoc short-item mixes), which
#   decides whether the H200 gets a PERSISTENT_COST_US entry; then session 62's state-store pairs A/B.
# - On an H100: the pairs A/B alone (the sweep there is session 62's).
# Carry .gpu, .gpu-p/tlc59t.tar.xz, .gpu-p/tlc61b.tar.xz, .gpu-p/tlc62p.tar.xz and .work/ab, tree
# slimmed (gpu_slim_tree.sh out h200-session53/scripts h200-session58/scripts h200-session62/scripts
# h200-session63/scripts). Begin with `source .gpu/prelude.sh && `.
t0=$SECONDS
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)
echo "GPU: $name"
if [[ "$name" == *H200* ]]; then
  source bench_serving/results/h200-session26/scripts/common.sh || exit 1
  bash bench_serving/results/h200-session63/scripts/bv_sweep.sh
  compiled_here
  left=$(( ${CALL_END:-560} - (SECONDS - t0) ))
  [ $left -gt 150 ] || { finish; echo "no time for the pairs A/B"; exit 0; }
  AB_DEADLINE=$(( left - 60 )) bash bench_serving/results/h200-session62/scripts/call_pairs_ab.sh
else
  bash bench_serving/results/h200-session62/scripts/call_pairs_ab.sh
fi
echo "first call $((SECONDS - t0)) s"
