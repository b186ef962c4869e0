#!/usr/bin/python3
"""Reads a GGUF v3 file as llama.cpp's gpt2 loader would (Python standard
library only: llama.cpp is not on the test machines) and checks it against a
Hugging Face GPT-2 export of the same checkpoint.

usage: gguf-check.py FILE.gguf HF_DIR

Checks: magic, version 3, every metadata key the gpt2 loader reads, the
vocabulary arrays, every tensor llama.cpp's gpt2 architecture wants with its
ggml dimensions (fastest first) and type, 32-byte aligned offsets inside the
file, and every tensor's values against the HF weights (Conv1D [in, out],
which is ggml's {out, in} read the other way). Prints one summary line;
exits 1 with the reason on the first mismatch."""
import json
import struct
import sys

T_SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
T_FMT = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q",
         11: "<q", 12: "<d"}


def fail(msg):
    print("gguf-check: " + msg)
    sys.exit(1)


class Reader:
    def __init__(self, data):
        self.d = data
        self.p = 0

    def take(self, fmt):
        v = struct.unpack_from(fmt, self.d, self.p)[0]
        self.p += struct.calcsize(fmt)
        return v

    def string(self):
        n = self.take("<Q")
        s = self.d[self.p:self.p + n].decode("utf-8")
        self.p += n
        return s

    def value(self, t):
        if t == 8:
            return self.string()
        if t == 9:
            et = self.take("<I")
            n = self.take("<Q")
            return [self.value(et) for _ in range(n)]
        return self.take(T_FMT[t])


def f16(h):
    return struct.unpack("<e", struct.pack("<H", h))[0]


