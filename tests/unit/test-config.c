/* lib/config, the parameter table of lib/model and the memory plan of
 * lib/train: typed loading, overrides, PaddleNLP flags, derivation, errors,
 * printing that reads back, parameter counts and activation formulas. */
#include "config/config.h"
#include "model/model.h"
#include "train/train.h"

#include "tap.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char base_yaml[] =
	"Global:\n"
	"  global_batch_size: 32\n"
	"  micro_batch_size: 2\n"
	"Engine:\n"
	"  mix_precision:\n"
	"    use_pure_fp16: True\n"
	"    scale_loss: 1024.0\n"
	"Model:\n"
	"  vocab_size: 50257\n"
	"  hidden_size: 256\n"
	"  num_layers: 4\n"
	"  num_attention_heads: 8\n"
	"Data:\n"
	"  Train:\n"
	"    dataset:\n"
	"      split: [969, 30, 1]\n"
	"      max_seq_len: 128\n"
	"Distributed:\n"
	"  mp_degree: 2\n"
	"  sharding:\n"
	"    sharding_stage: 2\n";

/* Loads text, applies overrides and resolves with world; returns the code. */
static int load(gpt_config *cfg, const char *text, const char *const *ov, int nov, int64_t world,
		gpt_err *err)
{
	int rc = gpt_config_init(cfg, err);
	if (!rc && text)
		rc = gpt_config_read_text(cfg, text, strlen(text), "t.yaml", err);
	for (int i = 0; !rc && i < nov; i++)
		rc = gpt_config_override(cfg, ov[i], err);
	if (!rc)
		rc = gpt_config_resolve(cfg, world, err);
	return rc;
}

static void test_typed(void)
{
	gpt_config cfg;
	gpt_err err = {0};
	is_int(load(&cfg, base_yaml, NULL, 0, 8, &err), 0, "base config resolves (%s)", err.msg);
	is_int(cfg.model.hidden_size, 256, "Model.hidden_size read");
	is_int(cfg.model.ffn_hidden_size, 1024, "ffn defaults to 4 x hidden");
	is_int(cfg.head_size, 32, "head size hidden / heads");
	is_int(cfg.padded_vocab_size, 50304, "50257 padded to 50304");
	is_str(cfg.data.train.dataset.split, "969,30,1", "split sequence normalised");
	is_int(cfg.data.eval.dataset.max_seq_len, 128, "Eval follows Train when left out");
	is_int(cfg.distributed.dp_degree, 4, "dp derived as 8 / (mp 2 x pp 1 x sharding 1)");
	is_int(cfg.global.local_batch_size, 8, "local = global / (dp x sharding)");
	is_int(cfg.engine.accumulate_steps, 4, "accumulate = local / micro");
	ok(cfg.mixed && strcmp(cfg.engine.mix_precision.level, "O2") == 0, "use_pure_fp16 is O2");
	is_str(cfg.distributed.pipeline_schedule, "1F1B", "schedule defaults to 1F1B");
	is_int(cfg.distributed.overlap_grad_reduce, strcmp(cfg.global.device, "gpu") == 0,
	       "overlap_grad_reduce defaults to on for gpu, off for cpu (device %s)", cfg.global.device);
	is_near(cfg.distributed.comm_buffer_size, 25.0, 0, "comm_buffer_size defaults to 25 MB");
	is_near(cfg.engine.mix_precision.scale_loss, 1024.0, 0, "scale_loss read");
	gpt_config_free(&cfg);
}

