# The kernels call_inverse.sh looks up, built on the CPU machine into TileLang's cache (session 54):
#   bash bench_serving/gpu_cache_subset.sh CACHE .gpu-p/tlc54i.tar.xz -- bash bench_serving/results/h200-session54/scripts/build_inverse_kernels.sh
# both kkt_solve inverse forms and the walk that makes Aβ itself (QLA_FUSED_ABETA=1) for the quick
# GPU tests and the bench's 16/64, 16/32, 2/8 (walks included), and kkt_inverse_ab.py's latency
# probe (H = 1, HV = 1 and 8, all heads in one CTA).
set -e
cd "$(dirname "$0")/../../../.."
export TILELANG_DEFAULT_TARGET=nvidia/nvidia-h100
PY=${PY:-.venv/bin/python}
$PY bench_serving/gpu_prebuild.py --processes 2 --heads 16/64,16/32,2/8 --test-configs 0,3,5,6,7,18
QLA_KKT_INVERSE=warp $PY bench_serving/gpu_prebuild.py --processes 2 --heads 16/64,16/32,2/8 --test-configs 0,3,5,6,7,18
QLA_FUSED_ABETA=1 $PY bench_serving/gpu_prebuild.py --processes 2 --heads 16/64,16/32,2/8 --test-configs 0,3,5,6,7,18
$PY - <<'PY'
import os
from qla_serve.kernels import hopper
for inv in ("tl", "warp"):
    os.environ[hopper.KKT_INVERSE_ENV] = inv
    for G in (1, 8):
        hopper.kkt_kernel(1, G, 128, "bfloat16", False, (128, G, G), G)
print("latency-probe kernels built")
PY
