#!/bin/sh
# Workers started by Slurm, Open MPI, torchrun or paddle.distributed.launch
# instead of gpt-launch find
# their rank in those launchers' variables (rank 0 then serves the store),
# and contrib/slurm-gptkit.sbatch runs one gpt-launch per node.
. "$(dirname "$0")/test-lib.sh"

worker="$GPT_ROOT/build/tests/unit/test-comm-shm"

# run_two VARS0 -- VARS1: two workers at once with the given variables.
run_pair () {
	env $1 "$worker" worker >out.0 2>err.0 &
	p0=$!
	env $2 "$worker" worker >out.1 2>err.1 &&
	wait $p0
}

test_expect_success 'srun: ranks from SLURM_PROCID/SLURM_NTASKS, rank 0 serves the store' '
	port=$("$worker" free-port) &&
	run_pair "SLURM_PROCID=0 SLURM_NTASKS=2 SLURM_LOCALID=0 SLURM_NNODES=1 MASTER_PORT=$port" \
		"SLURM_PROCID=1 SLURM_NTASKS=2 SLURM_LOCALID=1 SLURM_NNODES=1 MASTER_PORT=$port" &&
	test_grep "^rank 0 of 2 \(slurm, local rank 0, restart 0\): sum 3$" out.0 &&
	test_grep "^rank 1 of 2 \(slurm, local rank 1, restart 0\): sum 3$" out.1
'

test_expect_success 'mpirun: ranks from OMPI_COMM_WORLD_*' '
	port=$("$worker" free-port) &&
	run_pair "OMPI_COMM_WORLD_RANK=0 OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_LOCAL_RANK=0 OMPI_COMM_WORLD_LOCAL_SIZE=2 MASTER_PORT=$port" \
		"OMPI_COMM_WORLD_RANK=1 OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_LOCAL_RANK=1 OMPI_COMM_WORLD_LOCAL_SIZE=2 MASTER_PORT=$port" &&
	test_grep "^rank 1 of 2 \(openmpi, local rank 1, restart 0\): sum 3$" out.1
'

test_expect_success 'torchrun-style variables: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT' '
	port=$("$worker" free-port) &&
	run_pair "RANK=0 WORLD_SIZE=2 LOCAL_RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port" \
		"RANK=1 WORLD_SIZE=2 LOCAL_RANK=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port" &&
	test_grep "^rank 0 of 2 \(torchrun, local rank 0, restart 0\): sum 3$" out.0
'

test_expect_success 'paddle.distributed.launch: PADDLE_TRAINER_ID, PADDLE_TRAINERS_NUM, rank 0 serves on the first endpoint' '
	port=$("$worker" free-port) &&
	port1=$("$worker" free-port) &&
	eps=127.0.0.1:$port,127.0.0.1:$port1 &&
	run_pair "PADDLE_TRAINER_ID=0 PADDLE_TRAINERS_NUM=2 PADDLE_TRAINER_ENDPOINTS=$eps PADDLE_CURRENT_ENDPOINT=127.0.0.1:$port PADDLE_RANK_IN_NODE=0 FLAGS_selected_gpus=0" \
		"PADDLE_TRAINER_ID=1 PADDLE_TRAINERS_NUM=2 PADDLE_TRAINER_ENDPOINTS=$eps PADDLE_CURRENT_ENDPOINT=127.0.0.1:$port1 PADDLE_RANK_IN_NODE=1 FLAGS_selected_gpus=1" &&
	test_grep "^rank 0 of 2 \(paddle, local rank 0, restart 0\): sum 3$" out.0 &&
	test_grep "^rank 1 of 2 \(paddle, local rank 1, restart 0\): sum 3$" out.1
'

test_expect_success 'no launcher variables: a single process' '
	"$worker" worker >out &&
	test_grep "^rank 0 of 1 \(single, local rank 0, restart 0\): sum 1$" out
'

test_expect_success 'a bad launcher variable is an error naming it' '
	test_expect_code 64 env SLURM_PROCID=3 SLURM_NTASKS=2 "$worker" worker 2>err &&
	test_grep "SLURM_PROCID=3 is outside the world of 2 ranks" err
'

test_expect_success 'a rank without its world size is an error naming both, not a single process' '
	test_expect_code 64 env RANK=3 "$worker" worker >out 2>err &&
	test_grep "RANK=.3. is set but WORLD_SIZE is not" err &&
	test_expect_code 64 env SLURM_PROCID=1 "$worker" worker 2>err &&
	test_grep "SLURM_PROCID=.1. is set but SLURM_NTASKS is not" err &&
	test_expect_code 64 env OMPI_COMM_WORLD_RANK=1 "$worker" worker 2>err &&
	test_grep "OMPI_COMM_WORLD_RANK=.1. is set but OMPI_COMM_WORLD_SIZE is not" err &&
	test_expect_code 64 env PADDLE_TRAINER_ID=1 PADDLE_TRAINER_ENDPOINTS=h:1,h:2 "$worker" worker 2>err &&
	test_grep "PADDLE_TRAINER_ID=.1. is set but PADDLE_TRAINERS_NUM is not" err &&
	test ! -s out
