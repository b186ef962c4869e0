#!/bin/sh
# Checkpoints across tensor and pipeline layouts: a run saved in one layout
# resumes in another and continues as the unbroken single-process run does
# (losses relative 1e-5, final weights absolute 2e-5: 1% of a step at the
# peak learning rate, 2e-3, for the layouts' other orders of summation;
# with the dropout masks of 2026-11-27 two layouts came to 1.03e-5 and
# 1.1e-5 in h.2.attn.proj.weight, where the earlier masks stayed under
# 1e-5), float16 with its loss scale too, and gpt-ckpt-merge --to-layout
# cuts a checkpoint for a tp/pp layout that then resumes (given the new
# degrees as flags, or from the copy's own config.yaml).
. "$(dirname "$0")/test-lib.sh"

args="-o Data.Train.dataset.input_dir=data/lic -o Data.Eval.dataset.input_dir=data/lic \
	-o Data.Train.dataset.split=15,2,0 -o Data.Eval.dataset.split=15,2,0 \
	-o Global.micro_batch_size=1 -o Engine.eval_freq=0 -o Optimizer.lr.max_lr=2e-3 \
	-o Optimizer.lr.decay_steps=150 -o Optimizer.lr.warmup_steps=2 -o Model.num_layers=8 \
	-o Model.hidden_dropout_prob=0.1 -o Model.attention_probs_dropout_prob=0.1 \
	-o Engine.save_load.save_steps=4 -o Engine.save_load.save_epoch=0"

losses () {
	sed -n 's/.* - global step \([0-9]*\), epoch.*loss: \([0-9.e+-]*\),.*/\1 \2/p' "$1"
}

# the steps after the resume agree with the unbroken run's
continues () { # unbroken-log resumed-log
	losses "$1" | awk '$1 > 4' >l1 && losses "$2" >l2 &&
	test_line_count = 4 l1 && test_line_count = 4 l2 &&
	paste l1 l2 | awk '{ d = $2 - $4; if (d < 0) d = -d; r = d / $2;
		if ($1 != $3 || r > 1e-5) { print "step " $1 ": " $2 " vs " $4 " (rel " r ")"; bad = 1 } }
		END { exit bad }'
}

run () { # nproc out-dir steps flags...
	n=$1 out=$2 steps=$3
	shift 3
	if test "$n" = 1; then
		gpt-train -c "$GPT_ROOT/configs/tiny_cpu_bytes.yaml" $args -o Engine.max_steps=$steps \
			-o Engine.save_load.output_dir=$out "$@" >$out.log 2>&1 && cp $out.log $out.w0
	else
		gpt-launch --nproc-per-node $n --log-dir log-$out -- \
			gpt-train -c "$GPT_ROOT/configs/tiny_cpu_bytes.yaml" $args -o Engine.max_steps=$steps \
			-o Engine.save_load.output_dir=$out "$@" >$out.log 2>&1 && cp log-$out/workerlog.0 $out.w0
	fi
}

