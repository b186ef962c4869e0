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

/* n values converted on the device, the device copies skew elements past
 * the allocations' start (1: not 16-byte aligned, the scalar kernel). */
static void check_at(gpt_dtype from, gpt_dtype to, const void *host_src, size_t n, size_t skew)
{
	gpt_err err = {0};
	size_t sb = n * gpt_dtype_size(from), db = n * gpt_dtype_size(to);
	size_t ss = skew * gpt_dtype_size(from), ds = skew * gpt_dtype_size(to);
	char *dsrc = gpt_cuda_malloc(sb + ss, "src", &err), *ddst = gpt_cuda_malloc(db + ds, "dst", &err);
	unsigned char *want = malloc(db), *got = malloc(db);
	int rc = !dsrc || !ddst || !want || !got;
	rc = rc || gpt_cuda_memcpy(dsrc + ss, host_src, sb, 0, &err);
	rc = rc || gpt_cuda_convert(ddst + ds, to, dsrc + ss, from, n, &err);
	rc = rc || gpt_cuda_memcpy(got, ddst + ds, db, 1, &err);
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
	ok(!rc && bad == 0, "%s -> %s: %zu values%s, %zu differ from the CPU%s%s", gpt_dtype_name(from),
	   gpt_dtype_name(to), n, skew ? " (not 16-byte aligned)" : "", bad, rc ? ": " : "",
	   rc ? err.msg : "");
	gpt_cuda_free(dsrc);
	gpt_cuda_free(ddst);
	free(want);
	free(got);
}

/* aligned (16 bytes a load; n - 3: and the last n % 8 one each), and not */
static void check(gpt_dtype from, gpt_dtype to, const void *host_src, size_t n)
{
	check_at(from, to, host_src, n, 0);
	check_at(from, to, host_src, n - 3, 0);
	check_at(from, to, host_src, n, 1);
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
