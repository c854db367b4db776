"""The output warpgroup's barrier protocol (fused_fwd.py, output_warpgroup 1/2), modelled on the CPU:
every warp role as a coroutine over the CTA's chunks, mbarriers with their arrive counts and parity
waits, random interleavings. It checks that no schedule deadlocks and that every shared tile a role
reads holds the chunk it expects for the whole time it reads it (an overwrite between a tile's
"ready" wait and its "free" arrive is caught). A model of the kernel written by hand from its
source: it checks the protocol's design, not the generated code.

    python owg_protocol_sim.py [--chunks 9] [--schedules 3000]
"""
import argparse
import random


class Barrier:
    def __init__(self, count):
        self.count, self.arrived, self.phase = count, 0, 0

    def arrive(self, n):
        self.arrived += n
        assert self.arrived <= self.count
        if self.arrived == self.count:
            self.phase, self.arrived = self.phase + 1, 0

    def passes(self, parity):       # mbarrier try_wait.parity: phase `parity` has completed
        return self.phase % 2 != parity


def roles(nw, chunks, bars, smem):
    def wait(name, parity):
        while not bars[name].passes(parity):
            yield
    def expect(tile, u, who):
        assert smem[tile] == u, f"{who}: {tile} holds chunk {smem[tile]}, expected {u}"

    def loader(j):                  # three loader warps, 32 arrivals each on ready[b]
        for u in range(chunks):
            b = u % 2
            yield from wait(f"free{b}", (u // 2 + 1) % 2)
            smem[f"in{b}.{j}"] = u
            yield
            bars[f"ready{b}"].arrive(32)
            yield

    def consumer(w):
        for u in range(chunks):
            b = u % 2
            yield from wait(f"ready{b}", (u // 2) % 2)
            for j in range(3):
                expect(f"in{b}.{j}", u, f"consumer{w}")
            yield from wait("xb_free", (u + 1) % 2)
            smem[f"xb.{w}"] = u             # X's bf16 copy (stmatrix), fence, arrive
            yield
            bars["xb_ready"].arrive(128)
            yield                           # X Kᵀ, W, Wᵀ Aβᵀ, select
            for j in range(3):
                expect(f"in{b}.{j}", u, f"consumer{w}")
            yield from wait("u_free", (u + 1) % 2)
            smem[f"u.{w}"] = u
            yield
            bars["u_ready"].arrive(128)
            yield                           # the update reads K of buffer b
            for j in range(3):
                expect(f"in{b}.{j}", u, f"consumer{w}")
            bars[f"free{b}"].arrive(128)
            yield

    def wg_p():
        for u in range(chunks):
            b = u % 2
            yield from wait(f"ready{b}", (u // 2) % 2)
            yield                           # P = Q Kᵀ, the mask
            yield from wait("xb_ready", u % 2)
            for w in range(nw):
                expect(f"xb.{w}", u, "WG_P")
            yield                           # Q Xbᵀ (reads Q of buffer b, xb_s)
            for w in range(nw):
                expect(f"xb.{w}", u, "WG_P")
            expect(f"in{b}.0", u, "WG_P")
            bars["xb_free"].arrive(128)
            yield
            yield from wait("u_ready", u % 2)
            for w in range(nw):
                expect(f"u.{w}", u, "WG_P")
            yield                           # P U
            for w in range(nw):
                expect(f"u.{w}", u, "WG_P")
            expect(f"in{b}.1", u, "WG_P")   # e^γ of buffer b (the O scaling) was read before this
            bars["u_free"].arrive(128)
            bars[f"free{b}"].arrive(128)
            yield
            yield from wait("o_free", (u + 1) % 2)
            smem["o"] = u
            yield
            bars["o_ready"].arrive(128)
            yield

    def store():
        for u in range(chunks):
            yield from wait("o_ready", u % 2)
            expect("o", u, "store")
            yield                           # TMA store of the O tile
            expect("o", u, "store")
            bars["o_free"].arrive(32)
            yield

    return ([loader(j) for j in range(3)] + [consumer(w) for w in range(nw)] + [wg_p(), store()])


def run(nw, chunks, rng):
    n_free = nw * 128 + 128
    bars = {"ready0": Barrier(96), "ready1": Barrier(96), "free0": Barrier(n_free), "free1": Barrier(n_free),
            "xb_ready": Barrier(nw * 128), "xb_free": Barrier(128), "u_ready": Barrier(nw * 128),
            "u_free": Barrier(128), "o_ready": Barrier(128), "o_free": Barrier(32)}
    smem = {}
    live = roles(nw, chunks, bars, smem)
    steps = 0
    while live:
        progressed = False
        for i in rng.sample(range(len(live)), len(live)):
            # a role runs a random number of steps; a blocked wait spins without progress
            snapshot = (tuple((b.phase, b.arrived) for b in bars.values()), tuple(sorted(smem.items())))
            try:
                for _ in range(rng.randint(1, 3)):
                    next(live[i])
                    steps += 1
            except StopIteration:
                live[i] = None
                progressed = True
                continue
            if snapshot != (tuple((b.phase, b.arrived) for b in bars.values()), tuple(sorted(smem.items()))):
                progressed = True
        live = [g for g in live if g is not None]
        if not progressed and live:
            # every live role only spun: if a few more rounds change nothing it is a deadlock
            before = tuple((b.phase, b.arrived) for b in bars.values())
            for g in live:
                for _ in range(8):
                    try:
                        next(g)
                    except StopIteration:
                        pass
            if before == tuple((b.phase, b.arrived) for b in bars.values()):
                raise RuntimeError(f"deadlock after {steps} steps: {[(k, b.phase, b.arrived) for k, b in bars.items()]}")
    return steps


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--chunks", type=int, default=9)
    ap.add_argument("--schedules", type=int, default=3000)
    args = ap.parse_args()
    for nw in (1, 2):
        rng = random.Random(nw)
        for _ in range(args.schedules):
            run(nw, args.chunks, rng)
        print(f"consumers {nw}: {args.schedules} random schedules of {args.chunks} chunks, no deadlock, no tile overwritten while read")


if __name__ == "__main__":
    main()
