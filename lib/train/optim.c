/* AdamW over the flat parameter buffer, global-norm clipping support, and
 * ZeRO-Offload of the optimizer state to host memory. */
#include "train/train.h"

#include "cpu/cpu.h"
#if GPT_HAVE_CUDA
#include "cuda/cuda.h"
#endif

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int host_side(gpt_optimizer *op, gpt_err *err);

/* The run of table entries from entry i on that follow each other in the
 * flat buffers with the same key (what key says of an entry), cut to op's
 * range (a shard cuts runs anywhere): [*begin, *end), empty when outside it
 * or when entry i has no place in the buffers, and its key in *k. Returns
 * the entry after it. */
static int64_t table_run(const gpt_optimizer *op, int64_t i, int (*key)(const gpt_model *, int64_t),
			 int64_t *begin, int64_t *end, int *k)
{
	const gpt_model *m = op->model;
	*begin = *end = 0;
	*k = 0;
	if (m->offset[i] < 0)
		return i + 1;
	int64_t b = m->offset[i], e = b + gpt_box_numel(&m->box[i]), j = i + 1;
	*k = key(m, i);
	while (j < m->n_table && m->offset[j] == e && key(m, j) == *k)
		e += gpt_box_numel(&m->box[j++]);
	*begin = b < op->begin ? op->begin : b;
	*end = e > op->end ? op->end : e;
	return j;
}

static int decay_of(const gpt_model *m, int64_t i) { return m->table[i].decay; }
static int owned(const gpt_model *m, int64_t i) { return m->owner[i]; }

/* op's runs: the table's tensors in runs of the same decay setting (the
 * table alternates: a handful a layer), relative to the range's start. */
static int decay_runs(gpt_optimizer *op, gpt_err *err)
{
	const gpt_model *m = op->model;
	op->nruns = 0;
	op->runs = gpt_calloc(m->n_table > 0 ? (size_t)m->n_table : 1, sizeof *op->runs, "optimizer runs", err);
	if (!op->runs)
		return err->code;
	for (int64_t i = 0; i < m->n_table;) {
		int64_t begin, end;
		int decay;
		i = table_run(op, i, decay_of, &begin, &end, &decay);
		if (end > begin)
			op->runs[op->nruns++] = (gpt_adamw_run){begin - op->begin, end - op->begin, decay};
	}
	return 0;
}

