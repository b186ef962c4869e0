/* What the backends of lib/comm share with the dispatcher (not public). */
#ifndef GPT_COMM_IMPL_H
#define GPT_COMM_IMPL_H

#include "comm/comm.h"

struct gpt_comm {
	gpt_store *store;
	gpt_store_server *server; /* when this process serves the store */
	int own_store;            /* 1: close the store with the comm */
	int rank, world;
	char prefix[32];          /* "r<restart>/": scopes every key of this attempt */
	const gpt_comm_backend *be;
	double timeout_s;
	int device;
	gpt_group *world_group;
	gpt_backend *mem; /* gpt_comm_set_memory: buffers may be its device memory */
	void *stage;      /* staging area: pinned host (shm) or device (nccl) memory */
	size_t stage_bytes;
	struct gpt_comm_block *blocks; /* pinned host blocks of finished requests, for reuse */
};

/* ---- asynchronous requests (async.c) ---- */

typedef enum gpt_comm_req_kind {
	GPT_COMM_REQ_ALL_REDUCE = 0,
	GPT_COMM_REQ_REDUCE_SCATTER,
	GPT_COMM_REQ_REDUCE_SCATTER_V, /* in place: send == recv, count the total */
} gpt_comm_req_kind;

/* A pinned host block that stages one request's device buffers for shm. */
typedef struct gpt_comm_block {
	void *p;
	size_t bytes;
	struct gpt_comm_block *next;
} gpt_comm_block;

struct gpt_comm_req {
	gpt_group *g;
	gpt_comm_req_kind kind;
	const void *send;   /* the caller's buffers */
	void *recv;
	int64_t count;
	gpt_dtype t;
	gpt_reduce_op op;
	int64_t *counts;    /* REDUCE_SCATTER_V: the pieces, by group rank (owned) */
	const void *xsend;  /* what the backend reads and writes: the caller's, or */
	void *xrecv;        /* places in blk */
	gpt_comm_block *blk;
	int done;           /* engine requests: the thread ran it (under the engine's lock) */
	int rc;
	gpt_err err;
	void *dev;          /* nccl: the collective's completion event */
	gpt_comm_req *next; /* the engine's queue */
};

/* The request's bytes of send and of recv, and where in recv its result
 * starts (bytes; not 0 only for an uneven reduce-scatter). */
size_t gpt_comm_req_send_bytes(const gpt_comm_req *r);
size_t gpt_comm_req_recv_bytes(const gpt_comm_req *r);
size_t gpt_comm_req_recv_offset(const gpt_comm_req *r);
/* For every synchronous call on g: waits until g's requests have run, so
 * that the call comes after them (and has the group to itself). An earlier
 * request's failure is returned, naming op. */
int gpt_comm_async_drain(gpt_group *g, const char *op, gpt_err *err);
/* The checks every collective makes of its arguments: the backend has the
 * op (have), the count is not negative, the dtype is one a reduction takes. */
int gpt_comm_check_args(const gpt_group *g, int have, const char *op, int64_t count, gpt_dtype t,
			gpt_err *err);
/* The pieces of an uneven collective: none negative; *total their sum. */
int gpt_comm_check_counts(const gpt_group *g, const char *op, const int64_t *counts, int64_t *total,
			  gpt_err *err);
/* Where rank r's piece starts: counts[0] + ... + counts[r-1] elements. */
int64_t gpt_comm_piece_at(const int64_t *counts, int r);
/* Stops g's progress thread (after the request it runs) and frees what is
 * left; before the backend's group_free. */
void gpt_comm_async_free(gpt_group *g);
/* Frees the pooled pinned blocks of c. */
void gpt_comm_blocks_free(gpt_comm *c);

/* Writes "<prefix><group key>/<suffix>" into out. */
void gpt_comm_group_key(const gpt_group *g, char *out, size_t size, const char *suffix);

/* Appends "2 (world 6), 3 (world 7)" for the group ranks with flag set. */
void gpt_comm_list_ranks(const gpt_group *g, const int *flag, char *out, size_t size);