def tensor_values(data, off, ttype, n):
    if ttype == 0:
        return struct.unpack_from("<%df" % n, data, off)
    if ttype == 1:
        return struct.unpack_from("<%de" % n, data, off)
    if ttype == 8:
        out = []
        for b in range(n // 32):
            base = off + 34 * b
            d = struct.unpack_from("<e", data, base)[0]
            qs = struct.unpack_from("<32b", data, base + 2)
            out.extend(d * q for q in qs)
        return out
    fail("unexpected tensor type %d" % ttype)


def safetensors(path):
    with open(path, "rb") as f:
        raw = f.read()
    hl = struct.unpack_from("<Q", raw, 0)[0]
    head = json.loads(raw[8:8 + hl])
    base = 8 + hl
    out = {}
    for k, v in head.items():
        if k == "__metadata__":
            continue
        b, e = v["data_offsets"]
        n = (e - b) // {"F32": 4, "F16": 2, "BF16": 2}[v["dtype"]]
        if v["dtype"] == "F32":
            vals = struct.unpack_from("<%df" % n, raw, base + b)
        elif v["dtype"] == "F16":
            vals = struct.unpack_from("<%de" % n, raw, base + b)
        else:
            hs = struct.unpack_from("<%dH" % n, raw, base + b)
            vals = [struct.unpack("<f", struct.pack("<I", h << 16))[0] for h in hs]
        out[k] = (v["shape"], vals)
    return out


def main():
    path, hf = sys.argv[1], sys.argv[2]
    with open(path, "rb") as f:
        data = f.read()
    r = Reader(data)
    if data[:4] != b"GGUF":
        fail("bad magic %r" % data[:4])
    r.p = 4
    version = r.take("<I")
    if version != 3:
        fail("version %d, expected 3" % version)
    nt = r.take("<Q")
    nkv = r.take("<Q")
    kv = {}
    for _ in range(nkv):
        k = r.string()
        t = r.take("<I")
        kv[k] = r.value(t)
    cfg = json.load(open(hf + "/config.json"))
    want = {
        "general.architecture": "gpt2",
        "gpt2.context_length": cfg["n_positions"],
        "gpt2.embedding_length": cfg["n_embd"],
        "gpt2.feed_forward_length": cfg["n_inner"],
        "gpt2.block_count": cfg["n_layer"],
        "gpt2.attention.head_count": cfg["n_head"],
        "tokenizer.ggml.model": "gpt2",
        "tokenizer.ggml.pre": "gpt-2",
        "tokenizer.ggml.eos_token_id": cfg["eos_token_id"],
        "tokenizer.ggml.bos_token_id": cfg["bos_token_id"],
    }
    for k, v in want.items():
        if kv.get(k) != v:
            fail("%s = %r, expected %r" % (k, kv.get(k), v))
    if abs(kv["gpt2.attention.layer_norm_epsilon"] - 1e-5) > 1e-9:
        fail("layer_norm_epsilon")
    V = cfg["vocab_size"]
    toks, types = kv["tokenizer.ggml.tokens"], kv["tokenizer.ggml.token_type"]
    if len(toks) != V or len(types) != V or len(set(toks)) != V:
        fail("%d tokens / %d types (%d distinct), expected %d" % (len(toks), len(types), len(set(toks)), V))
    if types[cfg["eos_token_id"]] != 3 or toks[cfg["eos_token_id"]] != "<|endoftext|>":
        fail("end-of-text token is not a control token")
    merges = kv["tokenizer.ggml.merges"]
    for m in merges[:1000]:
        a, b = m.split(" ")
        if a + b not in toks:
            fail("merge %r makes no token" % m)
    align = kv.get("general.alignment", 32)
    infos = {}
    for _ in range(nt):
        name = r.string()
        nd = r.take("<I")
        dims = [r.take("<Q") for _ in range(nd)]
        t = r.take("<I")
        off = r.take("<Q")
        infos[name] = (dims, t, off)
    data0 = (r.p + align - 1) // align * align
    C, F, L, P = cfg["n_embd"], cfg["n_inner"], cfg["n_layer"], cfg["n_positions"]
    shapes = {"token_embd.weight": [C, V], "position_embd.weight": [C, P],
              "output_norm.weight": [C], "output_norm.bias": [C], "output.weight": [C, V]}
    hfname = {"token_embd.weight": "transformer.wte.weight", "output.weight": "transformer.wte.weight",
              "position_embd.weight": "transformer.wpe.weight",
              "output_norm.weight": "transformer.ln_f.weight", "output_norm.bias": "transformer.ln_f.bias"}
    per = {"attn_norm.weight": ([C], "ln_1.weight"), "attn_norm.bias": ([C], "ln_1.bias"),
           "attn_qkv.weight": ([C, 3 * C], "attn.c_attn.weight"),
           "attn_qkv.bias": ([3 * C], "attn.c_attn.bias"),
           "attn_output.weight": ([C, C], "attn.c_proj.weight"),
           "attn_output.bias": ([C], "attn.c_proj.bias"),
           "ffn_norm.weight": ([C], "ln_2.weight"), "ffn_norm.bias": ([C], "ln_2.bias"),
           "ffn_up.weight": ([C, F], "mlp.c_fc.weight"), "ffn_up.bias": ([F], "mlp.c_fc.bias"),
           "ffn_down.weight": ([F, C], "mlp.c_proj.weight"), "ffn_down.bias": ([C], "mlp.c_proj.bias")}
    for i in range(L):
        for k, (s, h) in per.items():
            shapes["blk.%d.%s" % (i, k)] = s
            hfname["blk.%d.%s" % (i, k)] = "transformer.h.%d.%s" % (i, h)
    if set(shapes) != set(infos):
        fail("tensors differ: missing %s, extra %s" % (sorted(set(shapes) - set(infos)),
                                                       sorted(set(infos) - set(shapes))))
    ref = safetensors(hf + "/model.safetensors")
    worst = 0.0
    types_seen = set()
    for name, (dims, t, off) in infos.items():
        if dims != shapes[name]:
            fail("%s: dims %s, expected %s" % (name, dims, shapes[name]))
        if off % align:
            fail("%s: offset %d not aligned" % (name, off))
        types_seen.add(t)
        n = 1
        for d in dims:
            n *= d
        size = {0: 4 * n, 1: 2 * n, 8: n // 32 * 34}[t]
        if data0 + off + size > len(data):
            fail("%s runs past the end of the file" % name)
        got = tensor_values(data, data0 + off, t, n)
        hshape, hv = ref[hfname[name]]
        if len(hshape) == 2 and name not in ("token_embd.weight", "output.weight", "position_embd.weight"):
            # HF Conv1D [in, out] -> ggml {in, out} holds out rows of in values
            ii, oo = hshape
            hv = [hv[c * oo + o] for o in range(oo) for c in range(ii)]
        tol = {0: 0.0, 1: 2e-3, 8: 0.0}[t]
        if t == 8:
            amax = max(abs(x) for x in hv) or 1.0
            tol = amax / 127.0
        d = max(abs(a - b) for a, b in zip(got, hv))
        if d > tol:
            fail("%s: values differ by %g (tolerance %g)" % (name, d, tol))
        worst = max(worst, d)
    print("gguf ok: version 3, %d metadata keys, %d tensors, types %s, %d tokens, %d merges, max diff %.3g"
          % (nkv, nt, sorted(types_seen), V, len(merges), worst))


main()
