#!/bin/sh
# gpt-infer --device cuda on a tiny byte model that has memorised one
# sentence: with fp32 weights greedy decoding prints what the CPU prints and
# the perplexity agrees (relative 1e-4); bf16 and fp16 weights recite the
# sentence and agree within 5e-2; sampling repeats with its seed; int8
# weights are refused with a clear error. Skips without a GPU (GPT_EMU_BIN:
# see t4060).
. "$(dirname "$0")/../cli/test-lib.sh"

if [ -n "${GPT_EMU_BIN:-}" ]; then
	PATH="$GPT_EMU_BIN:$PATH"
	test_set_prereq GPU
fi
if ! test_have_prereq GPU; then
	echo "1..0 # SKIP no GPU (nvidia-smi lists none): inference on CUDA is tested on a GPU only"
	cd / && rm -rf "$GPT_TRASH"
	exit 0
fi
. "$GPT_ROOT/tests/cli/lib-memorised.sh"

LEN=${GPT_GPU_TEST_TOKENS:-40}
g () {
	gpt-infer -m ck -o Generation.decode_strategy=greedy_search -o Generation.max_dec_len=$LEN "$@"
}
ppl () { sed "s/perplexity: \([0-9.]*\),.*/\1/" "$1"; }
near () { # a b tol
	awk -v a="$1" -v b="$2" -v t="$3" 'BEGIN { d = a - b; if (d < 0) d = -d;
		if (d > t * b) { print a " vs " b; exit 1 } }'
}

test_expect_success 'set up: a model that has learnt one sentence by heart' '
	train_memorised &&
	printf "Everyone is permitted to copy. Lorem ipsum dolor sit amet.\n" >text
'

test_expect_success 'fp32 weights: greedy decoding and perplexity as on the CPU' '
	g --dtype fp32 "Everyone is" "this license" >cpu &&
	g --dtype fp32 --device cuda "Everyone is" "this license" >gpu &&
	test_cmp cpu gpu &&
	gpt-infer -m ck --dtype fp32 --ppl text >p-cpu &&
	gpt-infer -m ck --dtype fp32 --device cuda --ppl text >p-gpu &&
	cat p-cpu p-gpu &&
	near "$(ppl p-gpu)" "$(ppl p-cpu)" 1e-4
'

for t in bf16 fp16; do
	test_expect_success "$t weights on the GPU recite the sentence; perplexity within 5e-2" '
		g --dtype '$t' --device cuda "Everyone is" >out &&
		test_grep "^Everyone is perm" out &&
		gpt-infer -m ck --dtype '$t' --ppl text >p-cpu &&
		gpt-infer -m ck --dtype '$t' --device cuda --ppl text >p-gpu &&
		cat p-cpu p-gpu &&
		near "$(ppl p-gpu)" "$(ppl p-cpu)" 5e-2
	'
done

test_expect_success 'sampling on the GPU repeats with its seed' '
	s="-o Generation.decode_strategy=sampling -o Generation.temperature=2 -o Generation.max_dec_len=$LEN" &&
	gpt-infer -m ck --device cuda $s -o Generation.seed=7 "Every" >a &&
	gpt-infer -m ck --device cuda $s -o Generation.seed=7 "Every" >b &&
	test_cmp a b
'

test_expect_success 'int8 weights on the GPU: a clear error' '
	test_expect_code 64 gpt-infer -m ck --dtype int8 --device cuda "x" 2>err &&
	test_grep "device cuda: int8 weights have no CUDA kernels" err
'

test_done
