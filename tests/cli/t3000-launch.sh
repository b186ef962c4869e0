#!/bin/sh
# gpt-launch: the workers' environment, worker logs, rank 0 on the terminal,
# and real collectives between launched workers.
. "$(dirname "$0")/test-lib.sh"

worker="$GPT_ROOT/build/tests/unit/test-comm-shm"

test_expect_success 'workers see their rank, world and master (GPT_* and torchrun names)' '
	gpt-launch --nproc-per-node 2 -- sh -c "env | grep -E \"^(GPT_(RANK|WORLD_SIZE|LOCAL_RANK|LOCAL_WORLD_SIZE|NODE_RANK|MASTER|RESTART_COUNT)|RANK|WORLD_SIZE|LOCAL_RANK|LOCAL_WORLD_SIZE|MASTER_ADDR|MASTER_PORT|CUDA_VISIBLE_DEVICES)=\" | sort >env.\$GPT_RANK" &&
	port=$(sed -n "s/^MASTER_PORT=//p" env.0) &&
	test -n "$port" &&
	cat >expect.1 <<-EOF &&
	GPT_LOCAL_RANK=1
	GPT_LOCAL_WORLD_SIZE=2
	GPT_MASTER=127.0.0.1:$port
	GPT_NODE_RANK=0
	GPT_RANK=1
	GPT_RESTART_COUNT=0
	GPT_WORLD_SIZE=2
	LOCAL_RANK=1
	LOCAL_WORLD_SIZE=2
	MASTER_ADDR=127.0.0.1
	MASTER_PORT=$port
	RANK=1
	WORLD_SIZE=2
	EOF
	test_cmp expect.1 env.1 &&
	test_grep "^GPT_RANK=0$" env.0 &&
	test_grep "^LOCAL_RANK=0$" env.0
'

test_expect_success '--devices gives one worker per device and sets CUDA_VISIBLE_DEVICES' '
	CUDA_VISIBLE_DEVICES=9 gpt-launch --devices 3,1 -- sh -c "echo \$GPT_RANK \$GPT_WORLD_SIZE \$CUDA_VISIBLE_DEVICES >dev.\$GPT_RANK" &&
	echo "0 2 3" >expect.0 && echo "1 2 1" >expect.1 &&
	test_cmp expect.0 dev.0 && test_cmp expect.1 dev.1
'

test_expect_success '--devices with every variable gpt-launch sets (no OMP_NUM_THREADS of ours)' '
	env -u OMP_NUM_THREADS gpt-launch --devices 0,1 -- sh -c "echo \$CUDA_VISIBLE_DEVICES \$OMP_NUM_THREADS >all.\$GPT_RANK" &&
	test "$(cut -d" " -f1 all.0) $(cut -d" " -f1 all.1)" = "0 1" &&
	test "$(cut -d" " -f2 all.0)" -ge 1
'

test_expect_success 'the spellings of torchrun and paddle.distributed.launch (--rank for the node rank) work too' '
	gpt-launch --log_dir log_dp2 --gpus "0,1" -- sh -c "echo dev=\$CUDA_VISIBLE_DEVICES" >out 2>&1 &&
	test_grep "^dev=1$" log_dp2/workerlog.1 &&
	gpt-launch --nproc_per_node=2 --node_rank 0 --max_restarts=0 --log_dir=tr -- sh -c "echo rank=\$GPT_RANK" >out 2>&1 &&
	test_grep "^rank=1$" tr/workerlog.1 &&
	gpt-launch --help >help &&
	! grep -E "^ +--(log_dir|gpus|rank)" help &&
	test_expect_code 64 gpt-launch --rank 1 -- true 2>err &&
	test_grep "node-rank 1: expected 0 to 0 for --nnodes 1" err &&
	gpt-launch --rank 0 --log_dir pr -- sh -c "echo node=\$GPT_NODE_RANK" >out 2>&1 &&
	test_grep "^node=0$" pr/workerlog.0
'

test_expect_success 'without --devices an inherited CUDA_VISIBLE_DEVICES stays' '
	CUDA_VISIBLE_DEVICES=5 gpt-launch -- sh -c "echo \$CUDA_VISIBLE_DEVICES \$GPT_WORLD_SIZE" >out &&
	echo "5 1" >expect && test_cmp expect out
'

test_expect_success 'each worker logs to LOG_DIR/workerlog.RANK; only rank 0 shows on the terminal' '
	gpt-launch --nproc-per-node 3 --log-dir logs -- sh -c "echo out \$GPT_RANK; echo err \$GPT_RANK >&2" >out 2>err &&
	for r in 0 1 2; do
		test_grep "^out $r$" logs/workerlog.$r &&
		test_grep "^err $r$" logs/workerlog.$r &&
		test_line_count = 2 logs/workerlog.$r || exit 1
	done &&
	echo "out 0" >expect.out && test_cmp expect.out out &&
	echo "err 0" >expect.err && test_cmp expect.err err
