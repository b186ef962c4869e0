#!/bin/sh
# Multi-rank training on one GPU: two ranks started by gpt-launch share
# device 0 over the shm backend (GPT_COMM_BACKEND=shm: device buffers staged
# through pinned host memory), and dp2, mp2, pp2 and sharding2 stage 3 each
# give the one-rank GPU run's losses (relative 1e-4) and final weights
# (absolute 1e-4), dropout on; GPT_COMM_BACKEND unset (auto) finds that
# the ranks share the GPU; stopping and resuming on the GPU gives the
# unbroken run's losses and bytes exactly, on one rank and on two. The
# optimizer state offloaded to host memory (ZeRO-Offload: AdamW on the CPU)
# gives the same steps, on one rank and with sharding2 stage 2, and resumes
# bit for bit, its checkpoints written in the background too (async_save
# copies the offloaded state as host memory, not as the device's). With two
# or more GPUs, dp2 over nccl (one GPU each) agrees too. Gradient buckets
# overlapped with the backward give the bits of the reduction after it, over
# shm and over nccl. float16 at sharding_stage 3, whose parameters live only
# as the fp32 master weights, gives the bits of the layouts that keep an fp16
# copy. Skips without a GPU.
#
# GPT_EMU_BIN names a directory whose gpt-train runs lib/cuda under the CPU
# emulation of tests/gpu/emu (train.sh sets it, with GPT_GPU_TEST_STEPS=2):
# then the GPU prerequisite holds without a GPU.
. "$(dirname "$0")/../cli/test-lib.sh"

if [ -n "${GPT_EMU_BIN:-}" ]; then
	PATH="$GPT_EMU_BIN:$PATH"
	test_set_prereq GPU
fi
if ! test_have_prereq GPU; then
	echo "1..0 # SKIP no GPU (nvidia-smi lists none): multi-rank GPU training is tested on a GPU only"
	cd / && rm -rf "$GPT_TRASH"
	exit 0
fi
[ "$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')" -ge 2 ] && test_set_prereq GPU2

STEPS=${GPT_GPU_TEST_STEPS:-6}
HALF=$((STEPS / 2))
# A tiny model over bytes: 2 layers, hidden 32, 2 heads, 16 positions.
FLAGS="-c $GPT_ROOT/configs/tiny_cpu_bytes.yaml -o Global.device=gpu
	-o Data.Train.dataset.input_dir=data/lic -o Data.Eval.dataset.input_dir=data/lic
	-o Data.Train.dataset.split=15,2,0 -o Data.Eval.dataset.split=15,2,0
	-o Model.hidden_size=32 -o Model.num_attention_heads=2 -o Model.max_position_embeddings=16
	-o Data.Train.dataset.max_seq_len=16 -o Data.Eval.dataset.max_seq_len=16
	-o Global.global_batch_size=4 -o Global.micro_batch_size=1
	-o Engine.eval_freq=0 -o Engine.test_iters=0
	-o Optimizer.lr.max_lr=2e-3 -o Optimizer.lr.decay_steps=150
	-o Model.hidden_dropout_prob=0.1 -o Model.attention_probs_dropout_prob=0.1"

ckpt () { printf "%s/step_%08d" "$1" "$2"; }

