#!/bin/sh
# Bad configurations, overrides and flags: each gives one line on stderr that
# says where, which key, what was expected and what was found, the documented
# exit code (64 command line, 65 file contents, 66 missing file), nothing on
# stdout, and never a crash or a sanitizer report.
. "$(dirname "$0")/test-lib.sh"

C=$GPT_ROOT/configs

# fails CODE PATTERN gpt-train ARGS...: exit CODE, one stderr line matching
# PATTERN (fixed string), empty stdout.
fails () {
	code=$1 pat=$2
	shift 2
	test_expect_code "$code" "$@" >out 2>err &&
	test_line_count = 1 err &&
	grep -F -e "$pat" err >/dev/null || { echo "stderr does not contain: $pat" >&2; cat err >&2; return 1; }
	test_grep "^gpt-train: error: " err &&
	test_line_count = 0 out
}

test_expect_success 'unknown key: file:line:column and the nearest key' '
	printf "Model:\n  hidden_size: 64\n  num_layer: 2\n" >bad.yaml &&
	fails 65 "bad.yaml:3:3: unknown key Model.num_layer; did you mean Model.num_layers?" \
		gpt-train -c bad.yaml --print-config
'

test_expect_success 'unknown nested key and unknown section' '
	printf "Distributed:\n  sharding:\n    sharding_stages: 2\n" >bad.yaml &&
	fails 65 "bad.yaml:3:5: unknown key Distributed.sharding.sharding_stages; did you mean Distributed.sharding.sharding_stage?" \
		gpt-train -c bad.yaml --print-config &&
	printf "Optimiser:\n  weight_decay: 0.1\n" >bad.yaml &&
	fails 65 "bad.yaml:1:1: unknown key Optimiser; did you mean Optimizer?" \
		gpt-train -c bad.yaml --print-config
'

test_expect_success 'a MindFormers configuration is named as such (seed: GPT2-13B)' '
	cat >mf.yaml <<-\EOT &&
	# 4 machines, 32 cards
	parallel_config:
	  data_parallel: 4
	  model_parallel: 2
	  pipeline_stage: 4
	  optimizer_shard: True
	  micro_batch_num: 24
	  vocab_emb_dp: True
	  gradient_aggregation_group: 4
	EOT
	fails 65 "mf.yaml:2:1: unknown key parallel_config: a section of MindFormers'"'"' configurations, which gptkit does not read; write its settings in FleetX'"'"'s sections (Global, Engine, Model, Distributed, ...) as gpt-config(5) says under MindFormers" \
		gpt-train -c mf.yaml --print-config &&
	printf "context:\n  mode: 0\n" >mf.yaml &&
	fails 65 "mf.yaml:1:1: unknown key context: a section of MindFormers" gpt-train -c mf.yaml --print-config &&
	printf "Model:\n  parallel_config: 1\n" >mf.yaml &&
	fails 65 "mf.yaml:2:3: unknown key Model.parallel_config; did you mean" gpt-train -c mf.yaml --print-config &&
	grep -F -x ".B parallel_config.micro_batch_num" "$GPT_ROOT/man/man5/gpt-config.5"
'

test_expect_success 'wrong type names the key, expected and found' '
	printf "Model:\n  num_layers: two\n" >bad.yaml &&
	fails 65 "bad.yaml:2:15: Model.num_layers: expected an integer in [1, 65536], found '"'"'two'"'"'" \
		gpt-train -c bad.yaml --dry-run &&
	printf "Model:\n  use_recompute: maybe\n" >bad.yaml &&
	fails 65 "Model.use_recompute: expected True or False, found '"'"'maybe'"'"'" \
		gpt-train -c bad.yaml --dry-run &&
	printf "Model:\n  recompute_granularity: half\n" >bad.yaml &&
	fails 65 "expected one of full,only_attn,core_attn, found '"'"'half'"'"'" \
		gpt-train -c bad.yaml --dry-run &&
	printf "Distributed:\n  sharding: 2\n" >bad.yaml &&
	fails 65 "bad.yaml:2:13: Distributed.sharding: expected a mapping" \
		gpt-train -c bad.yaml --dry-run
'

test_expect_success 'a number beyond a double is named with its key, not taken as 0 or infinity' '
	printf "Optimizer:\n  lr:\n    max_lr: 1.0e-400\n" >bad.yaml &&
	fails 65 "bad.yaml:3:13: Optimizer.lr.max_lr: expected a number a double holds (0, or a magnitude from 4.94066e-324 to 1.79769e+308), found '"'"'1.0e-400'"'"', which underflows to 0" \
		gpt-train -c $C/tiny_cpu_bytes.yaml -c bad.yaml --dry-run &&
	fails 64 "-o Optimizer.weight_decay=-1e999: Optimizer.weight_decay: expected a number a double holds (0, or a magnitude from 4.94066e-324 to 1.79769e+308), found '"'"'-1e999'"'"', which overflows to infinity" \
		gpt-train -c $C/tiny_cpu_bytes.yaml -o Optimizer.weight_decay=-1e999 --dry-run &&
	gpt-train -c $C/tiny_cpu_bytes.yaml -o Optimizer.weight_decay=0e-999 -o Optimizer.lr.min_lr=1e-310 --print-config >out &&
	test_grep "^    min_lr: 1.0e-310$" out &&
	gpt-train -c out --print-config >again && test_cmp out again
