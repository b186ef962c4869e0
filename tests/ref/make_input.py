#!/usr/bin/python3
"""Writes a reference input for gpt_ref.py and `test-tool model-ref`: a tiny
GPT's weights (GPT-2 style random init, non-trivial biases and LayerNorm
parameters so every gradient path is exercised), a batch of tokens and the
config in __metadata__.

    make_input.py OUT.safetensors [key=value ...]

Keys: layers, hidden, heads, ffn, vocab, padded_vocab, max_pos, batch, seq,
seed, recompute (none|full|only_attn|core_attn), head_rows (the fused
classifier's block rows for test-tool; 0: automatic), and the AdamW settings
lr, beta1, beta2, epsilon, weight_decay, grad_clip, steps.
"""
import json
import struct
import sys

import numpy as np


def main():
    cfg = {"layers": 2, "hidden": 32, "heads": 4, "ffn": 128, "vocab": 100, "padded_vocab": 128,
           "max_pos": 16, "batch": 3, "seq": 12, "seed": 1, "recompute": "none", "head_rows": 0, "lr": 1e-3,
           "beta1": 0.9, "beta2": 0.95, "epsilon": 1e-8, "weight_decay": 0.1, "grad_clip": 1.0,
           "steps": 3}
    for kv in sys.argv[2:]:
        k, v = kv.split("=", 1)
        cfg[k] = type(cfg[k])(v)
    rng = np.random.default_rng(cfg["seed"])
    C, F, L = cfg["hidden"], cfg["ffn"], cfg["layers"]
    n = lambda *s: rng.normal(0, 0.02, s)  # noqa: E731
    small = lambda *s: rng.normal(0, 0.1, s)  # noqa: E731
    p = {"wte": n(cfg["padded_vocab"], C), "wpe": n(cfg["max_pos"], C)}
    p["wte"][cfg["vocab"]:] = 0
    for i in range(L):
        h = f"h.{i}."
        p[h + "ln_1.weight"], p[h + "ln_1.bias"] = 1 + small(C), small(C)
        p[h + "attn.qkv.weight"], p[h + "attn.qkv.bias"] = n(3, C, C) * 5, small(3, C)
        p[h + "attn.proj.weight"], p[h + "attn.proj.bias"] = n(C, C), small(C)
        p[h + "ln_2.weight"], p[h + "ln_2.bias"] = 1 + small(C), small(C)
        p[h + "mlp.fc.weight"], p[h + "mlp.fc.bias"] = n(F, C), small(F)
        p[h + "mlp.proj.weight"], p[h + "mlp.proj.bias"] = n(C, F), small(C)
    p["ln_f.weight"], p["ln_f.bias"] = 1 + small(C), small(C)
    tensors = {k: v.astype(np.float32) for k, v in p.items()}
    tensors["tokens"] = rng.integers(0, cfg["vocab"], (cfg["batch"], cfg["seq"] + 1)).astype(np.int32)
    meta = {"vocab_size": cfg["vocab"], "num_attention_heads": cfg["heads"], "recompute": cfg["recompute"],
            "head_rows": cfg["head_rows"]}
    for k in ("lr", "beta1", "beta2", "epsilon", "weight_decay", "grad_clip", "steps"):
        meta[k] = cfg[k]
    header, chunks, off = {"__metadata__": {"config": json.dumps(meta)}}, [], 0
    for k, a in tensors.items():
        raw = a.tobytes()
        header[k] = {"dtype": "I32" if a.dtype == np.int32 else "F32", "shape": list(a.shape),
                     "data_offsets": [off, off + len(raw)]}
        chunks.append(raw)
        off += len(raw)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(sys.argv[1], "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for c in chunks:
            f.write(c)


if __name__ == "__main__":
    main()
