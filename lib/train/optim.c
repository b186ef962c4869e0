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
static int offload_plan(gpt_optimizer *op, gpt_err *err);

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
	if (!rc && off)
		rc = offload_plan(op, err);
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
	free(op->pieces);
	free(op->chunks);
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

/* ZeRO-Offload's step goes in chunks, so that the copies of some overlap
 * the host's AdamW on others: a chunk's gradients come down while the host
 * updates the chunks before it, its parameters go up while the host
 * updates the next (offload_step). A chunk is a run of whole pieces about
 * GPT_OFFLOAD_CHUNK elements long (at least one piece), with the gaps
 * between them; a piece is a run of the table (decay_runs) or, in a longer
 * one, a stretch cut at a multiple of OFFLOAD_CUT elements from its start.
 * The CPU backend's AdamW splits its work at 256-element and 2^20-element
 * boundaries from a call's start (lib/cpu/lowp.c, adamw.c) and every
 * element of a call takes the path its place there gives it, so the pieces
 * give the bits of the whole runs. */
typedef struct gpt_offload_chunk {
	int64_t begin, end; /* the copies' elements, from the range's start */
	int64_t p0, p1;     /* its pieces */
} gpt_offload_chunk;
enum { OFFLOAD_CUT = 1 << 20, OFFLOAD_AHEAD = 4 };
#define OFFLOAD_CHUNK_DEFAULT (16 * (int64_t)OFFLOAD_CUT)

/* GPT_OFFLOAD_CHUNK: elements a chunk, a positive integer */
static int offload_chunk_elems(int64_t *out, gpt_err *err)
{
	const char *ev = getenv("GPT_OFFLOAD_CHUNK");
	*out = OFFLOAD_CHUNK_DEFAULT;
	if (!ev || !*ev)
		return 0;
	int64_t v;
	if (gpt_parse_i64(ev, &v) || v <= 0)
		return gpt_err_set(err, GPT_EUSAGE,
				   "GPT_OFFLOAD_CHUNK is '%s'; expected a positive number of elements (parameters) a "
				   "chunk of the offloaded optimizer's step (default %lld)",
				   ev, (long long)OFFLOAD_CHUNK_DEFAULT);
	*out = v;
	return 0;
}

static int offload_plan(gpt_optimizer *op, gpt_err *err)
{
	int64_t target, np = 0;
	int rc = offload_chunk_elems(&target, err);
	if (rc)
		return rc;
	int64_t cut = (target + OFFLOAD_CUT - 1) / OFFLOAD_CUT * OFFLOAD_CUT;
	for (int64_t i = 0; i < op->nruns; i++)
		np += (op->runs[i].end - op->runs[i].begin + cut - 1) / cut;
	op->chunk_elems = target;
	op->pieces = gpt_calloc(np > 0 ? (size_t)np : 1, sizeof *op->pieces, "optimizer offload", err);
	op->chunks = op->pieces ? gpt_calloc(np > 0 ? (size_t)np : 1, sizeof *op->chunks, "optimizer offload", err)
				: NULL;
	if (!op->chunks)
		return err->code;
	np = 0;
	for (int64_t i = 0; i < op->nruns; i++)
		for (int64_t b = op->runs[i].begin; b < op->runs[i].end; b += cut)
			op->pieces[np++] = (gpt_adamw_run){b, b + cut < op->runs[i].end ? b + cut : op->runs[i].end,
							   op->runs[i].decay};
	op->nchunks = 0;
	for (int64_t p = 0; p < np;) {
		int64_t q = p + 1;
		while (q < np && op->pieces[q].end - op->pieces[p].begin <= target)
			q++;
		op->chunks[op->nchunks++] = (gpt_offload_chunk){op->pieces[p].begin, op->pieces[q - 1].end, p, q};
		p = q;
	}
	return 0;
}

void gpt_optimizer_params_written(gpt_optimizer *op)
{
	op->hfresh = 0;
}

/* The offloaded step (see offload_plan): the chunks' gradients come down
 * OFFLOAD_AHEAD ahead of the host's AdamW, each marked; each chunk's
 * parameters go up once updated, beside the gradients coming down (the
 * copies to the device have a stream of their own). The host's image of the parameters is
 * taken down only when it is not the device's (the first step, a
 * checkpoint loaded since): AdamW reads it (bf16's high halves, fp32
 * weights) and the gaps between a chunk's runs go back up from it. The
 * host waits for the last copy, as it did for the whole range's: what
 * follows on other streams (a sharding group's gather) sees the
 * parameters. */
static int offload_step(gpt_optimizer *op, const gpt_adamw *h, gpt_err *err)
{
#if GPT_HAVE_CUDA
	gpt_backend *be = op->model->be, *hb = op->host;
	int64_t es = (int64_t)gpt_dtype_size(be->dtype), nc = op->nchunks, queued = 0;
	char *dp = op->params, *dg = op->grads, *hp = op->hparams, *hg = op->hgrads;
	int rc = 0;
	if (!op->hfresh)
		rc = be->ops->download(be, hp, dp, (size_t)((op->end - op->begin) * es), err);
	op->hfresh = 0;
	for (int64_t c = 0; c < nc && !rc; c++) {
		for (; queued < nc && queued < c + OFFLOAD_AHEAD && !rc; queued++) {
			const gpt_offload_chunk *q = &op->chunks[queued];
			rc = gpt_cuda_copy_async(be, hg + q->begin * es, dg + q->begin * es,
						 (size_t)((q->end - q->begin) * es), 0, err);
			if (!rc)
				rc = gpt_cuda_mark(be, (int)(queued % OFFLOAD_AHEAD), err);
		}
		const gpt_offload_chunk *k = &op->chunks[c];
		if (!rc)
			rc = gpt_cuda_mark_wait(be, (int)(c % OFFLOAD_AHEAD), err);
		if (!rc)
			rc = hb->ops->adamw_runs(hb, hp, op->master, op->master_lo, hg, op->exp_avg, op->exp_avg_sq,
						 op->pieces + k->p0, k->p1 - k->p0, h, err);
		if (!rc)
			rc = gpt_cuda_copy_async(be, dp + k->begin * es, hp + k->begin * es,
						 (size_t)((k->end - k->begin) * es), 1, err);
	}
	/* after a failure too: no copy of the host images is left in flight */
	gpt_err e2 = {0};
	int rs = gpt_cuda_copies_join(be, rc ? &e2 : err);
	int ss = be->ops->sync(be, rc || rs ? &e2 : err);
	if (!rc && !rs && !ss)
		op->hfresh = 1;
	return rc ? rc : rs ? rs : ss;
#else
	(void)h;
	return gpt_err_set(err, GPT_EINTERNAL, "optimizer offload: %s has no asynchronous copies",
			   op->model->be->name);
#endif
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
	gpt_backend *be = op->model->be;
	op->t++;
	/* the runs of parameters with weight decay and without (decay_runs) */
	gpt_adamw h = {.lr = lr, .beta1 = op->beta1, .beta2 = op->beta2, .eps = op->eps,
		       .weight_decay = op->weight_decay, .grad_scale = grad_scale, .t = op->t};
	if (op->host)
		return offload_step(op, &h, err);
	return be->ops->adamw_runs(be, op->params, op->master, op->master_lo, op->grads, op->exp_avg, op->exp_avg_sq,
				   op->runs, op->nruns, &h, err);
}
