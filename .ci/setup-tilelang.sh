#!/usr/bin/env bash
# Install what tests/test_hopper_compile.py needs into the virtual environment given as $1:
# TileLang 0.1.15 (brings apache-tvm-ffi, z3-solver, ml-dtypes, cloudpickle, psutil). The compile
# also needs nvcc (CUDA 12.x/13.x) on PATH or at /usr/local/cuda/bin; no GPU is needed.
set -euo pipefail
venv="${1:?usage: setup-tilelang.sh VENV}"
"$venv/bin/python" -m pip install -q "tilelang==0.1.15"
"$venv/bin/python" -c "import tilelang; print('tilelang', tilelang.__version__)"
