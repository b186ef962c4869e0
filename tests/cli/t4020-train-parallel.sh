#!/bin/sh
# Data parallel and ZeRO sharding (stages 1, 2 and 3) on CPU ranks started by
# gpt-launch: with dropout on, every layout gives the single-process losses
# (relative 1e-5) and final weights (absolute 2e-6; AdamW's epsilon at 1e-6,
# where 1e-8 turns sign flips of gradients near 0 into whole learning-rate
# steps: 2.2e-6 of rounding, 2.2e-7 at 1e-6); resuming is bit for bit;
# a worker killed mid-run is restarted from the last checkpoint; ranks with
# different settings, or a second run into a busy output_dir, stop at once.
. "$(dirname "$0")/test-lib.sh"

STEPS=10
train () {
	gpt-train -c "$GPT_ROOT/configs/tiny_cpu_bytes.yaml" \
		-o Data.Train.dataset.input_dir=data/lic -o Data.Eval.dataset.input_dir=data/lic \
		-o Data.Train.dataset.split=15,2,0 -o Data.Eval.dataset.split=15,2,0 \
		-o Global.micro_batch_size=1 -o Engine.eval_iters=1 -o Optimizer.lr.max_lr=2e-3 \
		-o Optimizer.lr.decay_steps=150 -o Optimizer.lr.warmup_steps=2 -o Engine.eval_freq=5 \
		-o Model.hidden_dropout_prob=0.1 -o Model.attention_probs_dropout_prob=0.1 -o Optimizer.epsilon=1e-6 "$@"
}

test_expect_success 'set up: data and the single-process reference' '
	mkdir data &&
	gpt-preprocess -t bytes -o data/lic /usr/share/common-licenses/* &&
	train -o Engine.max_steps=$STEPS -o Engine.save_load.save_steps=$STEPS \
		-o Engine.save_load.output_dir=single >single.log 2>&1 &&
	test -f single/step_00000010/index.json
'

layout () { # name nproc flags...
	name=$1 nproc=$2
	shift 2
	test_expect_success "$name on $nproc ranks equals one process" '
		gpt-launch --nproc-per-node '$nproc' --log-dir log-'$name' -- \
			gpt-train -c "$GPT_ROOT/configs/tiny_cpu_bytes.yaml" '"$*"' \
			-o Data.Train.dataset.input_dir=data/lic -o Data.Eval.dataset.input_dir=data/lic \
			-o Data.Train.dataset.split=15,2,0 -o Data.Eval.dataset.split=15,2,0 \
			-o Global.micro_batch_size=1 -o Engine.eval_iters=1 -o Optimizer.lr.max_lr=2e-3 \
			-o Optimizer.lr.decay_steps=150 -o Optimizer.lr.warmup_steps=2 -o Engine.eval_freq=5 \
			-o Model.hidden_dropout_prob=0.1 -o Model.attention_probs_dropout_prob=0.1 -o Optimizer.epsilon=1e-6 \
			-o Engine.max_steps=$STEPS -o Engine.save_load.save_steps=$STEPS \
			-o Engine.save_load.output_dir=out-'$name' >'$name'.log 2>&1 &&
		same_train_losses single.log log-'$name'/workerlog.0 &&
		test-tool ckpt-diff single/step_00000010 out-'$name'/step_00000010 >diff &&
		cat diff &&
		awk "{ exit !(\$2 <= 2e-6) }" diff
	'
}

layout dp2 2
layout dp4 4
layout sharding2-stage1 2 --sharding_parallel_degree 2 --sharding stage1
layout sharding2-stage2 2 --sharding_parallel_degree 2 --sharding stage2
layout sharding2-dp2-stage2 4 --sharding_parallel_degree 2 --sharding stage2 -o Distributed.dp_degree=2
layout sharding4-dp2-stage1 8 --sharding_parallel_degree 4 --sharding stage1 -o Distributed.dp_degree=2
layout sharding4-dp2-stage2 8 --sharding_parallel_degree 4 --sharding stage2 -o Distributed.dp_degree=2
layout sharding2-stage3 2 --sharding_parallel_degree 2 --sharding stage3
layout sharding4-stage3-offload 4 --sharding_parallel_degree 4 --sharding "stage3\ offload"
layout sharding2-dp2-stage3 4 --sharding_parallel_degree 2 --sharding stage3 -o Distributed.dp_degree=2
layout sharding2-stage3-recompute 2 --sharding_parallel_degree 2 --sharding stage3 -o Model.use_recompute=True

test_expect_success 'sharding cuts the optimizer state per rank' '
	one=$(sed -n "s/.*optimizer state \([0-9.]* MiB\),.*/\1/p" single.log) &&
	two=$(sed -n "s/.*optimizer state \([0-9.]* MiB\),.*/\1/p" log-sharding2-stage1/workerlog.0) &&
	echo "one process: $one, sharding 2: $two" &&
	test "$one" = "1.0 MiB" && test "$two" = "0.5 MiB"