'

test_expect_success 'gpt-train with RANK and no WORLD_SIZE stops instead of training alone' '
	mkdir data &&
	gpt-preprocess -t bytes -o data/gpl /usr/share/common-licenses/GPL-3 &&
	cat >train1 <<-EOF &&
	#!/bin/sh
	exec gpt-train -c "$GPT_ROOT/configs/tiny_cpu_bytes.yaml" \\
		-o Data.Train.dataset.input_dir=data/gpl -o Data.Eval.dataset.input_dir=data/gpl \\
		-o Data.Train.dataset.split=1,0,0 -o Data.Eval.dataset.split=1,0,0 \\
		-o Engine.max_steps=1 -o Engine.eval_freq=0 -o Engine.save_load.save_steps=0 "\$@"
	EOF
	chmod +x ./train1 &&
	test_expect_code 64 env RANK=3 ./train1 >train.log 2>&1 &&
	test_grep "^gpt-train: error: environment variable RANK=.3. is set but WORLD_SIZE is not" train.log &&
	test_expect_code 64 env SLURM_PROCID=2 ./train1 >train.log 2>&1 &&
	test_grep "SLURM_PROCID=.2. is set but SLURM_NTASKS is not" train.log &&
	test_expect_code 64 env PADDLE_TRAINER_ID=1 ./train1 >train.log 2>&1 &&
	test_grep "PADDLE_TRAINER_ID=.1. is set but PADDLE_TRAINERS_NUM is not" train.log &&
	test_expect_code 64 env PADDLE_TRAINER_ID=1 PADDLE_TRAINERS_NUM=4 ./train1 >train.log 2>&1 &&
	test_grep "paddle environment: no master address: set PADDLE_TRAINER_ENDPOINTS" train.log &&
	test_expect_code 64 env RANK=1 WORLD_SIZE=1 ./train1 --world-size 1 >train.log 2>&1 &&
	test_grep "RANK=1 is outside the world of 1 ranks \(WORLD_SIZE=1\)" train.log &&
	! grep "global step" train.log
'

test_expect_success 'SLURM_PROCID=0 alone (a batch script) trains as one process' '
	env SLURM_PROCID=0 SLURM_NNODES=2 ./train1 >train.log 2>&1 &&
	test_grep "rank 0 of 1 " train.log &&
	test_grep "global step 1," train.log
'

test_expect_success 'slurm-gptkit.sbatch: one gpt-launch per node, master from the first host' '
	mkdir fake &&
	cat >fake/scontrol <<-\EOF &&
	#!/bin/sh
	# scontrol show hostnames LIST
	printf "127.0.0.1\nnode02\n"
	EOF
	cat >fake/srun <<-\EOF &&
	#!/bin/sh
	# Two "nodes" on this host: the command once per node, SLURM_NODEID set.
	while [ $# -gt 0 ]; do case $1 in --*) shift ;; *) break ;; esac; done
	SLURM_NODEID=1 "$@" >srun.1 2>&1 &
	p=$!
	SLURM_NODEID=0 "$@"
	rc=$?
	wait $p || rc=$?
	exit $rc
	EOF
	cat >fake/gpt-train <<-\EOF &&
	#!/bin/sh
	echo "train rank $GPT_RANK of $GPT_WORLD_SIZE node $GPT_NODE_RANK gpu $CUDA_VISIBLE_DEVICES master $GPT_MASTER args $*"
	EOF
	chmod +x fake/* &&
	port=$("$worker" free-port) &&
	PATH="$PWD/fake:$PATH" SLURM_JOB_ID=42 SLURM_JOB_NODELIST="node[01-02]" SLURM_JOB_NUM_NODES=2 \
		GPUS_PER_NODE=2 MASTER_PORT=$port \
		bash "$GPT_ROOT/contrib/slurm-gptkit.sbatch" cfg.yaml -o Global.seed=7 >out 2>err &&
	test_grep "^gptkit: 2 nodes x 2 GPUs, master 127.0.0.1:$port, logs in log/42$" out &&
	test_grep "^train rank 0 of 4 node 0 gpu 0 master 127.0.0.1:$port args -c cfg.yaml -o Global.seed=7$" out &&
	test_grep "^train rank 3 of 4 node 1 gpu 1 master 127.0.0.1:$port args -c cfg.yaml -o Global.seed=7$" log/42/workerlog.3 &&
	test_grep "^train rank 2 of 4 node 1 gpu 0 " srun.1
'

test_done
