#!/usr/bin/env bash
# Kernel A/B on one GPU: the checkout's walk kernel against alternative versions of
# kernels/hopper/fused_fwd.py (e.g. experiment branches), same inputs, same run. A FILE named
# kkt_solve*.py replaces kernels/hopper/kkt_solve.py instead; FILE+FILE replaces both.
#
#   bash bench_serving/kernel_ab.sh OUT LABEL=FILE [LABEL=FILE ...]      # "tree" = the checkout
#
# For every label (the checkout first, as "tree") this makes a copy of the package under
# OUT/site-<label> with that fused_fwd.py and runs with that copy first on PYTHONPATH (searched
# before the editable install's finder; the rest of PYTHONPATH is kept):
#   1. the GPU tests (tests/test_hopper_gpu.py, errors vs the fp64 oracle; AB_TESTS=0 skips; AB_TEST_K
#      selects cases with -k), for every alternative but not for "tree" (AB_TEST_TREE=1 adds it;
#      AB_TEST_LABELS="a b" limits them to those labels);
#   2. kernel_bench.py --backends qla on AB_HEADS × AB_MIXES, once per V-block in AB_BLOCK_V ("plan" = the
#      plan's choice), each run prebuilding its kernels in parallel first.
# The comparison is OUT/ab.md (bench_serving/ab_table.py: qla_ms per row, label and V-block, ratio
# to the checkout at the plan's V-block). An alternative file is taken from an untracked or carried path,
# since the device machine gets the working tree without git history:
#   git show exp/x:kernels/hopper/fused_fwd.py > .work/ab/x.py      # carry [".work/ab"]
# AB_LABEL_ENV="LABEL:VAR=VALUE ..." sets VAR for everything run in that label's copy (its tests,
# prebuild and timed runs): e.g. a label whose file is the checkout's own, run with an experiment's
# switch on (AB_LABEL_ENV="F:QLA_MY_SWITCH=1" ... F=kernels/hopper/fused_fwd.py; session 55 ran W and F so).
# AB_BUILD_ONLY=1 only compiles every label's bench kernels (and, unless AB_TESTS=0, the GPU tests'
# kernels of the alternatives) into TileLang's disk cache, AB_PROCESSES workers a label (default 8;
# AB_SKIP_TREE=1 leaves the checkout's to the caller; AB_TEST_CONFIGS=0,3,… builds only those
# TEST_CONFIGS entries' test kernels, gpu_prebuild.py --test-configs: a quick subset's): beside other
# builds, so that the timed runs later only load them.
# Env: AB_HEADS (16/32,2/8), AB_MIXES (1x32768,8192x4,1024x8,16x512), AB_BLOCK_V (plan 128: the
# plan's choice, then forced 128; set and empty: only the tests), AB_BASE (the ratios' reference
# run, default tree-bvplan),
# AB_BACKENDS (kernel_bench.py --backends of the timed runs, default qla; e.g. qla,flashqla,fla for an
# alternative's issue-3 table), AB_TIME_TREE=0 (time only the alternatives),
# AB_DEADLINE (seconds for the whole script; each timed run gets an equal share of what is left, and
# rows stop being started past it), AB_PREBUILD=0 (every label's kernels are in the carried cache:
# skip kernel_bench's parallel prebuild, which takes 34-38 s a label even when it only finds them
# there (session 43) and counts against the label's share; a kernel missing then compiles inside
# the timed process, one at a time), PYTHON.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="$(mkdir -p "${1:?usage: kernel_ab.sh OUT LABEL=FILE ...}" && cd "$1" && pwd)"
shift
PY="${PYTHON:-python3}"
T_END=$((SECONDS + ${AB_DEADLINE:-540}))
HEADS="${AB_HEADS:-16/32,2/8}"
MIXES="${AB_MIXES:-1x32768,8192x4,1024x8,16x512}"
export FLA_FLASH_QLA=0

make_site() {  # label file → OUT/site-<label>, laid out like the installed package
  local site="$OUT/site-$1"
  rm -rf "$site" && mkdir -p "$site"
  cp -r "$ROOT/qla_serve" "$ROOT/tests" "$ROOT/bench_serving" "$site/"
  rm -rf "$site/bench_serving/results"
  cp -r "$ROOT/kernels" "$site/qla_serve/kernels"
  cp -r "$ROOT/integrations" "$site/qla_serve/integrations"
  local f
  for f in ${2//+/ }; do                   # FILE[+FILE] ("" for the checkout): a label may replace both kernels
    case "$(basename "$f")" in               # kkt_solve*.py replaces kkt_solve.py, any other file the walk
      kkt_solve*.py) cp "$f" "$site/qla_serve/kernels/hopper/kkt_solve.py" ;;
      *) cp "$f" "$site/qla_serve/kernels/hopper/fused_fwd.py" ;;
    esac
  done
  (cd / && PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}" "$PY" -c "import qla_serve.kernels.hopper.fused_fwd as m, sys; sys.exit(not m.__file__.startswith('$site'))") \
    || { echo "[ab] $1: the copy is not what imports" >&2; return 1; }
}
in_site() {  # label cmd... : run cmd inside that label's copy (kept in front of the caller's
  local site="$OUT/site-$1" e extra=()     # PYTHONPATH, which brings tilelang on the H200 image)
  for e in ${AB_LABEL_ENV:-}; do [ "${e%%:*}" = "$1" ] && extra+=("${e#*:}"); done
  shift
  (cd "$site" && env "${extra[@]}" PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}" "$@")
}

