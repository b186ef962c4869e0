/* The configuration key table: names, types, defaults, ranges and help. Every
 * other part of lib/config (reading, -o, printing, validation, did-you-mean)
 * and gpt-config(5) follow this table. */
#include "config/config.h"

#include <stddef.h>
#include <string.h>
#include <strings.h>

#define OFF(f) offsetof(gpt_config, f)
#define K(name, type, field, def, choices, min, max, flags, help)                               \
	{name, type, OFF(field), def, choices, min, max, flags, help}
#define I(name, field, def, min, max, help) K(name, GPT_CT_INT, field, def, NULL, min, max, 0, help)
#define ID(name, field, min, max, help) \
	K(name, GPT_CT_INT, field, NULL, NULL, min, max, GPT_CK_DERIVED, help)
#define F(name, field, def, min, max, help) \
	K(name, GPT_CT_FLOAT, field, def, NULL, min, max, 0, help)
#define B(name, field, def, help) K(name, GPT_CT_BOOL, field, def, NULL, 0, 0, 0, help)
#define S(name, field, def, help) K(name, GPT_CT_STR, field, def, NULL, 0, 0, 0, help)
#define E(name, field, def, choices, help) K(name, GPT_CT_ENUM, field, def, choices, 0, 0, 0, help)
#define C(name, type, field, def, help) K(name, type, field, def, NULL, 0, 0, GPT_CK_COMPAT, help)

#define BIG 9.2e18

#define DATA_KEYS(SEC, f)                                                                          \
	E("Data." SEC ".dataset.name", f.dataset.name, "GPTDataset", "GPTDataset",                  \
	  "dataset kind: GPTDataset, a Megatron indexed dataset"),                                   \
	S("Data." SEC ".dataset.input_dir", f.dataset.input_dir, "./data",                          \
	  "directory holding the .bin/.idx pairs written by gpt-preprocess or llm.c .bin shards "     \
	  "(weighted by tokens), a pair's path prefix, a shard's path, a pattern of them "            \
	  "('fineweb_train_*.bin', as llm.c's -i), or a Megatron blend 'W1 PREFIX1 W2 PREFIX2 ...' "  \
	  "or 'PREFIX1 PREFIX2 ...'"),                                                                \
	K("Data." SEC ".dataset.split", GPT_CT_SPLIT, f.dataset.split, "949,50,1", NULL, 0, 0, 0,   \
	  "train,valid,test shares of the documents, '949,50,1' or [949, 50, 1], "                   \
	  "rounded to documents as Megatron-LM does"),                                               \
	I("Data." SEC ".dataset.max_seq_len", f.dataset.max_seq_len, "1024", 1, 1048576,            \
	  "tokens per sample (the sequence length s)"),                                              \
	E("Data." SEC ".sampler.name", f.sampler_name, "GPTBatchSampler", "GPTBatchSampler",         \
	  "batch sampler: GPTBatchSampler, consecutive global batches"),                            \
	C("Data." SEC ".sampler.shuffle", GPT_CT_BOOL, f.shuffle, "False",                           \
	  "GPTBatchSampler's flag, unused in FleetX too: the samples of each epoch are "            \
	  "shuffled either way, as FleetX's GPTDataset and Megatron-LM's shuffle index do"),        \
	B("Data." SEC ".sampler.drop_last", f.drop_last, "True",                                     \
	  "drop a last global batch that is not full"),                                              \
	C("Data." SEC ".loader.num_workers", GPT_CT_INT, f.num_workers, "1",                         \
	  "Paddle DataLoader worker processes"),                                                     \
	C("Data." SEC ".loader.return_list", GPT_CT_BOOL, f.return_list, "False",                    \
	  "Paddle DataLoader output form"),                                                          \
	C("Data." SEC ".loader.collate_fn", GPT_CT_STR, f.collate_fn, "gpt_collate_fn",               \
	  "Paddle collate function name")

