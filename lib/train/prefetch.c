/* Reading the next global batch on a thread while the current step runs. */
#include "train/trainer-impl.h"

#include <stdlib.h>
#include <string.h>

static void *prefetch_main(void *arg)
{
	prefetch *p = arg;
	pthread_mutex_lock(&p->mu);
	for (;;) {
		while (!p->quit && p->want_count == 0)
			pthread_cond_wait(&p->cv, &p->mu);
		if (p->quit)
			break;
		int64_t first = p->want_first, count = p->want_count;
		int32_t *dst = p->buf[p->filling];
		p->want_count = 0;
		pthread_mutex_unlock(&p->mu);
		int rc = 0;
		gpt_err err = {0};
		for (int64_t i = 0; i < count && !rc; i++)
			rc = gpt_loader_sample(p->loader, first + i, dst + i * p->seq1, &err);
		pthread_mutex_lock(&p->mu);
		p->rc = rc;
		p->err = err;
		p->have_first = first;
		p->filling ^= 1;
		p->ready = 1;
		pthread_cond_broadcast(&p->cv);
	}
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

int gpt_tr_prefetch_start(prefetch *p, const gpt_loader *l, int64_t per_batch, int64_t seq1,
			  gpt_err *err)
{
	memset(p, 0, sizeof *p);
	p->loader = l;
	p->seq1 = seq1;
	p->have_first = -1;
	for (int i = 0; i < 2; i++)
		if (!(p->buf[i] = gpt_malloc((size_t)(per_batch * seq1) * 4, "batch buffer", err)))
			return GPT_EINTERNAL;
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->cv, NULL);
	int e = pthread_create(&p->tid, NULL, prefetch_main, p);
	if (e)
		return gpt_err_errno(err, GPT_EINTERNAL, e, "cannot start the data prefetch thread");
	p->started = 1;
	return 0;
}

void gpt_tr_prefetch_request(prefetch *p, int64_t first, int64_t count)
{
	pthread_mutex_lock(&p->mu);
	p->want_first = first;
	p->want_count = count;
	p->ready = 0;
	pthread_cond_broadcast(&p->cv);
	pthread_mutex_unlock(&p->mu);
}

/* Waits for the requested batch; returns its buffer. */
int32_t *gpt_tr_prefetch_wait(prefetch *p, int64_t first, gpt_err *err)
{
	pthread_mutex_lock(&p->mu);
	while (!p->ready)
		pthread_cond_wait(&p->cv, &p->mu);
	int32_t *b = p->buf[p->filling ^ 1];
	int rc = p->rc;
	if (rc && err)
		*err = p->err;
	if (!rc && p->have_first != first) {
		gpt_err_set(err, GPT_EINTERNAL, "prefetch: got samples from %lld, wanted %lld",
			    (long long)p->have_first, (long long)first);
		rc = GPT_EINTERNAL;
	}
	pthread_mutex_unlock(&p->mu);
	return rc ? NULL : b;
}

void gpt_tr_prefetch_stop(prefetch *p)
{
	if (p->started) {
		pthread_mutex_lock(&p->mu);
		p->quit = 1;
		pthread_cond_broadcast(&p->cv);
		pthread_mutex_unlock(&p->mu);
		pthread_join(p->tid, NULL);
		pthread_mutex_destroy(&p->mu);
		pthread_cond_destroy(&p->cv);
	}
	free(p->buf[0]);
	free(p->buf[1]);
	memset(p, 0, sizeof *p);
}
