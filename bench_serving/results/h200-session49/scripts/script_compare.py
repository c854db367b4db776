"""TVMScript of the walk's forms from two fused_fwd.py files, compared (no GPU, no nvcc; ~1 min).

    git show REV:kernels/hopper/fused_fwd.py > /tmp/old.py
    python script_compare.py /tmp/old.py kernels/hopper/fused_fwd.py [--o-wg 0|1|2]

Builds 16/32 heads × V-block 64/128 × fp32/bf16 pool × vk/kv × l2norm in kernel or not × phase 0
(both walk forms), 1 and 3 (64 forms) with each file (the new one with ``output_warpgroup`` = --o-wg,
the old one without the argument) and prints how many scripts are equal, and which forms differ.
Equal TVMScript means equal generated CUDA (the helpers' source is part of the script), so equal
TileLang cache entries.
"""
import argparse
import hashlib
import importlib.util
import inspect
import itertools


def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def scripts(module, o_wg):
    takes = "output_warpgroup" in inspect.signature(module.build_fused_fwd).parameters
    out = {}
    for bv, pdt, lay, l2, phase, pers in itertools.product((64, 128), ("float32", "bfloat16"), ("vk", "kv"),
                                                         (False, True), (0, 1, 3), (False, True)):
        if pers and phase != 0:
            continue
        extra = {"output_warpgroup": o_wg} if takes else {}
        f = module.build_fused_fwd(16, 32, 128, 128, bv, "bfloat16", pdt, lay, l2, True, 0.088,
                                   (4096, 4096, 4096, 4096), phase, pers, **extra)
        out[f"bv{bv}-{pdt}-{lay}-l2{int(l2)}-phase{phase}-pers{int(pers)}"] = hashlib.sha256(f.script().encode()).hexdigest()
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--o-wg", type=int, default=0)
    args = ap.parse_args()
    a = scripts(load(args.old, "fused_fwd_old"), 0)
    b = scripts(load(args.new, "fused_fwd_new"), args.o_wg)
    same = [k for k in a if a[k] == b[k]]
    print(f"o_wg={args.o_wg}: {len(same)} of {len(a)} forms have the same TVMScript")
    for k in a:
        if a[k] != b[k]:
            print("  differs:", k)


if __name__ == "__main__":
    main()