test_expect_success 'set up: data and the one-rank GPU reference' '
	mkdir data &&
	gpt-preprocess -t bytes -o data/lic /usr/share/common-licenses/* &&
	gpt-train $FLAGS -o Engine.max_steps=$STEPS -o Engine.save_load.save_steps=$HALF \
		-o Engine.save_load.output_dir=single >single.log 2>&1 &&
	test -f $(ckpt single $STEPS)/index.json
'

layout () { # name nproc backend flags...
	name=$1 nproc=$2 backend=$3 prereq=GPU want=$3
	[ "$backend" = nccl ] && prereq=GPU2
	# auto: shm where the two ranks share GPU 0, nccl where each has one
	[ "$backend" = auto ] && { want=shm; test_have_prereq GPU2 && want=nccl; }
	shift 3
	test_expect_success $prereq "$name on $nproc ranks over $backend equals one rank" '
		GPT_COMM_BACKEND='$backend' gpt-launch --nproc-per-node '$nproc' --log-dir log-'$name' -- \
			gpt-train $FLAGS '"$*"' -o Engine.max_steps=$STEPS -o Engine.save_load.save_steps=$STEPS \
			-o Engine.save_load.output_dir=out-'$name' >'$name'.log 2>&1 &&
		test_grep "rank 1: GPU [01], collectives over '$want'" log-'$name'/workerlog.1 &&
		same_train_losses single.log log-'$name'/workerlog.0 1e-4 &&
		test-tool ckpt-diff $(ckpt single $STEPS) $(ckpt out-'$name' $STEPS) >diff &&
		cat diff &&
		awk "{ exit !(\$2 <= 1e-4) }" diff
	'
}

layout dp2 2 shm
layout mp2 2 shm -o Distributed.mp_degree=2
layout pp2 2 shm -o Distributed.pp_degree=2
layout sharding2-stage3 2 shm --sharding_parallel_degree 2 --sharding stage3
layout sharding2-stage2-offload 2 shm --sharding_parallel_degree 2 --sharding stage2 \
	-o Distributed.sharding.sharding_offload=True
test_expect_success 'sharding2 stage 2 with offload: each rank steps its shard on the host' '
	for r in 0 1; do
		test_grep "optimizer state offloaded to host memory" log-sharding2-stage2-offload/workerlog.$r || exit 1
	done
'
layout dp2-nccl 2 nccl
layout dp2-auto 2 auto

# Distributed.overlap_grad_reduce (on by default on GPUs): gradient buckets
# reduced during the backward, a few per step, give the bits of one
# reduction after it; over shm each bucket is staged in pinned host memory of
# its own and reduced by a progress thread; over nccl on a stream of its own.
overlap () { # name prereq backend
	test_expect_success $2 "dp2 over $3: gradient buckets during the backward give the bits of one reduction after it" '
		for ov in True False; do
			GPT_COMM_BACKEND='$3' gpt-launch --nproc-per-node 2 --log-dir log-'$1'-$ov -- \
				gpt-train $FLAGS -o Distributed.overlap_grad_reduce=$ov -o Distributed.comm_buffer_size=0.001 \
				-o Engine.max_steps=$STEPS -o Engine.save_load.save_steps=$STEPS \
				-o Engine.save_load.output_dir=out-'$1'-$ov >'$1'-$ov.log 2>&1 || exit 1
		done &&
		test_grep "gradient reduction: overlapped with the backward" log-'$1'-True/workerlog.0 &&
		n=$(sed -n "s/.*gradient reduction: \([0-9]*\) buckets per step/\1/p" log-'$1'-True/workerlog.0) &&
		echo "$n buckets per step" && test "$n" -ge 3 &&
		train_losses log-'$1'-True/workerlog.0 >a && train_losses log-'$1'-False/workerlog.0 >b &&
		test_line_count = $STEPS a && test_cmp a b &&
		cmp $(ckpt out-'$1'-True $STEPS)/rank-00000.safetensors $(ckpt out-'$1'-False $STEPS)/rank-00000.safetensors
	'
}
overlap dp2-overlap GPU shm
overlap dp2-overlap-nccl GPU2 nccl

test_expect_success 'one rank: stop half way and resume: the same losses and the same bytes' '
	gpt-train $FLAGS -o Engine.max_steps=$HALF -o Engine.save_load.save_steps=$HALF \
		-o Engine.save_load.output_dir=part >part1.log 2>&1 &&
	gpt-train $FLAGS -o Engine.max_steps=$STEPS -o Engine.save_load.save_steps=$HALF \
		-o Engine.save_load.output_dir=part >part2.log 2>&1 &&
	test_grep "resumed from $(ckpt part $HALF) at global step $HALF" part2.log &&
	train_losses single.log >a && { train_losses part1.log; train_losses part2.log; } >b &&
	test_cmp a b &&
	cmp $(ckpt single $STEPS)/rank-00000.safetensors $(ckpt part $STEPS)/rank-00000.safetensors
'

test_expect_success 'optimizer state offloaded to the host: the same steps; resuming (async_save) is bit for bit' '
	OFF="-o Distributed.sharding.sharding_offload=True" &&
	gpt-train $FLAGS $OFF -o Engine.max_steps=$STEPS -o Engine.save_load.save_steps=$HALF \
		-o Engine.save_load.output_dir=off >off.log 2>&1 &&
	test_grep "optimizer state offloaded to host memory" off.log &&
	test_grep "memory: .*optimizer state 0 B," off.log &&
	same_train_losses single.log off.log 1e-4 &&
	test-tool ckpt-diff $(ckpt single $STEPS) $(ckpt off $STEPS) >diff &&
	awk "{ exit !(\$2 <= 1e-4) }" diff &&
	gpt-train $FLAGS $OFF -o Engine.max_steps=$HALF -o Engine.save_load.save_steps=$HALF \
		-o Engine.save_load.async_save=True -o Engine.save_load.output_dir=off-part >off1.log 2>&1 &&
	test_grep "checkpoint of global step $HALF: state copied to host memory" off1.log &&
	gpt-train $FLAGS $OFF -o Engine.max_steps=$STEPS -o Engine.save_load.save_steps=$HALF \
		-o Engine.save_load.async_save=True -o Engine.save_load.output_dir=off-part >off2.log 2>&1 &&
	train_losses off.log >a && { train_losses off1.log; train_losses off2.log; } >b &&
	test_cmp a b &&
	cmp $(ckpt off $STEPS)/rank-00000.safetensors $(ckpt off-part $STEPS)/rank-00000.safetensors
'

test_expect_success 'sharding2 stage 3 on one GPU: resuming is bit for bit too' '
	run2 () {
		GPT_COMM_BACKEND=shm gpt-launch --nproc-per-node 2 --log-dir "$1" -- \
			gpt-train $FLAGS --sharding_parallel_degree 2 --sharding stage3 \
			-o Engine.max_steps=$2 -o Engine.save_load.save_steps=$HALF \
			-o Engine.save_load.output_dir=part-sh >/dev/null 2>&1
	} &&
	run2 log-p1 $HALF && run2 log-p2 $STEPS &&
	train_losses log-sharding2-stage3/workerlog.0 >a &&
	{ train_losses log-p1/workerlog.0; train_losses log-p2/workerlog.0; } >b &&
	test_cmp a b &&
	for f in rank-00000.safetensors rank-00001.safetensors; do
		cmp $(ckpt out-sharding2-stage3 $STEPS)/$f $(ckpt part-sh $STEPS)/$f || exit 1
	done
'

# bf16 keeps its fp32 master weights split: the parameters are their high
# halves, the optimizer holds the low ones; a checkpoint joins them, a
# resumed run splits them again.
bf () { # output_dir steps flags...
	out=$1 steps=$2 && shift 2 &&
	gpt-train $FLAGS -o Engine.mix_precision.enable=True -o Engine.mix_precision.dtype=bfloat16 \
		-o Engine.max_steps=$steps -o Engine.save_load.save_steps=$HALF -o Engine.save_load.output_dir=$out "$@"
}
test_expect_success 'bf16 (split master weights), one rank: stop and resume is bit for bit' '
	bf bf $STEPS >bf.log 2>&1 &&
	bf bf-part $HALF >bf1.log 2>&1 && bf bf-part $STEPS >bf2.log 2>&1 &&
	train_losses bf.log >a && { train_losses bf1.log; train_losses bf2.log; } >b &&
	test_cmp a b &&
	cmp $(ckpt bf $STEPS)/rank-00000.safetensors $(ckpt bf-part $STEPS)/rank-00000.safetensors
'

test_expect_success 'bf16 with the optimizer state offloaded: the same steps; resuming (async_save) is bit for bit' '
	OFF="-o Distributed.sharding.sharding_offload=True -o Engine.save_load.async_save=True" &&
	bf bf-off $STEPS $OFF >bfo.log 2>&1 &&
	test_grep "optimizer state offloaded to host memory" bfo.log &&
	same_train_losses bf.log bfo.log 1e-4 &&
	test-tool ckpt-diff $(ckpt bf $STEPS) $(ckpt bf-off $STEPS) >diff &&
	awk "{ exit !(\$2 <= 1e-4) }" diff &&
	bf bf-off-part $HALF $OFF >bfo1.log 2>&1 && bf bf-off-part $STEPS $OFF >bfo2.log 2>&1 &&
	train_losses bfo.log >a && { train_losses bfo1.log; train_losses bfo2.log; } >b &&
	test_cmp a b &&
	cmp $(ckpt bf-off $STEPS)/rank-00000.safetensors $(ckpt bf-off-part $STEPS)/rank-00000.safetensors
'

# The offloaded step goes in chunks whose copies overlap the host's AdamW:
# one chunk a run of the table (GPT_OFFLOAD_CHUNK=1) gives the bits of one
# chunk for the whole range, in fp32, fp16 and bf16 (whose AdamW reads the
# host's image of the parameters, taken down only at the first step).
test_expect_success 'offloaded, a chunk a run: the bits of one chunk (fp32, fp16, bf16)' '
	for dt in fp32 float16 bfloat16; do
		P= && [ $dt = fp32 ] || P="-o Engine.mix_precision.enable=True -o Engine.mix_precision.dtype=$dt" &&
		for ch in 1 1000000000; do
			GPT_OFFLOAD_CHUNK=$ch gpt-train $FLAGS $P -o Distributed.sharding.sharding_offload=True \
				-o Engine.max_steps=$STEPS -o Engine.save_load.save_steps=$STEPS \
				-o Engine.save_load.output_dir=ch-$dt-$ch >ch-$dt-$ch.log 2>&1 || exit 1
		done &&
		n=$(sed -n "s/.*AdamW runs on the CPU, in \([0-9]*\) chunks of about 1 elements.*/\1/p" ch-$dt-1.log) &&
		echo "$dt: $n chunks" && test "$n" -ge 8 &&
		test_grep "in 1 chunk of about 1000000000 elements" ch-$dt-1000000000.log &&
		train_losses ch-$dt-1.log >a && train_losses ch-$dt-1000000000.log >b &&
		test_line_count = $STEPS a && test_cmp a b &&
		cmp $(ckpt ch-$dt-1 $STEPS)/rank-00000.safetensors $(ckpt ch-$dt-1000000000 $STEPS)/rank-00000.safetensors ||
		exit 1
	done