'

test_expect_success 'what PyYAML reads as no integer is refused for an integer key, with the range it takes' '
	printf "Model:\n  num_layers: 64.0\n" >bad.yaml &&
	fails 65 "bad.yaml:2:15: Model.num_layers: expected an integer in [1, 65536], found '"'"'64.0'"'"'" \
		gpt-train -c bad.yaml --dry-run &&
	printf "Model:\n  num_layers: 09\n" >bad.yaml &&
	fails 65 "bad.yaml:2:15: Model.num_layers: expected an integer in [1, 65536], found '"'"'09'"'"'" \
		gpt-train -c bad.yaml --dry-run &&
	fails 64 "-o Model.num_layers=0o17: Model.num_layers: expected an integer in [1, 65536] (0o17 is no integer to PyYAML, which FleetX reads configurations with: write 017 or 15), found '"'"'0o17'"'"'" \
		gpt-train -o Model.num_layers=0o17 --dry-run &&
	fails 64 "-o Engine.max_steps=0x8000000000000000: Engine.max_steps: expected an integer >= 1 (this one is beyond 64 bits), found" \
		gpt-train -o Engine.max_steps=0x8000000000000000 --dry-run &&
	fails 64 "-o Model.hidden_size=0x100001: Model.hidden_size: expected an integer in [1, 1048576], found '"'"'0x100001'"'"'" \
		gpt-train -o Model.hidden_size=0x100001 --dry-run
'

test_expect_success 'zero and negative degrees' '
	printf "Distributed:\n  mp_degree: 0\n" >bad.yaml &&
	fails 65 "Distributed.mp_degree: expected an integer in [1, 1048576], found '"'"'0'"'"'" \
		gpt-train -c bad.yaml --print-config &&
	printf "Distributed:\n  sharding:\n    sharding_degree: -4\n" >bad.yaml &&
	fails 65 "bad.yaml:3:22: Distributed.sharding.sharding_degree: expected an integer in [1, 1048576], found '"'"'-4'"'"'" \
		gpt-train -c bad.yaml --print-config &&
	fails 64 "--tensor_parallel_degree 0: Distributed.mp_degree: expected an integer in [1, 1048576]" \
		gpt-train -c "$C/tiny_cpu.yaml" --tensor_parallel_degree 0 --print-config
'

test_expect_success 'a dropout probability of 1 is refused up front, naming the key' '
	fails 64 "-o Model.hidden_dropout_prob=1: Model.hidden_dropout_prob: expected a probability below 1 (1 would drop every element), found 1" \
		gpt-train -c "$C/tiny_cpu.yaml" -o Model.hidden_dropout_prob=1 --dry-run &&
	printf "_base_: $C/tiny_cpu.yaml\nModel:\n  attention_probs_dropout_prob: 1.0\n" >drop.yaml &&
	fails 65 "drop.yaml:3:33: Model.attention_probs_dropout_prob: expected a probability below 1" \
		gpt-train -c drop.yaml --print-config
'

test_expect_success 'PaddleNLP degree flags are decimal, as its argparse reads them' '
	fails 64 "--tensor_parallel_degree 0x2: expected a decimal integer, found '"'"'0x2'"'"'" \
		gpt-train -c "$C/tiny_cpu.yaml" --tensor_parallel_degree 0x2 --print-config &&
	fails 64 "--pipeline_parallel_degree 1_0: expected a decimal integer" \
		gpt-train -c "$C/tiny_cpu.yaml" --pipeline_parallel_degree 1_0 --print-config &&
	# ten, where the YAML 1.1 value 010 would be octal eight
	gpt-train -c "$C/tiny_cpu.yaml" --world-size 10 --sharding_parallel_degree 010 \
		-o Global.global_batch_size=10 --print-config >out &&
	test_grep "^    sharding_degree: 10$" out
'

test_expect_success 'degrees that do not divide the world size' '
	printf "Model:\n  num_attention_heads: 4\n  hidden_size: 64\nDistributed:\n  mp_degree: 4\n" >bad.yaml &&
	fails 65 "bad.yaml:5:14: Distributed.mp_degree: expected the other degrees (mp_degree 4 x pp_degree 1 x sharding_degree 1) to divide the world size 6 (from --world-size), found a product of 4" \
		gpt-train -c bad.yaml --world-size 6 --print-config &&
	fails 65 "world size 6 (from GPT_WORLD_SIZE)" env GPT_WORLD_SIZE=6 gpt-train -c bad.yaml --print-config &&
	fails 64 "-o Distributed.dp_degree=3: Distributed.dp_degree: expected the other degrees (mp_degree 1 x pp_degree 1 x dp_degree 3) to divide the world size 4 (from --world-size), found a product of 3" \
		gpt-train -c "$C/tiny_cpu.yaml" -o Distributed.dp_degree=3 --world-size 4 --print-config &&
	fails 64 "--sharding_parallel_degree 3: Distributed.sharding.sharding_degree: expected the other degrees (mp_degree 1 x pp_degree 1 x sharding_degree 3)" \
		gpt-train -c "$C/tiny_cpu.yaml" --sharding_parallel_degree 3 --world-size 4 --print-config &&
	fails 65 "Distributed.dp_degree: expected dp_degree x mp_degree x pp_degree x sharding_degree to equal the world size 16 (from --world-size), found 1 x 1 x 1 x 1 = 1" \
		gpt-train -c "$C/pretrain_gpt_345M_single_card.yaml" --world-size 16 --print-config
