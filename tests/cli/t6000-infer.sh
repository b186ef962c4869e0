#!/bin/sh
# gpt-infer on a tiny byte model that has memorised one sentence: greedy,
# sampling, beam search, stop strings, JSON lines, batching, perplexity,
# and every way a prompt or option can be wrong.
. "$(dirname "$0")/test-lib.sh"

. "$GPT_ROOT/tests/cli/lib-memorised.sh"

test_expect_success 'set up: a model that has learnt one sentence by heart' '
	train_memorised &&
	test -f ck/latest
'

test_expect_success 'greedy decoding recites the sentence: prompt + generation' '
	greedy ck "Everyone is" >out &&
	printf "Everyone is permitted to copy and distribute verbat\n" >expect &&
	test_cmp expect out
'

test_expect_success 'prompts one a line on stdin, batched; batch 1 prints the same' '
	printf "Everyone\nverbatim\nthis license\n" >prompts &&
	greedy ck <prompts >out8 &&
	greedy ck --batch 1 <prompts >out1 &&
	test_cmp out8 out1 &&
	test_line_count = 3 out8 &&
	test_grep "^verbatim copies of this license document" out8 &&
	printf "Everyone\r\nverbatim\r\nthis license\r\n" >crlf &&
	greedy ck <crlf >outcr &&
	test_cmp out8 outcr
'

test_expect_success 'max_dec_len bounds the generation, min_dec_len is honoured' '
	gpt-infer -m ck -o Generation.decode_strategy=greedy_search -o Generation.max_dec_len=5 \
		"Everyone is" >out &&
	printf "Everyone is perm\n" >expect &&
	test_cmp expect out
'

test_expect_success '--stop ends the generation where the string appears and leaves it out' '
	greedy ck --stop " copy" "Everyone is" >out &&
	printf "Everyone is permitted to\n" >expect &&
	test_cmp expect out
'

test_expect_success '--jsonl: one object a result with prompt, text and token count' '
	greedy ck --jsonl "Everyone" "copies" >out &&
	test_line_count = 2 out &&
	python3 -c "