static void test_overrides_and_flags(void)
{
	gpt_config cfg;
	gpt_err err = {0};
	const char *ov[] = {"Distributed.sharding.sharding_stage=3", "Optimizer.adam_beta2=0.95",
			    "Optimizer.grad_clip=0.5", "Engine.fault_inject.spike_steps=[0, 3]",
			    "Engine.mix_precision.dtype=bf16"};
	is_int(load(&cfg, base_yaml, ov, 5, 8, &err), 0, "overrides apply (%s)", err.msg);
	is_int(cfg.distributed.sharding.sharding_stage, 3, "nested override");
	is_near(cfg.optimizer.beta2, 0.95, 0, "adam_beta2 alias");
	is_near(cfg.optimizer.grad_clip.clip_norm, 0.5, 0, "scalar grad_clip alias");
	is_int(cfg.engine.fault_inject.spike_steps.n, 2, "int list override");
	is_str(cfg.engine.mix_precision.dtype, "bfloat16", "bf16 spelled bfloat16");
	gpt_config_free(&cfg);

	/* PaddleNLP: tp 2, pp 2, "stage2 offload" without a degree on 16 ranks:
	 * sharding takes the rest (4), dp is 1. */
	gpt_config_init(&cfg, &err);
	gpt_config_read_text(&cfg, "Model:\n  num_layers: 4\n", 22, "p.yaml", &err);
	is_int(gpt_config_paddlenlp(&cfg, "tensor_parallel_degree", "2", &err), 0, "tp flag");
	is_int(gpt_config_paddlenlp(&cfg, "pipeline_parallel_degree", "2", &err), 0, "pp flag");
	is_int(gpt_config_paddlenlp(&cfg, "sharding", "stage2 offload", &err), 0, "sharding flag");
	is_int(gpt_config_resolve(&cfg, 16, &err), 0, "resolves on 16 ranks (%s)", err.msg);
	is_int(cfg.distributed.sharding.sharding_degree, 4, "sharding takes the rest");
	is_int(cfg.distributed.dp_degree, 1, "dp 1 then");
	ok(cfg.distributed.sharding.sharding_offload && cfg.distributed.sharding.sharding_stage == 2,
	   "stage 2 with offload");
	gpt_config_free(&cfg);

	gpt_config_init(&cfg, &err);
	gpt_config_paddlenlp(&cfg, "sharding", "stage1", &err);
	gpt_config_paddlenlp(&cfg, "sharding_parallel_degree", "2", &err);
	is_int(gpt_config_resolve(&cfg, 8, &err), 0, "sharding 2 of 8 ranks");
	is_int(cfg.distributed.dp_degree, 4, "dp derived as 8 / 2");
	gpt_config_free(&cfg);

	gpt_config_init(&cfg, &err);
	is_int(gpt_config_paddlenlp(&cfg, "sharding", "stage4", &err), GPT_EUSAGE, "stage4 refused");
	ok(strstr(err.msg, "--sharding stage4") != NULL, "message names the flag: %s", err.msg);
	gpt_config_free(&cfg);

	setenv("GPT_WORLD_SIZE", "6", 1);
	is_int(load(&cfg, "Distributed:\n  mp_degree: 2\n", NULL, 0, 0, &err), 0, "world from env");
	is_int(cfg.distributed.dp_degree, 3, "dp 6 / 2");
	is_str(cfg.world_size_from, "GPT_WORLD_SIZE", "source named");
	gpt_config_free(&cfg);
	unsetenv("GPT_WORLD_SIZE");

	is_int(load(&cfg, "Model:\n  num_layers: 32\nDistributed:\n  mp_degree: 8\n  pp_degree: 16\n",
		    NULL, 0, 0, &err), 0,
	       "no world size: the layout decides");
	is_int(cfg.world_size, 128, "world = product of the degrees");
	gpt_config_free(&cfg);
}

static void expect_err(const char *text, const char *ov, int64_t world, int code, const char *want1,
		       const char *want2, const char *what)
{
	gpt_config cfg;
	gpt_err err = {0};
	const char *ovs[] = {ov};
	int rc = load(&cfg, text, ovs, ov ? 1 : 0, world, &err);
	is_int(rc, code, "%s: exit code", what);
	ok(strstr(err.msg, want1) && (!want2 || strstr(err.msg, want2)) && !strchr(err.msg, '\n'),
	   "%s: one line naming '%s': %s", what, want1, err.msg);
	gpt_config_free(&cfg);
}

