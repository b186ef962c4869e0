/* The shm comm tests' common ground (test-comm-shm, test-comm-async): every
 * rank's inputs, drawn so that the order of a floating-point sum shows; the
 * serial reduction the backend promises, written out plainly; and ranks
 * forked around a store (ranks.h), each with its store connection. */
#ifndef GPT_TEST_COMM_CHECK_H
#define GPT_TEST_COMM_CHECK_H

#include "ranks.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const gpt_dtype dtypes[] = {GPT_DTYPE_F32, GPT_DTYPE_BF16, GPT_DTYPE_F16, GPT_DTYPE_I32, GPT_DTYPE_I64};
#define NDT 5

/* ---- data and the serial reference ----------------------------------------- */

static uint32_t mix(uint32_t x)
{
	x ^= x >> 16;
	x *= 0x7feb352dU;
	x ^= x >> 15;
	x *= 0x846ca68bU;
	x ^= x >> 16;
	return x;
}

/* Rank r's element i of a buffer tagged `tag`: values of mixed sign and
 * magnitude, so that the order of a floating-point sum shows. */
static double value(int tag, int r, int64_t i)
{
	uint32_t h = mix((uint32_t)(i * 2654435761u) ^ mix((uint32_t)(r * 97 + tag * 7919)));
	double v = ((int)(h % 20001) - 10000) * 0.0137;
	return v * (double)(1u << ((h >> 27) & 7));
}

static void fill(void *buf, gpt_dtype t, int tag, int r, int64_t n)
{
	for (int64_t i = 0; i < n; i++) {
		double v = value(tag, r, i);
		switch (t) {
		case GPT_DTYPE_F32: ((float *)buf)[i] = (float)v; break;
		case GPT_DTYPE_BF16: ((uint16_t *)buf)[i] = gpt_f32_to_bf16((float)v); break;
		case GPT_DTYPE_F16: ((uint16_t *)buf)[i] = gpt_f32_to_f16((float)(v / 64)); break;
		case GPT_DTYPE_I32: ((int32_t *)buf)[i] = (int32_t)(mix((uint32_t)(i + r * 1000003)) >> 1) - (1 << 30); break;
		default: ((int64_t *)buf)[i] = (int64_t)((uint64_t)mix((uint32_t)(i * 31 + r)) * 4000000007ULL - (1ULL << 61)); break;
		}
	}
}

static float as_f32(const void *buf, gpt_dtype t, int64_t i)
{
	if (t == GPT_DTYPE_F32)
		return ((const float *)buf)[i];
	uint16_t h = ((const uint16_t *)buf)[i];
	return t == GPT_DTYPE_BF16 ? gpt_bf16_to_f32(h) : gpt_f16_to_f32(h);
}

/* out[i] = in[0][i] op in[1][i] op ... folded left to right: the definition
 * the backend promises, written out plainly. */
static void serial_reduce(void *out, void *const *in, int n, int64_t count, gpt_dtype t, gpt_reduce_op op)
{
	for (int64_t i = 0; i < count; i++) {
		if (t == GPT_DTYPE_I32 || t == GPT_DTYPE_I64) {
			int64_t acc = t == GPT_DTYPE_I32 ? ((int32_t *)in[0])[i] : ((int64_t *)in[0])[i];
			for (int r = 1; r < n; r++) {
				int64_t x = t == GPT_DTYPE_I32 ? ((int32_t *)in[r])[i] : ((int64_t *)in[r])[i];
				if (op == GPT_REDUCE_MAX)
					acc = x > acc ? x : acc;
				else if (t == GPT_DTYPE_I32)
					acc = (int32_t)(uint32_t)((uint32_t)acc + (uint32_t)x);
				else
					acc = (int64_t)((uint64_t)acc + (uint64_t)x);
			}
			if (t == GPT_DTYPE_I32)
				((int32_t *)out)[i] = (int32_t)acc;
			else
				((int64_t *)out)[i] = acc;
			continue;
		}
		float acc = as_f32(in[0], t, i);
		for (int r = 1; r < n; r++) {
			float x = as_f32(in[r], t, i);
			if (op == GPT_REDUCE_MAX)
				acc = isnan(acc) || isnan(x) ? NAN : (x > acc ? x : acc);
			else
				acc = acc + x;
		}
		if (t == GPT_DTYPE_F32)
			((float *)out)[i] = acc;
		else
			((uint16_t *)out)[i] = t == GPT_DTYPE_BF16 ? gpt_f32_to_bf16(acc) : gpt_f32_to_f16(acc);
	}
}

/* Inputs of every rank for (tag, t, count): in[r] malloc'd. */
static void **all_inputs(int n, gpt_dtype t, int tag, int64_t count)
{
	void **in = calloc((size_t)n, sizeof *in);
	for (int r = 0; r < n; r++) {
		in[r] = malloc((size_t)(count ? count : 1) * gpt_dtype_size(t));
		fill(in[r], t, tag, r, count);
	}
	return in;
}

static void free_inputs(void **in, int n)
{
	for (int r = 0; r < n; r++)
		free(in[r]);
	free(in);
}

/* ---- running N ranks ----------------------------------------------------------- */

typedef struct rank_ctx {
	gpt_store *st;
	int rank, n;
	double timeout; /* the collectives' */
	void *arg;
} rank_ctx;

typedef int (*rank_fn)(rank_ctx *rc);

static int open_comm(rank_ctx *x, gpt_comm **c, gpt_err *err)
{
	gpt_comm_options o = {.backend = "shm", .timeout_s = x->timeout};
	return gpt_comm_open_store(c, x->st, x->rank, x->n, &o, err);
}

typedef struct rank_job {
	rank_fn fn;
	double timeout;
	void *arg;
} rank_job;

static int rank_main(int r, int n, int port, void *arg)
{
	const rank_job *j = arg;
	rank_ctx x = {NULL, r, n, j->timeout, j->arg};
	gpt_err err = {0};
	if (gpt_store_connect("127.0.0.1", port, 10, j->timeout, &x.st, &err)) {
		fprintf(stderr, "rank %d: %s\n", r, err.msg);
		return 1;
	}
	int rc = j->fn(&x);
	gpt_store_close(x.st);
	return rc;
}

/* Forks n ranks running fn around a fresh store, collectives timing out
 * after `timeout` s; returns how many failed (a rank fails by returning
 * non-zero, or by dying, or by running past 120 s). */
static int run_ranks(int n, double timeout, rank_fn fn, void *arg)
{
	rank_job j = {fn, timeout, arg};
	return test_run_ranks(n, 120, rank_main, &j);
}

#define CHECK(cond, ...)                                                     \
	do {                                                                 \
		if (!(cond)) {                                               \
			fprintf(stderr, "rank %d: ", x->rank);               \
			fprintf(stderr, __VA_ARGS__);                        \
			fprintf(stderr, "\n");                               \
			fail = 1;                                            \
		}                                                            \
	} while (0)

#endif