static const gpt_config_key keys[] = {
	E("Global.device", global.device, "gpu", "cpu|gpu",
	  "where to train: gpu (the CUDA backend) or cpu"),
	I("Global.seed", global.seed, "1024", 0, BIG, "seed of every random stream"),
	ID("Global.global_batch_size", global.global_batch_size, 1, BIG,
	   "samples per optimizer step over all ranks"),
	ID("Global.local_batch_size", global.local_batch_size, 1, BIG,
	   "samples per optimizer step per data replica: global / (dp_degree x sharding_degree)"),
	ID("Global.micro_batch_size", global.micro_batch_size, 1, BIG,
	   "samples per forward/backward pass: local / accumulate_steps"),

	I("Engine.max_steps", engine.max_steps, "500000", 1, BIG, "optimizer steps to train"),
	I("Engine.num_train_epochs", engine.num_train_epochs, "1", 1, BIG,
	  "passes over the training split; when given, training stops at whichever of it and max_steps comes first"),
	ID("Engine.accumulate_steps", engine.accumulate_steps, 1, BIG,
	   "micro-batches per optimizer step: local_batch_size / micro_batch_size"),
	I("Engine.logging_freq", engine.logging_freq, "1", 1, BIG, "steps between log lines"),
	E("Engine.nan_policy", engine.nan_policy, "stop", "stop|skip|rollback",
	  "a loss or gradient that is not finite (in fp16: a loss that is not, or gradients that overflow at the minimum loss scale 1): stop the run, skip the update, or go back to the last checkpoint and on past the offending batch"),
	I("Engine.nan_max_rollbacks", engine.nan_max_rollbacks, "3", 0, BIG,
	  "rollbacks (nan_policy: rollback) one run of gpt-train makes; the next non-finite step stops it"),
	I("Engine.eval_freq", engine.eval_freq, "500", 0, BIG,
	  "steps between evaluations on the valid split (0: never; a split without validation documents has none)"),
	I("Engine.eval_iters", engine.eval_iters, "10", 0, BIG, "batches per evaluation"),
	I("Engine.test_iters", engine.test_iters, "10", 0, BIG,
	  "batches of the test split evaluated after training"),
	B("Engine.mix_precision.enable", engine.mix_precision.enable, "False",
	  "16-bit mixed precision (implied by use_pure_fp16); given False it turns it off whatever level says"),
	B("Engine.mix_precision.use_pure_fp16", engine.mix_precision.use_pure_fp16, "False",
	  "pure 16-bit training (level O2): 16-bit parameters, fp32 master weights"),
	K("Engine.mix_precision.level", GPT_CT_ENUM, engine.mix_precision.level, NULL, "O0|O1|O2",
	  0, 0, GPT_CK_DERIVED,
	  "O1: fp32 parameters, 16-bit compute; O2: 16-bit parameters + fp32 master; "
	  "default O2 when enabled, else O0"),
	E("Engine.mix_precision.dtype", engine.mix_precision.dtype, "float16", "float16|bfloat16",
	  "16-bit type of mixed precision"),
	F("Engine.mix_precision.scale_loss", engine.mix_precision.scale_loss, "32768.0", 1e-30, 1e38,
	  "initial dynamic loss scale (float16 only)"),
	K("Engine.mix_precision.custom_black_list", GPT_CT_STRLIST,
	  engine.mix_precision.custom_black_list, NULL, NULL, 0, 0, GPT_CK_COMPAT | GPT_CK_CHECKED,
	  "Paddle op names kept in fp32; gptkit always keeps softmax, LayerNorm statistics, "
	  "the loss and reductions in fp32 (a GEMM op here is refused under mixed precision)"),
	K("Engine.mix_precision.custom_white_list", GPT_CT_STRLIST,
	  engine.mix_precision.custom_white_list, NULL, NULL, 0, 0, GPT_CK_COMPAT | GPT_CK_CHECKED,
	  "Paddle op names run in 16 bits; gptkit runs GEMMs and embeddings in 16 bits"),
	I("Engine.save_load.save_steps", engine.save_load.save_steps, "1000", 0, BIG,
	  "steps between checkpoints, and one at the end (0: none by steps; save_epoch and a stop signal still save)"),
	I("Engine.save_load.save_epoch", engine.save_load.save_epoch, "1", 0, BIG,
	  "epochs between checkpoints (0: never at epoch ends)"),
	S("Engine.save_load.output_dir", engine.save_load.output_dir, "./output",
	  "directory that receives step_N/ checkpoints"),
	S("Engine.save_load.ckpt_dir", engine.save_load.ckpt_dir, NULL,
	  "checkpoint to start from (null: output_dir/latest when it exists, else a fresh start)"),
	E("Engine.save_load.on_save_error", engine.save_load.on_save_error, "stop", "stop|continue",
	  "a checkpoint that cannot be written (disk full, read-only, I/O error): stop the run, or log it and train on"),
	B("Engine.save_load.save_on_signal", engine.save_load.save_on_signal, "True",
	  "on SIGTERM or SIGUSR1 finish the step, save a checkpoint and exit 0 (a second SIGTERM stops at once)"),
	I("Engine.save_load.keep_last", engine.save_load.keep_last, "0", 0, BIG,
	  "complete checkpoints kept in output_dir (0: all); older ones are removed only after a newer one is complete"),
	B("Engine.save_load.async_save", engine.save_load.async_save, "False",
	  "copy the state to host memory and write the checkpoint on a thread while training goes on"),
	B("Engine.skip_spikes.enable", engine.skip_spikes.enable, "False",
	  "skip the update of a step whose loss or gradient norm is an outlier of the recent steps"),
	I("Engine.skip_spikes.window", engine.skip_spikes.window, "50", 2, 1000000,
	  "recent updated steps the mean and standard deviation are taken over"),
	F("Engine.skip_spikes.loss_zscore", engine.skip_spikes.loss_zscore, "6.0", 0, 1e9,
	  "a loss this many standard deviations above the window's mean is a spike (0: not checked)"),
	F("Engine.skip_spikes.grad_norm_zscore", engine.skip_spikes.grad_norm_zscore, "6.0", 0, 1e9,
	  "the same for the global gradient norm before clipping (0: not checked)"),
	I("Engine.skip_spikes.warmup", engine.skip_spikes.warmup, "100", 0, BIG,
	  "global steps at the start that are never checked"),
	K("Engine.fault_inject.nan_steps", GPT_CT_INTLIST, engine.fault_inject.nan_steps, NULL, NULL,
	  0, 0, 0, "testing aid: global steps whose loss and gradients are made NaN"),
	I("Engine.fault_inject.nan_rank", engine.fault_inject.nan_rank, "-1", -1, 1 << 24,
	  "testing aid: the rank nan_steps poisons (-1: every rank)"),
	K("Engine.fault_inject.spike_steps", GPT_CT_INTLIST, engine.fault_inject.spike_steps, NULL,
	  NULL, 0, 0, 0, "testing aid: global steps whose loss and gradients are multiplied by spike_factor"),
	F("Engine.fault_inject.spike_factor", engine.fault_inject.spike_factor, "100.0", 1e-30, 1e30,
	  "testing aid: the factor of spike_steps"),

	C("Model.module", GPT_CT_STR, model.module, "GPTModule",
	  "FleetX task module (gptkit picks the task by program: gpt-train, gpt-infer)"),
	E("Model.name", model.name, "GPT", "GPT", "model family: GPT"),
	I("Model.vocab_size", model.vocab_size, "50304", 1, 1 << 30,
	  "tokenizer vocabulary; rows are padded to a multiple of 128 (50257 -> 50304)"),
	I("Model.hidden_size", model.hidden_size, "1024", 1, 1 << 20, "hidden size h (C)"),
	I("Model.num_layers", model.num_layers, "24", 1, 1 << 16, "transformer layers L"),
	I("Model.num_attention_heads", model.num_attention_heads, "16", 1, 1 << 16,
	  "attention heads a; hidden_size must be a multiple"),
	ID("Model.ffn_hidden_size", model.ffn_hidden_size, 1, 1 << 24,
	   "MLP inner size F (default 4 x hidden_size)"),
	F("Model.hidden_dropout_prob", model.hidden_dropout_prob, "0.1", 0, 1,
	  "dropout on embeddings and residual branches, in [0, 1)"),
	F("Model.attention_probs_dropout_prob", model.attention_probs_dropout_prob, "0.1", 0, 1,
	  "dropout on attention probabilities, in [0, 1)"),
	I("Model.max_position_embeddings", model.max_position_embeddings, "1024", 1, 1048576,
	  "rows of the position embedding; at least max_seq_len"),
	C("Model.type_vocab_size", GPT_CT_INT, model.type_vocab_size, "16",
	  "token type vocabulary (GPT has no token types)"),
	F("Model.initializer_range", model.initializer_range, "0.02", 0, 10,
	  "standard deviation of the normal weight initialisation (output projections: / sqrt(2 x layers))"),
	B("Model.use_recompute", model.use_recompute, "False",
	  "recompute activations in backward instead of storing them"),
	E("Model.recompute_granularity", model.recompute_granularity, "full",
	  "full|only_attn|core_attn",
	  "full: whole layers; only_attn: the attention block; core_attn: softmax(QK^T)V only"),
	K("Model.no_recompute_layers", GPT_CT_INTLIST, model.no_recompute_layers, NULL, NULL, 0, 0,
	  0, "layers (from 0) that keep every activation under use_recompute: not recomputed"),
	B("Model.fused_linear", model.fused_linear, "False",
	  "the MLP's GELU in cuBLASLt GEMM epilogues (CUDA): fc + bias + GELU, and its derivative in the backward"),
	C("Model.fuse_attn_qkv", GPT_CT_BOOL, model.fuse_attn_qkv, "True",
	  "Paddle's fused QKV layer; gptkit always has one [3, C, C] qkv tensor and one GEMM"),
	B("Model.sequence_parallel", model.sequence_parallel, "False",
	  "split LayerNorm/dropout activations over tp along the sequence (needs mp_degree > 1)"),
	I("Model.classifier_rows", model.classifier_rows, "0", 0, 1 << 30,
	  "token rows per block of the fused classifier; 0: about 64 Mi logits per block"),

	DATA_KEYS("Train", data.train),
	DATA_KEYS("Eval", data.eval),

	E("Optimizer.name", optimizer.name, "AdamW", "AdamW", "optimizer; AdamW"),
	F("Optimizer.weight_decay", optimizer.weight_decay, "0.01", 0, 1e6,
	  "decoupled weight decay on weight matrices and embeddings (not biases or LayerNorm)"),
	F("Optimizer.beta1", optimizer.beta1, "0.9", 0, 0.9999999999, "AdamW beta1"),
	F("Optimizer.beta2", optimizer.beta2, "0.999", 0, 0.9999999999, "AdamW beta2"),
	F("Optimizer.epsilon", optimizer.epsilon, "1.0e-8", 1e-30, 1, "AdamW epsilon, above 0"),
	E("Optimizer.lr.name", optimizer.lr.name, "CosineAnnealingWithWarmupDecay",
	  "CosineAnnealingWithWarmupDecay|LinearDecayWithWarmup|Constant",
	  "learning rate schedule after the linear warm-up: a cosine or a straight line down to min_lr, or constant"),
	I("Optimizer.lr.decay_steps", optimizer.lr.decay_steps, "360000", 1, BIG,
	  "steps from max_lr down to min_lr, warm-up included"),
	F("Optimizer.lr.warmup_rate", optimizer.lr.warmup_rate, "0.01", 0, 1,
	  "warm-up steps as a fraction of decay_steps"),
	K("Optimizer.lr.warmup_steps", GPT_CT_INT, optimizer.lr.warmup_steps, NULL, NULL, 0, BIG,
	  GPT_CK_DERIVED, "warm-up steps (default warmup_rate x decay_steps, used unrounded)"),
	F("Optimizer.lr.max_lr", optimizer.lr.max_lr, "5.0e-5", 0, 1e6, "peak learning rate"),
	F("Optimizer.lr.min_lr", optimizer.lr.min_lr, "1.0e-5", 0, 1e6, "final learning rate, at most max_lr (Constant does not use it)"),
	E("Optimizer.grad_clip.name", optimizer.grad_clip.name, "ClipGradByGlobalNorm",
	  "ClipGradByGlobalNorm", "gradient clipping; by the global L2 norm"),
	F("Optimizer.grad_clip.clip_norm", optimizer.grad_clip.clip_norm, "1.0", 0, 1e30,
	  "largest global gradient norm (0: no clipping)"),
	C("Optimizer.tensor_fusion", GPT_CT_BOOL, optimizer.tensor_fusion, "False",
	  "Paddle's fused parameter buffers; gptkit always keeps flat buffers"),

	ID("Distributed.dp_degree", distributed.dp_degree, 1, 1 << 20,
	   "data parallel ways (default: world size / the other degrees)"),
	I("Distributed.mp_degree", distributed.mp_degree, "1", 1, 1 << 20,
	  "tensor (model) parallel ways"),
	I("Distributed.pp_degree", distributed.pp_degree, "1", 1, 1 << 20, "pipeline stages"),
	K("Distributed.pp_layers", GPT_CT_INTLIST, distributed.pp_layers, NULL, NULL, 0, 0, 0,
	  "layers of each pipeline stage (each virtual stage, in order, with virtual_pp_degree > 1); empty: an even split"),
	I("Distributed.virtual_pp_degree", distributed.virtual_pp_degree, "1", 1, GPT_MAX_VIRTUAL_PP,
	  "model chunks per pipeline stage (interleaved schedule when > 1), at most 16"),
	K("Distributed.pipeline_schedule", GPT_CT_ENUM, distributed.pipeline_schedule, NULL,
	  "FThenB|1F1B|interleaved", 0, 0, GPT_CK_DERIVED,
	  "pipeline schedule; default 1F1B, interleaved when virtual_pp_degree > 1"),
	K("Distributed.overlap_grad_reduce", GPT_CT_BOOL, distributed.overlap_grad_reduce, NULL, NULL, 0, 0,
	  GPT_CK_DERIVED,
	  "start the gradient reduction of a step's last micro-batch in buckets during its backward (dp and sharding stage 1); default True with Global.device gpu, False on the CPU"),
	F("Distributed.comm_buffer_size", distributed.comm_buffer_size, "25", 1e-6, 1e6,
	  "megabytes of gradients per reduction bucket, at least, with overlap_grad_reduce"),
	ID("Distributed.sharding.sharding_degree", distributed.sharding.sharding_degree, 1, 1 << 20,
	   "ZeRO sharding group size (default 1)"),
	I("Distributed.sharding.sharding_stage", distributed.sharding.sharding_stage, "1", 1, 3,
	  "1: optimizer state split; 2: also gradients; 3: also parameters (float16 at any degree, 1 too: kept only as the fp32 master weights, each layer's cast when it runs)"),
	B("Distributed.sharding.sharding_offload", distributed.sharding.sharding_offload, "False",
	  "keep fp32 master weights and optimizer state in host memory, AdamW on the CPU"),
	B("Distributed.sharding.reduce_overlap", distributed.sharding.reduce_overlap, "False",
	  "overlap the gradient reduction with the backward (True implies Distributed.overlap_grad_reduce)"),
	B("Distributed.sharding.broadcast_overlap", distributed.sharding.broadcast_overlap, "False",
	  "overlap the parameter all-gather with the next forward"),

	I("Generation.top_k", generation.top_k, "50", 0, 1 << 30,
	  "sample from the k most likely tokens (0: no limit)"),
	F("Generation.top_p", generation.top_p, "1.0", 0, 1,
	  "sample from the smallest set of tokens whose probability reaches top_p (0: the most likely one)"),
	F("Generation.temperature", generation.temperature, "1.0", 1e-6, 1e6,
	  "logits are divided by this"),
	I("Generation.min_dec_len", generation.min_dec_len, "1", 0, 1 << 30,
	  "fewest tokens generated (end of text is suppressed before)"),
	I("Generation.max_dec_len", generation.max_dec_len, "200", 1, 1 << 30,
	  "most tokens generated"),
	I("Generation.num_return_sequences", generation.num_return_sequences, "1", 1, 1 << 16,
	  "sequences returned per prompt"),
	E("Generation.decode_strategy", generation.decode_strategy, "sampling",
	  "sampling|greedy_search|beam_search", "how the next token is chosen"),
	I("Generation.num_beams", generation.num_beams, "1", 1, 1 << 16, "beams for beam_search"),
	F("Generation.length_penalty", generation.length_penalty, "1.0", -1e6, 1e6,
	  "beam scores are divided by ((n + 5) / 6)^length_penalty, n the tokens generated (PaddleNLP's)"),
	F("Generation.repetition_penalty", generation.repetition_penalty, "1.0", 1e-6, 1e6,
	  "logits of tokens already present are divided (positive) or multiplied by this"),
	B("Generation.early_stopping", generation.early_stopping, "False",
	  "beam search stops once num_beams finished hypotheses exist"),
	I("Generation.seed", generation.seed, "1024", 0, BIG, "sampling seed"),

	S("Inference.model_dir", inference.model_dir, "./output",
	  "the model gpt-infer -c reads without -m"),
	I("Inference.mp_degree", inference.mp_degree, "1", 1, 1 << 10,
	  "tensor parallel ways for inference: 1 (one process)"),

	/* FleetX's offline evaluation (tools/eval.py), which its example
	 * configs carry and its trainer does not read either */
	C("Eval.eval_path", GPT_CT_STR, eval.eval_path, NULL,
	  "FleetX tools/eval.py's text to evaluate; gpt-infer --ppl FILE measures perplexity"),
	C("Eval.cloze_eval", GPT_CT_BOOL, eval.cloze_eval, "False",
	  "FleetX tools/eval.py's LAMBADA cloze accuracy instead of perplexity"),
	C("Eval.overlapping_eval", GPT_CT_INT, eval.overlapping_eval, "32",
	  "FleetX tools/eval.py's stride of its overlapping perplexity windows"),
	C("Eval.ckpt_dir", GPT_CT_STR, eval.ckpt_dir, NULL,
	  "FleetX tools/eval.py's checkpoint; gpt-infer -m names the model"),
	C("Eval.batch_size", GPT_CT_INT, eval.batch_size, "8", "FleetX tools/eval.py's batch size"),
	C("Eval.max_seq_len", GPT_CT_INT, eval.max_seq_len, "1024",
	  "FleetX tools/eval.py's window length"),
	C("Eval.logging_freq", GPT_CT_INT, eval.logging_freq, "10",
	  "FleetX tools/eval.py's log interval"),

	B("Quantization.enable", quantization.enable, "False",
	  "quantization-aware training (fake-quantized weights and activations)"),
	E("Quantization.weight_quantize_type", quantization.weight_quantize_type,
	  "channel_wise_abs_max", "abs_max|channel_wise_abs_max",
	  "weight scale: abs_max per tensor or channel_wise_abs_max per output channel"),
	E("Quantization.activation_quantize_type", quantization.activation_quantize_type,
	  "moving_average_abs_max", "abs_max|moving_average_abs_max",
	  "input scale of each quantized linear: the batch's abs max or its moving average"),
	I("Quantization.weight_bits", quantization.weight_bits, "8", 2, 16,
	  "weight bits (int8 export: 8 or fewer)"),
	I("Quantization.activation_bits", quantization.activation_bits, "8", 2, 16,
	  "activation bits"),
	F("Quantization.moving_rate", quantization.moving_rate, "0.9", 0, 1,
	  "decay of the moving-average activation scale"),
	K("Quantization.quantizable_layer_type", GPT_CT_STRLIST, quantization.quantizable_layer_type,
	  "[Linear]", NULL, 0, 0, 0,
	  "linears fake-quantized: Linear (all four), ColumnParallelLinear, RowParallelLinear, or attn.qkv, attn.proj, mlp.fc, mlp.proj"),
	K("Quantization.weight_preprocess_type", GPT_CT_ENUM, quantization.weight_preprocess_type,
	  NULL, "PACT", 0, 0, 0,
	  "null, or PACT: clip each quantized weight to a learned [-alpha, alpha] before its quantizer"),
	K("Quantization.activation_preprocess_type", GPT_CT_ENUM,
	  quantization.activation_preprocess_type, NULL, "PACT", 0, 0, 0,
	  "null, or PACT: clip each quantized linear's input to a learned [-alpha, alpha] before its quantizer"),
	F("Quantization.pact_init_value", quantization.pact_init_value, "100", 1e-6, 1e9,
	  "PACT's initial alpha (PaddleSlim's PACT layer: 100)"),
	F("Quantization.pact_lr_multiplier", quantization.pact_lr_multiplier, "1000", 0, 1e9,
	  "alpha's learning rate over the schedule's (PaddleSlim: 1000; 0 keeps alpha fixed)"),
	C("Quantization.onnx_format", GPT_CT_BOOL, quantization.onnx_format, "True",
	  "Paddle's export format of quantized ops"),
};

