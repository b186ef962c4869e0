/* Asynchronous collectives (see comm.h): requests, the per-group progress
 * thread that runs them for host backends (shm), and the device path for
 * backends that enqueue on a stream (nccl).
 *
 * The thread of a group takes requests in start order and runs the
 * backend's synchronous collective for each, so the bits are those of the
 * synchronous call and the members of a group, which start the same
 * requests in the same order, meet in the same collectives. The main thread
 * only ever uses the group's backend state when the queue is empty (every
 * synchronous call drains it first), and the lock handed over between the
 * two orders their accesses. */
#include "comm/comm-impl.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct gpt_comm_engine {
	pthread_t tid;
	pthread_mutex_t mu;
	pthread_cond_t work; /* a request was queued, or quit */
	pthread_cond_t done; /* a request finished */
	gpt_comm_req *head, *tail; /* queued, not started */
	int64_t pending;     /* queued or running */
	int quit;
	int failed;          /* a request failed: the group is done for */
	gpt_err fail;        /* the first failure */
};

static const char *kind_name(gpt_comm_req_kind k)
{
	return k == GPT_COMM_REQ_ALL_REDUCE ? "all-reduce" : "reduce-scatter";
}

static int have_op(const gpt_group *g, gpt_comm_req_kind k)
{
	return k == GPT_COMM_REQ_ALL_REDUCE	  ? g->be->all_reduce != NULL
	       : k == GPT_COMM_REQ_REDUCE_SCATTER ? g->be->reduce_scatter != NULL
						  : g->be->reduce_scatter_v != NULL;
}

size_t gpt_comm_req_send_bytes(const gpt_comm_req *r)
{
	size_t b = (size_t)r->count * gpt_dtype_size(r->t);
	return r->kind == GPT_COMM_REQ_REDUCE_SCATTER ? b * (size_t)r->g->size : b;
}

size_t gpt_comm_req_recv_bytes(const gpt_comm_req *r)
{
	return (size_t)(r->counts ? r->counts[r->g->rank] : r->count) * gpt_dtype_size(r->t);
}

size_t gpt_comm_req_recv_offset(const gpt_comm_req *r)
{
	return r->counts ? (size_t)gpt_comm_piece_at(r->counts, r->g->rank) * gpt_dtype_size(r->t) : 0;
}

/* The synchronous collective of r, on the buffers the backend takes. */
static int run(gpt_comm_req *r)
{
	gpt_group *g = r->g;
	if (r->kind == GPT_COMM_REQ_ALL_REDUCE)
		return g->be->all_reduce(g, r->xsend, r->xrecv, r->count, r->t, r->op, &r->err);
	if (r->kind == GPT_COMM_REQ_REDUCE_SCATTER_V)
		return g->be->reduce_scatter_v(g, r->xrecv, r->counts, r->t, r->op, &r->err);
	return g->be->reduce_scatter(g, r->xsend, r->xrecv, r->count, r->t, r->op, &r->err);
}

static void *engine_main(void *arg)
{
	gpt_group *g = arg;
	gpt_comm_engine *e = g->engine;
	pthread_mutex_lock(&e->mu);
	for (;;) {
		while (!e->head && !e->quit)
			pthread_cond_wait(&e->work, &e->mu);
		gpt_comm_req *r = e->head;
		if (!r)
			break; /* quit with nothing queued */
		e->head = r->next;
		if (!e->head)
			e->tail = NULL;
		r->next = NULL;
		if (e->failed || e->quit) {
			/* peers are mid-protocol or gone: running it could only hang */
			r->rc = gpt_err_set(&r->err, GPT_EIO, "group %s: %s of %lld elements not run: %s", g->name,
					    kind_name(r->kind), (long long)r->count,
					    e->failed ? e->fail.msg : "the group was freed");
		} else {
			pthread_mutex_unlock(&e->mu);
			int rc = run(r);
			pthread_mutex_lock(&e->mu);
			r->rc = rc;
			if (rc && !e->failed) {
				e->failed = 1;
				e->fail = r->err;
			}
		}
		r->done = 1;
		e->pending--;
		pthread_cond_broadcast(&e->done);
	}
	pthread_mutex_unlock(&e->mu);
	return NULL;
}

