#!/bin/sh
# Quantization-aware training: fine-tuning a trained tiny model with fake-
# quantized linears keeps its loss, the scales live in the checkpoint and
# resume bit for bit, data parallel and sharded runs give the single-process
# losses (relative 1e-5) and state (absolute 5e-3: a last-bit difference
# of the summation order can flip one rounding of a quantizer, which moves a
# value by a whole quantization step), and settings this trainer cannot
# honour are refused.
. "$(dirname "$0")/test-lib.sh"

train () {
	gpt-train -c "$GPT_ROOT/configs/tiny_cpu_bytes.yaml" \
		-o Data.Train.dataset.input_dir=data/lic -o Data.Eval.dataset.input_dir=data/lic \
		-o Data.Train.dataset.split=15,2,0 -o Data.Eval.dataset.split=15,2,0 \
		-o Global.micro_batch_size=8 -o Engine.eval_iters=2 -o Optimizer.lr.max_lr=2e-3 \
		-o Optimizer.lr.decay_steps=100 -o Optimizer.lr.warmup_rate=0.02 "$@"
}

qat () {
	train -o Engine.save_load.ckpt_dir=base -o Quantization.enable=True "$@"
}

losses () {
	sed -n 's/.* - global step \([0-9]*\), epoch.*loss: \([0-9.e+-]*\),.*/\1 \2/p' "$1"
}

eval_loss () {
	sed -n "s/.*\[eval\] global step $2,.*loss: \([0-9.]*\),.*/\1/p" "$1"
}