/* Spellings from older FleetX configs (seed 002) and FleetX's Model section. */
static const char *const aliases[] = {
	"Optimizer.adam_beta1", "Optimizer.beta1",
	"Optimizer.adam_beta2", "Optimizer.beta2",
	"Optimizer.adam_epsilon", "Optimizer.epsilon",
	"Optimizer.grad_clip", "Optimizer.grad_clip.clip_norm",
	"Global.batch_size.global_batch_size", "Global.global_batch_size",
	"Global.batch_size.local_batch_size", "Global.local_batch_size",
	"Global.batch_size.micro_batch_size", "Global.micro_batch_size",
	"Data.batch_size.global_batch_size", "Global.global_batch_size",
	"Data.batch_size.local_batch_size", "Global.local_batch_size",
	"Data.batch_size.micro_batch_size", "Global.micro_batch_size",
	"Data.dataset.name", "Data.Train.dataset.name",
	"Data.dataset.input_dir", "Data.Train.dataset.input_dir",
	"Data.dataset.split", "Data.Train.dataset.split",
	"Data.dataset.max_seq_len", "Data.Train.dataset.max_seq_len",
	"Model.max_seq_len", "Data.Train.dataset.max_seq_len",
	"Model.virtual_pp_degree", "Distributed.virtual_pp_degree",
	"Engine.use_recompute", "Model.use_recompute",
	"Engine.recompute_granularity", "Model.recompute_granularity",
	"Fused.tensor_fusion", "Optimizer.tensor_fusion", /* FleetX's examples/gpt configs */
	NULL, NULL,
};

