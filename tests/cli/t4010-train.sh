#!/bin/sh
# gpt-train on one process: it learns, resumes bit for bit, skips fp16
# overflows, stops on NaN, and refuses bad data, bad checkpoints and
# checkpoints of another model.
. "$(dirname "$0")/test-lib.sh"

train () {
	gpt-train -c "$GPT_ROOT/configs/tiny_cpu_bytes.yaml" \
		-o Data.Train.dataset.input_dir=data/lic -o Data.Eval.dataset.input_dir=data/lic \
		-o Data.Train.dataset.split=15,2,0 -o Data.Eval.dataset.split=15,2,0 \
		-o Global.micro_batch_size=8 -o Engine.eval_iters=2 -o Optimizer.lr.max_lr=2e-3 \
		-o Optimizer.lr.decay_steps=150 -o Optimizer.lr.warmup_rate=0.02 "$@"
}

# the loss field of each step line: "STEP LOSS LR"
losses () {
	sed -n 's/.* - global step \([0-9]*\), epoch.*loss: \([0-9.e+-]*\),.*learning rate: \(.*\)$/\1 \2 \3/p' "$1"
}

# the learning rate of each step line: "STEP LR"
lrs () { sed -n "s/.* - global step \([0-9]*\),.*learning rate: \(.*\)$/\1 \2/p" "$1"; }

test_expect_success 'set up: the licence texts as a byte-level dataset' '
	mkdir data &&
	gpt-preprocess -t bytes -o data/lic /usr/share/common-licenses/* &&
	gpt-preprocess --info data/lic >info &&
	test_grep "^documents: [0-9]+" info
'

test_expect_success 'it learns: training and validation loss fall far below ln(257) = 5.55' '
	train -o Engine.max_steps=150 -o Engine.logging_freq=1 -o Engine.eval_freq=150 \
		-o Engine.save_load.save_steps=0 >log 2>&1 &&
	losses log >l &&
	first=$(head -n 1 l | cut -d" " -f2) && last=$(tail -n 1 l | cut -d" " -f2) &&
	eval_loss=$(sed -n "s/.*\[eval\] global step 150,.*loss: \([0-9.]*\),.*/\1/p" log) &&
	echo "first $first last $last eval $eval_loss" &&
	test "$(echo "$first > 5.0 && $last < 3.2 && $eval_loss < 3.3" | bc)" = 1
'

test_expect_success 'log lines are FleetX lines with true figures' '
	test_grep "\[    INFO\] - global step 10, epoch: 0, batch: 9, loss: [0-9.]+, avg_reader_cost: [0-9.]+ sec, avg_batch_cost: [0-9.]+ sec, speed: [0-9.]+ step/s, ips_total: [0-9]+ tokens/s, ips: [0-9]+ tokens/s, learning rate: [0-9.e+-]+$" log &&
	! grep -q "ips_total: 0 tokens/s" log
'

test_expect_success 'an unbroken run of 20 steps, saving every 10' '
	train -o Engine.max_steps=20 -o Engine.save_load.save_steps=10 -o Engine.eval_freq=0 \
		-o Engine.save_load.output_dir=full -o Model.hidden_dropout_prob=0.1 \
		-o Model.attention_probs_dropout_prob=0.1 >full.log 2>&1 &&
	test "$(cat full/latest)" = step_00000020 &&
	test -f full/step_00000010/index.json
'

test_expect_success 'stop at 10 and resume to 20: the same losses and the same bytes' '
	train -o Engine.max_steps=10 -o Engine.save_load.save_steps=10 -o Engine.eval_freq=0 \
		-o Engine.save_load.output_dir=part -o Model.hidden_dropout_prob=0.1 \
		-o Model.attention_probs_dropout_prob=0.1 >part1.log 2>&1 &&
	train -o Engine.max_steps=20 -o Engine.save_load.save_steps=10 -o Engine.eval_freq=0 \
		-o Engine.save_load.output_dir=part -o Model.hidden_dropout_prob=0.1 \
		-o Model.attention_probs_dropout_prob=0.1 >part2.log 2>&1 &&
	test_grep "resumed from part/step_00000010 at global step 10" part2.log &&
	losses full.log >a && { losses part1.log; losses part2.log; } >b &&
	test_cmp a b &&
	cmp full/step_00000020/rank-00000.safetensors part/step_00000020/rank-00000.safetensors
'

test_expect_success 'a restarted run started from ckpt_dir resumes from its own latest, bit for bit' '
	D="-o Model.hidden_dropout_prob=0.1 -o Model.attention_probs_dropout_prob=0.1" &&
	train $D -o Engine.max_steps=20 -o Engine.save_load.save_steps=5 -o Engine.eval_freq=0 \
		-o Engine.save_load.ckpt_dir=full/step_00000010 -o Engine.save_load.output_dir=ft >ft1.log 2>&1 &&
	train $D -o Engine.max_steps=15 -o Engine.save_load.save_steps=5 -o Engine.eval_freq=0 \
		-o Engine.save_load.ckpt_dir=full/step_00000010 -o Engine.save_load.output_dir=ft2 >ft2a.log 2>&1 &&
	train $D -o Engine.max_steps=20 -o Engine.save_load.save_steps=5 -o Engine.eval_freq=0 \
		-o Engine.save_load.ckpt_dir=full/step_00000010 -o Engine.save_load.output_dir=ft2 >ft2b.log 2>&1 &&
	test_grep "ft2/latest names a checkpoint of this run: resuming from it, not from Engine.save_load.ckpt_dir full/step_00000010, which starts a run whose output_dir holds none; to start from full/step_00000010 again, give a new output_dir" ft2b.log &&
	test_grep "resumed from ft2/step_00000015 at global step 15" ft2b.log &&
	losses ft1.log >a && { losses ft2a.log; losses ft2b.log; } >b &&
	test_cmp a b &&
	cmp ft/step_00000020/rank-00000.safetensors ft2/step_00000020/rank-00000.safetensors &&
	test_expect_code 65 train -o Engine.max_steps=20 -o Engine.save_load.ckpt_dir=ft2/step_00000015 \
		-o Model.hidden_size=32 -o Model.ffn_hidden_size=128 -o Engine.save_load.output_dir=ft2 >own 2>&1 &&
	test_grep "cannot resume: ft2/step_00000015: its model has Model.hidden_size 64" own
'

test_expect_success 'a resume with another global batch says where its data goes on' '
	train -o Engine.max_steps=11 -o Engine.eval_freq=0 -o Global.global_batch_size=16 \
		-o Engine.save_load.ckpt_dir=full/step_00000010 -o Engine.save_load.output_dir=gb16 >gb16.log 2>&1 &&
	test_grep "WARNING\] - full/step_00000010 was saved by a run of global batch 8 x 64 tokens, which stopped at sample 80; this run.s is 16 x 64, so its data goes on at sample 160 \(global step 10 x its global batch\), not where that run stopped; keep Global.global_batch_size and max_seq_len to go on with the same data" gb16.log &&
	! grep -q "was saved by a run of global batch" part2.log
'

test_expect_success 'a resume with another Global.seed says that the data order and dropout change' '
	train -o Engine.max_steps=11 -o Engine.eval_freq=0 -o Global.seed=7 \
		-o Engine.save_load.ckpt_dir=full/step_00000010 -o Engine.save_load.output_dir=seed7 >seed7.log 2>&1 &&
	test_grep "WARNING\] - full/step_00000010 was saved by a run of Global.seed 1024; this run.s is 7, so from global step 11 on its data order and dropout are not that run.s .*; keep Global.seed 1024 to go on as that run would have" seed7.log &&
	! grep -q "was saved by a run of Global.seed" part2.log gb16.log
'

