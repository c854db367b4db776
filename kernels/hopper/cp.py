"""Exact intra-card context parallelism (CP) for long prefills with few heads: host plan + orchestration.

A long sequence walks its chunks serially on only HV·(V/BV) CTAs. CP splits it at chunk-aligned
boundaries (multiples of 64 tokens from its start) into P partitions that walk in parallel, then
recovers each partition's true initial state exactly. Walking a partition is affine in its start
state (math layout S ∈ R^{K×V}):

    S_end = M_p S_start + h_p      h_p = walk from S = 0 with the real v
                                   M_p = walk from S = I (K×K) with v ≡ 0 (the K×K transition)

Three phases after ``kkt_solve`` (run once on the real sequences: the boundaries are chunk-aligned,
so γ and Aβ of a partition are those of the real sequence):

    1. partials   (fused_fwd, phase 1): h_p and M_p of every partition but the last of each
                  CP sequence, into ``scratch [2·NSP, HV, *state]`` fp32 (row r: h_r; row NSP + r: M_r),
                  stored in the pool's layout ("vk" stores Sᵀ and M_pᵀ, "kv" S and M_p).
    2. combine    (:mod:`cp_combine`): per real sequence j, S = pool[slot_j] (or 0), then for each
                  partition p: ``starts[vs_j + p] = S``; ``S = M_p S + h_p`` (p < P_j − 1).
    3. from_starts (fused_fwd, phase 3): every *virtual* sequence (all partitions of all
                  sequences; a non-CP sequence is one) walks from ``starts[v]`` (with tail starts:
                  from h_{p−1} where partition p − 1 was one, and the combine skips that copy),
                  writes its output, and the last partition of each real sequence stores its final
                  state to the pool (its slot gathered in the kernel: ``state_indices[seq_of_v]``).

Everything here is computed from host data only (plan.seqlens, head counts, SM count): no device
read, no sync, so a call is CUDA-graph capturable for a fixed plan.

Tail starts (the default where the keys are unit-norm: the op's ``use_qk_l2norm`` or the plan's
``unit_norm_keys``; ``QLA_CP_TAIL=0`` turns them off, ``=1`` on for every call). On the H200 (session
19, ``bench_serving/results/h200-session19/cp/``) they took 16/32 1×32768 from 0.960 ms (exact CP,
best P) to 0.597 and 2/8 1×32768 from 0.334 to 0.213, outputs bitwise equal to P = 1 there. Per token
S_t = e^{g_t} (I − β_t k_t k_tᵀ) S_{t−1} + β_t k_t v_tᵀ, and with ‖k_t‖ = 1 and β_t ∈ [0, 2] the
factor (I − β_t k_t k_tᵀ) has spectral norm 1, so a span's transition has ‖M‖ ≤ e^{Σ g} over it. Where
a partition's last w chunks decay by Σ g ≤ −TAIL_LOG_DECAY (45: e^{−45} < 2^{−64}), the walk of
those w chunks from S = 0 differs from h_p by at most e^{−45} ‖S before them‖, 2^{40} below fp32's
rounding of a state that size, and ‖M_p‖ ≤ e^{−45}: phase 1 walks only the tail for h_p and stores
M_p = 0, and the combine's tail form skips that step's products (S ← h_p; the same numbers). :func:`tail_chunks` (torch; the reference) and
:func:`tail_scan` (the GPU path: :mod:`cp_tail`) find w per (partition, value head) on the device from
the chunk-end γ (kkt_solve's chunk-local cumsum; no sync); where the partition never
decays that far (g → 0) w = 0 and the exact walk runs. It needs g ≤ 0 and unit-norm k (l2norm in
the op or by the engine; the engines' GDN layers do both). FlashQLA's CP does the same with a
threshold of 10 (e^{−10} ≈ 4.5e-5 relative), which is an approximation; here it is not, to fp32.

Decision rule (:func:`choose_parts`): CP only where two partitions of each of the batch's long
sequences (N' of them: at least half the longest's chunks) fit target_ctas CTAs, 2·N'·HV·(V/BV) ≤
target_ctas, and the longest has at least min_seq_chunks chunks. Then the longest gets the P in [2,
min(max_parts, chunks / min_chunks)] (powers of two and, with ``any_count``, the default since
session 22, the counts that fill whole waves) whose phase 3 a cost model puts first
(:func:`cp_estimate_us`: the walk's CTAs scheduled on the SMs in grid order, plus a cost per
partition), every other sequence a share proportional to its chunk count. P = 1 is weighed too where
the long sequences' CTAs pass the target (a split charged ``gated_split_us``) or where a split leaves
other sequences whole (each charged ``rider_us`` per value head: their start copies and one-CTA
walk). The V-block (64 or 128)
comes from the walk's rule, then :func:`widen_block_v`: 128 where the same cost model has a CP row
ending first there (since session 25; with tail starts also a row that 64 leaves unsplit because its
CTAs fill the SMs). Everything is measured:
``bench_serving/kernel_bench.py --cp-sweep`` times P per row, :func:`fit_all` picks the constants (and
the V-block widening) that lose least against the best (V-block, P) of every row, :func:`fit_cost`
the model's, and :func:`compare_counts` whether counts other than powers of two win (``python -m
qla_serve.kernels.hopper.cp fit SWEEP.json`` prints all three).
"""
from __future__ import annotations

import bisect
import functools
import itertools
import json
import math
import os
from dataclasses import dataclass, replace
from typing import Any, Callable, Sequence

import numpy as np
import torch

from qla_serve.plan import HOST_CACHES, StagedInt32

CHUNK = 64
FORCE_ENV = "QLA_CP_PARTS"       # sweep aid: force P for the longest sequence (1 = CP off)
DISABLE_ENV = "QLA_CP"           # QLA_CP=0 turns CP off
TAIL_ENV = "QLA_CP_TAIL"         # 0: never tail starts; 1: for every call (its caller vouches for unit-norm keys)
POISON_ENV = "QLA_CP_POISON"     # 1: NaN-fill the CP buffer every call (tests)
COUNTS_ENV = "QLA_CP_ANY_COUNT"  # 0 / 1: the rule weighs powers of two only / any count (CPParams.any_count)
TAIL_LOG_DECAY = 45.0            # a tail counts once it decays the state by e^-45 < 2^-64
TAIL_MAX_CHUNKS = 256            # chunk ends examined per partition (none found there: exact walk)
CHOICE_ENVS = (DISABLE_ENV, FORCE_ENV, TAIL_ENV, COUNTS_ENV)    # what the plan's CP choices read


