#!/bin/sh
# float16 at Distributed.sharding.sharding_stage 3 keeps no fp16 copy of the
# parameters: the fp32 master weights are the only one, and each unit's
# fp16 weights are cast from them into a window when it runs (lib/train/
# zero.c), at any sharding degree, one included. The cast rounds as the
# optimizer's copy did, so the bits are those of the layouts that keep the
# copy: stage 1 at sharding degree 1 (one rank; dp 2, pp 2 or tp 2 on two),
# stage 2 at sharding degree 2.
# The memory line and --dry-run count 2 bytes a parameter less; a run
# stopped and resumed is bit for bit the unbroken run; a stage-1 checkpoint
# resumes at stage 3 and the other way round.
. "$(dirname "$0")/test-lib.sh"

FP="-o Engine.mix_precision.enable=True -o Engine.mix_precision.dtype=float16"
S3="-o Distributed.sharding.sharding_stage=3"
train () { # name nproc args...: worker logs in log-NAME, checkpoints in NAME (kept: resumed)
	name=$1 np=$2
	shift 2
	rm -rf "log-$name" &&
	gpt-launch --nproc-per-node "$np" --log-dir "log-$name" -- \
		gpt-train -c "$GPT_ROOT/configs/tiny_cpu_bytes.yaml" $FP \
		-o Data.Train.dataset.input_dir=data/lic -o Data.Eval.dataset.input_dir=data/lic \
		-o Data.Train.dataset.split=15,2,0 -o Data.Eval.dataset.split=15,2,0 -o Model.num_layers=4 \
		-o Global.micro_batch_size=1 -o Engine.eval_freq=5 -o Engine.eval_iters=1 -o Engine.test_iters=0 \
		-o Optimizer.lr.max_lr=2e-3 -o Optimizer.lr.decay_steps=150 -o Optimizer.lr.warmup_steps=2 \
		-o Model.hidden_dropout_prob=0.1 -o Model.attention_probs_dropout_prob=0.1 \
		-o Engine.save_load.save_steps=5 -o Engine.save_load.output_dir="$name" "$@" >/dev/null 2>&1
}

# the loss fields of a worker log's step and eval lines
losses () {
	sed -n "s/.*global step \([0-9]*\),.* loss: \([0-9.]*\),.*/\1 \2/p" "$1"
}

# every safetensors file of two step directories the same bytes
same_parts () {
	ls "$1" | grep safetensors >p1 && ls "$2" | grep safetensors >p2 && test_cmp p1 p2 &&
	for f in $(cat p1); do
		cmp "$1/$f" "$2/$f" || return 1
	done
}