/* FleetX's first GPT examples (examples/gpt/{single,data_parallel,
 * group_shard,hybrid_parallel,3D_parallelism}/configs.yaml, whose documents
 * are the seeds' single-card and group-sharded ones) keep everything under
 * one PreTraining section: the training keys at its top, Model, Distributed
 * and Optimizer nested in it. A name under one of these prefixes is read as
 * the name under its replacement. */
static const char *const pretraining[] = {
	"PreTraining.Model", "Model",
	"PreTraining.Distributed", "Distributed",
	"PreTraining.Optimizer", "Optimizer",
	"PreTraining.batch_size", "Global.batch_size",
	"PreTraining.mix_precision", "Engine.mix_precision",
	"PreTraining.save_load", "Engine.save_load",
	"PreTraining.dataset", "Data.Train.dataset",
	"PreTraining.device", "Global.device",
	"PreTraining.seed", "Global.seed",
	"PreTraining.max_steps", "Engine.max_steps",
	"PreTraining.num_train_epochs", "Engine.num_train_epochs",
	"PreTraining.accumulate_steps", "Engine.accumulate_steps",
	"PreTraining.logging_freq", "Engine.logging_freq",
	"PreTraining.eval_freq", "Engine.eval_freq",
	"PreTraining.eval_iters", "Engine.eval_iters",
	"PreTraining.use_recompute", "Model.use_recompute",
	"PreTraining.recompute_granularity", "Model.recompute_granularity",
	"PreTraining.fused_linear", "Model.fused_linear",
	"PreTraining.tensor_fusion", "Optimizer.tensor_fusion",
	NULL, NULL,
};