'

test_expect_success 'batch sizes that do not divide' '
	printf "Global:\n  global_batch_size: 10\nDistributed:\n  dp_degree: 4\n" >bad.yaml &&
	fails 65 "bad.yaml:2:22: Global.global_batch_size: expected a multiple of dp_degree x sharding_degree = 4 x 1 = 4 (the data replicas), found 10" \
		gpt-train -c bad.yaml --print-config &&
	printf "Global:\n  global_batch_size: 16\n  micro_batch_size: 3\n" >bad.yaml &&
	fails 65 "bad.yaml:3:21: Global.micro_batch_size: expected a divisor of local_batch_size 16" \
		gpt-train -c bad.yaml --print-config &&
	printf "Global:\n  global_batch_size: 16\n  local_batch_size: 4\n" >bad.yaml &&
	fails 65 "Global.local_batch_size: expected global_batch_size / (dp_degree x sharding_degree) = 16 / (1 x 1) = 16, found 4; leave it out to derive it" \
		gpt-train -c bad.yaml --print-config &&
	fails 64 "-o Engine.accumulate_steps=3: Engine.accumulate_steps: expected local_batch_size / micro_batch_size = 8 / 1 = 8, found 3; leave it out to derive it, as FleetX does" \
		gpt-train -c "$C/tiny_cpu.yaml" -o Engine.accumulate_steps=3 --print-config
'

# dp_degree left out takes the rest of the world size: a run (a resume)
# started on another number of ranks learns that this is what went wrong
test_expect_success 'batch sizes that data replicas derived from the world size do not divide say so' '
	fails 65 "tiny_cpu.yaml:6:22: Global.global_batch_size: expected a multiple of dp_degree x sharding_degree = 3 x 1 = 3 (the data replicas), found 8; dp_degree 3 is the world size 3 (from --world-size) / (sharding_degree 1 x mp_degree 1 x pp_degree 1): start a number of ranks, or give degrees, that make dp_degree x sharding_degree a divisor of global_batch_size 8" \
		gpt-train -c "$C/tiny_cpu.yaml" --world-size 3 --print-config &&
	fails 64 "found 2; sharding_degree 8 is the world size 8 (from GPT_WORLD_SIZE) / (dp_degree 1 x mp_degree 1 x pp_degree 1): start a number of ranks, or give degrees, that make dp_degree x sharding_degree a divisor of global_batch_size / micro_batch_size 4" \
		env GPT_WORLD_SIZE=8 GPT_RANK=0 gpt-train -c "$C/tiny_cpu.yaml" --sharding stage2 -o Global.micro_batch_size=2 --print-config &&
	fails 64 "(the data replicas), found 12" \
		gpt-train -c "$C/tiny_cpu.yaml" -o Global.global_batch_size=12 -o Distributed.dp_degree=8 --print-config &&
	! grep -q "is the world size" err
'

test_expect_success 'model shape that the layout cannot split' '
	fails 64 "-o Distributed.mp_degree=3: Distributed.mp_degree: expected a divisor of Model.num_attention_heads 4" \
		gpt-train -c "$C/tiny_cpu.yaml" -o Distributed.mp_degree=3 --print-config &&
	fails 65 "tiny_cpu.yaml:30:15: Model.num_layers: expected a multiple of pp_degree x virtual_pp_degree = 4 x 1 = 4, found 2" \
		gpt-train -c "$C/tiny_cpu.yaml" --pipeline_parallel_degree 4 --print-config &&
	printf "Model:\n  hidden_size: 1000\n" >bad.yaml &&
	fails 65 "bad.yaml:2:16: Model.num_attention_heads (not given): expected a divisor of hidden_size 1000, found 16" \
		gpt-train -c bad.yaml --print-config
'

test_expect_success 'a head size above the CUDA kernels'"'"' 128 on gpu: refused up front, the CPU takes it' '
	# MindFormers GPT2-52B: hidden 8192 over 32 heads
	fails 64 "-o Model.num_attention_heads=32: Model.num_attention_heads: head size hidden_size / num_attention_heads = 8192 / 32 = 256 is above the CUDA attention kernels'"'"' 128 on Global.device gpu; give at least 64 heads" \
		gpt-train -c "$C/gpt2_52b.yaml" -o Model.num_attention_heads=32 --dry-run &&
	gpt-train -c "$C/gpt2_52b.yaml" -o Model.num_attention_heads=32 -o Global.device=cpu --dry-run >out &&
	test_grep "32 heads \(head size 256\)" out
'

