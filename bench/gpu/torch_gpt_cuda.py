#!/usr/bin/env python3
"""The peer for bench/gpu/train.sh: the same GPT-2 on the same GPU in PyTorch,
as a practitioner would write it for speed: scaled_dot_product_attention
(flash attention), torch.compile, bf16 autocast (or fp16 autocast with a
GradScaler, or plain fp32), fused AdamW; optional activation checkpointing
of every block (the counterpart of Model.use_recompute, granularity full).
Timed as gpt-train's log is read: mean step time after warm-up steps.

    torch_gpt_cuda.py LAYERS HIDDEN HEADS VOCAB BATCH SEQ STEPS bf16|fp16|fp32 [recompute]

prints one line: "tokens_per_s N peak_mib M" (M: torch.cuda.max_memory_reserved,
the allocator's peak, not counting the CUDA context). NO_COMPILE=1 skips
torch.compile (for PyTorch builds without a working compiler). DROPOUT=p
(default 0) drops where gptkit's hidden_dropout_prob and
attention_probs_dropout_prob do: the embedding's output, each block's two
residual branches, and the attention probabilities (SDPA's dropout_p).
"""
import math
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint


sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import torch_gpt  # noqa: E402  (bench/torch_gpt.py: the CPU peer's block)


DROP = float(os.environ.get("DROPOUT", "0"))


class Block(torch_gpt.Block):
    """The CPU peer's block with flash attention instead of the T x T matrix."""

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln_1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.nh, C // self.nh).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True, dropout_p=DROP)
        x = x + F.dropout(self.proj(y.transpose(1, 2).reshape(B, T, C)), DROP)
        return x + F.dropout(self.mproj(F.gelu(self.fc(self.ln_2(x)), approximate="tanh")), DROP)


class GPT(nn.Module):
    def __init__(self, L, C, nh, V, maxT, recompute):
        super().__init__()
        self.recompute = recompute
        self.wte, self.wpe = nn.Embedding(V, C), nn.Embedding(maxT, C)
        self.h = nn.ModuleList(Block(C, nh) for _ in range(L))
        self.ln_f = nn.LayerNorm(C)
        for n, p in self.named_parameters():
            if p.dim() == 2:
                std = 0.02 / math.sqrt(2 * L) if n.endswith(("proj.weight", "mproj.weight")) else 0.02
                nn.init.normal_(p, 0.0, std)

    def forward(self, idx, tgt):
        T = idx.shape[1]
        x = F.dropout(self.wte(idx) + self.wpe(torch.arange(T, device=idx.device)), DROP)
        for b in self.h:
            x = checkpoint(b, x, use_reentrant=False) if self.recompute else b(x)
        logits = self.ln_f(x) @ self.wte.weight.T
        return F.cross_entropy(logits.float().view(-1, logits.size(-1)), tgt.view(-1))


def main():
    a = sys.argv[1:]
    if len(a) not in (8, 9) or a[7] not in ("bf16", "fp16", "fp32"):
        sys.exit(__doc__)
    L, C, nh, V, B, T, steps = (int(x) for x in a[:7])
    prec, recompute = a[7], len(a) == 9 and a[8] == "recompute"
    dev = torch.device("cuda")
    torch.manual_seed(0)
    torch.backends.cuda.matmul.allow_tf32 = False  # gptkit's fp32 is fp32
    model = GPT(L, C, nh, V, T, recompute).to(dev)
    decay = [p for n, p in model.named_parameters() if p.dim() == 2]
    other = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01},
                             {"params": other, "weight_decay": 0.0}],
                            lr=1e-4, betas=(0.9, 0.95), eps=1e-8, fused=True)
    step_fn = model
    if os.environ.get("NO_COMPILE") != "1" and hasattr(torch, "compile"):
        step_fn = torch.compile(model)
    amp = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(prec)
    if hasattr(torch, "amp") and hasattr(torch.amp, "GradScaler"):  # torch.cuda.amp's is deprecated
        scaler = torch.amp.GradScaler("cuda", enabled=prec == "fp16")
    else:
        scaler = torch.cuda.amp.GradScaler(enabled=prec == "fp16")
    g = torch.Generator(device="cpu").manual_seed(1)
    data = torch.randint(0, V, (B, T + 1), generator=g).to(dev)
    x, y = data[:, :-1].contiguous(), data[:, 1:].contiguous()

    def step():
        with torch.autocast("cuda", dtype=amp, enabled=amp is not None):
            loss = step_fn(x, y)
        scaler.scale(loss).backward()
        scaler.unscale_(opt)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(opt)
        scaler.update()
        opt.zero_grad(set_to_none=True)

    warm = 3
    for _ in range(warm):
        step()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    torch.cuda.synchronize()
    dt = time.perf_counter() - t0
    print(f"tokens_per_s {B * T * steps / dt:.0f} peak_mib {torch.cuda.max_memory_reserved() / 2**20:.0f}")


if __name__ == "__main__":
    main()