import json, sys
rows = [json.loads(l) for l in open(\"out\")]
assert rows[0][\"prompt\"] == 0 and rows[1][\"prompt\"] == 1, rows
assert rows[0][\"prompt_text\"] == \"Everyone\", rows[0]
assert rows[0][\"text\"].startswith(\" is permitted to copy\"), rows[0]
assert rows[0][\"tokens\"] == 40 and rows[0][\"finished\"] is False
"
'

test_expect_success '--jsonl: invalid UTF-8 in a generation becomes U+FFFD as Python'"'"'s errors=replace (Hugging Face, tiktoken) has it' '
	gpt-infer -m ck --jsonl -o Generation.decode_strategy=sampling -o Generation.top_k=0 \
		-o Generation.temperature=1e6 -o Generation.seed=3 -o Generation.num_return_sequences=32 \
		-o Generation.max_dec_len=56 "Every" >rand.json &&
	python3 -c "
import json
bad = 0
for line in open(\"rand.json\"):
    r = json.loads(line)
    want = bytes(r[\"ids\"]).decode(\"utf-8\", \"replace\")
    assert r[\"text\"] == want, (r[\"ids\"], r[\"text\"], want)
    bad += want.count(chr(0xfffd))
assert bad > 100, bad
"
'

test_expect_success 'sampling: the same seed repeats, another seed differs' '
	s="-o Generation.decode_strategy=sampling -o Generation.temperature=3 -o Generation.top_k=0 -o Generation.max_dec_len=30"
	# --jsonl: a sampled newline byte stays inside its line
	gpt-infer -m ck $s -o Generation.seed=7 -o Generation.num_return_sequences=3 --jsonl "Every" >a &&
	gpt-infer -m ck $s -o Generation.seed=7 -o Generation.num_return_sequences=3 --batch 1 --jsonl "Every" >b &&
	gpt-infer -m ck $s -o Generation.seed=8 -o Generation.num_return_sequences=3 --jsonl "Every" >c &&
	test_cmp a b &&
	test_line_count = 3 a &&
	! cmp -s a c
'

test_expect_success 'top_k=1 sampling is greedy' '
	gpt-infer -m ck -o Generation.top_k=1 -o Generation.max_dec_len=40 "Everyone is" >out &&
	greedy ck "Everyone is" >expect &&
	test_cmp expect out
'

test_expect_success 'top_p=0 sampling is greedy: the most probable token is always kept, as in FleetX and PaddleNLP' '
	gpt-infer -m ck -o Generation.top_p=0 -o Generation.top_k=0 -o Generation.temperature=3 \
		-o Generation.max_dec_len=40 "Everyone is" >out &&
	greedy ck "Everyone is" >expect &&
	test_cmp expect out &&
	test_expect_code 64 gpt-infer -m ck -o Generation.top_p=-0.1 "x" 2>err &&
	test_grep "Generation.top_p: expected a number in \[0, 1\]" err
'

test_expect_success 'beam search: num_return_sequences best beams, the first the greedy recital' '
	gpt-infer -m ck -o Generation.decode_strategy=beam_search -o Generation.num_beams=4 \
		-o Generation.num_return_sequences=2 -o Generation.max_dec_len=40 "Everyone is" >out &&
	test_line_count = 2 out &&
	head -n 1 out >first &&
	greedy ck "Everyone is" >expect &&
	test_cmp expect first
'

test_expect_success 'beam search takes no --batch: refused, not ignored' '
	test_expect_code 64 gpt-infer -m ck -o Generation.decode_strategy=beam_search -o Generation.num_beams=4 \
		--batch 16 "Everyone is" >out 2>err &&
	test_grep "^gpt-infer: error: --batch 16: beam_search decodes one prompt at a time, its Generation.num_beams beams together, and takes no batch; leave --batch out$" err &&
	! test -s out
'

test_expect_success '--stop ends a beam as the end of text does: ids, count and text agree' '
	for n in 1 3; do
		gpt-infer -m ck --jsonl --stop " copy" -o Generation.decode_strategy=beam_search \
			-o Generation.num_beams=$n -o Generation.max_dec_len=40 "Everyone is" >beam$n || return 1
	done &&
	greedy ck --jsonl --stop " copy" "Everyone is" >greedy.json &&
	python3 -c "
import json
g = json.loads(open(\"greedy.json\").read())
for n in (1, 3):
    b = json.loads(open(\"beam%d\" % n).readline())
    assert b[\"text\"] == g[\"text\"] == \" permitted to\", (b, g)
    assert b[\"ids\"] == g[\"ids\"] and b[\"tokens\"] == len(b[\"ids\"]) == g[\"tokens\"], (b, g)
    assert b[\"finished\"] is g[\"finished\"] is False, (b, g)
"
'

test_expect_success '--stats: the tokens of the prompt pass and of generation, greedy and beam search alike' '
	greedy ck --stats "Everyone is" >out 2>err &&
	test_grep "^prompt: 11 tokens in [0-9.]+ s, [0-9.]+ tokens/s; generation: 39 tokens in [0-9.]+ s, [0-9.]+ tokens/s$" err &&
	gpt-infer -m ck --stats -o Generation.decode_strategy=beam_search -o Generation.num_beams=3 \
		-o Generation.max_dec_len=40 "Everyone is" >out 2>err &&
	test_grep "^prompt: 11 tokens in [0-9.]+ s, [0-9.]+ tokens/s; generation: [1-9][0-9]* tokens in [0-9.]+ s" err &&
	! grep "after the first" err
'

test_expect_success '--stats: the prompt passes after the first apart, one a group of prompts or a beam search' '
	greedy ck --stats --batch 2 "Everyone is" "Everyone" "Everyone is" >out 2>err &&
	test_grep "^prompt: 30 tokens in [0-9.]+ s, [0-9.]+ tokens/s; generation: " err &&
	test_grep "^prompt passes after the first: 1 in [0-9.]+ s, 11 tokens, [0-9.]+ tokens/s$" err &&
	greedy ck --stats --batch 1 "Everyone is" "Everyone" "Everyone is" >out 2>err &&
	test_grep "^prompt passes after the first: 2 in [0-9.]+ s, 19 tokens, [0-9.]+ tokens/s$" err &&
	gpt-infer -m ck --stats -o Generation.decode_strategy=beam_search -o Generation.num_beams=2 \
		-o Generation.max_dec_len=4 "Everyone is" "Everyone" >out 2>err &&
	test_grep "^prompt passes after the first: 1 in [0-9.]+ s, 8 tokens, [0-9.]+ tokens/s$" err
'

test_expect_success 'Inference.model_dir of -c names the model; mp_degree above 1 is refused' '
	printf "Inference:\n  model_dir: ck\nGeneration:\n  decode_strategy: greedy_search\n  max_dec_len: 40\n" >inf.yaml &&
	gpt-infer -c inf.yaml "Everyone is" >out &&
	greedy ck "Everyone is" >expect && test_cmp expect out &&
	printf "Inference:\n  mp_degree: 2\n" >mp.yaml &&
	test_expect_code 65 gpt-infer -m ck -c mp.yaml "x" 2>err &&
	test_grep "^gpt-infer: error: mp.yaml:2:14: Inference.mp_degree: expected 1 \(gpt-infer runs a model in one process\), found 2" err &&
	printf "Generation:\n  top_k: 3\n" >nomodel.yaml &&
	test_expect_code 64 gpt-infer -c nomodel.yaml "x" 2>err &&
	test_grep "MODEL is required \(or -o Inference.model_dir=DIR, or Inference.model_dir or Engine.save_load.ckpt_dir in the -c file\)" err
'

test_expect_success 'FleetX -o Inference.model_dir= and -o Engine.save_load.ckpt_dir= name the model (seed: GPT generation)' '
	greedy ck "Everyone is" >expect &&
	printf "Inference:\n  model_dir: ./nowhere\nGeneration:\n  decode_strategy: greedy_search\n  max_dec_len: 40\n" >gen.yaml &&
	gpt-infer -c gen.yaml -o Inference.model_dir=ck "Everyone is" >out &&
	test_cmp expect out &&
	gpt-infer -c gen.yaml -o Engine.save_load.ckpt_dir=ck "Everyone is" >out &&
	test_cmp expect out &&
	gpt-infer -c gen.yaml -o Inference.model_dir=./nowhere -o Engine.save_load.ckpt_dir=ck/step_00000200 \
		"Everyone is" >out &&
	test_cmp expect out &&
	gpt-infer -o Generation.decode_strategy=greedy_search -o Generation.max_dec_len=40 \
		-o Inference.model_dir=ck "Everyone is" >out &&
	test_cmp expect out &&
	printf "Engine:\n  save_load:\n    ckpt_dir: ck\nGeneration:\n  decode_strategy: greedy_search\n  max_dec_len: 40\n" >ck.yaml &&
	gpt-infer -c ck.yaml "Everyone is" >out &&
	test_cmp expect out &&
	test_expect_code 64 gpt-infer -m ck -o Inference.model_dir=ck "x" 2>err &&
	test_grep "Inference.model_dir=ck names the model, as -m does; give one of them" err &&
	test_expect_code 66 gpt-infer -c gen.yaml -o Inference.model_dir=./gone "x" 2>err &&
	test_grep "gone" err
'

test_expect_success '--ppl: low on the learnt text, high on other text' '
	gpt-infer -m ck --ppl d/doc.txt >p1 &&
	gpt-preprocess -t bytes -o d/one d/doc1.txt d/doc2.txt 2>/dev/null &&
	gpt-infer -m ck --ppl d/one >p2 &&
	printf "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor.\n" >other &&
	gpt-infer -m ck --ppl other >p3 &&
	cat p1 p2 p3 &&
	test_grep "^perplexity: [0-9.]+, loss: [0-9.]+, tokens: 5219, documents: 1$" p1 &&
	test_grep "tokens: 10440, documents: 2$" p2 &&
	a=$(sed "s/perplexity: \([0-9.]*\),.*/\1/" p1) &&
	b=$(sed "s/perplexity: \([0-9.]*\),.*/\1/" p3) &&
	test "$(echo "$a < 1.5 && $b > 5" | bc)" = 1
'

test_expect_success '--ppl: --jsonl one JSON object, --stats its speed, a full standard output an error' '
	gpt-infer -m ck --ppl d/doc.txt >plain &&
	gpt-infer -m ck --ppl d/doc.txt --jsonl --stats >ppl.json 2>err &&
	python3 -c "
import json
r = json.loads(open(\"ppl.json\").read())
assert sorted(r) == [\"documents\", \"loss\", \"perplexity\", \"tokens\"], r
assert r[\"tokens\"] == 5219 and r[\"documents\"] == 1, r
want = \"perplexity: %.4f, loss: %.6f, tokens: 5219, documents: 1\\n\" % (r[\"perplexity\"], r[\"loss\"])
assert open(\"plain\").read() == want, (open(\"plain\").read(), want)
" &&
	test_grep "^perplexity: 5219 tokens predicted in [0-9.]+ s, [0-9.]+ tokens/s$" err &&
	test_expect_code 74 gpt-infer -m ck --ppl d/doc.txt >/dev/full 2>err &&
	test_grep "^gpt-infer: error: standard output: No space left on device$" err &&
	for o in "--stop x" --truncate "--batch 2"; do
		test_expect_code 64 gpt-infer -m ck --ppl d/doc.txt $o 2>err &&
		test_grep "^gpt-infer: error: ${o%% *} applies to generation, not to --ppl; leave it out$" err ||
			return 1
	done
'

test_expect_success '--ppl of PREFIX.bin, PREFIX.idx or an llm.c shard reads the dataset, not the file as text' '
	gpt-infer -m ck --ppl d/one >a &&
	gpt-infer -m ck --ppl d/one.bin >b && test_cmp a b &&
	gpt-infer -m ck --ppl d/one.idx >c && test_cmp a c &&
	cp d/one.bin lonely.bin &&
	test_expect_code 66 gpt-infer -m ck --ppl lonely.bin >out 2>err &&
	test_grep "^gpt-infer: error: dataset lonely.bin \(expects lonely.bin and lonely.idx\): lonely.idx: open: No such file or directory$" err &&
	test_line_count = 0 out &&
	perl -e "print pack(\"l<256\", 20240520, 1, 5, (0) x 253); print pack(\"S<*\", 50256, 72, 105, 50256, 33)" >shard.bin &&
	test_expect_code 65 gpt-infer -m ck --ppl shard.bin >out 2>err &&
	test_grep "^gpt-infer: error: shard.bin: document 0, token 0: id 50256 is outside the model.s vocabulary of 257 " err &&
	test_line_count = 0 out
'

test_expect_success '--ppl takes no Generation keys: -o Generation.KEY is refused, not ignored' '
	test_expect_code 64 gpt-infer -m ck --ppl d/doc.txt -o Generation.top_k=3 >out 2>err &&
	test_grep "^gpt-infer: error: -o Generation.top_k=3: Generation keys apply to generation, not to --ppl \(the perplexity depends on the model alone\); leave it out$" err &&
	! test -s out
'

test_expect_success VOCAB '--ppl of a byte model on a GPT-2 dataset: bad data naming it and the tokenizer to use' '
	gpt-preprocess -o d/bpe other 2>/dev/null &&
	test_expect_code 65 gpt-infer -m ck --ppl d/bpe >out 2>err &&
	test_grep "^gpt-infer: error: d/bpe: document 0, token [0-9]+: id [0-9]+ is outside the model.s vocabulary of 257 \(the byte tokenizer.s, ids 0 to 256\): the dataset was made with another tokenizer, such as GPT-2.s \(gpt-preprocess.s default\); make the dataset with the model.s tokenizer \(gpt-preprocess -t bytes\)$" err &&
	test_line_count = 0 out
'

test_expect_success 'a prompt that leaves no room: a clear error, or --truncate keeps its end' '
	long=$(printf "%s" "$SENTENCE" | cut -c1-60) &&
	test_expect_code 64 greedy ck "$long" 2>err &&
	test_grep "prompt 1: 60 tokens \+ max_dec_len 40 pass the model.s context of 64 positions" err &&
	greedy ck --truncate "$long" >out &&
	test_line_count = 1 out &&
	grep -F -- "$long" out &&
	greedy ck --truncate --jsonl "$long" >out.json &&
	python3 -c "import json,sys; r=json.loads(open(\"out.json\").read()); p=sys.argv[1].encode(); \
assert r[\"prompt_text\"]==sys.argv[1] and len(r[\"prompt_ids\"])==24 and bytes(r[\"prompt_ids\"])==p[-24:], r" "$long"
'

test_expect_success 'num_beams without beam search, several greedy results: refused as gpt-train refuses them' '
	test_expect_code 64 gpt-infer -m ck -o Generation.num_beams=4 "x" 2>err &&
	test_grep "^gpt-infer: error: -o Generation.num_beams=4: Generation.num_beams: expected 1 unless Generation.decode_strategy is beam_search \\(it is sampling\\), found 4$" err &&
	test_expect_code 64 greedy ck -o Generation.num_return_sequences=2 "x" 2>err &&
	test_grep "^gpt-infer: error: -o Generation.num_return_sequences=2: Generation.num_return_sequences: expected 1 with greedy_search \\(every sequence would be the same\\), found 2$" err &&
	for o in "num_beams=4" "decode_strategy=greedy_search -o Generation.num_return_sequences=2"; do
		test_expect_code 64 gpt-train -c "$GPT_ROOT/configs/tiny_cpu_bytes.yaml" \
			-o Generation.$o --print-config >/dev/null 2>err || return 1
	done
'

test_expect_success 'Generation and Inference values of a -c file that do not fit: 65 naming the line, as gpt-train' '
	printf "Inference:\n  mp_degree: 2\n" >c1.yaml &&
	printf "Generation:\n  max_dec_len: 64\n" >c2.yaml &&
	printf "Generation:\n  num_beams: 3\n" >c3.yaml &&
	printf "Generation:\n  min_dec_len: 50\n  max_dec_len: 40\n" >c4.yaml &&
	printf "Generation:\n  decode_strategy: greedy_search\n  num_return_sequences: 2\n" >c5.yaml &&
	printf "Generation:\n  decode_strategy: beam_search\n  num_beams: 2\n  num_return_sequences: 3\n" >c6.yaml &&
	for i in 1 2 3 4 5 6; do
		test_expect_code 65 gpt-infer -m ck -c c$i.yaml "x" 2>err &&
		test_grep "^gpt-infer: error: c$i.yaml:[2-4]:[0-9]+: (Inference|Generation)\.[a-z_]+: expected " err ||
			{ cat c$i.yaml err; return 1; }
	done &&
	test_expect_code 64 gpt-infer -m ck -c c4.yaml -o Generation.min_dec_len=45 "x" 2>err &&
	test_grep "^gpt-infer: error: -o Generation.min_dec_len=45: Generation.min_dec_len: expected at most Generation.max_dec_len 40, found 45$" err &&
	printf "Generation:\n  min_dec_len: 30\n" >c7.yaml &&
	test_expect_code 65 gpt-infer -m ck -c c7.yaml -o Generation.max_dec_len=20 "x" 2>err &&
	test_grep "^gpt-infer: error: c7.yaml:2:16: Generation.min_dec_len: expected at most Generation.max_dec_len 20, found 30$" err &&
	gpt-infer -m ck -c c2.yaml --ppl d/doc.txt >out &&
	test_grep "^perplexity: " out
'

test_expect_success 'FleetX and PaddleNLP generation keys gptkit has none for: refused saying why, not "did you mean"' '
	test_expect_code 64 gpt-infer -m ck -o Generation.eos_token_id=50256 "x" 2>err &&
	test_grep "^gpt-infer: error: -o Generation.eos_token_id=50256: unknown key Generation.eos_token_id: gpt-infer takes the end-of-text token from the model.s tokenizer" err &&
	printf "Generation:\n  top_k: 5\n  use_topp_sampling: True\n" >topp.yaml &&
	test_expect_code 65 gpt-infer -m ck -c topp.yaml "x" 2>err &&
	test_grep "^gpt-infer: error: topp.yaml:3:3: unknown key Generation.use_topp_sampling: FleetX.s switch to its fused top-p CUDA kernel" err &&
	for k in pad_token_id=0 num_beam_groups=2 diversity_rate=0.5 no_repeat_ngram_size=3 \
		use_cache=False max_length=20 max_new_tokens=20; do
		test_expect_code 64 gpt-infer -m ck -o Generation.$k "x" 2>err &&
		! grep -q "did you mean" err || return 1
	done
'

test_expect_success 'bad prompts and options are clear errors' '
	printf "ok\n\377\376bad\n" >bad &&
	test_expect_code 65 greedy ck <bad 2>err &&
	test_grep "standard input, line 2 \(prompt 2\): not valid UTF-8 at byte 1 of 5 \(0xff\), counting from 1; give UTF-8 text" err &&
	printf "caf\303\251 \351t\351\n" >bad &&
	test_expect_code 65 greedy ck <bad 2>err &&
	test_grep "standard input, line 1 \(prompt 1\): not valid UTF-8 at byte 7 of 9 \(0xe9\), counting from 1" err &&
	printf "one\n\ntwo\n" >bad &&
	test_expect_code 64 greedy ck <bad 2>err &&
	test_grep "standard input, line 2 \(prompt 2\): empty; give some text, or remove the blank line \(every line is a prompt\)" err &&
	test_expect_code 64 gpt-infer -m ck "x" "" 2>err &&
	test_grep "error: prompt 2: empty; give some text$" err &&
	test_expect_code 64 gpt-infer -m ck -o Generation.max_dec_len=64 "x" 2>err &&
	test_grep "^gpt-infer: error: -o Generation.max_dec_len=64: Generation.max_dec_len: expected 1 to 63, below the model.s context of 64 positions, found 64$" err &&
	if ! test_have_prereq GPU; then
		test_expect_code 64 gpt-infer -m ck --device cuda "x" 2>err &&
		test_grep "device cuda: (no CUDA device is visible|this build has no CUDA backend)" err
	fi &&
	test_expect_code 64 gpt-infer -m ck -o Model.hidden_size=8 "x" 2>err &&
	test_grep "only Generation keys" err &&
	test_expect_code 64 gpt-infer -m ck -o Generation.decode_strategy=magic "x" 2>err &&
	test_grep "decode_strategy" err &&
	test_expect_code 64 gpt-infer "x" 2>err &&
	test_grep "\-m MODEL is required" err &&
	printf "" | test_expect_code 64 gpt-infer -m ck 2>err &&
	test_grep "no prompt" err &&
	test_expect_code 66 gpt-infer -m nowhere "x" 2>err &&
	test_grep "nowhere" err
'

test_expect_success VOCAB 'FleetX vocab_size 50304 over the GPT-2 tokenizer: the 47 ids without text are never generated' '
	gpt-train -c "$GPT_ROOT/configs/tiny_cpu_bytes.yaml" -o Model.vocab_size=50304 \
		-o Model.max_position_embeddings=512 -o Model.hidden_size=32 \
		-o Model.num_attention_heads=2 -o Model.num_layers=1 \
		-o Data.Train.dataset.input_dir=d/s -o Data.Eval.dataset.input_dir=d/s \
		-o Data.Train.dataset.split=8,1,0 -o Data.Eval.dataset.split=8,1,0 \
		-o Engine.max_steps=1 -o Engine.save_load.save_steps=1 -o Engine.eval_freq=0 \
		-o Engine.save_load.output_dir=ck50304 >train50304.log 2>&1 &&
	gpt-infer -m ck50304 --jsonl -o Generation.top_k=0 -o Generation.temperature=1e6 \
		-o Generation.num_return_sequences=16 -o Generation.max_dec_len=400 "Hello" >out &&
	test_line_count = 16 out &&
	python3 -c "
import json, sys
ids = [i for line in open(\"out\") for i in json.loads(line)[\"ids\"]]
assert len(ids) > 5000 and max(ids) < 50257, (len(ids), max(ids))
"
'

test_expect_success VOCAB '--ppl of a GPT-2 model on a -t bytes dataset: refused saying so, not a number that means nothing' '
	test_expect_code 65 gpt-infer -m ck50304 --ppl d/s >out 2>err &&
	test_grep "^gpt-infer: error: d/s: documents 0 and 31 \(the last\) hold only bytes \(ids 0 to 255\) and end with 256, the end-of-text of the byte tokenizer: the dataset was made with -t bytes, but the model.s vocabulary is GPT-2.s \(50304 tokens\), in which these ids are other tokens: its perplexity would mean nothing; make the dataset with the model.s tokenizer \(gpt-preprocess -t gpt2, the default\)$" err &&
	test_line_count = 0 out &&
	gpt-preprocess -t bytes -o d/b1 d/doc1.txt 2>/dev/null &&
	test_expect_code 65 gpt-infer -m ck50304 --ppl d/b1 2>err &&
	test_grep "^gpt-infer: error: d/b1: document 0 holds only bytes \(ids 0 to 255\) and ends with 256, the end-of-text of the byte tokenizer" err
'

test_expect_success VOCAB '--ppl of a GPT-2 model on GPT-2 datasets of short ASCII text, all ids below 257: read' '
	printf "x,y" >small.txt && printf "x t,y t" >small2.txt &&
	for f in small small2; do
		gpt-preprocess -o d/e-$f $f.txt 2>/dev/null &&
		gpt-preprocess --no-append-eod -o d/n-$f $f.txt 2>/dev/null || return 1
	done &&
	/usr/bin/python3 -c "
import array
def ids(p):
    a = array.array(\"H\"); a.frombytes(open(p + \".bin\", \"rb\").read()); return list(a)
assert ids(\"d/n-small\") == [87, 11, 88], ids(\"d/n-small\")
assert ids(\"d/e-small\") == [87, 11, 88, 50256], ids(\"d/e-small\")
assert ids(\"d/n-small2\") == [87, 256, 11, 88, 256], ids(\"d/n-small2\")
" &&
	for ds in e-small n-small e-small2 n-small2; do
		gpt-infer -m ck50304 --ppl d/$ds >out &&
		test_grep "^perplexity: [0-9.]+, loss: [0-9.]+, tokens: [2-5], documents: 1$" out || return 1
	done
'

test_expect_success VOCAB '--ppl of a GPT-2 model on an llm.c shard: each document starts at end-of-text' '
	gpt-infer -m ck50304 --ppl shard.bin >out &&
	test_grep "^perplexity: [0-9.]+, loss: [0-9.]+, tokens: 3, documents: 2$" out
'

test_expect_success VOCAB '<|endoftext|> in a prompt is the end-of-text token for GPT-2' '
	gpt-infer -m ck50304 --jsonl -o Generation.max_dec_len=1 "a<|endoftext|>b" >gpt2.json &&
	python3 -c "
import json
assert json.loads(open(\"gpt2.json\").read())[\"prompt_ids\"] == [64, 50256, 65]
"
'

test_expect_success '<|endoftext|> in a prompt is 13 bytes for the byte tokenizer' '
	gpt-infer -m ck --jsonl -o Generation.max_dec_len=1 "a<|endoftext|>b" >bytes.json &&
	python3 -c "
import json
assert json.loads(open(\"bytes.json\").read())[\"prompt_ids\"] == list(b\"a<|endoftext|>b\")
"
'

test_done
