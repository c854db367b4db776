"""How one value head's ~1.5 µs in kkt_solve divides between its phases (session 58, for the next
lease): the latency that a walk making Aβ itself (FlashInfer's aux warpgroup) would have to hide.

    python bench_serving/results/h200-session58/scripts/kkt_phase_probe.py --out OUT [--reps 100]
    python ... --build-only        # the CPU machine: compile every variant into TileLang's cache

Session 55's probe: one wave of CTAs (one per SM, one whole chunk each: H = 1, HV = G, all G value
heads in the CTA), timed at G = 1 and 8 (here as GPU-busy time, kernel_bench.gpu_ms, where session 55
used CUDA events around the launches: the launch gaps cancel in the slope either way); (t(8) − t(1)) / 7 is one value head's serial work on an SM
holding one CTA of this kernel. Here the same slope for main's kkt_solve cut after each phase of its
per-value-head loop (the cuts are string edits of kernels/hopper/kkt_solve.py, asserted to match):
    full           L → diagonal inverses → merges → Aβ store
    no_store       without the store (TMA panels, or the partial chunk's rows)
    no_merge       also without steps 2-3 (the four 32×32 merge products)
    no_solve       also without step 1 (diagonal forward substitution and the X scatter): L alone
Differences of slopes give each phase's share. The outputs of the cut variants are garbage; only
their time is read. The static SASS of each (--build-only prints instruction counts) shows that
every cut removed only its own phase (nvcc keeps shared-memory stores).
Writes OUT/kkt_phase_probe.json.
"""
import argparse
import importlib.util
import json
import os
import sys
import tempfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), *[".."] * 4))
sys.path.insert(0, os.path.join(ROOT, "bench_serving"))
sys.path.insert(0, ROOT)
os.environ.setdefault("TILELANG_DEFAULT_TARGET", "nvidia/nvidia-h100")

C = 64
SRC = os.path.join(ROOT, "kernels", "hopper", "kkt_solve.py")
STEP1 = "                # 1. Diagonal blocks:"
STEP2 = "                # 2. 16 -> 32:"
STORE = "                if nvalid == C:\n"
END = "    return qla_kkt_solve"
VARIANTS = ("full", "no_store", "no_merge", "no_solve")


def variant_source(name: str) -> str:
    text = open(SRC).read()
    for anchor in (STEP1, STEP2, STORE, END):
        assert text.count(anchor) == 1, f"kkt_solve.py changed: {anchor!r} not found once"
    i1, i2, i3, i4 = (text.index(a) for a in (STEP1, STEP2, STORE, END))
    cut = {"full": i4, "no_store": i3, "no_merge": i2, "no_solve": i1}[name]
    return text[:cut] + "\n" + text[i4:]


VARIANT_DIR = tempfile.TemporaryDirectory()     # TileLang reads a prim_func's source file as it parses


def build(name: str, G: int):
    import tilelang
    path = os.path.join(VARIANT_DIR.name, f"kkt_{name}.py")
    with open(path, "w") as f:
        f.write(variant_source(name))
    spec = importlib.util.spec_from_file_location(f"kkt_{name}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    func = mod.build_kkt_solve(1, G, 128, "bfloat16", False, (128, G, G), G)
    return tilelang.compile(func, out_idx=None, pass_configs=mod.PASS_CONFIGS)


def sass_ops(kernel) -> dict:
    """Static counts of a few opcodes of the compiled kernel, and of all (sass_count.py's whole-kernel count)."""
    from sass_count import count, find_nvdisasm
    ops = count(kernel.get_kernel_source(), find_nvdisasm(), use_fast_math=True)[2]
    keep = ("STS", "LDS", "LDSM", "HMMA", "HGMMA", "FFMA", "BAR", "MUFU", "UTMASTG")
    return {k: ops[k] for k in keep} | {"all": sum(ops.values())}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out")
    ap.add_argument("--reps", type=int, default=100)
    ap.add_argument("--build-only", action="store_true")
    args = ap.parse_args()
    if args.build_only:
        for name in VARIANTS:
            for G in (1, 8):
                k = build(name, G)
                if G == 8:
                    print(name, sass_ops(k), flush=True)
        return
    import torch
    from kernel_bench import gpu_ms, make_inputs, qla_plan
    from qla_serve.kernels import hopper
    sms = hopper._num_sms(torch.device("cuda"))
    res = {"gpu": torch.cuda.get_device_name(), "sms": sms, "variants": {}}
    for name in VARIANTS:
        t = {}
        for G in (1, 8):
            x = make_inputs([C] * sms, 1, G)                 # sms sequences of one whole chunk each
            plan = qla_plan(x["cu_cpu"], "cuda")
            gcum = torch.empty(x["T"], G, device="cuda")
            a = torch.empty(x["T"], G, C, device="cuda", dtype=torch.float16)
            k = build(name, G)
            # chunks_at_64c: the kernel's argument since session 59 (after this probe's run there); these
            # one-chunk sequences take the path without the chunk_bounds read, as main runs them
            at64 = hopper.chunks_at_64c(plan)
            t[G] = 1e3 * gpu_ms(lambda: k(x["k"], x["g"], x["beta"], plan.chunk_bounds, gcum, a, at64), args.reps)
        res["variants"][name] = {"G1_us": t[1], "G8_us": t[8], "per_head_us": (t[8] - t[1]) / 7}
        print(name, {k: round(v, 3) for k, v in res["variants"][name].items()}, flush=True)
    v = {n: res["variants"][n]["per_head_us"] for n in VARIANTS}
    res["per_head_phase_us"] = {"L": v["no_solve"], "diagonal inverses + X scatter": v["no_merge"] - v["no_solve"],
                                "merges": v["no_store"] - v["no_merge"], "store": v["full"] - v["no_store"]}
    print("per value head, µs:", {k: round(x, 3) for k, x in res["per_head_phase_us"].items()})
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "kkt_phase_probe.json"), "w") as f:
        json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
