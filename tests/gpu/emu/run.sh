#!/bin/sh
# Runs tests/gpu/test-cuda-ops.c on the CPU, lib/cuda's kernels under an
# emulation of the CUDA runtime (cuda_runtime.h here: every CUDA thread a
# fiber, switched at __syncthreads, __syncwarp and warp shuffles, blocks one
# after another; cublasLt.h: a naive GEMM; mma.h: the tensor cores' warp-wide
# matrix product, the lanes' registers exchanged), at small shapes
# (-DGPT_CUDA_EMU). Device memory is unreadable to the host outside device
# work, so a host access to it faults, as on a GPU; threads waiting at
# barriers that not all of them reach stop the run with a message, where a
# GPU would hang.
# For machines without a GPU: it checks the kernels' indexing, tiling,
# shuffles and barriers against the CPU backend, and each launch against a
# Hopper GPU's limits (block and grid sizes, dynamic shared memory asked
# for and used), not the GPU's arithmetic, registers, memory model or
# speed; only `make test-gpu` on a GPU does. Seconds per dtype (the
# sanitizer builds: minutes). Needs a CUDA build (`make CUDA=1`) for the
# library objects; build.sh compiles the emulated program into build/emu/.
# train.sh runs the multi-rank GPU tests (staged shm collectives, training
# layouts) the same way; tests/cli/t4063-cuda-emulated.sh runs both in
# `make test`.
#
#   tests/gpu/emu/run.sh [fp32|bf16|fp16]      one dtype, or all three
#   EMU_LT_FOUND=0 tests/gpu/emu/run.sh        the cuBLAS fallback for GEMMs
#   EMU_BLOCKS=reverse tests/gpu/emu/run.sh    blocks in the reverse order: a
#       kernel whose blocks depend on one another gives another result
#   EMU_THREADS=reverse tests/gpu/emu/run.sh   a block's threads from the last
#       down (each runs up to a barrier in turn): a read of shared memory
#       another thread writes, with no barrier between, reads NaN in one of
#       the two orders
#   EMU_CPASYNC=early tests/gpu/emu/run.sh     cp.async copies land when
#       issued, not at their wait: a copy into a tile buffer that another
#       thread may still be reading (no barrier since) overwrites it first
#   EMU_SAN=thread tests/gpu/emu/run.sh bf16   the kernels under ThreadSanitizer,
#       each CUDA thread an OS thread: a race between threads of a block
#       (shared or global memory, no barrier between a write and another
#       thread's access) fails the run, as compute-sanitizer's racecheck
#       would on a GPU (minutes)
#   EMU_SAN=address tests/gpu/emu/run.sh bf16  under AddressSanitizer: an
#       access past a device allocation or past the dynamic shared memory
#       the launch asked for fails where it happens (memcheck's job on a GPU)
#
# Kernel files must launch as NAME<<<CONFIG>>>(ARGS) on one line and name
# their dynamic shared memory `extern __shared__ float sh[]`: build.sh
# rewrites those two forms for g++.
set -eu
cd "$(dirname "$0")/../../.."
tests/gpu/emu/build.sh test-cuda-ops
B=build/emu${EMU_SAN:+-$EMU_SAN}
export TSAN_OPTIONS="${TSAN_OPTIONS:-} exitcode=66" ASAN_OPTIONS="${ASAN_OPTIONS:-} detect_leaks=0"
# ThreadSanitizer cannot see OpenMP's (uninstrumented) synchronisation: the
# CPU side runs on one thread there
[ "${EMU_SAN:-}" != thread ] || export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
if [ $# -gt 0 ]; then
	GPT_TEST_DTYPE=$1 "$B"/test-cuda-ops
else
	"$B"/test-cuda-ops
fi
