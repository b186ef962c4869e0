#!/bin/sh
# gpt-launch's hang detection: a worker that stops beating (stopped with
# SIGSTOP, or stuck) is found within --heartbeat-timeout; the whole group is
# killed and restarted from the last checkpoint, which ends with the weights
# of an unbroken run; without restarts left gpt-launch exits 74 naming it.
. "$(dirname "$0")/test-lib.sh"

worker="$GPT_ROOT/build/tests/unit/test-comm-shm"

# The training of these tests: 2 ranks, a checkpoint every 10 steps (one
# line: it goes into sh -c scripts).
train_args="-c $GPT_ROOT/configs/tiny_cpu_bytes.yaml"
for o in Data.Train.dataset.input_dir=data/lic Data.Train.dataset.split=15,2,0 \
	Global.micro_batch_size=1 Engine.eval_freq=0 Engine.test_iters=0 \
	Engine.save_load.save_steps=10 Engine.save_load.save_epoch=0 \
	Engine.max_steps=200 Optimizer.lr.decay_steps=200; do
	train_args="$train_args -o $o"
done

# all_gone PID...: the processes have exited (zombies count), within 5 s.
all_gone () {
	for p in "$@"; do
		i=0
		while kill -0 "$p" 2>/dev/null && ! grep -q "^State:.*Z" "/proc/$p/status" 2>/dev/null; do
			i=$((i + 1))
			if [ $i -gt 100 ]; then echo "pid $p still runs" >&2; return 1; fi
			sleep 0.05
		done
	done
}

# beating PID: until the process has mapped its heartbeat slot (10 s)
beating () {
	n=0
	while ! grep -q gptkit-heartbeat "/proc/$1/maps" 2>/dev/null; do
		n=$((n + 1))
		[ $n -lt 200 ] || { echo "pid $1 never opened its heartbeat slot" >&2; return 1; }
		sleep 0.05
	done
}

# A launch that fails to see a hang would wait for ever: each one here is
# bounded (timeout's SIGTERM makes gpt-launch stop its workers).
launch () {
	timeout -k 10 120 gpt-launch "$@"
}

# loss_at LOG STEP: the loss of the last line of that step
loss_at () {
	sed -n "s/.* - global step $2, .* loss: \([0-9.]*\),.*/\1/p" "$1" | tail -n 1
}

