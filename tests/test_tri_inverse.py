"""kernels/hopper/tri_inverse.py's CUDA function, compiled for the CPU and run by 128 threads.

ALGORITHM (the text the GPU compiles) is built with g++ against host versions of PRIMITIVES: each
thread has its own thread index, ``qla_inv_bar`` and ``qla_inv_syncwarp`` are std::barriers of the
warpgroup and of the warp, ``qla_inv_h2`` rounds to fp16 with _Float16 (round to nearest even), and
``qla_inv_mma`` swaps the 32 lanes' fragments through a per-warp exchange and has each lane compute
its four outputs from the PTX ISA's m16n8k16 layouts, written out again here from the ISA, not from
the function. So every index, stride and skip of the function runs as written; what is emulated is
the hardware's part: the fragment layouts and the tensor core's fp32 sums (here in k order).

Checks, on test_kkt_scheme.py's cases: X equals kkt_solve's scheme (kernel_scheme: the same blocks,
order and fp16 roundings) up to fp32 summation order; the tile's lower half is NaN on entry, so an
element read before it is written shows; every block above the block diagonal still holds Lᵀ after
the call; the diagonal blocks have exact zeros above the diagonal. No GPU needed.
"""
import shutil
import struct
import subprocess

import numpy as np
import pytest
import torch

from qla_serve.kernels.hopper import kkt_solve, tri_inverse
from test_kkt_scheme import CASES, gated_l, _inputs, kernel_scheme, reference

if shutil.which("g++") is None:
    pytest.skip("g++ not found", allow_module_level=True)

C, LD = 64, kkt_solve.INVERSE_LD

HOST_PRIMITIVES = r"""
#include <barrier>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

#define QLA_INV_FN static inline

thread_local int tl_tid;
std::barrier<>* wg_barrier;              // the warpgroup's 128 threads
std::barrier<>* warp_barrier[4];         // each warp's 32

struct Exchange { unsigned a[32][4]; unsigned b[32][2]; float c[32][4]; };
Exchange exchange[4];

QLA_INV_FN int qla_inv_tid() { return tl_tid; }
QLA_INV_FN void qla_inv_syncwarp() { warp_barrier[tl_tid / 32]->arrive_and_wait(); }
QLA_INV_FN void qla_inv_bar(int) { wg_barrier->arrive_and_wait(); }
QLA_INV_FN float qla_inv_fma(float a, float b, float c) { return std::fmaf(a, b, c); }

static inline unsigned short f16_bits(float x) { _Float16 h = (_Float16)x; unsigned short u; std::memcpy(&u, &h, 2); return u; }
static inline float f16_value(unsigned short u) { _Float16 h; std::memcpy(&h, &u, 2); return (float)h; }
QLA_INV_FN unsigned qla_inv_h2(float lo, float hi) { return f16_bits(lo) | ((unsigned)f16_bits(hi) << 16); }
static inline float half_of(unsigned r, int k) { return f16_value((unsigned short)(k % 2 ? r >> 16 : r & 0xffff)); }

// m16n8k16, .row.col, f16 inputs, f32 accumulators (PTX ISA "Matrix Fragments for mma.m16n8k16"):
// A(row, k): lane (row % 8) * 4 + (k % 8) / 2, register (row >= 8) + 2 (k >= 8), half k % 2
// B(k, n):   lane n * 4 + (k % 8) / 2, register (k >= 8), half k % 2
// C(row, n): lane (row % 8) * 4 + (n % 8) / 2, register 2 (row >= 8) + n % 2
static float A_at(const Exchange& x, int row, int k) { return half_of(x.a[(row % 8) * 4 + (k % 8) / 2][(row >= 8) + 2 * (k >= 8)], k); }
static float B_at(const Exchange& x, int k, int n) { return half_of(x.b[n * 4 + (k % 8) / 2][k >= 8], k); }

QLA_INV_FN void qla_inv_mma(float* d, const unsigned* a, const unsigned* b) {
  const int lane = tl_tid % 32;
  Exchange& x = exchange[tl_tid / 32];
  std::memcpy(x.a[lane], a, sizeof x.a[lane]);
  std::memcpy(x.b[lane], b, sizeof x.b[lane]);
  std::memcpy(x.c[lane], d, sizeof x.c[lane]);
  warp_barrier[tl_tid / 32]->arrive_and_wait();
  float out[4];
  for (int r = 0; r < 4; ++r) {
    const int row = lane / 4 + 8 * (r / 2), n = 2 * (lane % 4) + r % 2;
    float acc = x.c[(row % 8) * 4 + n / 2][2 * (row >= 8) + n % 2];
    for (int k = 0; k < 16; ++k) acc += A_at(x, row, k) * B_at(x, k, n);
    out[r] = acc;
  }
  warp_barrier[tl_tid / 32]->arrive_and_wait();
  std::memcpy(d, out, sizeof out);
}
"""

