/* A bf16 matrix product with fp32 accumulation on AVX512_BF16 (vdpbf16ps,
 * two bf16 products per fp32 lane: twice the fp32 FMA rate on Zen 4 and
 * Cooper Lake). Debian's OpenBLAS 0.3.21 is built without its sbgemm, so
 * the 16-bit CPU path had widened both operands to fp32 for sgemm.
 *
 * GotoBLAS blocking: a KC x NC block of op(B) is packed as pairs of
 * consecutive k per column (the operand layout of vdpbf16ps), an MC x KC
 * block of op(A) as pairs per row, and an 8 x 32 micro-kernel keeps 16
 * zmm accumulators. The threads share the packing and split the columns,
 * so the sums over k run in a fixed order whatever the thread count: the
 * result has the same bits for any number of threads and any split of m
 * or n. vdpbf16ps treats subnormal inputs as zero and flushes subnormal
 * results. */
#include "cpu/kernels.h"

#include <omp.h>
#include <string.h>

enum { MR = 8, NR = 32, KC = 256, MC = 256, NC = 4096 };

size_t gpt_cpu_sbgemm_work_bytes(void)
{
	return (size_t)KC * NC * 2 + (size_t)MC * KC * 2;
}

#if defined(__x86_64__) && defined(__GNUC__) && __GNUC__ >= 10
#include <immintrin.h>

int gpt_cpu_sbgemm_ok(void)
{
	return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
	       __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bf16");
}

static inline uint32_t pair(uint16_t lo, uint16_t hi)
{
	return (uint32_t)lo | (uint32_t)hi << 16;
}

/* Packing puts pairs of consecutive k side by side. Where op(X) has k
 * along memory rows (the pair is adjacent) the loops run along the row and
 * copy 32-bit words; where k runs across rows they interleave two rows. The
 * odd last k (kc odd only at the end of k) pairs with zero. */
static uint32_t word(const uint16_t *s)
{
	uint32_t w;
	memcpy(&w, s, 4);
	return w;
}

/* dst[q width + c] = the 32-bit word at x + c ld + 2 q for 8 columns and 8
 * pairs: an 8 x 8 transpose of 32-bit words. */
__attribute__((target("avx2"))) static void transpose8(uint32_t *dst, int width, const uint16_t *x,
							 int64_t ld)
{
	__m256 r[8], t[8], u[8];
	for (int c = 0; c < 8; c++)
		r[c] = _mm256_loadu_ps((const float *)(const void *)(x + c * ld));
	for (int c = 0; c < 8; c += 2) {
		t[c] = _mm256_unpacklo_ps(r[c], r[c + 1]);
		t[c + 1] = _mm256_unpackhi_ps(r[c], r[c + 1]);
	}
	for (int h = 0; h < 8; h += 4) {
		u[h] = _mm256_shuffle_ps(t[h], t[h + 2], 0x44);
		u[h + 1] = _mm256_shuffle_ps(t[h], t[h + 2], 0xee);
		u[h + 2] = _mm256_shuffle_ps(t[h + 1], t[h + 3], 0x44);
		u[h + 3] = _mm256_shuffle_ps(t[h + 1], t[h + 3], 0xee);
	}
	for (int q = 0; q < 4; q++) {
		_mm256_storeu_ps((float *)(void *)(dst + q * width), _mm256_permute2f128_ps(u[q], u[q + 4], 0x20));
		_mm256_storeu_ps((float *)(void *)(dst + (q + 4) * width), _mm256_permute2f128_ps(u[q], u[q + 4], 0x31));
	}
}

/* `len` columns of an op(X) with the pair adjacent: column c's elements
 * start at x + c ld; into dst[q width + c]. */
static void pack_adjacent(uint32_t *dst, int width, const uint16_t *x, int64_t ld, int64_t len,
			  int64_t kc, int64_t k_left)
{
	int64_t full = (k_left < kc ? k_left : kc) / 2, pairs = kc / 2;
	int64_t c8 = len / 8 * 8, q8 = full / 8 * 8;
	for (int64_t c = 0; c < c8; c += 8)
		for (int64_t q = 0; q < q8; q += 8)
			transpose8(dst + q * width + c, width, x + c * ld + 2 * q, ld);
	for (int64_t c = 0; c < len; c++) {
		const uint16_t *s = x + c * ld;
		uint32_t *d = dst + c;
		for (int64_t q = c < c8 ? q8 : 0; q < full; q++)
			d[q * width] = word(s + 2 * q);
		if (full < pairs) /* k odd: the last element alone */
			d[full * width] = s[2 * full];
	}
	for (int64_t c = len; c < width; c++)
		for (int64_t q = 0; q < pairs; q++)
			dst[q * width + c] = 0;
}

