#!/bin/sh
# Saving: Engine.save_load.async_save writes the same bytes as a blocking
# save (the copy is taken at the step it names, however training goes on);
# keep_last prunes only complete older checkpoints, never later ones; a rank that fails to
# write its part (a file size limit set on it mid-run) makes every rank stop
# with an error and nothing is published, blocking or in the background; an
# existing complete checkpoint is never overwritten.
. "$(dirname "$0")/test-lib.sh"

# train NPROC LOGDIR OUTDIR STEPS [flags...]
train () {
	n=$1 l=$2 o=$3 s=$4
	shift 4
	gpt-launch --nproc-per-node "$n" --log-dir "$l" -- sh -c 'trap "" XFSZ; exec "$@"' sh \
		gpt-train -c "$GPT_ROOT/configs/tiny_cpu_bytes.yaml" \
		-o Data.Train.dataset.input_dir=data/lic -o Data.Train.dataset.split=15,2,0 \
		-o Global.micro_batch_size=1 -o Engine.eval_freq=0 -o Optimizer.lr.max_lr=2e-3 \
		-o Model.hidden_dropout_prob=0.1 -o Engine.save_load.output_dir="$o" \
		-o Engine.max_steps="$s" "$@"
}

same_files () { # DIR1 DIR2
	ls "$1" >f1 && ls "$2" >f2 && test_cmp f1 f2 &&
	for f in $(grep safetensors f1); do cmp "$1/$f" "$2/$f" || exit 1; done
}

