#!/bin/sh
# The gradient reduction overlapped with the backward of each step's last
# micro-batch (Distributed.overlap_grad_reduce) on CPU ranks started by
# gpt-launch: with gradient accumulation, dropout on and tiny buckets (one or
# more per layer), every layout gives the losses and final weights of the
# same layout without overlap, bit for bit; so do sharding stages 2 and 3,
# whose unit-by-unit reductions run beside the backward of the units before
# them. The CPU default is off; --dry-run names the mode.
. "$(dirname "$0")/test-lib.sh"

STEPS=4
args="-o Data.Train.dataset.input_dir=data/lic -o Data.Train.dataset.split=15,2,0 \
	-o Global.micro_batch_size=1 -o Optimizer.lr.max_lr=2e-3 -o Optimizer.lr.decay_steps=150 -o Optimizer.lr.warmup_steps=2 \
	-o Engine.eval_freq=0 -o Model.num_layers=4 \
	-o Model.hidden_dropout_prob=0.1 -o Model.attention_probs_dropout_prob=0.1 \
	-o Engine.max_steps=$STEPS -o Engine.save_load.save_steps=$STEPS -o Engine.save_load.save_epoch=0"

run () { # name nproc overlap flags...
	name=$1 nproc=$2 ov=$3
	shift 3
	gpt-launch --nproc-per-node "$nproc" --log-dir "log-$name" -- \
		gpt-train -c "$GPT_ROOT/configs/tiny_cpu_bytes.yaml" $args "$@" \
		-o Distributed.overlap_grad_reduce="$ov" -o Distributed.comm_buffer_size=0.02 \
		-o Engine.save_load.output_dir="out-$name" >"$name.log" 2>&1
}

same_bits () { # name: the losses and checkpoints of name-off and name-on are the same bits
	train_losses log-$1-off/workerlog.0 >l1 && train_losses log-$1-on/workerlog.0 >l2 &&
	test_line_count = $STEPS l1 && test_cmp l1 l2 &&
	ls out-$1-off/step_0000000$STEPS | grep safetensors >files &&
	test_line_count -gt 0 files &&
	for f in $(cat files); do
		cmp out-$1-off/step_0000000$STEPS/$f out-$1-on/step_0000000$STEPS/$f || return 1
	done
}