int gpt_optimizer_init(gpt_optimizer *op, gpt_model *m, int64_t begin, int64_t end, void *params,
		       void *grads, double beta1, double beta2, double eps, double weight_decay,
		       unsigned flags, gpt_err *err)
{
	memset(op, 0, sizeof *op);
	int offload = (flags & GPT_OPTIM_OFFLOAD) && strcmp(m->be->name, "cpu") != 0;
	int master_only = (flags & GPT_OPTIM_MASTER_ONLY) != 0;
	if (master_only && (offload || m->be->dtype != GPT_DTYPE_F16))
		return gpt_err_set(err, GPT_EINTERNAL, "optimizer: master weights alone are for fp16 parameters on the device");
	if (begin < 0 || end > m->n_alloc || begin > end)
		return gpt_err_set(err, GPT_EINTERNAL, "optimizer: range [%lld, %lld) outside the %lld-element buffers",
				   (long long)begin, (long long)end, (long long)m->n_alloc);
	op->model = m;
	op->begin = begin;
	op->end = end;
	int64_t es0 = (int64_t)gpt_dtype_size(m->be->dtype);
	op->params = master_only ? NULL : params ? params : m->params ? (char *)m->params + begin * es0 : NULL;
	op->grads = grads ? grads : m->grads ? (char *)m->grads + begin * es0 : NULL;
	if ((!op->params && !master_only) || !op->grads) {
		memset(op, 0, sizeof *op);
		return gpt_err_set(err, GPT_EINTERNAL, "optimizer: no parameters or gradients for its range");
	}
	op->sb = m->be;
	op->beta1 = beta1;
	op->beta2 = beta2;
	op->eps = eps;
	op->weight_decay = weight_decay;
	gpt_backend *be = m->be;
	static const char *const needed[] = {"adamw", "adamw_runs", "sum_squares", NULL};
	int rc = gpt_backend_require(be, needed, err);
	if (rc)
		return rc;
	/* Offloaded, the state is made in host memory from the start: made on
	 * the device first and moved, it would hold the device's memory at its
	 * highest (parameters, gradients, activations and the whole state)
	 * while it is copied. */
	if (offload && (rc = host_side(op, err))) {
		gpt_optimizer_free(op);
		return rc;
	}
	gpt_backend *sb = op->sb;
	int off = op->host != NULL;
	int64_t n = end - begin;
	size_t bytes = (size_t)n * 4;
	op->acc = be->ops->alloc(be, 4, "reduction", err);
	op->exp_avg = op->acc ? sb->ops->alloc(sb, bytes, off ? "offloaded optimizer state (exp_avg)"
						      : "optimizer state (exp_avg)", err)
			      : NULL;
	op->exp_avg_sq = op->exp_avg ? sb->ops->alloc(sb, bytes, off ? "offloaded optimizer state (exp_avg_sq)"
								   : "optimizer state (exp_avg_sq)", err)
				     : NULL;
	rc = op->exp_avg_sq ? 0 : err->code;
	if (!rc && be->dtype == GPT_DTYPE_BF16) {
		/* the parameters are the high halves already, exactly: low halves 0 */
		op->master_lo = sb->ops->alloc(sb, (size_t)n * 2,
					       off ? "offloaded optimizer state (fp32 master weights' low halves)"
						   : "optimizer state (fp32 master weights' low halves)",
					       err);
		rc = op->master_lo ? sb->ops->zero(sb, op->master_lo, (size_t)n * 2, err) : err->code;
	} else if (!rc && be->dtype != GPT_DTYPE_F32) {
		op->master = sb->ops->alloc(sb, bytes, off ? "offloaded optimizer state (fp32 master weights)"
							   : "optimizer state (fp32 master weights)", err);
		if (!op->master)
			rc = err->code;
		else if (master_only)
			rc = sb->ops->zero(sb, op->master, bytes, err);
		else if (!off)
			rc = be->ops->convert(be, op->master, GPT_DTYPE_F32, op->params, be->dtype, n, err);
		else if (!(rc = be->ops->download(be, op->hparams, op->params, (size_t)n * (size_t)es0, err)))
			rc = sb->ops->convert(sb, op->master, GPT_DTYPE_F32, op->hparams, be->dtype, n, err);
	}
	if (!rc)
		rc = sb->ops->zero(sb, op->exp_avg, bytes, err);
	if (!rc)
		rc = sb->ops->zero(sb, op->exp_avg_sq, bytes, err);
	if (!rc)
		rc = decay_runs(op, err);
	if (rc) {
		gpt_optimizer_free(op);
		if (off)
			gpt_err_prefix(err, "optimizer offload");
	}
	return rc;
}

static void host_image_free(gpt_optimizer *op, void *p)
{
	if (!p)
		return;
#if GPT_HAVE_CUDA
	if (op->pinned) {
		gpt_cuda_host_free(p);
		return;
	}
#else
	(void)op;
#endif
	free(p);
}

void gpt_optimizer_free(gpt_optimizer *op)
{
	if (!op->model)
		return;
	gpt_backend *be = op->model->be, *sb = op->sb ? op->sb : be;
	void *st[] = {op->master, op->master_lo, op->exp_avg, op->exp_avg_sq};
	for (size_t i = 0; i < sizeof st / sizeof *st; i++)
		if (st[i])
			sb->ops->free(sb, st[i]);
	if (op->acc)
		be->ops->free(be, op->acc);
	host_image_free(op, op->hparams);
	host_image_free(op, op->hgrads);
	free(op->runs);
	if (op->host) {
		gpt_backend_cpu_free(op->host);
		free(op->host);
	}
	memset(op, 0, sizeof *op);
}

static void *host_image(gpt_optimizer *op, size_t bytes, const char *what, gpt_err *err)
{
#if GPT_HAVE_CUDA
	if (strcmp(op->model->be->name, "cuda") == 0) {
		op->pinned = 1;
		return gpt_cuda_host_alloc(bytes, what, err);
	}
#endif
	return gpt_aligned_alloc(bytes, what, err);
}