@dataclass(frozen=True)
class CPParams:
    """Constants of the CP decision rule, fitted on the H200 by :func:`fit_params`. Session 11
    (2026-11-30, the walk whose consumers form W themselves): over
    ``bench_serving/results/h200-session11/call5-cp-sweep/`` (heads 16/32, 2/8, 8/32, 4/16; rows
    1×32768, 1×16384, 1×8192, 28672+4096, 1×4096, 1×2048; V-block 64 and 128; P = 1…32) the rule's
    pick is 0.6 % slower than the best (V-block, P) per row, geometric mean, 8.3 % at worst (2/8
    1×16384), with session 12's reading of the widening (:func:`_walks_at_128`; 4/16
    28672+4096 had been 26 % slower at V-block 64, P = 2). Session 7's constants (min_chunks 32)
    scored 1.0 % and 27 % at worst on the same sweep: they gave 2/8 1×8192 P = 4 where 8 was best.
    Session 19 (tail starts, ``h200-session19/cp/cp-tail``, the same heads, rows 1×32768 … 1×4096,
    both V-blocks): :func:`fit_all` keeps these constants and lowers the widening to 2; the plan's
    pick is 3.9 % slower than the best (V-block, P) per row, geometric mean, 27 % at worst (4/16
    1×16384, host-bound: 0.268 against 0.202 ms, GPU time 0.180 against 0.189). Since session 21 P
    comes from the cost model (:data:`CP_COST_US`) and these constants only say where to split (and
    how finely at most): :func:`fit_all` keeps them on the same sweep, and the plan's pick is 3.0 %
    off the best (session 19's rule 3.9 %), 1.6 % on GPU-busy time (2.6 %)."""

    target_ctas: int = 132       # split only where two partitions of each long sequence fit this many CTAs
    min_chunks: int = 16         # no partition shorter than this many 64-token chunks (32 in sessions 7-10)
    max_parts: int = 32          # at most this many partitions per sequence
    # No CP unless the longest sequence has this many chunks (3072 tokens since session 39; 6144 in
    # sessions 26-38, 8192 in 7-25). A CP call launches four kernels more than a plain one: session 26
    # set 96 on wall time when that cost 0.1-0.25 ms more host time (its 1×4096 lost on the wall);
    # session 37's shared device tables cut it to ~0.05 ms. Session 39's sweep
    # (``h200-session39/a-cp-short``, single 2048-6144-token sequences, six head configs, P = 1-6, 8
    # at both V-blocks, two runs) has the split winning on GPU time from 3072 tokens on at 2/8-16/32
    # (2/8 1×3072 0.051 ms at the rule's P = 3 against 0.087 unsplit; 16/32 0.083 against 0.106);
    # the rule's splits gain GPU time on all 22 rows it splits (×0.34-0.98) and wall time on 17 (the
    # others host-bound, up to ×1.34 at 8/32 1×3072); at 2048 the split gains the GPU only 11-27 µs
    # and loses 50-100 µs on the wall. Scored as session 26 did (``h200-session39/eval_cp_short.py``:
    # the plan's pick against each row's best): 48 takes GPU 1.332 → 1.073 and wall 1.121 → 1.063
    # on this sweep, session 38's 1.521 → 1.105 / 1.282 → 1.013; sessions 25-26's 1.075 → 1.008 /
    # 1.038 → 1.083 (those had the larger host premium). 32 would gain the GPU a little (1.045) and
    # lose the wall (1.160). min_chunks 8 would take this sweep's GPU to 1.047 (2/8 1×3072 at P = 6),
    # but its finer splits of multi-sequence rows lost in issue 3's table (2/8 7000+600+300+200+92:
    # 13 partitions, 0.077 ms against 0.064 at 6) and in session 26's sweep.
    min_seq_chunks: int = 48
    # A row whose V-block-64 split has at least this many partitions walks at V-block 128 instead,
    # with that width's own split (twice the partitions, half as long). Session 11 (exact starts)
    # fitted 4: at 16/32 and 8/32 (P = 2 at 64) V-block 64 stayed 4-10 % ahead. With tail starts
    # (session 19, ``h200-session19/cp/cp-tail``) phase 1 costs little and the longer walk of V-block
    # 128 pays at P = 2 too: 16/32 1×32768 0.597 ms at 128 / P = 4 against 0.709 at 64 / P = 2,
    # 8/32 0.573 against 0.691. Fitted jointly with the constants above by :func:`fit_all`.
    wide_block_min_parts: int = 2
    # ... and only where the cost model (:data:`CP_COST_US`, each width at its own P) has V-block 128
    # ending first once it pays this many µs more per chunk of the split sequences (fit_cost's
    # per-row offsets, what every P of a row pays alike, are larger at 128 than at 64). Without the
    # check, 2/8 1×8192 split 8 ways at 64 walked at 128 (0.094 ms GPU) where 64 took 0.080, and 2/8
    # 1×16384 at 0.125 where 64 took 0.117 (session 19's tail sweep). fit_wide_block on that sweep,
    # GPU-busy time: 0.02–0.04 pick the same (geomean 1.002 off the best (V-block, P) per row, worst
    # 1.035 at 4/16 1×8192) against 1.016 / 1.172 without the check; on session 25's sweep (2/8 and
    # 4/16 × 1×8192 … 1×32768, the new walk) the pick is the measured best on all six rows. None: the
    # partition count alone decides (sessions 19–24).
    wide_block_chunk_us: float | None = 0.02
    # The partition counts the rule weighs (:func:`candidate_parts`): powers of two only, or also the
    # counts that fill whole waves of the SMs with equal items (7 + 1 for 28672+4096 at 16/32: 256
    # items of 64 chunks, two full waves, where P = 4 leaves the 4096 sequence's CTAs to start after
    # the long ones). Session 22's sweep (``h200-session22/cp``, P = 3 … 16 on 28672+4096, V-block
    # 128) measured the model's picks fastest of all counts: 7 + 1 at 16/32, 8/32, 4/16 0.600 / 0.577
    # / 0.303 ms GPU, 14 + 2 at 2/8 0.185, against 0.689 / 0.667 / 0.392 / 0.244 at the powers of two
    # (the model had predicted 0.592 / 0.565 / 0.287 / 0.186). Single sequences keep their powers of
    # two (they fill waves already). ``QLA_CP_ANY_COUNT=0`` weighs powers of two only.
    any_count: bool = True
    # Rows the target_ctas gate keeps whole (their long sequences' CTAs fill more than half the
    # SMs) may still split where the whole walk leaves a wave mostly idle: there the cost model
    # weighs P = 1 too, and charges every split this many µs (phase 1, the tail scan and the
    # combine, which its per-partition term leaves out). Session 26's sweep (``h200-session26/
    # sweep``, GPU ms): 16/48 8192×4 at V-block 128 0.812 at P = 2 against 0.896 whole (192 CTAs:
    # a second wave of 60), 16384+16384 0.822 at P = 4 against 0.863, while 16/64's 8192×4 and
    # 16384+16384 (256 and 128 CTAs) are fastest whole; the model's gains against the measured ones
    # put the charge at 6–48 µs. With 30 the plan's pick is the measured best on every (row,
    # V-block) of that sweep (geometric mean 1.020 → 1.000 off the best, worst 1.143 → 1.000) and
    # no pick of the other sweeps or of issue 3's table moves but those two rows. Out of sample,
    # session 27's sweep (``h200-session27/sweep``: 8/32, 16/32, 16/64, 16/48 × 8192×4,
    # 16384+16384, 1024×8, P 1–4): the pick is the measured best on all 12 rows (the gate alone:
    # 1.015 off, 1.104 at worst). None: the gate alone decides (sessions 7–26).
    gated_split_us: float | None = 30.0
    # Sequences a split leaves whole (the riders: decodes, short prompts beside the long one) cost
    # more in a CP call than in a plain one: the combine copies each one's start state from the pool
    # into the CP buffer (fp32) for phase 3 to read, and phase 3 walks one CTA per item where the plain
    # walk runs persistent. So P = 1 is always weighed where riders are, and every split pays this
    # many µs per (rider, value head). Issue 3's 256×1+4096 rows (session 39's table, split at the
    # 48-chunk floor, against session 38's, unsplit): 0.344 / 0.625 / 1.191 / 1.208 / 2.316 / 1.775
    # ms GPU at 2/8, 4/16, 8/32, 16/32, 16/64, 16/48 against 0.279 / 0.411 / 0.669 / 0.679 / 1.174 /
    # 0.919; with the 4096 sequence's own gain from the short-row sweep added back, 0.066-0.070 µs
    # per rider head at every head config. None: riders are free (sessions 7-38).
    rider_us: float | None = 0.07


DEFAULT_PARAMS = CPParams()


def default_params() -> CPParams:
    """DEFAULT_PARAMS with ``any_count`` from ``QLA_CP_ANY_COUNT`` where it is set (0 / 1): a lease
    can time either form of the rule in one call (session 22 timed the wave-filling counts in the
    call whose sweep measured them, before they became the default)."""
    env = os.environ.get(COUNTS_ENV, "")
    return DEFAULT_PARAMS if env == "" else replace(DEFAULT_PARAMS, any_count=env != "0")


# ----------------------------------------------------------------------------------------------
# Cost model of the CP walk (phase 3), for the choice of P