labels=(tree) files=("")
abspaths() {  # FILE[+FILE] → the same with absolute paths
  local f out=""
  for f in ${1//+/ }; do out+="${out:++}$(cd "$(dirname "$f")" && pwd)/$(basename "$f")"; done
  echo "$out"
}
for a in "$@"; do labels+=("${a%%=*}"); files+=("$(abspaths "${a#*=}")"); done
for i in "${!labels[@]}"; do make_site "${labels[$i]}" "${files[$i]}" || exit 1; done
# Widths to build: the forced ones, and both the plan chooses between (64, 128) when "plan" is run.
widths="$(echo ${AB_BLOCK_V:-plan 128} | tr ' ' '\n' | sed 's/^plan$/64\n128/' | sort -nu | paste -sd, -)"
if [ "${AB_BUILD_ONLY:-0}" = 1 ]; then
  for l in "${labels[@]}"; do
    [ "$l" = tree ] && [ "${AB_SKIP_TREE:-0}" = 1 ] && continue     # built by the caller already
    tests_flag=--no-tests; [ "${AB_TESTS:-1}" = 1 ] && [ "$l" != tree ] && tests_flag=   # the tests' variants too
    [ -z "$tests_flag" ] && [ -n "${AB_TEST_CONFIGS:-}" ] && tests_flag="--test-configs $AB_TEST_CONFIGS"
    in_site "$l" "$PY" bench_serving/gpu_prebuild.py $tests_flag --heads "$HEADS" --block-v "$widths" \
      --processes "${AB_PROCESSES:-8}" > "$OUT/build-$l.log" 2>&1 &
  done
  wait; tail -qn 1 "$OUT"/build-*.log; rm -rf "$OUT"/site-*
  exit 0
fi

for i in "${!labels[@]}"; do
  l="${labels[$i]}"
  tested=1; [ -n "${AB_TEST_LABELS:-}" ] && [[ " $AB_TEST_LABELS " != *" $l "* ]] && tested=0
  if [ "${AB_TESTS:-1}" = 1 ] && [ $tested = 1 ] && { [ "$l" != tree ] || [ "${AB_TEST_TREE:-0}" = 1 ]; }; then
    left=$((T_END - SECONDS)); [ "$left" -gt 60 ] || { echo "[ab] $l: no time for the tests"; continue; }
    in_site "$l" env QLA_ERR_LOG="$OUT/errors-$l.jsonl" QLA_TEST_PACKAGE_ROOT="$OUT/site-$l" timeout $((left - 30)) "$PY" -m pytest -m gpu -s \
      -p no:cacheprovider -rA --durations=0 ${AB_TEST_K:+-k "$AB_TEST_K"} tests/test_hopper_gpu.py > "$OUT/tests-$l.log" 2>&1
    echo "[ab] $l tests: $(tail -n 1 "$OUT/tests-$l.log")"
  fi
done
widths_run=(${AB_BLOCK_V-plan 128})     # AB_BLOCK_V="" : the tests only, nothing timed
timed=("${labels[@]}"); [ "${AB_TIME_TREE:-1}" = 0 ] && timed=("${labels[@]:1}")
runs_left=$(( ${#widths_run[@]} * ${#timed[@]} ))
for bv in "${widths_run[@]}"; do
  for l in "${timed[@]}"; do
    left=$((T_END - SECONDS)); [ "$left" -gt 60 ] || { echo "[ab] $l bv=$bv: not started (${left}s left)"; runs_left=$((runs_left - 1)); continue; }
    # An equal share of what is left for each run still to come: the first run cannot starve the
    # last (session 7: seven labels in 250 s left the sixth 6 s and the seventh none).
    share=$(( (left - 10) / runs_left )); runs_left=$((runs_left - 1))
    [ "$share" -gt 45 ] || share=$((left - 10))
    env_bv=(); [ "$bv" != plan ] && env_bv=(QLA_BLOCK_V="$bv")
    in_site "$l" env "${env_bv[@]}" timeout "$share" "$PY" bench_serving/kernel_bench.py --backends "${AB_BACKENDS:-qla}" \
      --heads "$HEADS" --mixes "$MIXES" --budget-s $((share - 20)) --out "$OUT/$l-bv$bv" \
      $([ "${AB_PREBUILD:-1}" = 0 ] && echo --no-prewarm) > "$OUT/$l-bv$bv.log" 2>&1
    echo "[ab] $(date +%T) $l bv=$bv: $(grep -c qla_ms "$OUT/$l-bv$bv/kernels.json" 2>/dev/null || echo 0) rows"
  done
done
rm -rf "$OUT"/site-*
[ ${#widths_run[@]} -gt 0 ] && [ "${AB_TIME_TREE:-1}" = 1 ] || exit 0
"$PY" "$ROOT/bench_serving/ab_table.py" "$OUT" "${AB_BASE:-tree-bvplan}" > "$OUT/ab.md" && cat "$OUT/ab.md"
