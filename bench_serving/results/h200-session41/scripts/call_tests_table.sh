# Session 41, with exp/kkt-f16.patch applied to the checkout: the whole GPU test file (session 37's
# b_tests.sh, one process), then issue 3's table for HEADS (session 36's c_table.sh: QLA, FlashQLA,
# FLA, each in its own process). Carry .gpu-p/tlc40.tar.xz and .gpu-p/tlc41.tar.xz (the fp16
# kkt_solve for the heads call B's build did not cover).
S=bench_serving/results
[ "${SKIP_TESTS:-0}" = 1 ] || TESTS_S=${TESTS_S:-240} bash $S/h200-session37/scripts/b_tests.sh
mkdir -p $OUT/t && mv $OUT/* $OUT/t/ 2>/dev/null
CALL_S=${CALL_S:-330} bash $S/h200-session36/scripts/c_table.sh