# Phase 3 runs one CTA per SM (180 KB of shared memory) and its grid is (V-block, head, virtual
# sequence), x fastest: the hardware hands CTAs out in that order to the first SM free. An item (one
# partition's walk at one V-block of one head) costs ``fixed + chunks × per_chunk`` µs; each partition
# beyond a sequence's first adds ``per_part`` µs (its phase-1 tail walk, a combine step). Fitted by
# :func:`fit_cost` on session 19's tail-start sweep (``bench_serving/results/h200-session19/cp/cp-tail``,
# heads 2/8, 4/16, 8/32, 16/32; rows 1×4096 … 1×32768 and 28672+4096; P = 2 … 32, both V-blocks) with
# one offset per row (kkt_solve and the rest, the same for every P): mean |error| 3.2 % (V-block 64)
# and 4.0 % (128), median 0.8 and 1.4 %. Taken over the measured counts, its argmin is the measured
# best P on 38 of the 40 (row, V-block) pairs, 1.5 % off at worst. (The walk's own fit, hopper's
# WALK_COST_US, read the same sweep to a median 10 %: phase 3 walks shorter chunks of work.)
CP_COST_US: dict[int, tuple[float, float, float]] = {64: (10.0, 1.8, 3.0), 128: (20.0, 2.2, 2.0)}


def schedule_us(groups: Sequence[tuple[int, float]], sms: int) -> float:
    """End of a greedy list schedule: ``groups`` of (count, µs) items in dispatch order, each item to
    the SM that frees first, one at a time per SM. Exact (the same end as item by item on a heap) in
    O(groups × distinct free times): SMs are kept as (free time, how many) buckets."""
    times, counts = [0.0], [max(1, int(sms))]
    end = 0.0
    for n, dur in groups:
        while n > 0:
            t, k = times[0], counts[0]
            use = min(k, n)
            n -= use
            if use == k:
                del times[0], counts[0]
            else:
                counts[0] = k - use
            e = t + dur
            end = max(end, e)
            i = bisect.bisect_left(times, e)
            if i < len(times) and times[i] == e:
                counts[i] += use
            else:
                times.insert(i, e)
                counts.insert(i, use)
    return end


def walk_items(nchunks: Sequence[int], parts: Sequence[int]) -> list[tuple[int, int]]:
    """Phase 3's items in grid order as (partitions, chunks each) runs: :func:`build_tables`' split
    (sequence j's chunks as evenly as possible into parts[j], the longer pieces first)."""
    runs: list[list[int]] = []
    for c, P in zip(nchunks, parts):
        P = max(1, min(int(P), max(1, c)))
        base, extra = divmod(c, P)
        for n, length in ((extra, base + 1), (P - extra, base)):
            if n == 0:
                continue
            if runs and runs[-1][1] == length:
                runs[-1][0] += n
            else:
                runs.append([n, length])
    return [(n, length) for n, length in runs]


def cp_estimate_us(nchunks: Sequence[int], parts: Sequence[int], ctas_per_part: int,
                   cost: tuple[float, float, float], sms: int = 132) -> float:
    """Phase 3's list schedule plus the partitions' own cost, in µs, for ``cost`` = (fixed, per_chunk,
    per_part) (:data:`CP_COST_US` of the V-block), up to a per-batch offset: what the rule compares
    between partition counts of one batch."""
    return _estimate_us(walk_items(nchunks, parts), _extra_parts(nchunks, parts), ctas_per_part, cost, sms)


def _extra_parts(nchunks: Sequence[int], parts: Sequence[int]) -> int:
    """Partitions beyond each sequence's first, as :func:`build_tables` caps them (1 ≤ P ≤ chunks)."""
    return sum(max(1, min(int(P), max(1, c))) - 1 for c, P in zip(nchunks, parts))


def _estimate_us(items: Sequence[tuple[int, int]], extra_parts: int, ctas_per_part: int,
                 cost: tuple[float, float, float], sms: int) -> float:
    fixed, per_chunk, per_part = cost
    return (schedule_us([(n * ctas_per_part, fixed + length * per_chunk) for n, length in items], sms)
            + per_part * extra_parts)


def candidate_parts(nchunks: Sequence[int], ctas_per_part: int, p_max: int, sms: int, any_count: bool) -> list[int]:
    """The counts the rule weighs for the longest of ``nchunks`` (the sequences it schedules): powers
    of two in [2, p_max]; with ``any_count`` also, per number of waves w (1–8), the largest P whose
    partitions, the other sequences' shares (:func:`parts_for_longest`) included, fit w·sms CTAs:
    the count that fills whole waves with items of about equal length."""
    got = set()
    p = 2
    while p <= p_max:
        got.add(p)
        p *= 2
    if any_count and p_max >= 2:
        ctas = [sum(parts_for_longest(nchunks, P)) * ctas_per_part for P in range(p_max + 1)]
        for waves in range(1, 9):
            fits = [P for P in range(2, p_max + 1) if ctas[P] <= waves * sms]
            if fits:
                got.add(fits[-1])
    return sorted(got)


def _pow2floor(x: int) -> int:
    return 1 << (max(1, int(x)).bit_length() - 1)


def parts_for_longest(nchunks: Sequence[int], p_longest: int) -> list[int]:
    """Partitions per sequence when the longest gets ``p_longest`` (any count: the rule passes powers
    of two, a sweep may force others, e.g. 7 + 1 for 28672+4096, 256 equal items at 32 heads: two
    full waves): the others get a power-of-two share proportional to their chunk count (so
    partitions are about equally long); P ≤ chunks."""
    if not nchunks:
        return []
    cmax = max(nchunks)
    if cmax == 0 or p_longest <= 1:
        return [1] * len(nchunks)
    out = []
    for c in nchunks:
        share = (p_longest * c) // cmax
        if c == cmax:
            share = p_longest
        elif share >= 1:
            share = _pow2floor(share)
        out.append(min(max(share, 1), max(1, c)))
    return out