test_expect_success 'set up, and an unbroken run to compare with' '
	mkdir data &&
	gpt-preprocess -t bytes -o data/lic /usr/share/common-licenses/* &&
	gpt-launch --nproc-per-node 2 --log-dir ref.log -- gpt-train $train_args \
		-o Engine.save_load.output_dir=ref >/dev/null 2>&1 &&
	test "$(cat ref/latest)" = step_00000200
'

test_expect_success 'a stopped rank is found, the group restarted from its checkpoint; the weights are those of the unbroken run' '
	rm -f pid.* &&
	{ launch --nproc-per-node 2 --max-restarts 1 --heartbeat-timeout 3 --log-dir hb.log -- \
		sh -c "echo \$\$ >pid.\$GPT_RANK; exec gpt-train $train_args -o Engine.save_load.output_dir=hb" \
		>out 2>err & } &&
	launcher=$! &&
	{ test_wait_line hb.log/workerlog.1 " - global step 20, epoch" || { kill -9 $launcher; false; }; } &&
	stopped=$(cat pid.1) && other=$(cat pid.0) &&
	kill -STOP $stopped &&
	start=$(date +%s) &&
	test_wait_line err "restarting the group" &&
	found=$(($(date +%s) - start)) &&
	all_gone $stopped $other &&
	code=0 && wait $launcher || code=$? &&
	cat err &&
	test "$code" = 0 &&
	test $found -ge 2 && test $found -le 8 &&
	test_grep "WARNING\] - gpt-launch: rank 1 \(pid $stopped\) hung: no heartbeat for [0-9]+\.[0-9] s \(--heartbeat-timeout 3\), the last at global step [0-9]+, and the process is stopped by a signal; killed all 2 workers; restarting the group \(restart 1 of 1\)$" err &&
	test_grep "resumed from hb/step_000000[12]0 at global step [12]0" hb.log/workerlog.0 &&
	test_grep "resumed from hb/step_000000[12]0 at global step [12]0" hb.log/workerlog.1 &&
	test "$(cat hb/latest)" = step_00000200 &&
	test "$(loss_at hb.log/workerlog.0 200)" = "$(loss_at ref.log/workerlog.0 200)" &&
	test -n "$(loss_at ref.log/workerlog.0 200)" &&
	test-tool ckpt-diff ref/step_00000200 hb/step_00000200 >diff &&
	test_grep "^max-abs-diff 0 " diff
'

test_expect_success 'no restarts left: gpt-launch exits 74 naming the stopped rank, and nothing runs on' '
	rm -f pid.* &&
	{ launch --nproc-per-node 2 --heartbeat-timeout 1 --log-dir last.log -- \
		sh -c "echo \$\$ >pid.\$GPT_RANK; exec test-tool heartbeat 1000000 0.02" 2>err & } &&
	launcher=$! &&
	{ test_wait_line pid.0 . && test_wait_line pid.1 . && beating $(cat pid.0) || { kill $launcher; false; }; } &&
	kill -STOP $(cat pid.0) &&
	code=0 && wait $launcher || code=$? &&
	cat err &&
	test "$code" = 74 &&
	test_grep "^gpt-launch: error: rank 0 \(pid $(cat pid.0)\) hung: no heartbeat for [0-9]+\.[0-9] s \(--heartbeat-timeout 1\), the last at global step [0-9]+, and the process is stopped by a signal; killed all 2 workers$" err &&
	test_line_count = 1 err &&
	all_gone $(cat pid.0) $(cat pid.1)
'

test_expect_success 'no restarts left, the real trainer: exit 74, the last checkpoint stays complete' '
	rm -f pid.* &&
	{ launch --nproc-per-node 2 --heartbeat-timeout 2 --log-dir once.log -- \
		sh -c "echo \$\$ >pid.\$GPT_RANK; exec gpt-train $train_args -o Engine.save_load.output_dir=once" \
		>out 2>err & } &&
	launcher=$! &&
	{ test_wait_line once.log/workerlog.0 "\[checkpoint\] global step 10," || { kill -9 $launcher; false; }; } &&
	kill -STOP $(cat pid.0) &&
	code=0 && wait $launcher || code=$? &&
	test "$code" = 74 &&
	test_grep "^gpt-launch: error: rank 0 \(pid $(cat pid.0)\) hung: .*, and the process is stopped by a signal; killed all 2 workers$" err &&
	all_gone $(cat pid.0) $(cat pid.1) &&
	gpt-ckpt-merge --verify "once/$(cat once/latest)"
'

test_expect_success 'a rank stuck without being stopped is named, while the other still beats' '
	code=0 &&
	launch --nproc-per-node 3 --heartbeat-timeout 1 --log-dir stuck.log -- sh -c "
		if [ \$GPT_RANK = 2 ]; then exec test-tool heartbeat 4 0.05; fi
		exec test-tool heartbeat 1000000 0.05" 2>err || code=$? &&
	cat err &&
	test "$code" = 74 &&
	test_grep "^gpt-launch: error: rank 2 \(pid [0-9]+\) hung: no heartbeat for [0-9]+\.[0-9] s \(--heartbeat-timeout 1\), the last at global step 4; killed all 3 workers$" err
'

test_expect_success 'once one worker beats, one that never did is judged too' '
	code=0 &&
	launch --nproc-per-node 2 --heartbeat-timeout 1 --log-dir never.log -- sh -c "
		if [ \$GPT_RANK = 1 ]; then kill -STOP \$\$; fi
		exec test-tool heartbeat 1000000 0.05" 2>err || code=$? &&
	cat err &&
	test "$code" = 74 &&
	test_grep "^gpt-launch: error: rank 1 \(pid [0-9]+\) hung: no heartbeat for [0-9]+\.[0-9] s \(--heartbeat-timeout 1\), it never sent one, and the process is stopped by a signal; killed all 2 workers$" err
'

test_expect_success 'a program that never beats is not judged' '
	gpt-launch --nproc-per-node 2 --heartbeat-timeout 0.3 -- sh -c "sleep 1; echo done \$GPT_RANK" >out &&
	echo "done 0" >expect && test_cmp expect out
'

test_expect_success 'the slot is in GPT_HEARTBEAT_FD; 0 turns hang detection off' '
	gpt-launch --nproc-per-node 2 -- sh -c "echo \${GPT_HEARTBEAT_FD:-none} >fd.\$GPT_RANK" &&
	grep -q "^[0-9][0-9]*$" fd.0 && grep -q "^[0-9][0-9]*$" fd.1 &&
	GPT_HEARTBEAT_FD=9 gpt-launch --heartbeat-timeout 0 -- sh -c "echo \${GPT_HEARTBEAT_FD:-none}" >off &&
	echo none >expect && test_cmp expect off &&
	{ gpt-launch --heartbeat-timeout 0 -- test-tool heartbeat 0 0 & } &&
	pid=$! &&
	sleep 0.5 && kill -0 $pid && kill -TERM $pid &&
	code=0 && wait $pid || code=$? &&
	test "$code" = 143
'

test_expect_success 'GPT_HEARTBEAT_TIMEOUT sets the default' '
	code=0 &&
	GPT_HEARTBEAT_TIMEOUT=0.5 timeout -k 10 120 gpt-launch -- test-tool heartbeat 0 0 2>err || code=$? &&
	test "$code" = 74 &&
	test_grep "hung: no heartbeat for [0-9]+\.[0-9] s \(--heartbeat-timeout 0.5\), the last at global step 0; killed all 1 worker$" err
'

test_expect_success 'a hang on node 1 stops node 0 too' '
	port=$("$worker" free-port) &&
	{ launch --nnodes 2 --node-rank 1 --master 127.0.0.1:$port --heartbeat-timeout 1 --log-dir n1 -- \
		test-tool heartbeat 3 0.05 2>node1.err & } &&
	node1=$! &&
	code=0 &&
	launch --nnodes 2 --master 127.0.0.1:$port --heartbeat-timeout 1 --log-dir n0 -- \
		test-tool heartbeat 1000000 0.05 2>err || code=$? &&
	code1=0 && wait $node1 || code1=$? &&
	cat node1.err err &&
	test "$code" = 74 && test "$code1" = 74 &&
	test_grep "^gpt-launch: error: rank 1 \(pid [0-9]+\) hung: .* the last at global step 3; killed all 1 worker$" node1.err &&
	test_grep "^gpt-launch: error: node 1: rank 1 \(pid [0-9]+\) hung: .*; stopped the 1 worker of node 0$" err
'

test_expect_success 'a wrapper that closed the slot: the worker says so' '
	test_expect_code 64 gpt-launch --log-dir closed -- sh -c "eval \"exec \$GPT_HEARTBEAT_FD<&-\"; exec test-tool heartbeat 1 0" 2>err &&
	test_grep "^test-tool: error: environment variable GPT_HEARTBEAT_FD=[0-9]+: descriptor [0-9]+ is not gpt-launch.s heartbeat file \(did a wrapper close it\?\); run gpt-launch with --heartbeat-timeout 0 to turn hang detection off$" err
'

test_expect_success 'bad --heartbeat-timeout and GPT_HEARTBEAT_TIMEOUT' '
	test_expect_code 64 gpt-launch --heartbeat-timeout -1 -- true 2>err &&
	test_grep "^gpt-launch: error: --heartbeat-timeout .-1.: expected seconds from 0 \(off\) to 10000000$" err &&
	test_expect_code 64 gpt-launch --heartbeat-timeout soon -- true 2>err &&
	test_grep "^gpt-launch: error: --heartbeat-timeout .soon.: expected seconds" err &&
	test_expect_code 64 env GPT_HEARTBEAT_TIMEOUT=soon gpt-launch --log-dir bad -- true 2>err &&
	test_grep "^gpt-launch: error: environment variable GPT_HEARTBEAT_TIMEOUT=.soon.: expected seconds >= 0 \(0 turns hang detection off\)$" err &&
	test ! -e bad
'

test_done
