#!/bin/sh
# Preemption through gpt-launch, the impatient case: a first SIGTERM makes
# the trainers finish the step and save; a second one, sent as soon as they
# start saving, kills them at once. Whenever the kill lands, the checkpoints
# written before stay byte for byte as they were, `latest` names a complete
# one and the run resumes from it.
. "$(dirname "$0")/test-lib.sh"

# One line: it goes into sh -c scripts.
train_args="-c $GPT_ROOT/configs/tiny_cpu_bytes.yaml"
for o in Data.Train.dataset.input_dir=data/lic Data.Train.dataset.split=15,2,0 \
	Global.micro_batch_size=1 Engine.eval_freq=0 Engine.test_iters=0 \
	Engine.save_load.save_steps=10 Engine.save_load.save_epoch=0 \
	Engine.max_steps=100000 Optimizer.lr.decay_steps=100000; do
	train_args="$train_args -o $o"
done

# sums DIR: the xxh3 of every file of a checkpoint directory
sums () {
	for f in "$1"/*; do
		echo "$(basename "$f") $(test-tool xxh3 "$f")"
	done
}

test_expect_success 'set up' '
	mkdir data &&
	gpt-preprocess -t bytes -o data/lic /usr/share/common-licenses/*
'

# twice N: a run under gpt-launch in out.N, a second SIGTERM as soon as the
# first has made rank 0 start saving
twice () {
	{ gpt-launch --nproc-per-node 2 --log-dir log.$1 -- gpt-train $train_args \
		-o Engine.save_load.output_dir=out.$1 >launch.out.$1 2>launch.err.$1 & } &&
	pid=$! &&
	{ test_wait_line log.$1/workerlog.0 "\[checkpoint\] global step 20," || { kill -9 $pid; false; }; } &&
	sums out.$1/step_00000020 >before.$1 &&
	kill -TERM $pid &&
	{ test_wait_line log.$1/workerlog.0 "stop requested" || { kill -9 $pid; false; }; } &&
	{ kill -TERM $pid 2>/dev/null || true; } &&
	start=$(date +%s) &&
	code=0 && wait $pid || code=$? &&
	echo "exit $code after $(($(date +%s) - start)) s" &&
	cat launch.err.$1 &&
	{ test "$code" = 0 || test "$code" = 143; } &&
	# at once: not after a collective's 300 s timeout; 15 s leaves room
	# for a loaded machine (2 s failed once beside t3030)
	test $(($(date +%s) - start)) -le 15 &&
	# 143 is also gpt-launch itself ended by the second signal after every
	# worker had saved and exited 0
	if test "$code" = 143; then
		test_grep "^gpt-launch: error: received SIGTERM; forwarded it to the 2 running workers$|gpt-launch: received SIGTERM; forwarded it to the 2 running workers; every worker exited 0$" launch.err.$1
	fi &&
	sums out.$1/step_00000020 >after.$1 &&
	test_cmp before.$1 after.$1 &&
	gpt-ckpt-merge --verify "out.$1/$(cat out.$1/latest)" &&
	for d in out.$1/step_*; do
		gpt-ckpt-merge --verify "$d" >/dev/null || return 1
	done
}

test_expect_success 'a second SIGTERM during the save: earlier checkpoints untouched, latest complete' '
	twice 1 && twice 2 && twice 3
'

test_expect_success 'and the run resumes from latest' '
	step=$(sed -n "s/^step_0*//p" out.1/latest) &&
	gpt-launch --nproc-per-node 2 --log-dir resume -- gpt-train $train_args \
		-o Engine.save_load.output_dir=out.1 -o Engine.max_steps=$((step + 3)) >/dev/null 2>&1 &&
	test_grep "resumed from out.1/step_0*$step at global step $step" resume/workerlog.0 &&
	test "$(cat out.1/latest)" = "step_$(printf %08d $((step + 3)))"
'

test_done
