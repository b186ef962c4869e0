/* Reading a tensor of a safetensors file as fp32 whatever its dtype: fp32,
 * bf16, fp16, or int8 with per-row scales. (Part of lib/infer.) */
#include "infer/infer.h"

#include "ckpt/ckpt.h"

#include <stdlib.h>
#include <string.h>

int gpt_st_read_f32(const struct gpt_st_file *f, const char *name, int ndim, const int64_t *shape,
		    float *dst, gpt_err *err)
{
	const gpt_st_tensor *t = gpt_st_find(f, name);
	if (!t)
		return gpt_err_set(err, GPT_EDATA, "%s: no tensor '%s'", f->path, name);
	int same = t->ndim == ndim;
	int64_t n = 1;
	for (int d = 0; same && d < ndim; d++) {
		same = t->shape[d] == shape[d];
		n *= shape[d];
	}
	if (!same) {
		char want[96] = "", got[96] = "";
		for (int d = 0; d < ndim; d++)
			snprintf(want + strlen(want), sizeof want - strlen(want), "%s%lld", d ? ", " : "",
				 (long long)shape[d]);
		for (int d = 0; d < t->ndim; d++)
			snprintf(got + strlen(got), sizeof got - strlen(got), "%s%lld", d ? ", " : "",
				 (long long)t->shape[d]);
		return gpt_err_set(err, GPT_EDATA, "%s: tensor '%s': expected shape [%s], found [%s]",
				   f->path, name, want, got);
	}
	const void *data = gpt_st_data(f, t);
	if (t->dtype == GPT_DTYPE_I8) {
		char sname[128];
		snprintf(sname, sizeof sname, "%s.scale", name);
		const gpt_st_tensor *s = gpt_st_find(f, sname);
		/* rows: every dimension but the last (none for a scalar, which is one
		 * row; a zero-sized last dimension leaves rows without columns) */
		int64_t cols = ndim ? shape[ndim - 1] : 1, rows = 1;
		for (int d = 0; d + 1 < ndim; d++)
			rows *= shape[d];
		if (!s || s->dtype != GPT_DTYPE_F32 || (int64_t)((s->end - s->begin) / 4) != rows)
			return gpt_err_set(err, GPT_EDATA,
					   "%s: int8 tensor '%s' needs '%s', %lld fp32 scales", f->path,
					   name, sname, (long long)rows);
		/* memcpy: safetensors does not promise aligned data */
		const unsigned char *sc = gpt_st_data(f, s);
		const int8_t *q = data;
		for (int64_t r = 0; r < rows; r++) {
			float scale;
			memcpy(&scale, sc + 4 * r, 4);
			for (int64_t c = 0; c < cols; c++)
				dst[r * cols + c] = (float)q[r * cols + c] * scale;
		}
		return 0;
	}
	if (t->dtype != GPT_DTYPE_F32 && t->dtype != GPT_DTYPE_BF16 && t->dtype != GPT_DTYPE_F16)
		return gpt_err_set(err, GPT_EDATA, "%s: tensor '%s': expected F32, BF16, F16 or I8, found %s",
				   f->path, name, gpt_st_dtype_name(t->dtype));
	size_t es = gpt_dtype_size(t->dtype);
	if ((uintptr_t)data % es == 0)
		return gpt_convert(dst, GPT_DTYPE_F32, data, t->dtype, (size_t)n, err);
	/* safetensors does not promise aligned data: convert from an aligned copy */
	void *copy = gpt_malloc((size_t)n * es + 1, "unaligned tensor", err);
	if (!copy)
		return GPT_EINTERNAL;
	memcpy(copy, data, (size_t)n * es);
	int rc = gpt_convert(dst, GPT_DTYPE_F32, copy, t->dtype, (size_t)n, err);
	free(copy);
	return rc;
}
