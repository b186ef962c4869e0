#!/bin/sh
# The GGUF gpt-export writes, loaded by llama.cpp itself, gives gpt-infer's
# greedy tokens. llama.cpp comes from npm's node-llama-cpp (prebuilt binaries,
# about 700 MB, so not part of make deps): set GPT_LLAMA_CPP_DIR to a directory
# where `npm install node-llama-cpp@3.22.1` ran; without it the test skips.
. "$(dirname "$0")/test-lib.sh"

if [ -n "${GPT_LLAMA_CPP_DIR:-}" ] && [ -d "$GPT_LLAMA_CPP_DIR/node_modules/node-llama-cpp" ]; then
	test_set_prereq LLAMA_CPP
fi

test_expect_success LLAMA_CPP,VOCAB 'set up: a GPT-2-vocabulary model with varied predictions' '
	mkdir data &&
	gpt-preprocess -o data/tiny /usr/share/common-licenses/* &&
	gpt-train -c "$GPT_ROOT/configs/tiny_cpu.yaml" -o Data.Train.dataset.split=15,2,0 \
		-o Data.Eval.dataset.split=15,2,0 -o Engine.max_steps=1 -o Engine.eval_freq=0 \
		-o Engine.test_iters=0 -o Model.initializer_range=0.3 -o Global.micro_batch_size=8 >log 2>&1 &&
	cp "$GPT_ROOT/tests/ref/llamacpp_greedy.mjs" "$GPT_LLAMA_CPP_DIR/gptkit-greedy.mjs"
'

for dt in fp32 fp16; do
	test_expect_success LLAMA_CPP,VOCAB "llama.cpp runs the $dt GGUF to the same greedy tokens" '
		gpt-export --format gguf --dtype '$dt' -o m.gguf output &&
		for p in "GNU General Public" "Permission is hereby granted"; do
			gpt-infer -m output --dtype '$dt' --jsonl -o Generation.decode_strategy=greedy_search \
				-o Generation.max_dec_len=16 "$p" | sed "s/.*\"ids\":\(\[[^]]*\]\).*/\1/" >ours &&
			(cd "$GPT_LLAMA_CPP_DIR" && node gptkit-greedy.mjs "$OLDPWD/m.gguf" "$p" 16) |
				sed "s/.*\"ids\":\(\[[^]]*\]\).*/\1/" >theirs &&
			test_cmp ours theirs || exit 1
		done
	'
done

test_done