test_expect_success 'set up: data' '
	mkdir data &&
	gpt-preprocess -t bytes -o data/lic /usr/share/common-licenses/*
'

layout () { # name nproc flags...
	name=$1 nproc=$2
	shift 2
	test_expect_success "$name: overlapped buckets give the same bits as one reduction after the backward" '
		run '$name'-off '$nproc' False '"$*"' &&
		run '$name'-on '$nproc' True '"$*"' &&
		test_grep "gradient reduction: overlapped with the backward" log-'$name'-on/workerlog.0 &&
		test_grep "gradient reduction: after the backward" log-'$name'-off/workerlog.0 &&
		n=$(sed -n "s/.*gradient reduction: \([0-9]*\) buckets per step/\1/p" log-'$name'-on/workerlog.0) &&
		echo "$n buckets per step" && test "$n" -ge 2 &&
		same_bits '$name'
	'
}

layout dp2 2
layout dp2-bf16 2 -o Engine.mix_precision.enable=True -o Engine.mix_precision.dtype=bfloat16
layout sharding2-stage1 2 --sharding_parallel_degree 2 --sharding stage1
layout sharding2-dp2-stage1 4 --sharding_parallel_degree 2 --sharding stage1 -o Distributed.dp_degree=2
layout dp2-mp2 4 --tensor_parallel_degree 2 -o Distributed.dp_degree=2
layout dp2-pp2 4 --pipeline_parallel_degree 2 -o Distributed.dp_degree=2
layout dp2-pp2-virtual2 4 --pipeline_parallel_degree 2 -o Distributed.virtual_pp_degree=2 \
	-o Distributed.dp_degree=2

# stages 2 and 3 reduce each unit's gradient window as its backward ends:
# overlapped, every micro-batch's windows (not just the last's) are reduced
# while the backward goes on, layers taking two windows in turn
zlayout () { # name nproc flags...
	name=$1 nproc=$2
	shift 2
	test_expect_success "$name: windows reduced beside the backward give the same bits as one at a time" '
		run '$name'-off '$nproc' False '"$*"' &&
		run '$name'-on '$nproc' True '"$*"' &&
		test_grep "gradient reduction: unit by unit, each unit.s reduce-scatter overlapped with the backward" \
			log-'$name'-on/workerlog.0 &&
		test_grep "gradient reduction: unit by unit inside the backward [(]Distributed.overlap_grad_reduce False[)]" \
			log-'$name'-off/workerlog.0 &&
		same_bits '$name'
	'
}

zlayout sharding2-stage2 2 --sharding_parallel_degree 2 --sharding stage2
zlayout sharding2-stage3 2 --sharding_parallel_degree 2 --sharding stage3
zlayout sharding2-dp2-stage2-bf16 4 --sharding_parallel_degree 2 --sharding stage2 -o Distributed.dp_degree=2 \
	-o Engine.mix_precision.enable=True -o Engine.mix_precision.dtype=bfloat16
zlayout pp2-sharding2-stage2 4 --pipeline_parallel_degree 2 --sharding_parallel_degree 2 --sharding stage2
zlayout mp2-sharding2-stage3-pp2-virtual2 8 --tensor_parallel_degree 2 --pipeline_parallel_degree 2 \
	-o Distributed.virtual_pp_degree=2 --sharding_parallel_degree 2 --sharding stage3

test_expect_success 'on the CPU the default is off; FleetX sharding.reduce_overlap turns it on' '
	gpt-train -c "$GPT_ROOT/configs/tiny_cpu_bytes.yaml" --print-config >cfg &&
	test_grep "overlap_grad_reduce: False" cfg &&
	gpt-train -c "$GPT_ROOT/configs/tiny_cpu_bytes.yaml" -o Distributed.sharding.reduce_overlap=True \
		--print-config >cfg2 &&
	test_grep "overlap_grad_reduce: True" cfg2 &&
	gpt-train -c "$GPT_ROOT/configs/tiny_cpu_bytes.yaml" -o Global.device=gpu --print-config >cfg3 &&
	test_grep "overlap_grad_reduce: True" cfg3
'

test_expect_success 'overlap_grad_reduce False with reduce_overlap True is an error naming both' '
	test_expect_code 64 gpt-train -c "$GPT_ROOT/configs/tiny_cpu_bytes.yaml" \
		-o Distributed.sharding.reduce_overlap=True -o Distributed.overlap_grad_reduce=False \
		--print-config 2>err &&
	test_grep "Distributed.overlap_grad_reduce: expected True with Distributed.sharding.reduce_overlap True" err
'

test_expect_success '--dry-run names how the gradients are reduced, and the staging a shared GPU needs' '
	gpt-train -c "$GPT_ROOT/configs/tiny_cpu_bytes.yaml" --world-size 2 --dry-run >plan &&
	test_grep "^gradient reduction: after the backward" plan &&
	gpt-train -c "$GPT_ROOT/configs/tiny_cpu_bytes.yaml" --world-size 2 --dry-run \
		-o Distributed.overlap_grad_reduce=True >plan2 &&
	test_grep "^gradient reduction: overlapped with the last backward, buckets of at least 25 MB" plan2 &&
	! grep "overlap staging" plan2 &&
	gpt-train -c "$GPT_ROOT/configs/tiny_cpu_bytes.yaml" --world-size 2 --dry-run -o Global.device=gpu >plan3 &&
	test_grep "^  overlap staging: .* pinned host, where GPU ranks share a device over shm" plan3 &&
	gpt-train -c "$GPT_ROOT/configs/tiny_cpu_bytes.yaml" --world-size 2 --dry-run --sharding_parallel_degree 2 \
		--sharding stage2 -o Distributed.overlap_grad_reduce=True >plan4 &&
	test_grep "^gradient reduction: unit by unit inside the backward [(]sharding stage 2[)], each overlapped with the units before it, reduce-scattered over the sharding group$" plan4 &&
	gpt-train -c "$GPT_ROOT/configs/tiny_cpu_bytes.yaml" --world-size 4 --dry-run --sharding_parallel_degree 2 \
		--sharding stage3 -o Distributed.dp_degree=2 >plan5 &&
	test_grep "^gradient reduction: .*[(]sharding stage 3[)].*reduce-scattered over the sharding group; the shards summed over dp once a step$" plan5
'

test_done
