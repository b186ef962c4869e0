/* lib/cuda NCCL wrappers: communicators over device buffers, callable from C.
 *
 * lib/comm's `nccl` backend (lib/comm/nccl.c) builds on these; the unique id
 * travels through the rendezvous store there. Communicators are created
 * non-blocking and every operation is waited for with a deadline: when it
 * passes, the communicator is aborted and the error says which operation of
 * which group hung, so a dead peer never leaves the others waiting forever.
 * Operations are synchronous with respect to the host (they return when the
 * result is in place) and run on a stream owned by the communicator. */
#ifndef GPT_CUDA_NCCL_H
#define GPT_CUDA_NCCL_H

#include "backend/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

#define GPT_NCCL_ID_BYTES 128

typedef struct gpt_nccl gpt_nccl;

/* One point-to-point transfer of a grouped batch. */
typedef struct gpt_nccl_xfer {
	int peer;
	int is_send;
	void *buf;
	int64_t count;
} gpt_nccl_xfer;

int gpt_nccl_unique_id(unsigned char id[GPT_NCCL_ID_BYTES], gpt_err *err);
/* ncclCommInitRankConfig on `device`; name is for messages. */
int gpt_nccl_init(gpt_nccl **out, const unsigned char id[GPT_NCCL_ID_BYTES], int nranks, int rank,
		  int device, double timeout_s, const char *name, gpt_err *err);
/* ncclCommSplit, collective over parent; *out is NULL for color < 0. */
int gpt_nccl_split(gpt_nccl *parent, int color, int key, double timeout_s, const char *name,
		   gpt_nccl **out, gpt_err *err);
void gpt_nccl_free(gpt_nccl *c);
/* The deadline of the following operations, in seconds. */
void gpt_nccl_set_timeout(gpt_nccl *c, double timeout_s);

int gpt_nccl_all_reduce(gpt_nccl *c, const void *send, void *recv, int64_t count, gpt_dtype t,
			int max, gpt_err *err);
int gpt_nccl_reduce_scatter(gpt_nccl *c, const void *send, void *recv, int64_t count, gpt_dtype t,
			    int max, gpt_err *err);
int gpt_nccl_all_gather(gpt_nccl *c, const void *send, void *recv, int64_t count, gpt_dtype t,
			gpt_err *err);
int gpt_nccl_broadcast(gpt_nccl *c, void *buf, int64_t count, gpt_dtype t, int root, gpt_err *err);
/* In place over n ranks (gpt_comm_reduce_scatter_v, gpt_comm_all_gather_v):
 * one ncclReduce / ncclBroadcast per non-empty piece, rooted at its owner,
 * in one ncclGroupStart/ncclGroupEnd batch. */
int gpt_nccl_reduce_scatter_v(gpt_nccl *c, void *buf, const int64_t *counts, int n, gpt_dtype t, int max,
			      gpt_err *err);
int gpt_nccl_all_gather_v(gpt_nccl *c, void *buf, const int64_t *counts, int n, gpt_dtype t, gpt_err *err);
/* The transfers as one ncclGroupStart/ncclGroupEnd batch. */
int gpt_nccl_p2p(gpt_nccl *c, const gpt_nccl_xfer *x, int n, gpt_dtype t, gpt_err *err);
int gpt_nccl_barrier(gpt_nccl *c, gpt_err *err);

/* Asynchronous all-reduce / reduce-scatter (even or not): enqueued on c's stream behind
 * the work queued so far on compute's stream (the default stream when
 * compute is NULL), returning at once with *event, recorded after the
 * collective. The host waits only while NCCL itself is still enqueuing. */
int gpt_nccl_all_reduce_start(gpt_nccl *c, const void *send, void *recv, int64_t count, gpt_dtype t,
			      int max, gpt_backend *compute, void **event, gpt_err *err);
int gpt_nccl_reduce_scatter_start(gpt_nccl *c, const void *send, void *recv, int64_t count,
				  gpt_dtype t, int max, gpt_backend *compute, void **event, gpt_err *err);
int gpt_nccl_reduce_scatter_v_start(gpt_nccl *c, void *buf, const int64_t *counts, int n, gpt_dtype t,
				    int max, gpt_backend *compute, void **event, gpt_err *err);
/* The host waits for event with c's deadline (aborting c when it passes),
 * reports an asynchronous NCCL failure, and frees event. */
int gpt_nccl_finish(gpt_nccl *c, void *event, gpt_err *err);
/* Frees an event that is never finished. */
void gpt_nccl_event_free(void *event);

#ifdef __cplusplus
}
#endif

#endif