'

test_expect_success 'the logs of ranks an earlier, larger run left in LOG_DIR are named in a warning, and kept' '
	mkdir -p stale &&
	for r in 0 1 2 3 7 01 x; do echo "old $r" >stale/workerlog.$r || exit 1; done &&
	gpt-launch --nproc-per-node 2 --log-dir stale -- sh -c "echo new \$GPT_RANK" >out 2>err &&
	test_grep "WARNING\] - gpt-launch: the log directory stale holds 3 logs, workerlog.2 to workerlog.7, of ranks that this run of 2 workers does not have .an earlier run.s.; gpt-logparse stale would read them with this run.s logs: remove them or give another --log-dir$" err &&
	test_line_count = 1 err &&
	test_grep "^new 1$" stale/workerlog.1 && test_grep "^old 7$" stale/workerlog.7 &&
	rm stale/workerlog.[37] &&
	gpt-launch --nproc-per-node 2 --log-dir stale -- true 2>err &&
	test_grep "holds workerlog.2, the log of a rank that this run of 2 workers does not have" err &&
	rm stale/workerlog.2 &&
	gpt-launch --nproc-per-node 2 --log-dir stale -- true 2>err &&
	test_line_count = 0 err
'

test_expect_success 'a closed terminal pipe costs only the terminal copy' '
	gpt-launch --log-dir piped -- sh -c "seq 1 50000; echo end" | head -n 1 >out &&
	echo 1 >expect && test_cmp expect out &&
	test_grep "^end$" piped/workerlog.0
'

test_expect_success 'the default log directory is log/' '
	gpt-launch --nproc-per-node 2 -- sh -c "echo hi \$GPT_RANK" >out &&
	test_grep "^hi 1$" log/workerlog.1 &&
	test_grep "^hi 0$" out
'

test_expect_success 'launched workers meet through the store and all-reduce over shm' '
	gpt-launch --nproc-per-node 4 -- "$worker" worker >out &&
	echo "rank 0 of 4 (gpt-launch, local rank 0, restart 0): sum 10" >expect &&
	test_cmp expect out &&
	test_grep "^rank 3 of 4 .*sum 10$" log/workerlog.3
'

test_expect_success 'launched workers build the groups of a mesh (tp2 x sharding1 x dp1 x pp2)' '
	GPT_TEST_MESH=2,1,1,2 gpt-launch --nproc-per-node 4 -- "$worker" worker >out &&
	test_grep "^rank 0: tp group tp.0 of 2: sum 3$" out &&
	test_grep "^rank 0: pp group pp.0 of 2: sum 4$" out &&
	test_grep "^rank 3: embed group embed.1 of 2: sum 6$" log/workerlog.3
'

test_expect_success 'two nodes on one host: one world across both launchers' '
	port=$("$worker" free-port) &&
	{ gpt-launch --nnodes 2 --node-rank 1 --nproc-per-node 2 --master 127.0.0.1:$port -- "$worker" worker >node1.out 2>node1.err & } &&
	gpt-launch --nnodes 2 --node-rank 0 --nproc-per-node 2 --master 127.0.0.1:$port -- "$worker" worker >node0.out &&
	wait &&
	test_grep "^rank 0 of 4 .*sum 10$" node0.out &&
	test_grep "^rank 2 of 4 .*local rank 0.*sum 10$" node1.out &&
	test_grep "^rank 3 of 4 .*local rank 1.*sum 10$" log/workerlog.3
'

test_expect_success 'node 0 keeps serving until the slower nodes are done' '
	port=$("$worker" free-port) &&
	{ gpt-launch --nnodes 2 --node-rank 1 --master 127.0.0.1:$port --log-dir serving -- sh -c "sleep 1; echo late done" >node1.out 2>node1.err & } &&
	node1=$! &&
	gpt-launch --nnodes 2 --master 127.0.0.1:$port --log-dir serving -- true &&
	wait $node1 &&
	test_grep "^late done$" node1.out &&
	test ! -s node1.err
'

test_expect_success 'nodes that disagree on --nproc-per-node are told so' '
	port=$("$worker" free-port) &&
	{ gpt-launch --nnodes 2 --node-rank 1 --nproc-per-node 1 --master 127.0.0.1:$port -- true 2>node1.err & } &&
	test_expect_code 64 gpt-launch --nnodes 2 --nproc-per-node 2 --master 127.0.0.1:$port -- true 2>err &&
	wait ; test_grep "node 1 runs 1 workers but node 0 runs 2; give every node the same --nproc-per-node" err
'

