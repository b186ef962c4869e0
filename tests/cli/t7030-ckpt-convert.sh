#!/bin/sh
# gpt-ckpt-merge --from-hf and --to-layout: a Hugging Face GPT-2 (written by
# an independent writer, tests/ref/gpt2_hf.py) converted in and out comes
# back byte-identical in every tensor (fp32 and fp16 files, byte and GPT-2
# vocabularies), trains a step from the converted checkpoint, and a
# checkpoint resharded for another layout holds the same values, tiles as
# that layout's ranks would write it and resumes bit for bit.
. "$(dirname "$0")/test-lib.sh"

REF="/usr/bin/python3 $GPT_ROOT/tests/ref/gpt2_hf.py"

# same_tensors HF_IN HF_OUT: every tensor of HF_OUT is HF_IN's, byte for
# byte, and only the attention mask buffers of HF_IN are left out
cat >same.py <<'PY'
import json, struct, sys
def rd(p):
    b = open(p, "rb").read(); n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n]); h.pop("__metadata__", None)
    return {k: (v["dtype"], v["shape"], b[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]])
            for k, v in h.items()}
a, b = rd(sys.argv[1] + "/model.safetensors"), rd(sys.argv[2] + "/model.safetensors")
want = {k for k in a if not k.endswith(".attn.bias")}
assert set(b) == want, sorted(set(b) ^ want)
bad = [k for k in want if a[k] != b[k]]
assert not bad, bad
print("%d tensors identical" % len(b))
PY

test_expect_success TORCH 'HF -> gptkit -> HF is byte-identical (fp32, byte vocabulary)' '
	$REF make hf1 257 2 64 4 64 1 &&
	gpt-ckpt-merge --from-hf hf1 ck1 2>err &&
	test_grep "wrote ck1/step_00000000" err &&
	echo step_00000000 >want && test_cmp want ck1/latest &&
	gpt-ckpt-merge --info ck1 >info &&
	test_grep "^  wte +F32 +\[384, 64\]$" info &&
	test_grep "^  h.1.attn.qkv.weight +F32 +\[3, 64, 64\]$" info &&
	! grep "^  optim" info &&
	gpt-ckpt-merge --to-hf ck1 back1 &&
	/usr/bin/python3 same.py hf1 back1
'

# stedit DIR OP TENSOR [SHARD]: DIR's sharded weights with one thing wrong:
#   set    the index puts TENSOR in SHARD (any string)
#   drop   the index lists TENSOR no more
#   move   the index puts TENSOR in another of its shards
#   copy   another shard holds a copy of TENSOR too
cat >stedit.py <<'PY'
import json, struct, sys
d, op, t = sys.argv[1:4]
ip = d + "/model.safetensors.index.json"
idx = json.load(open(ip)); wm = idx["weight_map"]
files = sorted(set(wm.values())); other = [f for f in files if f != wm[t]][0]
def rd(p):
    b = open(p, "rb").read(); n = struct.unpack("<Q", b[:8])[0]
    return json.loads(b[8:8 + n]), b[8 + n:]
if op == "set": wm[t] = sys.argv[4]
elif op == "drop": del wm[t]
elif op == "move": wm[t] = other
elif op == "copy":
    (sh, sd), (h, data) = rd(d + "/" + wm[t]), rd(d + "/" + other)
    b, e = sh[t]["data_offsets"]
    h[t] = dict(sh[t], data_offsets=[len(data), len(data) + e - b])
    hb = json.dumps(h).encode(); hb += b" " * ((8 - len(hb) % 8) % 8)
    open(d + "/" + other, "wb").write(struct.pack("<Q", len(hb)) + hb + data + sd[b:e])
json.dump(idx, open(ip, "w"), indent=2)
PY

test_expect_success TORCH 'weights in 2 or 3 shards convert to the checkpoint one model.safetensors gives' '
	$REF shard hf1 hf1s2 2 &&
	$REF shard hf1 hf1s3 3 &&
	! test -e hf1s3/model.safetensors &&
	gpt-ckpt-merge --from-hf hf1s2 cks2 2>err &&
	test_grep "converting 28 tensors of the 2 shards hf1s2/model.safetensors.index.json lists" err &&
	gpt-ckpt-merge --from-hf hf1s3 cks3 2>err &&
	test_grep "converting 28 tensors of the 3 shards hf1s3/model.safetensors.index.json lists" err &&
	cmp ck1/step_00000000/rank-00000.safetensors cks2/step_00000000/rank-00000.safetensors &&
	cmp ck1/step_00000000/rank-00000.safetensors cks3/step_00000000/rank-00000.safetensors &&
	gpt-ckpt-merge --verify cks3 &&
	$REF make hf3 257 1 32 2 64 3 - F16 &&
	$REF shard hf3 hf3s 3 &&
	gpt-ckpt-merge --from-hf hf3 ck3 && gpt-ckpt-merge --from-hf hf3s ck3s &&
	cmp ck3/step_00000000/rank-00000.safetensors ck3s/step_00000000/rank-00000.safetensors &&
	gpt-infer -m hf1 -o Generation.max_dec_len=4 "GNU" >one &&
	gpt-infer -m hf1s3 -o Generation.max_dec_len=4 "GNU" >three &&
	test_cmp one three