'

test_expect_success 'offloaded: a bad GPT_OFFLOAD_CHUNK is refused' '
	for v in 0 -3 4x; do
		test_expect_code 64 env GPT_OFFLOAD_CHUNK=$v gpt-train $FLAGS -o Distributed.sharding.sharding_offload=True \
			-o Engine.max_steps=1 -o Engine.save_load.output_dir=bad >bad.log 2>&1 &&
		test_grep "GPT_OFFLOAD_CHUNK is .$v.; expected a positive number of elements" bad.log || exit 1
	done
'

# A rollback writes checkpointed parameters on the device: the host's image
# of them (bf16's high halves, which its AdamW reads) is taken down again.
test_expect_success 'bf16 offloaded: a rollback gives the bits of skipping those updates' '
	R="-o Distributed.sharding.sharding_offload=True -o Engine.save_load.save_steps=2" &&
	bf rb-skip 6 $R -o Engine.nan_policy=skip -o Engine.fault_inject.nan_steps=3,4 >rbs.log 2>&1 &&
	bf rb 6 $R -o Engine.nan_policy=rollback -o Engine.fault_inject.nan_steps=4 >rb.log 2>&1 &&
	test_grep "rolled back to the weights and optimizer state of global step 2" rb.log &&
	cmp $(ckpt rb-skip 6)/rank-00000.safetensors $(ckpt rb 6)/rank-00000.safetensors