/* Exchanges one small string per member through the store: every member
 * publishes mine under tag, then gets all (vals[i] malloc'd, free each and
 * the array). Timeouts name the group, op and the missing ranks. */
int gpt_comm_exchange(gpt_group *g, const char *tag, const char *op, const char *mine,
		      char ***vals, gpt_err *err);

/* dst[i] = srcs[0][off+i] op srcs[1][off+i] op ... for i < count, folded in
 * source order (left to right), bf16/fp16 through fp32 with one rounding at
 * the end, integers wrapping, max propagating NaN. The fixed order is what
 * makes every rank's result bit-identical. */
void gpt_comm_reduce(void *dst, const void *const *srcs, int nsrc, int64_t off, int64_t count,
		     gpt_dtype t, gpt_reduce_op op);

/* share.c: GPT_COMM_BACKEND=auto where a host has more GPU ranks than
 * visible devices: "shm" when two ranks of the job hold one device (compared
 * by UUID through the store under prefix), else "nccl". Collective over
 * every rank of env's job. */
int gpt_comm_resolve_auto(gpt_store *st, const char *prefix, const gpt_dist_env *env, int device,
			  const char **backend, gpt_err *err);

/* The collectives with staging (stage.c), for a comm with c->mem set:
 * the same contract as the backend slots they wrap. */
int gpt_comm_stage_all_reduce(gpt_group *g, const void *send, void *recv, int64_t count, gpt_dtype t,
			      gpt_reduce_op op, gpt_err *err);
int gpt_comm_stage_reduce_scatter(gpt_group *g, const void *send, void *recv, int64_t count,
				  gpt_dtype t, gpt_reduce_op op, gpt_err *err);
int gpt_comm_stage_all_gather(gpt_group *g, const void *send, void *recv, int64_t count, gpt_dtype t,
			      gpt_err *err);
int gpt_comm_stage_broadcast(gpt_group *g, void *buf, int64_t count, gpt_dtype t, int root,
			     gpt_err *err);
int gpt_comm_stage_reduce_scatter_v(gpt_group *g, void *buf, const int64_t *counts, int64_t total,
				    gpt_dtype t, gpt_reduce_op op, gpt_err *err);
int gpt_comm_stage_all_gather_v(gpt_group *g, void *buf, const int64_t *counts, int64_t total, gpt_dtype t,
				gpt_err *err);
int gpt_comm_stage_p2p(gpt_group *g, const gpt_p2p *ops, int n, gpt_dtype t, gpt_err *err);
/* Frees the staging area. */
void gpt_comm_stage_free(gpt_comm *c);
/* 1 when g's backend cannot take p as it is (a backend is attached and p is
 * memory of the other kind). */
int gpt_comm_stage_foreign(const gpt_group *g, const void *p);
/* 1 when p is host memory that g's backend cannot take (nccl's device
 * memory only) and no backend is attached to stage it through. */
int gpt_comm_unstaged_host(const gpt_group *g, const void *p);
/* GPT_EUSAGE naming the group and op when a or b (either may be NULL) is
 * such host memory: NCCL would be handed a host pointer. */
int gpt_comm_check_unstaged(const gpt_group *g, const char *op, const void *a, const void *b, gpt_err *err);
/* Copies bytes between a user buffer and a staging place: in = 1 towards
 * the staging place, 0 back out, with the attached backend's upload or
 * download (which wait for its stream). */
int gpt_comm_stage_move(gpt_group *g, void *stage, void *user, size_t bytes, int in, gpt_err *err);
/* A staging block of at least bytes, of the kind g's backend takes: one of
 * the comm's pool when one is large enough, else a new one. */
gpt_comm_block *gpt_comm_block_take(gpt_group *g, size_t bytes, gpt_err *err);
/* Back into the comm's pool. */
void gpt_comm_block_give(gpt_comm *c, gpt_comm_block *b);

#if GPT_HAVE_CUDA
extern const gpt_comm_backend gpt_comm_backend_nccl;
#endif
extern const gpt_comm_backend gpt_comm_backend_shm;

#endif
