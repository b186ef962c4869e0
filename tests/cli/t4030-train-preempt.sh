#!/bin/sh
# Preemption: SIGTERM or SIGUSR1 (as Slurm sends before a time limit) makes
# the trainers finish the step, save a checkpoint and exit 0; the run then
# resumes where it stopped. A second SIGTERM stops at once and never leaves a
# checkpoint that a resume would take half-written. A closed log pipe (the
# launcher gone) does not end the run.
. "$(dirname "$0")/test-lib.sh"

# "exec" so that a run started with "train ... &" is gpt-train itself and
# $! is its pid (a backgrounded shell function is a subshell otherwise)
train () {
	exec gpt-train -c "$GPT_ROOT/configs/tiny_cpu_bytes.yaml" \
		-o Data.Train.dataset.input_dir=data/lic -o Data.Train.dataset.split=15,2,0 \
		-o Global.micro_batch_size=1 -o Engine.eval_freq=0 -o Engine.test_iters=0 \
		-o Engine.save_load.save_steps=0 -o Engine.save_load.save_epoch=0 \
		-o Optimizer.lr.decay_steps=100000 -o Engine.max_steps=100000 "$@"
}

test_expect_success 'set up' '
	mkdir data &&
	gpt-preprocess -t bytes -o data/lic /usr/share/common-licenses/*
'

test_expect_success 'SIGTERM: the step is finished, saved, exit 0; the run resumes from it' '
	{ (train -o Engine.save_load.output_dir=out >log 2>&1) & } &&
	pid=$! &&
	{ test_wait_line log " - global step 5, epoch" || { kill -9 $pid; false; }; } &&
	kill -TERM $pid &&
	code=0 && wait $pid || code=$? &&
	test "$code" = 0 &&
	test_grep "stop requested \(SIGTERM or SIGUSR1\): saving global step [0-9]+ and stopping" log &&
	step=$(sed -n "s/.*saving global step \([0-9]*\) and stopping/\1/p" log) &&
	test "$(cat out/latest)" = "step_$(printf %08d $step)" &&
	(train -o Engine.save_load.output_dir=out -o Engine.max_steps=$((step + 2)) >log2 2>&1) &&
	test_grep "resumed from out/step_$(printf %08d $step) at global step $step" log2
'

test_expect_success 'SIGUSR1 to gpt-launch: both workers save and stop together, gpt-launch exits 0' '
	{ gpt-launch --nproc-per-node 2 --log-dir wl -- \
		gpt-train -c "$GPT_ROOT/configs/tiny_cpu_bytes.yaml" \
		-o Data.Train.dataset.input_dir=data/lic -o Data.Train.dataset.split=15,2,0 \
		-o Global.micro_batch_size=1 -o Engine.eval_freq=0 -o Engine.test_iters=0 \
		-o Engine.save_load.save_steps=0 -o Engine.save_load.save_epoch=0 \
		-o Optimizer.lr.decay_steps=100000 -o Engine.max_steps=100000 \
		-o Engine.save_load.output_dir=dout >launch.log 2>&1 & } &&
	pid=$! &&
	{ test_wait_line wl/workerlog.1 " - global step 5, epoch" || { kill -9 $pid; false; }; } &&
	kill -USR1 $pid &&
	code=0 && wait $pid || code=$? &&
	cat launch.log &&
	test "$code" = 0 &&
	test_grep "every worker exited 0" launch.log &&
	s0=$(sed -n "s/.*saving global step \([0-9]*\) and stopping/\1/p" wl/workerlog.0) &&
	s1=$(sed -n "s/.*saving global step \([0-9]*\) and stopping/\1/p" wl/workerlog.1) &&
	test -n "$s0" && test "$s0" = "$s1" &&
	test -f dout/step_$(printf %08d $s0)/index.json
'

test_expect_success 'a second SIGTERM stops at once; latest never names a partial checkpoint' '
	{ (train -o Engine.save_load.output_dir=twice -o Engine.save_load.save_steps=3 >tlog 2>&1) & } &&
	pid=$! &&
	{ test_wait_line tlog "\[checkpoint\] global step 6," || { kill -9 $pid; false; }; } &&
	kill -TERM $pid && kill -TERM $pid &&
	code=0 && wait $pid || code=$? &&
	echo "exit $code" &&
	{ test "$code" = 0 || test "$code" = 143; } &&
	test -f "twice/$(cat twice/latest)/index.json" &&
	(train -o Engine.save_load.output_dir=twice -o Engine.max_steps=100 >tlog2 2>&1) &&
	test_grep "resumed from twice/step_" tlog2
'

test_expect_success 'a log pipe whose reader is gone costs log lines, not the run' '
	{ ( (train -o Engine.max_steps=20 -o Engine.save_load.save_steps=20 -o Engine.save_load.output_dir=pipe \
		2>pipe.err); echo $? >pipe.rc) | (exec true); } &&
	test "$(cat pipe.rc)" = 0 &&
	test "$(cat pipe/latest)" = step_00000020 &&
	grep "standard output" pipe.err >said &&
	test_line_count = 1 said &&
	test_grep "\[ WARNING\] - standard output: Broken pipe: the log lines it cannot take are lost; the run goes on$" said
'

test_expect_success 'with save_on_signal False a SIGTERM stops at once' '
	{ (train -o Engine.save_load.output_dir=nosig -o Engine.save_load.save_on_signal=False >nlog 2>&1) & } &&
	pid=$! &&
	{ test_wait_line nlog " - global step 5, epoch" || { kill -9 $pid; false; }; } &&
	kill -TERM $pid &&
	code=0 && wait $pid || code=$? &&
	test "$code" = 143 &&
	test ! -e nosig/latest
'

test_expect_success 'SIGINT (Ctrl-C) ends the run at once: no save; latest names the last periodic checkpoint' '
	# from python, with SIGINT at its default: "cmd &" in a script starts
	# with SIGINT ignored, as a terminal Ctrl-C never does
	cat >int.py <<-EOF &&
	import signal, subprocess, sys, time
	log = open("ilog", "w")
	p = subprocess.Popen(sys.argv[1:], stdout=log, stderr=subprocess.STDOUT,
	                     preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
	end = time.time() + 300
	while " - global step 7, epoch" not in open("ilog").read():
	    if p.poll() is not None or time.time() > end:
	        p.kill()
	        sys.exit(1)
	    time.sleep(0.05)
	p.send_signal(signal.SIGINT)
	sys.exit(128 - p.wait())
	EOF
	code=0 && python3 int.py gpt-train -c "$GPT_ROOT/configs/tiny_cpu_bytes.yaml" \
		-o Data.Train.dataset.input_dir=data/lic -o Data.Train.dataset.split=15,2,0 \
		-o Global.micro_batch_size=1 -o Engine.eval_freq=0 -o Engine.test_iters=0 \
		-o Engine.save_load.save_steps=3 -o Engine.save_load.save_epoch=0 \
		-o Optimizer.lr.decay_steps=100000 -o Engine.max_steps=100000 \
		-o Engine.save_load.output_dir=int || code=$? &&
	echo "exit $code" &&
	test "$code" = 130 &&
	! grep -q "stop requested" ilog &&
	step=$(sed -n "s/^step_0*//p" int/latest) &&
	test $((step % 3)) = 0 && test "$step" -ge 6 &&
	test -f "int/$(cat int/latest)/index.json" &&
	test_grep "SIGINT" "$GPT_ROOT/man/man1/gpt-train.1"