static void test_errors(void)
{
	expect_err("Model:\n  hiden_size: 3\n", NULL, 0, GPT_EDATA, "t.yaml:2:3:",
		   "did you mean Model.hidden_size?", "unknown key");
	expect_err("Distributed:\n  sharding:\n    sharding_stag: 2\n", NULL, 0, GPT_EDATA,
		   "t.yaml:3:5", "Distributed.sharding.sharding_stage", "nested unknown key");
	expect_err("Model:\n  hidden_size: big\n", NULL, 0, GPT_EDATA, "t.yaml:2:16",
		   "expected an integer", "wrong type");
	expect_err("Model:\n  hidden_size: [1]\n", NULL, 0, GPT_EDATA, "found a sequence", NULL,
		   "sequence for a number");
	expect_err("Distributed:\n  pp_degree: -2\n", NULL, 0, GPT_EDATA, "pp_degree", "found '-2'",
		   "negative degree");
	expect_err("Distributed:\n  mp_degree: 3\n", NULL, 8, GPT_EDATA, "world size 8",
		   "mp_degree 3", "degree does not divide");
	expect_err("Global:\n  global_batch_size: 12\n  micro_batch_size: 5\n", NULL, 0, GPT_EDATA,
		   "Global.micro_batch_size", "local_batch_size 12", "micro does not divide");
	expect_err("Global:\n  global_batch_size: 6\nDistributed:\n  dp_degree: 4\n", NULL, 0,
		   GPT_EDATA, "t.yaml:2:22", "4 x 1 = 4", "global not a multiple of replicas");
	expect_err("Global:\n  global_batch_size: 8\n  local_batch_size: 3\n", NULL, 0, GPT_EDATA,
		   "Global.local_batch_size", "found 3", "inconsistent local");
	expect_err("Model: [\n", NULL, 0, GPT_EDATA, "YAML syntax error", NULL, "syntax");
	expect_err("", NULL, 0, GPT_EDATA, "empty", NULL, "empty");
	expect_err("Model:\n  num_layers: 2\nModel:\n  num_layers: 4\n", NULL, 0, GPT_EDATA,
		   "duplicate key Model", NULL,
		   "duplicate");
	expect_err(NULL, "Model.hidden_sise=8", 0, GPT_EUSAGE, "-o Model.hidden_sise=8",
		   "did you mean Model.hidden_size?", "unknown override");
	expect_err(NULL, "Model.num_layers=x", 0, GPT_EUSAGE, "-o Model.num_layers=x",
		   "expected an integer", "bad override value");
	expect_err(NULL, "Distributed.virtual_pp_degree=2", 0, GPT_EUSAGE,
		   "virtual_pp_degree", "pp_degree is 1", "vpp without pp");
	expect_err("Model:\n  num_attention_heads: 12\n", NULL, 0, GPT_EDATA, "num_attention_heads",
		   "hidden_size 1024", "heads do not divide hidden");
	expect_err("Model:\n  num_layers: 6\nDistributed:\n  pp_degree: 4\n", NULL, 0, GPT_EDATA,
		   "Model.num_layers", "pp_degree x virtual_pp_degree", "layers over stages");
	/* settings the trainer cannot honour: refused by resolve itself */
	expect_err("Engine:\n  mix_precision:\n    enable: True\n    level: O1\n", NULL, 0, GPT_EDATA,
		   "t.yaml:4:12: Engine.mix_precision.level: O1", "set it to O2", "level O1");
	expect_err("Model:\n  num_layers: 4\n  no_recompute_layers: [1, 4]\n", NULL, 0, GPT_EDATA,
		   "t.yaml:3:24: Model.no_recompute_layers",
		   "expected layer indices from 0 to num_layers - 1 = 3, found 4", "no_recompute_layers past the model");
	expect_err("Global:\n  device: cpu\n", "Model.fused_linear=True", 0, GPT_EUSAGE,
		   "-o Model.fused_linear=True: Model.fused_linear", "the CPU backend has none",
		   "fused_linear on the CPU");
	expect_err("Data:\n  Eval:\n    sampler:\n      drop_last: False\n", NULL, 0, GPT_EDATA,
		   "t.yaml:4:18: Data.Eval.sampler.drop_last", "full global batch", "drop_last False");
	expect_err(NULL, "Distributed.sharding.broadcast_overlap=True", 0, GPT_EUSAGE,
		   "Distributed.sharding.broadcast_overlap: the parameters", NULL, "broadcast_overlap");
	expect_err("Engine:\n  skip_spikes: {enable: True, loss_zscore: 0, grad_norm_zscore: 0}\n",
		   NULL, 0, GPT_EDATA, "Engine.skip_spikes.enable: True with", NULL,
		   "skip_spikes without a threshold");
	expect_err("Engine:\n  fault_inject: {nan_steps: [3], nan_rank: 4}\n", NULL, 4, GPT_EDATA,
		   "Engine.fault_inject.nan_rank: 4 is not a rank of this run of 4", NULL,
		   "nan_rank outside the world");
	expect_err("Quantization:\n  enable: True\n  quantizable_layer_type: [Conv2D]\n", NULL, 0,
		   GPT_EDATA, "t.yaml:3:", "Conv2D is not a layer of GPT", "quantizable_layer_type");
}