test_expect_success 'missing file (66), directory, empty file, syntax error' '
	fails 66 "nope.yaml: No such file or directory" gpt-train -c nope.yaml --print-config &&
	mkdir dir && fails 66 "dir: is a directory" gpt-train -c dir --print-config &&
	: >empty.yaml &&
	fails 65 "empty.yaml: the configuration is empty" gpt-train -c empty.yaml --print-config &&
	printf "# only a comment\n" >comment.yaml &&
	fails 65 "comment.yaml: the configuration is empty" gpt-train -c comment.yaml --print-config &&
	printf "Model:\n  hidden_size: 64\n   num_layers: 2\n" >bad.yaml &&
	fails 65 "bad.yaml:3:14: YAML syntax error" gpt-train -c bad.yaml --print-config &&
	printf "Model: {hidden_size: 64\n" >bad.yaml &&
	fails 65 "YAML syntax error" gpt-train -c bad.yaml --print-config &&
	printf "Model:\n  hidden_size: 64\n---\nModel:\n  hidden_size: 32\n" >bad.yaml &&
	fails 65 "bad.yaml:4:1: expected one YAML document, found a second one" \
		gpt-train -c bad.yaml --print-config &&
	printf "Model:\n  num_layers: 2\nModel:\n  num_layers: 4\n" >bad.yaml &&
	fails 65 "bad.yaml:3:1: duplicate key Model (first at line 1)" gpt-train -c bad.yaml --print-config &&
	printf -- "- Model\n- Global\n" >bad.yaml &&
	fails 65 "bad.yaml:1:1: expected a mapping of sections" gpt-train -c bad.yaml --print-config
'

test_expect_success 'one key under two spellings in one file, with two values' '
	printf "Optimizer:\n  adam_beta1: 0.5\n  beta1: 0.8\n" >bad.yaml &&
	fails 65 "bad.yaml:3:10: Optimizer.beta1: Optimizer.beta1 was already given as Optimizer.adam_beta1 at line 2, with another value; keep one" \
		gpt-train -c bad.yaml --print-config &&
	# the same value under both (a config for two FleetX versions) is taken
	printf "Model:\n  max_seq_len: 64\n  use_recompute: True\nEngine:\n  use_recompute: True\nData:\n  Train:\n    dataset:\n      max_seq_len: 64\n" >same.yaml &&
	gpt-train -c same.yaml --print-config >out &&
	grep -E "^      max_seq_len: 64$" out &&
	printf "Data:\n  Train:\n    dataset:\n      split: [98, 2, 0]\n  dataset:\n    split: [98, 2, 1]\n" >bad.yaml &&
	fails 65 "bad.yaml:6:12: Data.dataset.split: Data.Train.dataset.split was already given as Data.Train.dataset.split at line 4, with another value" \
		gpt-train -c bad.yaml --print-config &&
	printf "Global:\n  global_batch_size: 16\nData:\n  batch_size:\n    global_batch_size: 8\n" >bad.yaml &&
	fails 65 "bad.yaml:5:24: Data.batch_size.global_batch_size: Global.global_batch_size was already given as Global.global_batch_size at line 2" \
		gpt-train -c bad.yaml --print-config &&
	printf "_base_: b.yaml\nOptimizer:\n  beta1: 0.8\n" >top.yaml &&
	printf "Optimizer:\n  adam_beta1: 0.5\n" >b.yaml &&
	gpt-train -c top.yaml --print-config >out &&
	grep -E "^  beta1: 0.8$" out
'

test_expect_success 'a byte that is not UTF-8 is placed at its line and column' '
	printf "Model:\n  hidden_size: 64\n  num_layers: 2 # caf\351\n" >latin1.yaml &&
	fails 65 "latin1.yaml:3:22: expected UTF-8 text, found byte 0xe9" \
		gpt-train -c latin1.yaml --print-config &&
	printf "Model:\n  hidden_size: 64\n  nu\351m_layers: 2\n" >latin1.yaml &&
	fails 65 "latin1.yaml:3:5: expected UTF-8 text, found byte 0xe9" \
		gpt-train -c latin1.yaml --print-config
'

test_expect_success 'a 10 MB file of garbage: binary, text, and deeply nested' '
	head -c 10000000 /dev/urandom >garbage.yaml &&
	fails 65 "garbage.yaml" gpt-train -c garbage.yaml --print-config &&
	head -c 7500000 /dev/urandom | tr -d "\000" >garbage2.yaml &&
	fails 65 "garbage2.yaml" gpt-train -c garbage2.yaml --print-config &&
	head -c 7500000 /dev/urandom | base64 >garbage3.yaml &&
	fails 65 "garbage3.yaml:1:1: expected a mapping of sections" gpt-train -c garbage3.yaml --print-config &&
	awk "BEGIN { for (i = 0; i < 1000000; i++) printf \"[\"; print \"\" }" >deep.yaml &&
	fails 65 "deep.yaml" gpt-train -c deep.yaml --print-config &&
	head -c 20000000 /dev/zero | tr "\000" "a" >big.yaml &&
	fails 65 "big.yaml: expected a YAML configuration of at most 16 MB" gpt-train -c big.yaml --print-config