'

test_expect_success TORCH 'beside model.safetensors, an index and its shards are left unread, as transformers does' '
	$REF make hfo 257 2 64 4 64 9 &&
	$REF shard hfo hfos 2 &&
	mkdir hfboth && cp hf1/* hfboth/ && cp hfos/model* hfboth/ &&
	gpt-ckpt-merge --from-hf hfboth ckboth 2>err &&
	test_grep "converting 28 tensors of hfboth/model.safetensors \(model.safetensors.index.json beside it and its shards left unread: the one file comes first, as in transformers. from_pretrained\)" err &&
	cmp ck1/step_00000000/rank-00000.safetensors ckboth/step_00000000/rank-00000.safetensors
'

test_expect_success TORCH 'a damaged or mismatched sharded directory is an error naming the file (gpt-infer too), and nothing is written' '
	T=transformer.h.1.mlp.c_fc.weight S="hfe/model-0000[1-3]-of-00003.safetensors" I=hfe/model.safetensors.index.json &&
	for c in "set $T ../hf1/model.safetensors:$I: weight_map entry .$T. names shard .\.\./hf1/model.safetensors., which is not a file name: the shards must lie in hfe beside the index; not reading another path" \
		"set $T sub/model-00001-of-00003.safetensors:$I: weight_map entry .$T. names shard .sub/model-00001-of-00003.safetensors., which is not a file name" \
		"set $T ..:$I: weight_map entry .$T. names shard .\.\.., which is not a file name" \
		"move $T:$I: weight_map puts tensor .$T. in $S, which does not hold it; the index and the shards are not of one save; save the model again with save_pretrained" \
		"drop $T:$S: holds tensor .$T., which $I does not list; the index and the shards are not of one save" \
		"copy $T:$S: holds tensor .$T. too, which $I puts in model-0000[1-3]-of-00003.safetensors; the index and the shards are not of one save"; do
		rm -rf hfe && cp -r hf1s3 hfe && mkdir hfe/sub && cp hfe/model-00001-of-00003.safetensors hfe/sub/ &&
		/usr/bin/python3 stedit.py hfe ${c%%:*} &&
		test_expect_code 65 gpt-ckpt-merge --from-hf hfe no 2>err &&
		test_grep "^gpt-ckpt-merge: error: ${c#*:}" err && ! test -e no &&
		test_expect_code 65 gpt-infer -m hfe -o Generation.max_dec_len=2 "GNU" >out 2>err &&
		test_grep "^gpt-infer: error: ${c#*:}" err && test_line_count = 0 out || return 1
	done &&
	rm -rf hfe && $REF shard hf1 hfe 3 transformer.h.1.mlp.c_fc.bias &&
	test_expect_code 65 gpt-ckpt-merge --from-hf hfe no 2>err &&
	test_grep "error: $I: no tensor .transformer.h.1.mlp.c_fc.bias. \(gptkit.s h.1.mlp.fc.bias\) in its weight_map: the shards lack a tensor of the model; save the model again" err &&
	rm -rf hfe && cp -r hf1s3 hfe && rm hfe/model-00002-of-00003.safetensors &&
	test_expect_code 66 gpt-ckpt-merge --from-hf hfe no 2>err &&
	test_grep "error: $I: tensor .transformer\..*. is in shard hfe/model-00002-of-00003.safetensors, which is missing; copy every shard the index lists into hfe$" err &&
	rm -rf hfe && cp -r hf1s3 hfe &&
	printf "{\"bad\"" | dd of=hfe/model-00002-of-00003.safetensors bs=1 seek=8 conv=notrunc 2>/dev/null &&
	test_expect_code 65 gpt-ckpt-merge --from-hf hfe no 2>err &&
	test_grep "error: $I lists a shard gptkit cannot read \(fetch or save it again\): hfe/model-00002-of-00003.safetensors: not a valid safetensors file: bad JSON header" err &&
	rm -rf hfe && cp -r hf1s3 hfe && sed -i "/\"transformer.h.0.ln_1.bias\"/p" $I &&
	test_expect_code 65 gpt-ckpt-merge --from-hf hfe no 2>err &&
	test_grep "error: $I:[0-9]+: bad JSON: duplicate object key.* \(a tensor or key given twice\); save the model again" err &&
	echo "{\"metadata\": {\"total_size\": 0}}" >$I &&
	test_expect_code 65 gpt-ckpt-merge --from-hf hfe no 2>err &&
	test_grep "error: $I: expected an object \"weight_map\" naming the shard file of each tensor" err &&
	! test -e no &&
	mkdir no && test_expect_code 65 gpt-ckpt-merge --from-hf hfe no && ls -A no >left && test_line_count = 0 left
'

test_expect_success TORCH,VOCAB 'the same for an fp16 file with the GPT-2 vocabulary and bare names' '
	$REF make hf2 50257 1 32 2 128 2 - F16 &&
	gpt-ckpt-merge --from-hf hf2 ck2 &&
	gpt-ckpt-merge --info ck2 >info &&
	test_grep "^  wte +F32 +\[50304, 32\]$" info &&
	gpt-ckpt-merge --to-hf --dtype fp16 ck2 back2 &&
	/usr/bin/python3 -c "
import json, struct
b = open(\"hf2/model.safetensors\", \"rb\").read(); n = struct.unpack(\"<Q\", b[:8])[0]
h = json.loads(b[8:8 + n]); h.pop(\"__metadata__\", None)
out = {(\"transformer.\" + k): v for k, v in h.items()}
import os; os.makedirs(\"hf2p\", exist_ok=True)
hb = json.dumps(dict(out, __metadata__={\"format\": \"pt\"})).encode(); hb += b\" \" * ((8 - len(hb) % 8) % 8)
open(\"hf2p/model.safetensors\", \"wb\").write(struct.pack(\"<Q\", len(hb)) + hb + b[8 + n:])
" &&
	/usr/bin/python3 same.py hf2p back2
'

test_expect_success TORCH 'a converted model trains a step and goes back out' '
	mkdir data &&
	gpt-preprocess -t bytes -o data/lic /usr/share/common-licenses/* &&
	gpt-train -c ck1/step_00000000/config.yaml -o Engine.save_load.ckpt_dir=ck1 \
		-o Data.Train.dataset.input_dir=data/lic -o Data.Train.dataset.split=1 \
		-o Engine.eval_freq=0 -o Engine.test_iters=0 -o Engine.max_steps=1 \
		-o Engine.save_load.save_steps=1 -o Engine.save_load.output_dir=tuned >log 2>&1 &&
	test_grep "resumed from ck1/step_00000000 at global step 0 \(no optimizer state in it: the moments start at zero\)" log &&
	test_grep " - global step 1, epoch" log &&
	gpt-ckpt-merge --to-hf tuned tuned-hf &&
	! /usr/bin/python3 same.py hf1 tuned-hf 2>/dev/null &&
	/usr/bin/python3 -c "
import json, struct
def hdr(p):
    b = open(p, \"rb\").read(); n = struct.unpack(\"<Q\", b[:8])[0]
    h = json.loads(b[8:8 + n]); h.pop(\"__metadata__\", None); return {k: (v[\"dtype\"], v[\"shape\"]) for k, v in h.items()}
assert hdr(\"tuned-hf/model.safetensors\") == hdr(\"back1/model.safetensors\")
"
'

test_expect_success 'set up: a trained checkpoint with optimizer state' '
	test -d data || { mkdir data && gpt-preprocess -t bytes -o data/lic /usr/share/common-licenses/*; } &&
	gpt-train -c "$GPT_ROOT/configs/tiny_cpu_bytes.yaml" -o Data.Train.dataset.input_dir=data/lic \
		-o Data.Train.dataset.split=15,2,0 -o Global.micro_batch_size=1 -o Engine.eval_freq=0 \
		-o Engine.test_iters=0 -o Engine.max_steps=10 -o Engine.save_load.save_steps=5 \
		-o Engine.save_load.output_dir=run >/dev/null 2>&1 &&
	test -f run/step_00000005/index.json
'

test_expect_success '--to-layout mp=2,pp=2,sharding=2: eight parts, the same values' '
	gpt-ckpt-merge --to-layout mp=2,pp=2,sharding=2,stage=2 run/step_00000005 tp 2>err &&
	test_grep "wrote tp/step_00000005" err &&
	ls tp/step_00000005 >files &&
	test "$(grep -c "^rank-.*safetensors$" files)" = 8 &&
	gpt-ckpt-merge --verify tp >v && test_grep ": ok \(step 5, 84 tensors\)" v &&
	test-tool ckpt-diff run/step_00000005 tp/step_00000005 >diff && cat diff &&
	awk "{ exit !(\$2 == 0) }" diff &&
	/usr/bin/python3 -c "
import json
idx = json.load(open(\"tp/step_00000005/index.json\")); st = json.load(open(\"tp/step_00000005/state.json\"))
assert idx[\"ranks\"] == 8
assert st[\"layout\"] == {\"world_size\": 8, \"dp\": 1, \"mp\": 2, \"pp\": 2, \"vpp\": 1, \"sharding\": 2, \"sharding_stage\": 2}, st[\"layout\"]
assert st[\"resharded_from\"][\"world_size\"] == 1
files = lambda t: sorted({p[\"file\"] for p in idx[\"tensors\"][t][\"pieces\"]})
# wte: vocab parallel, first stage only (the last stage holds the tied copy)
assert all(f in (\"rank-00000.safetensors\", \"rank-00001.safetensors\", \"rank-00002.safetensors\", \"rank-00003.safetensors\") for f in files(\"wte\")), files(\"wte\")
# a LayerNorm: tp rank 0 only; ln_f: the last stage
assert all(int(f[5:10]) % 2 == 0 for f in files(\"h.0.ln_1.weight\")), files(\"h.0.ln_1.weight\")
assert all(int(f[5:10]) >= 4 for f in files(\"ln_f.bias\")), files(\"ln_f.bias\")
"
'

test_expect_success 'a checkpoint resharded for sharding4 resumes there as the original does' '
	gpt-ckpt-merge --to-layout sharding=4,stage=2 run/step_00000005 sh4 &&
	ls sh4/step_00000005 | grep -c "^rank-" >n && echo 4 >want && test_cmp want n &&
	resume () {
		gpt-launch --nproc-per-node 4 --log-dir "log-$1" -- \
			gpt-train -c "$GPT_ROOT/configs/tiny_cpu_bytes.yaml" --sharding_parallel_degree 4 --sharding stage2 \
			-o Data.Train.dataset.input_dir=data/lic -o Data.Train.dataset.split=15,2,0 \
			-o Global.micro_batch_size=1 -o Engine.eval_freq=0 -o Engine.test_iters=0 \
			-o Engine.max_steps=10 -o Engine.save_load.save_steps=5 \
			-o Engine.save_load.ckpt_dir="$2" -o Engine.save_load.output_dir="$1" >/dev/null 2>&1
	} &&
	resume r1 run/step_00000005 && resume r2 sh4 &&
	test_grep "resumed from sh4/step_00000005 at global step 5" log-r2/workerlog.0 &&
	for f in $(ls r1/step_00000010 | grep safetensors); do
		cmp r1/step_00000010/$f r2/step_00000010/$f || exit 1
	done
'

test_expect_success 'state.json records vpp: a cut for pp=2,vpp=2, and a pp2 x vpp2 run resumed from it' '
	tiny4="-c $GPT_ROOT/configs/tiny_cpu_bytes.yaml -o Model.num_layers=4 \
		-o Data.Train.dataset.input_dir=data/lic -o Data.Train.dataset.split=15,2,0 \
		-o Global.micro_batch_size=1 -o Engine.eval_freq=0 -o Engine.test_iters=0 \
		-o Engine.save_load.save_steps=2" &&
	gpt-train $tiny4 -o Engine.max_steps=2 -o Engine.save_load.output_dir=l4 >/dev/null 2>&1 &&
	gpt-ckpt-merge --to-layout pp=2,vpp=2 l4 v2 2>err &&
	test_grep "wrote v2/step_00000002" err &&
	gpt-launch --nproc-per-node 2 --log-dir log-v2 -- gpt-train $tiny4 --pipeline_parallel_degree 2 \
		-o Distributed.virtual_pp_degree=2 -o Engine.max_steps=4 \
		-o Engine.save_load.ckpt_dir=v2 -o Engine.save_load.output_dir=v2r >/dev/null 2>&1 &&
	test_grep "resumed from v2/step_00000002 at global step 2" log-v2/workerlog.0 &&
	/usr/bin/python3 -c "
import json
lay = lambda p: json.load(open(p))[\"layout\"]
want = {\"world_size\": 2, \"dp\": 1, \"mp\": 1, \"pp\": 2, \"vpp\": 2, \"sharding\": 1, \"sharding_stage\": 0}
assert lay(\"v2/step_00000002/state.json\") == want, lay(\"v2/step_00000002/state.json\")
assert lay(\"v2r/step_00000004/state.json\") == want, lay(\"v2r/step_00000004/state.json\")
assert lay(\"l4/step_00000002/state.json\")[\"vpp\"] == 1
assert json.load(open(\"v2/step_00000002/state.json\"))[\"resharded_from\"] == lay(\"l4/step_00000002/state.json\")
"
'

test_expect_success 'bad layouts, bad HF files and used output directories are refused' '
	test_expect_code 64 gpt-ckpt-merge --to-layout mp=3 run x 2>err &&
	test_grep "mp 3 does not divide the attention heads \(4\)" err &&
	test_expect_code 64 gpt-ckpt-merge --to-layout pp=2,foo=1 run x 2>err &&
	test_grep "foo=1.*expected mp" err &&
	test_expect_code 64 gpt-ckpt-merge --to-layout pp=4 run x 2>err &&
	test_grep "pp 4 is more than the 2 layers" err &&
	test_expect_code 64 gpt-ckpt-merge --to-layout pp=2,vpp=2 run x 2>err &&
	test_grep "the 2 layers do not split evenly over pp 2 x vpp 2 = 4 pipeline stages; give pp= and vpp= whose product divides 2$" err &&
	! grep pp_layers err &&
	test_expect_code 64 gpt-ckpt-merge --to-layout pp=2,vpp=1000 run x 2>err &&
	test_grep "vpp 1000: at most [0-9]+ virtual stages per rank" err &&
	test_expect_code 64 gpt-ckpt-merge --to-layout dp=2 run tp 2>err &&
	test_grep "tp: already holds checkpoints" err &&
	! test -e x &&
	mkdir used && s=$(cat run/latest) && cp -r "run/$s" used/ && (cd used && find . -type f | sort | xargs cat) >used.before &&
	test_expect_code 64 gpt-ckpt-merge --to-layout dp=2 run used 2>err &&
	test_grep "used/step_[0-9]+: already exists; choose a new directory, or move it away" err &&
	(cd used && find . -type f | sort | xargs cat) >used.after && cmp used.before used.after &&
	! test -e used/latest &&
	mkdir hfbad && echo "{\"vocab_size\": 257, \"n_embd\": 64, \"n_layer\": 2, \"n_head\": 4, \"n_positions\": 64, \"activation_function\": \"relu\"}" >hfbad/config.json &&
	test_expect_code 65 gpt-ckpt-merge --from-hf hfbad y 2>err &&
	test_grep "activation_function .relu." err &&
	test_expect_code 66 gpt-ckpt-merge --from-hf nothing y 2>err &&
	! test -e y/latest
'

test_expect_success 'an HF directory whose weights are pickled says so and how to save them' '
	mkdir hfpickle &&
	echo "{\"vocab_size\": 257, \"n_embd\": 64, \"n_layer\": 2, \"n_head\": 4, \"n_positions\": 64}" >hfpickle/config.json &&
	: >hfpickle/pytorch_model.bin &&
	test_expect_code 66 gpt-ckpt-merge --from-hf hfpickle y 2>err &&
	test_grep "hfpickle/model.safetensors: missing; the weights are PyTorch pickles \(hfpickle/pytorch_model.bin\), which gptkit does not read: save the model again with save_pretrained\(DIR, safe_serialization=True\)" err &&
	: >hfpickle/pytorch_model.bin.index.json &&
	test_expect_code 66 gpt-ckpt-merge --from-hf hfpickle y 2>err &&
	test_grep "hfpickle/model.safetensors: missing; the weights are PyTorch pickles \(hfpickle/pytorch_model.bin.index.json\)" err &&
	! test -e y
'

test_expect_success '--to-layout writes the new layout into config.yaml, or nothing when it cannot train the global batch' '
	gpt-ckpt-merge --to-layout dp=2 --micro-batch-size 4 run m4 &&
	for kv in "global_batch_size: 8" "local_batch_size: 4" "micro_batch_size: 4" "accumulate_steps: 1" \
		"dp_degree: 2" "sharding_degree: 1" "mp_degree: 1"; do
		test_grep "^ +$kv$" m4/step_00000010/config.yaml || return 1
	done &&
	test_grep "^# world size 2 = dp_degree 2 x" m4/step_00000010/config.yaml &&
	test_expect_code 64 gpt-ckpt-merge --to-layout dp=16 run gb 2>err &&
	test_grep "error: --to-layout: the global batch of 8 samples \(Global.global_batch_size in run/step_00000010/config.yaml\) does not split over dp 16 x sharding 1 = 16 data replicas; choose dp and sharding whose product divides 8" err &&
	test_expect_code 64 gpt-ckpt-merge --to-layout dp=2,sharding=2 m4 gb 2>err &&
	test_grep "error: --to-layout: micro-batches of 4 samples \(the checkpoint.s Global.micro_batch_size\) do not divide the batch of 2 samples of each of the 4 data replicas \(global batch 8 / \(dp 2 x sharding 2\)\); give --micro-batch-size 2 \(or another divisor of 2\), or choose fewer data replicas$" err &&
	test_expect_code 64 gpt-ckpt-merge --to-layout dp=2 --micro-batch-size 3 run gb 2>err &&
	test_grep "micro-batches of 3 samples \(--micro-batch-size\) do not divide the batch of 4 samples" err &&
	test_expect_code 64 gpt-ckpt-merge --to-layout pp=2,vpp=2,dp=8 l4 gb 2>err &&
	test_grep "the interleaved schedule \(vpp 2\) takes micro-batches in groups of pp 2, and a batch of 1 samples per data replica \(global batch 8 / \(dp 8 x sharding 1\)\) makes no whole number of groups; choose fewer data replicas or vpp=1" err &&
	! test -e gb &&
	test_expect_code 64 gpt-ckpt-merge --to-layout dp=2 --micro-batch-size 0 run gb 2>err &&
	test_grep "micro-batch-size 0: expected a number of samples >= 1" err &&
	test_expect_code 64 gpt-ckpt-merge --consolidate --micro-batch-size 2 run gb 2>err &&
	test_grep "micro-batch-size applies to --to-layout only" err &&
	! test -e gb
'

test_expect_success 'a failed or interrupted --to-layout or --from-hf leaves nothing it made' '
	. "$GPT_ROOT/tests/cli/lib-faultfs.sh" && build_faultfs &&
	gpt-ckpt-merge --to-hf run hfrun &&
	test_expect_code 64 gpt-ckpt-merge --to-layout pp=2,vpp=2 run x &&
	! test -e x &&
	test_expect_code 64 gpt-ckpt-merge --to-layout pp=2,vpp=2 run n1/n2//n3/ &&
	! test -e n1 &&
	mkdir mine && test_expect_code 64 gpt-ckpt-merge --to-layout pp=2,vpp=2 run mine/new &&
	test -d mine && ! test -e mine/new &&
	test_expect_code 74 with_faults FAULT_MATCH="*rank-00001.safetensors*" FAULT_OPS=write -- \
		gpt-ckpt-merge --to-layout mp=2 run w1/out 2>err &&
	test_grep "rank-00001.safetensors" err && ! test -e w1 &&
	test_expect_code 74 with_faults FAULT_MATCH="*/.latest.tmp*" FAULT_OPS=write -- \
		gpt-ckpt-merge --to-layout mp=2 run w2 2>err &&
	test_grep "^gpt-ckpt-merge: error: w2/latest: write: No space left on device$" err && ! test -e w2 &&
	test_expect_code 74 with_faults FAULT_MATCH="*rank-00000.safetensors*" FAULT_OPS=write -- \
		gpt-ckpt-merge --from-hf hfrun mine/w3 &&
	! test -e mine/w3 &&
	test_expect_code 143 with_faults FAULT_MATCH="*rank-00001.safetensors*" FAULT_OPS=write FAULT_SIGNAL=15 -- \
		gpt-ckpt-merge --to-layout mp=2 run s1/out &&
	! test -e s1 &&
	test_expect_code 143 with_faults FAULT_MATCH="*rank-00000.safetensors*" FAULT_OPS=write FAULT_SIGNAL=15 -- \
		gpt-ckpt-merge --from-hf hfrun mine/s2 &&
	! test -e mine/s2 && test -d mine
