#!/bin/sh
# Runs the multi-rank GPU tests on the CPU under the emulated CUDA runtime
# (see run.sh): tests/gpu/test-comm-stage.c (shm collectives on device
# buffers, three ranks sharing the emulated device), then
# tests/gpu/t4060-train-gpu-layouts.sh with an emulated gpt-train (one rank;
# dp2, mp2, pp2, sharding2 stage 3 through shm; resume), 2 steps each; on
# request tests/gpu/t4061-infer-cuda.sh with an emulated gpt-infer
# (GPT_GPU_TEST_TOKENS, default 8 here, tokens per generation). The
# emulated device memory is host memory, unreadable to the host outside
# device work (launches, copies, GEMMs), so this checks the staging logic,
# the trainer's device-pointer collectives, that no host code touches
# device memory, and the kernels' results, not what only a GPU shows
# (stream races, the GPU's arithmetic and memory model). Seconds per test
# script; tests/cli/t4063-cuda-emulated.sh runs them in `make test`.
#
#   tests/gpu/emu/train.sh [TEST...]     default: test-comm-stage t4060
#   EMU_SAN=thread|address tests/gpu/emu/train.sh ...   under a sanitizer (run.sh)
#   EMU_MEM_PEAK=1 build/emu/gpt-train ...   says its peak device memory (the
#                                        bytes allocated) on stderr at exit
#   EMU_HOST_SYNCS=1 build/emu/gpt-train ...   says on stderr each call that
#       makes the host wait for queued device work (a stall on a GPU), with
#       its callers; tests/gpu/emu/syncs.sh counts them per training step
set -eu
cd "$(dirname "$0")/../../.."
tests/gpu/emu/build.sh gpt-train gpt-infer test-comm-stage
B=build/emu${EMU_SAN:+-$EMU_SAN}
export TSAN_OPTIONS="${TSAN_OPTIONS:-} exitcode=66" ASAN_OPTIONS="${ASAN_OPTIONS:-} detect_leaks=0"
# ThreadSanitizer cannot see OpenMP's (uninstrumented) synchronisation: the
# CPU side runs on one thread there
[ "${EMU_SAN:-}" != thread ] || export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
mkdir -p $B/bin
ln -sf ../gpt-train $B/bin/gpt-train
ln -sf ../gpt-infer $B/bin/gpt-infer
[ $# -gt 0 ] || set -- test-comm-stage t4060
for t in "$@"; do
	case $t in
	test-*) "$B/$t" ;;
	t[0-9]*)
		GPT_EMU_BIN=$PWD/$B/bin GPT_GPU_TEST_STEPS=${GPT_GPU_TEST_STEPS:-2} \
			GPT_GPU_TEST_TOKENS=${GPT_GPU_TEST_TOKENS:-8} sh tests/gpu/"$t"-*.sh
		;;
	esac
done
