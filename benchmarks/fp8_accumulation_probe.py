"""How Triton's fp8 tl.dot accumulates on Hopper, against torch._scaled_mm (cuBLAS) and the exact
product: which max_num_imprecise_acc reproduces cuBLAS (the answer decided tilecraft's fp8 MMA lowering).
Prints one line per mode; run on a GPU: python3 benchmarks/fp8_accumulation_probe.py"""

import torch
import triton
import triton.language as tl


@triton.jit
def mm(A, B, C, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, MODE: tl.constexpr):
    pm, pn = tl.program_id(0), tl.program_id(1)
    rm = pm * BM + tl.arange(0, BM)
    rn = pn * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), tl.float32)
    for k in range(0, K, BK):
        a = tl.load(A + rm[:, None] * K + (k + rk)[None, :])
        b = tl.load(B + (k + rk)[:, None] * N + rn[None, :])
        if MODE == 0:
            acc = tl.dot(a, b, acc)
        elif MODE == 1:
            acc = tl.dot(a, b, acc, max_num_imprecise_acc=32)
        elif MODE == 2:
            acc = tl.dot(a.to(tl.float16), b.to(tl.float16), acc)
        elif MODE == 3:
            acc = tl.dot(a, b, acc, max_num_imprecise_acc=0)
        else:
            acc = tl.dot(a, b, acc, max_num_imprecise_acc=BK)
    tl.store(C + rm[:, None] * N + rn[None, :], acc)


torch.manual_seed(0)
M, N, K = 512, 1024, 256
A = torch.randn(M, K, device="cuda").to(torch.float8_e4m3fn)
B = torch.randn(K, N, device="cuda").to(torch.float8_e4m3fn)
one = torch.tensor(1.0, device="cuda")
ref = torch._scaled_mm(A, B.t().contiguous().t(), scale_a=one, scale_b=one, out_dtype=torch.float32)
exact = A.double() @ B.double()
print("scaled_mm vs exact", (ref.double() - exact).abs().max().item())
for mode in range(5):
    C = torch.empty(M, N, device="cuda")
    try:
        mm[(M // 128, N // 256)](A, B, C, M, N, K, 128, 256, 128, mode)
        print("mode", mode, "vs scaled_mm", (C - ref).abs().max().item(), "vs exact", (C.double() - exact).abs().max().item(),
              "close", torch.allclose(C, ref, rtol=1.3e-6, atol=1e-5))
    except Exception as e:
        print("mode", mode, "fails", type(e).__name__, str(e)[:200])
