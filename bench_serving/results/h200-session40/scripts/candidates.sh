# Session 40: the two candidates' package copies, sourced by a_riders_ab.sh, b_kkt_f16_ab.sh and
# prebuild_cpu.sh (run from the repository root), so that the lease times what the CPU machine built.
S40=bench_serving/results/h200-session40

pool_site() {  # SITE WORK: the package with exp/riders-from-pool.patch applied, laid out like the
  # installed one (kernel_ab.sh's way: put SITE first on PYTHONPATH); WORK holds the patched tree
  local site=$1 stage=$2/stage
  mkdir -p "$stage" && cp -r kernels tests "$stage/" || return 1
  patch -s -p1 -d "$stage" < $S40/exp/riders-from-pool.patch || { echo "riders patch failed"; return 1; }
  mkdir -p "$site" && cp -r qla_serve bench_serving "$stage/tests" "$site/" && rm -rf "$site/bench_serving/results"
  cp -r "$stage/kernels" "$site/qla_serve/kernels" && cp -r integrations "$site/qla_serve/integrations"
}

kkt_labels() {  # DIR: kkt_solve_f16.py (exp/kkt-f16.patch's kernel), kkt_solve_m5.py and
  # kkt_solve_f16m5.py (MIN_BLOCKS 5), for kernel_ab.sh's labels H, M5, H5
  local dir=$1
  mkdir -p "$dir" && cp kernels/hopper/kkt_solve.py "$dir/kkt_solve_f16.py" || return 1
  sed -n '/^diff --git a\/kernels\/hopper\/kkt_solve.py/,/^diff --git a\/tests/p' $S40/exp/kkt-f16.patch \
    | sed '$d' | patch -s "$dir/kkt_solve_f16.py" || { echo "kkt patch failed"; return 1; }
  sed 's/^MIN_BLOCKS = 4 /MIN_BLOCKS = 5 /' "$dir/kkt_solve_f16.py" > "$dir/kkt_solve_f16m5.py"
  sed 's/^MIN_BLOCKS = 4 /MIN_BLOCKS = 5 /' kernels/hopper/kkt_solve.py > "$dir/kkt_solve_m5.py"
  [ "$(grep -c '^MIN_BLOCKS = 5' "$dir/kkt_solve_f16m5.py" "$dir/kkt_solve_m5.py" | grep -c ':1$')" = 2 ] \
    && grep -q 'half = "float16"' "$dir/kkt_solve_f16.py" || { echo "kkt labels not as expected"; return 1; }
}