'

test_expect_success 'a file size limit (ulimit -f) is an error naming the file, for every output; nothing left' '
	for m in "--consolidate run f1.safetensors" "--to-hf run f2" "--to-layout mp=2 run f3" "--from-hf hfrun f4"; do
		code=0 &&
		(ulimit -f 100 && exec gpt-ckpt-merge $m) 2>err || code=$? &&
		test $code = 74 &&
		test_grep "^gpt-ckpt-merge: error: .*f[1-4].*: write: File too large" err &&
		! ls -a | grep "^\.*f[1-4]" || return 1
	done
'

test_expect_success '--to-layout and --from-hf refuse a directory gpt-train trains into, and gpt-train one they write' '
	. "$GPT_ROOT/tests/cli/lib-faultfs.sh" && { test -f faultfs.so || build_faultfs; } &&
	{ (gpt-train -c "$GPT_ROOT/configs/tiny_cpu_bytes.yaml" -o Data.Train.dataset.input_dir=data/lic \
		-o Data.Train.dataset.split=15,2,0 -o Global.micro_batch_size=1 -o Engine.eval_freq=0 \
		-o Engine.test_iters=0 -o Engine.max_steps=100000 -o Optimizer.lr.decay_steps=100000 \
		-o Engine.save_load.save_steps=0 -o Engine.save_load.output_dir=busy >busy.log 2>&1) & } &&
	pid=$! &&
	{ test_wait_line busy.log " - global step 2, epoch" || { kill -9 $pid; false; }; } &&
	c1=0 && gpt-ckpt-merge --from-hf hfrun busy 2>err1 || c1=$? &&
	c2=0 && gpt-ckpt-merge --to-layout mp=2 run busy 2>err2 || c2=$? &&
	kill -9 $pid && { wait $pid || :; } &&
	test "$c1" = 64 && test "$c2" = 64 &&
	test_grep "error: busy: another run is training into it or gpt-ckpt-merge is writing into it; wait" err1 &&
	test_grep "error: busy: another run is training into it or gpt-ckpt-merge is writing into it; wait" err2 &&
	ls -A busy >left && test_line_count = 0 left &&
	{ env LD_PRELOAD="$PWD/faultfs.so" FAULT_MATCH="*rank-00001.safetensors*" FAULT_OPS=write FAULT_SIGNAL=19 \
		gpt-ckpt-merge --to-layout mp=2 run paused 2>perr & } &&
	mpid=$! &&
	n=0 && while ! ps -o stat= -p $mpid | grep -q T && [ $n -lt 600 ]; do sleep 0.05; n=$((n + 1)); done &&
	c3=0 && gpt-train -c "$GPT_ROOT/configs/tiny_cpu_bytes.yaml" -o Data.Train.dataset.input_dir=data/lic \
		-o Engine.max_steps=1 -o Engine.save_load.output_dir=paused >plog 2>&1 || c3=$? &&
	kill -CONT $mpid && wait $mpid &&
	test "$c3" = 64 &&
	test_grep "error: Engine.save_load.output_dir paused: another run is training into it or gpt-ckpt-merge is writing into it" plog &&
	test_grep "wrote paused/step_00000010" perr &&
	gpt-ckpt-merge --verify paused
