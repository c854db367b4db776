# Session 32: PDL between kkt_solve and the walk, through the checkout's QLA_PDL (0 off, 1 the walk's
# γ/Aβ loaders wait for kkt_solve's grid, 2 as 1 and kkt_solve signals at its start). Session 31's
# file-replacement A/B (d_pdl_ab.sh) could not run against this checkout (its hopper/__init__.py
# passes the new pdl argument). 1. GPU tests under QLA_PDL=1 and 2; 2. kernels.py --backends qla,
# one process per mode, same rows; ab.md = ratios to mode 0.
# Needs exp/qla-pdl.patch applied to the checkout (QLA_PDL was not kept: no measurable gain).
# Carry: .gpu-p/tlc26, tlc28, tlcab, tlc30b, tlc31p (.tar.xz: the PDL kernels).
t0=$SECONDS
source bench_serving/results/h200-session26/scripts/common.sh || exit 1
K="${TEST_K:-test_matches_oracle or test_walk_forms or in_kernel or gate_inputs or test_cuda_graph_replay}"
for m in 1 2; do
  QLA_PDL=$m QLA_ERR_LOG=$OUT/errors-pdl$m.jsonl timeout -k 5 ${TESTS_S:-90} python3 -m pytest -m gpu -p no:cacheprovider \
    -rA -k "$K" tests/test_hopper_gpu.py > $OUT/tests-pdl$m.log 2>&1
  echo "tests QLA_PDL=$m rc=$? $((SECONDS - t0)) s: $(tail -n 1 $OUT/tests-pdl$m.log)"
  grep -E "^(FAILED|ERROR)" $OUT/tests-pdl$m.log | cut -c1-300 | head -n 5
done
mkdir -p $OUT/ab
for m in ${MODES:-0 1 2}; do
  QLA_PDL=$m timeout -k 5 $(( ${RUN_S:-100} + 15 )) python3 bench_serving/kernels.py --backends qla \
    --heads ${HEADS:-2/8,16/32} --mixes ${MIXES:-1024x8,16x512,64x128,8192x4} --budget-s ${RUN_S:-100} \
    --out $OUT/ab/pdl$m-bvplan > $OUT/ab/pdl$m.log 2>&1 || true
  echo "QLA_PDL=$m timed $((SECONDS - t0)) s: $(grep -c qla_ms $OUT/ab/pdl$m-bvplan/kernels.json 2>/dev/null) rows"
done
python3 bench_serving/ab_table.py $OUT/ab pdl0-bvplan > $OUT/ab.md; cat $OUT/ab.md | head -n 40
finish