/* The name a PreTraining name stands for, in buf; NULL when it is none. */
static const char *from_pretraining(const char *name, char *buf, size_t size)
{
	if (strncmp(name, "PreTraining.", 12) != 0)
		return NULL;
	for (int i = 0; pretraining[i]; i += 2) {
		size_t n = strlen(pretraining[i]);
		if (strncmp(name, pretraining[i], n) == 0 && (name[n] == '.' || !name[n])) {
			if ((size_t)snprintf(buf, size, "%s%s", pretraining[i + 1], name + n) >= size)
				return NULL;
			return buf;
		}
	}
	return NULL;
}

const char *gpt_config_null_means(const char *name)
{
	char buf[256];
	const char *to = from_pretraining(name, buf, sizeof buf);
	return strcmp(to ? to : name, "Optimizer.grad_clip") == 0 ? "0" : NULL;
}

#define NKEYS ((int)(sizeof keys / sizeof keys[0]))

const gpt_config_key *gpt_config_keys(int *n)
{
	*n = NKEYS;
	return keys;
}

const char *const *gpt_config_aliases(void)
{
	return aliases;
}

int gpt_config_key_find(const char *name)
{
	for (int i = 0; i < NKEYS; i++)
		if (strcmp(keys[i].name, name) == 0)
			return i;
	for (int i = 0; aliases[i]; i += 2)
		if (strcmp(aliases[i], name) == 0)
			return gpt_config_key_find(aliases[i + 1]);
	char buf[256];
	const char *to = from_pretraining(name, buf, sizeof buf);
	return to ? gpt_config_key_find(to) : -1;
}