'

test_expect_success 'anchors and aliases cannot blow up' '
	cat >alias.yaml <<-\EOT &&
	a: &a [x, x, x, x, x, x, x, x, x, x]
	b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]
	c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]
	Model: *c
	EOT
	fails 65 "alias.yaml:1:1: unknown key a" gpt-train -c alias.yaml --print-config &&
	printf "Model: &m {num_layers: 2}\nGlobal: *m\n" >alias2.yaml &&
	fails 65 "unknown key Global.num_layers" gpt-train -c alias2.yaml --print-config
'

test_expect_success 'merge keys: what is merged is checked like the rest' '
	printf "Model:\n  <<: 5\n" >bad.yaml &&
	fails 65 "bad.yaml:2:7: Model.<<: expected a mapping (or a sequence of mappings) to merge, found a scalar" \
		gpt-train -c bad.yaml --print-config &&
	printf "Model:\n  <<: {hidden_sze: 64}\n" >bad.yaml &&
	fails 65 "bad.yaml:2:8: unknown key Model.hidden_sze; did you mean Model.hidden_size?" \
		gpt-train -c bad.yaml --print-config &&
	printf "Model: &m\n  num_layers: 2\n  <<: [*m, *m]\n" >self.yaml &&
	gpt-train -c self.yaml --print-config >out &&
	grep -E "^  num_layers: 2$" out
'

test_expect_success '_base_: missing, not a name, a cycle' '
	printf "_base_: nothere.yaml\n" >b1.yaml &&
	fails 66 "b1.yaml:1:9: _base_: ./nothere.yaml: No such file or directory" \
		gpt-train -c b1.yaml --print-config &&
	printf "_base_: [x]\n" >b2.yaml &&
	fails 65 "b2.yaml:1:9: _base_: expected a file name, found a sequence" \
		gpt-train -c b2.yaml --print-config &&
	printf "_base_: b4.yaml\n" >b3.yaml && printf "_base_: b3.yaml\n" >b4.yaml &&
	fails 65 "expected a chain of _base_ files, found a cycle back to this file" \
		gpt-train -c b3.yaml --print-config
'

