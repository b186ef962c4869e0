#!/bin/sh
# Disk faults while saving a checkpoint: a full disk, an I/O error, a
# read-only directory, a file size limit. The save fails, the previous
# checkpoint and `latest` stay as they were, no temporary is left behind,
# the error is logged, and the run stops (Engine.save_load.on_save_error:
# stop, exit 74) or trains on (continue). A resume after the failure takes
# the previous checkpoint and gives the losses and weights of a run that
# never failed. Faults come from an LD_PRELOAD shim (lib-faultfs.sh), from
# the kernel's file size limit, and from a small tmpfs where mount works.
. "$(dirname "$0")/test-lib.sh"
. "$GPT_ROOT/tests/cli/lib-faultfs.sh"

test_expect_success 'set up: data, the fault shim and an unbroken reference run' '
	mkdir data &&
	gpt-preprocess -t bytes -o data/lic /usr/share/common-licenses/* &&
	build_faultfs &&
	cat >train <<-EOF &&
	#!/bin/sh
	exec gpt-train -c "$GPT_ROOT/configs/tiny_cpu_bytes.yaml" \
		-o Data.Train.dataset.input_dir="$PWD/data/lic" -o Data.Train.dataset.split=15,2,0 \
		-o Global.micro_batch_size=1 -o Engine.eval_freq=0 -o Engine.test_iters=0 \
		-o Optimizer.lr.decay_steps=100 -o Engine.max_steps=8 \
		-o Engine.save_load.save_steps=2 "\$@"
	EOF
	chmod +x train &&
	./train -o Engine.save_load.output_dir=ref >ref.log 2>&1 &&
	test "$(cat ref/latest)" = step_00000008
'

losses () {
	sed -n "s/.* - global step \([0-9]*\), epoch.*loss: \([0-9.e+-]*\),.*/\1 \2/p" "$1"
}

# same_from LOG FIRST: the losses of LOG equal the reference's from step FIRST on
same_from () {
	losses "$1" | awk -v f="$2" "\$1 >= f" >got &&
	losses ref.log | awk -v f="$2" "\$1 >= f" >want &&
	test_line_count -gt 0 want &&
	test_cmp want got
}

# same_weights DIR STEP: the checkpoint of STEP in DIR equals the reference's
same_weights () {
	test-tool ckpt-diff "ref/step_$(printf %08d $2)" "$1/step_$(printf %08d $2)" >diff &&
	cat diff &&
	awk "{ exit !(\$2 == 0) }" diff
}

# intact DIR STEP: latest names step STEP, which verifies; no temporary and
# no newer step directory is left in DIR
intact () {
	test "$(cat "$1/latest")" = "step_$(printf %08d $2)" &&
	gpt-ckpt-merge --verify "$1" >/dev/null &&
	ls -a "$1" >listing &&
	! grep "^\.step_\|^\.latest\|tmp" listing &&
	test "$(grep "^step_" listing | sort | tail -n 1)" = "step_$(printf %08d $2)"
}

test_expect_success 'a full disk while the weights are written: stop (74), step 2 and latest intact' '
	test_expect_code 74 with_faults FAULT_MATCH="*step_00000004*" FAULT_OPS=write \
		FAULT_AFTER=100000 -- ./train -o Engine.save_load.output_dir=full >full.log 2>&1 &&
	test_grep "\[   ERROR\] - \[checkpoint\] global step 4, saving failed: .*No space left on device; the last complete checkpoint \(full/step_00000002\) and .latest. are left as they were" full.log &&
	test_grep "^gpt-train: error: global step 4: the checkpoint could not be saved: .*; stopping \(Engine.save_load.on_save_error: stop\); the last complete checkpoint is full/step_00000002" full.log &&
	intact full 2
'

test_expect_success 'the resume after the failed save takes step 2 and continues the reference exactly' '
	./train -o Engine.save_load.output_dir=full >full2.log 2>&1 &&
	test_grep "resumed from full/step_00000002 at global step 2" full2.log &&
	same_from full2.log 3 &&
	same_weights full 8 &&
	intact full 8
