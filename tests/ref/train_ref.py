#!/usr/bin/python3
"""gpt-train against PyTorch over many steps: the schedule, AdamW, clipping
and the log, in float64 from the same weights and data.

    train_ref.py init HF_DIR
        a random GPT-2 of 2 layers, hidden 64, 4 heads, 64 positions and the
        byte vocabulary (257) as a Hugging Face directory, for
        gpt-ckpt-merge --from-hf
    train_ref.py check INIT.safetensors DATA.bin LOG FINAL.safetensors [key=value ...]
        trains the weights INIT (gptkit names, gpt-ckpt-merge --consolidate of
        the imported checkpoint) for `steps` steps on the first seq + 1 tokens
        of DATA (uint16, the dataset's .bin: a corpus whose every sample is the
        same, so the order the loader reads in does not matter) repeated
        `batch` times, and compares every step's loss and learning rate with
        gpt-train's LOG and the final weights with FINAL; exits 1 past the
        bounds (loss 1e-6 relative, learning rate 1e-5 relative: the log's
        six digits, weights 2e-4 absolute: a bias whose gradient is exactly
        zero moves with Adam's rounding noise).

Keys of check: steps, batch, seq, sched (cosine, linear, constant), max_lr,
min_lr, decay_steps, warmup_rate (the warm-up is warmup_rate x decay_steps,
unrounded, as FleetX has it), weight_decay, beta1, beta2, epsilon, clip, skip
(steps whose update is skipped, comma-separated).
"""
import json
import math
import os
import re
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpt_ref import decayed, forward, load_safetensors, save_safetensors  # noqa: E402

V, L, C, H, P = 257, 2, 64, 4, 64


def init(d):
    """Random HF GPT-2 weights with non-trivial biases and LayerNorms."""
    rng = np.random.default_rng(5)
    w = lambda *s, std=0.02: (rng.standard_normal(s) * std).astype(np.float32)  # noqa: E731
    t = {"wte.weight": w(V, C), "wpe.weight": w(P, C)}
    for i in range(L):
        h = f"h.{i}."
        t[h + "ln_1.weight"], t[h + "ln_1.bias"] = 1 + w(C, std=0.1), w(C, std=0.05)
        t[h + "attn.c_attn.weight"], t[h + "attn.c_attn.bias"] = w(C, 3 * C, std=0.1), w(3 * C, std=0.05)
        t[h + "attn.c_proj.weight"], t[h + "attn.c_proj.bias"] = w(C, C), w(C, std=0.05)
        t[h + "ln_2.weight"], t[h + "ln_2.bias"] = 1 + w(C, std=0.1), w(C, std=0.05)
        t[h + "mlp.c_fc.weight"], t[h + "mlp.c_fc.bias"] = w(C, 4 * C), w(4 * C, std=0.05)
        t[h + "mlp.c_proj.weight"], t[h + "mlp.c_proj.bias"] = w(4 * C, C), w(C, std=0.05)
    t["ln_f.weight"], t["ln_f.bias"] = 1 + w(C, std=0.1), w(C, std=0.05)
    os.makedirs(d, exist_ok=True)
    save_safetensors(os.path.join(d, "model.safetensors"), t)
    cfg = {"model_type": "gpt2", "vocab_size": V, "n_positions": P, "n_embd": C, "n_layer": L,
           "n_head": H, "activation_function": "gelu_new", "layer_norm_epsilon": 1e-5}
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f)


def lr_at(c, step):
    """The rate of the update made at step (1 for the first)."""
    mx, mn, D = c["max_lr"], c["min_lr"], c["decay_steps"]
    W = c["warmup_rate"] * D
    if W > 0 and step <= W:
        return mx * step / W
    if c["sched"] == "constant":
        return mx
    if step > D:
        return mn
    r = (step - W) / (D - W)
    f = 1 - r if c["sched"] == "linear" else 0.5 * (math.cos(math.pi * r) + 1)
    return mn + f * (mx - mn)


def check(args):
    init_path, data, log, final = args[:4]
    c = {"steps": 12, "batch": 4, "seq": 32, "sched": "cosine", "max_lr": 1e-3, "min_lr": 1e-4,
         "decay_steps": 10, "warmup_rate": 0.33, "weight_decay": 0.01, "beta1": 0.9, "beta2": 0.999,
         "epsilon": 1e-8, "clip": 1.0, "skip": ""}
    for kv in args[4:]:
        k, v = kv.split("=", 1)
        c[k] = type(c[k])(v)
    stream = np.fromfile(data, dtype=np.uint16).astype(np.int64)
    tokens = torch.from_numpy(stream[:c["seq"] + 1].copy()).unsqueeze(0).repeat(c["batch"], 1)
    w0, _ = load_safetensors(init_path)
    p = {k: torch.tensor(v, dtype=torch.float64, requires_grad=True) for k, v in w0.items()
         if not k.startswith("optim.")}
    logged = {}
    for line in open(log):
        m = re.search(r"global step (\d+),.*loss: ([0-9.eE+-]+),.*learning rate: ([0-9.eE+-]+)$", line)
        if m:
            logged[int(m.group(1))] = (float(m.group(2)), float(m.group(3)))
    groups = [{"params": [t for k, t in p.items() if decayed(k)], "weight_decay": c["weight_decay"]},
              {"params": [t for k, t in p.items() if not decayed(k)], "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=1.0, betas=(c["beta1"], c["beta2"]), eps=c["epsilon"])
    # skip: steps whose update is not made (their gradients are not finite in
    # gptkit): the schedule still moves on, as FleetX's does, and AdamW's
    # bias correction counts the updates made (torch's state step)
    skip = {int(s) for s in c["skip"].split(",") if s}
    bad = 0
    for step in range(1, c["steps"] + 1):
        lr = lr_at(c, step)
        if step in skip:
            continue
        for g in opt.param_groups:
            g["lr"] = lr
        opt.zero_grad()
        _, loss = forward(p, tokens, {"vocab_size": V, "num_attention_heads": H})
        loss.backward()
        if c["clip"] > 0:
            torch.nn.utils.clip_grad_norm_(list(p.values()), c["clip"])
        opt.step()
        if step not in logged:
            print(f"step {step}: no line in {log}")
            bad = 1
            continue
        gl, glr = logged[step]
        el, elr = abs(gl - loss.item()) / loss.item(), abs(glr - lr) / lr
        flag = el > 1e-6 or elr > 1e-5
        bad |= flag
        print(f"step {step:3d} loss {loss.item():.9f} gptkit {gl:.9f} (rel {el:.1e}), "
              f"lr {lr:.5e} gptkit {glr:.5e} (rel {elr:.1e}){'  <-- differs' if flag else ''}")
    fin, _ = load_safetensors(final)
    worst, where = 0.0, None
    for k, t in p.items():
        d = float(np.abs(fin[k].astype(np.float64) - t.detach().numpy()).max())
        if d > worst:
            worst, where = d, k
    print(f"final weights: max abs difference {worst:.2e} ({where})")
    bad |= worst > 2e-4
    return 1 if bad else 0


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "init":
        init(sys.argv[2])
        return 0
    if len(sys.argv) >= 6 and sys.argv[1] == "check":
        return check(sys.argv[2:])
    sys.exit(__doc__)


if __name__ == "__main__":
    sys.exit(main())
