#!/bin/sh
# Tensor and pipeline parallelism, alone and mixed with data parallelism and
# ZeRO sharding, on CPU ranks started by gpt-launch: with dropout on, every
# layout gives the single-process losses (relative 1e-6: the layouts sum
# partial products and the loss in another order, nothing else differs) and
# final weights (absolute 5e-6), saved in parts by every rank. AdamW's
# epsilon is 1e-6: at 1e-8 a gradient near 0 whose sign a last-bit difference
# of a partial sum flips becomes a whole learning-rate step, rounding that
# came to 9.9e-6 here, where 1e-6 leaves 5.6e-7.
. "$(dirname "$0")/test-lib.sh"

STEPS=6
args="-o Data.Train.dataset.input_dir=data/lic -o Data.Eval.dataset.input_dir=data/lic \
	-o Data.Train.dataset.split=15,2,0 -o Data.Eval.dataset.split=15,2,0 \
	-o Global.micro_batch_size=1 -o Engine.eval_iters=1 -o Optimizer.lr.max_lr=2e-3 \
	-o Optimizer.lr.decay_steps=150 -o Optimizer.lr.warmup_steps=2 -o Engine.eval_freq=3 -o Model.num_layers=4 \
	-o Model.hidden_dropout_prob=0.1 -o Model.attention_probs_dropout_prob=0.1 -o Optimizer.epsilon=1e-6 \
	-o Engine.max_steps=$STEPS -o Engine.save_load.save_steps=$STEPS -o Engine.save_load.save_epoch=0"

# "step loss" for the training and the evaluation lines
losses () {
	sed -n 's/.* - \(\[eval\] \)\{0,1\}global step \([0-9]*\), epoch.*loss: \([0-9.e+-]*\),.*/\1\2 \3/p' "$1" |
	sed 's/^\[eval\] /e/'
}

same_losses () { # log log [tolerance]
	losses "$1" >l1 && losses "$2" >l2 &&
	test_line_count = $((STEPS + STEPS / 3)) l1 && test_line_count = $((STEPS + STEPS / 3)) l2 &&
	paste l1 l2 | awk -v tol="${3:-1e-6}" '{ d = $2 - $4; if (d < 0) d = -d; r = d / $2;
		if ($1 != $3 || r > tol) { print "step " $1 ": " $2 " vs " $4 " (rel " r ")"; bad = 1 } }
		END { exit bad }'
}