static void test_roundtrip(void)
{
	gpt_config a, b;
	gpt_err err = {0};
	char *t1 = NULL, *t2 = NULL;
	size_t n1 = 0, n2 = 0;
	const char *ov[] = {"Engine.save_load.output_dir=out \"dir\"\\x",
			    "Optimizer.lr.max_lr=0.00030000000000000003"};
	is_int(load(&a, base_yaml, ov, 2, 8, &err), 0, "config for printing");
	FILE *f = open_memstream(&t1, &n1);
	is_int(gpt_config_write_yaml(&a, f, &err), 0, "printed");
	fclose(f);
	gpt_config_init(&b, &err);
	is_int(gpt_config_read_text(&b, t1, n1, "printed.yaml", &err), 0, "printed text reads (%s)",
	       err.msg);
	is_int(gpt_config_resolve(&b, 0, &err), 0, "and resolves without a world size (%s)", err.msg);
	f = open_memstream(&t2, &n2);
	gpt_config_write_yaml(&b, f, &err);
	fclose(f);
	ok(n1 == n2 && memcmp(t1, t2, n1) == 0, "printing the printed config gives the same text");
	is_str(b.engine.save_load.output_dir, "out \"dir\"\\x", "string with quotes survives");
	ok(b.optimizer.lr.max_lr == 0.00030000000000000003, "float survives exactly");
	free(t1);
	free(t2);
	gpt_config_free(&a);
	gpt_config_free(&b);
}

static void test_params(void)
{
	gpt_model_shape s = {50304, 50304, 1024, 1024, 24, 16, 4096};
	is_int(gpt_param_count(&s), 354871296, "345M: V*C + T*C + L*(12C^2 + 13C) + 2C");
	gpt_param_info *t;
	int64_t n;
	gpt_err err = {0};
	is_int(gpt_param_table(&s, &t, &n, &err), 0, "table builds");
	is_int(n, 2 + 12 * 24 + 2, "one entry per tensor, wte once (tied head)");
	is_str(t[0].name, "wte", "wte first");
	is_int(t[0].tp_dim, 0, "wte is vocab parallel");
	is_str(t[4].name, "h.0.attn.qkv.weight", "qkv name");
	ok(t[4].ndim == 3 && t[4].shape[0] == 3 && t[4].tp_dim == 1 && t[4].decay,
	   "qkv [3, C, C] split on dim 1, decayed");
	is_str(t[12].name, "h.0.mlp.proj.weight", "mlp.proj name");
	ok(t[12].shape[0] == 1024 && t[12].shape[1] == 4096 && t[12].tp_dim == 1,
	   "mlp.proj [C, F] row parallel");
	ok(!t[2].decay && t[2].tp_dim == -1, "LayerNorm replicated, not decayed");
	is_int(gpt_param_numel_tp(&t[10], 8), 4096 * 1024 / 8, "fc weight split over tp 8");
	free(t);
	gpt_model_shape big = {50304, 50304, 2048, 12288, 96, 96, 49152};
	int64_t c = gpt_param_count(&big);
	ok(c > 174000000000LL && c < 176000000000LL, "175B shape: %lld parameters", (long long)c);
	gpt_model_shape bad = {50304, 50304, 1024, 1000, 2, 16, 4000};
	is_int(gpt_param_table(&bad, &t, &n, &err), GPT_EUSAGE, "hidden not a multiple of heads");
	is_int(gpt_param_count(&bad), -1, "count refuses too");
}

