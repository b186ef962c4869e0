/* CUDA dtype casts against the CPU reference (gpt_convert), bit for bit
 * except NaN payloads. Skips where there is no GPU. */
#include "backend/backend.h"
#include "cuda/cuda.h"
#include "../unit/tap.h"

#include <stdlib.h>
#include <string.h>

static float rand_float(unsigned *state)
{
	*state = *state * 1664525u + 1013904223u;
	uint32_t bits = *state;
	float f;
	memcpy(&f, &bits, 4); /* every bit pattern: normals, subnormals, inf, NaN */
	return f;
}

static int is_nan16(uint16_t h, gpt_dtype t)
{
	return t == GPT_DTYPE_F16 ? (h & 0x7c00) == 0x7c00 && (h & 0x3ff)
				  : (h & 0x7f80) == 0x7f80 && (h & 0x7f);
}

static void check(gpt_dtype from, gpt_dtype to, const void *host_src, size_t n)
{
	gpt_err err = {0};
	size_t sb = n * gpt_dtype_size(from), db = n * gpt_dtype_size(to);
	void *dsrc = gpt_cuda_malloc(sb, "src", &err), *ddst = gpt_cuda_malloc(db, "dst", &err);
	unsigned char *want = malloc(db), *got = malloc(db);
	int rc = !dsrc || !ddst || !want || !got;
	rc = rc || gpt_cuda_memcpy(dsrc, host_src, sb, 0, &err);
	rc = rc || gpt_cuda_convert(ddst, to, dsrc, from, n, &err);
	rc = rc || gpt_cuda_memcpy(got, ddst, db, 1, &err);
	rc = rc || gpt_convert(want, to, host_src, from, n, &err);
	size_t bad = 0;
	for (size_t i = 0; !rc && i < n; i++) {
		if (to == GPT_DTYPE_F32) {
			float a, b;
			memcpy(&a, want + 4 * i, 4);
			memcpy(&b, got + 4 * i, 4);
			if (memcmp(&a, &b, 4) != 0 && !(a != a && b != b))
				bad++;
		} else {
			uint16_t a, b;
			memcpy(&a, want + 2 * i, 2);
			memcpy(&b, got + 2 * i, 2);
			if (a != b && !(is_nan16(a, to) && is_nan16(b, to)))
				bad++;
		}
	}
	ok(!rc && bad == 0, "%s -> %s: %zu values, %zu differ from the CPU%s%s", gpt_dtype_name(from),
	   gpt_dtype_name(to), n, bad, rc ? ": " : "", rc ? err.msg : "");
	gpt_cuda_free(dsrc);
	gpt_cuda_free(ddst);
	free(want);
	free(got);
}

int main(void)
{
	if (gpt_cuda_device_count() == 0)
		return skip_all("no CUDA device");
	size_t n = 1 << 22;
	float *f = malloc(n * sizeof *f);
	uint16_t *h = malloc(65536 * sizeof *h);
	unsigned st = 12345;
	for (size_t i = 0; i < n; i++)
		f[i] = i < n / 2 ? rand_float(&st) : (float)((double)(int)(st = st * 69069u + 1) * 1e-6);
	for (uint32_t i = 0; i < 65536; i++)
		h[i] = (uint16_t)i;
	check(GPT_DTYPE_F32, GPT_DTYPE_BF16, f, n);
	check(GPT_DTYPE_F32, GPT_DTYPE_F16, f, n);
	check(GPT_DTYPE_BF16, GPT_DTYPE_F32, h, 65536);
	check(GPT_DTYPE_F16, GPT_DTYPE_F32, h, 65536);
	check(GPT_DTYPE_BF16, GPT_DTYPE_F16, h, 65536);
	check(GPT_DTYPE_F16, GPT_DTYPE_BF16, h, 65536);
	free(f);
	free(h);
	return done_testing();
}