static int depth_of(const char *s)
{
	int d = 0;
	for (; *s; s++)
		d += *s == '.';
	return d;
}

static const char *last_part(const char *s)
{
	const char *dot = strrchr(s, '.');
	return dot ? dot + 1 : s;
}

static void consider(const char *cand, const char *name, int depth, int *best, const char **out)
{
	if (depth >= 0 && depth_of(cand) != depth)
		return;
	/* Half steps, so that a truncated name ("Model.hidden" for
	 * Model.hidden_size) beats an unrelated short one at equal distance. */
	int d = 2 * gpt_edit_distance(cand, name);
	const char *lc = last_part(cand), *ln = last_part(name);
	size_t n = strlen(ln);
	if (n >= 3 && strncasecmp(lc, ln, n) == 0 &&
	    (size_t)(lc - cand) == (size_t)(ln - name) && strncmp(cand, name, (size_t)(lc - cand)) == 0)
		d = 1;
	if (d < *best) {
		*best = d;
		*out = cand;
	}
}

/* Section names, for suggestions at the section level ("Modle" -> "Model"). */
static const char *const sections[] = {
	"Global", "Engine", "Engine.mix_precision", "Engine.save_load", "Engine.skip_spikes",
	"Engine.fault_inject", "Model", "Data",
	"Data.Train", "Data.Eval", "Data.Train.dataset", "Data.Train.sampler",
	"Data.Train.loader", "Data.Eval.dataset", "Data.Eval.sampler", "Data.Eval.loader",
	"Optimizer", "Optimizer.lr", "Optimizer.grad_clip", "Distributed",
	"Distributed.sharding", "Generation", "Inference", "Eval", "Quantization", NULL,
};

