#!/usr/bin/python3
"""The peer for bench/infer-cpu.sh and bench/gpu/infer.sh: GPT-2 generation
with a KV cache in PyTorch (eager), timed as gpt-infer --stats times
itself: the prompt pass, then one pass per generated token (greedy),
batch B.

    torch_infer.py LAYERS HIDDEN HEADS VOCAB MAXPOS BATCH PROMPT GEN THREADS DTYPE [DEVICE]
DTYPE: fp32, bf16 or fp16 (weights and compute in that type; fp16 on a GPU
only) or int8 (dynamic quantization of the linears: int8 weights,
per-token int8 activations; CPU only). DEVICE: cpu (the default) or cuda,
where each time is taken after the device has finished.
Prints one line: "prompt_tok_s P gen_tok_s G".
"""
import math
import sys
import time

import torch
import torch.nn as nn


class Block(nn.Module):
    def __init__(self, C, nh):
        super().__init__()
        self.nh = nh
        self.ln_1, self.ln_2 = nn.LayerNorm(C), nn.LayerNorm(C)
        self.qkv, self.proj = nn.Linear(C, 3 * C), nn.Linear(C, C)
        self.fc, self.mproj = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)

    def forward(self, x, cache):
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln_1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.nh, C // self.nh).transpose(1, 2) for t in (q, k, v))
        if cache:
            k = torch.cat([cache[0], k], 2)
            v = torch.cat([cache[1], v], 2)
        S = k.shape[2]
        att = (q @ k.transpose(-2, -1)) / math.sqrt(C // self.nh)
        if T > 1:
            mask = torch.ones(T, S, dtype=torch.bool, device=x.device).tril(S - T)
            att = att.masked_fill(~mask, float("-inf"))
        y = (att.softmax(-1) @ v).transpose(1, 2).reshape(B, T, C)
        x = x + self.proj(y)
        x = x + self.mproj(nn.functional.gelu(self.fc(self.ln_2(x)), approximate="tanh"))
        return x, (k, v)


class GPT(nn.Module):
    def __init__(self, L, C, nh, V, P):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(V, C), nn.Embedding(P, C)
        self.h = nn.ModuleList([Block(C, nh) for _ in range(L)])
        self.ln_f = nn.LayerNorm(C)
        self.head = nn.Linear(C, V, bias=False)
        self.head.weight = self.wte.weight

    def forward(self, idx, caches, t0):
        T = idx.shape[1]
        x = self.wte(idx) + self.wpe(torch.arange(t0, t0 + T, device=idx.device))
        out = []
        for i, blk in enumerate(self.h):
            x, c = blk(x, caches[i] if caches else None)
            out.append(c)
        return self.head(self.ln_f(x[:, -1:, :])), out


def main():
    L, C, nh, V, P, B, TP, TG, threads = (int(x) for x in sys.argv[1:10])
    dtype = sys.argv[10]
    dev = torch.device(sys.argv[11] if len(sys.argv) > 11 else "cpu")
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    m = GPT(L, C, nh, V, P).eval()
    if dtype == "bf16":
        m = m.to(torch.bfloat16)
    elif dtype == "fp16":
        m = m.to(torch.float16)
    elif dtype == "int8":
        m = torch.ao.quantization.quantize_dynamic(m, {nn.Linear}, dtype=torch.qint8)
    m = m.to(dev)
    prompt = torch.randint(0, V, (B, TP), device=dev)

    def now():
        if dev.type == "cuda":
            torch.cuda.synchronize()
        return time.perf_counter()

    with torch.inference_mode():
        m(prompt[:, :8], None, 0)  # warm-up
        t0 = now()
        logits, caches = m(prompt, None, 0)
        t1 = now()
        for i in range(TG):
            nxt = logits[:, -1, :].argmax(-1, keepdim=True)
            logits, caches = m(nxt, caches, TP + i)
        t2 = now()
    print("prompt_tok_s %.1f gen_tok_s %.1f" % (B * TP / (t1 - t0), B * TG / (t2 - t1)))


main()
