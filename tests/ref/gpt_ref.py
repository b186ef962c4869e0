#!/usr/bin/python3
"""PyTorch reference for gptkit's GPT: the same model, from the same weights.

    gpt_ref.py IN.safetensors OUT.safetensors

IN holds every parameter under its global gptkit name (DESIGN.md section 4:
wte [Vp, C], wpe [maxT, C], h.{i}.ln_1.weight, h.{i}.attn.qkv.weight [3, C, C],
...), an int32 tensor "tokens" [B, T + 1], and in __metadata__ a JSON string
"config" with vocab_size (the true vocabulary), num_attention_heads,
layer_norm_eps and the AdamW settings (lr, beta1, beta2, epsilon,
weight_decay, grad_clip, steps).

OUT receives, computed in float64: "logits" [B, T, Vp], "loss", "grad.NAME"
for every parameter (from the first forward/backward), "loss.K" for each of
the AdamW steps K = 1..steps on the same batch, and "final.NAME" after them.
Weight decay applies to every parameter but biases and LayerNorm weights;
padded vocabulary rows (>= vocab_size) are left out of the softmax.

Only the Python standard library, numpy and torch: the safetensors format is
read and written here directly.
"""
import json
import math
import struct
import sys

import numpy as np
import torch

DTYPES = {"F32": np.float32, "F64": np.float64, "I32": np.int32, "I64": np.int64,
          "F16": np.float16, "U16": np.uint16, "I8": np.int8}


def load_safetensors(path):
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    meta = header.pop("__metadata__", {})
    data = blob[8 + n:]
    tensors = {}
    for name, info in header.items():
        b, e = info["data_offsets"]
        if info["dtype"] == "BF16":
            raw = np.frombuffer(data[b:e], dtype=np.uint16).astype(np.uint32) << 16
            arr = raw.view(np.float32)
        else:
            arr = np.frombuffer(data[b:e], dtype=DTYPES[info["dtype"]])
        tensors[name] = arr.reshape(tuple(info["shape"])).copy()
    return tensors, meta


def save_safetensors(path, tensors):
    header, chunks, off = {}, [], 0
    for name, arr in tensors.items():
        arr = np.array(arr, order="C")  # ascontiguousarray would turn 0-d into 1-d
        code = {np.dtype(np.float64): "F64", np.dtype(np.float32): "F32"}[arr.dtype]
        raw = arr.tobytes()
        header[name] = {"dtype": code, "shape": list(arr.shape), "data_offsets": [off, off + len(raw)]}
        chunks.append(raw)
        off += len(raw)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for c in chunks:
            f.write(c)


def layer_count(params):
    return 1 + max(int(k.split(".")[1]) for k in params if k.startswith("h."))


def forward(p, tokens, cfg):
    """Logits [B, T, Vp] and the mean cross-entropy over the true vocabulary."""
    inp, tgt = tokens[:, :-1], tokens[:, 1:]
    B, T = inp.shape
    C = p["wte"].shape[1]
    nh = cfg["num_attention_heads"]
    hs = C // nh
    eps = cfg.get("layer_norm_eps", 1e-5)
    x = p["wte"][inp] + p["wpe"][:T]
    mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
    for i in range(layer_count(p)):
        h = f"h.{i}."
        a = torch.nn.functional.layer_norm(x, (C,), p[h + "ln_1.weight"], p[h + "ln_1.bias"], eps)
        w = p[h + "attn.qkv.weight"]  # [3, C, C]: q, k, v, each [out, in]
        bq = p[h + "attn.qkv.bias"]   # [3, C]
        q, k, v = (a @ w[j].T + bq[j] for j in range(3))
        q, k, v = (t.view(B, T, nh, hs).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(hs)
        att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, C)
        x = x + y @ p[h + "attn.proj.weight"].T + p[h + "attn.proj.bias"]
        m = torch.nn.functional.layer_norm(x, (C,), p[h + "ln_2.weight"], p[h + "ln_2.bias"], eps)
        m = torch.nn.functional.gelu(m @ p[h + "mlp.fc.weight"].T + p[h + "mlp.fc.bias"], approximate="tanh")
        x = x + m @ p[h + "mlp.proj.weight"].T + p[h + "mlp.proj.bias"]
    x = torch.nn.functional.layer_norm(x, (C,), p["ln_f.weight"], p["ln_f.bias"], eps)
    logits = x @ p["wte"].T
    V = cfg["vocab_size"]
    loss = torch.nn.functional.cross_entropy(logits[..., :V].reshape(-1, V), tgt.reshape(-1))
    return logits, loss


def decayed(name):
    return not (name.endswith(".bias") or ".ln_" in name or name.startswith("ln_f."))


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: gpt_ref.py IN.safetensors OUT.safetensors")
    tensors, meta = load_safetensors(sys.argv[1])
    cfg = json.loads(meta["config"])
    tokens = torch.from_numpy(tensors.pop("tokens").astype(np.int64))
    p = {k: torch.tensor(v, dtype=torch.float64, requires_grad=True) for k, v in tensors.items()}
    out = {}

    logits, loss = forward(p, tokens, cfg)
    loss.backward()
    out["logits"] = logits.detach().numpy()
    out["loss"] = np.array(loss.item())
    for k, t in p.items():
        out["grad." + k] = t.grad.numpy().copy()

    groups = [{"params": [t for k, t in p.items() if decayed(k)], "weight_decay": cfg["weight_decay"]},
              {"params": [t for k, t in p.items() if not decayed(k)], "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=cfg["lr"], betas=(cfg["beta1"], cfg["beta2"]), eps=cfg["epsilon"])
    for step in range(1, cfg["steps"] + 1):
        opt.zero_grad()
        _, loss = forward(p, tokens, cfg)
        loss.backward()
        if cfg.get("grad_clip", 0) > 0:
            torch.nn.utils.clip_grad_norm_(list(p.values()), cfg["grad_clip"])
        opt.step()
        out[f"loss.{step}"] = np.array(loss.item())
    for k, t in p.items():
        out["final." + k] = t.detach().numpy().copy()
    save_safetensors(sys.argv[2], out)


if __name__ == "__main__":
    main()
