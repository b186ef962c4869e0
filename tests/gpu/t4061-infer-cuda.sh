#!/bin/sh
# gpt-infer --device cuda on a tiny byte model that has memorised one
# sentence: with fp32 weights greedy decoding prints what the CPU prints and
# the perplexity agrees (relative 1e-4); bf16 and fp16 weights recite the
# sentence and agree within 5e-2; sampling repeats with its seed; int8
# weights (converted on loading, a post-training int8 bundle, and the int8
# bundle of a QAT fine-tuning with activation PACT, whose linears' inputs
# are clipped and fake-quantized) give the CPU's greedy tokens and its
# perplexity within 1e-4; a model whose heads are above the CUDA kernels'
# size is refused before it is loaded, naming --device cpu; generation steps
# run as CUDA graphs give the bytes of their kernels launched one by one
# (GPT_CUDA_GRAPHS=0), greedy, sampling and beam search, with --stats
# counting the steps. Skips without a
# GPU (GPT_EMU_BIN: see t4060; tests/gpu/emu/train.sh t4061 runs it under
# the emulator).
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

# Each generation step after the first at a batch size is one CUDA graph,
# recorded once and replayed: the same kernels on the same memory, so the
# same bytes as launching them one by one (GPT_CUDA_GRAPHS=0).
for t in fp32 bf16 int8; do
	test_expect_success "$t weights: steps as CUDA graphs give the tokens of launches one by one" '
		g --dtype '$t' --device cuda --stats "Everyone is" "this license" >graph 2>stats &&
		GPT_CUDA_GRAPHS=0 g --dtype '$t' --device cuda --stats "Everyone is" "this license" >plain 2>stats0 &&
		cat stats stats0 &&
		test_cmp plain graph &&
		test_grep "^CUDA graphs: [1-9][0-9]* steps$" stats &&
		test_grep "^CUDA graphs: 0 steps, then off: GPT_CUDA_GRAPHS=0$" stats0 &&
		g --dtype '$t' --device cuda "Everyone is" >one &&
		GPT_CUDA_GRAPHS=0 g --dtype '$t' --device cuda "Everyone is" >one0 &&
		test_cmp one0 one
	'
done

test_expect_success 'sampling: CUDA graphs as launches one by one, sequences ending at different steps' '
	s="-o Generation.decode_strategy=sampling -o Generation.temperature=2 -o Generation.max_dec_len=$LEN" &&
	gpt-infer -m ck --device cuda $s -o Generation.seed=3 -o Generation.num_return_sequences=3 \
		--stop " " "Every" "this" >a &&
	GPT_CUDA_GRAPHS=0 gpt-infer -m ck --device cuda $s -o Generation.seed=3 \
		-o Generation.num_return_sequences=3 --stop " " "Every" "this" >b &&
	test_cmp b a
'

test_expect_success 'beam search: CUDA graphs as launches one by one, the caches copied between steps' '
	s="-o Generation.decode_strategy=beam_search -o Generation.num_beams=3 -o Generation.max_dec_len=$LEN" &&
	gpt-infer -m ck --device cuda --stats $s -o Generation.num_return_sequences=3 "Every" >a 2>stats &&
	GPT_CUDA_GRAPHS=0 gpt-infer -m ck --device cuda $s -o Generation.num_return_sequences=3 "Every" >b &&
	cat stats a &&
	test_cmp b a &&
	test_grep "^CUDA graphs: [1-9][0-9]* steps$" stats
'

# under the emulator only: a runtime that cannot record a step
if [ -n "${GPT_EMU_BIN:-}" ]; then
	test_expect_success 'a step that cannot be recorded: graphs off, the same tokens, --stats says why' '
		EMU_CAPTURE_REFUSE=1 g --dtype bf16 --device cuda --stats "Everyone is" "this license" \
			>refused 2>stats &&
		GPT_CUDA_GRAPHS=0 g --dtype bf16 --device cuda "Everyone is" "this license" >plain &&
		cat stats &&
		test_cmp plain refused &&
		test_grep "^CUDA graphs: 0 steps, then off: a step of 2 sequences could not be recorded: cuda: recording a CUDA graph: " stats
	'
fi

test_expect_success 'GPT_CUDA_GRAPHS other than 0 or 1 is a usage error' '
	test_expect_code 64 env GPT_CUDA_GRAPHS=yes gpt-infer -m ck --device cuda "Every" 2>err &&
	test_grep "^gpt-infer: error: GPT_CUDA_GRAPHS is .yes.; expected 1 .the default" err
'

