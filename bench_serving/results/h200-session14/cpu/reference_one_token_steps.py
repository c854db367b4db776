import time, torch, sys, logging
logging.disable(logging.WARNING)
import qla_serve
from qla_serve import gdn_prefill, plan_prefill
print(qla_serve.__file__)
torch.manual_seed(0)
H, HV, K = 2, 4, 128
for lens in ([1,1,1,508], [1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,497], [512], [1,1,1]):
    T = sum(lens); N=len(lens)
    q = torch.randn(T,H,K).bfloat16(); k = torch.randn(T,H,K).bfloat16(); v = torch.randn(T,HV,K).bfloat16()
    g = -torch.rand(T, HV); beta = torch.rand(T, HV)
    pool = torch.randn(N+1, HV, K, K)
    cu = torch.tensor([0]+torch.tensor(lens).cumsum(0).tolist(), dtype=torch.int32)
    idx = torch.arange(1, N+1)
    ts=[]
    for _ in range(7):
        plan = plan_prefill(cu)
        t=time.perf_counter()
        gdn_prefill(q,k,v,g,beta,state_pool=pool,state_indices=idx,cu_seqlens=cu,plan=plan,use_qk_l2norm=True, state_layout="kv", has_initial_state=torch.ones(N,dtype=torch.bool))
        ts.append(time.perf_counter()-t)
    print(lens if len(lens)<6 else f"{len(lens)-1}x1+{lens[-1]}", f"{min(ts)*1e3:.2f} ms")
