#!/bin/sh
# GPU generation speed of gpt-infer --device cuda on the GPT-2 124M shapes
# (12 layers, 768 hidden, 12 heads, 50257 tokens, 1024 positions): batch 1
# and 8, a prompt of about 128 tokens then GEN (default 128) generated
# tokens, greedy with no early end. Weights fp32, bf16 and fp16 (gpt-infer
# --dtype: that dtype on the device, activations and KV cache included) and
# int8 (a gpt-export --dtype int8 bundle: weight-only int8 kernels, fp32
# activations). Prints gpt-infer --stats' prompt and generation tokens/s
# and the device's peak memory, next to PyTorch's (bench/torch_infer.py:
# the same shapes, prompt and generated tokens, eager, on the GPU, in the
# same dtype; none for int8, whose dynamic quantization is CPU-only; "-"
# where PyTorch or its GPU is missing). Each generation step after the
# first is a CUDA graph; the "bf16 ops" rows run the same steps with each
# kernel launched by the host (GPT_CUDA_GRAPHS=0), to show what the graphs
# save; the "bf16 again" rows give the prompt rate of a second group of
# prompts in the same process (gpt-infer given the prompts twice; --stats'
# prompt passes after the first), without the first forward's one-time
# costs. The weights are those of a checkpoint after one training step:
# speed does not depend on them.
# Record each run in bench/RESULTS.md with the date, device and command.
set -u
cd "$(dirname "$0")/../.."
ROOT=$PWD
GEN=${GEN:-128}
PY=${PYTHON:-python3}
TORCH=0
$PY -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null && TORCH=1
[ -f share/gpt2/encoder.json ] || { echo "infer-gpu: skipped: no GPT-2 vocabulary (make deps)"; exit 0; }
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT

. bench/lib-infer.sh
infer_model_setup || { echo "infer-gpu: the model could not be made"; exit 1; }

nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
echo "GPT-2 124M shapes, $GEN generated tokens; tokens/s (gptkit / PyTorch)"
printf '%-8s %5s %9s %12s %12s %10s | %12s %12s | %6s\n' weights batch prompt "prompt tok/s" "gen tok/s" \
	"peak mem" "torch prompt" "torch gen" "gen ratio"
run () { # label model extra-args batch torch-dtype ("" for none)
	prompts=$W/p1
	[ "$4" = 8 ] && prompts=$W/p8
	nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 200 >"$W/mem" 2>/dev/null &
	smi=$!
	GPT_CUDA_GRAPHS=$graphs bin/gpt-infer -m "$2" $3 --device cuda --stats --batch "$4" \
		-o Generation.decode_strategy=greedy_search -o Generation.min_dec_len=$GEN \
		-o Generation.max_dec_len=$GEN <"$prompts" >/dev/null 2>"$W/stats"
	rc=$?
	kill $smi 2>/dev/null
	wait $smi 2>/dev/null
	if [ $rc != 0 ]; then
		echo "$1 batch $4: gpt-infer failed (exit $rc):"; tail -n 3 "$W/stats"; return
	fi
	set -- "$@" $(sed -n 's/^prompt: \([0-9]*\) tokens in [0-9.]* s, \([0-9.]*\) tokens\/s; generation: [0-9]* tokens in [0-9.]* s, \([0-9.]*\) tokens\/s$/\1 \2 \3/p' "$W/stats")
	# $1 label, $4 batch, $5 torch dtype ("" for none); then tokens, rates
	[ $# = 8 ] || { echo "$1 batch $4: no --stats line:"; tail -n 3 "$W/stats"; return; }
	tpp=- tpg=- ratio=-
	if [ $TORCH = 1 ] && [ -n "$5" ]; then
		theirs=$($PY bench/torch_infer.py 12 768 12 50257 1024 "$4" "$(($6 / $4))" "$GEN" 1 "$5" cuda 2>"$W/torch.err" |
			tail -n 1)
		case "$theirs" in
		prompt_tok_s*)
			tpp=$(echo "$theirs" | cut -d" " -f2)
			tpg=$(echo "$theirs" | cut -d" " -f4)
			ratio=$(awk -v a="$8" -v b="$tpg" 'BEGIN { printf "%.2f", a / b }')
			;;
		*) echo "torch failed: $(tail -n 1 "$W/torch.err")" ;;
		esac
	fi
	printf '%-8s %5s %9s %12s %12s %6s MiB | %12s %12s | %6s\n' "$1" "$4" "$(($6 / $4)) tok" "$7" "$8" \
		"$(sort -n "$W/mem" | tail -n 1)" "$tpp" "$tpg" "$ratio"
}
graphs=1
for b in 1 8; do
	run fp32 "$W/ck" "" $b fp32
	run bf16 "$W/ck" "--dtype bf16" $b bf16
	run fp16 "$W/ck" "--dtype fp16" $b fp16
	run int8 "$W/m8.tar" "" $b ""
done
graphs=0
for b in 1 8; do
	run "bf16 ops" "$W/ck" "--dtype bf16" $b ""
done
# again BATCH: the prompt's tokens/s in a second group of BATCH prompts
# (gpt-infer --stats: the prompt passes after the first)
again () {
	p=$W/p1
	[ "$1" = 8 ] && p=$W/p8
	cat "$p" "$p" >"$W/pp"
	if ! bin/gpt-infer -m "$W/ck" --dtype bf16 --device cuda --stats --batch "$1" \
		-o Generation.decode_strategy=greedy_search -o Generation.min_dec_len=$GEN \
		-o Generation.max_dec_len=$GEN <"$W/pp" >/dev/null 2>"$W/stats"; then
		echo "bf16 again batch $1: gpt-infer failed:"; tail -n 3 "$W/stats"; return
	fi
	set -- "$1" $(sed -n 's/^prompt: .*generation: .*, \([0-9.]*\) tokens\/s$/\1/p;
		s/^prompt passes after the first: 1 in [0-9.]* s, \([0-9]*\) tokens, \([0-9.]*\) tokens\/s$/\1 \2/p' "$W/stats")
	[ $# = 4 ] || { echo "bf16 again batch $1: no --stats lines:"; tail -n 3 "$W/stats"; return; }
	printf '%-8s %5s %9s %12s %12s %10s | %12s %12s | %6s\n' "bf16 again" "$1" "$(($3 / $1)) tok" "$4" "$2" \
		- - - -
}
again 1
again 8
