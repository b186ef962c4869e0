#!/bin/sh
# gpt-export: bundles in every dtype read back in place by gpt-infer, the
# Hugging Face directory, GGUF checked as llama.cpp's gpt2 loader reads it,
# and broken, foreign or newer bundles refused clearly.
. "$(dirname "$0")/test-lib.sh"

. "$GPT_ROOT/tests/cli/lib-memorised.sh"

test_expect_success 'set up: a byte model that has learnt one sentence' '
	train_memorised &&
	greedy ck "Everyone is" >expect &&
	test_grep "^Everyone is permitted to copy" expect
'

test_expect_success 'the default bundle: a tar.zst of manifest, config, weights' '
	gpt-export ck 2>err &&
	test_grep "wrote model.tar.zst" err &&
	tar --zstd -tf model.tar.zst >list &&
	printf "manifest.json\nconfig.yaml\nmodel.safetensors\n" >want &&
	test_cmp want list &&
	tar --zstd -xOf model.tar.zst manifest.json >man &&
	test_grep "\"format\": \"gptkit-bundle\"" man &&
	test_grep "\"tokenizer\": \"bytes\"" man &&
	tar --zstd -xOf model.tar.zst config.yaml >cfg &&
	test_grep "^Model:" cfg && test_grep "^Generation:" cfg &&
	! grep -q "^Optimizer:" cfg
'

test_expect_success "the README's generation: the config's own settings fit the model" '
	gpt-infer -m model.tar.zst -o Generation.decode_strategy=greedy_search "Everyone is" >out &&
	test_grep "^Everyone is permitted to copy" out
'

for dt in fp32 bf16 fp16 int8; do
	test_expect_success "a $dt bundle is read in place and recites the same sentence" '
		gpt-export --dtype '$dt' -o m-'$dt'.tar.zst ck 2>/dev/null &&
		greedy m-'$dt'.tar.zst "Everyone is" >out &&
		test_cmp expect out
	'
done

test_expect_success 'fp32 bundle logits equal the checkpoint: the same perplexity to the digit' '
	gpt-infer -m ck --ppl d/doc.txt >a &&
	gpt-infer -m m-fp32.tar.zst --ppl d/doc.txt >b &&
	test_cmp a b
'

test_expect_success 'sizes: bf16 and fp16 about half of fp32, int8 about a quarter' '
	s32=$(tar --zstd -tvf m-fp32.tar.zst model.safetensors | awk "{print \$3}") &&
	s16=$(tar --zstd -tvf m-bf16.tar.zst model.safetensors | awk "{print \$3}") &&
	s8=$(tar --zstd -tvf m-int8.tar.zst model.safetensors | awk "{print \$3}") &&
	echo "$s32 $s16 $s8" &&
	test "$(echo "$s16 < 0.55 * $s32 && $s8 < 0.35 * $s32" | bc)" = 1
'

test_expect_success 'a .tar.gz bundle and an unpacked bundle directory work too' '
	gpt-export -o m.tar.gz ck 2>/dev/null &&
	gzip -t m.tar.gz &&
	greedy m.tar.gz "Everyone is" >out &&
	test_cmp expect out &&
	mkdir unpacked && tar -C unpacked -xzf m.tar.gz &&
	greedy unpacked "Everyone is" >out &&
	test_cmp expect out
'

test_expect_success 'Hugging Face directory: Conv1D layout, config.json, same text' '
	gpt-export --format hf -o hf ck 2>/dev/null &&
	test -f hf/model.safetensors && test -f hf/config.json &&
	python3 -c "
