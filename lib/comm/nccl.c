/* The nccl backend: lib/comm's interface over lib/cuda's NCCL wrappers.
 * Rank 0 of the world creates the unique id and hands it out through the
 * store; groups are ncclCommSplit of their parent. Built only with CUDA. */
#include "comm/comm-impl.h"

#if GPT_HAVE_CUDA
#include "cuda/nccl.h"

#include <stdlib.h>
#include <string.h>

static int nccl_group_init(gpt_comm *comm, gpt_group *parent, int color, int key, gpt_group *g,
			   gpt_err *err)
{
	if (parent) {
		gpt_nccl *child = NULL;
		int rc = gpt_nccl_split(parent->impl, color, key, comm->timeout_s, g ? g->name : parent->name,
					&child, err);
		if (rc)
			return rc;
		if (g)
			g->impl = child;
		else
			gpt_nccl_free(child);
		return 0;
	}
	/* The world: the id goes through the store as hex. */
	unsigned char id[GPT_NCCL_ID_BYTES];
	char hex[2 * GPT_NCCL_ID_BYTES + 1] = "-";
	if (g->rank == 0) {
		int rc = gpt_nccl_unique_id(id, err);
		if (rc)
			return rc;
		for (int i = 0; i < GPT_NCCL_ID_BYTES; i++)
			snprintf(hex + 2 * i, 3, "%02x", id[i]);
	}
	char **vals = NULL;
	int rc = gpt_comm_exchange(g, "nccl-id", "nccl setup", hex, &vals, err);
	if (rc)
		return rc;
	if (strlen(vals[0]) != 2 * GPT_NCCL_ID_BYTES)
		rc = gpt_err_set(err, GPT_EINTERNAL, "group %s: nccl setup: malformed unique id in the store", g->name);
	for (int i = 0; !rc && i < GPT_NCCL_ID_BYTES; i++) {
		unsigned v;
		sscanf(vals[0] + 2 * i, "%2x", &v);
		id[i] = (unsigned char)v;
	}
	for (int i = 0; i < g->size; i++)
		free(vals[i]);
	free(vals);
	gpt_nccl *c = NULL;
	if (!rc)
		rc = gpt_nccl_init(&c, id, g->size, g->rank, comm->device, comm->timeout_s, g->name, err);
	if (!rc)
		g->impl = c;
	return rc;
}

static void nccl_group_free(gpt_group *g)
{
	gpt_nccl_free(g->impl);
	g->impl = NULL;
}

static int nccl_all_reduce(gpt_group *g, const void *send, void *recv, int64_t count, gpt_dtype t,
			   gpt_reduce_op op, gpt_err *err)
{
	gpt_nccl_set_timeout(g->impl, g->timeout_s);
	return gpt_nccl_all_reduce(g->impl, send, recv, count, t, op == GPT_REDUCE_MAX, err);
}

static int nccl_reduce_scatter(gpt_group *g, const void *send, void *recv, int64_t count, gpt_dtype t,
			       gpt_reduce_op op, gpt_err *err)
{
	gpt_nccl_set_timeout(g->impl, g->timeout_s);
	return gpt_nccl_reduce_scatter(g->impl, send, recv, count, t, op == GPT_REDUCE_MAX, err);
}

static int nccl_all_gather(gpt_group *g, const void *send, void *recv, int64_t count, gpt_dtype t,
			   gpt_err *err)
{
	gpt_nccl_set_timeout(g->impl, g->timeout_s);
	return gpt_nccl_all_gather(g->impl, send, recv, count, t, err);
}

static int nccl_broadcast(gpt_group *g, void *buf, int64_t count, gpt_dtype t, int root, gpt_err *err)
{
	gpt_nccl_set_timeout(g->impl, g->timeout_s);
	return gpt_nccl_broadcast(g->impl, buf, count, t, root, err);
}

static int nccl_reduce_scatter_v(gpt_group *g, void *buf, const int64_t *counts, gpt_dtype t, gpt_reduce_op op,
				 gpt_err *err)
{
	gpt_nccl_set_timeout(g->impl, g->timeout_s);
	return gpt_nccl_reduce_scatter_v(g->impl, buf, counts, g->size, t, op == GPT_REDUCE_MAX, err);
}

static int nccl_all_gather_v(gpt_group *g, void *buf, const int64_t *counts, gpt_dtype t, gpt_err *err)
{
	gpt_nccl_set_timeout(g->impl, g->timeout_s);
	return gpt_nccl_all_gather_v(g->impl, buf, counts, g->size, t, err);
}

static int nccl_p2p(gpt_group *g, const gpt_p2p *ops, int n, gpt_dtype t, gpt_err *err)
{
	gpt_nccl_xfer *x = gpt_calloc((size_t)(n ? n : 1), sizeof *x, "send/recv batch", err);
	if (!x)
		return err->code;
	for (int i = 0; i < n; i++)
		x[i] = (gpt_nccl_xfer){ops[i].peer, ops[i].is_send, ops[i].buf, ops[i].count};
	gpt_nccl_set_timeout(g->impl, g->timeout_s);
	int rc = gpt_nccl_p2p(g->impl, x, n, t, err);
	free(x);
	return rc;
}

static int nccl_barrier(gpt_group *g, gpt_err *err)
{
	gpt_nccl_set_timeout(g->impl, g->timeout_s);
	return gpt_nccl_barrier(g->impl, err);
}

/* The device buffers of r are the caller's: the comm's attached backend
 * (gpt_comm_set_memory) gives the compute stream to order against. */
static int nccl_start(gpt_group *g, gpt_comm_req *r, gpt_err *err)
{
	gpt_nccl_set_timeout(g->impl, g->timeout_s);
	int max = r->op == GPT_REDUCE_MAX;
	if (r->kind == GPT_COMM_REQ_REDUCE_SCATTER_V)
		return gpt_nccl_reduce_scatter_v_start(g->impl, r->recv, r->counts, g->size, r->t, max, g->comm->mem,
						       &r->dev, err);
	return r->kind == GPT_COMM_REQ_ALL_REDUCE
		? gpt_nccl_all_reduce_start(g->impl, r->send, r->recv, r->count, r->t, max, g->comm->mem, &r->dev, err)
		: gpt_nccl_reduce_scatter_start(g->impl, r->send, r->recv, r->count, r->t, max, g->comm->mem, &r->dev,
						err);
}

static int nccl_finish(gpt_group *g, gpt_comm_req *r, gpt_err *err)
{
	gpt_nccl_set_timeout(g->impl, g->timeout_s);
	void *ev = r->dev;
	r->dev = NULL; /* gpt_nccl_finish frees it */
	return gpt_nccl_finish(g->impl, ev, err);
}

static void nccl_drop(gpt_comm_req *r)
{
	gpt_nccl_event_free(r->dev);
	r->dev = NULL;
}

const gpt_comm_backend gpt_comm_backend_nccl = {
	.name = "nccl",
	.group_init = nccl_group_init,
	.group_free = nccl_group_free,
	.all_reduce = nccl_all_reduce,
	.reduce_scatter = nccl_reduce_scatter,
	.all_gather = nccl_all_gather,
	.reduce_scatter_v = nccl_reduce_scatter_v,
	.all_gather_v = nccl_all_gather_v,
	.broadcast = nccl_broadcast,
	.p2p = nccl_p2p,
	.barrier = nccl_barrier,
	.start = nccl_start,
	.finish = nccl_finish,
	.drop = nccl_drop,
	.device_memory = 1,
};
#endif
