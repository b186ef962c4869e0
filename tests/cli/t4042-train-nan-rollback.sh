#!/bin/sh
# Engine.nan_policy: a loss or gradient that is not finite (made with
# Engine.fault_inject.nan_steps) stops the run (stop), skips the update
# (skip), or rolls back (rollback): the weights and optimizer state of the
# last checkpoint come back and training goes on after the offending batch,
# passing over the batches since the checkpoint. That leaves the model
# exactly where skipping the updates of those steps would, which is what the
# tests compare against. A rollback limit, no checkpoint yet, bf16, and the
# decision on every rank of dp and sharding runs (the NaN made on one rank).
. "$(dirname "$0")/test-lib.sh"

ARGS='-o Data.Train.dataset.input_dir=data/lic -o Data.Train.dataset.split=15,2,0
	-o Global.micro_batch_size=1 -o Engine.eval_freq=0 -o Engine.test_iters=0
	-o Optimizer.lr.decay_steps=100 -o Engine.max_steps=10 -o Engine.save_load.save_steps=4'

train () {
	gpt-train -c "$GPT_ROOT/configs/tiny_cpu_bytes.yaml" $ARGS "$@"
}

launch () { # nproc logdir flags...
	n=$1 d=$2
	shift 2
	gpt-launch --nproc-per-node $n --log-dir $d -- \
		gpt-train -c "$GPT_ROOT/configs/tiny_cpu_bytes.yaml" $ARGS "$@"
}

losses () {
	sed -n "s/.* - global step \([0-9]*\), epoch.*loss: \([0-9.e+-]*\),.*/\1 \2/p" "$1"
}

# same_after LOG1 LOG2 STEP: identical losses after STEP
same_after () {
	losses "$1" | awk -v s="$3" "\$1 > s" >a &&
	losses "$2" | awk -v s="$3" "\$1 > s" >b &&
	test_line_count -gt 0 a &&
	test_cmp a b
}

same_weights () { # dir1 dir2 tolerance
	test-tool ckpt-diff "$1" "$2" >diff &&
	cat diff &&
	awk -v t="$3" "{ exit !(\$2 <= t) }" diff
}

json_int () { # file key
	sed -n "s/.*\"$2\": *\([0-9]*\).*/\1/p" "$1"
}

test_expect_success 'set up: data, and the reference that skips the updates of steps 5 to 7' '
	mkdir data &&
	gpt-preprocess -t bytes -o data/lic /usr/share/common-licenses/* &&
	train -o Engine.nan_policy=skip -o Engine.fault_inject.nan_steps=5,6,7 \
		-o Engine.save_load.output_dir=skip >skip.log 2>&1 &&
	grep "skipped the update (Engine.nan_policy: skip)" skip.log >s &&
	test_line_count = 3 s
'

test_expect_success 'stop (the default): exit 65 before the update, naming the last good checkpoint' '
	test_expect_code 65 train -o Engine.fault_inject.nan_steps=7 \
		-o Engine.save_load.output_dir=stop >stop.log 2>&1 &&
	test_grep "global step 7: the loss or the gradients are not finite \(loss nan\); stopping before the update; the last good checkpoint is stop/step_00000004" stop.log &&
	test "$(cat stop/latest)" = step_00000004
'

test_expect_success 'rollback: back to step 4, on after the offending batch of step 7' '
	train -o Engine.nan_policy=rollback -o Engine.fault_inject.nan_steps=7 \
		-o Engine.save_load.output_dir=rb >rb.log 2>&1 &&
	test_grep "\[ WARNING\] - global step 7: the loss or the gradients are not finite \(loss nan\); rolling back to the last checkpoint in rb \(rollback 1 of at most 3, Engine.nan_policy: rollback\)" rb.log &&
	test_grep "rolled back to the weights and optimizer state of global step 4; training goes on at global step 8 with the next batch, passing over the batches of global steps 5 to 7 \(consumed samples 56\)" rb.log &&
	test_grep "global step 10, epoch" rb.log &&
	same_after skip.log rb.log 7 &&
	same_weights skip/step_00000010 rb/step_00000010 0
'

test_expect_success 'the checkpoint after a rollback: step and consumed samples go on, updates are counted' '
	st=rb/step_00000010/state.json &&
	test "$(json_int $st step)" = 10 &&
	test "$(json_int $st consumed_samples)" = 80 &&
	test "$(json_int $st optimizer_steps)" = 7
'

test_expect_success 'a run rolled back and resumed continues bit for bit' '
	train -o Engine.nan_policy=rollback -o Engine.fault_inject.nan_steps=7 -o Engine.max_steps=8 \
		-o Engine.save_load.output_dir=rbr >rbr1.log 2>&1 &&
	train -o Engine.nan_policy=rollback -o Engine.save_load.output_dir=rbr >rbr2.log 2>&1 &&
	test_grep "resumed from rbr/step_00000008 at global step 8" rbr2.log &&
	same_after rb.log rbr2.log 8 &&
	same_weights rb/step_00000010 rbr/step_00000010 0
'

test_expect_success 'rollbacks are limited by Engine.nan_max_rollbacks' '
	test_expect_code 65 train -o Engine.nan_policy=rollback -o Engine.fault_inject.nan_steps=5,6,7,8 \
		-o Engine.save_load.output_dir=lim >lim.log 2>&1 &&
	grep "rolling back to the last checkpoint" lim.log >r &&
	test_line_count = 3 r &&
	test_grep "global step 8: the loss or the gradients are not finite \(loss nan\) after 3 rollbacks, the most Engine.nan_max_rollbacks allows; stopped before the update; the last good checkpoint is in lim" lim.log &&
	test_expect_code 65 train -o Engine.nan_policy=rollback -o Engine.nan_max_rollbacks=0 \
		-o Engine.fault_inject.nan_steps=5 -o Engine.save_load.output_dir=lim0 >lim0.log 2>&1 &&
	test_grep "after 0 rollbacks" lim0.log
'

test_expect_success 'no checkpoint yet: a clear error and a stop' '
	test_expect_code 65 train -o Engine.nan_policy=rollback -o Engine.fault_inject.nan_steps=3 \
		-o Engine.save_load.output_dir=none >none.log 2>&1 &&
	test_grep "global step 3: the loss or the gradients are not finite \(loss nan\) and Engine.nan_policy rollback has no checkpoint to go back to \(none holds none yet\); stopped before the update" none.log &&
	test ! -e none/latest
'

test_expect_success 'bf16: the NaN is caught before the update; rollback equals skipping' '
	BF="-o Engine.mix_precision.enable=True -o Engine.mix_precision.dtype=bfloat16" &&
	train $BF -o Engine.nan_policy=skip -o Engine.fault_inject.nan_steps=5,6,7 \
		-o Engine.save_load.output_dir=bskip >bskip.log 2>&1 &&
	train $BF -o Engine.nan_policy=rollback -o Engine.fault_inject.nan_steps=7 \
		-o Engine.save_load.output_dir=brb >brb.log 2>&1 &&
	test_grep "global step 7: the loss or the gradients are not finite" brb.log &&
	same_after bskip.log brb.log 7 &&
	same_weights bskip/step_00000010 brb/step_00000010 0
'

# slowfsync.so: every fsync of a rank's part sleeps 0.3 s, so that the
# background save of step 4 is still being written when step 5 ends
build_slowfsync () {
	cat >slowfsync.c <<-'EOF'
	#define _GNU_SOURCE
	#include <dlfcn.h>
	#include <fnmatch.h>
	#include <stdio.h>
	#include <unistd.h>
	int fsync(int fd)
	{
		static int (*real)(int);
		char l[64], p[4096];
		if (!real)
			real = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
		snprintf(l, sizeof l, "/proc/self/fd/%d", fd);
		ssize_t n = readlink(l, p, sizeof p - 1);
		p[n > 0 ? n : 0] = 0;
		if (fnmatch("*/.step_*.tmp/rank-*", p, 0) == 0)
			usleep(300000);
		return real(fd);
	}
	EOF
	cc -shared -fPIC -o slowfsync.so slowfsync.c -ldl
}

