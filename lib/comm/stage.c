/* Staging between device and host memory for a comm with a CUDA backend
 * attached (gpt_comm_set_memory): each buffer the backend cannot take as it
 * is (a device buffer for shm, a host one for nccl) gets a region of the
 * comm's staging area, of the kind the backend takes; inputs are copied in
 * before the backend runs and outputs copied out after. The copies are the
 * attached backend's upload and download, which run on its stream, so they
 * come after the kernels that wrote a buffer and before those that read it;
 * a download returns when done, an upload once its copy is queued there
 * (gpt_cuda_upload), which a device backend's own stream does not wait for:
 * for nccl the host waits for the attached stream after the copies in
 * (stage_in). Buffers that alias (a sharding rank's part
 * inside the whole) get regions of their own, which the backends allow.
 * The staged collective computes the same bits as the plain one. */
#include "comm/comm-impl.h"

#if GPT_HAVE_CUDA
#include "cuda/cuda.h"
#endif

#include <stdlib.h>
#include <string.h>

#define STAGE_ALIGN 256

int gpt_comm_stage_foreign(const gpt_group *g, const void *p)
{
#if GPT_HAVE_CUDA
	return p && g->comm->mem && gpt_cuda_ptr_is_device(p) != g->be->device_memory;
#else
	(void)g, (void)p;
	return 0;
#endif
}

int gpt_comm_unstaged_host(const gpt_group *g, const void *p)
{
#if GPT_HAVE_CUDA
	return p && !g->comm->mem && g->be->device_memory && !gpt_cuda_ptr_is_device(p);
#else
	(void)g, (void)p;
	return 0;
#endif
}

static size_t round_up(size_t n)
{
	return (n + STAGE_ALIGN - 1) / STAGE_ALIGN * STAGE_ALIGN;
}

/* The staging area, at least `bytes` long (old contents lost). */
static int stage_reserve(gpt_group *g, size_t bytes, gpt_err *err)
{
	gpt_comm *c = g->comm;
	if (bytes <= c->stage_bytes)
		return 0;
	gpt_comm_stage_free(c);
	/* grow by half again, so a sequence of slightly larger calls does not
	 * reallocate every time */
	size_t want = round_up(bytes + bytes / 2);
#if GPT_HAVE_CUDA
	c->stage = g->be->device_memory ? gpt_cuda_malloc(want, "communication staging", err)
					 : gpt_cuda_host_alloc(want, "communication staging", err);
#else
	c->stage = NULL;
	gpt_err_set(err, GPT_EINTERNAL, "group %s: staging device memory in a build without CUDA", g->name);
#endif
	if (!c->stage)
		return gpt_err_prefix(err, "group %s", g->name);
	c->stage_bytes = want;
	return 0;
}

void gpt_comm_stage_free(gpt_comm *c)
{
#if GPT_HAVE_CUDA
	if (c->stage && c->be->device_memory)
		gpt_cuda_free(c->stage);
	else if (c->stage)
		gpt_cuda_host_free(c->stage);
#endif
	c->stage = NULL;
	c->stage_bytes = 0;
}

int gpt_comm_stage_move(gpt_group *g, void *stage, void *user, size_t bytes, int in, gpt_err *err)
{
	gpt_backend *be = g->comm->mem;
	int rc;
	if (!bytes)
		return 0;
	if (g->be->device_memory) /* the stage is device memory, the user's is host */
		rc = in ? be->ops->upload(be, stage, user, bytes, err) : be->ops->download(be, user, stage, bytes, err);
	else
		rc = in ? be->ops->download(be, stage, user, bytes, err) : be->ops->upload(be, user, stage, bytes, err);
	return rc ? gpt_err_prefix(err, "group %s: staging %zu bytes %s the device", g->name, bytes,
				   (in != g->be->device_memory) ? "from" : "to")
		  : 0;
}

/* Device buffers a device backend takes as they are were written on the
 * attached backend's stream, and so were its staged inputs (an upload
 * returns once queued); the communicator's stream must not start before
 * that is done. */
static int settle(gpt_group *g, gpt_err *err)
{
	gpt_backend *be = g->comm->mem;
	return g->be->device_memory ? be->ops->sync(be, err) : 0;
}

/* The input copied into its staging place (none when stage is user or
 * bytes 0), then settled: after the copy in, not before it. */
static int stage_in(gpt_group *g, void *stage, void *user, size_t bytes, gpt_err *err)
{
	int rc = stage != user ? gpt_comm_stage_move(g, stage, user, bytes, 1, err) : 0;
	return rc ? rc : settle(g, err);
}

/* Up to three buffers of one call: where each one lives for the backend. */
typedef struct staged {
	void *user[3];
	size_t bytes[3];
	void *use[3]; /* what the backend gets */
	int n;
} staged;