int gpt_config_is_section(const char *name)
{
	char buf[256];
	const char *to = from_pretraining(name, buf, sizeof buf);
	if (to)
		return gpt_config_is_section(to);
	if (strcmp(name, "PreTraining") == 0)
		return 1;
	for (int i = 0; sections[i]; i++)
		if (strcmp(sections[i], name) == 0)
			return 1;
	/* sections of the older spellings: Global.batch_size, Data.dataset, ... */
	size_t n = strlen(name);
	for (int i = 0; aliases[i]; i += 2)
		if (strncmp(aliases[i], name, n) == 0 && aliases[i][n] == '.')
			return 1;
	return 0;
}

const char *gpt_config_unread_note(const char *name)
{
	/* the keys of FleetX's GPTForGeneration (configs.get) and PaddleNLP's
	 * generate() that gptkit has no key for */
	static const char *const tok = "gpt-infer takes the end-of-text token from the model's "
				       "tokenizer (50256 for GPT-2's, 256 for the byte tokenizer's) "
				       "and pads nothing; leave it out";
	static const char *const len = "PaddleNLP's generate() name; gptkit's key is "
				       "Generation.max_dec_len (or min_dec_len), the tokens generated";
	static const char *const grp = "diverse (group) beam search, which gptkit does not "
				       "provide; leave it out for plain beam search";
	static const char *const forced = "forced tokens, which gptkit does not provide; leave it out";
	/* FleetX's GPT fine-tuning document: lr: {name: LinearDecayWithWarmup,
	 * warmup: 0.1, learning_rate: 2e-5}, the keys of its own
	 * LinearDecayWithWarmup class; "did you mean warmup_rate" would lead a
	 * learning rate into the warm-up fraction. */
	static const char *const notes[] = {
		"Optimizer.lr.learning_rate",
		"FleetX's key for the rate of its fine-tuning LinearDecayWithWarmup (or, with no "
		"lr.name, a constant rate); gptkit's schedules rise to Optimizer.lr.max_lr and fall to "
		"Optimizer.lr.min_lr at Optimizer.lr.decay_steps: give max_lr (and "
		"Optimizer.lr.name=Constant for a constant rate)",
		"Optimizer.lr.warmup",
		"FleetX's warm-up of its fine-tuning LinearDecayWithWarmup (a fraction of all steps, "
		"or a step count); give Optimizer.lr.warmup_rate (a fraction of "
		"Optimizer.lr.decay_steps) or Optimizer.lr.warmup_steps",
		"Generation.eos_token_id", tok,
		"Generation.bos_token_id", tok,
		"Generation.pad_token_id", tok,
		"Generation.use_topp_sampling",
		"FleetX's switch to its fused top-p CUDA kernel (ppfleetx_ops); gpt-infer samples "
		"from the same top_k and top_p distribution on every device; leave it out",
		"Generation.num_beam_groups", grp,
		"Generation.diversity_rate", grp,
		"Generation.no_repeat_ngram_size",
		"n-gram blocking, which gptkit does not provide; Generation.repetition_penalty "
		"penalises the tokens already present",
		"Generation.forced_bos_token_id", forced,
		"Generation.forced_eos_token_id", forced,
		"Generation.use_cache", "gpt-infer always decodes with a KV cache; leave it out",
		"Generation.inference",
		"FleetX's switch for exported models; gpt-infer reads bundles and checkpoints alike; "
		"leave it out",
		"Generation.max_length", len,
		"Generation.min_length", len,
		"Generation.max_new_tokens", len,
		NULL,
	};
	for (int i = 0; notes[i]; i += 2)
		if (strcmp(notes[i], name) == 0)
			return notes[i + 1];
	return NULL;
}

