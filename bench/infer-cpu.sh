#!/bin/sh
# CPU generation speed: gpt-infer next to PyTorch with a KV cache in the same
# run, on the GPT-2 124M shapes (12 layers, 768 hidden, 12 heads, 50257
# tokens, 1024 positions), 2 threads, batch 1 and 8, a prompt of about 128
# tokens then 128 generated tokens (greedy, no early end). Weights: fp32;
# bf16 and fp16 held in memory (gpt-infer --dtype; PyTorch bf16 for both); int8
# (a gpt-export --dtype int8 bundle, weight-only with per-row scales; PyTorch
# dynamic int8 quantization of the linears). gpt-infer computes in fp32 from
# any of them. The weights are those of a checkpoint
# after one training step: speed does not depend on them. PyTorch runs with
# OPENBLAS_CORETYPE=SkylakeX, as in bench/train-cpu.sh.
#
# With GPT_LLAMA_CPP_DIR set to a directory where `npm install
# node-llama-cpp@3.22.1` ran (prebuilt llama.cpp; about 700 MB, so not part
# of make deps; tests/cli/t6040 uses the same), batch 1 is also measured
# against llama.cpp on GGUF exports of the same weights (gpt-export --format
# gguf: f32, f16, q8_0 for int8) in the same run.
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
THREADS=${THREADS:-2}
GEN=${GEN:-128}
PY=/usr/bin/python3
[ -f share/gpt2/encoder.json ] || { echo "infer-cpu: skipped: no GPT-2 vocabulary (make deps)"; exit 0; }
$PY -c 'import torch' 2>/dev/null || { echo "infer-cpu: skipped: no PyTorch (make deps)"; exit 0; }
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
export OMP_NUM_THREADS=$THREADS

. bench/lib-infer.sh
infer_model_setup || exit 1
LLAMA=
if [ -n "${GPT_LLAMA_CPP_DIR:-}" ] && [ -d "$GPT_LLAMA_CPP_DIR/node_modules/node-llama-cpp" ]; then
	LLAMA=$GPT_LLAMA_CPP_DIR
	cp bench/llamacpp_speed.mjs "$LLAMA/gptkit-speed.mjs"
	for d in fp32 fp16 int8; do
		bin/gpt-export --format gguf --dtype $d -o "$W/m-$d.gguf" "$W/ck" >/dev/null 2>&1 || exit 1
	done
fi
: >"$W/vs-llama"

echo "GPT-2 124M shapes, $THREADS threads, $GEN generated tokens; tokens/s (gptkit / PyTorch)"
printf '%-6s %5s %9s %12s %12s %7s %12s %12s %7s\n' weights batch "prompt" "gptkit" "torch" ratio \
	"gen gptkit" "gen torch" ratio
run () { # label model extra-args torch-dtype batch
	prompts=$W/p1
	[ "$5" = 8 ] && prompts=$W/p8
	bin/gpt-infer -m "$2" $3 --stats --batch "$5" -o Generation.decode_strategy=greedy_search \
		-o Generation.min_dec_len=$GEN -o Generation.max_dec_len=$GEN <"$prompts" \
		>/dev/null 2>"$W/stats" || { cat "$W/stats"; return; }
	set -- "$@" $(sed -n 's/^prompt: \([0-9]*\) tokens in [0-9.]* s, \([0-9.]*\) tokens\/s; generation: [0-9]* tokens in [0-9.]* s, \([0-9.]*\) tokens\/s$/\1 \2 \3/p' "$W/stats")
	tp=$(($6 / $5))
	theirs=$(OPENBLAS_CORETYPE=SkylakeX $PY bench/torch_infer.py 12 768 12 50257 1024 "$5" "$tp" "$GEN" "$THREADS" "$4")
	tpp=$(echo "$theirs" | cut -d" " -f2)
	tpg=$(echo "$theirs" | cut -d" " -f4)
	printf '%-6s %5s %9s %12s %12s %7s %12s %12s %7s\n' "$1" "$5" "$tp tok" "$7" "$tpp" \
		"$(echo "scale=2; $7 / $tpp" | bc)" "$8" "$tpg" "$(echo "scale=2; $8 / $tpg" | bc)"
	if [ -n "$LLAMA" ] && [ "$5" = 1 ] && [ -f "$W/m-$1.gguf" ]; then
		l=$(cd "$LLAMA" && node gptkit-speed.mjs "$W/m-$1.gguf" "$W/p1" "$GEN" "$THREADS") || return
		lp=$(echo "$l" | cut -d" " -f2)
		lg=$(echo "$l" | cut -d" " -f4)
		printf '%-6s %12s %12s %7s %12s %12s %7s\n' "$1" "$7" "$lp" \
			"$(echo "scale=2; $7 / $lp" | bc)" "$8" "$lg" "$(echo "scale=2; $8 / $lg" | bc)" >>"$W/vs-llama"
	fi
}
for b in 1 8; do
	run fp32 "$W/ck" "" fp32 $b
	run bf16 "$W/ck" "--dtype bf16" bf16 $b
	run fp16 "$W/ck" "--dtype fp16" bf16 $b
	run int8 "$W/m8.tar" "" int8 $b
done
if [ -s "$W/vs-llama" ]; then
	echo "batch 1 against llama.cpp (node-llama-cpp $(sed -n 's/.*"version": "\(.*\)".*/\1/p' \
		"$LLAMA/node_modules/node-llama-cpp/package.json" | head -n 1), GGUF f32/f16/q8_0 of the same weights); tokens/s"
	printf '%-6s %12s %12s %7s %12s %12s %7s\n' weights "prompt gptkit" "llama.cpp" ratio \
		"gen gptkit" "llama.cpp" ratio
	cat "$W/vs-llama"
fi