static int engine_start(gpt_group *g, gpt_err *err)
{
	gpt_comm_engine *e = gpt_calloc(1, sizeof *e, "progress thread", err);
	if (!e)
		return err->code;
	pthread_mutex_init(&e->mu, NULL);
	pthread_cond_init(&e->work, NULL);
	pthread_cond_init(&e->done, NULL);
	g->engine = e;
	int rc = pthread_create(&e->tid, NULL, engine_main, g);
	if (rc) {
		pthread_cond_destroy(&e->done);
		pthread_cond_destroy(&e->work);
		pthread_mutex_destroy(&e->mu);
		free(e);
		g->engine = NULL;
		return gpt_err_errno(err, GPT_EINTERNAL, rc, "group %s: cannot start its progress thread", g->name);
	}
	return 0;
}

int gpt_comm_async_drain(gpt_group *g, const char *op, gpt_err *err)
{
	gpt_comm_engine *e = g->engine;
	if (!e)
		return 0;
	pthread_mutex_lock(&e->mu);
	while (e->pending > 0)
		pthread_cond_wait(&e->done, &e->mu);
	int failed = e->failed;
	pthread_mutex_unlock(&e->mu);
	if (failed) {
		g->broken = 1;
		return gpt_err_set(err, GPT_EIO, "group %s: %s: unusable after a failed asynchronous request: %s",
				   g->name, op, e->fail.msg);
	}
	return 0;
}

void gpt_comm_async_free(gpt_group *g)
{
	gpt_comm_engine *e = g->engine;
	if (!e)
		return;
	pthread_mutex_lock(&e->mu);
	e->quit = 1;
	pthread_cond_broadcast(&e->work);
	pthread_mutex_unlock(&e->mu);
	pthread_join(e->tid, NULL);
	pthread_cond_destroy(&e->done);
	pthread_cond_destroy(&e->work);
	pthread_mutex_destroy(&e->mu);
	free(e);
	g->engine = NULL;
}

static void req_free(gpt_comm_req *r)
{
	gpt_comm_block_give(r->g->comm, r->blk);
	if (r->dev && r->g->be->drop)
		r->g->be->drop(r);
	free(r->counts);
	free(r);
}

/* Places r's buffers for the backend: the caller's, or staged in a pinned
 * block (shm with device buffers), the inputs copied in now. */
static int place(gpt_comm_req *r, gpt_err *err)
{
	gpt_group *g = r->g;
	size_t sb = gpt_comm_req_send_bytes(r), rb = gpt_comm_req_recv_bytes(r);
	int fs = gpt_comm_stage_foreign(g, r->send), fr = gpt_comm_stage_foreign(g, r->recv);
	/* one place for an all-reduce in place and an uneven reduce-scatter; a
	 * reduce-scatter whose result is the start of its input still needs two */
	int inplace = r->send == r->recv && r->kind != GPT_COMM_REQ_REDUCE_SCATTER;
	r->xsend = r->send;
	r->xrecv = r->recv;
	if (!fs && !fr)
		return 0;
	/* recv after send, 256-byte aligned */
	size_t at = 0, need = fs ? sb : 0;
	if (fr && !inplace) {
		at = fs ? (sb + 255) / 256 * 256 : 0;
		need = at + rb;
	}
	r->blk = gpt_comm_block_take(g, need, err);
	if (!r->blk)
		return err->code;
	if (fs)
		r->xsend = r->blk->p;
	if (fr)
		r->xrecv = (char *)r->blk->p + at;
	if (inplace)
		r->xrecv = (void *)r->xsend;
	return fs ? gpt_comm_stage_move(g, (void *)r->xsend, (void *)r->send, sb, 1, err) : 0;
}

/* The synchronous call of r's kind, on the caller's buffers. */
static int run_now(gpt_comm_req *r, gpt_err *err)
{
	gpt_group *g = r->g;
	if (r->kind == GPT_COMM_REQ_ALL_REDUCE)
		return gpt_comm_all_reduce(g, r->send, r->recv, r->count, r->t, r->op, err);
	if (r->kind == GPT_COMM_REQ_REDUCE_SCATTER_V)
		return gpt_comm_reduce_scatter_v(g, r->recv, r->counts, r->t, r->op, err);
	return gpt_comm_reduce_scatter(g, r->send, r->recv, r->count, r->t, r->op, err);
}