def choose_parts(seqlens: Sequence[int], num_v_heads: int, head_v_dim: int, block_v: int,
                 sms: int = 132, params: CPParams | None = None, force: int | None = None) -> list[int]:
    """P per sequence (1 = no CP) from host data only. ``force``: P for the longest sequence;
    ``params``: default :func:`default_params`."""
    nch = [(n + CHUNK - 1) // CHUNK for n in seqlens]
    if not nch:
        return []
    if force is not None:
        return parts_for_longest(nch, int(force))
    params = params or default_params()
    N = len(nch)
    cmax = max(nch)
    # Only sequences of at least half the longest's chunks count: shorter ones (an engine's decode
    # requests riding in the call as one-token sequences, a short prompt beside a long one) end
    # early and leave their SMs to the long one's partitions. Session 19's tail-start sweep:
    # 16/32 28672+4096 0.702 ms with four partitions against 0.788 with the two that counting the
    # 4096 sequence gave (8/32 0.679 against 0.768); at 4/16 and 2/8 it splits one step finer than
    # their best (0.444 against 0.405, 0.267 against 0.255): 1.039 against 1.045 over the sweep.
    ctas = sum(c > 1 and 2 * c >= cmax for c in nch) * num_v_heads * max(1, head_v_dim // block_v)
    target = params.target_ctas * sms / 132.0       # the constants are fitted on a 132-SM H200
    # Split only where two partitions of each long sequence fit the target (how finely: the model),
    # or, past the target, where the model has a split ending first (``gated_split_us``).
    gated = 2 * ctas > target
    if (gated and params.gated_split_us is None) or cmax < max(2 * params.min_chunks, params.min_seq_chunks):
        return [1] * N
    p_max = min(params.max_parts, cmax // params.min_chunks)
    if p_max < 2:
        return [1] * N
    # P by the cost model (session 19's sweep: the rule's constants alone, target_ctas // CTAs rounded
    # to a power of two, split 2/8 28672+4096 16 ways (0.256 ms) where 8 took 0.243, and 4/16 8 ways
    # (0.432) where 4 took 0.392), over the sequences that some candidate splits: the others (one-token
    # decodes, short prompts) walk as one item at every P, and a split charges their start copies and
    # walk form (``rider_us``) against P = 1; past the target every split pays ``gated_split_us`` too.
    split = tuple(c for c in nch if p_max * c >= 2 * cmax)
    cost = CP_COST_US[block_v] if block_v in CP_COST_US else CP_COST_US[128]
    whole_us = params.gated_split_us if gated else None
    riders = (N - len(split)) * num_v_heads
    if params.rider_us is not None and riders:
        whole_us = (whole_us or 0.0) + params.rider_us * riders
    P = _model_p(split, num_v_heads * max(1, head_v_dim // block_v), p_max, sms, params.any_count, cost, whole_us)
    return parts_for_longest(nch, P)


@functools.lru_cache(maxsize=256)
def _choose_parts_kept(seqlens: tuple[int, ...], num_v_heads: int, head_v_dim: int, block_v: int, sms: int,
                       params: CPParams, force: int | None) -> tuple[int, ...]:
    """:func:`choose_parts` kept per batch shape (its arguments say everything it reads)."""
    return tuple(choose_parts(seqlens, num_v_heads, head_v_dim, block_v, sms, params, force))


HOST_CACHES.append(_choose_parts_kept)


@functools.lru_cache(maxsize=4096)
def _model_p(split: tuple[int, ...], ctas_per_part: int, p_max: int, sms: int, any_count: bool,
             cost: tuple[float, float, float], whole_us: float | None = None) -> int:
    """The candidate P (:func:`candidate_parts`) with the lowest :func:`cp_estimate_us` for these
    sequences; ties to the fewer partitions. ``whole_us``: P = 1 is a candidate too, and every split
    pays that much more. Kept per argument set: a serving step's batches repeat their long sequences'
    shapes (an 8192-token chunk of a long prompt), and the model costs 55–105 µs a batch in Python
    (CPU machine) against 4 for a lookup."""
    best = None
    if whole_us is not None:
        best = (cp_estimate_us(split, [1] * len(split), ctas_per_part, cost, sms), 1)
    for P in candidate_parts(split, ctas_per_part, p_max, sms, any_count):
        t = cp_estimate_us(split, parts_for_longest(split, P), ctas_per_part, cost, sms) + (whole_us or 0.0)
        if best is None or t < best[0] - 1e-9:
            best = (t, P)
    return best[1]


HOST_CACHES.append(_model_p)


@dataclass(frozen=True)
class CPTables:
    """CP tables for one batch (host lists + device copies). NSV virtual sequences, NSP partials."""

    parts: tuple[int, ...]          # P per real sequence
    cu_v: tuple[int, ...]           # [NSV+1] token offsets of the virtual sequences (host)
    bounds: tuple[tuple[int, int], ...]   # [NSP] (bos, eos) of each partial partition (host)
    vs_offsets_h: tuple[int, ...]   # [N+1] first virtual sequence of each real one (host)
    row_offsets_h: tuple[int, ...]  # [N] first partial row of each real one (host)
    # device
    cu_seqlens_v: torch.Tensor      # [NSV+1] int32
    seq_of_v: torch.Tensor          # [NSV] int32: real sequence of each virtual one
    last_v: torch.Tensor            # [NSV] uint8: 1 on each real sequence's last partition
    part_bounds: torch.Tensor       # [NSP, 2] int32
    vs_offsets: torch.Tensor        # [N+1] int32
    row_offsets: torch.Tensor       # [N] int32
    # [NSV] int32: the partial row of the partition before each virtual one (-1 on a sequence's
    # first, and on every one without tail starts): phase 3 starts from that h where it was a tail start
    prev_row_v: torch.Tensor
    # Tail starts only: [NSP, W] int32 token index of each partition's chunk ends, its last chunk
    # first, -1 past its first chunk (W = its longest partition's chunks, at most TAIL_MAX_CHUNKS).
    tail_ends: torch.Tensor | None = None

    @property
    def num_virtual(self) -> int:
        return len(self.cu_v) - 1

    @property
    def num_partial(self) -> int:
        return len(self.bounds)


def build_tables(seqlens: Sequence[int], parts: Sequence[int], device: torch.device | str = "cpu",
                 tail: bool = False) -> CPTables:
    """Partition tables: sequence j's chunks split as evenly as possible into parts[j] pieces.
    ``tail``: also the chunk-end table that :func:`tail_chunks` reads. The host side is kept per
    (lengths, parts, tail) (:func:`_host_tables`), and so are its device copies (shared, read-only)."""
    device = torch.device(device)
    host = _host_tables(tuple(int(n) for n in seqlens), tuple(int(p) for p in parts), bool(tail),
                        device.type == "cuda")
    staged = host.staged.shared_to(device)
    cu_d, seq_d, last_d, bounds_d, vs_d, rows_d, prev_d = staged[:7]
    return CPTables(
        parts=host.parts, cu_v=host.cu_v, bounds=host.bounds, vs_offsets_h=host.vs_offsets_h,
        row_offsets_h=host.row_offsets_h,
        cu_seqlens_v=cu_d, seq_of_v=seq_d, last_v=last_d.view(torch.uint8)[:len(host.cu_v) - 1],
        part_bounds=bounds_d.view(-1, 2), vs_offsets=vs_d, row_offsets=rows_d, prev_row_v=prev_d,
        tail_ends=staged[7].view(len(host.bounds), -1) if len(staged) > 7 else None)


@dataclass(frozen=True)
class _HostCPTables:
    parts: tuple[int, ...]
    cu_v: tuple[int, ...]
    bounds: tuple[tuple[int, int], ...]
    vs_offsets_h: tuple[int, ...]
    row_offsets_h: tuple[int, ...]
    staged: Any                     # qla_serve.plan.StagedInt32 of the device tables, in CPTables' order


@functools.lru_cache(maxsize=256)
def _host_tables(seqlens: tuple[int, ...], parts: tuple[int, ...], tail: bool, pinned: bool) -> _HostCPTables:
    """:func:`build_tables`' host work, a pure function of its arguments: kept per batch shape like
    the plan's own tables (``qla_serve.plan._host_tables``). Built anew, the CP tables cost 125 µs of
    a fresh CP call on the H200 host (session 27's host profile)."""
    assert len(parts) == len(seqlens)
    cu_v, bounds, vs, rows, seq_of_v, last_v, prev_row = [0], [], [0], [], [], [], []
    bos = 0
    for j, (n, P) in enumerate(zip(seqlens, parts)):
        nch = (n + CHUNK - 1) // CHUNK
        P = max(1, min(int(P), max(1, nch)))
        rows.append(len(bounds))
        edges = [bos]
        base, extra = divmod(nch, P)
        c = 0
        for p in range(P - 1):
            c += base + (1 if p < extra else 0)
            edges.append(bos + c * CHUNK)
        edges.append(bos + n)
        for p in range(P):
            cu_v.append(edges[p + 1])
            seq_of_v.append(j)
            last_v.append(1 if p == P - 1 else 0)
            prev_row.append(len(bounds) - 1 if tail and p > 0 else -1)
            if p < P - 1:
                bounds.append((edges[p], edges[p + 1]))
        vs.append(len(cu_v) - 1)
        bos += n
    # One staged host→device copy for all the tables (qla_serve.plan.StagedInt32): int32 throughout;
    # last_v's 0/1 bytes travel packed four to an int32 word and come out as a uint8 view.
    nsv = len(cu_v) - 1
    last_bytes = np.zeros(-(-nsv // 4) * 4, dtype=np.uint8)
    last_bytes[:nsv] = last_v
    tables = [cu_v, seq_of_v, last_bytes.view(np.int32), np.asarray(bounds, dtype=np.int32).reshape(-1, 2), vs, rows,
              prev_row]
    if tail and bounds:
        # Partitions other than a sequence's last end on a chunk boundary: every chunk is whole.
        b = np.asarray(bounds, dtype=np.int64)
        nch = (b[:, 1] - b[:, 0]) // CHUNK
        width = int(min(nch.max(), TAIL_MAX_CHUNKS))
        j = np.arange(width)
        ends = b[:, 1:2] - 1 - CHUNK * j[None, :]             # the last token of chunk nch-1-j
        tables.append(np.where(j[None, :] < nch[:, None], ends, -1))
    return _HostCPTables(parts=tuple(vs[j + 1] - vs[j] for j in range(len(seqlens))), cu_v=tuple(cu_v),
                         bounds=tuple(bounds), vs_offsets_h=tuple(vs), row_offsets_h=tuple(rows),
                         staged=StagedInt32.pack(tables, pinned))


HOST_CACHES.append(_host_tables)


def tail_starts_for(unit_norm_keys: bool) -> bool:
    """Whether a call's CP partitions may start from their tails (see "Tail starts"): where the keys
    the walk sees are unit-norm (the op's l2norm, or the plan's ``unit_norm_keys``), since the bound
    needs ‖k‖ = 1. ``QLA_CP_TAIL=0`` turns them off; ``=1`` turns them on for every call."""
    env = os.environ.get(TAIL_ENV, "")
    return bool(unit_norm_keys) if env == "" else env != "0"


def tail_chunks(gcum: torch.Tensor, tables: CPTables, log_decay: float | None = None) -> torch.Tensor:
    """[NSP, HV] int32 on gcum's device, no sync: per partial partition and value head, the fewest
    chunks w, counted back from its end, whose summed decay Σ g reaches −log_decay (then phase 1
    walks only those, and M_p = 0: see "Tail starts"); 0 where none of its last TAIL_MAX_CHUNKS
    chunks gets there. ``gcum [T, HV]`` is kkt_solve's chunk-local cumsum of g, so its value at a
    chunk's last token is the chunk's decay."""
    ends = tables.tail_ends
    if ends is None:
        raise ValueError("tables were built without tail=True")
    if log_decay is None:
        log_decay = TAIL_LOG_DECAY
    valid = ends >= 0                                                    # [NSP, W]
    decay = gcum.index_select(0, ends.clamp(min=0).reshape(-1)).view(*ends.shape, gcum.shape[1])
    decay = decay.masked_fill(~valid[..., None], 0.0).cumsum(1)         # [NSP, W, HV], from the end back
    reached = (decay <= -log_decay) & valid[..., None]
    first = reached.to(torch.uint8).argmax(1)                           # first True (0 if none)
    return torch.where(reached.any(1), first + 1, torch.zeros_like(first)).to(torch.int32).contiguous()


def _force_from_env() -> int | None:
    f = os.environ.get(FORCE_ENV)
    return int(f) if f else None


def widen_block_v(seqlens: Sequence[int], num_v_heads: int, head_v_dim: int, block_v: int, sms: int = 132,
                  params: CPParams | None = None, tail: bool = False) -> int:
    """The V-block a CP row walks at: 128 where the split at ``block_v`` = 64 would have at least
    ``params.wide_block_min_parts`` partitions and the cost model has 128 ending first
    (``params.wide_block_chunk_us``), else ``block_v``. With ``tail`` (the calls' partitions start
    from their tails: :func:`tail_starts_for`) also where 64 does not split but 128 does and ends
    first. Host data only. CP off → unchanged."""
    if (block_v != 64 or head_v_dim % 128 or os.environ.get(DISABLE_ENV, "1") == "0"
            or _force_from_env() is not None):
        return block_v
    wide = _walks_at_128(seqlens, num_v_heads, head_v_dim, sms, params or default_params(), tail)
    return 128 if wide else block_v


def _walks_at_128(seqlens, num_v_heads, head_v_dim, sms, params: CPParams, tail: bool = False) -> bool:
    """Whether a row walks at V-block 128 rather than 64 (:func:`widen_block_v`)."""
    # Judged among the sequences of at least half the longest's chunks: a much shorter one ends
    # early and leaves its SMs to the longest's partitions. Counting its CTAs split 4/16
    # 28672+4096 only two ways at 64 (0.727 ms) where 128 with four partitions took 0.576
    # (session 11's sweep; the single-sequence rows are unchanged).
    nch = [(n + CHUNK - 1) // CHUNK for n in seqlens]
    cmax = max(nch, default=0)
    long = [n for n, c in zip(seqlens, nch) if 2 * c >= cmax]
    parts64 = choose_parts(long, num_v_heads, head_v_dim, 64, sms, params)
    p64 = max(parts64, default=1)
    if params.wide_block_chunk_us is None:
        return p64 >= params.wide_block_min_parts
    if 2 <= p64 < params.wide_block_min_parts:
        return False
    charge = 0.0
    if p64 < 2:
        # 64's CTAs fill the SMs unsplit; 128 has half as many, so it may split where 64 may not,
        # and its chunk step covers twice the columns for ~1.2× the time. Session 25 (same call,
        # wall ms): 16/64 1×32768 1.023 at 128 / P = 2 against 1.259 at 64 unsplit; 16/32
        # 16384+16384 0.555 and 4/16 8192×4 0.293 against 0.656 and 0.324 (the table's call).
        # Only with tail starts: an exact start walks each partition twice (phase 1 builds its K×K
        # transition), which the cost model (fitted on tail starts) does not price. Also where
        # 128's split needs more than one wave of CTAs (until session 26 it had to fit one):
        # session 26's sweep (``h200-session26/sweep``, GPU ms) measured the model's picks there
        # fastest or tied: 16/48 1×32768 128 / P 8 0.833 against 1.150 at 64 unsplit, 1×16384 P 5
        # 0.445 / 0.581, 1×8192 P 5 0.259 / 0.299, 28672+4096 7 + 1 0.825 / 1.091; 16/64 28672+4096
        # 7 + 1 1.082 / 1.259.
        if not tail:
            return False
        # whether the launch at 128 (all sequences, as plan_cp would split them) splits at all
        if max(choose_parts(seqlens, num_v_heads, head_v_dim, 128, sms, params), default=1) < 2:
            return False
        # Unsplit at 64 against split at 128: the split alone pays phase 1, the tail scan and the
        # combine, which the model's per-partition term leaves out (``gated_split_us``, the same
        # charge the gated rows' P = 1 is weighed against). Session 39's sweep
        # (``h200-session39/a-cp-short``, GPU ms): 16/64 1×2048 82 at 64 unsplit against 90 at 128 /
        # P = 2 (the model without the charge had 128 ending 10 µs first), 1×3072 123 / 126, 16/48
        # 1×2048 78 / 84; from 1×4096 on 128 wins (151 / 155, 16/48 140 / 148) and the charge keeps it.
        charge = params.gated_split_us or 0.0
    return wide_block_gain_us(long, num_v_heads, head_v_dim, sms, params, parts64) > charge


def wide_block_gain_us(seqlens: Sequence[int], num_v_heads: int, head_v_dim: int, sms: int,
                       params: CPParams, parts64: Sequence[int] | None = None) -> float:
    """µs the cost model has V-block 128 (at its own P) ending before V-block 64 (at its P) on these
    sequences, after charging 128 ``params.wide_block_chunk_us`` per chunk (0 where that is None).
    ``parts64``: :func:`choose_parts` at 64 for these sequences, where the caller has it already."""
    nch = [(n + CHUNK - 1) // CHUNK for n in seqlens]
    est = {}
    for bv in (64, 128):
        parts = parts64 if bv == 64 and parts64 is not None else choose_parts(
            seqlens, num_v_heads, head_v_dim, bv, sms, params)
        est[bv] = cp_estimate_us(nch, parts, num_v_heads * max(1, head_v_dim // bv), CP_COST_US[bv], sms)
    return est[64] - est[128] - (params.wide_block_chunk_us or 0.0) * sum(nch)


def plan_cp(plan, num_v_heads: int, head_v_dim: int, block_v: int, sms: int | None = None,
            params: CPParams | None = None, force: int | None = None, tail: bool | None = None) -> CPTables | None:
    """CP tables for this plan (None: no sequence is split), cached in ``plan.kernel_data``.

    Host data only: ``plan.seqlens``, the head counts, the V-block and the SM count. ``tail``: tables
    for tail starts (default :func:`tail_starts_for` the plan's ``unit_norm_keys``). A caller
    (tests, the sweep) may put its own CPTables (or None) under the same key beforehand."""
    if force is None:
        force = _force_from_env()
    if tail is None:
        tail = tail_starts_for(plan.unit_norm_keys)
    key = ("hopper-cp", num_v_heads, head_v_dim, block_v, force, tail)
    if key in plan.kernel_data:
        return plan.kernel_data[key]
    got = None
    if plan.num_seqs:
        if sms is None:
            from . import _plan_sms
            sms = _plan_sms(plan)
        parts = split_parts(plan.seqlens, num_v_heads, head_v_dim, block_v, sms, params, force)
        if parts is not None:
            got = build_tables(plan.seqlens, parts, plan.device, tail=tail)
    plan.kernel_data[key] = got
    return got


def split_parts(seqlens: Sequence[int], num_v_heads: int, head_v_dim: int, block_v: int, sms: int,
                params: CPParams | None = None, force: int | None = None) -> tuple[int, ...] | None:
    """P per sequence where CP is on (``QLA_CP``) and splits some sequence at ``block_v``, else None:
    :func:`plan_cp`'s decision, from host data only (``force``: P for the longest, as there; None
    reads ``QLA_CP_PARTS``)."""
    if os.environ.get(DISABLE_ENV, "1") == "0" or not seqlens:
        return None
    if force is None:
        force = _force_from_env()
    parts = _choose_parts_kept(tuple(seqlens), num_v_heads, head_v_dim, block_v, sms, params or default_params(),
                               force)
    return parts if any(p > 1 for p in parts) else None


# ----------------------------------------------------------------------------------------------
# Orchestration (phase callables injected: the GPU path passes TileLang kernels, tests torch code)


def run_cp(tables: CPTables, *, q, k, v, gcum, a, state_pool, state_indices, has_initial_state, out,
           null_slot: int, state_layout: str, partials: Callable, combine: Callable, from_starts: Callable,
           tail_of: Callable | None = None) -> None:
    """Phase 1 → combine → phase 3. ``state_indices`` int32 [N] dense; ``has_initial_state`` uint8 [N]
    (or any [N] uint8 when the variant does not read it). No sync; allocations are stream-ordered.

    One fp32 buffer ``cp_buf [2·NSP + NSV, HV, *state]``: rows 0 … NSP − 1 h_r, NSP … 2·NSP − 1 M_r
    (``scratch``, phase 1's output), 2·NSP + v the combine's start of virtual sequence v (``starts``).

    partials(q, k, v, gcum, a, part_bounds, scratch[, tail])   (tail: with tables built tail=True)
    tail_of(gcum, tables) → tail [NSP, HV] int32               (default :func:`tail_chunks`)
    combine(pool, state_indices, has_initial_state, vs_offsets, row_offsets, scratch, starts, num_partial,
            null_slot[, tail])                                (tail: as partials; M_p = 0 where w > 0)
    from_starts(q, k, v, gcum, a, cu_seqlens_v, seq_of_v, prev_row_v, tail, state_indices, last_v, cp_buf,
                start_base, pool, out, null_slot)
        virtual sequence v starts from cp_buf[prev_row_v[v]] where that is ≥ 0 and tail[it, head] > 0
        (the previous partition's h: a tail start), else from cp_buf[start_base + v]; its slot is
        state_indices[seq_of_v[v]]. Without tail starts ``tail`` is a 1×1 tensor, never read.
    ``QLA_CP_POISON=1`` fills cp_buf with NaN first (tests: a start read from a row nothing wrote
    shows up in the output)."""
    HV, Vd, Kd = v.shape[1], v.shape[2], q.shape[2]
    if Kd != Vd:
        raise ValueError("CP keeps h (K×V) and M (K×K) in one scratch tensor: needs K == V")
    inner = (Vd, Kd) if state_layout == "vk" else (Kd, Vd)
    nsp = tables.num_partial
    cp_buf = torch.empty(2 * nsp + tables.num_virtual, HV, *inner, dtype=torch.float32, device=v.device)
    if os.environ.get(POISON_ENV) == "1":
        cp_buf.fill_(float("nan"))
    scratch, starts = cp_buf[:2 * nsp], cp_buf[2 * nsp:]
    if tables.tail_ends is None:
        tail, tail_arg = (), tables.prev_row_v[:1].view(1, 1)      # all prev_row_v are -1: never read
    else:
        tail_arg = (tail_of or tail_chunks)(gcum, tables)
        tail = (tail_arg,)
    partials(q, k, v, gcum, a, tables.part_bounds, scratch, *tail)
    combine(state_pool, state_indices, has_initial_state, tables.vs_offsets, tables.row_offsets, scratch, starts,
            nsp, null_slot, *tail)
    from_starts(q, k, v, gcum, a, tables.cu_seqlens_v, tables.seq_of_v, tables.prev_row_v, tail_arg, state_indices,
                tables.last_v, cp_buf, 2 * nsp, state_pool, out, null_slot)


# ----------------------------------------------------------------------------------------------
# TileLang kernels for the GPU path


COMBINE_BLOCK_V = 64     # the combine's own V-block (the chain's CTAs: HV · V / 64 per sequence)


def combine_kernel(HV: int, K: int, V: int, block_v: int, pool_dtype: str, state_layout: str,
                   read_has_initial_state: bool, read_tail: bool = False):
    """The combine (:mod:`cp_combine`); ``read_tail``: its tail-start form (takes ``tail`` and skips
    the products where M_p = 0)."""
    from . import _compile, _get
    from . import cp_combine

    key = ("cp_combine", HV, K, V, block_v, pool_dtype, state_layout, bool(read_has_initial_state)) + (
        ("tail",) if read_tail else ())
    return _get(key, lambda: _compile(
        cp_combine.build_cp_combine(HV, K, V, block_v, pool_dtype, state_layout, bool(read_has_initial_state),
                                    bool(read_tail)),
        cp_combine.PASS_CONFIGS))


def tail_scan_kernel(HV: int):
    """:mod:`cp_tail`'s kernel: :func:`tail_chunks` in one launch (its torch ops cost 0.35–0.5 ms of
    host per call on the H200, session 18)."""
    from . import _compile, _get
    from . import cp_tail

    key = ("cp_tail_scan", HV, TAIL_LOG_DECAY, TAIL_MAX_CHUNKS)
    return _get(key, lambda: _compile(cp_tail.build_cp_tail_scan(HV, TAIL_LOG_DECAY, TAIL_MAX_CHUNKS),
                                      cp_tail.PASS_CONFIGS))


def tail_scan(gcum: torch.Tensor, tables: CPTables) -> torch.Tensor:
    """:func:`tail_chunks` on the GPU through :func:`tail_scan_kernel` (same result, one launch)."""
    tail = torch.empty(tables.num_partial, gcum.shape[1], dtype=torch.int32, device=gcum.device)
    tail_scan_kernel(gcum.shape[1])(gcum, tables.tail_ends, tail)
    return tail


_phase_kernels: dict[tuple, tuple[Any, Any]] = {}     # (variant, tail) → phase_kernels' answer


def phase_kernels(var, tail: bool = False) -> tuple[Any, Any]:
    """The fused kernel's two CP phases for this variant: phase 1 (partials; ``tail``: its tail-start
    form), phase 3 (from starts). Kept per (variant, tail): every CP call asks, and the two kernel
    keys cost 12 µs of host time to build (CPU machine), a variant's hash 0.5."""
    got = _phase_kernels.get((var, bool(tail)))
    if got is None:
        from . import fwd_kernel

        got = _phase_kernels[(var, bool(tail))] = (fwd_kernel(var, phase=1, tail_start=tail), fwd_kernel(var, phase=3))
    return got


def run_cp_hopper(tables: CPTables, var, *, q, k, v, gcum, a, state_pool, idx, hinit, out, null_slot) -> None:
    """The GPU CP path (called from gdn_prefill_hopper after kkt_solve)."""
    tail = tables.tail_ends is not None
    partials, from_starts = phase_kernels(var, tail=tail)
    comb = combine_kernel(var.num_v_heads, var.head_k_dim, var.head_v_dim, min(COMBINE_BLOCK_V, var.head_v_dim),
                          var.pool_dtype, var.state_layout, var.has_initial_state, read_tail=tail)
    run_cp(tables, q=q, k=k, v=v, gcum=gcum, a=a, state_pool=state_pool, state_indices=idx,
           has_initial_state=hinit, out=out, null_slot=null_slot, state_layout=var.state_layout,
           partials=partials, combine=comb, from_starts=from_starts, tail_of=tail_scan)


def warmup_cp(variants, log=print) -> None:
    """Compile the CP kernels (phases + combine) of these variants: the exact forms, and the
    tail-start forms unless ``QLA_CP_TAIL=0`` (a variant does not say whether its calls' keys are
    unit-norm: an engine's conv may have normalised them)."""
    forms = (False, True) if tail_starts_for(True) else (False,)
    for var in variants:
        for tail in forms:
            phase_kernels(var, tail=tail)
            if tail:
                tail_scan_kernel(var.num_v_heads)
            combine_kernel(var.num_v_heads, var.head_k_dim, var.head_v_dim, min(COMBINE_BLOCK_V, var.head_v_dim),
                           var.pool_dtype, var.state_layout, var.has_initial_state, read_tail=tail)
        if log is not None:
            log(f"qla-serve warmup: CP kernels {var}")


# ----------------------------------------------------------------------------------------------
# Fitting the rule from the sweep (bench_serving/kernel_bench.py --cp-sweep)


def _sweep_table(rows: list[dict], metric: str = "ms") -> dict[tuple, dict[int, float]]:
    """(heads, mix, block_v) → {P of the longest sequence: ``metric``} (``gpu_ms``: GPU-busy time,
    falling back to ``ms`` where a row lacks it). The sweep re-times the rule's own pick last; that
    repeat is a second sample of its P, and each P keeps its faster sample: the short rows are
    host-bound and one slow sample of P = 1 (session 11: 0.233 against 0.088 ms at 8/32 1×2048)
    would otherwise read as a 1.9× loss of not splitting."""
    tab: dict[tuple, dict[int, float]] = {}
    for r in rows:
        t = r.get(metric) or r.get("ms")
        if t is None:
            continue
        key = (r["heads"], r["mix"], r.get("block_v"))
        times = tab.setdefault(key, {})
        p = int(r["p_longest"])
        times[p] = min(float(t), times.get(p, float("inf")))
    return tab


def rule_p_longest(seqlens: Sequence[int], HV: int, V: int, block_v: int, sms: int, params: CPParams) -> int:
    parts = choose_parts(seqlens, HV, V, block_v, sms, params)
    nch = [(n + CHUNK - 1) // CHUNK for n in seqlens]
    return parts[nch.index(max(nch))] if parts else 1


_GRID = {"target_ctas": [66, 132, 198, 264, 396, 528, 792, 1056], "min_chunks": [64, 32, 16, 8, 4, 2],
         "max_parts": [32], "min_seq_chunks": [32, 64, 96, 128]}


def _grid(grid: dict[str, Sequence[int]] | None):
    g = {**_GRID, **(grid or {})}
    return itertools.product(g["target_ctas"], g["min_chunks"], g["max_parts"], g["min_seq_chunks"])


def _measured_at(times: dict[int, float], p: int) -> float:
    """The time measured at P = p, or at the nearest measured P below it (the smallest if none)."""
    return times[max([pp for pp in times if pp <= p] or [min(times)])]


def _score_params(tab: dict, meta: dict, sms: int, params: CPParams) -> dict:
    """Geometric-mean and worst slowdown of the rule's P against the best measured P, per swept
    (row, V-block). Rows whose rule P was not measured count the nearest measured P below it
    (:func:`_measured_at`)."""
    logs, picks = [], {}
    for key, times in tab.items():
        r = meta[key]
        HV = int(r["heads"].split("/")[1])
        p = rule_p_longest(r["seqlens"], HV, 128, int(r.get("block_v") or 64), sms, params)
        t = _measured_at(times, p)
        logs.append(math.log(t / min(times.values())))
        picks[f"{key[0]} {key[1]} bv{key[2]}"] = {"rule_p": p, "best_p": min(times, key=times.get),
                                                   "slowdown": t / min(times.values())}
    return {"geomean_slowdown": math.exp(sum(logs) / max(1, len(logs))),
            "worst_slowdown": max((v["slowdown"] for v in picks.values()), default=1.0), "rows": picks}


def fit_params(sweep: dict, grid: dict[str, Sequence[int]] | None = None) -> dict:
    """Pick CPParams minimising the geometric-mean slowdown of the rule's choice vs the best measured P
    over every swept row (each V-block on its own). ``sweep``: the JSON written by ``kernel_bench.py
    --cp-sweep``. Ties: the smaller worst case, then the grid's order (fewer CTAs, then the longest
    partitions: rows too short to split were not swept, so split no finer than needed; then the
    smallest min_seq_chunks, which leaves every longer sequence's pick as it was)."""
    sms = int(sweep.get("sms", 132))
    tab = _sweep_table(sweep["rows"])
    meta = {(r["heads"], r["mix"], r.get("block_v")): r for r in sweep["rows"]}
    best = None
    for tc, mc, mp, ms in _grid(grid):
        got = _score_params(tab, meta, sms, CPParams(tc, mc, mp, ms))
        if (best is None or got["geomean_slowdown"] < best["geomean_slowdown"] - 1e-9
                or (got["geomean_slowdown"] <= best["geomean_slowdown"] + 1e-9
                    and got["worst_slowdown"] < best["worst_slowdown"] - 1e-9)):
            best = {"params": {"target_ctas": tc, "min_chunks": mc, "max_parts": mp, "min_seq_chunks": ms}, **got}
    return best


_WIDE_CHUNK_US = (None, 0.0, 0.02, 0.04, 0.05, 0.06, 0.08, 0.1, 0.12, 0.15, 0.2)


def fit_wide_block(sweep: dict, params: CPParams = DEFAULT_PARAMS,
                   thresholds: Sequence[int] = (2, 4, 8, 16, 64),
                   chunk_us: Sequence[float | None] = _WIDE_CHUNK_US) -> dict | None:
    """Pick ``wide_block_min_parts`` and ``wide_block_chunk_us`` (with ``params``' split rule) over
    the swept rows measured at both V-blocks that the plan splits: each row walks at the width
    :func:`widen_block_v` gives, with that width's rule P, against the best (V-block, P) measured for
    the row (a row not split at 64 and not widened keeps the walk rule's width: not scored), on
    GPU-busy time (``gpu_ms``; the widths' host work is the same, and the short rows' wall time is the
    host's noise). None without such rows. Ties go to the larger threshold (widen less), then to the
    earlier ``chunk_us`` (None first: no model check)."""
    sms = int(sweep.get("sms", 132))
    tab = _sweep_table(sweep["rows"], "gpu_ms")
    meta = {(r["heads"], r["mix"]): r for r in sweep["rows"]}
    rows = {}
    for (heads, mix, bv) in tab:
        if bv in (64, 128) and (heads, mix, 192 - bv) in tab:
            rows[(heads, mix)] = {b: tab[(heads, mix, b)] for b in (64, 128)}
    best = None
    for t in sorted(thresholds, reverse=True):
        for cu in chunk_us:
            p = replace(params, wide_block_min_parts=t, wide_block_chunk_us=cu)
            logs, picks = [], {}
            for (heads, mix), times in rows.items():
                seqlens, HV = meta[(heads, mix)]["seqlens"], int(heads.split("/")[1])
                bv = 128 if _walks_at_128(seqlens, HV, 128, sms, p) else 64
                rule_p = rule_p_longest(seqlens, HV, 128, bv, sms, p)
                if bv == 64 and rule_p <= 1:
                    continue            # not split: the width stays the walk rule's
                got = _measured_at(times[bv], rule_p)
                floor = min(min(d.values()) for d in times.values())
                logs.append(math.log(got / floor))
                picks[f"{heads} {mix}"] = {"block_v": bv, "rule_p": rule_p, "slowdown": got / floor}
            if not logs:
                return None
            score = math.exp(sum(logs) / len(logs))
            if best is None or score < best["geomean_slowdown"] - 1e-9:
                best = {"wide_block_min_parts": t, "wide_block_chunk_us": cu, "geomean_slowdown": score,
                        "worst_slowdown": max(v["slowdown"] for v in picks.values()), "rows": picks}
    return best


def fit_all(sweep: dict, grid: dict[str, Sequence[int]] | None = None) -> dict:
    """Every CPParams field. With rows measured at both V-blocks, jointly: each grid point of
    :func:`fit_params`' constants with each :func:`fit_wide_block` threshold, scored by what the plan
    really picks (the width, then that width's P) against the best (V-block, P) of each row; ties go
    to :func:`fit_params`' own score. Session 19's tail-start sweep is why: fitted one after the
    other, the constants that suit each V-block alone (1.046) left the joint pick 1.070 off the
    best, against 1.034 for session 11's constants with a lower widening threshold (14 rows scored
    then; 1.039 over all 16 with the rule that judges only long sequences). Without such rows:
    :func:`fit_params`, and the threshold stays the default's."""
    sms = int(sweep.get("sms", 132))
    tab = _sweep_table(sweep["rows"])
    meta = {(r["heads"], r["mix"], r.get("block_v")): r for r in sweep["rows"]}
    best = None
    for tc, mc, mp, ms in _grid(grid):
        params = CPParams(tc, mc, mp, ms)
        own = _score_params(tab, meta, sms, params)
        wide = fit_wide_block(sweep, params)
        key = (own["geomean_slowdown"] if wide is None else wide["geomean_slowdown"], own["geomean_slowdown"])
        if best is None or key < best[0]:
            best = (key, params, own, wide)
    _, params, own, wide = best
    res = {"params": {"target_ctas": params.target_ctas, "min_chunks": params.min_chunks,
                      "max_parts": params.max_parts, "min_seq_chunks": params.min_seq_chunks,
                      "wide_block_min_parts": (wide["wide_block_min_parts"] if wide is not None
                                               else DEFAULT_PARAMS.wide_block_min_parts),
                      "wide_block_chunk_us": (wide["wide_block_chunk_us"] if wide is not None
                                              else DEFAULT_PARAMS.wide_block_chunk_us)}, **own}
    res["wide_block"] = wide
    return res


_COST_GRID = {"fixed": (0.0, 5.0, 10.0, 15.0, 20.0, 25.0, 30.0),
              "per_chunk": tuple(round(1.2 + 0.1 * i, 1) for i in range(19)),
              "per_part": (0.0, 1.0, 2.0, 3.0, 4.0, 6.0)}


def fit_cost(sweep: dict, grid: dict[str, Sequence[float]] | None = None) -> dict:
    """:data:`CP_COST_US` from a sweep: per V-block, the (fixed, per_chunk, per_part) of the grid whose
    :func:`cp_estimate_us` plus one offset per row (the median residual over its P ≥ 2: what every P
    of the row pays alike) is closest to the measured GPU-busy times (``gpu_ms``, else ``ms``), by mean
    relative error over the rows' P ≥ 2, with each row's offset (``row_offsets_us``: what turns the
    model's figure into a prediction of that row's time). Only differences between the P of one row
    matter to the rule."""
    g = {**_COST_GRID, **(grid or {})}
    sms = int(sweep.get("sms", 132))
    rows: dict[tuple, list[tuple[float, list[tuple[int, int]], int, int]]] = {}
    for r in sweep["rows"]:
        t = r.get("gpu_ms") or r.get("ms")
        if not t or r.get("forced") == "rule" or max(r["parts"]) < 2:
            continue
        nch = [(n + CHUNK - 1) // CHUNK for n in r["seqlens"]]
        ctas = int(r["heads"].split("/")[1]) * (128 // int(r["block_v"]))
        rows.setdefault((r["heads"], r["mix"], int(r["block_v"])), []).append(
            (t * 1e3, walk_items(nch, r["parts"]), ctas, _extra_parts(nch, r["parts"])))
    out = {}
    for bv in sorted({key[2] for key in rows}):
        best = None
        for fixed, per_chunk, per_part in itertools.product(g["fixed"], g["per_chunk"], g["per_part"]):
            errs, offsets = [], {}
            for key, pts in rows.items():
                if key[2] != bv:
                    continue
                est = [_estimate_us(items, extra, ctas, (fixed, per_chunk, per_part), sms)
                       for _, items, ctas, extra in pts]
                off = offsets[f"{key[0]} {key[1]}"] = float(np.median([m - e for (m, *_), e in zip(pts, est)]))
                errs += [abs(m - e - off) / m for (m, *_), e in zip(pts, est)]
            score = sum(errs) / len(errs)
            if best is None or score < best[0] - 1e-12:
                best = (score, (fixed, per_chunk, per_part), float(np.median(errs)), offsets)
        out[bv] = {"cost_us": best[1], "mean_rel_error": best[0], "median_rel_error": best[2],
                   "row_offsets_us": best[3]}
    return out


def compare_counts(sweep: dict, params: CPParams = DEFAULT_PARAMS) -> dict:
    """Whether the rule should weigh any partition count (``any_count``) or powers of two only, from
    a sweep's measured times (wall ``ms``, as :func:`fit_params` scores): per swept (row, V-block),
    the time at each form's pick. A row whose any-count pick was not measured cannot be scored;
    ``any_count`` is recommended only when every row is scored and the geometric mean of the
    ratios any/pow2 is below 1."""
    sms = int(sweep.get("sms", 132))
    tab = _sweep_table(sweep["rows"])
    meta = {(r["heads"], r["mix"], r.get("block_v")): r for r in sweep["rows"]}
    rows, logs, unmeasured = {}, [], []
    for key, times in tab.items():
        r = meta[key]
        HV, bv = int(r["heads"].split("/")[1]), int(r.get("block_v") or 64)
        p2 = rule_p_longest(r["seqlens"], HV, 128, bv, sms, replace(params, any_count=False))
        pa = rule_p_longest(r["seqlens"], HV, 128, bv, sms, replace(params, any_count=True))
        name = f"{key[0]} {key[1]} bv{key[2]}"
        if pa not in times or p2 not in times:
            unmeasured.append(name)
            continue
        rows[name] = {"pow2_p": p2, "any_p": pa, "ratio": times[pa] / times[p2]}
        logs.append(math.log(times[pa] / times[p2]))
    geo = math.exp(sum(logs) / len(logs)) if logs else None
    return {"any_count": bool(logs) and not unmeasured and geo < 1.0, "geomean_any_over_pow2": geo,
            "unmeasured": unmeasured, "rows": rows}


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m qla_serve.kernels.hopper.cp fit SWEEP.json [OUT.json]``: print the fitted constants."""
    import sys

    argv = list(sys.argv[1:] if argv is None else argv)
    if len(argv) < 2 or argv[0] != "fit":
        raise SystemExit("usage: python -m qla_serve.kernels.hopper.cp fit cp_sweep.json [cp_fit.json]")
    with open(argv[1]) as f:
        sweep = json.load(f)
    res = fit_all(sweep)
    print(json.dumps(res, indent=1))
    p = res["params"]
    wide = res["wide_block"]
    print(f"\nDEFAULT_PARAMS = CPParams(target_ctas={p['target_ctas']}, min_chunks={p['min_chunks']}, "
          f"max_parts={p['max_parts']}, min_seq_chunks={p['min_seq_chunks']}, "
          f"wide_block_min_parts={p['wide_block_min_parts']}, "
          f"wide_block_chunk_us={p['wide_block_chunk_us']})   # geomean slowdown {res['geomean_slowdown']:.3f}"
          + ("" if wide is None else f"; joint V-block choice {wide['geomean_slowdown']:.3f}"))
    cost = fit_cost(sweep)
    counts = compare_counts(sweep, replace(DEFAULT_PARAMS, **p))
    res["cost"], res["counts"] = {str(bv): c for bv, c in cost.items()}, counts
    print("CP_COST_US = {" + ", ".join(f"{bv}: {c['cost_us']}" for bv, c in cost.items()) + "}   # mean |error| "
          + ", ".join(f"{c['mean_rel_error']:.3f} (V-block {bv})" for bv, c in cost.items()))
    print(f"any_count = {counts['any_count']}   # any/pow2 geomean {counts['geomean_any_over_pow2']}; "
          f"rows whose any-count pick was not measured: {counts['unmeasured'] or 'none'}")
    if len(argv) > 2:
        with open(argv[2], "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