/* `len` columns of an op(X) with k across rows: row p at x + p ld. */
static void pack_across(uint32_t *dst, int width, const uint16_t *x, int64_t ld, int64_t len,
			int64_t kc, int64_t k_left)
{
	int64_t c8 = len / 8 * 8;
	for (int64_t q = 0; q < kc / 2; q++) {
		const uint16_t *r0 = x + 2 * q * ld;
		uint32_t *d = dst + q * width;
		int64_t c = 0;
		if (2 * q + 1 < k_left) {
			const uint16_t *r1 = r0 + ld;
			for (; c < c8; c += 8) { /* SSE2: eight pairs at once */
				__m128i a = _mm_loadu_si128((const __m128i *)(const void *)(r0 + c));
				__m128i b = _mm_loadu_si128((const __m128i *)(const void *)(r1 + c));
				_mm_storeu_si128((__m128i *)(void *)(d + c), _mm_unpacklo_epi16(a, b));
				_mm_storeu_si128((__m128i *)(void *)(d + c + 4), _mm_unpackhi_epi16(a, b));
			}
			for (; c < len; c++)
				d[c] = pair(r0[c], r1[c]);
		} else {
			for (; c < len; c++)
				d[c] = r0[c];
		}
		for (c = len; c < width; c++)
			d[c] = 0;
	}
}

/* Columns [j0, j0 + NR) of op(B), rows [p0, p0 + kc) (kc even). */
static void pack_b(uint32_t *dst, int tb, const uint16_t *b, int64_t ldb, int64_t p0, int64_t kc,
		   int64_t k, int64_t j0, int64_t n)
{
	int64_t jn = n - j0 < NR ? n - j0 : NR;
	if (tb) /* B(p, j) = b[j ldb + p] */
		pack_adjacent(dst, NR, b + j0 * ldb + p0, ldb, jn, kc, k - p0);
	else /* B(p, j) = b[p ldb + j] */
		pack_across(dst, NR, b + p0 * ldb + j0, ldb, jn, kc, k - p0);
}

/* Rows [i0, i0 + MR) of op(A), columns [p0, p0 + kc). */
static void pack_a(uint32_t *dst, int ta, const uint16_t *a, int64_t lda, int64_t p0, int64_t kc,
		   int64_t k, int64_t i0, int64_t m)
{
	int64_t in = m - i0 < MR ? m - i0 : MR;
	if (!ta) /* A(i, p) = a[i lda + p] */
		pack_adjacent(dst, MR, a + i0 * lda + p0, lda, in, kc, k - p0);
	else /* A(i, p) = a[p lda + i] */
		pack_across(dst, MR, a + p0 * lda + i0, lda, in, kc, k - p0);
}

#define TBF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))

TBF16 static inline void store_row(float *c, __m512 x0, __m512 x1, __mmask16 k0, __mmask16 k1,
				   __m512 alpha, float beta, int first)
{
	x0 = _mm512_mul_ps(alpha, x0);
	x1 = _mm512_mul_ps(alpha, x1);
	if (!first) {
		x0 = _mm512_add_ps(_mm512_maskz_loadu_ps(k0, c), x0);
		x1 = _mm512_add_ps(_mm512_maskz_loadu_ps(k1, c + 16), x1);
	} else if (beta != 0.0f) {
		__m512 bv = _mm512_set1_ps(beta);
		x0 = _mm512_add_ps(_mm512_mul_ps(bv, _mm512_maskz_loadu_ps(k0, c)), x0);
		x1 = _mm512_add_ps(_mm512_mul_ps(bv, _mm512_maskz_loadu_ps(k1, c + 16)), x1);
	}
	_mm512_mask_storeu_ps(c, k0, x0);
	_mm512_mask_storeu_ps(c + 16, k1, x1);
}