test_expect_success 'bad overrides, flags and world sizes are usage errors (64)' '
	fails 64 "-o Model.hidden_sise=8: unknown key Model.hidden_sise; did you mean Model.hidden_size?" \
		gpt-train -c "$C/tiny_cpu.yaml" -o Model.hidden_sise=8 --print-config &&
	fails 64 "-o Model: expected Section.key=value" \
		gpt-train -c "$C/tiny_cpu.yaml" -o Model --print-config &&
	fails 64 "-o Distributed.sharding=2: Distributed.sharding is a section, not a key" \
		gpt-train -c "$C/tiny_cpu.yaml" -o Distributed.sharding=2 --print-config &&
	fails 64 "-o Model.hidden_dropout_prob=1.5: Model.hidden_dropout_prob: expected a number in [0, 1], found '"'"'1.5'"'"'" \
		gpt-train -c "$C/tiny_cpu.yaml" -o Model.hidden_dropout_prob=1.5 --print-config &&
	fails 64 "-o Model.num_layers=65537: Model.num_layers: expected an integer in [1, 65536], found '"'"'65537'"'"'" \
		gpt-train -c "$C/tiny_cpu.yaml" -o Model.num_layers=65537 --print-config &&
	fails 64 "-o Model.num_layers=0: Model.num_layers: expected an integer in [1, 65536], found '"'"'0'"'"'" \
		gpt-train -c "$C/tiny_cpu.yaml" -o Model.num_layers=0 --print-config &&
	fails 64 "Global.micro_batch_size: 1073741824 sequences of 1048576 tokens through 2 layers would hold 9.44e+21 activations, beyond 2^53" \
		gpt-train -c "$C/tiny_cpu.yaml" -o Global.micro_batch_size=1073741824 -o Global.global_batch_size=1073741824 \
		-o Model.max_position_embeddings=1048576 -o Data.Train.dataset.max_seq_len=1048576 \
		-o Data.Eval.dataset.max_seq_len=1048576 -o Model.hidden_size=1048576 -o Model.num_attention_heads=1 --dry-run &&
	fails 64 "Model.hidden_size: the model would have 2.59e+18 parameters, beyond 2^53" \
		gpt-train -c "$C/tiny_cpu.yaml" -o Model.hidden_size=1048576 -o Model.num_attention_heads=1 \
		-o Model.num_layers=65536 -o Model.ffn_hidden_size=16777216 --dry-run &&
	for k in Engine.max_steps Engine.eval_iters Engine.test_iters; do
		fails 64 "-o $k=9000000000000000000: $k: 9000000000000000000 global batches of 8 x 64 tokens would be 4.61e+21 tokens, beyond 2^53 (no run reads that many, and the counts would overflow); choose fewer" \
			gpt-train -c "$C/tiny_cpu.yaml" -o $k=9000000000000000000 --print-config || return 1
	done &&
	fails 64 "Data.Eval.dataset.max_seq_len: expected Data.Train.dataset.max_seq_len 64 (evaluation runs at the training length), found 8; leave it out, or set it to 64 as well" \
		gpt-train -c "$C/tiny_cpu.yaml" -o Data.Eval.dataset.max_seq_len=8 --print-config &&
	fails 65 "tiny_cpu.yaml:65:20: Data.Eval.dataset.max_seq_len: expected Data.Train.dataset.max_seq_len 32 (evaluation runs at the training length), found 64; leave it out, or set it to 32 as well (-o Data.Eval.dataset.max_seq_len=32 beside" \
		gpt-train -c "$C/tiny_cpu.yaml" -o Data.Train.dataset.max_seq_len=32 --print-config &&
	gpt-train -c "$C/tiny_cpu.yaml" -o Data.Train.dataset.max_seq_len=32 -o Data.Eval.dataset.max_seq_len=32 \
		--print-config >out &&
	fails 64 "-o Optimizer.epsilon=0: Optimizer.epsilon: expected a number in [1e-30, 1], found '"'"'0'"'"'" \
		gpt-train -c "$C/tiny_cpu.yaml" -o Optimizer.epsilon=0 --print-config &&
	fails 64 "--sharding stage5: expected stage1, stage2 or stage3" \
		gpt-train -c "$C/tiny_cpu.yaml" --sharding stage5 --print-config &&
	fails 64 "--sharding stage1 stage2: expected one stage, found stage1 and stage2; give the one to train with" \
		gpt-train -c "$C/tiny_cpu.yaml" --sharding "stage1 stage2" --print-config &&
	fails 64 "--sharding stage3,stage2 offload: expected one stage, found stage3 and stage2" \
		gpt-train -c "$C/tiny_cpu.yaml" --sharding "stage3,stage2 offload" --print-config &&
	fails 64 "--world-size: expected a number of ranks >= 1, found '"'"'0'"'"'" \
		gpt-train -c "$C/tiny_cpu.yaml" --world-size 0 --print-config &&
	fails 64 "environment variable WORLD_SIZE: expected a world size >= 1, found '"'"'many'"'"'" \
		env WORLD_SIZE=many gpt-train -c "$C/tiny_cpu.yaml" --print-config &&
	fails 64 "unknown option --bogus" gpt-train -c "$C/tiny_cpu.yaml" --bogus &&
	fails 64 "unknown option --fp16 (PaddleNLP'"'"'s and Megatron-LM'"'"'s); give -o Engine.mix_precision.enable=True -o Engine.mix_precision.dtype=float16" \
		gpt-train -c "$C/tiny_cpu.yaml" --fp16 --print-config &&
	fails 64 "unknown option --bf16 (PaddleNLP'"'"'s and Megatron-LM'"'"'s); give -o Engine.mix_precision.enable=True -o Engine.mix_precision.dtype=bfloat16" \
		gpt-train -c "$C/tiny_cpu.yaml" --bf16=true --print-config &&
	fails 64 "unknown option --scale_loss (PaddleNLP'"'"'s); give -o Engine.mix_precision.scale_loss=N" \
		gpt-train -c "$C/tiny_cpu.yaml" --scale_loss 1024 --print-config &&
	fails 64 "unknown option --hysteresis (Megatron-LM'"'"'s); gpt-train has no such setting" \
		gpt-train -c "$C/tiny_cpu.yaml" --hysteresis 2 --print-config &&
	fails 64 "option --config needs an argument" gpt-train --config &&
	fails 64 "unknown option -sharding: a long option takes two dashes; did you mean --sharding?" \
		gpt-train -c "$C/tiny_cpu.yaml" -sharding stage2 --print-config &&
	fails 64 "unknown option -config: a long option takes two dashes; did you mean --config?" \
		gpt-train -config "$C/tiny_cpu.yaml" --print-config &&
	fails 64 "unknown option --tensor-parallel-degree; did you mean --tensor_parallel_degree?" \
		gpt-train -c "$C/tiny_cpu.yaml" --tensor-parallel-degree=2 --print-config &&
	fails 64 "unexpected argument" gpt-train -c "$C/tiny_cpu.yaml" extra &&
	fails 64 "no configuration given" gpt-train &&
	fails 64 "Engine.save_load.output_dir: expected UTF-8 text, found '"'"'a\\xe9b'"'"'" \
		gpt-train -c "$C/tiny_cpu.yaml" -o "Engine.save_load.output_dir=$(printf "a\351b")" --print-config
'

test_expect_success 'an unknown letter inside a cluster is named, not the long option before it' '
	fails 64 "unknown option -b; see --help" gpt-train -c "$C/tiny_cpu.yaml" --print-config -b4 &&
	fails 64 "unknown option -q; see --help" gpt-train --dry-run -c "$C/tiny_cpu.yaml" --print-config -qV &&
	fails 64 "option --dry-run takes no argument; found '"'"'--dry-run=x'"'"'" gpt-train -c "$C/tiny_cpu.yaml" --dry-run=x &&
	fails 64 "option --config needs an argument" gpt-train --dry-run --config
'

