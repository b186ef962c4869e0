#!/usr/bin/python3
"""Attention's dq with D_i from the stored output, against the exact sum.

The backward of softmax attention needs, per query row, D_i = sum_j p_ij dp_ij
(dp: the gradient of the dropped probabilities). gptkit's CUDA kernels
(lib/cuda/attention*.cu) find it with a first walk over the keys, from the
same p and dp the gradient then uses. FlashAttention-2 skips that walk with
D_i = dout_i . out_i, which is equal in exact arithmetic, but `out` is stored
in the 16-bit dtype, so D carries that rounding into every term of dq.

This prints, per head size and dropout, the worst error of dq over 20 random
heads (uniform inputs, the scales of tests/gpu/test-cuda-ops.c) relative to
|dq| + rms(dq) as test-cuda-ops measures it, against an fp64 reference: D
from fp32 p and dp ("walk"), and from bf16 or fp16 `out` ("from out"). Only
the D term differs; everything else is exact.

    /usr/bin/python3 bench/attn_dq_error.py
"""
import torch


def worst_errors(T, HS, p, dtype, trials=20, seed=0):
    gen = torch.Generator().manual_seed(seed)

    def rnd(*shape, scale=1.0):
        x = (torch.rand(*shape, generator=gen, dtype=torch.float64) * 2 - 1) * scale
        return x.to(dtype).double()  # values the 16-bit inputs can hold

    worst = {"walk": 0.0, "from out": 0.0}
    causal = torch.tril(torch.ones(T, T, dtype=torch.bool))
    for _ in range(trials):
        q, k, v = (rnd(T, HS, scale=1.5) for _ in range(3))
        g = rnd(T, HS)
        keep = (torch.rand(T, T, generator=gen, dtype=torch.float64) >= p).double() / (1 - p)
        s = (q @ k.T / HS**0.5).masked_fill(~causal, float("-inf"))
        P = torch.softmax(s, -1)
        out = (P * keep) @ v
        dP = (g @ v.T) * keep
        exact = (P * dP).sum(-1, keepdim=True)
        dq = (P * (dP - exact)) @ k / HS**0.5
        rms = dq.pow(2).mean().sqrt()
        ds = {
            "walk": (P.float() * dP.float()).sum(-1, keepdim=True).double(),
            "from out": (g.float() * out.to(dtype).float()).sum(-1, keepdim=True).double(),
        }
        for name, D in ds.items():
            got = (P * (dP - D)) @ k / HS**0.5
            e = ((got - dq).abs() / (dq.abs() + rms)).max().item()
            worst[name] = max(worst[name], e)
    return worst


def main():
    print(f"{'dtype':6} {'HS':>4} {'p':>4} {'walk':>10} {'from out':>10}")
    for dtype, name in ((torch.bfloat16, "bf16"), (torch.float16, "fp16")):
        for HS in (32, 64, 128):
            for p in (0.0, 0.1):
                w = worst_errors(45, HS, p, dtype)
                print(f"{name:6} {HS:4} {p:4} {w['walk']:10.2e} {w['from out']:10.2e}")


if __name__ == "__main__":
    main()