'

test_expect_success 'per-rank memory falls stage by stage as --dry-run predicts (within 10%)' '
	prev=
	for st in 1 2 3; do
		gpt-launch --nproc-per-node 4 --log-dir mem$st -- \
			gpt-train -c "$GPT_ROOT/configs/tiny_cpu_bytes.yaml" -o Model.num_layers=8 \
			--sharding_parallel_degree 4 --sharding stage$st -o Data.Train.dataset.input_dir=data/lic \
			-o Data.Train.dataset.split=15,2,0 -o Global.micro_batch_size=1 -o Engine.eval_freq=0 \
			-o Engine.save_load.save_steps=0 -o Engine.max_steps=1 >/dev/null 2>&1 &&
		gpt-train -c "$GPT_ROOT/configs/tiny_cpu_bytes.yaml" -o Model.num_layers=8 \
			--sharding_parallel_degree 4 --sharding stage$st --world-size 4 --dry-run >plan$st &&
		used=$(sed -n "s/.*memory: .*(\([0-9]*\) bytes)$/\1/p" mem$st/workerlog.0) &&
		planned=$(sed -n "s/^  total: *\([0-9.]*\) MiB.*/\1/p" plan$st) &&
		echo "stage $st: allocated $used bytes, planned $planned MiB" &&
		test "$(echo "r = $planned * 1048576 / $used; r > 0.9 && r < 1.1" | bc -l)" = 1 &&
		if [ -n "$prev" ]; then test "$used" -lt "$prev"; fi &&
		prev=$used || exit 1
	done
'