test_expect_success 'a resume over other training data says that its samples are not the saved run.s' '
	train -o Engine.max_steps=11 -o Engine.eval_freq=0 -o Data.Train.dataset.split=14,3,0 \
		-o Data.Eval.dataset.split=14,3,0 \
		-o Engine.save_load.ckpt_dir=full/step_00000010 -o Engine.save_load.output_dir=split14 >split14.log 2>&1 &&
	test_grep "WARNING\] - full/step_00000010 was saved by a run whose training split held [0-9]+ samples an epoch; this run.s holds [0-9]+ \(data/lic, split .14,3,0.\), so from global step 11 on its samples are not those that run would have read; keep Data.Train.dataset.input_dir, its files and split to go on with the same data" split14.log &&
	! grep -q "samples an epoch" part2.log gb16.log seed7.log ft2b.log
'

test_expect_success 'a resume with another learning-rate schedule says that the rate jumps' '
	train -o Engine.max_steps=11 -o Engine.eval_freq=0 -o Optimizer.lr.decay_steps=300 \
		-o Engine.save_load.ckpt_dir=full/step_00000010 -o Engine.save_load.output_dir=lr300 >lr300.log 2>&1 &&
	test_grep "WARNING\] - full/step_00000010 was saved at a learning rate of 0.00198939 \(global step 10\); this run.s Optimizer.lr settings give 0.00199913 there, so the rate jumps from global step 11 on; keep Optimizer.lr \(name, max_lr, min_lr, decay_steps, the warm-up\) as that run had them" lr300.log &&
	! grep -q "was saved at a learning rate" part2.log gb16.log seed7.log split14.log
'

test_expect_success 'a resume with no step left to train says so and ends (0), naming the checkpoint and max_steps' '
	cp -r full done &&
	train -o Engine.max_steps=20 -o Engine.eval_freq=0 -o Engine.save_load.output_dir=done >done.log 2>&1 &&
	test_grep "INFO\] - nothing left to train: done/step_00000020 is at global step 20 and Engine.max_steps is 20; raise it to train on" done.log &&
	train -o Engine.max_steps=15 -o Engine.eval_freq=0 -o Engine.save_load.output_dir=done >done15.log 2>&1 &&
	test_grep "WARNING\] - nothing left to train: done/step_00000020 is at global step 20 and Engine.max_steps is 15" done15.log &&
	! grep -q " - global step " done.log done15.log &&
	test "$(cat done/latest)" = step_00000020 &&
	! grep -q "nothing left to train" part2.log full.log
'

test_expect_success 'a corrupted checkpoint is refused with the file named' '
	cp -r part/step_00000010 bad &&
	printf X | dd of=bad/rank-00000.safetensors bs=1 seek=5000 conv=notrunc 2>/dev/null &&
	test_expect_code 65 train -o Engine.max_steps=20 -o Engine.save_load.ckpt_dir=bad \
		-o Engine.save_load.output_dir=never >out 2>err &&
	test_grep "error: cannot resume: bad/rank-00000.safetensors: checksum .* corrupted" err &&
	test ! -e never/latest
'

test_expect_success 'a damaged or missing latest checkpoint: the error names the one before it, which then resumes' '
	cp -r part dmg && truncate -s 1000 dmg/step_00000020/rank-00000.safetensors &&
	test_expect_code 65 train -o Engine.max_steps=22 -o Engine.eval_freq=0 \
		-o Engine.save_load.output_dir=dmg >out 2>err &&
	test_grep "error: cannot resume: dmg/step_00000020/rank-00000.safetensors: size 1000, index.json says [0-9]+ \(truncated or replaced\); to resume from the newest checkpoint before it, move dmg/step_00000020 out of the way \(a save of its step does not replace it\) and give -o Engine.save_load.ckpt_dir=dmg/step_00000010$" err &&
	mv dmg/step_00000020 dmg-step20 &&
	test_expect_code 65 train -o Engine.max_steps=22 -o Engine.eval_freq=0 \
		-o Engine.save_load.output_dir=dmg >out 2>err &&
	test_grep "not a complete checkpoint \(no index.json\); refusing to read it: name a complete step directory of dmg instead; to resume from the newest checkpoint before it, give -o Engine.save_load.ckpt_dir=dmg/step_00000010$" err &&
	train -o Engine.max_steps=20 -o Engine.eval_freq=0 -o Engine.save_load.output_dir=dmg \
		-o Engine.save_load.ckpt_dir=dmg/step_00000010 >dmg.log 2>&1 &&
	test_grep "resumed from dmg/step_00000010 at global step 10" dmg.log &&
	test "$(cat dmg/latest)" = step_00000020 &&
	cp -r part dmg2 && : >dmg2/latest &&
	test_expect_code 65 train -o Engine.max_steps=22 -o Engine.save_load.output_dir=dmg2 >out 2>err &&
	test_grep "dmg2/latest: expected a step directory name like step_00000100, found .*; to resume from the newest checkpoint, give -o Engine.save_load.ckpt_dir=dmg2/step_00000020$" err &&
	cp -r part dmg3 && truncate -s 1000 dmg3/step_00000020/rank-00000.safetensors &&
	test_expect_code 65 train -o Engine.max_steps=22 -o Engine.save_load.ckpt_dir=dmg3/step_00000020 \
		-o Engine.save_load.output_dir=fresh >out 2>err &&
	test_grep "\(truncated or replaced\); to resume from the newest checkpoint before it, give -o Engine.save_load.ckpt_dir=dmg3/step_00000010$" err
'

test_expect_success 'a step directory without index.json where a save goes: refused before training, naming it' '
	cp -r part inc2 && rm inc2/step_00000020/index.json &&
	test_expect_code 74 train -o Engine.max_steps=20 -o Engine.eval_freq=0 -o Engine.save_load.output_dir=inc2 \
		-o Engine.save_load.ckpt_dir=inc2/step_00000010 >out 2>err &&
	test_grep "error: Engine.save_load.output_dir: this run goes on from global step 10 and saves global step 20, where a failed save stops it \(Engine.save_load.on_save_error: stop\): inc2/step_00000020: exists but is not a complete checkpoint \(no index.json; a save never leaves one\); move it out of the way to save global step 20 there$" err &&
	! grep -q " - global step 11," out &&
	test ! -e inc2/.step_00000020.tmp && test "$(cat inc2/latest)" = step_00000020 &&
	train -o Engine.max_steps=21 -o Engine.eval_freq=0 -o Engine.save_load.output_dir=inc2 \
		-o Engine.save_load.ckpt_dir=inc2/step_00000010 -o Engine.save_load.on_save_error=continue >out 2>err &&
	test_grep "global step 20, saving failed: inc2/step_00000020: exists but is not a complete checkpoint .*; .latest. is left as it was, naming inc2/step_00000020, which is not a complete checkpoint$" out &&
	test "$(cat inc2/latest)" = step_00000021
'

test_expect_success 'a checkpoint of another model is refused, even where the shapes fit' '
	for o in Model.num_layers=1 Model.num_attention_heads=2 Model.vocab_size=300; do
		test_expect_code 65 train -o Engine.max_steps=20 -o Engine.save_load.ckpt_dir=part/step_00000010 \
			-o Engine.save_load.output_dir=other -o $o >out 2>err &&
		test_grep "error: cannot resume: part/step_00000010: its model has ${o%=*} [0-9]+ \(its config.yaml\), the configured one ${o#*=};" err &&
		test ! -e other/latest || return 1
	done
'

