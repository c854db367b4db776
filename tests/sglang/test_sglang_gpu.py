"""On the H200 (needs SGLang importable there): the adapter on CUDA with the TileLang kernel against
the reference backend on the same SGLang-shaped inputs."""
from __future__ import annotations

import pytest
import torch

from qla_sgl_helpers import make_batch, rel
from qla_serve.integrations.sglang.kernel import QLAGDNKernel

pytestmark = [pytest.mark.gpu, pytest.mark.sglang]


def extend_on_cuda(batch, backend, monkeypatch, **kw):
    monkeypatch.setenv("QLA_BACKEND", backend)
    q, k, v = batch.qkv("cuda")
    g, beta = batch.gates("cuda")
    pool = batch.pool.cuda()
    kernel = QLAGDNKernel()
    kernel.host_seqlens = list(batch.lens)
    o, _, _ = kernel.extend(q, k, v, g, beta, ssm_states=pool,
                            cache_indices=torch.tensor(batch.slots, dtype=torch.int32, device="cuda"),
                            query_start_loc=batch.cu.cuda(), **kw)
    torch.cuda.synchronize()
    return o.cpu(), pool.cpu()


@pytest.fixture(autouse=True)
def hopper():
    if torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("the TileLang kernels need sm_90")


@pytest.mark.parametrize("pool_dtype", [torch.float32, torch.bfloat16])
def test_tilelang_matches_reference(monkeypatch, pool_dtype):
    batch = make_batch((700, 1, 64, 1300, 33), [3, -1, 0, 7, 5], H=2, HV=8, pool_dtype=pool_dtype, seed=11)
    o_tl, pool_tl = extend_on_cuda(batch, "tilelang", monkeypatch)
    o_ref, pool_ref = extend_on_cuda(batch, "reference", monkeypatch)
    assert rel(o_tl, o_ref) < 1e-2
    for slot in (3, 0, 7, 5):
        assert rel(pool_tl[slot], pool_ref[slot]) < 1e-2, slot
    assert torch.count_nonzero(o_tl[0, 700:701]) == 0
    for row in (1, 2, 4, 6, 8):
        assert torch.equal(pool_tl[row], batch.pool[row]), row


def test_track_snapshot_on_cuda(monkeypatch):
    batch = make_batch((300, 70), [3, 5], H=2, HV=8, seed=12)
    idx = torch.tensor([4, -1], dtype=torch.int32, device="cuda")
    snaps = []
    for backend in ("auto", "reference"):
        track = torch.zeros(2, 8, 128, 128, device="cuda")
        extend_on_cuda(batch, backend, monkeypatch, track_state=track, track_chunk_idx=idx)
        snaps.append(track.cpu())
    assert rel(snaps[0][0], snaps[1][0]) < 1e-3 and torch.count_nonzero(snaps[0][1]) == 0
