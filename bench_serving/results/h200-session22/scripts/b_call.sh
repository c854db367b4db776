#!/bin/bash
# Session 22 call B: vLLM's default (FlashInfer) paired against qla-serve at the TP-8 rank shape
# (32K and the streams, never measured there), then the CP sweep of partition counts that fill whole
# waves (28672+4096, V-block 128), the rule's fit on it, and the host profile on the H200 host.
source .gpu-vllm-s/prelude.sh || exit 1
export TILELANG_DEFAULT_TARGET=nvidia/nvidia-h100 FLA_FLASH_QLA=0 QLA_WARMUP=0
t0=$SECONDS
if [ ! -f .work/s22-setup.done ]; then
  mkdir -p "$TILELANG_CACHE_DIR" && tar -xJf .work/s22/tlcache.tar.xz -C "$TILELANG_CACHE_DIR" && touch .work/s22-setup.done
fi
python3 -m pip install -q --no-deps --no-build-isolation -e . > "$OUT/pip.log" 2>&1
echo "setup $((SECONDS - t0)) s"
PRESET=h200 SHAPES=tp8rank BACKENDS=paired DEADLINE=$(( ${SERVE_S:-390} - (SECONDS - t0) )) RESULTS=$PWD/.work/bench-h200 OUT=$OUT/m \
  bash bench_serving/run_h200.sh --workloads ${WORKLOADS:-prompt-32k-c1,mixed-c4,mixed-c16,prefix-c16} >> "$OUT/m.log" 2>&1
echo "paired: rc=$? $((SECONDS - t0)) s"
for f in $OUT/m/*/summary.md; do [ -f $f ] && echo "== $f" && sed -n '/## Paired/,/^## Same/p' $f | head -24; done
grep -h "healthy after\|Traceback\|Error" "$OUT/m.log" | tail -8
mkdir -p $OUT/k
left=$(( ${CALL_S:-575} - (SECONDS - t0) ))
QLA_CP_TAIL=1 timeout -k 10 $(( left - 40 )) python3 bench_serving/kernels.py --cp-sweep --heads 2/8,4/16,8/32,16/32 \
  --mixes 28672+4096 --cp-parts 3,4,6,7,8,12,14,16 --cp-block-v 128 --out $OUT/k/sweep > $OUT/k/sweep.log 2>&1
echo "sweep: rc=$? $((SECONDS - t0)) s"; grep "bv=128 P=" $OUT/k/sweep.log | cut -c1-160
mkdir -p .work/s22-dev
python3 -m qla_serve.kernels.hopper.cp fit $OUT/k/sweep/cp_sweep.json > $OUT/k/fit.txt 2>&1; tail -4 $OUT/k/fit.txt
grep -q "^any_count = True" $OUT/k/fit.txt && echo 1 > .work/s22-dev/any_count || echo 0 > .work/s22-dev/any_count
left=$(( ${CALL_S:-575} - (SECONDS - t0) ))
[ $left -gt 30 ] && timeout $(( left - 10 )) python3 bench_serving/host_profile.py --heads 16/32,2/8 \
  --mixes 1x32768,1x8192,8192x4,256x1+4096,28672+4096 --out $OUT/k/host_profile.json > $OUT/k/host_profile.txt 2>&1
echo "host_profile: rc=$? $((SECONDS - t0)) s"; tail -14 $OUT/k/host_profile.txt | cut -c1-200
(cd "$OUT" && tar -czf k.tar.gz k && rm -rf k)