# state_edit KEY VALUE [KEY VALUE...]: part/step_00000010 as st/ with entries
# of state.json changed ("loss_scale.scale" for a nested one; a VALUE of -
# removes the key) and its checksum made to fit
state_edit () {
	rm -rf st && cp -r part/step_00000010 st &&
	/usr/bin/python3 -c "import json, sys
s = json.load(open(\"st/state.json\"))
for key, v in zip(sys.argv[1::2], sys.argv[2::2]):
    k = key.split(\".\"); o = s[k[0]] if len(k) > 1 else s
    if v == \"-\": del o[k[-1]]
    else: o[k[-1]] = json.loads(v)
json.dump(s, open(\"st/state.json\", \"w\"))" "$@" &&
	/usr/bin/python3 -c "import json, os, sys
i = json.load(open(\"st/index.json\")); f = i[\"files\"][\"state.json\"]
f[\"size\"] = os.path.getsize(\"st/state.json\"); f[\"xxh3\"] = sys.argv[1]
json.dump(i, open(\"st/index.json\", \"w\"))" "$(test-tool xxh3 st/state.json)"
}

test_expect_success 'a state.json with impossible counts or loss scale is refused as bad data' '
	for kv in "step -1" "optimizer_steps -3" "loss_scale.scale 0" "loss_scale.good_steps -1"; do
		state_edit $kv &&
		test_expect_code 65 train -o Engine.max_steps=20 -o Engine.save_load.ckpt_dir=st \
			-o Engine.save_load.output_dir=never >out 2>err &&
		test_grep "error: cannot resume: st/state.json: expected step and optimizer_steps in \[0, 2\\^53\)" err || return 1
	done &&
	test ! -e never &&
	for v in 11 -1 "\"3\""; do
		state_edit lr_steps "$v" &&
		test_expect_code 65 train -o Engine.max_steps=20 -o Engine.save_load.ckpt_dir=st \
			-o Engine.save_load.output_dir=never >out 2>err &&
		test_grep "error: cannot resume: st/state.json: lr_steps: expected an integer in \[0, step 10\]" err || return 1
	done &&
	state_edit step 10 lr_steps - &&
	train -o Engine.max_steps=11 -o Engine.save_load.ckpt_dir=st -o Engine.eval_freq=0 \
		-o Engine.save_load.output_dir=fine >out 2>&1 &&
	lrs full.log >a && lrs out >b && test_grep "^11 " b && grep "^11 " a >a11 && grep "^11 " b | test_cmp a11 -
'

test_expect_success 'a failed resume removes the output_dir it made, and only that' '
	state_edit step -1 &&
	test_expect_code 65 train -o Engine.max_steps=20 -o Engine.save_load.ckpt_dir=st \
		-o Engine.save_load.output_dir=made/a/b >out 2>err &&
	test_grep "error: cannot resume: st/state.json:" err &&
	test ! -e made &&
	mkdir -p had/a &&
	test_expect_code 65 train -o Engine.max_steps=20 -o Engine.save_load.ckpt_dir=st \
		-o Engine.save_load.output_dir=had/a/b/c >out 2>err &&
	test -d had/a && test ! -e had/a/b &&
	mkdir had/a/b && >had/a/b/note &&
	test_expect_code 65 train -o Engine.max_steps=20 -o Engine.save_load.ckpt_dir=st \
		-o Engine.save_load.output_dir=had/a/b >out 2>err &&
	test -f had/a/b/note
'

test_expect_success 'a state.json with counts past 2^53 or that is no JSON is refused, not overflowed' '
	for kv in "step 4611686018427387904" "optimizer_steps 9223372036854775807" \
		"loss_scale.bad_steps 9223372036854775807"; do
		state_edit $kv &&
		test_expect_code 65 train -o Engine.max_steps=20 -o Engine.save_load.ckpt_dir=st \
			-o Engine.save_load.output_dir=never >out 2>err &&
		test_grep "error: cannot resume: st/state.json: expected step and optimizer_steps in \[0, 2\\^53\)" err || return 1
	done &&
	for kv in "data.global_batch 9223372036854775807" "data.seq_len 0"; do
		state_edit $kv &&
		test_expect_code 65 train -o Engine.max_steps=20 -o Engine.save_load.ckpt_dir=st \
			-o Engine.save_load.output_dir=never >out 2>err &&
		test_grep "error: cannot resume: st/state.json: data: expected global_batch and seq_len >= 1 whose tokens over step 10 stay below 2\\^53, found" err || return 1
	done &&
	state_edit consumed_samples 9223372036854775807 &&
	test_expect_code 65 train -o Engine.max_steps=20 -o Engine.save_load.ckpt_dir=st \
		-o Engine.save_load.output_dir=never >out 2>err &&
	test_grep "error: cannot resume: st/state.json: consumed_samples: expected an integer in \[0, 2\\^53\)" err &&
	state_edit consumed_tokens - consumed_samples 9007199254740991 &&
	test_expect_code 65 train -o Engine.max_steps=20 -o Engine.save_load.ckpt_dir=st \
		-o Engine.save_load.output_dir=never >out 2>err &&
	test_grep "error: cannot resume: st/state.json: consumed_tokens: not given, and consumed_samples 9007199254740991 x [0-9]+ tokens is beyond 2\\^53" err &&
	state_edit seed 99999999999999999999 &&
	test_expect_code 65 train -o Engine.max_steps=20 -o Engine.save_load.ckpt_dir=st \
		-o Engine.save_load.output_dir=never >out 2>err &&
	test_grep "error: cannot resume: st/state.json:1:[0-9]+: too big integer" err
'

test_expect_success 'Engine.num_train_epochs far beyond max_steps leaves max_steps in charge' '
	train -o Engine.max_steps=2 -o Engine.num_train_epochs=9000000000000000000 -o Engine.eval_freq=0 \
		-o Engine.save_load.save_steps=0 -o Engine.save_load.output_dir=epochs >out 2>&1 &&
	test_grep "global step 2," out
'

# state_int KEY DIR: an integer of DIR/state.json ("data.seq_len" for a nested one)
state_int () {
	/usr/bin/python3 -c "import json, sys
v = json.load(open(sys.argv[2] + \"/state.json\"))
for k in sys.argv[1].split(\".\"): v = v[k]
print(v)" "$1" "$2"
}

test_expect_success 'consumed samples and tokens are running totals over resumes of other global batches' '
	T=$(state_int data.seq_len full/step_00000010) &&
	test "$(state_int consumed_samples full/step_00000010)" = 80 &&
	test "$(state_int consumed_tokens full/step_00000010)" = $((80 * T)) &&
	test "$(state_int consumed_samples gb16/step_00000011)" = $((80 + 16)) &&
	test "$(state_int consumed_tokens gb16/step_00000011)" = $(((80 + 16) * T)) &&
	test "$(state_int data.next_sample gb16/step_00000011)" = $((11 * 16)) &&
	train -o Engine.max_steps=12 -o Engine.eval_freq=0 -o Engine.save_load.output_dir=gb16 >gb8.log 2>&1 &&
	test_grep "resumed from gb16/step_00000011 at global step 11" gb8.log &&
	test "$(state_int consumed_samples gb16/step_00000012)" = $((80 + 16 + 8)) &&
	test "$(state_int consumed_tokens gb16/step_00000012)" = $(((80 + 16 + 8) * T))
'

test_expect_success 'a state.json without consumed samples counts its steps at its global batch; a bad count is refused' '
	state_edit consumed_samples - consumed_tokens - &&
	train -o Engine.max_steps=11 -o Global.global_batch_size=16 -o Engine.save_load.save_steps=1 \
		-o Engine.eval_freq=0 -o Engine.save_load.ckpt_dir=st -o Engine.save_load.output_dir=nocs >out 2>&1 &&
	T=$(state_int data.seq_len nocs/step_00000011) &&
	test "$(state_int consumed_samples nocs/step_00000011)" = $((10 * 8 + 16)) &&
	test "$(state_int consumed_tokens nocs/step_00000011)" = $(((10 * 8 + 16) * T)) &&
	for kv in "consumed_samples -80" "consumed_tokens 1.5"; do
		state_edit $kv &&
		test_expect_code 65 train -o Engine.max_steps=20 -o Engine.save_load.ckpt_dir=st \
			-o Engine.save_load.output_dir=never >out 2>err &&
		test_grep "error: cannot resume: st/state.json: ${kv% *}: expected an integer in \[0, 2\\^53\)" err || return 1
	done
'

test_expect_success 'an output_dir that is a file is refused before training' '
	: >afile &&
	test_expect_code 64 train -o Engine.max_steps=2 -o Engine.save_load.output_dir=afile >out 2>err &&
	test_grep "error: Engine.save_load.output_dir afile: exists and is not a directory" err &&
	! grep -q "global step" out
'

test_expect_success 'latest pointing at an incomplete checkpoint is refused, not ignored' '
	mkdir -p inc/step_00000030 && echo step_00000030 >inc/latest &&
	test_expect_code 65 train -o Engine.max_steps=40 -o Engine.save_load.output_dir=inc >out 2>err &&
	test_grep "not a complete checkpoint" err
'

test_expect_success 'a FleetX checkpoint (model.pdparams) as ckpt_dir is named as such (seed: GPT generation)' '
	mkdir -p fx/mp_00_sharding_00_pp_00 && : >fx/mp_00_sharding_00_pp_00/model.pdparams &&
	test_expect_code 65 train -o Engine.max_steps=2 -o Engine.save_load.output_dir=o3 \
		-o Engine.save_load.ckpt_dir=fx/mp_00_sharding_00_pp_00 >out 2>err &&
	test_grep "fx/mp_00_sharding_00_pp_00: a PaddlePaddle checkpoint \(model.pdparams\), which gptkit does not read" err &&
	test_expect_code 65 gpt-infer -o Engine.save_load.ckpt_dir=fx/mp_00_sharding_00_pp_00 "x" 2>err &&
	test_grep "a PaddlePaddle checkpoint" err
'

test_expect_success 'a single file as ckpt_dir (a consolidated checkpoint) is named a file, not a checkpoint directory' '
	gpt-ckpt-merge --consolidate part/step_00000010 one.safetensors &&
	test_expect_code 65 train -o Engine.max_steps=12 -o Engine.save_load.output_dir=o4 \
		-o Engine.save_load.ckpt_dir=one.safetensors >out 2>err &&
	test_grep "error: cannot resume: one.safetensors: a file, not a checkpoint directory; expected a step directory with index.json \(as output_dir/step_00000400\), or an output directory with latest$" err &&
	test ! -e o4/latest
'

test_expect_success 'a checkpoint of another model shape is refused naming the key' '
	test_expect_code 65 train -o Engine.max_steps=20 -o Engine.save_load.ckpt_dir=part \
		-o Model.hidden_size=32 -o Model.ffn_hidden_size=128 -o Engine.save_load.output_dir=o2 >out 2>err &&
	test_grep "error: cannot resume: part/step_00000020: its model has Model.hidden_size 64 \(its config.yaml\), the configured one 32;" err
'

# lrs LOG: "STEP LR" of each step line
test_expect_success 'schedules: a warm-up of 6.6 steps unrounded (FleetX), linear and constant decay' '
	for name in CosineAnnealingWithWarmupDecay LinearDecayWithWarmup Constant; do
		train -o Engine.max_steps=8 -o Engine.save_load.save_steps=0 -o Engine.eval_freq=0 \
			-o Engine.logging_freq=1 -o Optimizer.lr.name=$name -o Optimizer.lr.decay_steps=20 \
			-o Optimizer.lr.warmup_rate=0.33 -o Optimizer.lr.max_lr=1e-3 -o Optimizer.lr.min_lr=1e-4 \
			-o Engine.save_load.output_dir=lr-$name >lr.log 2>&1 &&
		lrs lr.log >rates-$name || return 1
	done &&
	test_grep "^6 9.09091e-04$" rates-CosineAnnealingWithWarmupDecay &&
	test_grep "^7 9.98023e-04$" rates-CosineAnnealingWithWarmupDecay &&
	test_grep "^6 9.09091e-04$" rates-LinearDecayWithWarmup &&
	test_grep "^7 9.73134e-04$" rates-LinearDecayWithWarmup &&
	test_grep "^8 9.05970e-04$" rates-LinearDecayWithWarmup &&
	test_grep "^7 1.00000e-03$" rates-Constant && test_grep "^8 1.00000e-03$" rates-Constant
'

test_expect_success 'the printed configuration trains with the same unrounded warm-up' '
	S="-o Engine.max_steps=8 -o Engine.save_load.save_steps=0 -o Engine.eval_freq=0 -o Engine.logging_freq=1" &&
	S="$S -o Optimizer.lr.decay_steps=20 -o Optimizer.lr.warmup_rate=0.33 -o Optimizer.lr.max_lr=1e-3" &&
	train $S -o Optimizer.lr.min_lr=1e-4 --print-config >printed.yaml &&
	test_grep "^    warmup_steps: null  # warmup_rate x decay_steps = 6.6 steps, used unrounded$" printed.yaml &&
	gpt-train -c printed.yaml -o Engine.save_load.output_dir=lr-printed >lr.log 2>&1 &&
	lrs lr.log >rates-printed &&
	test_cmp rates-CosineAnnealingWithWarmupDecay rates-printed &&
	train $S -o Optimizer.lr.warmup_steps=7 -o Optimizer.lr.min_lr=1e-4 --print-config >printed.yaml &&
	test_grep "^    warmup_steps: 7$" printed.yaml
'

test_expect_success 'fp16 overflow: the step is skipped, the scale backs off, training goes on' '
	train -o Engine.max_steps=6 -o Engine.save_load.save_steps=0 -o Engine.eval_freq=0 \
		-o Engine.mix_precision.enable=True -o Engine.mix_precision.scale_loss=1e9 >amp.log 2>&1 &&
	test_grep "\[ WARNING\] - \[amp\] global step 2, found inf/nan in gradients: skipped the update, loss scale 1e\+09 -> 5e\+08" amp.log &&
	test "$(grep -c "\[amp\]" amp.log)" -ge 4 &&
	test_grep "global step 1, .*, ips: [0-9]+ tokens/s, loss_scale: 1000000000.000000000, learning rate: " amp.log &&
	test_grep "global step 2, .*, loss_scale: 500000000.000000000, learning rate: " amp.log &&
	test "$(grep -c "global step .*loss_scale: " amp.log)" = 6
'

test_expect_success 'fp16: an overflow holds the learning-rate schedule back (FleetX, PaddleNLP, Megatron-LM); a resume keeps its place' '
	F16="-o Engine.mix_precision.enable=True -o Engine.mix_precision.scale_loss=3e5 -o Engine.eval_freq=0" &&
	train $F16 -o Engine.max_steps=10 -o Engine.save_load.save_steps=5 -o Engine.save_load.output_dir=hold >hold.log 2>&1 &&
	test "$(grep -c "\[amp\] global step [1-4]," hold.log)" = 4 && ! grep -q "\[amp\] global step [5-9]" hold.log &&
	train -o Engine.max_steps=2 -o Engine.save_load.save_steps=0 -o Engine.eval_freq=0 >fp32.log 2>&1 &&
	lrs hold.log >r16 && lrs fp32.log >r32 &&
	first=$(sed -n "s/^1 //p" r32) && second=$(sed -n "s/^2 //p" r32) &&
	for s in 1 2 3 4 5; do test_grep "^$s $first$" r16 || return 1; done &&
	test_grep "^6 $second$" r16 &&
	test_grep "\"lr_steps\": 1," hold/step_00000005/state.json &&
	test_grep "\"lr_steps\": 6," hold/step_00000010/state.json &&
	train $F16 -o Engine.max_steps=5 -o Engine.save_load.save_steps=5 -o Engine.save_load.output_dir=hold2 >h1.log 2>&1 &&
	train $F16 -o Engine.max_steps=10 -o Engine.save_load.save_steps=5 -o Engine.save_load.output_dir=hold2 >h2.log 2>&1 &&
	lrs h1.log >a && lrs h2.log >>a && test_cmp r16 a &&
	! grep "rate jumps" h2.log &&
	cmp hold/step_00000010/rank-00000.safetensors hold2/step_00000010/rank-00000.safetensors
'

test_expect_success 'fp16: a loss that is not finite is no overflow: the run stops as fp32 does, not skip to its end' '
	test_expect_code 65 train -o Engine.max_steps=30 -o Optimizer.lr.max_lr=1e4 -o Optimizer.grad_clip.clip_norm=0 \
		-o Engine.save_load.save_steps=0 -o Engine.eval_freq=0 \
		-o Engine.mix_precision.enable=True -o Engine.mix_precision.dtype=float16 >f16nan.log 2>err &&
	test_grep "error: global step [0-9]+: the loss or the gradients are not finite \(loss -?nan\); stopping before the update" err &&
	! grep -q "\[amp\]" f16nan.log &&
	train -o Engine.max_steps=6 -o Engine.fault_inject.nan_steps=3 -o Engine.nan_policy=skip \
		-o Engine.save_load.save_steps=0 -o Engine.eval_freq=0 \
		-o Engine.mix_precision.enable=True >f16skip.log 2>&1 &&
	test_grep "global step 3: the loss or the gradients are not finite .*skipped the update \(Engine.nan_policy: skip\)" f16skip.log &&
	! grep -q "\[amp\]" f16skip.log
'

test_expect_success 'fp16: gradients that overflow at the minimum loss scale go to Engine.nan_policy' '
	test_expect_code 65 train -o Engine.max_steps=6 -o Engine.fault_inject.spike_steps=3 \
		-o Engine.fault_inject.spike_factor=1e9 -o Engine.save_load.save_steps=0 -o Engine.eval_freq=0 \
		-o Engine.mix_precision.enable=True -o Engine.mix_precision.scale_loss=1 >f16min.log 2>err &&
	test_grep "\[amp\] global step 3, found inf/nan in gradients at the minimum loss scale 1: the loss scale can go no lower; Engine.nan_policy \(stop\) decides" f16min.log &&
	test_grep "error: global step 3: the loss or the gradients are not finite" err &&
	train -o Engine.max_steps=6 -o Engine.fault_inject.spike_steps=3 \
		-o Engine.fault_inject.spike_factor=1e9 -o Engine.save_load.save_steps=0 -o Engine.eval_freq=0 \
		-o Engine.mix_precision.enable=True -o Engine.mix_precision.scale_loss=4 >f16four.log 2>&1 &&
	test_grep "\[amp\] global step 3, found inf/nan in gradients: skipped the update, loss scale 4 -> 4" f16four.log
'

test_expect_success 'the loss scale carries over between fp16 runs only, not from or into fp32' '
	F16="-o Engine.mix_precision.enable=True -o Engine.mix_precision.dtype=float16" &&
	train -o Engine.max_steps=2 -o Engine.save_load.save_steps=2 -o Engine.eval_freq=0 \
		-o Engine.save_load.output_dir=s32 >s32.log 2>&1 &&
	train $F16 -o Engine.max_steps=4 -o Engine.save_load.save_steps=2 -o Engine.eval_freq=0 \
		-o Engine.save_load.ckpt_dir=s32 -o Engine.save_load.output_dir=s16 >s16.log 2>&1 &&
	test_grep "s32/step_00000002 was saved without float16 \(a fixed loss scale of 1\): float16 training starts from Engine.mix_precision.scale_loss 32768" s16.log &&
	test_grep "\"scale\": 32768" s16/step_00000004/state.json &&
	train $F16 -o Engine.mix_precision.scale_loss=1024 -o Engine.max_steps=6 -o Engine.save_load.save_steps=2 \
		-o Engine.eval_freq=0 -o Engine.save_load.output_dir=s16 >s16b.log 2>&1 &&
	test_grep "\"scale\": 32768" s16/step_00000006/state.json &&
	train -o Engine.max_steps=8 -o Engine.save_load.save_steps=2 -o Engine.eval_freq=0 \
		-o Engine.save_load.ckpt_dir=s16 -o Engine.save_load.output_dir=s32b >s32b.log 2>&1 &&
	test_grep "s16/step_00000006 was saved in float16 \(a dynamic loss scale of 32768\): this run trains without float16, with a loss scale of 1" s32b.log &&
	test_grep "\"scale\": 1.0" s32b/step_00000008/state.json
'

test_expect_success 'bf16 storage trains with fp32 master weights' '
	train -o Engine.max_steps=8 -o Engine.save_load.save_steps=0 -o Engine.eval_freq=0 \
		-o Engine.mix_precision.enable=True -o Engine.mix_precision.dtype=bfloat16 >bf.log 2>&1 &&
	losses bf.log >l &&
	test "$(echo "$(tail -n 1 l | cut -d" " -f2) < $(head -n 1 l | cut -d" " -f2)" | bc)" = 1 &&
	! grep -q "\[amp\]" bf.log && ! grep -q "loss_scale" bf.log
'

test_expect_success 'a diverging run stops on the first non-finite loss and saves nothing after it' '
	test_expect_code 65 train -o Engine.max_steps=50 -o Optimizer.lr.max_lr=1e4 -o Optimizer.grad_clip.clip_norm=0 \
		-o Engine.save_load.save_steps=1 -o Engine.eval_freq=0 -o Engine.save_load.output_dir=nan >nan.log 2>err &&
	test_grep "error: global step [0-9]+: the loss or the gradients are not finite" err &&
	bad=$(sed -n "s/.*error: global step \([0-9]*\):.*/\1/p" err) &&
	test ! -e nan/step_$(printf %08d "$bad")
'

test_expect_success 'with Engine.nan_policy skip the bad updates are skipped and the checkpoint stays finite' '
	train -o Engine.max_steps=12 -o Optimizer.lr.max_lr=1e4 -o Optimizer.grad_clip.clip_norm=0 \
		-o Engine.nan_policy=skip -o Engine.save_load.save_steps=12 -o Engine.eval_freq=0 \
		-o Engine.save_load.output_dir=skip >skip.log 2>&1 &&
	test_grep "WARNING\] - global step [0-9]+: the loss or the gradients are not finite .*skipped the update \(Engine.nan_policy: skip\)" skip.log &&
	test-tool ckpt-diff skip/step_00000012 skip/step_00000012 >d &&
	test_grep "^max-abs-diff 0 " d
'

for rc in "" "-o Model.use_recompute=True -o Model.recompute_granularity=full" "-o Engine.mix_precision.enable=True -o Engine.mix_precision.dtype=bfloat16" \
	"-o Model.num_layers=4 -o Model.use_recompute=True -o Model.recompute_granularity=only_attn -o Model.no_recompute_layers=[1,2]"; do
	test_expect_success "--dry-run matches what a run allocates within 10% ($rc)" '
		train -o Engine.max_steps=1 -o Engine.eval_freq=0 -o Engine.save_load.save_steps=0 \
			-o Model.hidden_size=128 -o Model.ffn_hidden_size=512 $rc >mem.log 2>&1 &&
		train -o Model.hidden_size=128 -o Model.ffn_hidden_size=512 $rc --dry-run >plan &&
		used=$(sed -n "s/.*memory: .*(\([0-9]*\) bytes)$/\1/p" mem.log) &&
		planned=$(sed -n "s/^  total: *\([0-9.]*\) MiB.*/\1/p" plan) &&
		echo "allocated $used bytes, planned $planned MiB" &&
		test "$(echo "r = $planned * 1048576 / $used; r > 0.9 && r < 1.1" | bc -l)" = 1
	'
done

test_expect_success 'the memory line of a run reads as --dry-run does: the same units, the same figures' '
	train -o Engine.max_steps=1 -o Engine.eval_freq=0 -o Engine.save_load.save_steps=0 \
		-o Model.hidden_size=128 -o Model.ffn_hidden_size=512 >mem.log 2>&1 &&
	train -o Model.hidden_size=128 -o Model.ffn_hidden_size=512 --dry-run >plan &&
	for part in "parameters" "gradients" "optimizer state"; do
		logged=$(sed -n "s/.* - memory: .*$part \([0-9.]* [KMG]*i*B\)[,(].*/\1/p" mem.log) &&
		planned=$(sed -n "s/^  $part: *\([0-9.]* [KMG]*i*B\) .*/\1/p" plan) &&
		echo "$part: logged $logged, planned $planned" &&
		test -n "$planned" && test "$logged" = "$planned" || return 1
	done
'

# 3 steps of a 4-layer model with dropout into rc-NAME, whose weights must be
# rc-none's to the bit; rc-NAME.bytes: the total of the run's memory line
recompute_run () { # name overrides...
	rcn=$1 && shift &&
	train -o Engine.max_steps=3 -o Engine.eval_freq=0 -o Engine.save_load.save_steps=3 \
		-o Engine.save_load.output_dir=rc-$rcn -o Model.num_layers=4 -o Model.hidden_dropout_prob=0.1 \
		-o Model.attention_probs_dropout_prob=0.1 "$@" >rc-$rcn.log 2>&1 &&
	sed -n "s/.*memory: .*(\([0-9]*\) bytes)$/\1/p" rc-$rcn.log >rc-$rcn.bytes &&
	test_line_count = 1 rc-$rcn.bytes &&
	if test $rcn != none; then
		cmp rc-none/step_00000003/rank-00000.safetensors rc-$rcn/step_00000003/rank-00000.safetensors
	fi
}

test_expect_success 'Model.no_recompute_layers: the same bytes as every layer recomputed or none, the memory between' '
	recompute_run none &&
	recompute_run full -o Model.use_recompute=True &&
	recompute_run full-but-1 -o Model.use_recompute=True -o "Model.no_recompute_layers=[1]" &&
	recompute_run full-but-0-3 -o Model.use_recompute=True -o "Model.no_recompute_layers=[0, 3]" &&
	recompute_run full-but-all -o Model.use_recompute=True -o "Model.no_recompute_layers=[3,2,1,0]" &&
	recompute_run only-attn-but-2 -o Model.use_recompute=True -o Model.recompute_granularity=only_attn \
		-o "Model.no_recompute_layers=[2]" &&
	recompute_run core-attn-but-0 -o Model.use_recompute=True -o Model.recompute_granularity=core_attn \
		-o "Model.no_recompute_layers=[0]" &&
	for n in none full full-but-1 full-but-0-3 full-but-all; do
		echo "$n $(cat rc-$n.bytes)" || return 1
	done &&
	test $(cat rc-full.bytes) -lt $(cat rc-full-but-1.bytes) &&
	test $(cat rc-full-but-1.bytes) -lt $(cat rc-full-but-0-3.bytes) &&
	test $(cat rc-full-but-0-3.bytes) -lt $(cat rc-none.bytes) &&
	test $(cat rc-full-but-all.bytes) = $(cat rc-none.bytes) &&
	train -o Model.num_layers=4 -o Model.use_recompute=True -o "Model.no_recompute_layers=[0, 3]" --dry-run >plan &&
	test_grep "^recompute: full, except layers 0, 3 \(Model.no_recompute_layers\)$" plan
'

test_expect_success 'a Model.no_recompute_layers index outside the model is refused' '
	test_expect_code 64 train -o Model.use_recompute=True -o Model.no_recompute_layers=[2] --dry-run >out 2>err &&
	test_grep "Model.no_recompute_layers: expected layer indices from 0 to num_layers - 1 = 1, found 2" err &&
	test_expect_code 64 train -o Model.use_recompute=True -o Model.no_recompute_layers=[-1] --dry-run >out 2>err &&
	test_grep "Model.no_recompute_layers: expected a list of non-negative integers" err
'

test_expect_success 'the test split is evaluated after training; without one, a warning says so' '
	train -o Engine.max_steps=3 -o Engine.eval_freq=0 -o Engine.save_load.save_steps=0 \
		-o Data.Train.dataset.split=13,2,2 -o Data.Eval.dataset.split=13,2,2 -o Engine.test_iters=2 >t.log 2>&1 &&
	test_grep "\[    INFO\] - \[test\] global step 3, epoch: 0, batch: 2, loss: [0-9.]+, ppl: " t.log &&
	train -o Engine.max_steps=1 -o Engine.eval_freq=0 -o Engine.save_load.save_steps=0 >t2.log 2>&1 &&
	test_grep "WARNING\] - no test evaluation after training: .*test split" t2.log
'

test_expect_success 'a test split of weight 0 (the README.s 15,2,0) says so, and Engine.test_iters=0 silences it' '
	train -o Engine.max_steps=1 -o Engine.eval_freq=0 -o Engine.save_load.save_steps=0 \
		-o Data.Train.dataset.split=15,2,0 -o Data.Eval.dataset.split=15,2,0 >w.log 2>&1 &&
	test_grep "WARNING\] - no test evaluation after training: data/lic: the test split of .15,2,0. has weight 0; Engine.test_iters=0 trains without one and without this warning" w.log &&
	! grep -q "give it more documents" w.log &&
	train -o Engine.max_steps=1 -o Engine.eval_freq=0 -o Engine.save_load.save_steps=0 -o Engine.test_iters=0 \
		-o Data.Train.dataset.split=15,2,0 -o Data.Eval.dataset.split=15,2,0 >w0.log 2>&1 &&
	! grep -q "WARNING" w0.log &&
	train -o Engine.max_steps=1 -o Engine.eval_freq=0 -o Engine.save_load.save_steps=0 \
		-o Data.Train.dataset.split=949,50,1 -o Data.Eval.dataset.split=949,50,1 >w2.log 2>&1 &&
	test_grep "test split of .949,50,1. over [0-9]+ documents is empty; give it more documents or change Data.\*.dataset.split; Engine.test_iters=0 trains without one" w2.log &&
	test_expect_code 65 train -o Engine.max_steps=1 -o Engine.save_load.save_steps=0 \
		-o Data.Train.dataset.split=0,1,0 >w1.log 2>&1 &&
	test_grep "the training split of .0,1,0. has weight 0; give it one in Data.Train.dataset.split" w1.log
'

test_expect_success 'a split without validation documents (Megatron-LM.s 100,0,0) trains without evaluations, saying so' '
	train -o Engine.max_steps=2 -o Engine.eval_freq=1 -o Engine.save_load.save_steps=0 \
		-o Data.Train.dataset.split=100,0,0 -o Data.Eval.dataset.split=100,0,0 >v.log 2>&1 &&
	test_grep "WARNING\] - no evaluation during training: data/lic: the validation split of .100,0,0. has weight 0; Engine.eval_freq=0 trains without one" v.log &&
	test_grep "global step 2, epoch" v.log &&
	! grep -q "\[eval\]" v.log &&
	train -o Engine.max_steps=2 -o Engine.eval_freq=0 -o Engine.save_load.save_steps=0 \
		-o Data.Train.dataset.split=100,0,0 -o Data.Eval.dataset.split=100,0,0 >v0.log 2>&1 &&
	! grep -q "no evaluation during training" v0.log
'

test_expect_success 'a validation or test split over documents the training split trains on is refused' '
	gpt-preprocess --info data/lic >info && n=$(sed -n "s/^documents: //p" info) &&
	test_expect_code 64 train -o Engine.max_steps=1 -o Engine.eval_freq=1 -o Engine.save_load.save_steps=0 \
		-o Data.Train.dataset.split=98,2,0 -o Data.Eval.dataset.split=949,50,1 >out 2>err &&
	test_grep "error: Data.Eval.dataset.split: the validation split of .949,50,1. takes documents that the training split of Data.Train.dataset.split .98,2,0. trains on \(data/lic: document $((n - 1)) is in both\); give both the same split" err &&
	test_expect_code 64 train -o Engine.max_steps=1 -o Engine.eval_freq=0 -o Engine.save_load.save_steps=0 \
		-o Data.Train.dataset.split=16,0,1 -o Data.Eval.dataset.split=13,2,2 >out 2>err &&
	test_grep "error: Data.Eval.dataset.split: the test split of .13,2,2. takes documents that the training split of Data.Train.dataset.split .16,0,1. trains on \(data/lic: document $((n - 2)) is in both\)" err
'

test_expect_success 'save_epoch writes a checkpoint at the end of an epoch' '
	gpt-preprocess -t bytes -o data/short /usr/share/common-licenses/BSD /usr/share/common-licenses/CC0-1.0 \
		/usr/share/common-licenses/Apache-2.0 &&
	train -o Data.Train.dataset.input_dir=data/short -o Data.Train.dataset.split=1 -o Engine.eval_freq=0 \
		-o Engine.save_load.save_steps=0 -o Engine.save_load.save_epoch=1 -o Engine.num_train_epochs=2 -o Engine.max_steps=1000 \
		-o Engine.save_load.output_dir=ep >ep.log 2>&1 &&
	first=$(sed -n "s/.* - global step \([0-9]*\), epoch: 1, batch: 0,.*/\1/p" ep.log) &&
	last=$(sed -n "s/.* - global step \([0-9]*\), epoch: 1,.*/\1/p" ep.log | tail -n 1) &&
	echo "epoch 1 is steps $first to $last" &&
	test "$last" = $((2 * (first - 1))) &&
	ls ep >dirs &&
	printf "latest\nstep_%08d\nstep_%08d\n" $((first - 1)) "$last" >expect &&
	test_cmp expect dirs
'

test_expect_success 'the startup line says why it trains fewer steps than max_steps: the epochs, a resume' '
	train -o Data.Train.dataset.input_dir=data/short -o Data.Train.dataset.split=1 -o Engine.eval_freq=0 \
		-o Engine.test_iters=0 -o Engine.num_train_epochs=2 -o Engine.max_steps=1000 \
		-o Engine.save_load.output_dir=why >why.log 2>&1 &&
	per=$(sed -n "s/.* - global step \([0-9]*\), epoch: 1, batch: 0,.*/\1/p" why.log) && per=$((per - 1)) &&
	test_grep " - training 128768 parameters for $((2 * per)) steps \(Engine.num_train_epochs 2, of $per steps each, ends it before Engine.max_steps 1000\): global batch" why.log &&
	train -o Data.Train.dataset.input_dir=data/short -o Data.Train.dataset.split=1 -o Engine.eval_freq=0 \
		-o Engine.test_iters=0 -o Engine.num_train_epochs=3 -o Engine.max_steps=1000 \
		-o Engine.save_load.output_dir=why >why2.log 2>&1 &&
	test_grep " - training 128768 parameters for $((3 * per)) steps \($per left after global step $((2 * per)); Engine.num_train_epochs 3, of $per steps each, ends it before Engine.max_steps 1000\)" why2.log
'

test_expect_success 'settings the trainer cannot honour are refused, not ignored' '
	for o in Engine.mix_precision.level=O1 \
		 Model.fused_linear=True Data.Train.sampler.drop_last=False \
		 Distributed.sharding.broadcast_overlap=True \
		 Engine.mix_precision.custom_black_list=reduce_sum,matmul_v2; do
		key=${o%%=*} &&
		test_expect_code 64 train -o Engine.mix_precision.enable=True -o "$o" -o Engine.max_steps=1 >out 2>err &&
		grep -q "${key##*.}" err || { echo "$o:"; cat err; exit 1; }
	done
'

test_expect_success 'gpt-config(5) says that each of them is refused' '
	for k in Engine.mix_precision.level Model.fused_linear \
		 Data.Train.sampler.drop_last Data.Eval.sampler.drop_last \
		 Distributed.sharding.broadcast_overlap Engine.mix_precision.custom_black_list; do
		sed -n "/^\.B $k\$/,/^\.TP/p" "$GPT_ROOT/man/man5/gpt-config.5" >entry &&
		test_line_count -gt 2 entry &&
		grep -q -i -e "refuse" -e "is an error" entry || { echo "$k:"; cat entry; exit 1; }
	done
'

test_expect_success 'the same settings in the configuration file are exit 65 naming the file and line' '
	for kv in "Engine: {mix_precision: {enable: True, level: O1}}" \
		  "Model: {fused_linear: True}" \
		  "Data: {Eval: {sampler: {drop_last: False}}}" \
		  "Distributed: {sharding: {broadcast_overlap: True}}" \
		  "Engine: {skip_spikes: {enable: True, loss_zscore: 0, grad_norm_zscore: 0}}" \
		  "Engine: {fault_inject: {nan_steps: [1], nan_rank: 1}}" \
		  "Quantization: {enable: True, quantizable_layer_type: [Conv2D]}" \
		  "Engine: {mix_precision: {enable: True, custom_black_list: [reduce_sum, matmul]}}"; do
		printf "_base_: %s\n%s\n" "$GPT_ROOT/configs/tiny_cpu_bytes.yaml" "$kv" >bad.yaml &&
		test_expect_code 65 gpt-train -c bad.yaml \
			-o Data.Train.dataset.input_dir=data/lic -o Data.Eval.dataset.input_dir=data/lic \
			-o Data.Train.dataset.split=15,2,0 -o Data.Eval.dataset.split=15,2,0 \
			-o Engine.max_steps=1 -o Engine.save_load.output_dir=bad >out 2>err &&
		test_grep "^gpt-train: error: bad.yaml:2:[0-9]*: [A-Z][A-Za-z_.]*: " err ||
			{ echo "$kv:"; cat err; exit 1; }
	done &&
	! test -e bad/latest
'

test_expect_success '--dry-run and --print-config refuse them too, with the same message and code' '
	for kv in "Engine: {mix_precision: {enable: True, level: O1}}" \
		  "Model: {fused_linear: True}" \
		  "Data: {Train: {sampler: {drop_last: False}}}" \
		  "Distributed: {sharding: {broadcast_overlap: True}}" \
		  "Engine: {skip_spikes: {enable: True, loss_zscore: 0, grad_norm_zscore: 0}}" \
		  "Engine: {fault_inject: {nan_steps: [1], nan_rank: 1}}" \
		  "Quantization: {enable: True, quantizable_layer_type: [Embedding]}"; do
		printf "_base_: %s\n%s\n" "$GPT_ROOT/configs/tiny_cpu_bytes.yaml" "$kv" >bad.yaml &&
		test_expect_code 65 gpt-train -c bad.yaml -o Data.Train.dataset.input_dir=data/lic \
			-o Engine.max_steps=1 -o Engine.save_load.output_dir=bad >out 2>train.err &&
		test_expect_code 65 gpt-train -c bad.yaml --dry-run >out 2>dry.err &&
		test_expect_code 65 gpt-train -c bad.yaml --print-config >out 2>print.err &&
		! test -s out &&
		test_grep "^gpt-train: error: bad.yaml:2:[0-9]*: [A-Z][A-Za-z_.]*: " dry.err &&
		test_cmp train.err dry.err && test_cmp dry.err print.err ||
			{ echo "$kv:"; cat train.err dry.err print.err; exit 1; }
	done &&
	for o in Engine.mix_precision.level=O1 Model.no_recompute_layers=[4] \
		 Data.Eval.sampler.drop_last=False Engine.fault_inject.nan_rank=4; do
		test_expect_code 64 gpt-train -c "$GPT_ROOT/configs/tiny_cpu_bytes.yaml" --world-size 4 \
			-o Engine.mix_precision.enable=True -o Engine.fault_inject.nan_steps=[2] \
			-o "$o" --dry-run >out 2>err &&
		grep -F "gpt-train: error: -o $o: ${o%%=*}: " err || { echo "$o:"; cat err; exit 1; }
	done
'

test_expect_success 'Model.fused_linear=True is not refused on the GPU (the GELU in cuBLASLt epilogues)' '
	{ train -o Model.fused_linear=True -o Global.device=gpu -o Engine.max_steps=1 >out 2>err || :; } &&
	! grep fused_linear err
'

test_expect_success 'a missing dataset is exit 66 naming it' '
	test_expect_code 66 train -o Data.Train.dataset.input_dir=nothere -o Engine.max_steps=1 >out 2>err &&
	test_grep "nothere" err
'

test_expect_success 'a directory of FleetX data (_ids.npy, _idx.npz) is named as such' '
	mkdir fxdata && : >fxdata/gpt_en_dataset_300m_ids.npy && : >fxdata/gpt_en_dataset_300m_idx.npz &&
	test_expect_code 66 train -o Data.Train.dataset.input_dir=fxdata -o Engine.max_steps=1 >out 2>err &&
	test_grep "fxdata: no datasets \(\*.idx/\*.bin\) in this directory, only PaddleFleetX.s \*_ids.npy/\*_idx.npz, which gptkit does not read" err
'

test_expect_success 'a dataset smaller than one sample is exit 65' '
	printf "tiny" >small.txt &&
	gpt-preprocess -t bytes -o data/small small.txt small.txt small.txt &&
	test_expect_code 65 train -o Data.Train.dataset.input_dir=data/small -o Engine.max_steps=1 >out 2>err &&
	test_grep "fewer than one sample" err
'

test_expect_success 'data from a larger vocabulary than the model is refused, naming the dataset' '
	gpt-preprocess -t bytes -o data/hi /usr/share/common-licenses/GPL-3 &&
	test_expect_code 65 train -o Data.Train.dataset.input_dir=data/hi -o Data.Train.dataset.split=1 \
		-o Engine.eval_freq=0 -o Model.vocab_size=100 -o Engine.max_steps=1 >out 2>err &&
	test_grep "error: reading the batch of global step 1: data/hi: document 0, token [0-9]+: id [0-9]+ is outside the model.s vocabulary of 100" err
'

test_expect_success 'a -t bytes dataset under a vocabulary other than 257 trains, warning what gpt-infer will make of it' '
	one="-o Data.Train.dataset.split=1 -o Engine.eval_freq=0 -o Engine.test_iters=0 -o Engine.max_steps=1 -o Engine.logging_freq=1 -o Engine.save_load.save_steps=0" &&
	train -o Model.vocab_size=50304 -o Model.hidden_size=32 -o Model.num_attention_heads=2 $one >out 2>&1 &&
	test_grep "\[ WARNING\] - data/lic: documents 0 and [0-9]+ \(the last\) hold only bytes \(ids 0 to 255\) and end with 256, the end-of-text of the byte tokenizer: the dataset was made with -t bytes, but Model.vocab_size is 50304, which gpt-infer and gpt-export take for GPT-2.s BPE: the model would be given GPT-2 ids for the bytes it learnt; set Model.vocab_size to 257 for byte data, or make the dataset with gpt-preprocess -t gpt2$" out &&
	test_grep " - global step 1, epoch" out &&
	train $one >out 2>&1 &&
	test_grep " - global step 1, epoch" out && ! grep "made with -t bytes" out
'

test_expect_success VOCAB 'a GPT-2 dataset under a GPT-2 vocabulary trains without that warning' '
	gpt-preprocess -o data/g2 /usr/share/common-licenses/GPL-3 2>/dev/null &&
	train -o Model.vocab_size=50304 -o Model.hidden_size=32 -o Model.num_attention_heads=2 \
		-o Data.Train.dataset.input_dir=data/g2 -o Data.Train.dataset.split=1 -o Engine.eval_freq=0 \
		-o Engine.test_iters=0 -o Engine.max_steps=1 -o Engine.logging_freq=1 -o Engine.save_load.save_steps=0 >out 2>&1 &&
	test_grep " - global step 1, epoch" out && ! grep "WARNING" out
'

test_expect_success 'Global.device=gpu without a GPU is a clear error' '
	if test_have_prereq GPU; then
		echo "a GPU is here: the next test trains on it" >out
	else
		test_expect_code 64 train -o Global.device=gpu -o Engine.max_steps=1 >out 2>err &&
		test_grep "Global.device: gpu: " err
	fi
'

test_expect_success GPU 'Global.device=gpu trains one process on the GPU, step for step as the CPU' '
	twenty="-o Engine.max_steps=20 -o Engine.logging_freq=1 -o Engine.eval_freq=0 -o Engine.save_load.save_steps=0" &&
	drop="-o Model.hidden_dropout_prob=0.1 -o Model.attention_probs_dropout_prob=0.1" &&
	train -o Global.device=cpu $twenty $drop >cpu.log 2>&1 &&
	train -o Global.device=gpu $twenty $drop >gpu.log 2>&1 &&
	losses cpu.log >cpu.l &&
	losses gpu.log >gpu.l &&
	test_line_count = 20 gpu.l &&
	paste cpu.l gpu.l >both &&
	awk "{ d = \$2 - \$5; if (d < 0) d = -d; if (d > 1e-3 * \$2) bad++ } END { exit bad > 0 }" both
'

test_expect_success 'an [eval] line gives the epoch and batch of its step line, in any epoch' '
	L=/usr/share/common-licenses &&
	gpt-preprocess -t bytes -o data/small $L/BSD $L/Artistic $L/CC0-1.0 $L/LGPL-3 &&
	train -o Data.Train.dataset.input_dir=data/small -o Data.Eval.dataset.input_dir=data/small \
		-o Data.Train.dataset.split=3,1,0 -o Data.Eval.dataset.split=3,1,0 \
		-o Engine.num_train_epochs=3 -o Engine.max_steps=70 -o Engine.logging_freq=35 \
		-o Engine.eval_freq=35 -o Engine.save_load.save_steps=0 -o Engine.save_load.save_epoch=0 \
		-o Engine.save_load.output_dir=epochs >epochs.log 2>&1 &&
	sed -n "s/.* - global step \([0-9]*\), \(epoch: [0-9]*, batch: [0-9]*\),.*/\1 \2/p" epochs.log >steps &&
	sed -n "s/.* - \[eval\] global step \([0-9]*\), \(epoch: [0-9]*, batch: [0-9]*\),.*/\1 \2/p" epochs.log >evals &&
	test_line_count = 2 evals &&
	grep -q "^35 epoch: 1, " evals &&
	test_cmp steps evals
'

test_expect_success 'with logging_freq 3 a line gives the mean loss of the steps since the last (as FleetX)' '
	train -o Engine.max_steps=7 -o Engine.logging_freq=1 -o Engine.eval_freq=0 \
		-o Engine.save_load.save_steps=0 -o Engine.save_load.output_dir=lf1 >lf1.log 2>&1 &&
	train -o Engine.max_steps=7 -o Engine.logging_freq=3 -o Engine.eval_freq=0 \
		-o Engine.save_load.save_steps=0 -o Engine.save_load.output_dir=lf3 >lf3.log 2>&1 &&
	losses lf1.log | awk "{ s += \$2; n++ } NR % 3 == 0 || NR == 7 { printf \"%d %.9f\\n\", \$1, s / n; s = n = 0 }" >want &&
	losses lf3.log | cut -d" " -f1,2 >got &&
	cat want got &&
	test_line_count = 3 got &&
	paste want got | awk "{ d = \$2 - \$4; if (d < 0) d = -d; if (\$1 != \$3 || d > 2e-9) bad = 1 } END { exit bad }"
'

test_expect_success 'the time of an evaluation is not in the next step line avg_batch_cost' '
	train -o Engine.max_steps=3 -o Engine.logging_freq=1 -o Engine.eval_freq=2 \
		-o Engine.eval_iters=200 -o Engine.save_load.save_steps=0 >evtime.log 2>&1 &&
	cost=$(sed -n "s/.* - global step 3, .*avg_batch_cost: \([0-9.]*\) sec.*/\1/p" evtime.log) &&
	ecost=$(sed -n "s/.*\[eval\] global step 2, .*avg_eval_cost: \([0-9.]*\) sec.*/\1/p" evtime.log) &&
	echo "step 3: $cost s; the evaluation before it: 200 x $ecost s" &&
	test "$(echo "4 * $cost < 200 * $ecost" | bc)" = 1
'

test_expect_success 'settings this build cannot train are clear errors' '
	test_expect_code 64 train --world-size 2 -o Global.device=gpu -o Global.micro_batch_size=4 \
		-o Engine.max_steps=1 >out 2>err &&
	test_grep "the layout needs 2 ranks|Global.device: gpu: this build has no CUDA" err &&
	test_expect_code 64 train --world-size 2 -o Global.micro_batch_size=4 -o Engine.max_steps=1 >out 2>err &&
	test_grep "the layout needs 2 ranks .* but this process is one of 1 \(single\); start it with gpt-launch --nproc-per-node 2" err &&
	test_expect_code 64 train --world-size 2 --tensor_parallel_degree 2 -o Engine.max_steps=1 >out 2>err &&
	test_grep "the layout needs 2 ranks \(dp 1 x mp 2 x pp 1 x sharding 1\)" err
'

test_done
