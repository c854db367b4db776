"""Host (CPU) cost of the primitives a qla-serve call is made of, on this machine: what one Python
call, a numpy table op, a pinned staging buffer, an async host→device copy, a CUDA allocation, a
torch op launch and a TVM-FFI call with a tensor (TileLang's launch path) each cost. Read beside
host_profile.py's per-part figures: it tells whether a slow host is slow at everything (Python) or
at some CUDA API calls. Needs a CUDA device.

    python bench_serving/host_micro.py [--out FILE]

Microseconds per operation, best of 7 repeats of 200 (the GPU queue drained between repeats).
"""
from __future__ import annotations

import argparse
import json
import sys

import numpy as np
import torch

from host_profile import best_us as _best_us     # bench_serving/ (this script's folder) is on sys.path


def best_us(fn, n: int = 200) -> float:
    return _best_us(fn, n, torch.cuda.synchronize, digits=2)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("host_micro.py: no CUDA device here (it times CUDA API calls)", file=sys.stderr)
        return 2
    dev = torch.device("cuda", torch.cuda.current_device())
    host = np.arange(2048, dtype=np.int32)
    pinned = torch.empty(2048, dtype=torch.int32, pin_memory=True)
    x = torch.randn(4096, 32, device=dev)
    idx = torch.arange(8, dtype=torch.int32, device=dev)
    sel = torch.arange(4, dtype=torch.int32, device=dev)

    def noop():
        pass

    rows = {
        "python_call": best_us(noop, 2000),
        "numpy_cumsum_2048": best_us(lambda: np.cumsum(host), 2000),
        "torch_empty_cpu": best_us(lambda: torch.empty(2048, dtype=torch.int32)),
        "torch_empty_pinned": best_us(lambda: torch.empty(2048, dtype=torch.int32, pin_memory=True)),
        "copy_pinned_to_gpu_async": best_us(lambda: pinned.to(dev, non_blocking=True)),
        "empty_pinned_and_copy": best_us(
            lambda: torch.empty(2048, dtype=torch.int32, pin_memory=True).to(dev, non_blocking=True)),
        "torch_empty_cuda": best_us(lambda: torch.empty(4096, 32, device=dev)),
        "index_select_cuda": best_us(lambda: idx.index_select(0, sel)),
        "add_cuda": best_us(lambda: x.add_(1.0)),
        "current_stream": best_us(lambda: torch.cuda.current_stream()),
    }
    rows["dlpack_c_exchange_api"] = hasattr(torch.Tensor, "__dlpack_c_exchange_api__")
    try:   # a TVM-FFI call passing one torch tensor: the per-argument cost of every TileLang launch
        import tvm_ffi

        rows["tvm_ffi_version"] = tvm_ffi.__version__
        echo = tvm_ffi.get_global_func("testing.echo")
        rows["tvm_ffi_echo_int"] = best_us(lambda: echo(1), 2000)
        rows["tvm_ffi_echo_cuda_tensor"] = best_us(lambda: echo(x), 2000)
    except Exception as exc:  # noqa: BLE001
        rows["tvm_ffi_error"] = repr(exc)[:200]
    result = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "us": rows}
    print(json.dumps(result, indent=1))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