# Each rank's "memory:" line against --dry-run's figure for its pipeline stage
# (the per-stage table with pp > 1, else the busiest rank's total), within 5%:
# both count the same buffers, the report rounds to 0.1 MiB.
test_expect_success '--dry-run gives each rank of a sharded layout what it allocates (within 5%)' '
	while IFS="|" read -r nproc lay; do
		rm -rf log-plan &&
		gpt-launch --nproc-per-node $nproc --log-dir log-plan -- \
			gpt-train -c "$GPT_ROOT/configs/tiny_cpu_bytes.yaml" $lay -o Model.hidden_size=128 \
			-o Data.Train.dataset.input_dir=data/lic -o Data.Train.dataset.split=15,2,0 \
			-o Engine.eval_freq=0 -o Engine.save_load.save_steps=0 -o Engine.max_steps=1 >plan.log 2>&1 &&
		gpt-train -c "$GPT_ROOT/configs/tiny_cpu_bytes.yaml" $lay -o Model.hidden_size=128 \
			--world-size $nproc --dry-run >plan &&
		r=0 && while [ $r -lt $nproc ]; do
			st=$(sed -n "s/.*pipeline stage \([0-9]*\) of [0-9]*)$/\1/p" log-plan/workerlog.$r) &&
			planned=$(awk -v s=$st "/^per stage:/ { on = 1; next } on && \$1 == s { print \$7 }
				/^  total: / { t = \$2 } END { if (!on) print t }" plan) &&
			used=$(sed -n "s/.*memory: .*total .* (\([0-9]*\) bytes)$/\1/p" log-plan/workerlog.$r) &&
			echo "$lay: rank $r (stage $st) planned $planned MiB, allocated $used bytes" &&
			awk -v p="$planned" -v u="$used" "BEGIN { u /= 1048576; d = (p - u) / u; if (d < 0) d = -d; exit !(d <= 0.05) }" &&
			r=$((r + 1)) || return 1
		done || return 1
	done <<-LAYOUTS
	4|--sharding_parallel_degree 4 --sharding stage3 -o Distributed.overlap_grad_reduce=True
	2|--sharding_parallel_degree 2 --sharding stage2 -o Distributed.sharding.sharding_offload=True
	4|--pipeline_parallel_degree 2 --sharding_parallel_degree 2 --sharding stage2 -o Distributed.overlap_grad_reduce=True -o Model.num_layers=4 -o Model.use_recompute=True -o Model.no_recompute_layers=[0]
	2|--pipeline_parallel_degree 2 -o Model.num_layers=4 -o Distributed.virtual_pp_degree=2 -o Engine.mix_precision.enable=True -o Engine.mix_precision.dtype=bfloat16
	1|--sharding stage3 -o Model.num_layers=8 -o Engine.mix_precision.enable=True -o Engine.mix_precision.dtype=float16
	2|--sharding_parallel_degree 2 --sharding stage3 -o Distributed.overlap_grad_reduce=True -o Engine.mix_precision.enable=True -o Engine.mix_precision.dtype=float16
	LAYOUTS
'

# Stop at 5 and resume to 10 in every layout: the same bytes as an unbroken run.
while IFS='|' read -r nproc lay; do
test_expect_success "stop and resume is bit for bit ($nproc ranks: $lay)" '
	run () {
		gpt-launch --nproc-per-node '"$nproc"' --log-dir "log-$1" -- \
			gpt-train -c "$GPT_ROOT/configs/tiny_cpu_bytes.yaml" '"$lay"' \
			-o Data.Train.dataset.input_dir=data/lic -o Data.Eval.dataset.input_dir=data/lic \
			-o Data.Train.dataset.split=15,2,0 -o Data.Eval.dataset.split=15,2,0 \
			-o Global.micro_batch_size=1 -o Engine.eval_freq=0 -o Optimizer.lr.max_lr=2e-3 \
			-o Optimizer.lr.decay_steps=150 -o Optimizer.lr.warmup_steps=2 -o Model.hidden_dropout_prob=0.1 \
			-o Model.attention_probs_dropout_prob=0.1 -o Engine.save_load.save_steps=5 \
			-o Engine.save_load.output_dir="$2" -o Engine.max_steps="$3"
	} &&
	rm -rf full part log-full log-part1 log-part2 &&
	run full full 10 >/dev/null 2>&1 &&
	run part1 part 5 >/dev/null 2>&1 &&
	run part2 part 10 >/dev/null 2>&1 &&
	test_grep "resumed from part/step_00000005 at global step 5" log-part2/workerlog.1 &&
	ls full/step_00000010 >files && ls part/step_00000010 >files2 && test_cmp files files2 &&
	for f in $(grep safetensors files); do
		cmp full/step_00000010/$f part/step_00000010/$f || exit 1
	done
'
done <<LAYOUTS
2|-o Distributed.dp_degree=2
4|-o Distributed.dp_degree=4
2|--sharding_parallel_degree 2 --sharding stage1
2|--sharding_parallel_degree 2 --sharding stage2
2|--sharding_parallel_degree 2 --sharding stage3
4|--sharding_parallel_degree 4 --sharding stage3\\ offload
8|--sharding_parallel_degree 4 --sharding stage2 -o Distributed.dp_degree=2
2|--sharding_parallel_degree 2 --sharding stage3 -o Engine.mix_precision.enable=True -o Engine.mix_precision.dtype=bfloat16
2|--sharding_parallel_degree 2 --sharding stage1 -o Distributed.sharding.sharding_offload=True -o Engine.mix_precision.enable=True -o Engine.mix_precision.dtype=bfloat16
LAYOUTS

test_expect_success 'ranks started with different settings stop at once, saying so' '
	code=0 &&
	gpt-launch --nproc-per-node 2 --log-dir log-diff -- sh -c "exec gpt-train \
		-c $GPT_ROOT/configs/tiny_cpu_bytes.yaml -o Data.Train.dataset.input_dir=data/lic \
		-o Data.Train.dataset.split=15,2,0 -o Engine.max_steps=2 -o Engine.save_load.output_dir=mixed \
		-o Model.hidden_size=\$((64 + 64 * GPT_RANK))" >diff.log 2>&1 || code=$? &&
	test "$code" = 64 &&
	test_grep "error: the ranks were started with different configurations" log-diff/workerlog.0
'

test_expect_success 'a second run into the same output_dir is refused while the first trains' '
	{ train -o Engine.max_steps=100000 -o Optimizer.lr.decay_steps=100000 -o Engine.eval_freq=0 \
		-o Engine.save_load.save_steps=0 -o Engine.save_load.output_dir=busy >busy1.log 2>&1 & } &&
	first=$! &&
	n=0 && while ! grep -q "global step 2," busy1.log && [ $n -lt 100 ]; do sleep 0.1; n=$((n + 1)); done &&
	code=0 &&
	gpt-launch --nproc-per-node 2 --log-dir log-busy -- gpt-train -c "$GPT_ROOT/configs/tiny_cpu_bytes.yaml" \
		-o Data.Train.dataset.input_dir=data/lic -o Data.Train.dataset.split=15,2,0 -o Engine.max_steps=2 \
		-o Engine.save_load.output_dir=busy >busy2.log 2>&1 || code=$? &&
	kill $first && { wait $first || :; } &&
	test "$code" = 64 &&
	test_grep "error: Engine.save_load.output_dir busy: another run is training into it" log-busy/workerlog.0 &&
	test_grep "error: rank 0 cannot use Engine.save_load.output_dir busy; its worker log says why" log-busy/workerlog.1
'

test_expect_success 'a world size that does not fit the degrees is an error naming the numbers' '
	test_expect_code 64 gpt-launch --nproc-per-node 3 --log-dir log-bad -- \
		gpt-train -c "$GPT_ROOT/configs/tiny_cpu_bytes.yaml" -o Distributed.dp_degree=2 \
		-o Data.Train.dataset.input_dir=data/lic -o Engine.max_steps=1 >bad.out 2>&1 &&
	test_grep "rank [0-9] .* exited with status 64 \(output in log-bad/workerlog.[0-2]\)" bad.out &&
	test_grep "^gpt-train: error: -o Distributed.dp_degree=2: Distributed.dp_degree: .*dp_degree 2\) to divide the world size 3 \(from GPT_WORLD_SIZE\)" bad.out &&
	cat log-bad/workerlog.* >bad.log &&
	test_grep "dp_degree 2\) to divide the world size 3 \(from GPT_WORLD_SIZE\)" bad.log
'

test_expect_success 'a checkpoint of one layout resumes in another (sharding 2 stage 3 -> dp 2, 2 -> 4 ranks)' '
	gpt-launch --nproc-per-node 2 --log-dir log-x1 -- \
		gpt-train -c "$GPT_ROOT/configs/tiny_cpu_bytes.yaml" --sharding_parallel_degree 2 --sharding stage3 \
		-o Data.Train.dataset.input_dir=data/lic -o Data.Train.dataset.split=15,2,0 \
		-o Global.micro_batch_size=1 -o Engine.eval_freq=0 -o Engine.save_load.save_steps=5 \
		-o Engine.save_load.output_dir=xl -o Engine.max_steps=5 >/dev/null 2>&1 &&
	gpt-launch --nproc-per-node 4 --log-dir log-x2 -- \
		gpt-train -c "$GPT_ROOT/configs/tiny_cpu_bytes.yaml" \
		-o Data.Train.dataset.input_dir=data/lic -o Data.Train.dataset.split=15,2,0 \
		-o Global.micro_batch_size=1 -o Engine.eval_freq=0 -o Engine.save_load.save_steps=5 \
		-o Engine.save_load.output_dir=xl -o Engine.max_steps=10 >/dev/null 2>&1 &&
	test_grep "resumed from xl/step_00000005 at global step 5" log-x2/workerlog.0 &&
	test_grep " - global step 10, epoch" log-x2/workerlog.0
'

test_expect_success 'a worker killed with SIGKILL mid-run: restarted from the last checkpoint, same end' '
	launch () {
		gpt-launch --nproc-per-node 2 --max-restarts "$1" --log-dir "$2" -- \
			gpt-train -c "$GPT_ROOT/configs/tiny_cpu_bytes.yaml" \
			-o Data.Train.dataset.input_dir=data/lic -o Data.Train.dataset.split=15,2,0 \
			-o Global.micro_batch_size=1 -o Engine.eval_freq=0 -o Optimizer.lr.max_lr=2e-3 \
			-o Optimizer.lr.decay_steps=400 -o Engine.save_load.save_steps=50 \
			-o Engine.save_load.output_dir="$3" -o Engine.max_steps=300
	} &&
	launch 0 log-ref ref >/dev/null 2>&1 &&
	{ (mkdir other && cd other && exec env GPT_RANK=1 python3 -c "import time; time.sleep(120)" \
		-o Engine.save_load.output_dir=killed) & } &&
	other=$! &&
	{ launch 1 log-kill killed >kill.out 2>&1 & } &&
	n=0 && while [ ! -e killed/latest ] && [ $n -lt 600 ]; do sleep 0.05; n=$((n + 1)); done &&
	test -e killed/latest &&
	victim=$(test_rank_pids "output_dir=killed" 1 | head -n 1) &&
	test -n "$victim" &&
	kill -9 "$victim" &&
	kill "$other" && # rank 1 of the same test run from another checkout: left alone
	wait &&
	test_grep "rank 1 .* killed by signal 9" kill.out &&
	test_grep "resumed from killed/step_" log-kill/workerlog.0 &&
	a=$(train_losses log-ref/workerlog.0 | tail -n 1) && b=$(train_losses log-kill/workerlog.0 | tail -n 1) &&
	echo "unbroken: $a; killed and restarted: $b" &&
	test "$a" = "$b" &&
	cmp ref/step_00000300/rank-00000.safetensors killed/step_00000300/rank-00000.safetensors
'

test_done
