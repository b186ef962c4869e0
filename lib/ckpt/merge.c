/* gpt-ckpt-merge's work: describing a checkpoint and consolidating it. */
#include "ckpt/ckpt.h"

#include <stdlib.h>
#include <string.h>

int gpt_ckpt_describe(const gpt_ckpt *ck, gpt_buf *out, gpt_err *err)
{
	int n = gpt_ckpt_tensor_count(ck), rc = 0;
	int64_t elems = 0;
	rc = gpt_buf_printf(out, err, "checkpoint: %s\nstep: %lld\ntensors: %d\n", gpt_ckpt_path(ck),
			    (long long)gpt_ckpt_step(ck), n);
	for (int i = 0; i < n && !rc; i++) {
		const char *name;
		gpt_dtype dt;
		int nd;
		const int64_t *shape;
		gpt_ckpt_tensor_info(ck, i, &name, &dt, &nd, &shape);
		int64_t e = 1;
		rc = gpt_buf_printf(out, err, "  %-40s %-5s [", name, gpt_st_dtype_name(dt));
		for (int d = 0; d < nd && !rc; d++) {
			rc = gpt_buf_printf(out, err, "%s%lld", d ? ", " : "", (long long)shape[d]);
			e *= shape[d];
		}
		if (!rc)
			rc = gpt_buf_puts(out, "]\n", err);
		if (strncmp(name, "optim.", 6) != 0)
			elems += e;
	}
	if (!rc)
		rc = gpt_buf_printf(out, err, "weight elements: %lld\nstate.json: %s\n", (long long)elems,
				    gpt_ckpt_state_json(ck));
	return rc;
}

typedef struct consolidate_ctx {
	const gpt_ckpt *ck;
	const gpt_st_entry *e;
} consolidate_ctx;

static int fill(void *ctx, int i, void *buf, gpt_err *err)
{
	consolidate_ctx *c = ctx;
	const gpt_st_entry *e = &c->e[i];
	gpt_box all = gpt_box_full(e->ndim, e->shape);
	return gpt_ckpt_read_box(c->ck, e->name, e->dtype, e->ndim, e->shape, &all, buf, err);
}

int gpt_ckpt_consolidate(const gpt_ckpt *ck, const char *out_file, gpt_dtype dtype,
			 int weights_only, int64_t *bytes, gpt_err *err)
{
	if (dtype != GPT_DTYPE_F32 && dtype != GPT_DTYPE_BF16 && dtype != GPT_DTYPE_F16)
		return gpt_err_set(err, GPT_EUSAGE, "consolidate: dtype %s: expected fp32, bf16 or fp16",
				   gpt_dtype_name(dtype));
	if (gpt_ckpt_out_outside(ck, out_file, err))
		return GPT_EUSAGE;
	if (gpt_path_exists(out_file))
		return gpt_err_set(err, GPT_EUSAGE, "%s: exists; remove it or choose another name", out_file);
	int n = gpt_ckpt_tensor_count(ck), m = 0;
	gpt_st_entry *e = gpt_calloc((size_t)(n ? n : 1), sizeof *e, "tensor list", err);
	if (!e)
		return GPT_EINTERNAL;
	for (int i = 0; i < n; i++) {
		const char *name;
		gpt_dtype dt;
		int nd;
		const int64_t *shape;
		gpt_ckpt_tensor_info(ck, i, &name, &dt, &nd, &shape);
		int optim = strncmp(name, "optim.", 6) == 0;
		if (optim && weights_only)
			continue;
		e[m] = (gpt_st_entry){.name = name, .dtype = optim ? GPT_DTYPE_F32 : dtype, .ndim = nd};
		memcpy(e[m].shape, shape, sizeof(int64_t) * (size_t)nd);
		m++;
	}
	char step[32];
	snprintf(step, sizeof step, "%lld", (long long)gpt_ckpt_step(ck));
	const char *meta[] = {"format", "pt", "step", step};
	consolidate_ctx c = {ck, e};
	int rc = gpt_st_write_stream(out_file, e, m, meta, 2, fill, &c, bytes, NULL, err);
	free(e);
	return rc;
}
