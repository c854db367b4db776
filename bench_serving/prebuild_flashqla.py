"""Build FlashQLA 0.1.3's forward kernels into TileLang's disk cache on a machine without a GPU.

FlashQLA compiles each (heads, V-block, CP) variant on its first call: 7-9 kernels for a head
config's twelve bench mixes, 70-90 s of a device call (sessions 41, 57, 61), every lease. This runs
the bench's own FlashQLA calls (:func:`kernel_bench.flashqla_fns`, both the kernel and the serving
form, on the bench's inputs) on CPU tensors with every TileLang launch made a no-op, so each variant
compiles for sm_90a (``TILELANG_DEFAULT_TARGET=nvidia/nvidia-h100``, as the device calls set it)
under the cache key the device computes. The CUDA queries FlashQLA makes on import and while
planning answer as an sm_90 part with 132 SMs (H100 SXM and H200 both): its CP and V-block choices
come from that count and the lengths, never from the data. Needs FlashQLA importable
(``.gpu/site.tar.xz``'s ``site/flash_qla`` on ``PYTHONPATH``) and the TileLang of ``bash
.ci/setup-tilelang.sh``.

    mkdir -p /tmp/fq && tar -xJf .gpu/site.tar.xz -C /tmp/fq site/flash_qla
    TILELANG_CACHE_DIR=/tmp/fqcache PYTHONPATH=/tmp/fq/site .venv/bin/python \\
        bench_serving/prebuild_flashqla.py [--heads 16/32,2/8] [--mixes 1x32768,64x128]
    tar -C /tmp/fqcache -cJf .gpu-p/tlcfq013.tar.xz 0.1.15/linux-x86_64/kernels

On 2 cores: ~2 min a head config; all six, two processes of three heads: 45 kernels (660 KB
packed) in ~8 min.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
import types

os.environ.setdefault("TILELANG_DEFAULT_TARGET", "nvidia/nvidia-h100")

import torch  # noqa: E402

# FlashQLA asks CUDA for the SM count and the compute capability at import, and its launch helpers
# for a device context; none of them may reach a driver here.
torch.cuda.is_available = lambda: True
torch.cuda.is_current_stream_capturing = lambda: False
torch.cuda.get_device_properties = lambda *a, **k: types.SimpleNamespace(multi_processor_count=132)
torch.cuda.device = lambda *a, **k: contextlib.nullcontext()
torch.Tensor.cuda = lambda self, *a, **k: self          # the bench's cu_seqlens uploads stay on CPU
torch.Tensor.pin_memory = lambda self, *a, **k: self

import tilelang.contrib.nvcc  # noqa: E402
from tilelang.jit.kernel import JITKernel  # noqa: E402

tilelang.contrib.nvcc.get_target_compute_version = lambda *a, **k: "9.0"
JITKernel.__call__ = lambda self, *a, **k: None         # compiled (and cached) already; no launch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kernel_bench  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--heads", default=",".join(f"{h}/{hv}" for h, hv in kernel_bench.HEADS))
    ap.add_argument("--mixes", default=",".join(kernel_bench.SEQLENS))
    args = ap.parse_args()
    for head in args.heads.split(","):
        H, HV = map(int, head.split("/"))
        for mix in args.mixes.split(","):
            t0 = time.time()
            x = kernel_bench.make_inputs(kernel_bench.mix_seqlens(mix), H, HV, dev="cpu")
            for fn in kernel_bench.flashqla_fns(x):
                fn()
            print(f"[prebuild-flashqla] {head} {mix}: {time.time() - t0:.1f} s", flush=True)


if __name__ == "__main__":
    main()