'

test_expect_success 'what a killed save left goes at the next start, never while a run holds the directory' '
	{ (train -o Engine.save_load.output_dir=held >hlog 2>&1) & } &&
	pid=$! &&
	{ test_wait_line hlog " - global step 2, epoch" || { kill -9 $pid; false; }; } &&
	: >held/.latest.tmp.1.0 && mkdir held/.step_00000007.tmp && : >held/.step_00000007.tmp/part &&
	code=0 && (train -o Engine.save_load.output_dir=held -o Engine.max_steps=1 >h2log 2>&1) || code=$? &&
	kill -9 $pid && { wait $pid || :; } &&
	test "$code" = 64 &&
	test_grep "another run is training into it" h2log &&
	test -e held/.latest.tmp.1.0 && test -e held/.step_00000007.tmp/part &&
	: >held/.latest.tmp.2.0 && : >held/.latest.tmp.notours &&
	mkdir held/.step_00000009.unpublished held/.step_9.tmp &&
	(train -o Engine.save_load.output_dir=held -o Engine.max_steps=1 >h3log 2>&1) &&
	test_grep "held: removed 2 temporary files of .latest. left by a run killed while it replaced it" h3log &&
	test_grep "held: removed 2 staging directories of a save that a killed run left" h3log &&
	! test -e held/.latest.tmp.1.0 && ! test -e held/.latest.tmp.2.0 &&
	! test -e held/.step_00000007.tmp && ! test -e held/.step_00000009.unpublished &&
	test -e held/.latest.tmp.notours && test -e held/.step_9.tmp
'

test_done
