/* A small cache of blocks built on demand, under a lock. */
#include "data/lazy.h"

#include <stdlib.h>

gpt_lazy *gpt_lazy_new(size_t bytes, const char *what, gpt_err *err)
{
	gpt_lazy *c = gpt_calloc(1, sizeof *c, what, err);
	if (!c)
		return NULL;
	c->bytes = bytes ? bytes : 1;
	c->what = what;
	for (int i = 0; i < GPT_LAZY_SLOTS; i++)
		c->key[i] = -1;
	pthread_mutex_init(&c->mu, NULL);
	return c;
}

const void *gpt_lazy_lock(gpt_lazy *c, int64_t key, gpt_lazy_fill fill, const void *ctx, gpt_err *err)
{
	pthread_mutex_lock(&c->mu);
	int slot = 0;
	for (int i = 0; i < GPT_LAZY_SLOTS; i++) {
		if (c->key[i] == key) {
			c->used[i] = ++c->clock;
			return c->block[i];
		}
		/* an empty slot first, else the least recently used */
		if (c->key[slot] >= 0 && (c->key[i] < 0 || c->used[i] < c->used[slot]))
			slot = i;
	}
	if (!c->block[slot] && !(c->block[slot] = gpt_malloc(c->bytes, c->what, err))) {
		pthread_mutex_unlock(&c->mu);
		return NULL;
	}
	fill(ctx, key, c->block[slot]);
	c->key[slot] = key;
	c->used[slot] = ++c->clock;
	c->fills++;
	return c->block[slot];
}

void gpt_lazy_unlock(gpt_lazy *c)
{
	pthread_mutex_unlock(&c->mu);
}

int64_t gpt_lazy_fills(gpt_lazy *c)
{
	pthread_mutex_lock(&c->mu);
	int64_t n = c->fills;
	pthread_mutex_unlock(&c->mu);
	return n;
}

void gpt_lazy_free(gpt_lazy *c)
{
	if (!c)
		return;
	for (int i = 0; i < GPT_LAZY_SLOTS; i++)
		free(c->block[i]);
	pthread_mutex_destroy(&c->mu);
	free(c);
}
