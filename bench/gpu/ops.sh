#!/bin/sh
# The CUDA backend's ops one at a time at the seed models' shapes
# (build/bench/gpu-ops, bench/gpu/gpu-ops.c: ms a call and TFLOP/s or
# GB/s), then PyTorch's scaled_dot_product_attention at the same shapes
# (bench/gpu/torch_attn.py) where PyTorch sees the GPU: a kernel's speed
# next to its peer in seconds, without Nsight Compute or a training run.
# DTYPE=fp16 for fp16 (default bf16). Record runs in bench/RESULTS.md.
#   sh bench/gpu/ops.sh
set -u
cd "$(dirname "$0")/../.."
PY=${PYTHON:-python3}
D=${DTYPE:-bf16}
[ -x build/bench/gpu-ops ] || { echo "gpu-ops: no build/bench/gpu-ops: make CUDA=1, or make gpu-pack"; exit 1; }
build/bench/gpu-ops "$D" || exit 1
if ! $PY -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
	echo "torch: not on this machine, or it sees no GPU"
	exit 0
fi
$PY bench/gpu/torch_attn.py "$D"
