#!/bin/sh
# gpt-launch when things go wrong: a failing or killed worker stops the
# others, restarts, signals, and launches that cannot start.
. "$(dirname "$0")/test-lib.sh"

worker="$GPT_ROOT/build/tests/unit/test-comm-shm"

# wait_for FILE...: up to 10 s for the files to appear.
wait_for () {
	i=0
	for f in "$@"; do
		while [ ! -s "$f" ]; do
			i=$((i + 1))
			[ $i -lt 200 ] || { echo "wait_for: $f never appeared" >&2; return 1; }
			sleep 0.05
		done
	done
}

# all_gone PIDFILE...: the processes named in the files have exited (or
# are zombies waiting for init), within 5 s.
all_gone () {
	for f in "$@"; do
		i=0
		while kill -0 "$(cat "$f")" 2>/dev/null &&
			! grep -q "^State:.*Z" "/proc/$(cat "$f")/status" 2>/dev/null; do
			i=$((i + 1))
			if [ $i -gt 100 ]; then echo "pid $(cat "$f") from $f still runs" >&2; return 1; fi
			sleep 0.05
		done
	done
}

test_expect_success 'a worker that exits 3 stops the others; gpt-launch exits 3 naming it' '
	rm -f pid.* &&
	start=$(date +%s) &&
	test_expect_code 3 gpt-launch --nproc-per-node 4 -- sh -c "
		echo \$\$ >pid.\$GPT_RANK
		if [ \$GPT_RANK = 2 ]; then while [ ! -s pid.3 ] || [ ! -s pid.1 ] || [ ! -s pid.0 ]; do sleep 0.05; done; exit 3; fi
		sleep 30" 2>err &&
	test $(($(date +%s) - start)) -lt 10 &&
	test_grep "^gpt-launch: error: rank 2 \(pid $(cat pid.2)\) exited with status 3 \(output in log/workerlog.2\); stopped the other 3 workers$" err &&
	test_line_count = 1 err &&
	all_gone pid.0 pid.1 pid.3
'

test_expect_success 'the end of a failed worker'"'"'s log, this attempt'"'"'s, is shown above the error, without log lines' '
	test_expect_code 3 gpt-launch --nproc-per-node 2 --max-restarts 1 --log-dir tail -- sh -c "
		[ \$GPT_RANK = 1 ] || exec sleep 30
		[ \$GPT_RESTART_COUNT = 1 ] || seq 1 20
		echo \"[2026-01-01 00:00:00,000] [    INFO] - global step 7, loss: 1.0\"
		echo trainer: error: attempt \$GPT_RESTART_COUNT >&2; exit 3" 2>err &&
	{
		echo "gpt-launch: the end of tail/workerlog.1 (rank 1):" && seq 12 20 &&
		echo "trainer: error: attempt 0" &&
		echo "W gpt-launch: rank 1 (pid N) exited with status 3 (output in tail/workerlog.1); stopped the other 1 worker; restarting the group (restart 1 of 1)" &&
		echo "gpt-launch: the end of tail/workerlog.1 (rank 1):" &&
		echo "trainer: error: attempt 1" &&
		echo "gpt-launch: error: gave up after 1 restart: rank 1 (pid N) exited with status 3 (output in tail/workerlog.1); stopped the other 1 worker"
	} >expect &&
	sed -e "s/(pid [0-9]*)/(pid N)/" -e "s/^\[.*\] \[ WARNING\] - /W /" err >actual &&
	test_cmp expect actual
'

test_expect_success 'the first worker'"'"'s output is on the terminal already: no end of its log' '
	test_expect_code 2 gpt-launch --nproc-per-node 2 --log-dir tail0 -- sh -c "
		echo hello >&2; [ \$GPT_RANK = 0 ] && exit 2; exec sleep 30" 2>err &&
	printf "hello\n" >expect && sed 1q err >actual && test_cmp expect actual &&
	test_line_count = 2 err
'

test_expect_success 'SIGKILL of one worker stops the others within seconds, naming rank and signal' '
	rm -f pid.* &&
	{ gpt-launch --nproc-per-node 3 -- sh -c "echo \$\$ >pid.\$GPT_RANK; exec sleep 30" 2>err & } &&
	launcher=$! &&
	wait_for pid.0 pid.1 pid.2 &&
	start=$(date +%s) &&
	kill -KILL $(cat pid.1) &&
	code=0 && wait $launcher || code=$? &&
	test "$code" = 137 &&
	test $(($(date +%s) - start)) -lt 5 &&
	test_grep "^gpt-launch: error: rank 1 \(pid $(cat pid.1)\) was killed by signal 9 \(SIGKILL; output in log/workerlog.1\); stopped the other 2 workers$" err &&
	all_gone pid.0 pid.2
'