test_expect_success 'set up: a byte model trained 100 steps without quantization' '
	mkdir data &&
	gpt-preprocess -t bytes -o data/lic /usr/share/common-licenses/* 2>/dev/null &&
	train -o Engine.max_steps=100 -o Engine.eval_freq=100 -o Engine.save_load.save_steps=100 \
		-o Engine.save_load.output_dir=base >base.log 2>&1 &&
	test -f base/step_00000100/index.json
'

test_expect_success 'QAT fine-tuning from it starts with fresh scales and keeps its loss' '
	qat -o Engine.max_steps=130 -o Engine.eval_freq=130 -o Engine.logging_freq=1 \
		-o Engine.save_load.save_steps=130 -o Engine.save_load.output_dir=q >q.log 2>&1 &&
	test_grep "quantization-aware training of attn.qkv attn.proj mlp.fc mlp.proj: weights 8-bit channel_wise_abs_max, activations 8-bit moving_average_abs_max \(moving_rate 0.9\)" q.log &&
	test_grep "base/step_00000100 holds no quantization scales: quantization-aware training starts from its weights with fresh scales" q.log &&
	b=$(eval_loss base.log 100) && a=$(eval_loss q.log 130) &&
	first=$(losses q.log | head -n 1 | cut -d" " -f2) &&
	echo "eval loss before $b, after QAT $a; first QAT step $first" &&
	test "$(echo "$a < $b + 0.02 && $first < $b + 0.3" | bc)" = 1
'

test_expect_success 'the checkpoint holds the scales: qat.h.{i}.{linear}.{scale,state,accum}' '
	gpt-ckpt-merge --info q >info &&
	test_grep "^  qat\.h\.1\.mlp\.proj\.accum +F32 +\[1\]$" info &&
	test "$(grep -c "^  qat\." info)" = 24 &&
	gpt-ckpt-merge --consolidate --weights-only q c.safetensors 2>/dev/null &&
	python3 -c "
import json, struct
f = open(\"c.safetensors\", \"rb\")
n = struct.unpack(\"<Q\", f.read(8))[0]
h = json.loads(f.read(n))
d = f.read()
v = lambda k: struct.unpack(\"<f\", d[h[k][\"data_offsets\"][0]:h[k][\"data_offsets\"][1]])[0]
for l in (0, 1):
    for k in (\"attn.qkv\", \"attn.proj\", \"mlp.fc\", \"mlp.proj\"):
        p = \"qat.h.%d.%s.\" % (l, k)
        # 30 steps of the moving average from state 1: state = 0.9^30 + sum 0.9^i
        st = 0.9 ** 30 + sum(0.9 ** i for i in range(30))
        assert abs(v(p + \"state\") - st) < 1e-4, (p, v(p + \"state\"), st)
        assert abs(v(p + \"scale\") - v(p + \"accum\") / v(p + \"state\")) < 1e-6
        assert 0.05 < v(p + \"scale\") < 100, (p, v(p + \"scale\"))
"
'

test_expect_success 'stop and resume: the same losses and the same bytes, scales included' '
	qat -o Engine.max_steps=110 -o Engine.eval_freq=0 -o Engine.save_load.save_steps=5 \
		-o Engine.save_load.output_dir=full >full.log 2>&1 &&
	qat -o Engine.max_steps=105 -o Engine.eval_freq=0 -o Engine.save_load.save_steps=5 \
		-o Engine.save_load.output_dir=part >part1.log 2>&1 &&
	train -o Engine.max_steps=110 -o Engine.eval_freq=0 -o Engine.save_load.save_steps=5 \
		-o Quantization.enable=True -o Engine.save_load.output_dir=part >part2.log 2>&1 &&
	test_grep "resumed from part/step_00000105 at global step 105" part2.log &&
	! grep "no quantization scales" part2.log &&
	losses full.log >a && { losses part1.log; losses part2.log; } >b &&
	test_cmp a b &&
	cmp full/step_00000110/rank-00000.safetensors part/step_00000110/rank-00000.safetensors
'

test_expect_success 'a different step than plain training: the quantizers act' '
	train -o Engine.max_steps=110 -o Engine.eval_freq=0 -o Engine.save_load.save_steps=0 \
		-o Engine.save_load.ckpt_dir=base >plain.log 2>&1 &&
	losses plain.log >p &&
	! test_cmp a p 2>/dev/null
'

STEPS=6
same_losses () {
	losses "$1" >l1 && losses "$2" >l2 &&
	test_line_count = "$STEPS" l1 && test_line_count = "$STEPS" l2 &&
	paste l1 l2 | awk '{ d = $2 - $4; if (d < 0) d = -d; r = d / $2;
		if ($1 != $3 || r > 1e-5) { print "step " $1 ": " $2 " vs " $4 " (rel " r ")"; bad = 1 } }
		END { exit bad }'
}

layout () { # name nproc flags...
	name=$1 nproc=$2
	shift 2
	test_expect_success "QAT on $nproc ranks ($name) equals one process" '
		gpt-launch --nproc-per-node '$nproc' --log-dir log-'$name' -- \
			gpt-train -c "$GPT_ROOT/configs/tiny_cpu_bytes.yaml" '"$*"' \
			-o Data.Train.dataset.input_dir=data/lic -o Data.Train.dataset.split=15,2,0 \
			-o Global.micro_batch_size=1 -o Engine.eval_freq=0 -o Optimizer.lr.max_lr=2e-3 \
			-o Model.hidden_dropout_prob=0.1 -o Model.attention_probs_dropout_prob=0.1 \
			-o Engine.max_steps=$STEPS -o Engine.save_load.save_steps=$STEPS \
			-o Quantization.enable=True -o Engine.save_load.output_dir=out-'$name' >'$name'.log 2>&1 &&
		same_losses single.log log-'$name'/workerlog.0 &&
		test-tool ckpt-diff single/step_0000000$STEPS out-'$name'/step_0000000$STEPS >diff &&
		cat diff &&
		awk "{ exit !(\$2 <= 5e-3) }" diff
	'
}

test_expect_success 'set up: the single-process QAT reference (8 micro-batches a step)' '
	gpt-train -c "$GPT_ROOT/configs/tiny_cpu_bytes.yaml" \
		-o Data.Train.dataset.input_dir=data/lic -o Data.Train.dataset.split=15,2,0 \
		-o Global.micro_batch_size=1 -o Engine.eval_freq=0 -o Optimizer.lr.max_lr=2e-3 \
		-o Model.hidden_dropout_prob=0.1 -o Model.attention_probs_dropout_prob=0.1 \
		-o Engine.max_steps=$STEPS -o Engine.save_load.save_steps=$STEPS \
		-o Quantization.enable=True -o Engine.save_load.output_dir=single >single.log 2>&1
'
layout dp2 2
layout sharding2-stage2 2 --sharding_parallel_degree 2 --sharding stage2
layout dp2-recompute 2 -o Model.use_recompute=True
layout mp2 2 --tensor_parallel_degree 2
layout mp2-sequence-parallel 2 --tensor_parallel_degree 2 -o Model.sequence_parallel=True
layout pp2 2 --pipeline_parallel_degree 2
layout mp2-pp2 4 --tensor_parallel_degree 2 --pipeline_parallel_degree 2

test_expect_success 'other settings: abs_max weights and inputs, 4 bits, RowParallelLinear only' '
	qat -o Engine.max_steps=105 -o Engine.eval_freq=0 -o Engine.save_load.save_steps=0 \
		-o Quantization.weight_quantize_type=abs_max -o Quantization.activation_quantize_type=abs_max \
		-o Quantization.weight_bits=4 -o Quantization.activation_bits=4 \
		-o "Quantization.quantizable_layer_type=[RowParallelLinear]" >other.log 2>&1 &&
	test_grep "quantization-aware training of attn.proj mlp.proj: weights 4-bit abs_max, activations 4-bit abs_max$" other.log &&
	test "$(losses other.log | wc -l)" = 5
'

test_expect_success 'PACT, the embedding and unknown layer kinds are refused, naming the key' '
	test_expect_code 64 qat -o Engine.max_steps=101 -o Quantization.activation_preprocess_type=PACT >e1 2>&1 &&
	test_grep "Quantization.activation_preprocess_type: PACT \(learned clipping\) is not supported" e1 &&
	test_expect_code 64 qat -o Engine.max_steps=101 "-o" "Quantization.quantizable_layer_type=[Linear, Embedding]" >e2 2>&1 &&
	test_grep "Quantization.quantizable_layer_type: Embedding: the embedding and the output head" e2 &&
	test_expect_code 64 qat -o Engine.max_steps=101 "-o" "Quantization.quantizable_layer_type=[Conv2D]" >e3 2>&1 &&
	test_grep "Conv2D is not a layer of GPT" e3
'

test_expect_success 'gpt-train --dry-run still plans the 345M mp8 QAT configuration' '
	gpt-train -c "$GPT_ROOT/configs/pretrain_gpt_345M_mp8_qat.yaml" --dry-run >plan &&
	test_grep "^layout: world size 8 " plan &&
	test_grep "^  total:" plan
'

test_done