'

fault_stops () { # name errno ops match
	test_expect_success "$1 while saving step 4: stop (74), step 2 and latest intact" '
		test_expect_code 74 with_faults FAULT_MATCH="'"$4"'" FAULT_OPS='"$3"' \
			FAULT_ERRNO='"$2"' -- ./train -o Engine.save_load.output_dir='"$3"' >'"$3"'.log 2>&1 &&
		test_grep "\[checkpoint\] global step 4, saving failed: .*$(errno_text '"$2"')" '"$3"'.log &&
		intact '"$3"' 2
	'
}

errno_text () {
	case $1 in
	EIO) echo "Input/output error" ;;
	EROFS) echo "Read-only file system" ;;
	EDQUOT) echo "Disk quota exceeded" ;;
	*) echo "No space left on device" ;;
	esac
}

fault_stops "an I/O error in fsync" EIO fsync "*step_00000004*"
fault_stops "a read-only file system at mkdir" EROFS mkdir "*/.step_00000004*"
fault_stops "no space to create a file" ENOSPC open "*step_00000004*"
fault_stops "a quota at the rename into place" EDQUOT rename "*step_00000004*"

test_expect_success '`latest` cannot be replaced: the complete step 4 is never resumed from, and is replaced' '
	test_expect_code 74 with_faults FAULT_MATCH="*latest*" FAULT_OPS=rename FAULT_SKIP=1 \
		-- ./train -o Engine.save_load.output_dir=lat >lat.log 2>&1 &&
	test_grep "\[checkpoint\] global step 4, saving failed: lat/latest: rename into place" lat.log &&
	test "$(cat lat/latest)" = step_00000002 &&
	test -f lat/step_00000004/index.json &&
	./train -o Engine.save_load.output_dir=lat >lat2.log 2>&1 &&
	test_grep "resumed from lat/step_00000002 at global step 2" lat2.log &&
	test_grep "lat/step_00000004: left by a save that failed before .latest. named it; removing it" lat2.log &&
	same_from lat2.log 3 &&
	same_weights lat 8 &&
	intact lat 8
'

test_expect_success 'on_save_error continue: logged, training goes on with the same losses, later saves land' '
	with_faults FAULT_MATCH="*step_00000004*" FAULT_OPS=fsync FAULT_ERRNO=EIO -- \
		./train -o Engine.save_load.output_dir=cont \
		-o Engine.save_load.on_save_error=continue >cont.log 2>&1 &&
	test_grep "\[checkpoint\] global step 4, saving failed: .*Input/output error" cont.log &&
	test_grep "training goes on without the checkpoint of global step 4 \(Engine.save_load.on_save_error: continue\)" cont.log &&
	test_grep "\[checkpoint\] global step 6, path: cont/step_00000006" cont.log &&
	test ! -e cont/step_00000004 &&
	same_from cont.log 1 &&
	same_weights cont 8 &&
	intact cont 8
'

test_expect_success 'continue: a failed last save still fails the run (74)' '
	test_expect_code 74 with_faults FAULT_MATCH="*step_00000008*" FAULT_OPS=write -- \
		./train -o Engine.save_load.output_dir=last \
		-o Engine.save_load.on_save_error=continue >last.log 2>&1 &&
	test_grep "global step 8: the checkpoint could not be saved: .*; stopping \(the run ends with this save\)" last.log &&
	intact last 6
'

test_expect_success 'two ranks: the failure on rank 0 stops both together, step 2 and latest intact' '
	code=0 &&
	with_faults FAULT_MATCH="*step_00000004*" FAULT_OPS=write FAULT_AFTER=100000 -- \
		gpt-launch --nproc-per-node 2 --log-dir wl -- ./train \
		-o Engine.save_load.output_dir=dp >dp.log 2>&1 || code=$? &&
	cat dp.log &&
	test "$code" != 0 &&
	test_grep "\[checkpoint\] global step 4, saving failed" wl/workerlog.0 &&
	test_grep "\[checkpoint\] global step 4, saving failed" wl/workerlog.1 &&
	! grep "global step 5, epoch" wl/workerlog.0 wl/workerlog.1 &&
	intact dp 2