const char *gpt_config_key_nearest(const char *name)
{
	/* Compared at the same depth first, so "Modle" meets sections and
	 * "Model.hiden_size" meets keys. */
	char buf[256];
	const char *to = from_pretraining(name, buf, sizeof buf);
	if (to)
		return gpt_config_key_nearest(to); /* the key it would be */
	int depth = depth_of(name), best = 1 << 30;
	const char *out = NULL;
	for (int pass = 0; pass < 2 && !out; pass++) {
		int want = pass == 0 ? depth : -1;
		for (int i = 0; i < NKEYS; i++)
			consider(keys[i].name, name, want, &best, &out);
		for (int i = 0; sections[i]; i++)
			consider(sections[i], name, want, &best, &out);
		for (int i = 0; aliases[i]; i += 2)
			consider(aliases[i], name, want, &best, &out);
		if (strncmp(name, "PreTraining.", 12) == 0)
			for (int i = 0; pretraining[i]; i += 2)
				consider(pretraining[i], name, want, &best, &out);
	}
	return out;
}

void gpt_config_list_keys(FILE *fp)
{
	static const char *const tn[] = {"int", "float", "bool", "string", "enum",
					 "list", "int-list", "split"};
	for (int i = 0; i < NKEYS; i++) {
		const gpt_config_key *k = &keys[i];
		fprintf(fp, "%s\t%s\t%s\t%s%s\n", k->name,
			k->type == GPT_CT_ENUM ? k->choices : tn[k->type],
			k->def ? k->def : (k->flags & GPT_CK_DERIVED) ? "(derived)" : "null",
			k->flags & GPT_CK_COMPAT ? "accepted for compatibility, no effect in gptkit: "
						 : "",
			k->help);
	}
}