test_expect_success 'heads above the CUDA kernels (160 = 160 / 1) are refused before loading, naming --device cpu' '
	gpt-train -c "$GPT_ROOT/configs/tiny_cpu_bytes.yaml" \
		-o Data.Train.dataset.input_dir=d/s -o Data.Eval.dataset.input_dir=d/s \
		-o Data.Train.dataset.split=8,1,0 -o Data.Eval.dataset.split=8,1,0 \
		-o Model.hidden_size=160 -o Model.num_attention_heads=1 -o Model.max_position_embeddings=16 \
		-o Data.Train.dataset.max_seq_len=16 -o Data.Eval.dataset.max_seq_len=16 \
		-o Engine.eval_freq=0 -o Engine.test_iters=0 -o Engine.max_steps=1 \
		-o Engine.save_load.save_steps=1 -o Engine.save_load.output_dir=hs160 >hs160.log 2>&1 &&
	gpt-infer -m hs160 -o Generation.max_dec_len=4 "Every" >out &&
	test_expect_code 64 gpt-infer -m hs160 --device cuda -o Generation.max_dec_len=4 "Every" 2>err &&
	test_grep "^gpt-infer: error: --device cuda: the model.s head size hidden / heads = 160 / 1 = 160 is above the CUDA attention kernels. 128; use --device cpu$" err &&
	test_expect_code 64 gpt-infer -m hs160 --device cuda --ppl text 2>err &&
	test_grep "head size .* use --device cpu$" err
'

gm () { # MODEL ARGS...: greedy decoding of MODEL as stored
	m=$1
	shift
	gpt-infer -m "$m" -o Generation.decode_strategy=greedy_search -o Generation.max_dec_len=$LEN "$@"
}

test_expect_success 'int8 weights (quantized on loading): greedy tokens and perplexity as on the CPU' '
	g --dtype int8 "Everyone is" "this license" >cpu8 &&
	g --dtype int8 --device cuda "Everyone is" "this license" >gpu8 &&
	test_cmp cpu8 gpu8 &&
	gpt-infer -m ck --dtype int8 --ppl text >p-cpu &&
	gpt-infer -m ck --dtype int8 --device cuda --ppl text >p-gpu &&
	cat p-cpu p-gpu &&
	near "$(ppl p-gpu)" "$(ppl p-cpu)" 1e-4
'

test_expect_success 'a post-training int8 bundle: the CPU greedy tokens on the GPU' '
	gpt-export --dtype int8 -o b8.tar ck 2>/dev/null &&
	gm b8.tar "Everyone is" >cpu-b8 &&
	gm b8.tar --device cuda "Everyone is" >gpu-b8 &&
	test_cmp cpu-b8 gpu-b8
'

test_expect_success 'set up: QAT fine-tuning with activation PACT, exported as int8' '
	gpt-train -c "$GPT_ROOT/configs/tiny_cpu_bytes.yaml" \
		-o Data.Train.dataset.input_dir=d/s -o Data.Eval.dataset.input_dir=d/s \
		-o Data.Train.dataset.split=8,1,0 -o Data.Eval.dataset.split=8,1,0 \
		-o Global.micro_batch_size=8 -o Engine.eval_freq=0 -o Optimizer.lr.max_lr=1e-3 \
		-o Optimizer.lr.decay_steps=20 -o Optimizer.lr.warmup_rate=0.02 \
		-o Engine.max_steps=210 -o Engine.save_load.save_steps=210 \
		-o Engine.save_load.ckpt_dir=ck -o Quantization.enable=True \
		-o Quantization.activation_preprocess_type=PACT -o Quantization.pact_init_value=3 \
		-o Engine.save_load.output_dir=q >q.log 2>&1 &&
	gpt-export --dtype int8 -o q8.tar q 2>/dev/null &&
	tar -xOf q8.tar model.safetensors >q8.safetensors &&
	grep -a -q "h.1.mlp.proj.input_scale" q8.safetensors &&
	grep -a -q "h.1.mlp.proj.input_clip" q8.safetensors
'

# The fake quantization itself is the CPU's bit for bit, but an input a
# last-bit difference upstream (the order of a sum, GELU's tanh) moves
# across a rounding boundary changes by a whole step: hence 5e-4, not 1e-4.
test_expect_success 'the QAT int8 bundle on the GPU: the CPU greedy tokens and perplexity' '
	gm q8.tar "Everyone is" "this license" >cpu-q8 &&
	gm q8.tar --device cuda "Everyone is" "this license" >gpu-q8 &&
	cat gpu-q8 &&
	test_cmp cpu-q8 gpu-q8 &&
	gpt-infer -m q8.tar --ppl text >p-cpu &&
	gpt-infer -m q8.tar --device cuda --ppl text >p-gpu &&
	cat p-cpu p-gpu &&
	near "$(ppl p-gpu)" "$(ppl p-cpu)" 5e-4
'

test_done