/* C (mr x nr, ldc) = alpha A B + (first ? beta C : C) over kp pairs. */
TBF16 static void kernel(int64_t kp, const uint32_t *ap, const uint32_t *bp, float *c, int64_t ldc,
			 int mr, int nr, float alpha, float beta, int first)
{
	__m512 c00 = _mm512_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;
	__m512 c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
	__m512 c60 = c00, c61 = c00, c70 = c00, c71 = c00;
	for (int64_t q = 0; q < kp; q++) {
		__m512bh b0 = (__m512bh)_mm512_loadu_si512(bp), b1 = (__m512bh)_mm512_loadu_si512(bp + 16);
#define ROW(i)                                                                        \
	{                                                                             \
		__m512bh av = (__m512bh)_mm512_set1_epi32((int)ap[i]);                \
		c##i##0 = _mm512_dpbf16_ps(c##i##0, av, b0);                          \
		c##i##1 = _mm512_dpbf16_ps(c##i##1, av, b1);                          \
	}
		ROW(0) ROW(1) ROW(2) ROW(3) ROW(4) ROW(5) ROW(6) ROW(7)
#undef ROW
		ap += MR;
		bp += NR;
	}
	__mmask16 k0 = nr >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << nr) - 1);
	__mmask16 k1 = nr >= 32 ? (__mmask16)0xffff : nr > 16 ? (__mmask16)((1u << (nr - 16)) - 1) : 0;
	__m512 al = _mm512_set1_ps(alpha);
#define STORE(i) \
	if (mr > i) \
		store_row(c + i * ldc, c##i##0, c##i##1, k0, k1, al, beta, first);
	STORE(0) STORE(1) STORE(2) STORE(3) STORE(4) STORE(5) STORE(6) STORE(7)
#undef STORE
}

void gpt_cpu_sbgemm(int threads, void *work, int ta, int tb, int64_t m, int64_t n, int64_t k,
		    float alpha, const uint16_t *a, int64_t lda, const uint16_t *b, int64_t ldb,
		    float beta, float *c, int64_t ldc)
{
	if (m <= 0 || n <= 0)
		return;
	if (k <= 0) {
		for (int64_t i = 0; i < m; i++)
			for (int64_t j = 0; j < n; j++)
				c[i * ldc + j] = beta == 0.0f ? 0.0f : beta * c[i * ldc + j];
		return;
	}
	uint32_t *bpack = work, *apack = bpack + (size_t)KC * NC / 2;
	int big = m * n * k > (int64_t)1 << 20;
	#pragma omp parallel num_threads(threads) if (big)
	for (int64_t jc = 0; jc < n; jc += NC) {
		int64_t nc = n - jc < NC ? n - jc : NC, npan = (nc + NR - 1) / NR;
		for (int64_t pc = 0; pc < k; pc += KC) {
			int64_t kc = k - pc < KC ? k - pc : KC, kc2 = (kc + 1) & ~(int64_t)1;
			#pragma omp for schedule(static)
			for (int64_t jp = 0; jp < npan; jp++)
				pack_b(bpack + jp * (kc2 / 2) * NR, tb, b, ldb, pc, kc2, k, jc + jp * NR, n);
			for (int64_t ic = 0; ic < m; ic += MC) {
				int64_t mc = m - ic < MC ? m - ic : MC, mpan = (mc + MR - 1) / MR;
				#pragma omp for schedule(static)
				for (int64_t ip = 0; ip < mpan; ip++)
					pack_a(apack + ip * (kc2 / 2) * MR, ta, a, lda, pc, kc2, k, ic + ip * MR, m);
				#pragma omp for schedule(static)
				for (int64_t jp = 0; jp < npan; jp++) {
					int64_t j = jc + jp * NR;
					int nr = (int)(n - j < NR ? n - j : NR);
					for (int64_t ip = 0; ip < mpan; ip++) {
						int64_t i = ic + ip * MR;
						int mr = (int)(m - i < MR ? m - i : MR);
						kernel(kc2 / 2, apack + ip * (kc2 / 2) * MR, bpack + jp * (kc2 / 2) * NR,
						       c + i * ldc + j, ldc, mr, nr, alpha, beta, pc == 0);
					}
				}
			}
		}
	}
}

#else

int gpt_cpu_sbgemm_ok(void)
{
	return 0;
}

void gpt_cpu_sbgemm(int threads, void *work, int ta, int tb, int64_t m, int64_t n, int64_t k,
		    float alpha, const uint16_t *a, int64_t lda, const uint16_t *b, int64_t ldb,
		    float beta, float *c, int64_t ldc)
{
}

#endif