HOST_MAIN = r"""
// stdin: n, then n tiles of 64 x LD floats; stdout: the n tiles after qla_tri_inverse64.
int main() {
  int n;
  if (std::fread(&n, sizeof n, 1, stdin) != 1) return 1;
  std::vector<float> tiles((size_t)n * 64 * LD);
  if (std::fread(tiles.data(), sizeof(float), tiles.size(), stdin) != tiles.size()) return 1;
  std::barrier<> wg(128);
  std::barrier<> w0(32), w1(32), w2(32), w3(32);
  wg_barrier = &wg;
  warp_barrier[0] = &w0; warp_barrier[1] = &w1; warp_barrier[2] = &w2; warp_barrier[3] = &w3;
  std::vector<std::thread> threads;
  for (int tid = 0; tid < 128; ++tid)
    threads.emplace_back([&, tid] {
      tl_tid = tid;
      for (int i = 0; i < n; ++i) qla_tri_inverse64(tiles.data() + (size_t)i * 64 * LD, LD, 1);
    });
  for (auto& th : threads) th.join();
  std::fwrite(tiles.data(), sizeof(float), tiles.size(), stdout);
  return 0;
}
"""


@pytest.fixture(scope="module")
def host_inverse(tmp_path_factory):
    """Run the function on the CPU: ``host_inverse(tiles)`` ([n, 64, LD] fp32) → the tiles after it."""
    d = tmp_path_factory.mktemp("tri_inverse")
    src = d / "host.cpp"
    src.write_text(HOST_PRIMITIVES + f"#define LD {LD}\n" + tri_inverse.ALGORITHM + HOST_MAIN)
    exe = d / "host"
    subprocess.run(["g++", "-std=c++20", "-O1", "-pthread", "-Wno-unknown-pragmas", str(src), "-o", str(exe)],
                   check=True, capture_output=True, text=True)

    def run(tiles: np.ndarray) -> np.ndarray:
        tiles = np.ascontiguousarray(tiles, dtype=np.float32)
        out = subprocess.run([str(exe)], input=struct.pack("i", tiles.shape[0]) + tiles.tobytes(),
                             capture_output=True, check=True, timeout=120).stdout
        return np.frombuffer(out, dtype=np.float32).reshape(tiles.shape)
    return run


def _entry_tile(lf: torch.Tensor) -> np.ndarray:
    """The tile as kkt_solve hands it over: Lᵀ above the diagonal, NaN everywhere else (on and below
    the diagonal the function must write before it reads; the padding columns are never touched)."""
    t = np.full((C, LD), np.nan, dtype=np.float32)
    up = np.triu_indices(C, 1)
    t[up] = lf.numpy().T[up]
    return t


def _above_block_diagonal() -> np.ndarray:
    mask = np.zeros((C, C), dtype=bool)
    for bi in range(4):
        for bj in range(bi + 1, 4):
            mask[16 * bi:16 * bi + 16, 16 * bj:16 * bj + 16] = True
    return mask


def _case_l(seed, g_min, correlated, nvalid):
    k, g, beta = _inputs(seed, g_min, correlated)
    lf, _ = gated_l(k, g, beta, nvalid)
    return lf


def test_inverse_is_kkt_solves_scheme(host_inverse):
    lfs = [_case_l(*case) for case in CASES]
    out = host_inverse(np.stack([_entry_tile(lf) for lf in lfs]))
    above = _above_block_diagonal()
    for case, lf, tile in zip(CASES, lfs, out):
        x = tile[:, :C]
        lower = ~above
        assert np.isfinite(x[lower]).all(), f"{case}: an element was read before it was written"
        assert (x[np.triu_indices(C, 1)][lower[np.triu_indices(C, 1)]] == 0).all(), case   # diag blocks' upper zeros
        assert np.array_equal(x[above], lf.numpy().T[above]), f"{case}: the function wrote above its blocks"
        want = kernel_scheme(lf).numpy()
        got = np.where(lower, x, 0.0)
        scale = np.abs(want).max()
        # the same blocks, operands and roundings; only the fp32 sums inside a product may differ
        # in order (a 16-term mma here, 32 terms with zeros in torch's matmul there)
        assert np.abs(got - want).max() <= 1e-5 * scale, case
        ref = reference(lf).numpy()
        assert np.abs(got - ref).max() <= 1.2e-3 * np.abs(ref).max(), case     # test_kkt_scheme's bound


def test_a_wrong_layout_would_be_caught(host_inverse):
    """The check sees the fragments: the same tile with L not transposed (L below the diagonal, the
    upper half NaN) is not inverted."""
    lf = _case_l(*CASES[1])
    bad = np.full((C, LD), np.nan, dtype=np.float32)
    low = np.tril_indices(C, -1)
    bad[low] = lf.numpy()[low]
    x = host_inverse(bad[None])[0][:, :C]
    want = kernel_scheme(lf).numpy()
    ok = np.isfinite(x) & ~_above_block_diagonal()
    assert not (ok.all() and np.abs(np.where(ok, x, 0) - want).max() <= 1e-5 * np.abs(want).max())