test_expect_success '--max-restarts 1 restarts the group once (GPT_RESTART_COUNT=1)' '
	gpt-launch --nproc-per-node 2 --max-restarts 1 -- sh -c "
		echo restart \$GPT_RESTART_COUNT >>seen.\$GPT_RANK
		if [ \$GPT_RESTART_COUNT = 0 ]; then
			if [ \$GPT_RANK = 1 ]; then sleep 0.2; exit 5; fi
			sleep 30
		fi" 2>err &&
	printf "restart 0\nrestart 1\n" >expect &&
	test_cmp expect seen.0 && test_cmp expect seen.1 &&
	test_grep "WARNING\] - gpt-launch: rank 1 \(pid [0-9]+\) exited with status 5 \(output in log/workerlog.1\); stopped the other 1 worker; restarting the group \(restart 1 of 1\)" err
'

test_expect_success 'SIGTERM while a failed group is being stopped: no restart' '
	rm -f pid.* stopping.* &&
	{ gpt-launch --nproc-per-node 2 --max-restarts 3 --grace-period 10 -- sh -c "
		echo \$\$ >pid.\$GPT_RANK.\$GPT_RESTART_COUNT
		if [ \$GPT_RANK = 1 ]; then while [ ! -s pid.0.\$GPT_RESTART_COUNT ]; do sleep 0.05; done; exit 5; fi
		trap \"echo >stopping.\$GPT_RESTART_COUNT; sleep 2; exit 0\" TERM
		sleep 30 & wait" 2>err & } &&
	launcher=$! &&
	wait_for stopping.0 &&
	kill -TERM $launcher &&
	code=0 && wait $launcher || code=$? &&
	test "$code" = 5 &&
	! test -e pid.0.1 &&
	! grep -q "restarting the group" err &&
	test_grep "^gpt-launch: error: rank 1 \(pid [0-9]+\) exited with status 5 \(output in log/workerlog.1\); stopped the other 1 worker; received SIGTERM while stopping: no restart$" err
'

test_expect_success 'a restart appends to the worker logs' '
	test_expect_code 4 gpt-launch --nproc-per-node 1 --max-restarts 2 -- sh -c "echo attempt \$GPT_RESTART_COUNT; exit 4" >out 2>err &&
	printf "attempt 0\nattempt 1\nattempt 2\n" >expect &&
	test_cmp expect log/workerlog.0 &&
	test_cmp expect out &&
	test_grep "^gpt-launch: error: gave up after 2 restarts: rank 0 \(pid [0-9]+\) exited with status 4 \(output in log/workerlog.0\); no other worker was running$" err
'

test_expect_success 'SIGTERM to gpt-launch is forwarded to every worker' '
	rm -f pid.* &&
	{ gpt-launch --nproc-per-node 2 -- sh -c "trap \"echo got TERM >term.\$GPT_RANK; exit 0\" TERM; echo \$\$ >pid.\$GPT_RANK; sleep 20 & wait" 2>err & } &&
	launcher=$! &&
	wait_for pid.0 pid.1 &&
	kill -TERM $launcher &&
	code=0 && wait $launcher || code=$? &&
	test "$code" = 0 &&
	test_grep "got TERM" term.0 && test_grep "got TERM" term.1 &&
	test_grep "gpt-launch: received SIGTERM; forwarded it to the 2 running workers; every worker exited 0$" err
'

test_expect_success 'SIGTERM that the workers do not survive: gpt-launch exits 143' '
	{ gpt-launch --nproc-per-node 2 -- sh -c "echo \$\$ >pid2.\$GPT_RANK; exec sleep 20" 2>err2 & } &&
	launcher=$! &&
	wait_for pid2.0 pid2.1 &&
	kill -TERM $launcher &&
	code=0 && wait $launcher || code=$? &&
	test "$code" = 143 &&
	test_grep "^gpt-launch: error: received SIGTERM; forwarded it to the 2 running workers$" err2
'

test_expect_success 'a worker that ignores SIGTERM is killed after --grace-period' '
	rm -f pid.* &&
	{ gpt-launch --nproc-per-node 2 --grace-period 0.3 -- sh -c "trap \"\" TERM; echo \$\$ >pid.\$GPT_RANK; sleep 20" 2>err & } &&
	launcher=$! &&
	wait_for pid.0 pid.1 &&
	start=$(date +%s) &&
	kill -INT $launcher &&
	code=0 && wait $launcher || code=$? &&
	test "$code" = 130 &&
	test $(($(date +%s) - start)) -lt 5 &&
	all_gone pid.0 pid.1
'

test_expect_success 'under nohup a SIGHUP stops neither gpt-launch nor its workers' '
	rm -f pid.* &&
	{ (trap "" HUP; exec gpt-launch --nproc-per-node 2 --grace-period 0.3 -- sh -c "echo \$\$ >pid.\$GPT_RANK; sleep 1.5; echo done") 2>err & } &&
	launcher=$! &&
	wait_for pid.0 pid.1 &&
	kill -HUP $launcher &&
	code=0 && wait $launcher || code=$? &&
	test "$code" = 0 &&
	test_grep "^done$" log/workerlog.0 && test_grep "^done$" log/workerlog.1 &&
	! grep SIGHUP err
'

test_expect_success 'workers do not outlive a gpt-launch killed with SIGKILL' '
	rm -f pid.* &&
	{ gpt-launch --nproc-per-node 2 -- sh -c "echo \$\$ >pid.\$GPT_RANK; exec sleep 30" 2>err & } &&
	launcher=$! &&
	wait_for pid.0 pid.1 &&
	kill -KILL $launcher &&
	{ wait $launcher || true; } &&
	all_gone pid.0 pid.1
'

test_expect_success 'a failure on node 1 stops node 0 too' '
	port=$("$worker" free-port) &&
	{ gpt-launch --nnodes 2 --node-rank 1 --nproc-per-node 1 --master 127.0.0.1:$port -- sh -c "sleep 0.3; exit 6" 2>node1.err & } &&
	node1=$! &&
	test_expect_code 6 gpt-launch --nnodes 2 --nproc-per-node 1 --master 127.0.0.1:$port -- sleep 30 2>err &&
	code=0 && wait $node1 || code=$? &&
	test "$code" = 6 &&
	test_grep "^gpt-launch: error: rank 1 \(pid [0-9]+\) exited with status 6 \(output in log/workerlog.1\); no other worker was running$" node1.err &&
	test_grep "^gpt-launch: error: node 1: rank 1 \(pid [0-9]+\) exited with status 6 \(output in log/workerlog.1\); .*; stopped the 1 worker of node 0$" err
'

test_expect_success 'a program that does not exist: exit 127, named' '
	test_expect_code 127 gpt-launch -- no-such-program-xyz 2>err &&
	test_grep "cannot run no-such-program-xyz" err &&
	test_grep "^gpt-launch: error: rank 0 \(pid [0-9]+\) exited with status 127 \(program not found; output in log/workerlog.0\)" err
'

test_expect_success 'node 0 cannot serve on a port in use' '
	port=$("$worker" free-port) &&
	{ gpt-launch --master 127.0.0.1:$port -- sh -c "echo up >up; sleep 30" & } &&
	first=$! &&
	wait_for up &&
	code=0 && gpt-launch --master 127.0.0.1:$port -- true 2>err || code=$? &&
	kill -TERM $first && { wait $first || true; } &&
	test "$code" = 64 &&
	test_grep "^gpt-launch: error: rendezvous store: cannot listen on \*:$port: Address already in use; pick another port with --master HOST:PORT$" err
'

test_expect_success 'node 1 gives up on an unreachable master after GPT_COMM_TIMEOUT' '
	port=$("$worker" free-port) &&
	start=$(date +%s) &&
	test_expect_code 74 env GPT_COMM_TIMEOUT=1 gpt-launch --nnodes 2 --node-rank 1 --master 127.0.0.1:$port --log-dir unreach -- true 2>err &&
	test $(($(date +%s) - start)) -lt 5 &&
	test_grep "^gpt-launch: error: node 1: rendezvous store 127.0.0.1:$port: not reachable within 1 s \(Connection refused\)" err &&
	test ! -e unreach
'

test_expect_success 'node 0 names the nodes that never came, and how to start them' '
	port=$("$worker" free-port) &&
	start=$(date +%s) &&
	test_expect_code 74 env GPT_COMM_TIMEOUT=1 gpt-launch --nnodes 3 --master 127.0.0.1:$port --log-dir lonely -- true 2>err &&
	test $(($(date +%s) - start)) -lt 5 &&
	test_grep "^gpt-launch: error: nodes did not all start: no gpt-launch with --node-rank 1, 2 \(of --nnodes 3\) came to the rendezvous store at 127.0.0.1:$port within 1 s \(GPT_COMM_TIMEOUT\); start one on each node with the same --master and --nnodes and its own --node-rank, 0 to 2 \(without --node-rank a launcher is node 0\)$" err &&
	test ! -e lonely/workerlog.0
'

test_expect_success 'a worker whose peer never arrives gets a timeout naming it; no segment is left' '
	rm -f pid.* &&
	test_expect_code 74 env GPT_COMM_TIMEOUT=1 gpt-launch --nproc-per-node 3 --log-dir peer -- sh -c "
		echo \$\$ >pid.\$GPT_RANK
		[ \$GPT_RANK = 2 ] && exec sleep 5; exec \"$worker\" worker" 2>err &&
	! ls /dev/shm/gptkit-$(cat pid.0)-* 2>/dev/null &&
	test_grep "^gpt-launch: error: rank [01] \(pid [0-9]+\) exited with status 74 \(output in peer/workerlog.[01]\); stopped the other 2 workers$" err &&
	cat peer/workerlog.0 peer/workerlog.1 >both &&
	test_grep "^test-comm-shm worker: error: group world: shm setup timed out after 1 s waiting for ranks 2 \(world 2\)$" both
'

test_expect_success 'the shm segment of a worker killed during setup is removed' '
	rm -f pid.* seen &&
	test_expect_code 137 env GPT_COMM_TIMEOUT=20 gpt-launch --nproc-per-node 3 --log-dir crash -- sh -c "
		echo \$\$ >pid.\$GPT_RANK
		case \$GPT_RANK in
		0) exec \"$worker\" worker ;;
		1) while ! ls /dev/shm/gptkit-\$(cat pid.0)-* >seen 2>/dev/null; do sleep 0.05; done
		   kill -KILL \$(cat pid.0); sleep 5 ;;
		*) exec sleep 5 ;;
		esac" 2>err &&
	test_grep "^gpt-launch: error: rank 0 \(pid $(cat pid.0)\) was killed by signal 9 \(SIGKILL; output in crash/workerlog.0\)" err &&
	test_line_count = 1 seen &&
	! ls $(cat seen) 2>/dev/null