'

test_expect_success 'two ranks with continue: both train on, the run ends with step 8 saved' '
	with_faults FAULT_MATCH="*step_00000004*" FAULT_OPS=write -- \
		gpt-launch --nproc-per-node 2 --log-dir wc -- ./train \
		-o Engine.save_load.output_dir=dpc -o Engine.save_load.on_save_error=continue >dpc.log 2>&1 &&
	test_grep "training goes on without the checkpoint of global step 4" wc/workerlog.1 &&
	test ! -e dpc/step_00000004 &&
	intact dpc 8
'

test_expect_success 'async_save: a failed background save is logged; continue goes on, stop stops' '
	with_faults FAULT_MATCH="*step_00000004*rank-00001*" FAULT_OPS=write -- \
		gpt-launch --nproc-per-node 2 --log-dir wa -- ./train -o Engine.save_load.async_save=True \
		-o Engine.save_load.output_dir=asc -o Engine.save_load.on_save_error=continue >asc.log 2>&1 &&
	test_grep "\[checkpoint\] global step 4, saving failed: background checkpoint: .*No space left on device" wa/workerlog.1 &&
	test_grep "\[checkpoint\] global step 4, saving failed: background checkpoint: .*another rank failed" wa/workerlog.0 &&
	test_grep "training goes on without the checkpoint of global step 4" wa/workerlog.0 &&
	test ! -e asc/step_00000004 &&
	intact asc 8 &&
	code=0 &&
	with_faults FAULT_MATCH="*step_00000004*rank-00001*" FAULT_OPS=write -- \
		gpt-launch --nproc-per-node 2 --log-dir ws -- ./train -o Engine.save_load.async_save=True \
		-o Engine.save_load.output_dir=ass >ass.log 2>&1 || code=$? &&
	test "$code" = 74 &&
	test_grep "\[checkpoint\] global step 4, saving failed: background checkpoint" ws/workerlog.0 &&
	test_grep "global step 4: the checkpoint could not be saved: .*; stopping \(Engine.save_load.on_save_error: stop\); the last complete checkpoint is ass/step_00000002" ws/workerlog.0 &&
	intact ass 2
'

test_expect_success 'the kernel file size limit (EFBIG) at the first save: stop, nothing left behind' '
	code=0 &&
	(ulimit -f 400 && trap "" XFSZ && exec ./train -o Engine.save_load.output_dir=fsz) >fsz.log 2>&1 ||
		code=$? &&
	test "$code" = 74 &&
	test_grep "\[checkpoint\] global step 2, saving failed: .*File too large; there is no complete checkpoint yet" fsz.log &&
	test ! -e fsz/latest &&
	test -z "$(ls -A fsz)"
'

test_expect_success 'the same limit with SIGXFSZ at its default: an error (74), not death by the signal' '
	code=0 &&
	(ulimit -f 400 && trap - XFSZ && exec ./train -o Engine.save_load.output_dir=fsz2) >fsz2.log 2>&1 ||
		code=$? &&
	test "$code" = 74 &&
	test_grep "^gpt-train: error: global step 2: the checkpoint could not be saved: fsz2/\.step_00000002\.tmp/rank-00000\.safetensors: write: File too large" fsz2.log &&
	test ! -e fsz2/latest &&
	test -z "$(ls -A fsz2)"
'