/* counts: the pieces of an uneven reduce-scatter (copied), else NULL. */
static int start(gpt_group *g, gpt_comm_req_kind kind, const void *send, void *recv, int64_t count,
		 const int64_t *counts, gpt_dtype t, gpt_reduce_op op, gpt_comm_req **out, gpt_err *err)
{
	*out = NULL;
	const char *what = kind_name(kind);
	int rc = gpt_comm_check_args(g, have_op(g, kind), what, count, t, err);
	if (!rc && counts)
		rc = gpt_comm_check_counts(g, what, counts, &count, err);
	if (!rc)
		rc = gpt_comm_check_unstaged(g, what, send, recv, err);
	if (rc)
		return rc;
	gpt_comm_engine *e = g->engine;
	int failed = 0, async_failed = 0;
	if (e) {
		pthread_mutex_lock(&e->mu);
		/* with the queue empty the thread has let go of the group */
		async_failed = e->failed;
		failed = e->failed || (e->pending == 0 && g->broken);
		pthread_mutex_unlock(&e->mu);
	} else {
		failed = g->broken;
	}
	/* e->fail is written once, before e->failed is set */
	if (failed)
		return gpt_err_set(err, GPT_EIO, "group %s: %s: unusable after an earlier failure%s%s", g->name, what,
				   async_failed ? ": " : "", async_failed ? e->fail.msg : "");
	gpt_comm_req *r = gpt_calloc(1, sizeof *r, "communication request", err);
	if (!r)
		return err->code;
	*r = (gpt_comm_req){.g = g, .kind = kind, .send = send, .recv = recv, .count = count, .t = t, .op = op};
	if (counts) {
		r->counts = gpt_calloc((size_t)g->size, sizeof *counts, "communication request", err);
		if (!r->counts) {
			free(r);
			return err->code;
		}
		memcpy(r->counts, counts, (size_t)g->size * sizeof *counts);
	}
	rc = 0;
	if (g->be->start) {
		if (gpt_comm_stage_foreign(g, send) || gpt_comm_stage_foreign(g, recv)) {
			/* host buffers over a device backend: staged, synchronously */
			rc = run_now(r, err);
			r->done = 1;
		} else if ((rc = g->be->start(g, r, err))) {
			g->broken = 1;
		}
		if (rc) {
			req_free(r);
			return rc;
		}
		*out = r;
		return 0;
	}
	if (!e && (rc = engine_start(g, err))) {
		req_free(r);
		return rc;
	}
	e = g->engine;
	/* the copy in waits for the compute stream: the inputs are final */
	if ((rc = place(r, err))) {
		req_free(r);
		return rc;
	}
	pthread_mutex_lock(&e->mu);
	if (e->tail)
		e->tail->next = r;
	else
		e->head = r;
	e->tail = r;
	e->pending++;
	pthread_cond_signal(&e->work);
	pthread_mutex_unlock(&e->mu);
	*out = r;
	return 0;
}

int gpt_comm_all_reduce_start(gpt_group *g, const void *send, void *recv, int64_t count,
			      gpt_dtype t, gpt_reduce_op op, gpt_comm_req **req, gpt_err *err)
{
	return start(g, GPT_COMM_REQ_ALL_REDUCE, send, recv, count, NULL, t, op, req, err);
}

int gpt_comm_reduce_scatter_start(gpt_group *g, const void *send, void *recv, int64_t count,
				  gpt_dtype t, gpt_reduce_op op, gpt_comm_req **req, gpt_err *err)
{
	return start(g, GPT_COMM_REQ_REDUCE_SCATTER, send, recv, count, NULL, t, op, req, err);
}

int gpt_comm_reduce_scatter_v_start(gpt_group *g, void *buf, const int64_t *counts, gpt_dtype t,
				    gpt_reduce_op op, gpt_comm_req **req, gpt_err *err)
{
	return start(g, GPT_COMM_REQ_REDUCE_SCATTER_V, buf, buf, 0, counts, t, op, req, err);
}

int gpt_comm_wait(gpt_comm_req *r, gpt_err *err)
{
	if (!r)
		return 0;
	gpt_group *g = r->g;
	int rc = 0;
	if (g->be->start) {
		if (!r->done && (rc = g->be->finish(g, r, err)))
			g->broken = 1;
		req_free(r);
		return rc;
	}
	gpt_comm_engine *e = g->engine;
	pthread_mutex_lock(&e->mu);
	while (!r->done)
		pthread_cond_wait(&e->done, &e->mu);
	pthread_mutex_unlock(&e->mu);
	rc = r->rc;
	if (rc)
		*err = r->err;
	else if (r->xrecv != r->recv)
		rc = gpt_comm_stage_move(g, (char *)r->xrecv + gpt_comm_req_recv_offset(r),
					 (char *)r->recv + gpt_comm_req_recv_offset(r), gpt_comm_req_recv_bytes(r), 0, err);
	req_free(r);
	return rc;
}