import json, struct
c = json.load(open(\"hf/config.json\"))
assert (c[\"n_embd\"], c[\"n_layer\"], c[\"n_head\"], c[\"n_positions\"], c[\"vocab_size\"]) == (64, 2, 4, 64, 257), c
raw = open(\"hf/model.safetensors\", \"rb\").read()
h = json.loads(raw[8:8 + struct.unpack(\"<Q\", raw[:8])[0]])
assert h[\"transformer.h.0.attn.c_attn.weight\"][\"shape\"] == [64, 192]
assert h[\"transformer.h.1.mlp.c_proj.weight\"][\"shape\"] == [256, 64]
assert h[\"transformer.wte.weight\"][\"shape\"] == [257, 64]
" &&
	greedy hf "Everyone is" >out &&
	test_cmp expect out &&
	test_expect_code 64 gpt-export --format hf -o hf ck 2>err &&
	test_grep "hf: exists" err
'

test_expect_success 'an output directory named with a trailing slash; a missing parent named as given' '
	gpt-export --format hf -o hfslash/ ck 2>err &&
	test_grep "wrote hfslash/" err &&
	test -f hfslash/model.safetensors && test -f hfslash/config.json &&
	greedy hfslash/ "Everyone is" >out &&
	test_cmp expect out &&
	test_expect_code 64 gpt-export --format hf -o hfslash// ck 2>err &&
	test_grep "error: hfslash: exists" err &&
	for f in "--format hf -o nodir/hf" "-o nodir/m.tar.zst" "--format gguf -o nodir/m.gguf"; do
		test_expect_code 74 gpt-export $f ck 2>err &&
		test_grep "^gpt-export: error: ${f##* }: create: No such file or directory$" err || return 1
	done &&
	! test -e nodir
'

test_expect_success 'FleetX'"'"'s tools/export.py form: -c, -o Engine.save_load.ckpt_dir and output_dir' '
	# the checkpoint by -o, the default output directory of -c (./output, made)
	mkdir fx && (cd fx &&
		printf "Engine:\n  save_load:\n    ckpt_dir:\n" >cfg.yaml &&
		gpt-export -c cfg.yaml -o Engine.save_load.ckpt_dir=../ck 2>err &&
		test_grep "wrote ./output/model.tar.zst" err &&
		greedy output/model.tar.zst "Everyone is" >out &&
		test_cmp ../expect out) &&
	# both by -o, no file; a missing directory is made
	gpt-export --format gguf -o Engine.save_load.ckpt_dir=ck -o Engine.save_load.output_dir=fxo/a 2>err &&
	test_grep "wrote fxo/a/model.gguf" err && test -f fxo/a/model.gguf &&
	# the -c file'"'"'s ckpt_dir and output_dir, and the command line over them
	printf "Engine:\n  save_load:\n    ckpt_dir: ck\n    output_dir: fxc\n" >fx.yaml &&
	gpt-export -c fx.yaml 2>err && test_grep "wrote fxc/model.tar.zst" err &&
	test_expect_code 66 gpt-export -c fx.yaml -o fx2.tar.zst nowhere 2>err &&
	gpt-export -c fx.yaml -o fx2.tar.zst 2>err && test_grep "wrote fx2.tar.zst" err &&
	# errors: another key, a name given twice, nothing named
	test_expect_code 64 gpt-export -o Model.hidden_size=8 ck 2>err &&
	test_grep "^gpt-export: error: -o Model.hidden_size=8: gpt-export takes Engine.save_load.ckpt_dir .the checkpoint. and Engine.save_load.output_dir" err &&
	test_expect_code 64 gpt-export -o Engine.save_load.ckpt_dir=ck ck 2>err &&
	test_grep "error: ck names the checkpoint, as -o Engine.save_load.ckpt_dir=ck does; give one of them" err &&
	test_expect_code 64 gpt-export -o Engine.save_load.output_dir=dd -o m.tar.zst ck 2>err &&
	test_grep "give one of them" err && ! test -e dd &&
	test_expect_code 64 gpt-export -o Engine.save_load.output_dir=dd 2>err &&
	test_grep "expected one CHECKPOINT .or -o Engine.save_load.ckpt_dir=DIR." err &&
	# a failed export removes the directory it made
	test_expect_code 66 gpt-export -o Engine.save_load.ckpt_dir=nowhere -o Engine.save_load.output_dir=gone/x 2>err &&
	! test -e gone
'

test_expect_success 'FleetX'"'"'s tools/inference.py form: Inference.model_dir reads the bundle gpt-export put there' '
	# the export alone in its directory, as gpt-export -o Engine.save_load.output_dir leaves it
	gpt-export --dtype int8 -o Engine.save_load.ckpt_dir=ck -o Engine.save_load.output_dir=fxi 2>err &&
	test_grep "wrote fxi/model.tar.zst" err &&
	gpt-infer -m fxi/model.tar.zst --ppl d/doc.txt >want &&
	gpt-infer -o Inference.model_dir=fxi --ppl d/doc.txt >got 2>err &&
	test_cmp want got && ! test -s err &&
	printf "Inference:\n  model_dir: fxi\n" >inf.yaml &&
	gpt-infer -c inf.yaml --ppl d/doc.txt >got && test_cmp want got &&
	# the export beside the run'"'"'s checkpoint, FleetX'"'"'s default ./output of both
	cp -r ck run && gpt-export --dtype int8 -o Engine.save_load.ckpt_dir=run -o Engine.save_load.output_dir=run 2>err &&
	gpt-infer -o Inference.model_dir=run --ppl d/doc.txt >got 2>err &&
	test_cmp want got &&
	test_grep "^gpt-infer: Inference.model_dir run: reading the bundle run/model.tar.zst, not the checkpoint beside it \(-m run reads that\)$" err &&
	gpt-infer -m run --ppl d/doc.txt >ckpt && ! cmp -s want ckpt &&
	# a checkpoint key naming a directory of the bundle alone says where the model is
	test_expect_code 65 gpt-infer -o Engine.save_load.ckpt_dir=fxi "x" 2>err &&
	test_grep "error: fxi: no checkpoint, only an inference bundle \(fxi/model.tar.zst, gpt-export.s\)" err
'

for dt in fp32 fp16 int8; do
	test_expect_success "GGUF $dt: what llama.cpp's gpt2 loader reads, values equal the HF export" '
		gpt-export --format gguf --dtype '$dt' -o m-'$dt'.gguf ck 2>/dev/null &&
		python3 "$GPT_ROOT/tests/cli/gguf-check.py" m-'$dt'.gguf hf >out &&
		cat out &&
		test_grep "^gguf ok: version 3" out
	'
done

test_expect_success 'the GGUF check can fail: a changed byte in a tensor is caught' '
	cp m-fp32.gguf bad.gguf &&
	size=$(wc -c <bad.gguf) &&
	printf "\177" | dd of=bad.gguf bs=1 seek=$((size * 3 / 4)) conv=notrunc 2>/dev/null &&
	! python3 "$GPT_ROOT/tests/cli/gguf-check.py" bad.gguf hf >out &&
	test_grep "values differ" out
'

test_expect_success 'set up: a model of the GPT-2 vocabulary (training needs no vocabulary files)' '
	gpt-train -c "$GPT_ROOT/configs/tiny_cpu_bytes.yaml" -o Model.vocab_size=50257 \
		-o Model.hidden_size=32 -o Model.num_attention_heads=2 -o Model.num_layers=1 \
		-o Data.Train.dataset.input_dir=d/s -o Data.Eval.dataset.input_dir=d/s \
		-o Data.Train.dataset.split=8,1,0 -o Data.Eval.dataset.split=8,1,0 \
		-o Engine.max_steps=1 -o Engine.save_load.save_steps=1 -o Engine.eval_freq=0 \
		-o Engine.save_load.output_dir=ck2 >train2.log 2>&1
'

test_expect_success VOCAB 'a GPT-2 vocabulary model: the bundle carries the tokenizer, GGUF its merges' '
	gpt-export -o g.tar.zst ck2 2>/dev/null &&
	tar --zstd -tf g.tar.zst >list &&
	test_grep "^encoder.json$" list && test_grep "^vocab.bpe$" list &&
	greedy g.tar.zst --jsonl "Hello world" >out &&
	test_grep "\"prompt_text\":\"Hello world\"" out &&
	gpt-export --format hf -o hf2 ck2 2>/dev/null &&
	test -f hf2/vocab.json && test -f hf2/merges.txt &&
	gpt-export --format gguf --dtype fp16 -o g.gguf ck2 2>/dev/null &&
	python3 "$GPT_ROOT/tests/cli/gguf-check.py" g.gguf hf2 >out &&
	test_grep "50257 tokens, 50000 merges" out
'

test_expect_success VOCAB 'a vocabulary under Megatron-LM'"'"'s names (gpt2-vocab.json, gpt2-merges.txt): every format carries it' '
	mkdir mvocab && cp "$GPT_ROOT/share/gpt2/encoder.json" mvocab/gpt2-vocab.json &&
	cp "$GPT_ROOT/share/gpt2/vocab.bpe" mvocab/gpt2-merges.txt &&
	gpt-export --vocab mvocab -o gm.tar.zst ck2 2>/dev/null &&
	tar --zstd -tf gm.tar.zst >list &&
	test_grep "^encoder.json$" list && test_grep "^vocab.bpe$" list &&
	tar --zstd -xOf gm.tar.zst encoder.json | cmp - "$GPT_ROOT/share/gpt2/encoder.json" &&
	gpt-export --vocab mvocab --format hf -o hfm ck2 2>/dev/null &&
	cmp hfm/vocab.json "$GPT_ROOT/share/gpt2/encoder.json" && cmp hfm/merges.txt "$GPT_ROOT/share/gpt2/vocab.bpe" &&
	gpt-export --vocab mvocab --format gguf --dtype fp16 -o gm.gguf ck2 2>/dev/null &&
	cmp gm.gguf g.gguf
'

test_expect_success 'a byte model ships no vocabulary: --vocab is refused, not ignored' '
	mkdir -p bytevocab &&
	test_expect_code 64 gpt-export --vocab bytevocab -o bv.tar.zst ck 2>err &&
	test_grep "^gpt-export: error: --vocab bytevocab: the model in ck/step_[0-9]+ has the byte tokenizer.s vocabulary of 257, which needs no vocabulary files and ships none; leave --vocab out" err &&
	! test -e bv.tar.zst
'

test_expect_success 'a GPT-2 vocabulary model without its vocabulary: the error says what gpt-export can do' '
	mkdir novocab &&
	test_expect_code 66 gpt-export --vocab novocab -o nv.tar.zst ck2 2>err &&
	test_grep "^gpt-export: error: ck2/step_00000001: its 50257-token model needs the GPT-2 vocabulary it was trained with: novocab: no GPT-2 vocabulary" err &&
	mkdir -p alone/bin && cp "$GPT_ROOT/bin/gpt-export" alone/bin/ &&
	test_expect_code 66 alone/bin/gpt-export -o nv.tar.zst ck2 2>err2 &&
	test_grep "^gpt-export: error: ck2/step_00000001: its 50257-token model needs .*: no GPT-2 vocabulary in .*alone/bin/../share/gpt2" err2 &&
	cat err2 >>err &&
	test_grep "run .make deps. in the gptkit source tree .*, or pass --vocab DIR with encoder.json \+ vocab.bpe" err &&
	! grep -e "-t bytes" err &&
	! test -e nv.tar.zst
'

test_expect_success VOCAB 'a vocabulary larger than the model is refused' '
	mkdir big && cp "$GPT_ROOT/share/gpt2/vocab.bpe" big/ &&
	/usr/bin/python3 -c "import json, sys
e = json.load(open(sys.argv[1])); e[\"gptkit_test_token\"] = len(e); json.dump(e, open(\"big/encoder.json\", \"w\"))" \
		"$GPT_ROOT/share/gpt2/encoder.json" &&
	test_expect_code 65 gpt-export --vocab big -o nv.tar.zst ck2 2>err &&
	test_grep "big: 50258 tokens, more than the 50257 of the model in ck2/step_00000001; pass --vocab DIR with the vocabulary it was trained with" err
'

test_expect_success 'gpt-infer on that checkpoint without the vocabulary: the error says what gpt-infer can do' '
	cp "$GPT_ROOT/bin/gpt-infer" alone/bin/ &&
	test_expect_code 66 alone/bin/gpt-infer -m ck2 "x" 2>err &&
	test_grep "^gpt-infer: error: ck2.*: its 50257-token model needs the GPT-2 vocabulary: no GPT-2 vocabulary in .*alone/bin/../share/gpt2" err &&
	test_grep "or export the model with its vocabulary \(gpt-export --vocab DIR\) and generate from the bundle$" err &&
	! grep -e "pass --vocab" err
'

test_expect_success 'broken bundles: missing, truncated, corrupt, foreign, newer' '
	test_expect_code 66 gpt-infer -m none.tar.zst "x" 2>err &&
	test_grep "none.tar.zst" err &&
	head -c 20000 m-fp32.tar.zst >short.tar.zst &&
	test_expect_code 65 gpt-infer -m short.tar.zst "x" 2>err &&
	test_grep "short.tar.zst: " err &&
	mkdir x && cp -r unpacked/. x/ &&
	printf "\001" | dd of=x/model.safetensors bs=1 seek=5000 conv=notrunc 2>/dev/null &&
	test_expect_code 65 gpt-infer -m x "x" 2>err &&
	test_grep "model.safetensors is corrupt: expected [0-9]+ bytes with xxh3" err &&
	printf "just text\n" >notabundle.tar.zst &&
	test_expect_code 65 gpt-infer -m notabundle.tar.zst "x" 2>err &&
	test_grep "notabundle.tar.zst" err &&
	mkdir y && cp -r unpacked/. y/ &&
	sed "s/\"version\": 1/\"version\": 9/" unpacked/manifest.json >y/manifest.json &&
	(cd y && tar -czf ../newer.tar.gz manifest.json config.yaml model.safetensors) &&
	test_expect_code 65 gpt-infer -m newer.tar.gz "x" 2>err &&
	test_grep "bundle version 9 is newer than this gpt-infer reads \(1\); upgrade gptkit" err &&
	test_expect_code 65 gpt-infer -m m-fp32.gguf "x" 2>err &&
	test_grep "^gpt-infer: error: m-fp32.gguf: a GGUF file, which llama.cpp runs and gpt-infer does not read; give gpt-infer the checkpoint" err &&
	test_expect_code 65 gpt-infer -m hf/model.safetensors "x" 2>err &&
	test_grep "^gpt-infer: error: hf/model.safetensors: a single safetensors file; give the directory that holds it" err
'

test_expect_success 'a bad config.yaml in the checkpoint: the error names the file, line and column' '
	cp -r "ck/$(cat ck/latest)" badcfg &&
	sed "s/^  num_layers:/  num_layerz:/" "ck/$(cat ck/latest)/config.yaml" >badcfg/config.yaml &&
	line=$(grep -n "^  num_layerz:" badcfg/config.yaml | cut -d: -f1) &&
	/usr/bin/python3 -c "import json, os, sys
i = json.load(open(\"badcfg/index.json\")); f = i[\"files\"][\"config.yaml\"]
f[\"size\"] = os.path.getsize(\"badcfg/config.yaml\"); f[\"xxh3\"] = sys.argv[1]
json.dump(i, open(\"badcfg/index.json\", \"w\"))" "$(test-tool xxh3 badcfg/config.yaml)" &&
	test_expect_code 65 gpt-export -o bad.tar.zst badcfg 2>err &&
	test_grep "^gpt-export: error: badcfg/config.yaml:$line:3: unknown key Model.num_layerz; did you mean Model.num_layers\?" err &&
	! test -e bad.tar.zst
'

test_expect_success 'export errors: bad dtype, format, name, no checkpoint' '
	test_expect_code 64 gpt-export --dtype fp8 ck 2>err &&
	test_grep "\-\-dtype fp8: expected fp32, bf16, fp16 or int8" err &&
	test_expect_code 64 gpt-export --format onnx ck 2>err &&
	test_grep "expected bundle, gguf or hf" err &&
	test_expect_code 64 gpt-export -o m.zip ck 2>err &&
	test_grep "expected a bundle name ending in .tar.zst" err &&
	test_expect_code 64 gpt-export -o m.gguf ck 2>err &&
	test_grep "^gpt-export: error: -o m.gguf: expected a bundle name ending in .tar.zst, .tzst, .tar.gz, .tgz or .tar; a GGUF file is written with --format gguf$" err &&
	test_expect_code 64 gpt-export --format gguf -o gg.tar.zst ck 2>err &&
	test_grep "^gpt-export: error: -o gg.tar.zst: a bundle.s name, but --format gguf writes a GGUF file; name it otherwise .default model.gguf., or leave --format out for a bundle$" err &&
	! test -e gg.tar.zst &&
	test_expect_code 64 gpt-export --format hf -o hh.tgz ck 2>err &&
	test_grep "^gpt-export: error: -o hh.tgz: a bundle.s name, but --format hf writes a Hugging Face directory" err &&
	! test -e hh.tgz &&
	test_expect_code 64 gpt-export --format hf --dtype int8 -o h8 ck 2>err &&
	test_grep "use --format bundle or gguf for int8" err &&
	test_expect_code 66 gpt-export -o z.tar.zst nowhere 2>err &&
	! test -e z.tar.zst &&
	test_expect_code 64 gpt-export 2>err &&
	test_grep "expected one CHECKPOINT" err
'

test_expect_success 'a full disk while the bundle is written: the file and the reason named, nothing left' '
	. "$GPT_ROOT/tests/cli/lib-faultfs.sh" && build_faultfs &&
	test_expect_code 74 with_faults FAULT_MATCH="*full.tar.zst*" FAULT_OPS=write FAULT_AFTER=100000 -- \
		gpt-export -o full.tar.zst ck 2>err &&
	test_grep "error: full.tar.zst: model.safetensors: No space left on device" err &&
	! ls -a | grep full
'

test_expect_success 'a bundle or GGUF name that is a directory is refused before the weights are converted' '
	mkdir isdir.tar.zst isdir.gguf &&
	test_expect_code 64 gpt-export -o isdir.tar.zst ck 2>err &&
	test_grep "^gpt-export: error: isdir.tar.zst: is a directory; name a file to write, or remove the directory$" err &&
	test_expect_code 64 gpt-export --format gguf -o isdir.gguf ck 2>err &&
	test_grep "^gpt-export: error: isdir.gguf: is a directory; name a file to write, or remove the directory$" err &&
	rmdir isdir.tar.zst isdir.gguf &&
	! ls -a | grep "^\.isdir"
'

test_expect_success 'a GGUF replaces an earlier GGUF or an empty file, never another file (a run.s latest)' '
	cp -r ck run-gg &&
	cp run-gg/latest latest.before &&
	test_expect_code 64 gpt-export --format gguf -o run-gg/latest run-gg 2>err &&
	test_grep "^gpt-export: error: run-gg/latest: exists and is not a GGUF file; gpt-export replaces only an earlier export there: remove it or choose another name$" err &&
	test_cmp latest.before run-gg/latest &&
	gpt-export --format gguf -o again.gguf run-gg &&
	gpt-export --format gguf --dtype fp16 -o again.gguf run-gg &&
	: >empty.gguf && gpt-export --format gguf --dtype fp16 -o empty.gguf run-gg &&
	cmp again.gguf empty.gguf
'

test_expect_success 'a FIFO or a symbolic link named as the output is refused, not replaced by the rename' '
	mkfifo fifo.gguf fifo.tar.zst && ln -s real.gguf link.gguf && ln -s real.tar.zst link.tar.zst &&
	for o in fifo.gguf link.gguf; do
		test_expect_code 64 gpt-export --format gguf -o $o ck 2>err || return 1
	done &&
	test_grep "^gpt-export: error: link.gguf: is a symbolic link \(to real.gguf\); the output would be renamed over the link, replacing it" err &&
	test_expect_code 64 gpt-export -o fifo.tar.zst ck 2>err &&
	test_grep "^gpt-export: error: fifo.tar.zst: is a FIFO, not a regular file; the output would be renamed over it, replacing it, not written into it: name a regular file$" err &&
	test_expect_code 64 gpt-export -o link.tar.zst ck 2>err &&
	test -p fifo.gguf && test -p fifo.tar.zst && test -L link.gguf && test -L link.tar.zst &&
	! test -e real.gguf && ! test -e real.tar.zst &&
	! ls -a | grep "^\.\(fifo\|link\)"
'

test_expect_success 'a directory that cannot be synced after the rename: the error names the output, which is whole' '
	. "$GPT_ROOT/tests/cli/lib-faultfs.sh" &&
	mkdir ed &&
	test_expect_code 74 with_faults FAULT_MATCH="*/ed" FAULT_OPS=fsync FAULT_ERRNO=EIO -- \
		gpt-export -o ed/m.tar.zst ck 2>err &&
	test_grep "^gpt-export: error: ed/m.tar.zst: written in full, but syncing the directory ed failed: Input/output error; .*check the disk, then write it again" err &&
	tar --zstd -tf ed/m.tar.zst >list &&
	test_line_count = 3 list &&
	! ls -a ed | grep tmp
'

test_expect_success 'a file size limit (ulimit -f): every format fails naming the file, nothing left' '
	for f in "-o fsz.tar.zst" "-o fsz.tgz" "-o fsz.tar" "--format gguf -o fsz.gguf" "--format hf -o fsz-hf"; do
		code=0 &&
		(ulimit -f 100 && exec gpt-export $f ck) 2>err || code=$? &&
		test $code = 74 &&
		test_grep "^gpt-export: error: .*fsz.*: write: File too large" err &&
		! ls -a | grep fsz || return 1
	done
'

test_done