test_expect_success 'a standard output that takes no line (/dev/full): said once, the training goes on, then 74' '
	code=0 &&
	./train -o Engine.save_load.output_dir=full >/dev/full 2>full.err || code=$? &&
	cat full.err &&
	test "$code" = 74 &&
	grep "standard output" full.err >said &&
	test_line_count = 2 said &&
	test_grep "^\[.*\] \[ WARNING\] - standard output: No space left on device: the log lines it cannot take are lost; the run goes on$" full.err &&
	test_grep "^gpt-train: error: standard output: No space left on device: [0-9]+ log lines could not be written \(the training itself did not fail\)$" full.err &&
	intact full 8 &&
	same_weights full 8
'

unshare -rm sh -c "mkdir -p \"$GPT_TRASH/probe\" && mount -t tmpfs -o size=64k tmpfs \"$GPT_TRASH/probe\"" \
	2>/dev/null && test_set_prereq TMPFS

test_expect_success TMPFS 'a real full tmpfs, then read-only: stop each time, latest intact, a resume elsewhere continues' '
	mkdir mnt &&
	unshare -rm sh -c "
		mount -t tmpfs -o size=2600k tmpfs mnt || exit 1
		code=0; ./train -o Engine.save_load.output_dir=mnt/out >tfull.log 2>&1 || code=\$?
		echo \$code >tfull.code
		cp -r mnt/out tout1
		mount -o remount,bind,ro mnt || exit 1
		code=0; ./train -o Engine.save_load.output_dir=mnt/out >tro.log 2>&1 || code=\$?
		echo \$code >tro.code
		cp -r mnt/out tout2
	" &&
	test "$(cat tfull.code)" = 74 &&
	test_grep "\[checkpoint\] global step 4, saving failed: .*No space left on device" tfull.log &&
	intact tout1 2 &&
	test "$(cat tro.code)" = 74 &&
	test_grep "resumed from mnt/out/step_00000002 at global step 2" tro.log &&
	test_grep "\[checkpoint\] global step 4, saving failed: .*Read-only file system" tro.log &&
	intact tout2 2 &&
	./train -o Engine.save_load.output_dir=tout2 >tres.log 2>&1 &&
	same_from tres.log 3 &&
	same_weights tout2 8
'

test_expect_success TMPFS 'a log file on a full disk: the lines come back once there is room, and the lost ones are counted' '
	mkdir lmnt &&
	cat >logfull.sh <<-\EOF &&
	mount -t tmpfs -o size=64k tmpfs lmnt || exit 1
	dd if=/dev/zero of=lmnt/fill bs=4k count=64 2>/dev/null
	./train -o Engine.save_load.output_dir=lfull >lmnt/train.log 2>lfull.err &
	pid=$!
	n=0
	until grep -q "standard output: No space left" lfull.err; do
		n=$((n + 1)); [ $n -lt 600 ] || break; sleep 0.05
	done
	rm lmnt/fill
	code=0; wait $pid || code=$?
	echo $code >lfull.code
	cp lmnt/train.log lfull.log
	EOF
	unshare -rm sh logfull.sh &&
	cat lfull.err &&
	test "$(cat lfull.code)" = 74 &&
	test_grep "\] - global step 8, epoch" lfull.log &&
	test_grep "\[checkpoint\] global step 8, path: lfull/step_00000008" lfull.log &&
	lost=$(sed -n "s/^gpt-train: error: standard output: No space left on device: \([0-9]*\) log lines* could not be written.*/\1/p" lfull.err) &&
	test "$lost" -ge 1 &&
	intact lfull 8
'

test_expect_success NOT_ROOT 'a directory made read-only after step 2: stop, step 2 and latest intact' '
	./train -o Engine.save_load.output_dir=ro -o Engine.max_steps=2 >ro1.log 2>&1 &&
	chmod a-w ro &&
	code=0 && ./train -o Engine.save_load.output_dir=ro >ro2.log 2>&1 || code=$? &&
	chmod u+w ro &&
	test "$code" = 74 &&
	test_grep "\[checkpoint\] global step 4, saving failed: .*Permission denied" ro2.log &&
	intact ro 2
'

test_done
