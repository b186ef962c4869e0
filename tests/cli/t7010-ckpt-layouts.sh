#!/bin/sh
# Distributed checkpoints across layouts: each rank writes only what it
# owns (every element once across the job), and a checkpoint of one layout
# resumes in another with the losses of the unbroken single-process run
# (relative 1e-5, as t4020 compares layouts): single -> dp2 x sharding2
# stage 3, sharding4 stage 2 -> single, and 4 ranks -> 2 ranks.
. "$(dirname "$0")/test-lib.sh"

common="-o Data.Train.dataset.input_dir=data/lic -o Data.Train.dataset.split=15,2,0 \
	-o Global.micro_batch_size=1 -o Engine.eval_freq=0 -o Optimizer.lr.max_lr=2e-3 \
	-o Optimizer.lr.decay_steps=150 -o Optimizer.lr.warmup_steps=2 -o Model.hidden_dropout_prob=0.1 \
	-o Model.attention_probs_dropout_prob=0.1 -o Engine.save_load.save_steps=5"

# run NPROC LOGDIR OUTDIR STEPS [flags...]
run () {
	n=$1 l=$2 o=$3 s=$4
	shift 4
	if [ "$n" = 1 ]; then
		mkdir -p "$l" &&
		gpt-train -c "$GPT_ROOT/configs/tiny_cpu_bytes.yaml" $common \
			-o Engine.save_load.output_dir="$o" -o Engine.max_steps="$s" "$@" >"$l/workerlog.0" 2>&1
	else
		gpt-launch --nproc-per-node "$n" --log-dir "$l" -- \
			gpt-train -c "$GPT_ROOT/configs/tiny_cpu_bytes.yaml" $common \
			-o Engine.save_load.output_dir="$o" -o Engine.max_steps="$s" "$@" >/dev/null 2>&1
	fi
}

losses () {
	sed -n 's/.* - global step \([0-9]*\), epoch.*loss: \([0-9.e+-]*\),.*/\1 \2/p' "$1"
}

# the losses of steps 6..10 in log $1 against the unbroken run's
continues () {
	losses ref/workerlog.0 | awk '$1 > 5' >want &&
	losses "$1" >got &&
	test_line_count = 5 want && test_line_count = 5 got &&
	paste want got | awk '{ d = $2 - $4; if (d < 0) d = -d; r = d / $2;
		if ($1 != $3 || r > 1e-5) { print "step " $1 ": " $2 " vs " $4 " (rel " r ")"; bad = 1 } }
		END { exit bad }'
}

# the data bytes of every rank file add up to weights + two moments, fp32:
# each element was written exactly once
written_once () {
	/usr/bin/python3 -c "
import glob, json, struct, sys
d = sys.argv[1]
idx = json.load(open(d + \"/index.json\"))
want = 0
for name, t in idx[\"tensors\"].items():
    n = 1
    for s in t[\"shape\"]: n *= s
    want += 4 * n
got = 0
for f in glob.glob(d + \"/rank-*.safetensors\"):
    b = open(f, \"rb\").read(); h = struct.unpack(\"<Q\", b[:8])[0]
    got += len(b) - 8 - h
print(\"%s: %d files, %d data bytes, %d expected\" % (d, len(glob.glob(d + \"/rank-*.safetensors\")), got, want))
assert got == want and len(idx[\"tensors\"]) == 84
" "$1"
}

test_expect_success 'set up: data and the unbroken single-process run' '
	mkdir data &&
	gpt-preprocess -t bytes -o data/lic /usr/share/common-licenses/* &&
	run 1 ref ref 10 &&
	test -f ref/step_00000005/index.json && test -f ref/step_00000010/index.json &&
	written_once ref/step_00000005
'

test_expect_success 'single -> dp2 x sharding2 stage 3: the losses go on as unbroken' '
	run 4 a-log a 10 -o Engine.save_load.ckpt_dir=ref/step_00000005 \
		--sharding_parallel_degree 2 --sharding stage3 -o Distributed.dp_degree=2 &&
	test_grep "resumed from ref/step_00000005 at global step 5" a-log/workerlog.3 &&
	continues a-log/workerlog.0 &&
	written_once a/step_00000010 &&
	ls a/step_00000010/rank-*.safetensors >files &&
	test_line_count = 2 files &&
	test-tool ckpt-diff ref/step_00000010 a/step_00000010 >diff && cat diff &&
	awk "{ exit !(\$2 <= 1e-5) }" diff
'

test_expect_success 'sharding4 stage 2 -> single' '
	run 4 b1-log b 5 --sharding_parallel_degree 4 --sharding stage2 &&
	ls b/step_00000005/rank-*.safetensors >files &&
	test_line_count = 4 files &&
	written_once b/step_00000005 &&
	grep -c "\"file\": \"rank-0000[0-3]" b/step_00000005/index.json >pieces &&
	test "$(cat pieces)" -gt 84 &&
	run 1 b2-log b 10 &&
	test_grep "resumed from b/step_00000005 at global step 5" b2-log/workerlog.0 &&
	continues b2-log/workerlog.0
'

test_expect_success 'world size 4 -> 2 (dp2 x sharding2 stage 1 -> sharding2 stage 2)' '
	run 4 c1-log c 5 --sharding_parallel_degree 2 --sharding stage1 -o Distributed.dp_degree=2 &&
	run 2 c2-log c 10 --sharding_parallel_degree 2 --sharding stage2 &&
	test_grep "resumed from c/step_00000005 at global step 5" c2-log/workerlog.1 &&
	continues c2-log/workerlog.0 &&
	lay () {
		/usr/bin/python3 -c "import json, sys; l = json.load(open(sys.argv[1]))[\"layout\"]
print(l[\"world_size\"], l[\"dp\"], l[\"sharding\"], l[\"sharding_stage\"])" "$1"
	} &&
	lay c/step_00000005/state.json >got && echo "4 2 2 1" >want && test_cmp want got &&
	lay c/step_00000010/state.json >got && echo "2 1 2 2" >want && test_cmp want got
'

test_expect_success 'a one-writer checkpoint of the earlier format (no "ranks" in index.json) loads in dp2' '
	cp -r ref/step_00000005 old &&
	/usr/bin/python3 -c "
import json
idx = json.load(open(\"old/index.json\")); idx.pop(\"ranks\")
json.dump(idx, open(\"old/index.json\", \"w\"))
" &&
	! grep -q ranks old/index.json &&
	run 2 d-log d 10 -o Engine.save_load.ckpt_dir=old -o Distributed.dp_degree=2 &&
	continues d-log/workerlog.0
'

test_done