static void test_plan(void)
{
	gpt_config cfg;
	gpt_err err = {0};
	const char *y = "Global:\n  global_batch_size: 4\n  micro_batch_size: 4\n"
			"Engine:\n  mix_precision:\n    use_pure_fp16: True\n"
			"Model:\n  hidden_size: 1024\n  num_layers: 24\n  num_attention_heads: 16\n";
	is_int(load(&cfg, y, NULL, 0, 0, &err), 0, "plan config");
	gpt_train_memory m;
	is_int(gpt_train_memory_plan(&cfg, &m, &err), 0, "plan");
	double s = 1024, b = 4, h = 1024, a = 16;
	/* Global.device gpu: the flash-style attention keeps an fp32
	 * log-sum-exp per row and head instead of the 5as^2b score term, and
	 * on the tensor cores (fp16, head size 64) the output's 16-bit low
	 * half, 2sbh, and (attention dropout 0.1 by default) its mask, a bit
	 * for each probability of the causal triangle, as^2b/16 */
	is_near(m.layer_none, s * b * h * 36 + 4 * a * s * b + a * s * s * b / 16, 0.5,
		"one layer on the GPU: sbh(34 + 2) + 4asb + as^2b/16 bytes at 16 bits (Korthikanti et al., flash)");
	is_near(m.layer_full, 2 * s * b * h, 0.5, "full recompute keeps 2sbh");
	is_near(m.stage[0].param_bytes, 2.0 * (double)m.param_count, 0.5, "2-byte parameters");
	is_near(m.stage[0].optim_device, 12.0 * (double)m.param_count, 0.5,
		"fp32 master + m + v = 12 bytes");
	gpt_train_memory_free(&m);
	gpt_config_free(&cfg);

	/* stage 3 over 4 ranks with offload */
	const char *ov[] = {"Global.global_batch_size=16", "Distributed.sharding.sharding_degree=4",
			    "Distributed.sharding.sharding_stage=3",
			    "Distributed.sharding.sharding_offload=True"};
	is_int(load(&cfg, y, ov, 4, 0, &err), 0, "sharded config (%s)", err.msg);
	gpt_train_memory_plan(&cfg, &m, &err);
	double P = (double)m.param_count;
	double layer = 12.0 * 1024 * 1024 + 13 * 1024;
	/* the window: one layer, the embedding (wte, wpe) and ln_f */
	double window = layer + (double)(cfg.padded_vocab_size + cfg.model.max_position_embeddings) * 1024 + 2 * 1024;
	is_near(m.stage[0].param_bytes, 2 * ceil(P / 4) + 2 * window, 0.5,
		"stage 3 splits parameters (and gathers one unit at a time)");
	is_near(m.stage[0].grad_bytes, 2 * ceil(P / 4) + 2 * (window + layer), 0.5,
		"and gradients, with a second layer window (the reductions overlap: the GPU default)");
	is_near(m.stage[0].optim_device, 0, 0, "offload: no optimizer state on the device");
	/* 12 bytes of state, and on the GPU the 2-byte pinned images of the
	 * shard's parameters and gradients */
	is_near(m.stage[0].optim_host, (12 + 2 + 2) * ceil(P / 4), 0.5, "but a quarter of it on the host");
	gpt_train_memory_free(&m);
	gpt_config_free(&cfg);

	/* fp16 at stage 3 without offload, one rank: the master weights are
	 * the parameters' only copy, the windows cast from them */
	const char *m3[] = {"Distributed.sharding.sharding_stage=3"};
	is_int(load(&cfg, y, m3, 1, 0, &err), 0, "stage 3 on one rank (%s)", err.msg);
	gpt_train_memory_plan(&cfg, &m, &err);
	ok(gpt_train_params_from_master(&cfg), "fp16 at stage 3: the parameters from the master");
	is_near(m.stage[0].param_bytes, 2 * window, 0.5, "no parameter copy, the window alone");
	is_near(m.stage[0].grad_bytes, 2 * (double)m.param_count, 0.5, "whole gradients (one rank)");
	is_near(m.stage[0].optim_device, 12.0 * (double)m.param_count, 0.5, "the state on the device");
	gpt_train_memory_free(&m);
	gpt_config_free(&cfg);
	const char *m3b[] = {"Distributed.sharding.sharding_stage=3", "Engine.mix_precision.dtype=bfloat16"};
	is_int(load(&cfg, y, m3b, 2, 0, &err), 0, "bf16 stage 3 on one rank (%s)", err.msg);
	ok(!gpt_train_params_from_master(&cfg), "bf16 keeps its parameters (the master's high halves)");
	gpt_config_free(&cfg);

	/* tp 8 without sequence parallelism: sbh(10 + 24/t + 5as/(ht)) */
	const char *ov2[] = {"Distributed.mp_degree=8"};
	is_int(load(&cfg, y, ov2, 1, 0, &err), 0, "tp config");
	gpt_train_memory_plan(&cfg, &m, &err);
	is_near(m.layer_none, s * b * h * (10 + 26.0 / 8) + 4 * a * s * b / 8 + a * s * s * b / (16 * 8), 0.5,
		"tp 8 on the GPU: sbh(10 + (24 + 2)/t) + 4asb/t + as^2b/16t");
	gpt_train_memory_free(&m);
	gpt_config_free(&cfg);

	/* on the CPU the textbook score term: sbh(34 + 5as/h) */
	const char *ov3[] = {"Global.device=cpu"};
	is_int(load(&cfg, y, ov3, 1, 0, &err), 0, "cpu config");
	gpt_train_memory_plan(&cfg, &m, &err);
	is_near(m.layer_none, s * b * h * (34 + 5 * a * s / h), 0.5,
		"one layer on the CPU: sbh(34 + 5as/h) bytes at 16 bits (Korthikanti et al.)");
	gpt_train_memory_free(&m);
	gpt_config_free(&cfg);
}

