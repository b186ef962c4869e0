#!/bin/sh
# gpt-train against PyTorch over many steps (tests/ref/train_ref.py): every
# step's loss and learning rate in the log, and the final weights, from the
# same weights (a random GPT-2 imported with gpt-ckpt-merge --from-hf) on a
# corpus whose samples are all alike, for each learning-rate schedule with a
# warm-up of a fraction of steps, clipping that binds, weight decay, steps past
# decay_steps, and accumulated micro-batches.
. "$(dirname "$0")/test-lib.sh"

REF="$GPT_ROOT/tests/ref"
PY=/usr/bin/python3

# train NAME [OVERRIDE...]: 12 steps from init/ into out-NAME/, log NAME.log
train () {
	name=$1
	shift
	gpt-train -c "$GPT_ROOT/configs/tiny_cpu_bytes.yaml" -o Engine.save_load.ckpt_dir=init \
		-o Data.Train.dataset.input_dir=per -o Data.Eval.dataset.input_dir=per \
		-o Data.Train.dataset.split=1,0,0 -o Data.Eval.dataset.split=1,0,0 \
		-o Data.Train.dataset.max_seq_len=32 -o Data.Eval.dataset.max_seq_len=32 \
		-o Global.global_batch_size=4 -o Engine.max_steps=12 -o Engine.num_train_epochs=1000 \
		-o Engine.logging_freq=1 -o Engine.eval_freq=0 -o Engine.test_iters=0 \
		-o Engine.save_load.save_steps=12 -o Engine.save_load.output_dir=out-$name \
		-o Optimizer.lr.decay_steps=10 -o Optimizer.lr.warmup_rate=0.33 -o Optimizer.lr.max_lr=1e-3 \
		-o Optimizer.lr.min_lr=1e-4 -o Optimizer.weight_decay=0.1 -o Optimizer.grad_clip.clip_norm=0.05 \
		"$@" >$name.log 2>&1 &&
	gpt-ckpt-merge --consolidate out-$name $name.safetensors
}

# check NAME [KEY=VALUE...]: the reference over the same 12 steps
check () {
	name=$1
	shift
	$PY "$REF/train_ref.py" check init.safetensors per.bin $name.log $name.safetensors steps=12 \
		decay_steps=10 warmup_rate=0.33 max_lr=1e-3 min_lr=1e-4 weight_decay=0.1 clip=0.05 "$@" \
		>$name.report &&
	cat $name.report
}

test_expect_success TORCH 'set up: a random GPT-2, imported; a corpus of one 31-byte line, 200 times' '
	$PY "$REF/train_ref.py" init hf &&
	gpt-ckpt-merge --from-hf hf init 2>err &&
	gpt-ckpt-merge --consolidate init init.safetensors &&
	mkdir docs && for i in $(seq 200); do printf "the quick brown fox jumps over!" >docs/d$i.txt; done &&
	gpt-preprocess -t bytes -o per docs/*.txt 2>/dev/null &&
	gpt-preprocess --info per >info &&
	test_grep "^tokens: 6400$" info
'

test_expect_success TORCH 'the cosine schedule: losses, learning rates and weights as PyTorch has them' '
	train cos && check cos sched=cosine &&
	test_grep "resumed from init/step_00000000 at global step 0" cos.log
'

test_expect_success TORCH 'LinearDecayWithWarmup and Constant as PyTorch has them' '
	train lin -o Optimizer.lr.name=LinearDecayWithWarmup && check lin sched=linear &&
	train con -o Optimizer.lr.name=Constant && check con sched=constant
'

test_expect_success TORCH 'four accumulated micro-batches of one are the batch of four' '
	train acc -o Global.micro_batch_size=1 && check acc sched=cosine &&
	test_grep "micro-batch 1, 4 accumulation steps" acc.log
'

test_expect_success TORCH 'a skipped update: the schedule moves on (FleetX), AdamW counts the updates made' '
	train skip -o Engine.nan_policy=skip -o Engine.fault_inject.nan_steps=3,4 &&
	test_grep "global step 4: .*skipped the update" skip.log &&
	check skip sched=cosine skip=3,4 &&
	test_expect_code 1 $PY "$REF/train_ref.py" check init.safetensors per.bin skip.log skip.safetensors \
		steps=12 decay_steps=10 warmup_rate=0.33 max_lr=1e-3 min_lr=1e-4 weight_decay=0.1 clip=0.05 \
		skip=3 >bad &&
	test_grep "differs" bad
'

test_expect_success TORCH 'the comparison can fail: another warm-up is seen' '
	test_expect_code 1 $PY "$REF/train_ref.py" check init.safetensors per.bin cos.log cos.safetensors \
		steps=12 decay_steps=10 warmup_rate=0.35 max_lr=1e-3 min_lr=1e-4 weight_decay=0.1 clip=0.05 >bad &&
	test_grep "differs" bad
'

test_done