'

test_expect_success 'bf16, sharding2 stage 3 on one GPU: the same steps; resuming is bit for bit' '
	runbf () {
		GPT_COMM_BACKEND=shm gpt-launch --nproc-per-node 2 --log-dir "$1" -- \
			gpt-train $FLAGS --sharding_parallel_degree 2 --sharding stage3 \
			-o Engine.mix_precision.enable=True -o Engine.mix_precision.dtype=bfloat16 \
			-o Engine.max_steps=$3 -o Engine.save_load.save_steps=$HALF \
			-o Engine.save_load.output_dir=$2 >/dev/null 2>&1
	} &&
	runbf log-bfsh bf-sh $STEPS &&
	same_train_losses bf.log log-bfsh/workerlog.0 1e-3 &&
	runbf log-bfsh1 bf-sh-part $HALF && runbf log-bfsh2 bf-sh-part $STEPS &&
	train_losses log-bfsh/workerlog.0 >a &&
	{ train_losses log-bfsh1/workerlog.0; train_losses log-bfsh2/workerlog.0; } >b &&
	test_cmp a b &&
	for f in rank-00000.safetensors rank-00001.safetensors; do
		cmp $(ckpt bf-sh $STEPS)/$f $(ckpt bf-sh-part $STEPS)/$f || exit 1
	done