static void test_keys(void)
{
	int n;
	const gpt_config_key *k = gpt_config_keys(&n);
	ok(n > 100, "%d keys", n);
	int dup = 0;
	for (int i = 0; i < n; i++)
		for (int j = 0; j < i; j++)
			dup += strcmp(k[i].name, k[j].name) == 0;
	is_int(dup, 0, "no key twice");
	is_int(gpt_config_key_find("Optimizer.adam_epsilon"), gpt_config_key_find("Optimizer.epsilon"),
	       "alias finds its key");
	is_str(gpt_config_key_nearest("Distributed.mp_degre"), "Distributed.mp_degree", "nearest key");
	is_str(gpt_config_key_nearest("Modle"), "Model", "nearest section");
	/* every default parses as its own type (init would fail otherwise) */
	gpt_config cfg;
	gpt_err err = {0};
	is_int(gpt_config_init(&cfg, &err), 0, "defaults parse (%s)", err.msg);
	is_int(gpt_config_resolve(&cfg, 0, &err), 0, "defaults resolve (%s)", err.msg);
	gpt_config_free(&cfg);
}

static void test_load_file(void)
{
	char dir[] = "/tmp/gpt-test-config.XXXXXX", base[64], top[64];
	gpt_config cfg;
	gpt_err err = {0};
	if (!mkdtemp(dir)) {
		ok(0, "mkdtemp");
		return;
	}
	snprintf(base, sizeof base, "%s/base.yaml", dir);
	snprintf(top, sizeof top, "%s/top.yaml", dir);
	FILE *f = fopen(base, "w");
	fputs(base_yaml, f);
	fclose(f);
	f = fopen(top, "w");
	fputs("_base_: base.yaml\nModel:\n  num_layers: 8\n", f);
	fclose(f);
	char *ov[] = {"Global.micro_batch_size=4"};
	setenv("WORLD_SIZE", "4", 1);
	is_int(gpt_config_load(&cfg, top, ov, 1, &err), 0, "gpt_config_load with _base_ (%s)",
	       err.msg);
	unsetenv("WORLD_SIZE");
	is_int(cfg.model.num_layers, 8, "the file overrides its base");
	is_int(cfg.model.hidden_size, 256, "the base supplies the rest");
	is_int(cfg.distributed.dp_degree, 2, "world size 4 from WORLD_SIZE, mp 2");
	is_int(cfg.engine.accumulate_steps, 4, "32 / (2 x 1) / 4");
	gpt_config_free(&cfg);
	is_int(gpt_config_load(&cfg, "/nonexistent/x.yaml", NULL, 0, &err),
	       GPT_ENOINPUT, "missing file is 66");
	gpt_config_free(&cfg);
	remove(base);
	remove(top);
	rmdir(dir);
}

int main(void)
{
	unsetenv("GPT_WORLD_SIZE");
	unsetenv("WORLD_SIZE");
	unsetenv("SLURM_NTASKS");
	unsetenv("OMPI_COMM_WORLD_SIZE");
	test_typed();
	test_overrides_and_flags();
	test_errors();
	test_roundtrip();
	test_params();
	test_plan();
	test_keys();
	test_load_file();
	return done_testing();
}
