#!/usr/bin/env python3
"""The peer for build/bench/gpu-ops' attention rows: PyTorch's
scaled_dot_product_attention (causal; flash attention on a Hopper GPU) at
the same shapes and dtype, on q, k and v laid out as gptkit's qkv (B, T, 3,
NH, HS), timed with CUDA events: the mean of 10 calls after 3 warm-ups, the
backward as (forward + backward) - forward; without dropout and with
dropout_p=0.1 (the seed configs'), as gpu-ops. FLOPs counted as FlashAttention
counts them (forward 2 B NH T^2 HS, backward 2.5 times that), as gpu-ops
does.

    torch_attn.py [bf16|fp16]

prints rows like gpu-ops': model, op, ms, TFLOP/s.
"""
import sys

import torch
import torch.nn.functional as F

SHAPES = [("124M", 32, 1024, 12, 64), ("345M", 8, 1024, 16, 64), ("1.3B", 8, 1024, 16, 128)]
WARM, REPS = 3, 10


def timed(fn):
    for _ in range(WARM):
        fn()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(REPS):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / REPS  # ms


def main():
    dt = {"bf16": torch.bfloat16, "fp16": torch.float16}[sys.argv[1] if len(sys.argv) > 1 else "bf16"]
    if not torch.cuda.is_available():
        print("torch_attn: no CUDA device")
        return
    torch.manual_seed(0)
    for name, b, t, nh, hs in SHAPES:
        qkv = (torch.rand(b, t, 3, nh, hs, device="cuda", dtype=dt) * 3 - 1.5).requires_grad_()
        dout = torch.rand(b, nh, t, hs, device="cuda", dtype=dt) * 2 - 1

        for p in (0.0, 0.1):
            ps = " p=0.1" if p else ""

            def fwd():
                q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)
                return F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=True)

            def fwd_bwd():
                qkv.grad = None
                fwd().backward(dout)

            flops = 2.0 * b * nh * t * t * hs
            with torch.no_grad():
                f_ms = timed(fwd)
            fb_ms = timed(fwd_bwd)
            b_ms = fb_ms - f_ms
            print("%-6s %-30s %9.3f %9.1f TFLOP/s" % (name, "torch sdpa_fwd HS=%d%s" % (hs, ps), f_ms, flops / f_ms / 1e9))
            print("%-6s %-30s %9.3f %9.1f TFLOP/s" % (name, "torch sdpa_bwd HS=%d%s" % (hs, ps), b_ms, 2.5 * flops / b_ms / 1e9))
        del qkv, dout


if __name__ == "__main__":
    main()