static int place(gpt_group *g, staged *s, gpt_err *err)
{
	size_t total = 0;
	int any = 0;
	for (int i = 0; i < s->n; i++) {
		s->use[i] = s->user[i];
		if (gpt_comm_stage_foreign(g, s->user[i])) {
			total += round_up(s->bytes[i]);
			any = 1;
		}
	}
	int rc = any ? stage_reserve(g, total, err) : 0;
	size_t at = 0;
	for (int i = 0; !rc && i < s->n; i++)
		if (gpt_comm_stage_foreign(g, s->user[i])) {
			s->use[i] = (char *)g->comm->stage + at;
			at += round_up(s->bytes[i]);
		}
	return rc;
}

int gpt_comm_stage_all_reduce(gpt_group *g, const void *send, void *recv, int64_t count, gpt_dtype t,
			      gpt_reduce_op op, gpt_err *err)
{
	size_t b = (size_t)count * gpt_dtype_size(t);
	/* in place: one buffer, as the backend allows */
	staged s = {{(void *)send, recv}, {b, b}, {NULL}, send == recv ? 1 : 2};
	int rc = place(g, &s, err);
	if (!rc)
		rc = stage_in(g, s.use[0], s.user[0], b, err);
	void *out = s.n == 1 ? s.use[0] : s.use[1];
	if (!rc)
		rc = g->be->all_reduce(g, s.use[0], out, count, t, op, err);
	if (!rc && out != recv)
		rc = gpt_comm_stage_move(g, out, recv, b, 0, err);
	return rc;
}

int gpt_comm_stage_reduce_scatter(gpt_group *g, const void *send, void *recv, int64_t count,
				  gpt_dtype t, gpt_reduce_op op, gpt_err *err)
{
	size_t b = (size_t)count * gpt_dtype_size(t);
	staged s = {{(void *)send, recv}, {b * (size_t)g->size, b}, {NULL}, 2};
	int rc = place(g, &s, err);
	if (!rc)
		rc = stage_in(g, s.use[0], s.user[0], s.bytes[0], err);
	if (!rc)
		rc = g->be->reduce_scatter(g, s.use[0], s.use[1], count, t, op, err);
	if (!rc && s.use[1] != recv)
		rc = gpt_comm_stage_move(g, s.use[1], recv, b, 0, err);
	return rc;
}

int gpt_comm_stage_all_gather(gpt_group *g, const void *send, void *recv, int64_t count, gpt_dtype t,
			      gpt_err *err)
{
	size_t b = (size_t)count * gpt_dtype_size(t);
	staged s = {{(void *)send, recv}, {b, b * (size_t)g->size}, {NULL}, 2};
	int rc = place(g, &s, err);
	if (!rc)
		rc = stage_in(g, s.use[0], s.user[0], b, err);
	if (!rc)
		rc = g->be->all_gather(g, s.use[0], s.use[1], count, t, err);
	if (!rc && s.use[1] != recv)
		rc = gpt_comm_stage_move(g, s.use[1], recv, s.bytes[1], 0, err);
	return rc;
}

int gpt_comm_stage_broadcast(gpt_group *g, void *buf, int64_t count, gpt_dtype t, int root,
			     gpt_err *err)
{
	size_t b = (size_t)count * gpt_dtype_size(t);
	staged s = {{buf}, {b}, {NULL}, 1};
	int rc = place(g, &s, err);
	if (!rc) /* only the root's is an input */
		rc = stage_in(g, s.use[0], buf, g->rank == root ? b : 0, err);
	if (!rc)
		rc = g->be->broadcast(g, s.use[0], count, t, root, err);
	if (!rc && s.use[0] != buf && g->rank != root)
		rc = gpt_comm_stage_move(g, s.use[0], buf, b, 0, err);
	return rc;
}

int gpt_comm_stage_reduce_scatter_v(gpt_group *g, void *buf, const int64_t *counts, int64_t total,
				    gpt_dtype t, gpt_reduce_op op, gpt_err *err)
{
	size_t es = gpt_dtype_size(t), at = (size_t)gpt_comm_piece_at(counts, g->rank) * es;
	staged s = {{buf}, {(size_t)total * es}, {NULL}, 1};
	int rc = place(g, &s, err);
	if (!rc)
		rc = stage_in(g, s.use[0], buf, s.bytes[0], err);
	if (!rc)
		rc = g->be->reduce_scatter_v(g, s.use[0], counts, t, op, err);
	if (!rc && s.use[0] != buf) /* only this rank's piece is a result */
		rc = gpt_comm_stage_move(g, (char *)s.use[0] + at, (char *)buf + at, (size_t)counts[g->rank] * es, 0,
					 err);
	return rc;
}

