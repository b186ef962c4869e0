#!/bin/sh
# Runs tests/gpu/test-cuda-ops.c on the CPU, lib/cuda's kernels under an
# emulation of the CUDA runtime (cuda_runtime.h here: every CUDA thread a
# std::thread, blocks one after another, __syncthreads and warp shuffles as
# barriers; cublasLt.h: a naive GEMM; mma.h: the WMMA tiles, each lane
# holding the whole tile), at small shapes (-DGPT_CUDA_EMU).
# For machines without a GPU: it checks the kernels' indexing, tiling,
# shuffles and barriers against the CPU backend, and each launch against a
# Hopper GPU's limits (block and grid sizes, dynamic shared memory asked
# for and used), not the GPU's arithmetic, registers, memory model or
# speed; only `make test-gpu` on a GPU does. Slow: minutes
# per dtype. Needs a CUDA build (`make CUDA=1`) for the library objects;
# build.sh compiles the emulated program into build/emu/. train.sh runs the
# multi-rank GPU tests (staged shm collectives, training layouts) the same way.
#
#   tests/gpu/emu/run.sh [fp32|bf16|fp16]      one dtype, or all three
#   EMU_LT_FOUND=0 tests/gpu/emu/run.sh        the cuBLAS fallback for GEMMs
#
# Kernel files must launch as NAME<<<CONFIG>>>(ARGS) on one line and name
# their dynamic shared memory `extern __shared__ float sh[]`: build.sh
# rewrites those two forms for g++.
set -eu
cd "$(dirname "$0")/../../.."
tests/gpu/emu/build.sh test-cuda-ops
if [ $# -gt 0 ]; then
	GPT_TEST_DTYPE=$1 build/emu/test-cuda-ops
else
	build/emu/test-cuda-ops
fi
