#!/bin/sh
# bfloat16 training keeps its fp32 master weights split: the bf16 parameter
# is the high half, the optimizer keeps the low 16 bits (lib/train/optim.c).
# Whatever writes the parameters or the low halves besides the optimizer
# step (a checkpoint's save and load, a resharded or a weights-only
# checkpoint, the tied wte of the last pipeline stage, the copies tensor
# parallelism replicates, quantization-aware training) must keep the two
# halves one fp32 value on every rank: the checkpoints hold that value (not
# its bf16 rounding), and a run stopped and resumed, or resumed from a
# checkpoint that gpt-ckpt-merge --to-layout cut for another layout, is bit
# for bit the unbroken run. A bf16 checkpoint resumes as float16 and the
# other way round.
. "$(dirname "$0")/test-lib.sh"

BF="-o Engine.mix_precision.enable=True -o Engine.mix_precision.dtype=bfloat16"
FP="-o Engine.mix_precision.enable=True -o Engine.mix_precision.dtype=float16"
# the layout flags, the output_dir, max_steps and whatever else follow
train () { # name nproc args...: its worker logs in log-NAME
	name=$1 np=$2
	shift 2
	rm -rf "log-$name" &&
	gpt-launch --nproc-per-node "$np" --log-dir "log-$name" -- \
		gpt-train -c "$GPT_ROOT/configs/tiny_cpu_bytes.yaml" \
		-o Data.Train.dataset.input_dir=data/lic -o Data.Eval.dataset.input_dir=data/lic \
		-o Data.Train.dataset.split=15,2,0 -o Data.Eval.dataset.split=15,2,0 -o Model.num_layers=4 \
		-o Global.micro_batch_size=1 -o Engine.eval_freq=0 -o Engine.test_iters=0 -o Optimizer.lr.max_lr=2e-3 \
		-o Optimizer.lr.decay_steps=150 -o Optimizer.lr.warmup_steps=2 -o Model.hidden_dropout_prob=0.1 \
		-o Model.attention_probs_dropout_prob=0.1 -o Engine.save_load.save_steps=5 "$@"
}

# every safetensors file of two step directories the same bytes
same_parts () {
	ls "$1" | grep safetensors >p1 && ls "$2" | grep safetensors >p2 && test_cmp p1 p2 &&
	for f in $(cat p1); do
		cmp "$1/$f" "$2/$f" || return 1
	done
}

# The weights a checkpoint saved, as fp32 bits: the share whose low 16 bits
# are not zero. Master weights that lost their low halves (the bf16
# parameters saved alone) have none; after a few AdamW steps nearly all do.
low_share () {
	/usr/bin/python3 - "$1" <<-'EOF'
	import array, glob, json, struct, sys
	n = low = 0
	for f in glob.glob(sys.argv[1] + "/rank-*.safetensors"):
	    b = open(f, "rb").read()
	    k = struct.unpack("<Q", b[:8])[0]
	    h = json.loads(b[8:8 + k])
	    h.pop("__metadata__", None)
	    for name, t in h.items():
	        if name.startswith(("optim.", "qat.")) or t["dtype"] != "F32":
	            continue
	        s, e = t["data_offsets"]
	        a = array.array("I", b[8 + k + s:8 + k + e])
	        n += len(a)
	        low += sum(1 for x in a if x & 0xffff)
	print("%.4f" % (low / n if n else 0))
	EOF
}

# The weight tensors of two checkpoints (any layouts) the same bits
same_weights () {
	rm -f w1.safetensors w2.safetensors &&
	gpt-ckpt-merge --consolidate --weights-only "$1" w1.safetensors 2>/dev/null &&
	gpt-ckpt-merge --consolidate --weights-only "$2" w2.safetensors 2>/dev/null &&
	/usr/bin/python3 - w1.safetensors w2.safetensors <<-'EOF'
	import json, struct, sys
	def tensors(f):
	    b = open(f, "rb").read()
	    k = struct.unpack("<Q", b[:8])[0]
	    h = json.loads(b[8:8 + k])
	    h.pop("__metadata__", None)
	    return {n: b[8 + k + t["data_offsets"][0]:8 + k + t["data_offsets"][1]] for n, t in h.items()}
	a, b = tensors(sys.argv[1]), tensors(sys.argv[2])
	assert sorted(a) == sorted(b), (sorted(a), sorted(b))
	bad = [n for n in a if a[n] != b[n]]
	assert not bad, "different bits: " + " ".join(bad)
	EOF
}