test_expect_success 'set up: data' '
	mkdir data &&
	gpt-preprocess -t bytes -o data/lic /usr/share/common-licenses/*
'

test_expect_success 'one rank: stage 3 trains the bits of stage 1, with 2 bytes a parameter fewer' '
	train s1 1 -o Engine.max_steps=10 &&
	train s3 1 $S3 -o Engine.max_steps=10 &&
	losses log-s1/workerlog.0 >a && losses log-s3/workerlog.0 >b &&
	test "$(wc -l <a)" = 12 && test_cmp a b &&
	same_parts s1/step_00000010 s3/step_00000010 &&
	test_grep "memory: the float16 parameters are kept only as the fp32 master weights \(Distributed.sharding.sharding_stage 3\)" log-s3/workerlog.0 &&
	! grep -q "kept only as the fp32 master" log-s1/workerlog.0 &&
	test_grep "sharding stage 3 over 1" log-s3/workerlog.0 &&
	p1=$(sed -n "s/.*memory: parameters \([0-9.]*\) MiB,.*(\([0-9]*\) bytes)$/\2/p" log-s1/workerlog.0) &&
	p3=$(sed -n "s/.*memory: parameters \([0-9.]*\) MiB,.*(\([0-9]*\) bytes)$/\2/p" log-s3/workerlog.0) &&
	echo "stage 1: $p1 bytes, stage 3: $p3 bytes" &&
	test -n "$p1" && test -n "$p3" && test "$p3" -lt "$p1"
'

test_expect_success '--dry-run: stage 3 in float16 keeps no parameter copy; in bfloat16 and with offload on a GPU it does' '
	gpt-train -c "$GPT_ROOT/configs/pretrain_gpt_1.3B_single_card.yaml" -o Global.device=gpu $S3 --dry-run >plan3 &&
	gpt-train -c "$GPT_ROOT/configs/pretrain_gpt_1.3B_single_card.yaml" -o Global.device=gpu --dry-run >plan1 &&
	test_grep "^  parameters: +296.6 MiB  \(2 bytes each, none kept: a window for one layer, the embedding and ln_f, cast from the fp32 master weights when used" plan3 &&
	test_grep "^  total: +19.15 GiB" plan3 &&
	test_grep "^  total: +21.31 GiB" plan1 &&
	gpt-train -c "$GPT_ROOT/configs/pretrain_gpt_1.3B_single_card.yaml" -o Global.device=gpu $S3 \
		-o Distributed.sharding.sharding_offload=True --dry-run >plan3o &&
	gpt-train -c "$GPT_ROOT/configs/pretrain_gpt_1.3B_single_card.yaml" -o Global.device=gpu $S3 \
		-o Engine.mix_precision.dtype=bfloat16 --dry-run >plan3b &&
	! grep -q "none kept" plan3o && ! grep -q "none kept" plan3b &&
	test_grep "^  parameters: +2.45 GiB" plan3o
'

test_expect_success 'one rank: stop at 5 and resume to 10 is bit for bit' '
	rm -rf s3 && train s3 1 $S3 -o Engine.max_steps=5 && train s3 1 $S3 -o Engine.max_steps=10 &&
	test_grep "resumed from s3/step_00000005 at global step 5" log-s3/workerlog.0 &&
	same_parts s1/step_00000010 s3/step_00000010
'

test_expect_success 'a stage-1 checkpoint resumes at stage 3, and a stage-3 one at stage 1' '
	train x 1 -o Engine.max_steps=5 && train x 1 $S3 -o Engine.max_steps=10 &&
	test_grep "resumed from x/step_00000005" log-x/workerlog.0 &&
	same_parts s1/step_00000010 x/step_00000010 &&
	train y 1 $S3 -o Engine.max_steps=5 && train y 1 -o Engine.max_steps=10 &&
	test_grep "resumed from y/step_00000005" log-y/workerlog.0 &&
	same_parts s1/step_00000010 y/step_00000010
'

test_expect_success 'two ranks: dp 2, pp 2 and tp 2 at stage 3 give the bits of stage 1' '
	for lay in "-o Distributed.dp_degree=2" "-o Distributed.pp_degree=2" "-o Distributed.mp_degree=2"; do
		rm -rf a1 a3 && train a1 2 $lay -o Engine.max_steps=10 &&
		train a3 2 $lay $S3 -o Engine.max_steps=10 &&
		losses log-a1/workerlog.0 >a && losses log-a3/workerlog.0 >b && test_cmp a b &&
		test_grep "kept only as the fp32 master" log-a3/workerlog.0 &&
		same_parts a1/step_00000010 a3/step_00000010 || exit 1
	done
'

test_expect_success 'sharding 2: stage 3 gives the bits of stage 2 and resumes bit for bit' '
	SH="--sharding_parallel_degree 2" &&
	train h2 2 $SH --sharding stage2 -o Engine.max_steps=10 &&
	train h3 2 $SH --sharding stage3 -o Engine.max_steps=10 &&
	losses log-h2/workerlog.0 >a && losses log-h3/workerlog.0 >b && test_cmp a b &&
	same_parts h2/step_00000010 h3/step_00000010 &&
	rm -rf h3 && train h3 2 $SH --sharding stage3 -o Engine.max_steps=5 &&
	train h3 2 $SH --sharding stage3 -o Engine.max_steps=10 &&
	test_grep "resumed from h3/step_00000005" log-h3/workerlog.0 &&
	same_parts h2/step_00000010 h3/step_00000010
'

test_done