'

test_expect_success 'the config.yaml of --from-hf trains from the converted weights and saves beside them' '
	{ test -d hfrun || gpt-ckpt-merge --to-hf run hfrun; } &&
	mkdir ft && cd ft && mkdir output &&
	gpt-ckpt-merge --from-hf ../hfrun imported &&
	test_grep "^    output_dir: \"imported\"$" imported/step_00000000/config.yaml &&
	gpt-train -c imported/step_00000000/config.yaml -o Data.Train.dataset.input_dir=../data/lic \
		-o Data.Train.dataset.split=15,2,0 -o Engine.eval_freq=0 -o Engine.test_iters=0 \
		-o Engine.max_steps=1 -o Engine.save_load.save_steps=1 >log 2>&1 &&
	test_grep "resumed from imported/step_00000000 at global step 0 \(no optimizer state in it" log &&
	gpt-ckpt-merge --verify imported >v && test_grep "^imported/step_00000001: ok" v &&
	ls -A output >left && test_line_count = 0 left
'

# hfedit KEY VALUE [KEY VALUE]...: back1 with those keys of config.json set, as hfx/
hfedit () {
	rm -rf hfx && cp -r back1 hfx &&
	/usr/bin/python3 -c "import json, sys
c = json.load(open(\"hfx/config.json\"))
for k, v in zip(sys.argv[1::2], sys.argv[2::2]): c[k] = json.loads(v)
json.dump(c, open(\"hfx/config.json\", \"w\"))" "$@"
}

test_expect_success 'gpt-infer takes no Hugging Face directory that --from-hf refuses' '
	gpt-infer -m back1 -o Generation.max_dec_len=2 "GNU" >/dev/null &&
	hfedit scale_attn_weights true scale_attn_by_inverse_layer_idx false &&
	gpt-infer -m hfx -o Generation.max_dec_len=2 "GNU" >/dev/null &&
	for kv in "n_layer 1:has no place" "activation_function \"relu\":activation_function .relu." \
		"model_type \"llama\":model_type .llama." "tie_word_embeddings false:tie_word_embeddings false" \
		"vocab_size 1000000000:tensor .*wte.weight. has another shape" "n_head 0:expected a GPT-2 config.json" \
		"vocab_size 9223372036854775807:hfx/config.json: vocab_size 9223372036854775807: expected at most 1073741824 \(gptkit.s Model.vocab_size\)" \
		"n_embd 9223372036854775807:n_embd 9223372036854775807: expected at most 1048576 \(gptkit.s Model.hidden_size\)" \
		"n_positions 9223372036854775807:n_positions 9223372036854775807: expected at most 1048576" \
		"n_inner 4611686018427387904:n_inner 4611686018427387904: expected at most 16777216" \
		"n_head 3:hfx/config.json: " \
		"scale_attn_weights false:scale_attn_weights false: gptkit.s attention divides the scores by sqrt" \
		"scale_attn_by_inverse_layer_idx true:scale_attn_by_inverse_layer_idx true: gptkit.s attention does not divide"; do
		hfedit ${kv%%:*} &&
		test_expect_code 65 gpt-ckpt-merge --from-hf hfx y 2>err &&
		test_grep "${kv#*:}" err &&
		test_expect_code 65 gpt-infer -m hfx -o Generation.max_dec_len=2 "GNU" >out 2>err &&
		test_grep "${kv#*:}" err && test_line_count = 0 out || return 1
	done
'


# strename FILE OLD NEW: every tensor of the safetensors FILE whose name
# starts with OLD starts with NEW instead ("-": the tensor is dropped)
cat >strename.py <<'PY'
import json, struct, sys
p, old, new = sys.argv[1:4]
b = open(p, "rb").read(); n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
h = {(k if k == "__metadata__" or not k.startswith(old) else new + k[len(old):]): v
     for k, v in h.items() if new != "-" or k == "__metadata__" or not k.startswith(old)}
hb = json.dumps(h).encode(); hb += b" " * ((8 - len(hb) % 8) % 8)
open(p, "wb").write(struct.pack("<Q", len(hb)) + hb + b[8 + n:])
PY

test_expect_success 'a directory without weights lists what it looked for, a link to a missing blob says so (gpt-infer too)' '
	{ test -d hfrun || gpt-ckpt-merge --to-hf run hfrun; } &&
	mkdir hfnone && cp hfrun/config.json hfnone/ &&
	for c in "gpt-ckpt-merge --from-hf hfnone y" "gpt-infer -m hfnone x"; do
		test_expect_code 66 $c >out 2>err &&
		test_grep "error: hfnone: holds config.json but no weights: found none of model.safetensors, model.safetensors.index.json \(with its shards\), pytorch_model.bin and pytorch_model.bin.index.json; copy the model.s weights beside config.json \(save_pretrained\(DIR, safe_serialization=True\) writes model.safetensors\), or name the directory that holds them$" err &&
		test_line_count = 0 out || return 1
	done &&
	ln -s ../../blobs/gone hfnone/model.safetensors &&
	test_expect_code 66 gpt-ckpt-merge --from-hf hfnone y 2>err &&
	test_grep "error: hfnone/model.safetensors: a symbolic link to ../../blobs/gone, which does not exist \(a Hugging Face cache snapshot links to the cache.s blobs\); copy the snapshot with cp -L, or name it in the cache$" err &&
	! test -e y
'

test_expect_success 'a file that lacks a tensor says why: fewer layers, another prefix, another architecture' '
	{ test -d hfrun || gpt-ckpt-merge --to-hf run hfrun; } &&
	for kv in "transformer.h.1. -:no tensor .transformer.h.1.ln_1.weight. \(gptkit.s h.1.ln_1.weight\); the file.s layers end at h.0 but its config.json says n_layer 2: the config.json is not the one saved with these weights; copy in the model.s own, or set n_layer to 1$" \
		"transformer.h.0.ln_2.bias -:no tensor .transformer.h.0.ln_2.bias. \(gptkit.s h.0.ln_2.bias\); the file holds GPT-2.s names but not this one, which GPT2LMHeadModel of its config.json has: it was saved from another model or is damaged; save the model again with save_pretrained$" \
		"transformer. gpt2.:no tensor .wte.weight. \(gptkit.s wte\); it holds .gpt2.wte.weight.: its names lie under another prefix than .transformer.. \(or none\), as the state_dict of a module wrapping the GPT-2 has them; save the GPT-2 itself with save_pretrained$" \
		"transformer.wte model.embed_tokens:no tensor .wte.weight. \(gptkit.s wte\); its 28 tensors \(the first .model.embed_tokens.weight.\) are not named as Hugging Face.s GPT-2 names them \(\[transformer.\]wte.weight, wpe.weight, h.N.attn.c_attn.weight, ...\): it is another architecture.s, which gptkit does not read; convert a GPT-2 \(model_type gpt2\)$"; do
		rm -rf hfx && cp -r hfrun hfx &&
		/usr/bin/python3 strename.py hfx/model.safetensors ${kv%%:*} &&
		test_expect_code 65 gpt-ckpt-merge --from-hf hfx y 2>err &&
		test_grep "error: hfx/model.safetensors: ${kv#*:}" err &&
		test_expect_code 65 gpt-infer -m hfx x >out 2>err &&
		test_grep "error: hfx/model.safetensors: ${kv#*:}" err && test_line_count = 0 out || return 1
	done &&
	rm -rf hfx && cp -r hfrun hfx &&
	/usr/bin/python3 -c "import json; c = json.load(open(\"hfx/config.json\")); c[\"n_layer\"] = 3; json.dump(c, open(\"hfx/config.json\", \"w\"))" &&
	test_expect_code 65 gpt-ckpt-merge --from-hf hfx y 2>err &&
	test_grep "error: hfx/model.safetensors: no tensor .transformer.h.2.ln_1.weight. \(gptkit.s h.2.ln_1.weight\); the file.s layers end at h.1 but its config.json says n_layer 3" err &&
	! test -e y
'

test_done
