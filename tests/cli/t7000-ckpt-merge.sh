#!/bin/sh
# gpt-ckpt-merge: --info, --verify, --consolidate, --to-hf, damaged input, and an
# output inside the checkpoint being read (gpt-export's too).
. "$(dirname "$0")/test-lib.sh"

test_expect_success 'set up: a trained tiny checkpoint' '
	mkdir data &&
	gpt-preprocess -t bytes -o data/lic /usr/share/common-licenses/* &&
	gpt-train -c "$GPT_ROOT/configs/tiny_cpu_bytes.yaml" -o Data.Train.dataset.input_dir=data/lic \
		-o Data.Train.dataset.split=1 -o Engine.eval_freq=0 -o Engine.test_iters=0 \
		-o Engine.max_steps=3 -o Engine.save_load.save_steps=3 >log 2>&1 &&
	test -f output/step_00000003/index.json
'

test_expect_success '--info lists the step and every tensor' '
	gpt-ckpt-merge --info output >info &&
	test_grep "^checkpoint: output/step_00000003$" info &&
	test_grep "^step: 3$" info &&
	test_grep "^  h.1.attn.qkv.weight +F32 +\[3, 64, 64\]$" info &&
	test_grep "^  optim.exp_avg_sq.wte +F32 +\[384, 64\]$" info &&
	test_grep "^weight elements: 128768$" info
'

test_expect_success '--verify passes a good checkpoint and names the file of a damaged one' '
	gpt-ckpt-merge --verify output >v &&
	test_grep ": ok \(step 3, 84 tensors\)$" v &&
	cp -r output/step_00000003 bad &&
	printf X | dd of=bad/rank-00000.safetensors bs=1 seek=3000 conv=notrunc 2>/dev/null &&
	test_expect_code 65 gpt-ckpt-merge --verify bad 2>err &&
	test_grep "bad/rank-00000.safetensors: checksum .* corrupted" err &&
	test_expect_code 66 gpt-ckpt-merge --verify nothing 2>err
'

test_expect_success '--info and --verify into a full disk fail (74), naming standard output' '
	test_expect_code 74 gpt-ckpt-merge --info output >/dev/full 2>err &&
	test_grep "^gpt-ckpt-merge: error: standard output: No space left on device$" err &&
	test_expect_code 74 gpt-ckpt-merge --verify output >/dev/full 2>err &&
	test_grep "^gpt-ckpt-merge: error: standard output: No space left on device$" err
'

test_expect_success '--consolidate writes every tensor, or the weights only in bf16' '
	gpt-ckpt-merge --consolidate output all.safetensors &&
	gpt-ckpt-merge --consolidate --weights-only --dtype bf16 output w.safetensors &&
	test "$(stat -c %s w.safetensors)" -lt "$(stat -c %s all.safetensors)" &&
	/usr/bin/python3 -c "
import json, struct, sys
for f, n, dt in ((\"all.safetensors\", 84, \"F32\"), (\"w.safetensors\", 28, \"BF16\")):
    b = open(f, \"rb\").read(); h = json.loads(b[8:8 + struct.unpack(\"<Q\", b[:8])[0]])
    meta = h.pop(\"__metadata__\")
    assert len(h) == n, (f, len(h)); assert meta[\"step\"] == \"3\"
    assert h[\"h.0.mlp.fc.weight\"][\"dtype\"] == dt and h[\"h.0.mlp.fc.weight\"][\"shape\"] == [256, 64]
"
'

test_expect_success '--to-hf writes a Hugging Face directory' '
	gpt-ckpt-merge --to-hf output hf &&
	test -f hf/model.safetensors && test -f hf/config.json
'

test_expect_success 'an output inside the checkpoint being read is refused; the checkpoint stays whole' '
	S=output/step_00000003 &&
	for out in $S/rank-00000.safetensors $S/index.json $S/new.safetensors output/../$S/x; do
		test_expect_code 64 gpt-ckpt-merge --consolidate output $out 2>err &&
		test_grep "error: $out: inside the checkpoint output/step_00000003 being read, whose files it would replace; write somewhere else" err ||
		return 1
	done &&
	test_expect_code 64 gpt-ckpt-merge --to-layout mp=2 output $S 2>err &&
	test_grep "error: $S: inside the checkpoint" err &&
	test_expect_code 64 gpt-ckpt-merge --to-hf output $S/hf 2>err &&
	test_expect_code 64 gpt-export -o $S/rank-00000.safetensors --format gguf output 2>err &&
	test_grep "error: $S/rank-00000.safetensors: inside the checkpoint" err &&
	test ! -e $S/new.safetensors && test ! -e $S/hf && test ! -e $S/latest &&
	gpt-ckpt-merge --verify output &&
	gpt-ckpt-merge --consolidate output output/next-to-it.safetensors
'

test_expect_success 'an existing output is not replaced; a missing part is an incomplete checkpoint (65)' '
	echo keep >existing.safetensors &&
	test_expect_code 64 gpt-ckpt-merge --consolidate output existing.safetensors 2>err &&
	test_grep "error: existing.safetensors: exists; remove it or choose another name" err &&
	test "$(cat existing.safetensors)" = keep &&
	cp -r output/step_00000003 part && rm part/rank-00000.safetensors &&
	test_expect_code 65 gpt-ckpt-merge --verify part 2>err &&
	test_grep "part/rank-00000.safetensors: checkpoint file listed in index.json: No such file" err
'

test_expect_success 'Megatron-LM and llm.c checkpoints are named as such, with what to give instead' '
	mkdir -p mg/iter_0000010/mp_rank_00 && echo 10 >mg/latest_checkpointed_iteration.txt &&
	: >mg/iter_0000010/mp_rank_00/model_optim_rng.pt &&
	test_expect_code 65 gpt-ckpt-merge --info mg 2>err &&
	test_grep "error: mg: a Megatron-LM checkpoint, which gptkit does not read; expected a gptkit checkpoint" err &&
	test_expect_code 65 gpt-export -o mg.tar.zst mg/iter_0000010 2>err &&
	test_grep "mg/iter_0000010: a Megatron-LM checkpoint" err &&
	# llm.c'"'"'s gpt2_124M.bin: a header of 256 int32, magic 20240326, version 3
	printf "\306\327\064\001\003\000\000\000" >gpt2_124M.bin && head -c 1016 /dev/zero >>gpt2_124M.bin &&
	test_expect_code 65 gpt-ckpt-merge --verify gpt2_124M.bin 2>err &&
	test_grep "gpt2_124M.bin: an llm.c model file, which gptkit does not read; .*gpt-ckpt-merge --from-hf" err &&
	test_expect_code 65 gpt-infer -m gpt2_124M.bin "x" 2>err &&
	test_grep "gpt2_124M.bin: an llm.c model file" err
'

test_expect_success 'a Hugging Face directory or an inference bundle given as a checkpoint is named, with what to do' '
	gpt-ckpt-merge --to-hf output hf2 &&
	gpt-export -o b.tar.zst output && mkdir ub && tar -C ub -xf b.tar.zst &&
	test_expect_code 65 gpt-ckpt-merge --info hf2 2>err &&
	test_grep "error: hf2: a Hugging Face GPT-2 directory, not a gptkit checkpoint; gpt-ckpt-merge --from-hf hf2 OUT converts it" err &&
	test_expect_code 65 gpt-export -o x.tar.zst hf2 2>err &&
	test_grep "error: hf2: a Hugging Face GPT-2 directory" err &&
	for b in b.tar.zst ub; do
		test_expect_code 65 gpt-ckpt-merge --to-layout mp=2 $b r 2>err &&
		test_grep "error: $b: an inference bundle \(gpt-export.s\), the weights alone for gpt-infer -m, not a checkpoint; give the checkpoint it was exported from" err ||
		return 1
	done &&
	test ! -e r && test ! -e x.tar.zst
'

test_expect_success 'options of another verb are refused, not ignored' '
	test_expect_code 64 gpt-ckpt-merge --to-layout mp=2 --dtype bf16 output r16 2>err &&
	test_grep "dtype applies to --consolidate and --to-hf only" err &&
	test_expect_code 64 gpt-ckpt-merge --to-layout mp=2 --weights-only output rw 2>err &&
	test_grep "weights-only applies to --consolidate only" err &&
	test_expect_code 64 gpt-ckpt-merge --info --dtype fp16 output 2>err &&
	! test -e r16 && ! test -e rw
'

test_expect_success 'bad usage' '
	test_expect_code 64 gpt-ckpt-merge output 2>err &&
	test_expect_code 64 gpt-ckpt-merge --info --verify output 2>err &&
	test_expect_code 64 gpt-ckpt-merge --consolidate output 2>err &&
	test_grep "expected IN and OUT" err &&
	test_expect_code 64 gpt-ckpt-merge --consolidate --dtype int8 output x 2>err
'

test_done