test_expect_success 'set up: data and the unbroken single-process run of 8 steps' '
	mkdir data &&
	gpt-preprocess -t bytes -o data/lic /usr/share/common-licenses/* &&
	run 1 unbroken 8
'

# from-name from-nproc from-flags -- to-name to-nproc to-flags
across () {
	test_expect_success "saved by $1 ($2 ranks), resumed as $4 ($5 ranks)" '
		run '$2' a-'$1' 4 '"$3"' &&
		run '$5' b-'$1'-'$4' 8 -o Engine.save_load.ckpt_dir=a-'$1'/step_00000004 '"$6"' &&
		continues unbroken.log b-'$1'-'$4'.w0 &&
		test-tool ckpt-diff unbroken/step_00000008 b-'$1'-'$4'/step_00000008 >diff &&
		sort -k2 -g diff | tail -1 &&
		awk "{ exit !(\$2 <= 2e-5) }" diff
	'
}

across single 1 "" dp2-mp2-pp2 8 "--tensor_parallel_degree 2 --pipeline_parallel_degree 2 -o Distributed.dp_degree=2"
across mp2-pp2 4 "--tensor_parallel_degree 2 --pipeline_parallel_degree 2" \
	sharding4-stage3 4 "--sharding_parallel_degree 4 --sharding stage3"
across pp4-virtual2 4 "--pipeline_parallel_degree 4 -o Distributed.virtual_pp_degree=2" \
	mp4 4 "--tensor_parallel_degree 4"
across dp2-mp2-pp2-sp 8 "--tensor_parallel_degree 2 --pipeline_parallel_degree 2 -o Distributed.dp_degree=2 -o Model.sequence_parallel=True" \
	mp2 2 "--tensor_parallel_degree 2"

# float16: saved by mp2 x pp2 between two overflows (the loss scale's
# hysteresis half way: bad_steps 1), resumed as sharding2 stage 2 with
# another micro-batch split of the same global batch (2 x 2 for 1 x 8): the
# next overflow halves the scale there as in the unbroken one-process run,
# and the loss scale, the learning rate (held back by the skipped steps),
# the losses and the state of the last checkpoint go on as that run's
test_expect_success 'fp16: mp2 x pp2 -> sharding2 stage 2, micro 1 -> 2: loss scale, hysteresis and schedule go on' '
	F16="-o Engine.mix_precision.enable=True -o Engine.mix_precision.dtype=float16 -o Engine.mix_precision.scale_loss=3e5" &&
	run 1 f16 8 $F16 &&
	run 4 f16a 3 $F16 -o Engine.save_load.save_steps=3 --tensor_parallel_degree 2 --pipeline_parallel_degree 2 &&
	test_grep "\"bad_steps\": 1," f16a/step_00000003/state.json &&
	run 2 f16b 8 $F16 -o Engine.save_load.ckpt_dir=f16a/step_00000003 --sharding_parallel_degree 2 \
		--sharding stage2 -o Global.micro_batch_size=2 &&
	test_grep "\[amp\] global step 4, found inf/nan in gradients: skipped the update, loss scale 150000 -> 75000" f16b.w0 &&
	fields () { sed -n "s/.* - global step \([0-9]*\), .*loss: \([0-9.]*\),.*loss_scale: \([0-9.]*\), learning rate: \(.*\)/\1 \2 \3 \4/p" "$1"; } &&
	fields f16.w0 | awk "\$1 > 3" >want && fields f16b.w0 >got &&
	test_line_count = 5 want && cat got &&
	paste want got | awk "{ d = (\$2 - \$6) / \$2; if (d < 0) d = -d;
		if (\$1 != \$5 || \$3 != \$7 || \$4 != \$8 || d > 1e-4) bad = 1 } END { exit bad || NR != 5 }" &&
	for k in lr_steps optimizer_steps consumed_samples loss_scale data; do
		python3 -c "import json, sys; a, b = (json.load(open(d + \"/step_00000008/state.json\")) for d in sys.argv[2:])
sys.exit(a[sys.argv[1]] != b[sys.argv[1]])" $k f16 f16b || { echo "state.json: $k differs"; return 1; }
	done
'

test_expect_success 'gpt-ckpt-merge --to-layout cuts a single checkpoint for mp2 x pp2 x vpp2, which resumes' '
	gpt-ckpt-merge --to-layout mp=2,pp=2,vpp=2 unbroken/step_00000004 cut &&
	run 4 c-resumed 8 -o Engine.save_load.ckpt_dir=cut --tensor_parallel_degree 2 \
		--pipeline_parallel_degree 2 -o Distributed.virtual_pp_degree=2 &&
	continues unbroken.log c-resumed.w0
'

test_expect_success 'a --to-layout copy trains in its layout from its own config.yaml (pp2 x vpp2 x dp2)' '
	gpt-ckpt-merge --to-layout pp=2,vpp=2,dp=2 unbroken/step_00000004 own 2>err &&
	{ diff unbroken/step_00000004/config.yaml own/step_00000004/config.yaml >cdiff || :; } &&
	sed -n "s/^[<>] *\([a-z_ #]*\):* .*/\1/p" cdiff | sort -u >changed &&
	printf "%s\n" "# world size" accumulate_steps dp_degree local_batch_size output_dir pipeline_schedule \
		pp_degree virtual_pp_degree >want && test_cmp want changed &&
	test_grep "^    output_dir: \"own\"$" own/step_00000004/config.yaml &&
	test_grep "^  local_batch_size: 4$" own/step_00000004/config.yaml &&
	test_grep "^  accumulate_steps: 4$" own/step_00000004/config.yaml &&
	test_grep "^  pipeline_schedule: interleaved$" own/step_00000004/config.yaml &&
	gpt-launch --nproc-per-node 4 --log-dir log-own -- gpt-train -c own/step_00000004/config.yaml \
		-o Engine.max_steps=8 >own.log 2>&1 &&
	test_grep "resumed from own/step_00000004 at global step 4" log-own/workerlog.0 &&
	continues unbroken.log log-own/workerlog.0
'

test_expect_success 'a --to-layout copy without tensor parallelism turns sequence parallelism off' '
	test_grep "^  sequence_parallel: True$" a-dp2-mp2-pp2-sp/step_00000004/config.yaml &&
	gpt-ckpt-merge --to-layout dp=2 a-dp2-mp2-pp2-sp/step_00000004 nosp &&
	test_grep "^  sequence_parallel: False$" nosp/step_00000004/config.yaml &&
	test_grep "^  mp_degree: 1$" nosp/step_00000004/config.yaml &&
	gpt-train -c nosp/step_00000004/config.yaml --print-config -o Engine.save_load.output_dir=nosp \
		--world-size 2 >/dev/null
'

test_done
