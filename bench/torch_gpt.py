#!/usr/bin/python3
"""The peer for bench/train-cpu.sh: the same GPT-2 model and AdamW in PyTorch
(CPU), timed the same way: tokens per second over steps after warm-up.

    torch_gpt.py LAYERS HIDDEN HEADS VOCAB BATCH SEQ STEPS THREADS [fp32|bf16 [DROPOUT]]
prints one line: "tokens_per_s N". bf16 runs the forward pass and the loss
under torch.autocast('cpu', dtype=torch.bfloat16) (fp32 weights and AdamW;
oneDNN's AVX512_BF16 kernels where the CPU has them). DROPOUT (default 0)
drops at gptkit's sites: the embeddings' sum, the attention
probabilities and both residual branches.
"""
import math
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, C, nh, p=0.0):
        super().__init__()
        self.nh, self.p = nh, p
        self.ln_1, self.ln_2 = nn.LayerNorm(C), nn.LayerNorm(C)
        self.qkv, self.proj = nn.Linear(C, 3 * C), nn.Linear(C, C)
        self.fc, self.mproj = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln_1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.nh, C // self.nh).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(C // self.nh)
        mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
        att = F.dropout(att.masked_fill(~mask, float("-inf")).softmax(dim=-1), self.p, self.training)
        y = (att @ v).transpose(1, 2).reshape(B, T, C)
        x = x + F.dropout(self.proj(y), self.p, self.training)
        h = self.mproj(F.gelu(self.fc(self.ln_2(x)), approximate="tanh"))
        return x + F.dropout(h, self.p, self.training)


class GPT(nn.Module):
    def __init__(self, L, C, nh, V, maxT, p):
        super().__init__()
        self.p = p
        self.wte, self.wpe = nn.Embedding(V, C), nn.Embedding(maxT, C)
        self.h = nn.ModuleList(Block(C, nh, p) for _ in range(L))
        self.ln_f = nn.LayerNorm(C)

    def forward(self, idx, tgt):
        x = F.dropout(self.wte(idx) + self.wpe(torch.arange(idx.shape[1])), self.p, self.training)
        for b in self.h:
            x = b(x)
        logits = self.ln_f(x) @ self.wte.weight.T
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt.reshape(-1))


def main():
    L, C, nh, V, B, T, steps, threads = map(int, sys.argv[1:9])
    bf16 = len(sys.argv) > 9 and sys.argv[9] == "bf16"
    p = float(sys.argv[10]) if len(sys.argv) > 10 else 0.0
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    model = GPT(L, C, nh, V, T, p)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.1)
    data = torch.randint(0, V, (B, T + 1))
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            loss = model(data[:, :-1], data[:, 1:])
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        times.append(time.perf_counter() - t0)
    warm = times[2:] if len(times) > 3 else times
    print(f"tokens_per_s {B * T * len(warm) / sum(warm):.1f}")


if __name__ == "__main__":
    main()