/* ZeRO-Offload's host side: a CPU backend that runs AdamW, and the host
 * images (pinned on CUDA) of the range's parameters and gradients; what it
 * made stays in op for gpt_optimizer_free. */
static int host_side(gpt_optimizer *op, gpt_err *err)
{
	gpt_backend *be = op->model->be;
	size_t n = (size_t)(op->end - op->begin), es = gpt_dtype_size(be->dtype);
	gpt_backend *h = gpt_calloc(1, sizeof *h, "optimizer offload", err);
	if (!h)
		return err->code;
	int rc = gpt_backend_cpu_init(h, be->dtype, 0, err);
	if (rc) {
		free(h);
		return gpt_err_prefix(err, "optimizer offload");
	}
	op->host = h;
	op->sb = h;
	static const char *const needed[] = {"adamw", "adamw_runs", "convert", "zero", NULL};
	rc = gpt_backend_require(h, needed, err);
	if (!rc) {
		op->hparams = host_image(op, n * es, "offloaded parameters", err);
		op->hgrads = op->hparams ? host_image(op, n * es, "offloaded gradients", err) : NULL;
		rc = op->hgrads ? 0 : err->code;
	}
	return rc ? gpt_err_prefix(err, "optimizer offload") : 0;
}

int gpt_optimizer_grad_sumsq(gpt_optimizer *op, double *sumsq, gpt_err *err)
{
	gpt_model *m = op->model;
	gpt_backend *be = m->be;
	float acc = 0;
	/* An Inf or NaN anywhere makes the sum of squares Inf or NaN, so the
	 * one pass over the gradients answers both questions. The accumulator
	 * is zeroed in place (0.0f is all zero bits), not uploaded. */
	int rc = be->ops->zero(be, op->acc, 4, err);
	/* Only the tensors this rank owns (m->owner): a copy replicated over
	 * tp or the tied wte of the last pipeline stage counts elsewhere. One
	 * call per run of owned tensors; with nothing replicated that is the
	 * whole range at once. */
	size_t es = gpt_dtype_size(be->dtype);
	for (int64_t i = 0; i < m->n_table && !rc;) {
		int64_t begin, end;
		int own;
		i = table_run(op, i, owned, &begin, &end, &own);
		if (own && end > begin)
			rc = be->ops->sum_squares(be, op->acc, (char *)op->grads + (begin - op->begin) * (int64_t)es,
						  end - begin, err);
	}
	if (!rc)
		rc = be->ops->download(be, &acc, op->acc, 4, err);
	if (!rc)
		*sumsq = (double)acc;
	return rc;
}

int gpt_optimizer_step(gpt_optimizer *op, double lr, double grad_scale, gpt_err *err)
{
	gpt_model *m = op->model;
	gpt_backend *be = m->be;
	size_t es = gpt_dtype_size(be->dtype);
	op->t++;
	int rc = 0;
	/* Offloaded: the range comes down whole (parameters too, so that the
	 * elements no tensor covers go back up as they were), AdamW runs on
	 * the host, the parameters go back up. */
	void *params = op->params, *grads = op->grads;
	size_t bytes = (size_t)(op->end - op->begin) * es;
	if (op->host) {
		rc = be->ops->download(be, op->hparams, op->params, bytes, err);
		if (!rc)
			rc = be->ops->download(be, op->hgrads, op->grads, bytes, err);
		params = op->hparams;
		grads = op->hgrads;
		be = op->host;
	}
	/* the runs of parameters with weight decay and without (decay_runs) */
	gpt_adamw h = {.lr = lr, .beta1 = op->beta1, .beta2 = op->beta2, .eps = op->eps,
		       .weight_decay = op->weight_decay, .grad_scale = grad_scale, .t = op->t};
	if (!rc)
		rc = be->ops->adamw_runs(be, params, op->master, op->master_lo, grads, op->exp_avg, op->exp_avg_sq,
					 op->runs, op->nruns, &h, err);
	if (!rc && op->host)
		rc = m->be->ops->upload(m->be, op->params, op->hparams, bytes, err);
	return rc;
}