test_expect_success 'async_save: the save still in flight is published first; rollback and stop take it' '
	build_slowfsync &&
	(export LD_PRELOAD=$PWD/slowfsync.so && train -o Engine.nan_policy=rollback -o Engine.fault_inject.nan_steps=5 \
		-o Engine.save_load.async_save=True -o Engine.save_load.output_dir=arb) >arb.log 2>&1 &&
	test_grep "rolled back to the weights and optimizer state of global step 4; training goes on at global step 6" arb.log &&
	train -o Engine.nan_policy=rollback -o Engine.fault_inject.nan_steps=5 \
		-o Engine.save_load.output_dir=brb5 >brb5.log 2>&1 &&
	same_after brb5.log arb.log 5 &&
	same_weights brb5/step_00000010 arb/step_00000010 0 &&
	(export LD_PRELOAD=$PWD/slowfsync.so &&
	 test_expect_code 65 train -o Engine.fault_inject.nan_steps=5 \
		-o Engine.save_load.async_save=True -o Engine.save_load.output_dir=ast) >ast.log 2>&1 &&
	test_grep "global step 5: the loss or the gradients are not finite \(loss nan\); stopping before the update; the last good checkpoint is ast/step_00000004" ast.log &&
	test "$(cat ast/latest)" = step_00000004 &&
	test -f ast/step_00000004/index.json
'

layout () { # name nproc flags...
	name=$1 nproc=$2
	shift 2
	test_expect_success "$name: a NaN on rank 1 only rolls every rank back alike" '
		launch '$nproc' wl-'$name' '"$*"' -o Engine.nan_policy=rollback \
			-o Engine.fault_inject.nan_steps=7 -o Engine.fault_inject.nan_rank=1 \
			-o Engine.save_load.output_dir=out-'$name' >'$name'.log 2>&1 &&
		for r in $(seq 0 $(('$nproc' - 1))); do
			test_grep "rolled back to the weights and optimizer state of global step 4; training goes on at global step 8" wl-'$name'/workerlog.$r || exit 1
		done &&
		losses wl-'$name'/workerlog.0 | awk "\$1 > 7" >a &&
		losses rb.log | awk "\$1 > 7" >b &&
		paste a b | awk "{ d = \$2 - \$4; if (d < 0) d = -d; if (\$1 != \$3 || d / \$4 > 1e-5) bad = 1 } END { exit bad }" &&
		same_weights rb/step_00000010 out-'$name'/step_00000010 1e-5
	'
}

layout dp2 2
layout sharding2-stage2 2 --sharding_parallel_degree 2 --sharding stage2
layout sharding2-stage3 2 --sharding_parallel_degree 2 --sharding stage3

test_done
