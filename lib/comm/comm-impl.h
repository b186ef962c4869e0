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
};

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
int gpt_comm_stage_p2p(gpt_group *g, const gpt_p2p *ops, int n, gpt_dtype t, gpt_err *err);
/* Frees the staging area. */
void gpt_comm_stage_free(gpt_comm *c);

#if GPT_HAVE_CUDA
extern const gpt_comm_backend gpt_comm_backend_nccl;
#endif
extern const gpt_comm_backend gpt_comm_backend_shm;

#endif