test_expect_success 'set up: data' '
	mkdir data &&
	gpt-preprocess -t bytes -o data/lic /usr/share/common-licenses/*
'

test_expect_success 'async_save writes what a blocking save writes, step by step' '
	train 2 log-sync sync 9 --sharding_parallel_degree 2 --sharding stage2 \
		-o Engine.save_load.save_steps=3 >/dev/null 2>&1 &&
	train 2 log-async async 9 --sharding_parallel_degree 2 --sharding stage2 \
		-o Engine.save_load.save_steps=3 -o Engine.save_load.async_save=True >/dev/null 2>&1 &&
	test_grep "checkpoint of global step 3: state copied to host memory in .* writing in the background" \
		log-async/workerlog.0 &&
	test_grep "\[checkpoint\] global step 3, path: async/step_00000003" log-async/workerlog.0 &&
	for s in 3 6 9; do same_files sync/step_0000000$s async/step_0000000$s || exit 1; done &&
	echo step_00000009 >want && test_cmp want async/latest &&
	! ls -a async | grep tmp
'

test_expect_success 'an async checkpoint resumes bit for bit' '
	train 2 log-a1 a 6 --sharding_parallel_degree 2 --sharding stage2 \
		-o Engine.save_load.save_steps=3 -o Engine.save_load.async_save=True >/dev/null 2>&1 &&
	rm -rf a/step_00000006 && echo step_00000003 >a/latest &&
	train 2 log-a2 a 9 --sharding_parallel_degree 2 --sharding stage2 \
		-o Engine.save_load.save_steps=3 -o Engine.save_load.async_save=True >/dev/null 2>&1 &&
	test_grep "resumed from a/step_00000003 at global step 3" log-a2/workerlog.0 &&
	same_files sync/step_00000009 a/step_00000009
'

test_expect_success 'keep_last 2 keeps the two newest complete checkpoints' '
	mkdir k && mkdir k/step_00000001 &&
	train 2 log-k k 8 -o Distributed.dp_degree=2 -o Engine.save_load.save_steps=2 \
		-o Engine.save_load.keep_last=2 -o Engine.save_load.async_save=True >/dev/null 2>&1 &&
	ls k >got &&
	printf "latest\nstep_00000001\nstep_00000006\nstep_00000008\n" >want &&
	test_cmp want got &&
	ls k/step_00000008 >files &&
	printf "config.yaml\nindex.json\nrank-00000.safetensors\nstate.json\n" >want &&
	test_cmp want files
'

test_expect_success 'keep_last after going back to an earlier step: later ones neither count nor go' '
	train 1 log-kb1 kb 8 -o Engine.save_load.save_steps=4 >/dev/null 2>&1 &&
	train 1 log-kb2 kb 7 -o Engine.save_load.save_steps=1 -o Engine.save_load.keep_last=2 \
		-o Engine.save_load.ckpt_dir=kb/step_00000004 >/dev/null 2>&1 &&
	ls kb >got &&
	printf "latest\nstep_00000006\nstep_00000007\nstep_00000008\n" >want &&
	test_cmp want got &&
	echo step_00000007 >want && test_cmp want kb/latest
'

# fail_rank1 NAME FLAGS...: a 2-rank run whose rank 1 may not write more
# than 100 kB once training runs; the checkpoint at the end fails there
fail_rank1 () {
	name=$1
	shift
	rm -rf "$name" "log-$name" &&
	{ if train 2 "log-$name" "$name" 100 --sharding_parallel_degree 2 --sharding stage1 \
		-o Engine.save_load.save_steps=100 "$@" >"$name.out" 2>&1; then echo 0; else echo $?; fi >"$name.rc"; } &
	n=0 && while ! grep -q "global step 1," "log-$name/workerlog.0" 2>/dev/null && [ $n -lt 400 ]; do
		sleep 0.05; n=$((n + 1)); done &&
	for p in $(test_rank_pids "output_dir=$name " 1); do
		prlimit --pid $p --fsize=100000
	done
	wait
}

command -v prlimit >/dev/null 2>&1 && test_set_prereq PRLIMIT

test_expect_success PRLIMIT 'a rank that cannot write its part: every rank fails, nothing is published' '
	fail_rank1 fail1 &&
	test "$(cat fail1.rc)" = 74 &&
	test_grep "rank-00001.safetensors: write: File too large" log-fail1/workerlog.1 &&
	test_grep "checkpoint of global step 100: another rank failed to write its part; .* nothing was published" \
		log-fail1/workerlog.0 &&
	test ! -e fail1 # made by the run, left empty: removed
'

test_expect_success PRLIMIT 'the same in the background: reported at the end, nothing published' '
	fail_rank1 fail2 -o Engine.save_load.async_save=True &&
	test "$(cat fail2.rc)" = 74 &&
	test_grep "\[checkpoint\] global step 100, saving failed: background checkpoint: .*File too large" \
		log-fail2/workerlog.1 &&
	test_grep "\[checkpoint\] global step 100, saving failed: background checkpoint: .*another rank failed to write its part" \
		log-fail2/workerlog.0 &&
	test ! -e fail2 # made by the run, left empty: removed
'

test_expect_success 'a damaged part stops every rank of a resume; rank 0 names the file' '
	cp -r sync/step_00000003 dmg &&
	printf X | dd of=dmg/rank-00001.safetensors bs=1 seek=5000 conv=notrunc 2>/dev/null &&
	test_expect_code 65 train 2 log-dmg dmg-out 6 --sharding_parallel_degree 2 --sharding stage2 \
		-o Engine.save_load.ckpt_dir=dmg >/dev/null 2>&1 &&
	test_grep "cannot resume: dmg/rank-00001.safetensors: checksum .* corrupted" log-dmg/workerlog.0 &&
	test_grep "cannot resume: dmg: rank 0 found the checkpoint damaged" log-dmg/workerlog.1 &&
	! test -e dmg-out/latest
'

test_expect_success 'an existing complete checkpoint is not overwritten: a run that would save over it stops before training' '
	train 2 log-e1 e 4 -o Distributed.dp_degree=2 -o Engine.save_load.save_steps=2 >/dev/null 2>&1 &&
	cp -r e/step_00000004 keep &&
	test_expect_code 74 train 2 log-e2 e 4 -o Distributed.dp_degree=2 -o Engine.save_load.save_steps=2 \
		-o Engine.save_load.ckpt_dir=e/step_00000002 >/dev/null 2>&1 &&
	test_grep "error: Engine.save_load.output_dir: this run goes on from global step 2 and saves global step 4, where a failed save stops it \(Engine.save_load.on_save_error: stop\): e/step_00000004: a complete checkpoint already exists; not overwriting it; move it out of e to save global step 4 there" log-e2/workerlog.0 &&
	test_grep "e: rank 0 found a step directory where this run saves; its worker log says which" log-e2/workerlog.1 &&
	! grep -q " - global step 3," log-e2/workerlog.0 &&
	same_files keep e/step_00000004
'

test_expect_success 'with on_save_error continue the run trains past it; the save of its step fails on every rank' '
	train 2 log-e3 e 6 -o Distributed.dp_degree=2 -o Engine.save_load.save_steps=2 \
		-o Engine.save_load.on_save_error=continue -o Engine.save_load.ckpt_dir=e/step_00000002 >/dev/null 2>&1 &&
	test_grep "\[checkpoint\] global step 4, saving failed: e/step_00000004: a complete checkpoint already exists; not overwriting it" log-e3/workerlog.0 &&
	test_grep "\[checkpoint\] global step 4, saving failed: checkpoint of global step 4: another rank failed to prepare the directory" log-e3/workerlog.1 &&
	same_files keep e/step_00000004 &&
	test "$(cat e/latest)" = step_00000006
'

test_done