test_expect_success 'Megatron-LM and llm.c flags name the key to give instead' '
	fails 64 "unknown option --num-layers (Megatron-LM'"'"'s); give -o Model.num_layers=N" \
		gpt-train -c "$C/tiny_cpu.yaml" --num-layers 4 --print-config &&
	fails 64 "unknown option --seq-length (Megatron-LM'"'"'s); give -o Data.Train.dataset.max_seq_len=N -o Data.Eval.dataset.max_seq_len=N" \
		gpt-train -c "$C/tiny_cpu.yaml" --seq-length=64 --print-config &&
	fails 64 "unknown option --tensor-model-parallel-size (Megatron-LM'"'"'s); give --tensor_parallel_degree N" \
		gpt-train -c "$C/tiny_cpu.yaml" --tensor-model-parallel-size 2 --print-config &&
	fails 64 "unknown option --data-path (Megatron-LM'"'"'s); give -o Data.Train.dataset.input_dir=PATH" \
		gpt-train -c "$C/tiny_cpu.yaml" --data-path data/x_text_document --print-config &&
	fails 64 "unknown option --pretrained-checkpoint (Megatron-LM'"'"'s); give -o Engine.save_load.ckpt_dir=DIR" \
		gpt-train -c "$C/tiny_cpu.yaml" --pretrained-checkpoint ckpt/release --print-config &&
	fails 64 "unknown option -b (llm.c'"'"'s); give -o Global.micro_batch_size=N" \
		gpt-train -c "$C/tiny_cpu.yaml" -b 4 --print-config &&
	fails 64 "unknown option -x (llm.c'"'"'s); give -o Engine.max_steps=N" \
		gpt-train -x 10 -c "$C/tiny_cpu.yaml" &&
	fails 64 "unknown option -e (llm.c'"'"'s); gpt-train does not read llm.c'"'"'s model files" \
		gpt-train -c "$C/tiny_cpu.yaml" -e gpt2_124M.bin &&
	# only the word getopt refused gets a hint: -b4 is not llm.c'"'"'s spelling
	fails 64 "unknown option -b; see --help" gpt-train -c "$C/tiny_cpu.yaml" -b4
'

test_expect_success 'a Megatron-LM command line pasted whole: every flag of it says what to give, at once' '
	test_expect_code 64 gpt-train --num-layers 4 --hidden-size 64 --micro-batch-size 2 --lr 1e-4 \
		-c "$C/tiny_cpu.yaml" --print-config >out 2>err &&
	test_line_count = 0 out &&
	test_line_count = 4 err &&
	test_grep "^gpt-train: error: unknown option --num-layers \(Megatron-LM.s\); give -o Model.num_layers=N$" err &&
	test_grep "^gpt-train: error: also unknown option --hidden-size \(Megatron-LM.s\); give -o Model.hidden_size=N" err &&
	test_grep "^gpt-train: error: also unknown option --micro-batch-size \(Megatron-LM.s\)" err &&
	test_grep "^gpt-train: error: also unknown option --lr \(Megatron-LM.s\)" err
'

test_expect_success '"-o Key=value" as one word (getopt keeps the blank) sets the key' '
	gpt-train -c "$C/tiny_cpu.yaml" "-o Model.hidden_size=128" --print-config >out &&
	test_grep "^  hidden_size: 128" out &&
	fails 64 "-o  Model.hidden_sise=8: unknown key Model.hidden_sise; did you mean Model.hidden_size?" \
		gpt-train -c "$C/tiny_cpu.yaml" "-o Model.hidden_sise=8" --print-config &&
	fails 64 "-o  =8: expected Section.key=value" gpt-train -c "$C/tiny_cpu.yaml" "-o =8" --print-config
'

test_expect_success 'broadcast_overlap is refused with the reason of its sharding stage' '
	fails 64 "Distributed.sharding.broadcast_overlap: the parameters are gathered right after the update" \
		gpt-train -c "$C/tiny_cpu.yaml" --world-size 2 --sharding stage2 \
		-o Distributed.sharding.broadcast_overlap=True --print-config &&
	fails 64 "Distributed.sharding.broadcast_overlap: at sharding_stage 3 each layer'"'"'s parameters are gathered when the layer runs and the layer waits for them: no gather runs beside the compute; set it to False" \
		gpt-train -c "$C/tiny_cpu.yaml" --world-size 2 --sharding stage3 \
		-o Distributed.sharding.broadcast_overlap=True --print-config
'