test_expect_success 'set up: data and the single-process reference' '
	mkdir data &&
	gpt-preprocess -t bytes -o data/lic /usr/share/common-licenses/* &&
	gpt-train -c "$GPT_ROOT/configs/tiny_cpu_bytes.yaml" $args -o Engine.save_load.output_dir=single \
		>single.log 2>&1
'

layout () { # name nproc flags...
	name=$1 nproc=$2
	shift 2
	test_expect_success "$name on $nproc ranks equals one process" '
		gpt-launch --nproc-per-node '$nproc' --log-dir log-'$name' -- \
			gpt-train -c "$GPT_ROOT/configs/tiny_cpu_bytes.yaml" $args '"$*"' \
			-o Engine.save_load.output_dir=out-'$name' >'$name'.log 2>&1 &&
		same_losses single.log log-'$name'/workerlog.0 &&
		test-tool ckpt-diff single/step_0000000$STEPS out-'$name'/step_0000000$STEPS >diff &&
		sort -k2 -g diff | tail -1 &&
		awk "{ exit !(\$2 <= 5e-6) }" diff
	'
}

layout mp2 2 --tensor_parallel_degree 2
layout mp4 4 --tensor_parallel_degree 4
layout pp2 2 --pipeline_parallel_degree 2
layout pp4 4 --pipeline_parallel_degree 4
layout pp2-fthenb 2 --pipeline_parallel_degree 2 -o Distributed.pipeline_schedule=FThenB
layout pp2-virtual2 2 --pipeline_parallel_degree 2 -o Distributed.virtual_pp_degree=2
layout mp2-pp2 4 --tensor_parallel_degree 2 --pipeline_parallel_degree 2
layout mp2-pp2-recompute 4 --tensor_parallel_degree 2 --pipeline_parallel_degree 2 -o Model.use_recompute=True
layout dp2-mp2-pp2 8 --tensor_parallel_degree 2 --pipeline_parallel_degree 2 -o Distributed.dp_degree=2
layout mp2-pp2-sharding2-stage1 8 --tensor_parallel_degree 2 --pipeline_parallel_degree 2 \
	--sharding_parallel_degree 2 --sharding stage1
layout mp2-pp2-sharding2-stage3 8 --tensor_parallel_degree 2 --pipeline_parallel_degree 2 \
	--sharding_parallel_degree 2 --sharding stage3
layout dp2-mp2-sharding2-stage2-offload 8 --tensor_parallel_degree 2 --sharding_parallel_degree 2 \
	-o Distributed.sharding.sharding_stage=2 -o Distributed.sharding.sharding_offload=True \
	-o Distributed.dp_degree=2
layout pp2-virtual2-sharding2-stage2 4 --pipeline_parallel_degree 2 -o Distributed.virtual_pp_degree=2 \
	--sharding_parallel_degree 2 --sharding stage2
layout mp2-sequence-parallel 2 --tensor_parallel_degree 2 -o Model.sequence_parallel=True
layout mp4-sequence-parallel 4 --tensor_parallel_degree 4 -o Model.sequence_parallel=True
layout mp2-pp2-sequence-parallel-recompute 4 --tensor_parallel_degree 2 --pipeline_parallel_degree 2 \
	-o Model.sequence_parallel=True -o Model.use_recompute=True
layout mp2-sharding2-stage3-sequence-parallel 4 --tensor_parallel_degree 2 -o Model.sequence_parallel=True \
	--sharding_parallel_degree 2 --sharding stage3
# the classifier in blocks of 24 of the 64 token rows (the last one short)
layout mp2-classifier-blocks 2 --tensor_parallel_degree 2 -o Model.classifier_rows=24
layout mp2-sequence-parallel-classifier-blocks 2 --tensor_parallel_degree 2 -o Model.sequence_parallel=True \
	-o Model.classifier_rows=24
layout pp2-virtual2-sharding2-stage2-classifier-blocks 4 --pipeline_parallel_degree 2 \
	-o Distributed.virtual_pp_degree=2 --sharding_parallel_degree 2 --sharding stage2 -o Model.classifier_rows=24
layout pp2-uneven-1-3 2 --pipeline_parallel_degree 2 -o "Distributed.pp_layers=[1,3]"
# stages 1 and 2 recompute nothing (Model.no_recompute_layers)
layout pp4-core-attn-recompute-but-1-2 4 --pipeline_parallel_degree 4 -o Model.use_recompute=True \
	-o Model.recompute_granularity=core_attn -o "Model.no_recompute_layers=[1,2]" 

# 16-bit storage rounds partial sums where one process rounds the whole:
# the losses agree to 16-bit precision
test_expect_success 'bf16 and fp16 (loss scaling, sequence parallel) under mp2 x pp2 follow one process' '
	for t in bfloat16 float16; do
		gpt-train -c "$GPT_ROOT/configs/tiny_cpu_bytes.yaml" $args -o Engine.mix_precision.enable=True \
			-o Engine.mix_precision.dtype=$t -o Engine.save_load.output_dir=one-$t >single-$t.log 2>&1 &&
		gpt-launch --nproc-per-node 4 --log-dir log-$t -- \
			gpt-train -c "$GPT_ROOT/configs/tiny_cpu_bytes.yaml" $args -o Engine.mix_precision.enable=True \
			-o Engine.mix_precision.dtype=$t --tensor_parallel_degree 2 --pipeline_parallel_degree 2 \
			-o Model.sequence_parallel=True -o Engine.save_load.output_dir=four-$t >$t.log 2>&1 &&
		same_losses single-$t.log log-$t/workerlog.0 1e-3 || return 1
	done
'

test_expect_success 'the loss is printed by every stage, as the last stage computed it' '
	losses log-pp4/workerlog.0 >first &&
	losses log-pp4/workerlog.3 >last &&
	test_cmp first last
'

test_expect_success 'dp2 x pp2 with logging_freq 3: each line the mean loss of its steps, as one process' '
	gpt-launch --nproc-per-node 4 --log-dir log-lf3 -- \
		gpt-train -c "$GPT_ROOT/configs/tiny_cpu_bytes.yaml" $args --pipeline_parallel_degree 2 \
		-o Distributed.dp_degree=2 -o Engine.logging_freq=3 -o Engine.save_load.output_dir=out-lf3 >lf3.log 2>&1 &&
	losses single.log | grep -v "^e" | awk "{ s += \$2 } NR % 3 == 0 { printf \"%d %.9f\\n\", \$1, s / 3; s = 0 }" >want &&
	for r in 0 3; do
		losses log-lf3/workerlog.$r | grep -v "^e" >got &&
		cat want got &&
		paste want got | awk "{ d = (\$2 - \$4) / \$2; if (d < 0) d = -d; if (\$1 != \$3 || d > 1e-6) bad = 1 }
			END { exit bad || NR != 2 }" || return 1
	done
'

# --dry-run's figure for each pipeline stage against what the rank of that
# stage allocated (its "memory:" line), within 10%
test_expect_success '--dry-run accounts for tp and for each stage of a pipeline (within 10%)' '
	for v in 1F1B FThenB sp; do
		case $v in
		sp) extra="-o Model.sequence_parallel=True" ;;
		*) extra="-o Distributed.pipeline_schedule=$v" ;;
		esac &&
		gpt-train -c "$GPT_ROOT/configs/tiny_cpu_bytes.yaml" $args --world-size 4 \
			--tensor_parallel_degree 2 --pipeline_parallel_degree 2 $extra --dry-run >plan-$v &&
		gpt-launch --nproc-per-node 4 --log-dir log-mem-$v -- \
			gpt-train -c "$GPT_ROOT/configs/tiny_cpu_bytes.yaml" $args \
			--tensor_parallel_degree 2 --pipeline_parallel_degree 2 $extra \
			-o Engine.max_steps=1 -o Engine.save_load.save_steps=0 >mem.log 2>&1 &&
		for st in 0 1; do
			rank=$((st * 2)) &&
			planned=$(awk -v s=$st "/^per stage:/ { on = 1; next } on && \$1 == s { print \$7 }" plan-$v) &&
			used=$(sed -n "s/.*memory: .*total .* (\([0-9]*\) bytes)/\1/p" log-mem-$v/workerlog.$rank) &&
			echo "$v stage $st: planned $planned MiB, allocated $used bytes" &&
			awk -v p="$planned" -v u="$used" "BEGIN { u /= 1048576; d = (p - u) / u; if (d < 0) d = -d; exit !(d <= 0.10) }" || return 1
		done
	done
'

test_expect_success 'a layout the world size cannot hold is an error naming the numbers' '
	test_expect_code 64 gpt-train -c "$GPT_ROOT/configs/tiny_cpu_bytes.yaml" $args --world-size 4 \
		--tensor_parallel_degree 3 --dry-run >out 2>err &&
	test_grep "mp_degree" err &&
	test_expect_code 64 gpt-train -c "$GPT_ROOT/configs/tiny_cpu_bytes.yaml" $args --world-size 8 \
		--tensor_parallel_degree 8 --dry-run >out 2>err &&
	test_grep "divisor of Model.num_attention_heads 4" err &&
	test_expect_code 64 gpt-train -c "$GPT_ROOT/configs/tiny_cpu_bytes.yaml" $args --world-size 3 \
		--pipeline_parallel_degree 3 --dry-run >out 2>err &&
	test_grep "Model.num_layers: expected a multiple of pp_degree x virtual_pp_degree = 3 x 1 = 3, found 4; or split them unevenly with Distributed.pp_layers, e.g. \[2,1,1\]" err &&
	gpt-train -c "$GPT_ROOT/configs/tiny_cpu_bytes.yaml" $args --world-size 3 \
		--pipeline_parallel_degree 3 -o "Distributed.pp_layers=[2,1,1]" --dry-run >out &&
	test_expect_code 64 gpt-train -c "$GPT_ROOT/configs/tiny_cpu_bytes.yaml" $args --world-size 2 \
		--pipeline_parallel_degree 2 -o Distributed.virtual_pp_degree=2 \
		-o Global.global_batch_size=3 --dry-run >out 2>err &&
	test_grep "accumulate_steps" err &&
	test_expect_code 64 gpt-train -c "$GPT_ROOT/configs/tiny_cpu_bytes.yaml" $args --world-size 2 \
		--pipeline_parallel_degree 2 -o Distributed.virtual_pp_degree=17 -o Model.num_layers=34 \
		--dry-run >out 2>err &&
	test_grep "Distributed.virtual_pp_degree: expected an integer in \[1, 16\], found .17." err
'

test_expect_success 'sequence parallelism whose token rows do not split over tp is refused before training' '
	for b in 3 6; do
		test_expect_code 64 gpt-train -c "$GPT_ROOT/configs/tiny_cpu_bytes.yaml" $args --world-size 4 \
			--tensor_parallel_degree 4 -o Model.sequence_parallel=True -o Global.micro_batch_size=$b \
			-o Global.global_batch_size=$b --dry-run >out 2>err || return 1
		test_grep "Model.sequence_parallel: expected the $b x 64 tokens of a micro-batch .* to split into Distributed.mp_degree 4 equal parts" err || return 1
	done &&
	gpt-train -c "$GPT_ROOT/configs/tiny_cpu_bytes.yaml" $args --world-size 4 --tensor_parallel_degree 4 \
		-o Model.sequence_parallel=True -o Global.micro_batch_size=2 --dry-run >out
'

test_done