'

# float16 at sharding_stage 3 keeps no fp16 copy of the parameters: each
# unit's are cast from the fp32 master weights into a window when it runs
# (lib/train/zero.c), and AdamW writes the master alone. The cast rounds as
# AdamW's copy did: one rank gives stage 1's bytes, sharding2 stage 2's.
test_expect_success 'float16 at sharding_stage 3: stage 1 bytes on one rank, stage 2 bytes on two; resuming is bit for bit' '
	FP="-o Engine.mix_precision.enable=True -o Engine.mix_precision.dtype=float16" &&
	f16 () { # nproc out steps flags...
		np=$1 out=$2 steps=$3 &&
		shift 3 &&
		GPT_COMM_BACKEND=shm gpt-launch --nproc-per-node $np --log-dir log-$out -- \
			gpt-train $FLAGS $FP "$@" -o Engine.max_steps=$steps -o Engine.save_load.save_steps=$HALF \
			-o Engine.save_load.output_dir=$out >/dev/null 2>&1
	} &&
	f16 1 f16-s1 $STEPS && f16 1 f16-s3 $STEPS -o Distributed.sharding.sharding_stage=3 &&
	test_grep "kept only as the fp32 master weights" log-f16-s3/workerlog.0 &&
	cmp $(ckpt f16-s1 $STEPS)/rank-00000.safetensors $(ckpt f16-s3 $STEPS)/rank-00000.safetensors &&
	f16 1 f16-part $HALF -o Distributed.sharding.sharding_stage=3 &&
	f16 1 f16-part $STEPS -o Distributed.sharding.sharding_stage=3 &&
	cmp $(ckpt f16-s1 $STEPS)/rank-00000.safetensors $(ckpt f16-part $STEPS)/rank-00000.safetensors &&
	f16 2 f16-sh2 $STEPS --sharding_parallel_degree 2 --sharding stage2 &&
	f16 2 f16-sh3 $STEPS --sharding_parallel_degree 2 --sharding stage3 &&
	for f in rank-00000.safetensors rank-00001.safetensors; do
		cmp $(ckpt f16-sh2 $STEPS)/$f $(ckpt f16-sh3 $STEPS)/$f || exit 1
	done
'

test_done