int gpt_comm_stage_all_gather_v(gpt_group *g, void *buf, const int64_t *counts, int64_t total, gpt_dtype t,
				gpt_err *err)
{
	size_t es = gpt_dtype_size(t), at = (size_t)gpt_comm_piece_at(counts, g->rank) * es;
	size_t mine = (size_t)counts[g->rank] * es;
	staged s = {{buf}, {(size_t)total * es}, {NULL}, 1};
	int rc = place(g, &s, err);
	char *use = s.use[0], *user = buf;
	if (!rc)
		rc = stage_in(g, use + at, user + at, mine, err);
	if (!rc)
		rc = g->be->all_gather_v(g, use, counts, t, err);
	/* the pieces before this rank's and after it */
	if (!rc && use != user)
		rc = gpt_comm_stage_move(g, use, user, at, 0, err);
	if (!rc && use != user)
		rc = gpt_comm_stage_move(g, use + at + mine, user + at + mine, s.bytes[0] - at - mine, 0, err);
	return rc;
}

int gpt_comm_stage_p2p(gpt_group *g, const gpt_p2p *ops, int n, gpt_dtype t, gpt_err *err)
{
	size_t es = gpt_dtype_size(t), total = 0;
	int any = 0;
	for (int i = 0; i < n; i++)
		if (gpt_comm_stage_foreign(g, ops[i].buf)) {
			total += round_up((size_t)ops[i].count * es);
			any = 1;
		}
	if (!any) {
		int rc = settle(g, err);
		return rc ? rc : g->be->p2p(g, ops, n, t, err);
	}
	gpt_p2p *x = gpt_calloc((size_t)n, sizeof *x, "send/recv batch", err);
	if (!x)
		return err->code;
	int rc = stage_reserve(g, total, err);
	size_t at = 0;
	for (int i = 0; !rc && i < n; i++) {
		x[i] = ops[i];
		if (!gpt_comm_stage_foreign(g, ops[i].buf))
			continue;
		x[i].buf = (char *)g->comm->stage + at;
		at += round_up((size_t)ops[i].count * es);
		if (ops[i].is_send)
			rc = gpt_comm_stage_move(g, x[i].buf, ops[i].buf, (size_t)ops[i].count * es, 1, err);
	}
	if (!rc) /* after the copies in, as stage_in */
		rc = settle(g, err);
	if (!rc)
		rc = g->be->p2p(g, x, n, t, err);
	for (int i = 0; !rc && i < n; i++)
		if (!ops[i].is_send && x[i].buf != ops[i].buf)
			rc = gpt_comm_stage_move(g, x[i].buf, ops[i].buf, (size_t)ops[i].count * es, 0, err);
	free(x);
	return rc;
}

/* ---- the blocks of asynchronous requests ---- */

gpt_comm_block *gpt_comm_block_take(gpt_group *g, size_t bytes, gpt_err *err)
{
	gpt_comm *c = g->comm;
	gpt_comm_block **best = NULL;
	/* the smallest block that is large enough: buckets of one size come
	 * back to the blocks they had */
	for (gpt_comm_block **p = &c->blocks; *p; p = &(*p)->next)
		if ((*p)->bytes >= bytes && (!best || (*p)->bytes < (*best)->bytes))
			best = p;
	if (best) {
		gpt_comm_block *b = *best;
		*best = b->next;
		b->next = NULL;
		return b;
	}
	gpt_comm_block *b = gpt_calloc(1, sizeof *b, "staging block", err);
	if (!b)
		return NULL;
	b->bytes = round_up(bytes ? bytes : 1);
#if GPT_HAVE_CUDA
	b->p = g->be->device_memory ? gpt_cuda_malloc(b->bytes, "communication staging", err)
				    : gpt_cuda_host_alloc(b->bytes, "communication staging", err);
#else
	gpt_err_set(err, GPT_EINTERNAL, "group %s: staging device memory in a build without CUDA", g->name);
#endif
	if (!b->p) {
		free(b);
		gpt_err_prefix(err, "group %s", g->name);
		return NULL;
	}
	return b;
}

void gpt_comm_block_give(gpt_comm *c, gpt_comm_block *b)
{
	if (!b)
		return;
	b->next = c->blocks;
	c->blocks = b;
}

void gpt_comm_blocks_free(gpt_comm *c)
{
	while (c->blocks) {
		gpt_comm_block *b = c->blocks;
		c->blocks = b->next;
#if GPT_HAVE_CUDA
		if (c->be->device_memory)
			gpt_cuda_free(b->p);
		else
			gpt_cuda_host_free(b->p);
#endif
		free(b);
	}
}
