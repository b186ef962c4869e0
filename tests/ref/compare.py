#!/usr/bin/python3
"""Compare gptkit's output with the PyTorch reference's, tensor by tensor.

    compare.py REF.safetensors OURS.safetensors

Prints, for each group (loss, logits, gradients, losses after each AdamW
step, final weights), the worst error, and exits 1 when one is above its
tolerance. Tolerances (fp32 gptkit against a float64 reference):
  loss and per-step losses   relative error 1e-5
  logits                     max |diff| / max |ref| 1e-5
  gradients                  per tensor, max |diff| / max |ref grad| 1e-5
  weights after the steps    max |diff| 5e-5: Adam normalises each update to
                             about lr = 1e-3 whatever the gradient, so an element
                             whose gradient is near zero amplifies fp32 rounding
"""
import sys

import numpy as np

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from gpt_ref import load_safetensors  # noqa: E402


def main():
    ref, _ = load_safetensors(sys.argv[1])
    ours, _ = load_safetensors(sys.argv[2])
    worst = {"loss": 0.0, "logits": 0.0, "grad": 0.0, "steps": 0.0, "final": 0.0}
    where = {}
    for k, r in ref.items():
        if k not in ours:
            print(f"missing in ours: {k}")
            return 1
        o = ours[k].astype(np.float64)
        r = r.astype(np.float64)
        if o.shape != r.shape:
            print(f"{k}: shape {o.shape} vs {r.shape}")
            return 1
        if k == "loss" or k.startswith("loss."):
            g, e = ("loss" if k == "loss" else "steps"), abs(float(o) - float(r)) / abs(float(r))
        elif k == "logits":
            g, e = "logits", np.abs(o - r).max() / np.abs(r).max()
        elif k.startswith("grad."):
            scale = np.abs(r).max()
            g, e = "grad", (np.abs(o - r).max() / scale) if scale > 0 else np.abs(o).max()
        else:
            g, e = "final", np.abs(o - r).max()
        if e > worst[g]:
            worst[g], where[g] = e, k
    tol = {"loss": 1e-5, "logits": 1e-5, "grad": 1e-5, "steps": 1e-5, "final": 5e-5}
    bad = 0
    for g in worst:
        flag = "ok" if worst[g] <= tol[g] else "TOO LARGE"
        print(f"{g:7s} worst error {worst[g]:.3e} (tolerance {tol[g]:.0e}) at {where.get(g, '-')}: {flag}")
        bad |= worst[g] > tol[g]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
