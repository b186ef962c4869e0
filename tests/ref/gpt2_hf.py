#!/usr/bin/python3
"""A Hugging Face GPT-2 written and run independently of gptkit, in plain
torch (the transformers package is not needed).

    gpt2_hf.py make DIR VOCAB LAYERS HIDDEN HEADS POSITIONS SEED [PREFIX] [F16]
        writes DIR/config.json and DIR/model.safetensors with random weights
        in Hugging Face's GPT-2 layout: Conv1D weights [in, out], c_attn the
        q, k, v projections side by side [C, 3C], the "attn.bias" causal mask
        buffers HF files carry, names under PREFIX ("transformer." by
        default, "-" for none), fp32 or F16 storage.
    gpt2_hf.py shard DIR OUT N [LEAVE-OUT...]
        writes OUT as save_pretrained shards DIR's weights: config.json, N
        files model-0000K-of-0000N.safetensors holding DIR/model.safetensors'
        tensors byte for byte, in a shuffled order (not the model's), less
        the tensors named LEAVE-OUT, and model.safetensors.index.json
        mapping each tensor to its file (with metadata.total_size).
    gpt2_hf.py greedy DIR IDS STEPS EOS
        prints the ids greedy decoding appends to the comma-separated prompt
        IDS (at most STEPS, ending before EOS), computed in float64 with a
        KV cache, one id a line.

Only the Python standard library, numpy and torch: safetensors are read and
written here directly.
"""
import json
import math
import struct
import sys

import numpy as np
import torch

ST = {"F32": np.float32, "F16": np.float16, "BF16": None}


def write_safetensors(path, tensors, meta):
    """tensors: name -> (dtype, numpy array) or (dtype, shape, bytes)"""
    header, off, blobs = {"__metadata__": meta}, 0, []
    for name, t in tensors.items():
        dtype, shape, b = t if len(t) == 3 else (t[0], list(t[1].shape), np.ascontiguousarray(t[1]).tobytes())
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + len(b)]}
        off += len(b)
        blobs.append(b)
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def read_raw(path):
    """name -> (dtype, shape, bytes) of a safetensors file, and its metadata"""
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    meta = header.pop("__metadata__", {})
    return {k: (v["dtype"], v["shape"], raw[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]])
            for k, v in header.items()}, meta


def read_safetensors(path):
    out = {}
    for name, (dtype, shape, buf) in read_raw(path)[0].items():
        if dtype == "BF16":
            u = np.frombuffer(buf, np.uint16).astype(np.uint32) << 16
            a = u.view(np.float32)
        else:
            a = np.frombuffer(buf, ST[dtype])
        out[name] = torch.from_numpy(a.astype(np.float64).reshape(shape))
    return out


def make(d, V, L, C, H, P, seed, prefix="transformer.", f16=False):
    import os
    os.makedirs(d, exist_ok=True)
    rng = np.random.default_rng(seed)
    F = 4 * C
    dt, st = (np.float16, "F16") if f16 else (np.float32, "F32")

    def w(*shape, std=0.2):
        return (rng.standard_normal(shape) * std).astype(dt)

    t = {prefix + "wte.weight": (st, w(V, C)), prefix + "wpe.weight": (st, w(P, C, std=1.0))}
    for i in range(L):
        p = "%sh.%d." % (prefix, i)
        t[p + "ln_1.weight"] = (st, (1 + w(C, std=0.1)).astype(dt))
        t[p + "ln_1.bias"] = (st, w(C, std=0.1))
        t[p + "attn.bias"] = ("F32", np.tril(np.ones((P, P), np.float32)).reshape(1, 1, P, P))
        t[p + "attn.c_attn.weight"] = (st, w(C, 3 * C))
        t[p + "attn.c_attn.bias"] = (st, w(3 * C, std=0.1))
        t[p + "attn.c_proj.weight"] = (st, w(C, C))
        t[p + "attn.c_proj.bias"] = (st, w(C, std=0.1))
        t[p + "ln_2.weight"] = (st, (1 + w(C, std=0.1)).astype(dt))
        t[p + "ln_2.bias"] = (st, w(C, std=0.1))
        t[p + "mlp.c_fc.weight"] = (st, w(C, F))
        t[p + "mlp.c_fc.bias"] = (st, w(F, std=0.1))
        t[p + "mlp.c_proj.weight"] = (st, w(F, C))
        t[p + "mlp.c_proj.bias"] = (st, w(C, std=0.1))
    t[prefix + "ln_f.weight"] = (st, (1 + w(C, std=0.1)).astype(dt))
    t[prefix + "ln_f.bias"] = (st, w(C, std=0.1))
    write_safetensors(d + "/model.safetensors", t, {"format": "pt"})
    cfg = {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "vocab_size": V,
           "n_positions": P, "n_ctx": P, "n_embd": C, "n_layer": L, "n_head": H, "n_inner": None,
           "activation_function": "gelu_new", "layer_norm_epsilon": 1e-5,
           "bos_token_id": V - 1, "eos_token_id": V - 1}
    json.dump(cfg, open(d + "/config.json", "w"), indent=2)


