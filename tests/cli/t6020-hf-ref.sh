#!/bin/sh
# A Hugging Face GPT-2 written by an independent writer (tests/ref/gpt2_hf.py,
# plain torch) generates through gpt-infer the same greedy tokens as the
# PyTorch reference: byte and GPT-2 vocabularies, with and without the
# "transformer." prefix, fp32 and fp16 files.
. "$(dirname "$0")/test-lib.sh"

REF="/usr/bin/python3 $GPT_ROOT/tests/ref/gpt2_hf.py"

# compare DIR PROMPT EOS: gpt-infer's greedy ids against the reference's
compare () {
	gpt-infer -m "$1" --jsonl -o Generation.decode_strategy=greedy_search \
		-o Generation.max_dec_len=40 "$2" >out.jsonl &&
	python3 -c "
import json
r = json.loads(open(\"out.jsonl\").read())
print(\",\".join(map(str, r[\"prompt_ids\"])))
open(\"got\", \"w\").write(\"\".join(\"%d\n\" % i for i in r[\"ids\"]))
" >prompt_ids &&
	$REF greedy "$1" "$(cat prompt_ids)" 40 "$3" >want &&
	test_line_count -gt 10 want &&
	test_cmp want got
}

test_expect_success TORCH 'byte vocabulary, transformer. names, fp32' '
	$REF make a 257 2 64 4 64 1 &&
	compare a "Hello, world" 256
'

test_expect_success TORCH,VOCAB 'GPT-2 vocabulary from share/gpt2, bare names, fp16 file' '
	$REF make b 50257 1 32 2 128 2 - F16 &&
	compare b "The quick brown fox" 50256
'

test_expect_success TORCH 'three layers, eight heads, a prompt of many tokens' '
	$REF make c 257 3 64 8 96 3 &&
	compare c "Everyone is permitted to copy and distribute" 256
'

test_expect_success TORCH 'the comparison can fail: another model differs' '
	$REF make d 257 2 64 4 64 9 &&
	gpt-infer -m d --jsonl -o Generation.decode_strategy=greedy_search \
		-o Generation.max_dec_len=40 "Hello, world" >out.jsonl &&
	$REF greedy a 72,101,108,108,111,44,32,119,111,114,108,100 40 256 >want &&
	python3 -c "
import json
r = json.loads(open(\"out.jsonl\").read())
open(\"got\", \"w\").write(\"\".join(\"%d\n\" % i for i in r[\"ids\"]))
" &&
	! cmp -s want got
'

test_done