test_expect_success 'set up: data' '
	mkdir data &&
	gpt-preprocess -t bytes -o data/lic /usr/share/common-licenses/* 2>/dev/null
'

# Stop at 5 and resume to 10: the same bytes as an unbroken run. pp2: the
# last stage keeps a copy of the tied wte, which no rank saves and every
# resume splits again; mp2: the LayerNorms and row-parallel biases are
# replicated over the tp ranks, each with its own low halves.
while IFS='|' read -r np lay; do
test_expect_success "bf16 stop and resume is bit for bit ($np ranks: $lay)" '
	rm -rf full part &&
	train full '"$np"' $BF '"$lay"' -o Engine.save_load.output_dir=full -o Engine.max_steps=10 >/dev/null 2>&1 &&
	train part1 '"$np"' $BF '"$lay"' -o Engine.save_load.output_dir=part -o Engine.max_steps=5 >/dev/null 2>&1 &&
	train part2 '"$np"' $BF '"$lay"' -o Engine.save_load.output_dir=part -o Engine.max_steps=10 >/dev/null 2>&1 &&
	test_grep "resumed from part/step_00000005 at global step 5" log-part2/workerlog.0 &&
	same_parts full/step_00000010 part/step_00000010 &&
	share=$(low_share part/step_00000005) && echo "weights with low bits at step 5: $share" &&
	test "$(echo "$share > 0.9" | bc)" = 1
'
done <<LAYOUTS
2|--pipeline_parallel_degree 2
2|--tensor_parallel_degree 2 -o Engine.save_load.async_save=True
4|--pipeline_parallel_degree 2 --sharding_parallel_degree 2 --sharding stage2
LAYOUTS

test_expect_success 'a bf16 checkpoint cut by gpt-ckpt-merge --to-layout resumes as the original does' '
	rm -rf one pp &&
	train one 1 $BF -o Engine.save_load.output_dir=one -o Engine.max_steps=10 >/dev/null 2>&1 &&
	train pp 2 $BF --pipeline_parallel_degree 2 -o Engine.save_load.output_dir=pp \
		-o Engine.max_steps=10 >/dev/null 2>&1 &&
	gpt-ckpt-merge --to-layout mp=2,pp=2 one/step_00000005 one-cut 2>err &&
	gpt-ckpt-merge --to-layout mp=2 pp/step_00000005 pp-cut 2>err &&
	train one-r 1 $BF -o Engine.save_load.ckpt_dir=one-cut -o Engine.save_load.output_dir=one-r \
		-o Engine.max_steps=10 >/dev/null 2>&1 &&
	train pp-r 2 $BF --pipeline_parallel_degree 2 -o Engine.save_load.ckpt_dir=pp-cut \
		-o Engine.save_load.output_dir=pp-r -o Engine.max_steps=10 >/dev/null 2>&1 &&
	test_grep "resumed from one-cut/step_00000005 at global step 5" log-one-r/workerlog.0 &&
	test_grep "resumed from pp-cut/step_00000005 at global step 5" log-pp-r/workerlog.0 &&
	same_parts one/step_00000010 one-r/step_00000010 &&
	same_parts pp/step_00000010 pp-r/step_00000010
'

test_expect_success 'quantization-aware training in bf16 (PACT, mp2) stops and resumes bit for bit' '
	rm -rf full part &&
	Q="-o Quantization.enable=True -o Quantization.weight_preprocess_type=PACT --tensor_parallel_degree 2" &&
	train full 2 $BF $Q -o Engine.save_load.output_dir=full -o Engine.max_steps=10 >/dev/null 2>&1 &&
	train part1 2 $BF $Q -o Engine.save_load.output_dir=part -o Engine.max_steps=5 >/dev/null 2>&1 &&
	train part2 2 $BF $Q -o Engine.save_load.output_dir=part -o Engine.max_steps=10 >/dev/null 2>&1 &&
	test_grep "resumed from part/step_00000005 at global step 5" log-part2/workerlog.0 &&
	same_parts full/step_00000010 part/step_00000010 &&
	share=$(low_share part/step_00000005) && echo "weights with low bits at step 5: $share" &&
	test "$(echo "$share > 0.9" | bc)" = 1
'

# Resumed in the other 16-bit type, the master weights carry over whole:
# the first step after the resume has the unbroken run's loss to 16-bit
# precision and the run goes on as close.
test_expect_success 'a bf16 checkpoint resumes as float16, a float16 one as bf16' '
	train fp 1 $FP -o Engine.save_load.output_dir=fp -o Engine.max_steps=10 >/dev/null 2>&1 &&
	train bf-fp 1 $FP -o Engine.save_load.ckpt_dir=one/step_00000005 -o Engine.save_load.output_dir=bf-fp \
		-o Engine.max_steps=10 >/dev/null 2>&1 &&
	train fp-bf 1 $BF -o Engine.save_load.ckpt_dir=fp/step_00000005 -o Engine.save_load.output_dir=fp-bf \
		-o Engine.max_steps=10 >/dev/null 2>&1 &&
	test_grep "resumed from one/step_00000005 at global step 5" log-bf-fp/workerlog.0 &&
	test_grep "resumed from fp/step_00000005 at global step 5" log-fp-bf/workerlog.0 &&
	train_losses log-one/workerlog.0 | tail -n 5 >want-bf && train_losses log-bf-fp/workerlog.0 >got-fp &&
	train_losses log-fp/workerlog.0 | tail -n 5 >want-fp && train_losses log-fp-bf/workerlog.0 >got-bf &&
	for p in "want-bf got-fp" "want-fp got-bf"; do
		set -- $p &&
		cat "$1" "$2" &&
		test_line_count = 5 "$2" &&
		paste "$1" "$2" | awk "{ d = (\$2 - \$4) / \$2; if (d < 0) d = -d; t = NR == 1 ? 2e-3 : 1e-2;
			if (\$1 != \$3 || !(d <= t)) bad = 1 } END { exit bad }" || return 1
	done
'

# A step at learning rate 0 changes no weight (w - 0 x update): resumed from
# a checkpoint and saved again, the weights are the checkpoint's, bit for
# bit, whatever low bits its masters have (a float16 run's) and whichever
# layout splits and joins them; and a bf16 checkpoint's masters resume whole
# as float16's.
test_expect_success 'resumed at learning rate 0, a step saves the master weights it loaded' '
	while IFS="|" read -r np from flags; do
		rm -rf z &&
		train z $np $flags -o Optimizer.lr.max_lr=0 -o Optimizer.lr.min_lr=0 \
			-o Engine.save_load.ckpt_dir=$from -o Engine.save_load.output_dir=z \
			-o Engine.max_steps=6 -o Engine.save_load.save_steps=6 >/dev/null 2>&1 &&
		test_grep "resumed from $from at global step 5" log-z/workerlog.0 &&
		echo "$from resumed on $np ranks with $flags:" &&
		same_weights $from z/step_00000006 || return 1
	done <<-EOF
	1|fp/step_00000005|$BF
	2|one/step_00000005|$BF --pipeline_parallel_degree 2
	4|pp/step_00000005|$BF --tensor_parallel_degree 2 --sharding_parallel_degree 2 --sharding stage3
	2|pp/step_00000005|$FP --tensor_parallel_degree 2
	EOF
'

test_expect_success 'a weights-only checkpoint (--to-hf, then --from-hf) resumes in bf16 with its fp32 weights whole' '
	gpt-ckpt-merge --to-hf one/step_00000005 hf 2>err &&
	gpt-ckpt-merge --from-hf hf hfck 2>err &&
	rm -rf z &&
	train z 2 $BF --tensor_parallel_degree 2 -o Optimizer.lr.max_lr=0 -o Optimizer.lr.min_lr=0 \
		-o Engine.save_load.ckpt_dir=hfck -o Engine.save_load.output_dir=z \
		-o Engine.max_steps=1 -o Engine.save_load.save_steps=1 >/dev/null 2>&1 &&
	test_grep "resumed from hfck/step_00000000 at global step 0 \(no optimizer state in it" log-z/workerlog.0 &&
	same_weights one/step_00000005 z/step_00000001
'

test_done
