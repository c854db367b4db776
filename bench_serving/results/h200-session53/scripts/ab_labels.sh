# Session 53's kernel labels for kernel_ab.sh, sourced by the call scripts (files in .work/ab: see
# the README's "Reproducing the calls"): M = main's two kernel files, T2 = the tree's own files
# again, X = the tree's kkt_solve with main's walk. Stops the call when the *_panels.py copies are
# not the tree's files (T2 and X would then not be what they are named).
M=.work/ab/kkt_solve_main.py+.work/ab/fused_fwd_main.py
T2=.work/ab/kkt_solve_panels.py+.work/ab/fused_fwd_panels.py
X=.work/ab/kkt_solve_panels.py+.work/ab/fused_fwd_main.py
cmp -s .work/ab/kkt_solve_panels.py kernels/hopper/kkt_solve.py && cmp -s .work/ab/fused_fwd_panels.py kernels/hopper/fused_fwd.py \
  || { echo "the .work/ab/*_panels.py files are not the tree's"; exit 1; }