# wait_code CODE PID: the background job PID exited with CODE.
wait_code () {
	rc=0
	wait $2 || rc=$?
	[ $rc = $1 ] || { echo "wait_code: pid $2 exited $rc, want $1" >&2; return 1; }
}

test_expect_success 'two launchers with the same --node-rank stop all nodes, naming both' '
	port=$("$worker" free-port) &&
	{ GPT_COMM_TIMEOUT=60 gpt-launch --nnodes 3 --node-rank 1 --master 127.0.0.1:$port --log-dir a -- true 2>a.err & } &&
	a=$! &&
	{ GPT_COMM_TIMEOUT=60 gpt-launch --nnodes 3 --node-rank 1 --master 127.0.0.1:$port --log-dir b -- true 2>b.err & } &&
	b=$! &&
	test_expect_code 64 env GPT_COMM_TIMEOUT=60 gpt-launch --nnodes 3 --master 127.0.0.1:$port --log-dir c -- true 2>c.err &&
	wait_code 64 $a && wait_code 64 $b &&
	for f in a b c; do
		test_grep "^gpt-launch: error: --node-rank 1 was given to two gpt-launch processes: .* \\(pid ($a|$b)\\) and .* \\(pid ($a|$b)\\); give each of the 3 nodes its own --node-rank, 0 to 2$" $f.err || exit 1
	done &&
	! grep "pid $a.*pid $a\\|pid $b.*pid $b" a.err &&
	test ! -e c/workerlog.0
'

test_expect_success 'the same --node-rank twice, where the barrier is complete without one of them' '
	port=$("$worker" free-port) &&
	{ GPT_COMM_TIMEOUT=60 gpt-launch --nnodes 2 --master 127.0.0.1:$port --log-dir c -- sleep 30 2>c.err & } &&
	c=$! &&
	{ GPT_COMM_TIMEOUT=60 gpt-launch --nnodes 2 --node-rank 1 --master 127.0.0.1:$port --log-dir a -- sleep 30 2>a.err & } &&
	a=$! &&
	test_expect_code 64 env GPT_COMM_TIMEOUT=60 gpt-launch --nnodes 2 --node-rank 1 --master 127.0.0.1:$port --log-dir b -- sleep 30 2>b.err &&
	wait_code 64 $a && wait_code 64 $c &&
	for f in a b c; do
		test_grep "--node-rank 1 was given to two gpt-launch processes: .* \\(pid [0-9]+\\) and .* \\(pid [0-9]+\\); give each of the 2 nodes its own --node-rank, 0 to 1" $f.err || exit 1
	done
'

test_expect_success 'a SIGTERM while the nodes meet ends gpt-launch there, before any worker' '
	port=$("$worker" free-port) &&
	{ GPT_COMM_TIMEOUT=60 gpt-launch --nnodes 2 --master 127.0.0.1:$port --log-dir m -- true 2>m.err & } &&
	m=$! &&
	sleep 1 && kill -TERM $m &&
	wait_code 143 $m &&
	test_grep "^gpt-launch: error: received SIGTERM while the nodes met; no worker was started$" m.err &&
	test ! -e m/workerlog.0
'

test_expect_success 'workers share the cores through OMP_NUM_THREADS unless it is set' '
	(unset OMP_NUM_THREADS; gpt-launch --nproc-per-node 2 --log-dir omp -- sh -c "echo threads=\$OMP_NUM_THREADS") >out 2>&1 &&
	want=$(( $(nproc) / 2 )) && [ "$want" -ge 1 ] || want=1 &&
	test_grep "^threads=$want$" omp/workerlog.1 &&
	OMP_NUM_THREADS=3 gpt-launch --nproc-per-node 2 --log-dir omp3 -- sh -c "echo threads=\$OMP_NUM_THREADS" >out 2>&1 &&
	test_grep "^threads=3$" omp3/workerlog.1
'

test_expect_success 'the first example of gpt-launch(1) runs as written, after the data step of gpt-train(1)' '
	sed -n "/^\.SH EXAMPLES/,/^\.SH /p" "$GPT_ROOT/man/man1/gpt-train.1" | sed -n "/^\.EX/,/^\.EE/p" |
		grep "^gpt-preprocess " >prep &&
	sed -n "/^\.SH EXAMPLES/,/^\.SH /p" "$GPT_ROOT/man/man1/gpt-launch.1" | sed -n "/^\.EX/,/^\.EE/p" |
		grep -m1 "^gpt-launch " | sed "s/\\\\-/-/g" >cmd &&
	test_line_count = 1 prep && test_line_count = 1 cmd &&
	mkdir ex ex/data && ln -s "$GPT_ROOT/configs" ex/configs &&
	(cd ex && sh -e ../prep 2>/dev/null && sh -e ../cmd >../out 2>../err) &&
	test_grep "\[checkpoint\] global step 20, " out
'

test_done
