#!/bin/sh
# Loss spikes (Engine.skip_spikes): a step whose loss or gradient norm lies
# more than a threshold of standard deviations above the window of recent
# updated steps has its update skipped, is logged with the value, its
# z-score and the threshold, and stays out of the window. Spikes are made
# with Engine.fault_inject.spike_steps (the loss and gradients of a step
# multiplied by spike_factor). Every rank decides alike; after a resume the
# window starts empty.
. "$(dirname "$0")/test-lib.sh"

train () {
	gpt-train -c "$GPT_ROOT/configs/tiny_cpu_bytes.yaml" \
		-o Data.Train.dataset.input_dir=data/lic -o Data.Train.dataset.split=15,2,0 \
		-o Global.micro_batch_size=1 -o Engine.eval_freq=0 -o Engine.test_iters=0 \
		-o Optimizer.lr.decay_steps=100 -o Engine.max_steps=14 \
		-o Engine.save_load.save_steps=14 -o Engine.fault_inject.spike_factor=3 "$@"
}

spikes () {
	train -o Engine.skip_spikes.enable=True -o Engine.skip_spikes.window=5 \
		-o Engine.skip_spikes.warmup=0 "$@"
}

losses () {
	sed -n "s/.* - global step \([0-9]*\), epoch.*loss: \([0-9.e+-]*\),.*/\1 \2/p" "$1"
}

same_weights () { # dir1 dir2 tolerance
	test-tool ckpt-diff "$1" "$2" >diff &&
	cat diff &&
	awk -v t="$3" "{ exit !(\$2 <= t) }" diff
}

test_expect_success 'set up' '
	mkdir data &&
	gpt-preprocess -t bytes -o data/lic /usr/share/common-licenses/*
'

test_expect_success 'a spike is skipped and logged with its value, z-score and threshold' '
	spikes -o Engine.fault_inject.spike_steps=9 -o Engine.save_load.output_dir=one >one.log 2>&1 &&
	test_grep "\[ WARNING\] - \[spike\] global step 9, loss: [0-9.]+, z-score: [0-9.]+ \(threshold 6\), grad_norm: [0-9.e+-]+, z-score: [0-9.]+ \(threshold 6\): skipped the update; the step stays out of the window of 5" one.log &&
	grep "\[spike\]" one.log >lines &&
	test_line_count = 1 lines &&
	z=$(sed -n "s/.*global step 9, loss: [0-9.]*, z-score: \([0-9.]*\) .*/\1/p" one.log) &&
	awk -v z="$z" "BEGIN { exit !(z > 6) }"
'

test_expect_success 'the skipped spike leaves the weights as a skipped update does' '
	train -o Engine.nan_policy=skip -o Engine.fault_inject.nan_steps=9 \
		-o Engine.save_load.output_dir=nan >nan.log 2>&1 &&
	losses one.log | awk "\$1 >= 10" >a && losses nan.log | awk "\$1 >= 10" >b &&
	test_line_count = 5 a &&
	test_cmp a b &&
	same_weights one/step_00000014 nan/step_00000014 0
'

test_expect_success 'a spike stays out of the window: the next spike is caught too' '
	spikes -o Engine.fault_inject.spike_steps=9,10 -o Engine.save_load.output_dir=two >two.log 2>&1 &&
	test_grep "\[spike\] global step 9," two.log &&
	test_grep "\[spike\] global step 10," two.log
'

test_expect_success 'no check while the window is not full, before warmup, or with the thresholds out of reach' '
	spikes -o Engine.fault_inject.spike_steps=5 -o Engine.save_load.output_dir=early >early.log 2>&1 &&
	! grep "\[spike\]" early.log &&
	spikes -o Engine.fault_inject.spike_steps=9 -o Engine.skip_spikes.warmup=9 \
		-o Engine.save_load.output_dir=warm >warm.log 2>&1 &&
	! grep "\[spike\]" warm.log &&
	spikes -o Engine.fault_inject.spike_steps=9 -o Engine.skip_spikes.loss_zscore=0 \
		-o Engine.skip_spikes.grad_norm_zscore=1000 -o Engine.save_load.output_dir=far >far.log 2>&1 &&
	! grep "\[spike\]" far.log &&
	train -o Engine.fault_inject.spike_steps=9 -o Engine.save_load.output_dir=off >off.log 2>&1 &&
	! grep "\[spike\]" off.log &&
	test-tool ckpt-diff off/step_00000014 one/step_00000014 >diff &&
	awk "{ exit !(\$2 > 1e-4) }" diff
'

test_expect_success 'the grad norm alone can flag a spike' '
	spikes -o Engine.fault_inject.spike_steps=9 -o Engine.skip_spikes.loss_zscore=0 \
		-o Engine.save_load.output_dir=gn >gn.log 2>&1 &&
	test_grep "\[spike\] global step 9, .*grad_norm: [0-9.e+-]+, z-score: [0-9.]+ \(threshold 6\)" gn.log
'

test_expect_success 'enabled with both thresholds 0 is a usage error' '
	test_expect_code 64 spikes -o Engine.skip_spikes.loss_zscore=0 \
		-o Engine.skip_spikes.grad_norm_zscore=0 >zero.log 2>&1 &&
	test_grep "^gpt-train: error: -o Engine.skip_spikes.enable=True: Engine.skip_spikes.enable: True with loss_zscore and grad_norm_zscore both 0" zero.log
'

test_expect_success 'two ranks decide alike and train as one process does' '
	gpt-launch --nproc-per-node 2 --log-dir wl -- gpt-train -c "$GPT_ROOT/configs/tiny_cpu_bytes.yaml" \
		-o Data.Train.dataset.input_dir=data/lic -o Data.Train.dataset.split=15,2,0 \
		-o Global.micro_batch_size=1 -o Engine.eval_freq=0 -o Engine.test_iters=0 \
		-o Optimizer.lr.decay_steps=100 -o Engine.max_steps=14 \
		-o Engine.save_load.save_steps=14 -o Engine.fault_inject.spike_factor=3 \
		-o Engine.skip_spikes.enable=True -o Engine.skip_spikes.window=5 \
		-o Engine.skip_spikes.warmup=0 -o Engine.fault_inject.spike_steps=9 \
		-o Engine.save_load.output_dir=dp >dp.log 2>&1 &&
	sed -n "s/.*\(\[spike\].*\)/\1/p" wl/workerlog.0 >s0 &&
	sed -n "s/.*\(\[spike\].*\)/\1/p" wl/workerlog.1 >s1 &&
	test_line_count = 1 s0 &&
	test_cmp s0 s1 &&
	test_grep "global step 9," s0 &&
	same_weights one/step_00000014 dp/step_00000014 1e-5
'

test_expect_success 'after a resume the window starts empty: a spike is caught only once it is full again' '
	spikes -o Engine.max_steps=8 -o Engine.save_load.output_dir=res >res1.log 2>&1 &&
	spikes -o Engine.fault_inject.spike_steps=9,15 -o Engine.max_steps=16 -o Engine.save_load.save_steps=16 \
		-o Engine.save_load.output_dir=res >res2.log 2>&1 &&
	test_grep "resumed from res/step_00000008 at global step 8" res2.log &&
	! grep "\[spike\] global step 9," res2.log &&
	test_grep "\[spike\] global step 15," res2.log
'

test_done