def shard(src, d, n, leave_out):
    import os
    import random
    import shutil
    os.makedirs(d, exist_ok=True)
    tensors, meta = read_raw(src + "/model.safetensors")
    names = [k for k in tensors if k not in leave_out]
    random.Random(n).shuffle(names)
    weight_map, total = {}, 0
    for i in range(n):
        f = "model-%05d-of-%05d.safetensors" % (i + 1, n)
        part = names[i * len(names) // n:(i + 1) * len(names) // n]
        write_safetensors(d + "/" + f, {k: tensors[k] for k in part}, meta)
        for k in part:
            weight_map[k] = f
            total += len(tensors[k][2])
    index = {"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))}
    json.dump(index, open(d + "/model.safetensors.index.json", "w"), indent=2)
    shutil.copy(src + "/config.json", d)


def gelu(x):
    return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


def greedy(d, ids, steps, eos):
    cfg = json.load(open(d + "/config.json"))
    W = read_safetensors(d + "/model.safetensors")
    pre = "transformer." if "transformer.wte.weight" in W else ""
    C, H, L = cfg["n_embd"], cfg["n_head"], cfg["n_layer"]
    hs = C // H
    cache = [[None, None] for _ in range(L)]

    def ln(x, p):
        return torch.nn.functional.layer_norm(x, (C,), W[p + ".weight"], W[p + ".bias"], 1e-5)

    def forward(tokens, t0):
        T = len(tokens)
        x = W[pre + "wte.weight"][tokens] + W[pre + "wpe.weight"][t0:t0 + T]
        for i in range(L):
            p = "%sh.%d." % (pre, i)
            qkv = ln(x, p + "ln_1") @ W[p + "attn.c_attn.weight"] + W[p + "attn.c_attn.bias"]
            q, k, v = [z.view(T, H, hs).transpose(0, 1) for z in qkv.split(C, dim=-1)]
            if cache[i][0] is not None:
                k = torch.cat([cache[i][0], k], 1)
                v = torch.cat([cache[i][1], v], 1)
            cache[i] = [k, v]
            att = (q @ k.transpose(1, 2)) / math.sqrt(hs)
            S = k.shape[1]
            mask = torch.ones(T, S, dtype=torch.bool).tril(S - T)
            att = att.masked_fill(~mask, float("-inf")).softmax(-1)
            y = (att @ v).transpose(0, 1).reshape(T, C)
            x = x + y @ W[p + "attn.c_proj.weight"] + W[p + "attn.c_proj.bias"]
            h = gelu(ln(x, p + "ln_2") @ W[p + "mlp.c_fc.weight"] + W[p + "mlp.c_fc.bias"])
            x = x + h @ W[p + "mlp.c_proj.weight"] + W[p + "mlp.c_proj.bias"]
        return ln(x, pre + "ln_f") @ W[pre + "wte.weight"].T

    logits = forward(ids, 0)
    pos = len(ids)
    for _ in range(steps):
        t = int(torch.argmax(logits[-1]))
        if t == eos:
            break
        print(t)
        logits = forward([t], pos)
        pos += 1


def main():
    a = sys.argv
    if a[1] == "make":
        prefix = a[9] if len(a) > 9 else "transformer."
        make(a[2], *[int(x) for x in a[3:9]], prefix="" if prefix == "-" else prefix,
             f16=len(a) > 10 and a[10] == "F16")
    elif a[1] == "shard":
        shard(a[2], a[3], int(a[4]), set(a[5:]))
    elif a[1] == "greedy":
        greedy(a[2], [int(x) for x in a[3].split(",")], int(a[4]), int(a[5]))
    else:
        sys.exit("usage: gpt2_hf.py make|shard|greedy ...")


main()
