#!/bin/sh
# llm.c's GPT-2 trainer (train_gpt2.cu: C/CUDA, bf16, cuBLASLt) at the
# shapes of bench/gpu/train.sh's 124M rows, on the same GPU, as the
# independent C/CUDA peer issue 8 names. Nothing downloads: LLMC_DIR must
# hold an llm.c checkout (github.com/karpathy/llm.c, from June 2024 on: the
# -e dN random initialisation and the -r, -z, -ge flags). The sources are
# copied to a scratch directory and built there (make train_gpt2cu, bf16,
# one GPU, no MPI; USE_CUDNN=1 with CUDNN_FRONTEND_PATH set builds its
# cuDNN flash attention, else its own attention kernels).
#
# Data: random GPT-2 token ids in llm.c's format (256 int32 of header:
# 20240520, 1, the count; then uint16 ids); the token values do not change
# the work a step does. The model is d12 (GPT-2 124M: 12 layers of 768,
# 12 heads, the vocabulary padded to 50304 as gptkit's rows pad it),
# randomly initialised, no recomputation (-r 0, as gptkit's 124M rows),
# no evaluation, sampling or checkpoints inside the timed steps.
#
# Prints rows in train.sh's first columns: tokens/s (the mean of llm.c's own
# step times after two warm-up steps), MFU over PEAK_TFLOPS with train.sh's
# FLOP count, and peak memory from nvidia-smi every 200 ms (the process,
# CUDA context included, as gptkit's). Run it in the same session as
# train.sh's rows (tests/gpu/check.sh bench llmc) so that both come from one
# GPU at one clock. LLMC_ARGS adds flags to every llm.c run.
#   LLMC_DIR=$HOME/llm.c STEPS=12 sh bench/gpu/llmc.sh
set -u
cd "$(dirname "$0")/../.."
STEPS=${STEPS:-12}
PEAK=${PEAK_TFLOPS:-989}
PY=${PYTHON:-python3}
if [ -z "${LLMC_DIR:-}" ]; then
	echo "llmc: skipped: set LLMC_DIR to an llm.c checkout (github.com/karpathy/llm.c); nothing is downloaded"
	exit 0
fi
[ -f "$LLMC_DIR/train_gpt2.cu" ] ||
	{ echo "llmc: $LLMC_DIR has no train_gpt2.cu: LLMC_DIR must be an llm.c checkout"; exit 66; }
[ "$STEPS" -ge 4 ] 2>/dev/null || { echo "llmc: STEPS must be at least 4 (two warm-up steps), not '$STEPS'"; exit 64; }
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT

rev=$(git -C "$LLMC_DIR" rev-parse --short HEAD 2>/dev/null || echo "not a git checkout")
tar -C "$LLMC_DIR" --exclude=.git --exclude='*.bin' -cf - . | tar -C "$W" -xf - ||
	{ echo "llmc: copying $LLMC_DIR failed"; exit 74; }
cudnn=0
[ -n "${CUDNN_FRONTEND_PATH:-}" ] && cudnn=1
if ! make -C "$W" train_gpt2cu PRECISION=BF16 NO_MULTI_GPU=1 NO_USE_MPI=1 USE_CUDNN=$cudnn \
	${CUDNN_FRONTEND_PATH:+CUDNN_FRONTEND_PATH="$CUDNN_FRONTEND_PATH"} >"$W/build.log" 2>&1; then
	echo "llmc: building llm.c ($rev) failed:"
	tail -n 5 "$W/build.log"
	exit 1
fi
att="its own attention kernels"
[ $cudnn = 1 ] && att="cuDNN flash attention"
echo "llm.c $rev, train_gpt2cu in bf16 with $att"

# llm.c's data file $1 with $2 random GPT-2 token ids
shard () {
	$PY - "$1" "$2" <<'EOF'
import array, random, sys
path, n = sys.argv[1], int(sys.argv[2])
rng = random.Random(1234)
head = array.array("i", [0] * 256)
head[0], head[1], head[2] = 20240520, 1, n
ids = array.array("H", (rng.randrange(50257) for _ in range(n)))
with open(path, "wb") as f:
    head.tofile(f)
    ids.tofile(f)
EOF
}

printf '%-36s %10s %7s %10s\n' "llm.c shape" "tok/s" MFU "peak mem"
status=0
# row NAME B T: llm.c's d12 at micro-batch B, sequence T
row () {
	name=$1 B=$2 T=$3
	shard "$W/train.bin" $((4 * B * T + 1)) && shard "$W/val.bin" $((B * T + 1)) ||
		{ echo "llmc: writing the data with $PY failed"; status=1; return; }
	nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 200 >"$W/mem" 2>/dev/null &
	smi=$!
	# shellcheck disable=SC2086
	(cd "$W" && ./train_gpt2cu -i train.bin -j val.bin -e d12 -b "$B" -t "$T" -d $((B * T)) \
		-x "$STEPS" -v 1000000 -m 1 -s 0 -h 0 -n 0 -r 0 -z 0 -l 6e-4 -c 0.1 -u 0 -q 0.0 -y 0 \
		${LLMC_ARGS:-}) >"$W/log" 2>&1
	rc=$?
	kill $smi 2>/dev/null
	wait $smi 2>/dev/null
	if [ $rc != 0 ]; then
		echo "$name: train_gpt2cu failed (exit $rc):"
		tail -n 3 "$W/log"
		status=1
		return
	fi
	# "step    5/12 | loss ... | 81.23 ms | ..." (older versions: "(81.23 ms, ...")
	tps=$(sed -n 's/^step *\([0-9]*\)\/[0-9]*.*[( ]\([0-9.]*\) ms.*/\1 \2/p' "$W/log" |
		awk -v bt=$((B * T)) '$1 > 2 { s += $2; n++ } END { if (n) printf "%.0f", 1000 * bt * n / s }')
	[ -n "$tps" ] || { echo "$name: no step times in llm.c's log:"; tail -n 3 "$W/log"; status=1; return; }
	mem=$(sort -n "$W/mem" | tail -n 1)
	L=12 C=768
	n=$((50304 * C + T * C + L * (12 * C * C + 13 * C) + 2 * C))
	awk -v name="$name" -v a="$tps" -v n="$n" -v l=$L -v c=$C -v t="$T" -v p="$PEAK" -v m="$mem" 'BEGIN {
		printf "%-36s %10.0f %6.1f%% %6s MiB\n", name, a, 100 * (6 * n + 6 * l * c * t) * a / (p * 1e12), m }'
}

row "124M bf16 (12x768, B32 T1024)" 32 1024
row "124M bf16 (12x768, B64 T1024)" 64 1024
exit $status
