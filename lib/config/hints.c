/* gpt-train's hints for the options of the trainers its users come from
 * (PaddleNLP's Trainer, Megatron-LM's pretrain_gpt.py, llm.c's train_gpt2):
 * which configuration key or option to give instead. */
#include "config/config.h"

/* Options of PaddleNLP's Trainer, Megatron-LM's pretrain_gpt.py and llm.c's
 * train_gpt2 ("-X": a short flag), which gpt-train does not take: whose
 * they are and what to give instead. */
void gpt_config_flag_hint(const char *arg, gpt_err *err)
{
	static const char fixed[] = "gpt-train has no such setting: the scale stops at 1, halves after 2 "
				    "overflows in a row and doubles after 1000 good steps, as in Paddle's AMP";
	static const char pn[] = "PaddleNLP's and Megatron-LM's", mg[] = "Megatron-LM's", lc[] = "llm.c's";
	static const char seq[] = "give -o Data.Train.dataset.max_seq_len=N -o Data.Eval.dataset.max_seq_len=N";
	static const char load[] = "give -o Engine.save_load.output_dir=DIR, from whose latest checkpoint a run "
				   "resumes by itself; -o Engine.save_load.ckpt_dir=DIR starts a new run from a checkpoint";
	static const char *const tbl[] = {
		"fp16", pn,
		"give -o Engine.mix_precision.enable=True -o Engine.mix_precision.dtype=float16",
		"bf16", pn,
		"give -o Engine.mix_precision.enable=True -o Engine.mix_precision.dtype=bfloat16",
		"fp16_opt_level", "PaddleNLP's",
		"give -o Engine.mix_precision.level=O2 (16-bit parameters, fp32 master weights; O1 is not offered)",
		"scale_loss", "PaddleNLP's", "give -o Engine.mix_precision.scale_loss=N",
		"amp_master_grad", "PaddleNLP's",
		"gpt-train has no such setting: gradients are held in the 16-bit dtype and unscaled into the fp32 master weights",
		"initial-loss-scale", mg, "give -o Engine.mix_precision.scale_loss=N",
		"loss-scale", mg,
		"give -o Engine.mix_precision.scale_loss=N (the initial dynamic scale; a fixed one is not offered)",
		"min-loss-scale", mg, fixed,
		"loss-scale-window", mg, fixed,
		"hysteresis", mg, fixed,
		"num-layers", mg, "give -o Model.num_layers=N",
		"hidden-size", mg, "give -o Model.hidden_size=N",
		"ffn-hidden-size", mg, "give -o Model.ffn_hidden_size=N",
		"num-attention-heads", mg, "give -o Model.num_attention_heads=N",
		"max-position-embeddings", mg, "give -o Model.max_position_embeddings=N",
		"seq-length", mg, seq,
		"micro-batch-size", mg, "give -o Global.micro_batch_size=N",
		"global-batch-size", mg, "give -o Global.global_batch_size=N",
		"train-iters", mg, "give -o Engine.max_steps=N",
		"lr", mg, "give -o Optimizer.lr.max_lr=LR",
		"min-lr", mg, "give -o Optimizer.lr.min_lr=LR",
		"lr-decay-style", mg,
		"give -o Optimizer.lr.name=CosineAnnealingWithWarmupDecay (cosine), LinearDecayWithWarmup (linear) or Constant",
		"lr-decay-iters", mg, "give -o Optimizer.lr.decay_steps=N",
		"lr-warmup-iters", mg, "give -o Optimizer.lr.warmup_steps=N",
		"lr-warmup-fraction", mg, "give -o Optimizer.lr.warmup_rate=F (a fraction of decay_steps)",
		"weight-decay", mg, "give -o Optimizer.weight_decay=F",
		"clip-grad", mg, "give -o Optimizer.grad_clip.clip_norm=F",
		"adam-beta1", mg, "give -o Optimizer.beta1=F",
		"adam-beta2", mg, "give -o Optimizer.beta2=F",
		"adam-eps", mg, "give -o Optimizer.epsilon=F",
		"hidden-dropout", mg, "give -o Model.hidden_dropout_prob=P",
		"attention-dropout", mg, "give -o Model.attention_probs_dropout_prob=P",
		"init-method-std", mg, "give -o Model.initializer_range=F",
		"seed", mg, "give -o Global.seed=N",
		"tensor-model-parallel-size", mg, "give --tensor_parallel_degree N (Distributed.mp_degree)",
		"pipeline-model-parallel-size", mg, "give --pipeline_parallel_degree N (Distributed.pp_degree)",
		"num-layers-per-virtual-pipeline-stage", mg,
		"give --virtual_pp_degree V, the model chunks per stage: num_layers / (pp_degree x this)",
		"sequence-parallel", mg, "give -o Model.sequence_parallel=True",
		"use-distributed-optimizer", mg,
		"give --sharding stage1 with --sharding_parallel_degree N (the optimizer state split over N data replicas)",
		"recompute-activations", mg,
		"give -o Model.use_recompute=True -o Model.recompute_granularity=core_attn (softmax(QK^T)V only)",
		"recompute-granularity", mg,
		"give -o Model.use_recompute=True -o Model.recompute_granularity=full (whole layers) or core_attn",
		"data-path", mg,
		"give -o Data.Train.dataset.input_dir=PATH -o Data.Eval.dataset.input_dir=PATH (a prefix, a directory "
		"or a blend 'W1 PREFIX1 W2 PREFIX2')",
		"split", mg, "give -o Data.Train.dataset.split=949,50,1 -o Data.Eval.dataset.split=949,50,1",
		"save", mg, "give -o Engine.save_load.output_dir=DIR",
		"load", mg, load,
		"pretrained-checkpoint", mg,
		"give -o Engine.save_load.ckpt_dir=DIR, the checkpoint a run starts from while output_dir holds none",
		"save-interval", mg, "give -o Engine.save_load.save_steps=N",
		"eval-interval", mg, "give -o Engine.eval_freq=N",
		"eval-iters", mg, "give -o Engine.eval_iters=N",
		"log-interval", mg, "give -o Engine.logging_freq=N",
		"vocab-file", mg, "gpt-train reads token ids: the tokenizer is gpt-preprocess's -t and --vocab; leave it out",
		"merge-file", mg, "gpt-train reads token ids: the tokenizer is gpt-preprocess's -t and --vocab; leave it out",
		"-i", lc,
		"give -o Data.Train.dataset.input_dir=PATH (an llm.c .bin shard, a directory of shards or a blend; "
		"-o Data.Train.dataset.split=1,0,0 trains on all of it)",
		"-j", lc, "give -o Data.Eval.dataset.input_dir=PATH (-o Data.Eval.dataset.split=0,1,0 evaluates on all of it)",
		"-e", lc,
		"gpt-train does not read llm.c's model files; it starts from random weights, or from a gptkit checkpoint "
		"given as -o Engine.save_load.ckpt_dir=DIR (gpt-ckpt-merge --from-hf makes one of Hugging Face GPT-2)",
		"-b", lc, "give -o Global.micro_batch_size=N",
		"-t", lc, seq,
		"-d", lc, "give -o Global.global_batch_size=N in sequences (llm.c's tokens / max_seq_len)",
		"-l", lc, "give -o Optimizer.lr.max_lr=LR",
		"-q", lc, "give -o Optimizer.lr.min_lr=LR (max_lr x llm.c's fraction)",
		"-u", lc, "give -o Optimizer.lr.warmup_steps=N",
		"-k", lc, "give -o Optimizer.lr.name=CosineAnnealingWithWarmupDecay, LinearDecayWithWarmup or Constant",
		"-x", lc, "give -o Engine.max_steps=N",
		"-v", lc, "give -o Engine.eval_freq=N",
		"-m", lc, "give -o Engine.eval_iters=N",
		"-n", lc, "give -o Engine.save_load.save_steps=N",
		"-y", lc, load,
		"-z", lc, "give --sharding stage1 (or stage2, stage3) with --sharding_parallel_degree N",
		"-r", lc, "give -o Model.use_recompute=True",
		NULL, NULL, NULL,
	};
	gpt_opts_foreign_hint(arg, tbl, err);
}
