#!/bin/sh
# Every reference configuration loads, validates and resolves as documented;
# overrides, PaddleNLP flags and the world size sources.
. "$(dirname "$0")/test-lib.sh"

C=$GPT_ROOT/configs

test_expect_success 'every reference configuration resolves' '
	for f in "$C"/*.yaml; do
		gpt-train -c "$f" --print-config >out || { echo "failed: $f"; exit 1; }
		test -s out || { echo "empty: $f"; exit 1; }
	done
'

test_expect_success '345M single card: the documented shape and precision' '
	gpt-train -c "$C/pretrain_gpt_345M_single_card.yaml" --print-config >out &&
	grep -E "^  hidden_size: 1024$" out &&
	grep -E "^  num_layers: 24$" out &&
	grep -E "^  num_attention_heads: 16$" out &&
	grep -E "^  ffn_hidden_size: 4096$" out &&
	grep -E "^  vocab_size: 50304$" out &&
	grep -E "^      max_seq_len: 1024$" out &&
	grep -E "^    use_pure_fp16: True$" out &&
	grep -E "^    scale_loss: 32768.0$" out &&
	grep -E "^  global_batch_size: 8$" out &&
	grep -E "^  local_batch_size: 8$" out &&
	grep -E "^  micro_batch_size: 8$" out &&
	grep -E "^  accumulate_steps: 1$" out
'

test_expect_success '345M single card: the batch sizes take -o as in FleetX (the rest derived)' '
	gpt-train -c "$C/pretrain_gpt_345M_single_card.yaml" -o Global.micro_batch_size=2 --print-config >out &&
	grep -E "^  micro_batch_size: 2$" out && grep -E "^  accumulate_steps: 4$" out &&
	gpt-train -c "$C/pretrain_gpt_345M_single_card.yaml" -o Global.global_batch_size=16 --print-config >out &&
	grep -E "^  local_batch_size: 16$" out && grep -E "^  accumulate_steps: 2$" out
'

test_expect_success 'FleetX examples/gpt: the Eval section of tools/eval.py loads, without effect' '
	printf "Model:\n  hidden_size: 64\n  num_layers: 2\n  num_attention_heads: 4\nEval:\n  eval_path: None\n  cloze_eval: False\n  overlapping_eval: 16\n  ckpt_dir: None\n  batch_size: 4\n  max_seq_len: 512\n  logging_freq: 5\n" >fx.yaml &&
	gpt-train -c fx.yaml --print-config >out &&
	grep -E "^  overlapping_eval: 16$" out &&
	gpt-train --list-keys | grep -E "^Eval.cloze_eval	bool	False	accepted for compatibility, no effect in gptkit" &&
	gpt-train -c fx.yaml -o Eval.overlapping_eval=8 --dry-run >dry &&
	gpt-train -c fx.yaml --dry-run >dry0 &&
	cmp dry dry0 &&
	printf "Eval:\n  overlap_eval: 16\n" >bad.yaml &&
	test_expect_code 65 gpt-train -c bad.yaml --print-config 2>err &&
	grep "unknown key Eval.overlap_eval; did you mean Eval.overlapping_eval" err
'

test_expect_success 'generation config: FleetX sampling settings through _base_' '
	gpt-train -c "$C/generation_gpt_345M.yaml" --print-config >out &&
	grep -E "^  top_k: 50$" out && grep -E "^  top_p: 0.75$" out &&
	grep -E "^  temperature: 1.0$" out && grep -E "^  min_dec_len: 1$" out &&
	grep -E "^  max_dec_len: 200$" out && grep -E "^  num_return_sequences: 1$" out &&
	grep -E "^  decode_strategy: sampling$" out &&
	grep -E "^  hidden_size: 1024$" out
'

test_expect_success 'layouts of the large configurations' '
	gpt-train -c "$C/pretrain_gpt_175B_mp8_pp16.yaml" --print-config >out &&
	grep -E "^# world size 128 " out && grep -E "^  mp_degree: 8$" out &&
	grep -E "^  pp_degree: 16$" out && grep -E "^  use_recompute: True$" out &&
	gpt-train -c "$C/pretrain_gpt_6.7B_sharding16.yaml" --print-config >out &&
	grep -E "^    sharding_degree: 16$" out &&
	gpt-train -c "$C/gpt2_13b.yaml" --print-config >out &&
	grep -E "^# world size 32 " out && grep -E "^  accumulate_steps: 24$" out &&
	gpt-train -c "$C/pretrain_gpt_345M_mp8_qat.yaml" --print-config >out &&
	sed -n "/^Quantization:/,\$p" out | grep -E "^  enable: True$"
'

test_expect_success 'byte vocabulary 257 is padded to 384' '
	gpt-train -c "$C/tiny_cpu_bytes.yaml" --print-config >out &&
	grep -E "^  vocab_size: 257  # padded to 384$" out
'

test_expect_success '-o sets nested keys, typed, in order' '
	gpt-train -c "$C/tiny_cpu.yaml" -o Distributed.sharding.sharding_stage=2 \
		-o Model.hidden_size=128 -o Model.hidden_size=96 \
		-o Engine.mix_precision.custom_white_list=lookup_table,matmul --print-config >out &&
	grep -E "^    sharding_stage: 2$" out &&
	grep -E "^  hidden_size: 96$" out &&
	grep -E "^  ffn_hidden_size: 384$" out &&
	grep -F "custom_white_list: [\"lookup_table\", \"matmul\"]" out
'

test_expect_success '-o takes a value in quotes as the text inside, as YAML and FleetX'"'"'s -o do' '
	gpt-train -c "$C/tiny_cpu.yaml" -o "Data.Train.dataset.split='"'"'15,2,0'"'"'" \
		-o Model.hidden_size=\"96\" -o "Engine.save_load.ckpt_dir='"'"'null'"'"'" --print-config >out &&
	grep -E "^      split: .15,2,0.$" out &&
	grep -E "^  hidden_size: 96$" out &&
	grep -E "^    ckpt_dir: \"null\"$" out &&
	test_expect_code 64 gpt-train -c "$C/tiny_cpu.yaml" -o "Model.hidden_size='"'"''"'"'" --print-config 2>err &&
	test_grep "expected an integer in \[1, 1048576\], found .." err
'

test_expect_success 'Engine.mix_precision.enable False is the switch: the level beside it goes unread, as in FleetX' '
	cat >amp-off.yaml <<-\EOT &&
	_base_: '"$C"'/tiny_cpu_bytes.yaml
	Engine:
	  mix_precision:
	    enable: False
	    dtype: "float16"
	    level: "O2"
	EOT
	gpt-train -c amp-off.yaml --dry-run >plan &&
	test_grep "^precision: fp32 " plan &&
	gpt-train -c amp-off.yaml -o Engine.mix_precision.level=O1 --print-config >out &&
	grep -E "^    enable: False$" out && grep -E "^    level: O0$" out &&
	gpt-train -c "$C/pretrain_gpt_345M_single_card.yaml" -o Engine.mix_precision.enable=False --dry-run >plan &&
	test_grep "^precision: fp32 " plan &&
	gpt-train -c amp-off.yaml -o Engine.mix_precision.enable=True --dry-run >plan &&
	test_grep "^precision: O2 float16 " plan
'

test_expect_success 'older FleetX spellings are read (seed: single-card GPT)' '
	cat >old.yaml <<-\EOT &&
	Global:
	  batch_size:
	    global_batch_size: 8
	    local_batch_size: 8
	    micro_batch_size: 8
	Optimizer:
	  weight_decay: 0.01
	  adam_beta1: 0.9
	  adam_beta2: 0.95
	  adam_epsilon: 1.0e-8
	  grad_clip: 0.5
	Data:
	  dataset:
	    input_dir: ./data
	    split: '"'"'949,50,1'"'"'
	    max_seq_len: 1024
	EOT
	gpt-train -c old.yaml --print-config >out &&
	grep -E "^  beta2: 0.95$" out && grep -E "^    clip_norm: 0.5$" out &&
	grep -E "^      input_dir: \"./data\"$" out
'

test_expect_success 'FleetX examples/gpt: the Fused section of tensor_fusion (seed: single-card GPT)' '
	printf "Fused:\n  tensor_fusion: True\n" >fused.yaml &&
	gpt-train -c fused.yaml --print-config >out &&
	sed -n "/^Optimizer:/,/^\$/p" out | grep -E "^  tensor_fusion: True$"
'

test_expect_success 'FleetX: a grad_clip of null builds no clipping (clip_norm 0), also over a _base_ and in -o' '
	printf "Optimizer:\n  grad_clip:\n    name: ClipGradByGlobalNorm\n    clip_norm: 1.0\n" >gc-base.yaml &&
	printf "_base_: gc-base.yaml\nOptimizer:\n  grad_clip:\n" >gc.yaml &&
	gpt-train -c gc.yaml --print-config >out &&
	grep -E "^    clip_norm: 0.0$" out &&
	gpt-train -c gc-base.yaml -o Optimizer.grad_clip=None --print-config >out &&
	grep -E "^    clip_norm: 0.0$" out &&
	printf "PreTraining:\n  Optimizer:\n    grad_clip: null\n" >gc-pt.yaml &&
	gpt-train -c gc-pt.yaml --print-config >out &&
	grep -E "^    clip_norm: 0.0$" out &&
	gpt-train -c gc-base.yaml -o Optimizer.grad_clip.clip_norm=null --print-config >out &&
	grep -E "^    clip_norm: 1.0$" out
'

test_expect_success 'FleetX examples/gpt: the PreTraining section (seeds: single-card, group-sharded GPT)' '
	cat >pt.yaml <<-\EOT &&
	# 6.7 B, examples/gpt/group_shard/configs.yaml with max_lr/min_lr swapped
	PreTraining:
	  device: gpu
	  max_steps: 500000
	  num_train_epochs: 1
	  seed: 1234
	  use_recompute: True
	  recompute_granularity: only_attn
	  batch_size:
	    global_batch_size:
	    local_batch_size: 8
	    micro_batch_size: 1
	  mix_precision:
	    use_pure_fp16: True
	    scale_loss: 1024.0
	  logging_freq: 2
	  eval_freq: 400
	  eval_iters: 7
	  dataset:
	    input_dir: ./mydata
	    split: '"'"'98,1,1'"'"'
	    max_seq_len: 512
	  save_load:
	    save_steps: 300
	    output_dir: ./out67
	    ckpt_dir:
	  fused_linear: False
	  tensor_fusion: True

	  Model:
	    vocab_size: 50304
	    hidden_size: 4096
	    num_layers: 32
	    num_attention_heads: 32
	    ffn_hidden_size:
	    max_position_embeddings: 1024

	  Distributed:
	    dp_degree: 1
	    mp_degree: 1
	    pp_degree: 1
	    sharding:
	      sharding_degree: 16
	      sharding_stage: 2
	      sharding_offload: False

	  Optimizer:
	    weight_decay: 0.01
	    adam_beta1: 0.9
	    adam_beta2: 0.95
	    adam_epsilon: 1.0e-8
	    lr:
	      decay_steps: 360000
	      warmup_rate: 0.01
	      max_lr: 5.0e-5
	      min_lr: 1.0e-5
	    grad_clip: 0.5
	EOT
	gpt-train -c pt.yaml --print-config >out &&
	grep -E "^  seed: 1234$" out && grep -E "^  global_batch_size: 128$" out &&
	grep -E "^  accumulate_steps: 8$" out && grep -E "^  logging_freq: 2$" out &&
	grep -E "^  eval_freq: 400$" out && grep -E "^  eval_iters: 7$" out &&
	grep -E "^    scale_loss: 1024.0$" out && grep -E "^    save_steps: 300$" out &&
	grep -E "^    output_dir: \"./out67\"$" out &&
	grep -E "^      input_dir: \"./mydata\"$" out && grep -E "^      max_seq_len: 512$" out &&
	grep -E "^  use_recompute: True$" out && grep -E "^  recompute_granularity: only_attn$" out &&
	grep -E "^  hidden_size: 4096$" out && grep -E "^  ffn_hidden_size: 16384$" out &&
	grep -E "^    sharding_degree: 16$" out && grep -E "^    sharding_stage: 2$" out &&
	grep -E "^  beta2: 0.95$" out && grep -E "^    clip_norm: 0.5$" out &&
	sed -n "/^Optimizer:/,/^\$/p" out | grep -E "^  tensor_fusion: True$" &&
	gpt-train -c pt.yaml -o PreTraining.Model.num_layers=16 -o Model.hidden_size=2048 --print-config >out &&
	grep -E "^  num_layers: 16$" out && grep -E "^  hidden_size: 2048$" out &&
	sed "s/max_lr: 5.0e-5/max_lr: 1.0e-5/; s/min_lr: 1.0e-5/min_lr: 5.0e-5/" pt.yaml >seed.yaml &&
	test_expect_code 65 gpt-train -c seed.yaml --print-config 2>err &&
	grep "seed.yaml:.*Optimizer.lr.min_lr: expected at most Optimizer.lr.max_lr" err &&
	printf "PreTraining:\n  eval_frq: 3\n" >bad.yaml &&
	test_expect_code 65 gpt-train -c bad.yaml --print-config 2>err &&
	grep "unknown key PreTraining.eval_frq; did you mean PreTraining.eval_freq?" err &&
	printf "PreTraining:\n  Model:\n    hidden_size: 64\nModel:\n  hidden_size: 128\n" >bad.yaml &&
	test_expect_code 65 gpt-train -c bad.yaml --print-config 2>err &&
	grep "already given as PreTraining.Model.hidden_size at line 3" err
'

test_expect_success 'YAML merge keys (<<), as PyYAML reads them for FleetX' '
	cat >merge.yaml <<-\EOT &&
	Model:
	  max_position_embeddings: 512
	Data:
	  Train:
	    dataset: &ds
	      input_dir: ./train
	      max_seq_len: 512
	  Eval:
	    dataset:
	      <<: *ds
	      input_dir: ./eval
	Distributed:
	  sharding:
	    <<: [{sharding_stage: 2, sharding_offload: True}, {sharding_stage: 3, reduce_overlap: True}]
	    sharding_offload: False
	EOT
	gpt-train -c merge.yaml --print-config >out &&
	sed -n "/^  Eval:/,/^  [A-Z]/p" out >eval &&
	grep -E "^      input_dir: \"./eval\"$" eval &&
	grep -E "^      max_seq_len: 512$" eval &&
	grep -E "^    sharding_stage: 2$" out &&
	grep -E "^    sharding_offload: False$" out &&
	grep -E "^    reduce_overlap: True$" out
'

test_expect_success 'integers as PyYAML reads them for FleetX: 0x, 0b, a leading-0 octal, _, base 60' '
	cat >ints.yaml <<-\EOT &&
	Global:
	  seed: 1_000_000
	Model:
	  hidden_size: 0x40
	  num_layers: 0b10
	  num_attention_heads: 04
	  max_position_embeddings: 0_2000
	  no_recompute_layers: [0x0, 0_1]
	Engine:
	  max_steps: 1:30
	EOT
	gpt-train -c ints.yaml --print-config >out &&
	grep -E "^  seed: 1000000$" out &&
	grep -E "^  hidden_size: 64$" out &&
	grep -E "^  num_layers: 2$" out &&
	grep -E "^  num_attention_heads: 4$" out &&
	grep -E "^  max_position_embeddings: 1024$" out &&
	grep -E "^  no_recompute_layers: \[0, 1\]$" out &&
	grep -E "^  max_steps: 90$" out &&
	gpt-train -c ints.yaml -o Model.hidden_size=0x80 --print-config >out &&
	grep -E "^  hidden_size: 128$" out
'

test_expect_success 'a compatibility-only key given another value than FleetX'"'"'s: a warning naming it, and the run goes on' '
	for f in "$C"/*.yaml; do
		gpt-train -c "$f" --print-config >out 2>err &&
		test_line_count = 0 err || { echo "warned: $f"; cat err; return 1; }
	done &&
	sed "s/num_workers: 1/num_workers: 4/; s/fuse_attn_qkv: True/fuse_attn_qkv: False/" "$C/tiny_cpu.yaml" >compat.yaml &&
	gpt-train -c compat.yaml -o Optimizer.tensor_fusion=True -o Model.type_vocab_size=16 --print-config >out 2>err &&
	test_grep "^gpt-train: warning: compat.yaml:[0-9]+:[0-9]+: Model.fuse_attn_qkv: accepted for compatibility, no effect in gptkit: Paddle.s fused QKV layer; gptkit always has one \[3, C, C\] qkv tensor and one GEMM$" err &&
	test_grep "^gpt-train: warning: compat.yaml:[0-9]+:[0-9]+: Data.Train.loader.num_workers: accepted for compatibility, no effect in gptkit: " err &&
	test_grep "^gpt-train: warning: compat.yaml:[0-9]+:[0-9]+: Data.Eval.loader.num_workers: " err &&
	test_grep "^gpt-train: warning: -o Optimizer.tensor_fusion=True: Optimizer.tensor_fusion: accepted for compatibility, no effect in gptkit: " err &&
	! grep -q type_vocab_size err &&
	test_line_count = 4 err &&
	test_grep "^  fuse_attn_qkv: False$" out &&
	gpt-train -c "$C/tiny_cpu.yaml" -o Engine.mix_precision.custom_white_list=softmax --print-config >out 2>err &&
	test_line_count = 0 err
'

test_expect_success 'PaddleNLP flags map onto the Distributed keys' '
	gpt-train -c "$C/tiny_cpu.yaml" --world-size 8 --tensor_parallel_degree 2 \
		--sharding "stage2 offload" --print-config >out &&
	grep -E "^  mp_degree: 2$" out && grep -E "^  dp_degree: 1$" out &&
	grep -E "^    sharding_degree: 4$" out && grep -E "^    sharding_stage: 2$" out &&
	grep -E "^    sharding_offload: True$" out &&
	gpt-train -c "$C/tiny_cpu.yaml" --world-size 8 --pipeline_parallel_degree 2 \
		--sharding stage1 --sharding_parallel_degree 2 --print-config >out &&
	grep -E "^  dp_degree: 2$" out && grep -E "^  pp_degree: 2$" out &&
	grep -E "^    sharding_degree: 2$" out
'

test_expect_success 'world size from the environment, in the documented order' '
	GPT_WORLD_SIZE=4 WORLD_SIZE=2 gpt-train -c "$C/tiny_cpu.yaml" --print-config >out &&
	grep -E "^  dp_degree: 4$" out &&
	WORLD_SIZE=2 SLURM_NTASKS=8 gpt-train -c "$C/tiny_cpu.yaml" --print-config >out &&
	grep -E "^  dp_degree: 2$" out &&
	SLURM_NTASKS=8 OMPI_COMM_WORLD_SIZE=2 gpt-train -c "$C/tiny_cpu.yaml" --print-config >out &&
	grep -E "^  dp_degree: 8$" out &&
	OMPI_COMM_WORLD_SIZE=2 gpt-train -c "$C/tiny_cpu.yaml" --print-config >out &&
	grep -E "^  dp_degree: 2$" out &&
	GPT_WORLD_SIZE=4 gpt-train -c "$C/tiny_cpu.yaml" --world-size 1 --print-config >out &&
	grep -E "^  dp_degree: 1$" out
'

test_expect_success 'batch arithmetic: global = micro x accumulate x dp x sharding' '
	gpt-train -c "$C/tiny_cpu.yaml" --world-size 4 -o Global.global_batch_size=32 \
		-o Global.micro_batch_size=2 -o Distributed.sharding.sharding_degree=2 \
		--print-config >out &&
	grep -E "^  dp_degree: 2$" out && grep -E "^  local_batch_size: 8$" out &&
	grep -E "^  accumulate_steps: 4$" out
'

test_done