test_expect_success 'inconsistent settings name both keys' '
	fails 64 "-o Engine.mix_precision.level=O1: Engine.mix_precision.level: expected O2 with Engine.mix_precision.use_pure_fp16 True, found O1" \
		gpt-train -c "$C/pretrain_gpt_345M_single_card.yaml" -o Engine.mix_precision.level=O1 --print-config &&
	fails 64 "Distributed.pipeline_schedule: expected FThenB or 1F1B when Distributed.virtual_pp_degree is 1" \
		gpt-train -c "$C/tiny_cpu.yaml" -o Distributed.pipeline_schedule=interleaved --print-config &&
	fails 64 "Engine.accumulate_steps (not given): expected a multiple of pp_degree 2 with the interleaved schedule, found 1; change the batch sizes, or set Distributed.virtual_pp_degree to 1 (1F1B)" \
		gpt-train -c "$C/tiny_cpu.yaml" --world-size 2 -o Distributed.pp_degree=2 -o Model.num_layers=4 \
		-o Distributed.virtual_pp_degree=2 -o Global.global_batch_size=1 --print-config &&
	fails 64 "Model.sequence_parallel: expected False when Distributed.mp_degree is 1" \
		gpt-train -c "$C/tiny_cpu.yaml" -o Model.sequence_parallel=True --print-config &&
	fails 64 "Data.Train.dataset.max_seq_len: expected at most Model.max_position_embeddings 64, found 128" \
		gpt-train -c "$C/tiny_cpu.yaml" -o Data.Train.dataset.max_seq_len=128 --print-config &&
	fails 64 "Generation.min_dec_len: expected at most Generation.max_dec_len 200, found 300" \
		gpt-train -c "$C/generation_gpt_345M.yaml" -o Generation.min_dec_len=300 --print-config
'

test_expect_success 'min_lr above max_lr: where, both values, what to do; before any training' '
	printf "Optimizer:\n  lr:\n    max_lr: 1.0e-5\n    min_lr: 5.0e-5\n" >swapped.yaml &&
	fails 65 "swapped.yaml:4:13: Optimizer.lr.min_lr: expected at most Optimizer.lr.max_lr 1e-05, found 5e-05; CosineAnnealingWithWarmupDecay decays from max_lr down to min_lr: swap the two" \
		gpt-train -c swapped.yaml --print-config &&
	fails 65 "swapped.yaml:4:13: Optimizer.lr.min_lr: expected at most" gpt-train -c swapped.yaml --dry-run &&
	fails 64 "-o Optimizer.lr.min_lr=2e-3: Optimizer.lr.min_lr: expected at most Optimizer.lr.max_lr 0.001, found 0.002" \
		gpt-train -c "$C/tiny_cpu.yaml" -o Optimizer.lr.min_lr=2e-3 --print-config &&
	printf "Optimizer:\n  lr:\n    name: LinearDecayWithWarmup\n    max_lr: 5.0e-6\n" >low.yaml &&
	fails 65 "low.yaml:4:13: Optimizer.lr.min_lr (not given): expected at most Optimizer.lr.max_lr 5e-06, found the default 1e-05; set Optimizer.lr.min_lr, the rate LinearDecayWithWarmup decays to (0 for none)" \
		gpt-train -c low.yaml --print-config
'

test_expect_success 'FleetX'"'"'s fine-tuning LinearDecayWithWarmup keys say what to give, not "did you mean warmup_rate"; its vision schedules are refused naming those there are' '
	printf "Optimizer:\n  lr:\n    name: LinearDecayWithWarmup\n    warmup: 0.1\n    learning_rate: 2e-5\n" >ft.yaml &&
	fails 65 "ft.yaml:4:5: unknown key Optimizer.lr.warmup: FleetX'"'"'s warm-up of its fine-tuning LinearDecayWithWarmup (a fraction of all steps, or a step count); give Optimizer.lr.warmup_rate (a fraction of Optimizer.lr.decay_steps) or Optimizer.lr.warmup_steps" \
		gpt-train -c ft.yaml --print-config &&
	fails 64 "-o Optimizer.lr.learning_rate=2e-5: unknown key Optimizer.lr.learning_rate: FleetX'"'"'s key for the rate of its fine-tuning LinearDecayWithWarmup" \
		gpt-train -c "$C/tiny_cpu.yaml" -o Optimizer.lr.learning_rate=2e-5 --print-config &&
	test_grep "give max_lr \(and Optimizer.lr.name=Constant for a constant rate\)$" err &&
	! grep -q "did you mean" err &&
	for n in CosineDecay MultiStepDecay ViTLRScheduler; do
		fails 64 "-o Optimizer.lr.name=$n: Optimizer.lr.name: expected one of CosineAnnealingWithWarmupDecay,LinearDecayWithWarmup,Constant, found '"'"'$n'"'"'" \
			gpt-train -c "$C/tiny_cpu.yaml" -o Optimizer.lr.name=$n --print-config || return 1
	done
'

test_expect_success 'Constant never uses min_lr: one above max_lr trains at max_lr' '
	mkdir data &&
	gpt-preprocess -t bytes -o data/lic /usr/share/common-licenses/* 2>/dev/null &&
	gpt-train -c "$C/tiny_cpu_bytes.yaml" -o Data.Train.dataset.input_dir=data/lic \
		-o Data.Eval.dataset.input_dir=data/lic -o Data.Train.dataset.split=1,0,0 \
		-o Data.Eval.dataset.split=1,0,0 -o Engine.max_steps=2 -o Engine.eval_freq=0 \
		-o Engine.test_iters=0 -o Engine.save_load.save_steps=0 -o Optimizer.lr.name=Constant \
		-o Optimizer.lr.warmup_rate=0 -o Optimizer.lr.min_lr=2e-3 >out 2>err &&
	test_grep "global step 2, .*learning rate: 1.00000e-03$" out
'

test_done
