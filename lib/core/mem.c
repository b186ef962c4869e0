/* Checked allocation, arenas and growable buffers. */
#include "core.h"

#include <stdlib.h>
#include <string.h>

void *gpt_malloc(size_t n, const char *what, gpt_err *err)
{
	void *p = malloc(n ? n : 1);
	if (!p)
		gpt_err_nomem(err, n, what);
	return p;
}

void *gpt_calloc(size_t count, size_t size, const char *what, gpt_err *err)
{
	size_t n;
	if (gpt_mul_size(count, size, &n)) {
		gpt_err_nomem(err, SIZE_MAX, what);
		return NULL;
	}
	void *p = calloc(count ? count : 1, size ? size : 1);
	if (!p)
		gpt_err_nomem(err, n, what);
	return p;
}

void *gpt_realloc(void *p, size_t n, const char *what, gpt_err *err)
{
	void *q = realloc(p, n ? n : 1);
	if (!q)
		gpt_err_nomem(err, n, what);
	return q;
}

char *gpt_strdup(const char *s, gpt_err *err)
{
	size_t n = strlen(s) + 1;
	char *p = gpt_malloc(n, "string", err);
	if (p)
		memcpy(p, s, n);
	return p;
}

void *gpt_aligned_alloc(size_t n, const char *what, gpt_err *err)
{
	void *p = NULL;
	if (posix_memalign(&p, 64, n ? n : 1) != 0) {
		gpt_err_nomem(err, n, what);
		return NULL;
	}
	return p;
}

int gpt_mul_size(size_t a, size_t b, size_t *out)
{
	if (b && a > SIZE_MAX / b)
		return -1;
	*out = a * b;
	return 0;
}

int gpt_add_size(size_t a, size_t b, size_t *out)
{
	if (a > SIZE_MAX - b)
		return -1;
	*out = a + b;
	return 0;
}

/* ---- arenas ---- */

struct gpt_arena_block {
	gpt_arena_block *next;
	size_t size; /* bytes of data[] */
	size_t used;
	_Alignas(64) unsigned char data[];
};

void gpt_arena_init(gpt_arena *a, size_t first_block)
{
	memset(a, 0, sizeof *a);
	a->block_size = first_block ? first_block : 64 * 1024;
}

void *gpt_arena_alloc(gpt_arena *a, size_t n, size_t align, gpt_err *err)
{
	if (align == 0)
		align = 1;
	if (align & (align - 1)) {
		gpt_err_set(err, GPT_EINTERNAL, "arena: alignment %zu is not a power of two", align);
		return NULL;
	}
	gpt_arena_block *b = a->head;
	if (b) {
		uintptr_t base = (uintptr_t)b->data;
		size_t off = (size_t)(((base + b->used + align - 1) & ~(uintptr_t)(align - 1)) - base);
		if (off <= b->size && n <= b->size - off) {
			b->used = off + n;
			a->used += n;
			return b->data + off;
		}
	}
	size_t need;
	if (gpt_add_size(n, align, &need)) {
		gpt_err_nomem(err, SIZE_MAX, "arena");
		return NULL;
	}
	size_t size = a->block_size;
	while (size < need) {
		if (size > SIZE_MAX / 2) {
			size = need;
			break;
		}
		size *= 2;
	}
	size_t total;
	if (gpt_add_size(sizeof(gpt_arena_block), size, &total)) {
		gpt_err_nomem(err, SIZE_MAX, "arena");
		return NULL;
	}
	b = gpt_aligned_alloc(total, "arena block", err);
	if (!b)
		return NULL;
	b->size = size;
	b->used = 0;
	b->next = a->head;
	a->head = b;
	a->reserved += size;
	if (a->block_size <= SIZE_MAX / 2)
		a->block_size = size * 2 > a->block_size ? size * 2 : a->block_size;
	size_t off = 0; /* data is 64-aligned; align <= 64 needs no padding */
	if (align > 64)
		off = (align - ((uintptr_t)b->data & (align - 1))) & (align - 1);
	b->used = off + n;
	a->used += n;
	return b->data + off;
}

void *gpt_arena_calloc(gpt_arena *a, size_t n, size_t align, gpt_err *err)
{
	void *p = gpt_arena_alloc(a, n, align, err);
	if (p)
		memset(p, 0, n);
	return p;
}

char *gpt_arena_strndup(gpt_arena *a, const char *s, size_t n, gpt_err *err)
{
	char *p = gpt_arena_alloc(a, n + 1, 1, err);
	if (p) {
		memcpy(p, s, n);
		p[n] = '\0';
	}
	return p;
}

char *gpt_arena_strdup(gpt_arena *a, const char *s, gpt_err *err)
{
	return gpt_arena_strndup(a, s, strlen(s), err);
}

void gpt_arena_reset(gpt_arena *a)
{
	gpt_arena_block *keep = NULL;
	for (gpt_arena_block *b = a->head; b; b = b->next)
		if (!keep || b->size > keep->size)
			keep = b;
	gpt_arena_block *b = a->head;
	while (b) {
		gpt_arena_block *next = b->next;
		if (b != keep)
			free(b);
		b = next;
	}
	a->head = keep;
	a->used = 0;
	a->reserved = 0;
	if (keep) {
		keep->next = NULL;
		keep->used = 0;
		a->reserved = keep->size;
	}
}

void gpt_arena_free(gpt_arena *a)
{
	gpt_arena_block *b = a->head;
	while (b) {
		gpt_arena_block *next = b->next;
		free(b);
		b = next;
	}
	a->head = NULL;
	a->used = a->reserved = 0;
}

/* ---- buffers ---- */

int gpt_buf_reserve(gpt_buf *b, size_t extra, gpt_err *err)
{
	size_t need;
	if (gpt_add_size(b->len, extra, &need) || gpt_add_size(need, 1, &need))
		return gpt_err_nomem(err, SIZE_MAX, "buffer");
	if (need <= b->cap)
		return 0;
	size_t cap = b->cap ? b->cap : 64;
	while (cap < need)
		cap = cap > SIZE_MAX / 2 ? need : cap * 2;
	char *p = gpt_realloc(b->data, cap, "buffer", err);
	if (!p)
		return err ? err->code : GPT_EINTERNAL;
	b->data = p;
	b->cap = cap;
	return 0;
}

int gpt_buf_append(gpt_buf *b, const void *p, size_t n, gpt_err *err)
{
	int rc = gpt_buf_reserve(b, n, err);
	if (rc)
		return rc;
	if (n)
		memcpy(b->data + b->len, p, n);
	b->len += n;
	b->data[b->len] = '\0';
	return 0;
}

int gpt_buf_puts(gpt_buf *b, const char *s, gpt_err *err)
{
	return gpt_buf_append(b, s, strlen(s), err);
}

int gpt_buf_printf(gpt_buf *b, gpt_err *err, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0)
		return gpt_err_set(err, GPT_EINTERNAL, "buffer: bad format");
	int rc = gpt_buf_reserve(b, (size_t)n, err);
	if (rc)
		return rc;
	va_start(ap, fmt);
	vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
	return 0;
}

void gpt_buf_reset(gpt_buf *b)
{
	b->len = 0;
	if (b->data)
		b->data[0] = '\0';
}

void gpt_buf_free(gpt_buf *b)
{
	free(b->data);
	b->data = NULL;
	b->len = b->cap = 0;
}
