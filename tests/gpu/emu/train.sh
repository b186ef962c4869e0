#!/bin/sh
# Runs the multi-rank GPU tests on the CPU under the emulated CUDA runtime
# (see run.sh): tests/gpu/test-comm-stage.c (shm collectives on device
# buffers, three ranks sharing the emulated device), then
# tests/gpu/t4060-train-gpu-layouts.sh with an emulated gpt-train (one rank;
# dp2, mp2, pp2, sharding2 stage 3 through shm; resume), 2 steps each; on
# request tests/gpu/t4061-infer-cuda.sh with an emulated gpt-infer
# (GPT_GPU_TEST_TOKENS, default 8 here, tokens per generation). The
# emulated device memory is host memory, so this checks the staging logic,
# the trainer's device-pointer collectives and the kernels' results, not
# what only a GPU shows (a host access to device memory, stream races).
# Slow: about half a minute per emulated training step and rank.
#
#   tests/gpu/emu/train.sh [TEST...]     default: test-comm-stage t4060
set -eu
cd "$(dirname "$0")/../../.."
tests/gpu/emu/build.sh gpt-train gpt-infer test-comm-stage
mkdir -p build/emu/bin
ln -sf ../gpt-train build/emu/bin/gpt-train
ln -sf ../gpt-infer build/emu/bin/gpt-infer
[ $# -gt 0 ] || set -- test-comm-stage t4060
for t in "$@"; do
	case $t in
	test-*) build/emu/"$t" ;;
	t[0-9]*)
		GPT_EMU_BIN=$PWD/build/emu/bin GPT_GPU_TEST_STEPS=${GPT_GPU_TEST_STEPS:-2} \
			GPT_GPU_TEST_TOKENS=${GPT_GPU_TEST_TOKENS:-8} sh tests/gpu/"$t"-*.sh
		;;
	esac
done