'

test_expect_success 'a log directory that is a file: the error names --log-dir' '
	echo x >afile &&
	test_expect_code 74 gpt-launch --log-dir afile -- true 2>err &&
	test_grep "^gpt-launch: error: --log-dir \(where the workerlog.RANK files go\): afile: exists and is not a directory$" err
'

test_expect_success NOT_ROOT 'a log directory without write permission: nothing starts' '
	mkdir ro && chmod 555 ro &&
	test_expect_code 74 gpt-launch --nproc-per-node 2 --log-dir ro -- sh -c "echo ran >ran.\$GPT_RANK" 2>err &&
	test_grep "^gpt-launch: error: ro/workerlog.0: cannot open the worker log: Permission denied$" err &&
	test ! -e ran.0 && test ! -e ran.1
'

test_expect_success 'a worker log past the file size limit (ulimit -f) costs its lines, not the launcher' '
	code=0 &&
	(ulimit -f 2 && exec gpt-launch --nproc-per-node 1 --log-dir fsz -- sh -c "
		i=0; while [ \$i -lt 400 ]; do echo line \$i; i=\$((i + 1)); done; echo \$i >done") \
		>/dev/null 2>&1 || code=$? &&
	test $code = 0 &&
	test "$(cat done)" = 400 &&
	test -s fsz/workerlog.0 && test $(wc -c <fsz/workerlog.0) -le 2048
'

bad () {
	desc=$1; shift
	pattern=$1; shift
	test_expect_success "bad launch: $desc" "
		mkdir -p bad && cd bad &&
		test_expect_code 64 gpt-launch $* 2>err &&
		test_line_count = 1 err &&
		test_grep \"^gpt-launch: error: $pattern\" err &&
		test ! -e log
	"
}

bad 'zero workers' "--nproc-per-node '0': expected an integer from 1 to 4096" --nproc-per-node 0 -- true
bad 'a word for a number' "--nnodes 'two': expected an integer" --nnodes two -- true
bad 'a node rank outside the nodes' "--node-rank 2: expected 0 to 1 for --nnodes 2" --nnodes 2 --node-rank 2 --master h:1 -- true
bad 'several nodes without --master' "--nnodes 2 needs --master HOST:PORT" --nnodes 2 -- true
bad 'a master without a port' "--master 'node0': expected HOST:PORT" --master node0 -- true
bad 'an IPv6 master without brackets' "--master '::1:6170': expected HOST:PORT, an IPv6 address in brackets" --master ::1:6170 -- true
bad 'a bad device list' "--devices '0,x': 'x' is not a device number" --devices 0,x -- true
bad 'a device listed twice' "--devices '0,1,01': device 1 is listed twice; list each GPU once" --devices 0,1,01 -- true
bad 'devices and a different worker count' "--nproc-per-node 3 but --devices lists 2 devices" --nproc-per-node 3 --devices 0,1 -- true
bad 'a negative restart count' "--max-restarts '-1'" --max-restarts -1 -- true
bad 'a negative grace period' "--grace-period '-2'" --grace-period -2 -- true
bad 'no program' "no program to launch" --nproc-per-node 2

test_expect_success 'bad launch: a malformed GPT_COMM_TIMEOUT' '
	test_expect_code 64 env GPT_COMM_TIMEOUT=soon gpt-launch -- true 2>err &&
	test_grep "^gpt-launch: error: environment variable GPT_COMM_TIMEOUT=.soon.: expected seconds > 0$" err
'

test_done
