/* NCCL communicators with deadlines (see nccl.h). */
#include "cuda/common.cuh"
#include "cuda/nccl.h"
#include "cuda/ops.cuh"

#include <nccl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct gpt_nccl {
	ncclComm_t comm;
	cudaStream_t stream;
	int device;
	double timeout_s;
	int *scratch; /* one int on the device, for the barrier */
	char name[64];
};

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void nap(void)
{
	struct timespec ts = {0, 100000};
	nanosleep(&ts, NULL);
}

static int nccl_fail(gpt_nccl *c, const char *op, ncclResult_t r, gpt_err *err)
{
	return gpt_err_set(err, GPT_EIO, "nccl group %s: %s: %s%s%s", c->name, op, ncclGetErrorString(r),
			   ncclGetLastError(c->comm) && *ncclGetLastError(c->comm) ? ": " : "",
			   ncclGetLastError(c->comm) ? ncclGetLastError(c->comm) : "");
}

/* Waits until the communicator is no longer "in progress" (init, split). */
static int wait_ready(gpt_nccl *c, const char *op, gpt_err *err)
{
	double deadline = now_s() + c->timeout_s;
	for (;;) {
		ncclResult_t st = ncclSuccess;
		ncclCommGetAsyncError(c->comm, &st);
		if (st == ncclSuccess)
			return 0;
		if (st != ncclInProgress)
			return nccl_fail(c, op, st, err);
		if (now_s() > deadline) {
			ncclCommAbort(c->comm);
			c->comm = NULL;
			return gpt_err_set(err, GPT_EIO,
					   "nccl group %s: %s did not complete within %g s (a peer never joined); aborted",
					   c->name, op, c->timeout_s);
		}
		nap();
	}
}

/* Waits for the work just enqueued on c's stream, with the deadline. A
 * non-blocking communicator may still be enqueuing (ncclInProgress): the
 * stream only means something once that is over. */
static int wait_done(gpt_nccl *c, const char *op, ncclResult_t enq, gpt_err *err)
{
	if (enq != ncclSuccess && enq != ncclInProgress)
		return nccl_fail(c, op, enq, err);
	double deadline = now_s() + c->timeout_s;
	int enqueued = enq == ncclSuccess;
	for (;;) {
		ncclResult_t st = ncclSuccess;
		ncclCommGetAsyncError(c->comm, &st);
		if (st != ncclSuccess && st != ncclInProgress)
			return nccl_fail(c, op, st, err);
		enqueued |= st == ncclSuccess;
		if (enqueued) {
			cudaError_t q = gpt_cuda_query(cudaStreamQuery(c->stream));
			if (q == cudaSuccess)
				return 0;
			if (q != cudaErrorNotReady)
				return gpt_cuda_check(q, op, err);
		}
		if (now_s() > deadline) {
			ncclCommAbort(c->comm);
			c->comm = NULL;
			return gpt_err_set(err, GPT_EIO,
					   "nccl group %s: %s did not complete within %g s (a peer is missing or stuck); aborted",
					   c->name, op, c->timeout_s);
		}
		nap();
	}
}

static int nccl_type(gpt_dtype t, ncclDataType_t *out, gpt_err *err)
{
	switch (t) {
	case GPT_DTYPE_F32: *out = ncclFloat32; return 0;
	case GPT_DTYPE_BF16: *out = ncclBfloat16; return 0;
	case GPT_DTYPE_F16: *out = ncclFloat16; return 0;
	case GPT_DTYPE_I32: *out = ncclInt32; return 0;
	case GPT_DTYPE_I64: *out = ncclInt64; return 0;
	default: return gpt_err_set(err, GPT_EUSAGE, "nccl: dtype %s is not supported", gpt_dtype_name(t));
	}
}

extern "C" int gpt_nccl_unique_id(unsigned char id[GPT_NCCL_ID_BYTES], gpt_err *err)
{
	ncclUniqueId u;
	ncclResult_t r = ncclGetUniqueId(&u);
	if (r != ncclSuccess)
		return gpt_err_set(err, GPT_EIO, "nccl: cannot create a unique id: %s", ncclGetErrorString(r));
	static_assert(sizeof u == GPT_NCCL_ID_BYTES, "NCCL unique id size");
	memcpy(id, &u, sizeof u);
	return 0;
}

static gpt_nccl *nccl_new(int device, double timeout_s, const char *name, gpt_err *err)
{
	gpt_nccl *c = (gpt_nccl *)gpt_calloc(1, sizeof *c, "nccl communicator", err);
	if (!c)
		return NULL;
	c->device = device;
	c->timeout_s = timeout_s;
	snprintf(c->name, sizeof c->name, "%s", name);
	if (gpt_cuda_check(cudaSetDevice(device), "set device", err) ||
	    gpt_cuda_check(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking), "stream", err)) {
		free(c);
		return NULL;
	}
	if (gpt_cuda_check(cudaMalloc((void **)&c->scratch, sizeof(int)), "barrier scratch", err)) {
		cudaStreamDestroy(c->stream);
		free(c);
		return NULL;
	}
	return c;
}

extern "C" int gpt_nccl_init(gpt_nccl **out, const unsigned char id[GPT_NCCL_ID_BYTES], int nranks,
			     int rank, int device, double timeout_s, const char *name, gpt_err *err)
{
	*out = NULL;
	gpt_nccl *c = nccl_new(device, timeout_s, name, err);
	if (!c)
		return err->code;
	ncclUniqueId u;
	memcpy(&u, id, sizeof u);
	ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
	cfg.blocking = 0;
	ncclResult_t r = ncclCommInitRankConfig(&c->comm, nranks, u, rank, &cfg);
	int rc = r == ncclSuccess || r == ncclInProgress ? wait_ready(c, "init", err) : nccl_fail(c, "init", r, err);
	if (rc) {
		gpt_nccl_free(c);
		return rc;
	}
	*out = c;
	return 0;
}

extern "C" int gpt_nccl_split(gpt_nccl *parent, int color, int key, double timeout_s, const char *name,
			      gpt_nccl **out, gpt_err *err)
{
	*out = NULL;
	gpt_nccl *c = nccl_new(parent->device, timeout_s, name, err);
	if (!c)
		return err->code;
	ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
	cfg.blocking = 0;
	ncclResult_t r = ncclCommSplit(parent->comm, color < 0 ? NCCL_SPLIT_NOCOLOR : color, key, &c->comm, &cfg);
	/* A non-blocking split runs on the parent's thread: the parent stays
	 * "in progress" until it is over, and only then does NCCL write the
	 * child (NULL for NOCOLOR) into c->comm. The parent first, so that
	 * c->comm is read once it is final and the parent's next call (the
	 * next split) does not find it still busy; then the child. */
	int rc = r == ncclSuccess || r == ncclInProgress ? wait_ready(parent, "split", err)
							  : nccl_fail(parent, "split", r, err);
	if (!rc && c->comm)
		rc = wait_ready(c, "split", err);
	if (rc || !c->comm) {
		gpt_nccl_free(c);
		return rc;
	}
	*out = c;
	return 0;
}

extern "C" void gpt_nccl_free(gpt_nccl *c)
{
	if (!c)
		return;
	/* NCCL: a communicator in error is aborted, not destroyed (a destroy
	 * returns the error and frees nothing, or waits for work that peers
	 * will never complete): a failed init or split, an asynchronous error */
	ncclResult_t st = ncclSuccess;
	if (c->comm && ncclCommGetAsyncError(c->comm, &st) == ncclSuccess && st == ncclSuccess)
		ncclCommDestroy(c->comm);
	else if (c->comm)
		ncclCommAbort(c->comm);
	cudaFree(c->scratch);
	cudaStreamDestroy(c->stream);
	free(c);
}

extern "C" void gpt_nccl_set_timeout(gpt_nccl *c, double timeout_s)
{
	c->timeout_s = timeout_s;
}

extern "C" int gpt_nccl_all_reduce(gpt_nccl *c, const void *send, void *recv, int64_t count, gpt_dtype t,
				   int max, gpt_err *err)
{
	ncclDataType_t nt = ncclFloat32;
	int rc = nccl_type(t, &nt, err);
	if (rc)
		return rc;
	return wait_done(c, "all-reduce",
			 ncclAllReduce(send, recv, (size_t)count, nt, max ? ncclMax : ncclSum, c->comm, c->stream), err);
}

extern "C" int gpt_nccl_reduce_scatter(gpt_nccl *c, const void *send, void *recv, int64_t count,
				       gpt_dtype t, int max, gpt_err *err)
{
	ncclDataType_t nt = ncclFloat32;
	int rc = nccl_type(t, &nt, err);
	if (rc)
		return rc;
	return wait_done(c, "reduce-scatter",
			 ncclReduceScatter(send, recv, (size_t)count, nt, max ? ncclMax : ncclSum, c->comm, c->stream),
			 err);
}

extern "C" int gpt_nccl_all_gather(gpt_nccl *c, const void *send, void *recv, int64_t count, gpt_dtype t,
				   gpt_err *err)
{
	ncclDataType_t nt = ncclFloat32;
	int rc = nccl_type(t, &nt, err);
	if (rc)
		return rc;
	return wait_done(c, "all-gather", ncclAllGather(send, recv, (size_t)count, nt, c->comm, c->stream), err);
}

extern "C" int gpt_nccl_broadcast(gpt_nccl *c, void *buf, int64_t count, gpt_dtype t, int root, gpt_err *err)
{
	ncclDataType_t nt = ncclFloat32;
	int rc = nccl_type(t, &nt, err);
	if (rc)
		return rc;
	return wait_done(c, "broadcast", ncclBroadcast(buf, buf, (size_t)count, nt, root, c->comm, c->stream), err);
}

/* The uneven pair (see gpt_comm_reduce_scatter_v), in place: a batch of
 * one ncclReduce (ncclBroadcast) per non-empty piece, rooted at its owner.
 * Each moves its piece about once through every rank, so the batch moves
 * about the buffer once, half of what an all-reduce of it does. */
static ncclResult_t pieces_enqueue(gpt_nccl *c, int gather, void *buf, const int64_t *counts, int n,
				   ncclDataType_t nt, size_t es, ncclRedOp_t ro)
{
	ncclResult_t r = ncclGroupStart();
	char *p = (char *)buf;
	for (int i = 0; i < n && (r == ncclSuccess || r == ncclInProgress); i++) {
		if (counts[i] > 0)
			r = gather ? ncclBroadcast(p, p, (size_t)counts[i], nt, i, c->comm, c->stream)
				   : ncclReduce(p, p, (size_t)counts[i], nt, ro, i, c->comm, c->stream);
		p += (size_t)counts[i] * es;
	}
	ncclResult_t e = ncclGroupEnd();
	return r == ncclSuccess || r == ncclInProgress ? e : r;
}

extern "C" int gpt_nccl_reduce_scatter_v(gpt_nccl *c, void *buf, const int64_t *counts, int n, gpt_dtype t,
					 int max, gpt_err *err)
{
	ncclDataType_t nt = ncclFloat32;
	int rc = nccl_type(t, &nt, err);
	if (rc)
		return rc;
	return wait_done(c, "reduce-scatter",
			 pieces_enqueue(c, 0, buf, counts, n, nt, gpt_dtype_size(t), max ? ncclMax : ncclSum), err);
}

extern "C" int gpt_nccl_all_gather_v(gpt_nccl *c, void *buf, const int64_t *counts, int n, gpt_dtype t,
				     gpt_err *err)
{
	ncclDataType_t nt = ncclFloat32;
	int rc = nccl_type(t, &nt, err);
	if (rc)
		return rc;
	return wait_done(c, "all-gather", pieces_enqueue(c, 1, buf, counts, n, nt, gpt_dtype_size(t), ncclSum), err);
}

extern "C" int gpt_nccl_p2p(gpt_nccl *c, const gpt_nccl_xfer *x, int n, gpt_dtype t, gpt_err *err)
{
	ncclDataType_t nt = ncclFloat32;
	int rc = nccl_type(t, &nt, err);
	if (rc)
		return rc;
	ncclResult_t r = ncclGroupStart();
	for (int i = 0; i < n && (r == ncclSuccess || r == ncclInProgress); i++)
		r = x[i].is_send ? ncclSend(x[i].buf, (size_t)x[i].count, nt, x[i].peer, c->comm, c->stream)
				 : ncclRecv(x[i].buf, (size_t)x[i].count, nt, x[i].peer, c->comm, c->stream);
	ncclResult_t e = ncclGroupEnd();
	if (r == ncclSuccess || r == ncclInProgress)
		r = e;
	return wait_done(c, "send/recv", r, err);
}

extern "C" int gpt_nccl_barrier(gpt_nccl *c, gpt_err *err)
{
	return wait_done(c, "barrier", ncclAllReduce(c->scratch, c->scratch, 1, ncclInt32, ncclSum, c->comm, c->stream),
			 err);
}

/* ---- asynchronous collectives ---- */

static cudaStream_t compute_stream(gpt_backend *compute)
{
	return compute ? gpt_cuda_stream(compute) : cudaStreamLegacy;
}

/* Waits until a non-blocking communicator has enqueued what it was given. */
static int wait_enqueued(gpt_nccl *c, const char *op, ncclResult_t enq, gpt_err *err)
{
	if (enq == ncclSuccess)
		return 0;
	if (enq != ncclInProgress)
		return nccl_fail(c, op, enq, err);
	return wait_ready(c, op, err);
}

typedef enum { ASYNC_ALL_REDUCE, ASYNC_REDUCE_SCATTER, ASYNC_REDUCE_SCATTER_V } async_kind;

/* counts (n entries): the pieces of ASYNC_REDUCE_SCATTER_V, in place in recv. */
static int start_async(gpt_nccl *c, async_kind k, const void *send, void *recv, int64_t count,
		       const int64_t *counts, int n, gpt_dtype t, int max, gpt_backend *compute, void **event,
		       gpt_err *err)
{
	*event = NULL;
	const char *op = k == ASYNC_ALL_REDUCE ? "all-reduce" : "reduce-scatter";
	ncclDataType_t nt = ncclFloat32;
	int rc = nccl_type(t, &nt, err);
	if (rc)
		return rc;
	cudaEvent_t ready = NULL, done = NULL;
	/* the collective starts after the kernels that wrote its input */
	rc = gpt_cuda_check(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming), op, err);
	if (!rc)
		rc = gpt_cuda_check(cudaEventRecord(ready, compute_stream(compute)), op, err);
	if (!rc)
		rc = gpt_cuda_check(cudaStreamWaitEvent(c->stream, ready, 0), op, err);
	if (ready)
		cudaEventDestroy(ready);
	if (!rc) {
		ncclRedOp_t ro = max ? ncclMax : ncclSum;
		ncclResult_t r = k == ASYNC_ALL_REDUCE ? ncclAllReduce(send, recv, (size_t)count, nt, ro, c->comm, c->stream)
				 : k == ASYNC_REDUCE_SCATTER
				 ? ncclReduceScatter(send, recv, (size_t)count, nt, ro, c->comm, c->stream)
				 : pieces_enqueue(c, 0, recv, counts, n, nt, gpt_dtype_size(t), ro);
		rc = wait_enqueued(c, op, r, err);
	}
	if (!rc)
		rc = gpt_cuda_check(cudaEventCreateWithFlags(&done, cudaEventDisableTiming), op, err);
	if (!rc)
		rc = gpt_cuda_check(cudaEventRecord(done, c->stream), op, err);
	if (rc) {
		if (done)
			cudaEventDestroy(done);
		return rc;
	}
	*event = (void *)done;
	return 0;
}

extern "C" int gpt_nccl_all_reduce_start(gpt_nccl *c, const void *send, void *recv, int64_t count,
					 gpt_dtype t, int max, gpt_backend *compute, void **event, gpt_err *err)
{
	return start_async(c, ASYNC_ALL_REDUCE, send, recv, count, NULL, 0, t, max, compute, event, err);
}

extern "C" int gpt_nccl_reduce_scatter_start(gpt_nccl *c, const void *send, void *recv, int64_t count,
					     gpt_dtype t, int max, gpt_backend *compute, void **event,
					     gpt_err *err)
{
	return start_async(c, ASYNC_REDUCE_SCATTER, send, recv, count, NULL, 0, t, max, compute, event, err);
}

extern "C" int gpt_nccl_reduce_scatter_v_start(gpt_nccl *c, void *buf, const int64_t *counts, int n,
					       gpt_dtype t, int max, gpt_backend *compute, void **event,
					       gpt_err *err)
{
	return start_async(c, ASYNC_REDUCE_SCATTER_V, buf, buf, 0, counts, n, t, max, compute, event, err);
}

/* The host waits for the event, with the deadline, even where a compute
 * stream could wait for it instead: a stream waits without one, so a
 * collective whose peer died would leave that stream, and the host's next
 * wait for it (a download, the next synchronous collective), stuck forever. */
extern "C" int gpt_nccl_finish(gpt_nccl *c, void *event, gpt_err *err)
{
	cudaEvent_t done = (cudaEvent_t)event;
	int rc = 0;
	double deadline = now_s() + c->timeout_s;
	for (;;) {
		ncclResult_t st = ncclSuccess;
		ncclCommGetAsyncError(c->comm, &st);
		if (st != ncclSuccess && st != ncclInProgress) {
			rc = nccl_fail(c, "asynchronous collective", st, err);
			break;
		}
		cudaError_t q = gpt_cuda_query(cudaEventQuery(done));
		if (q == cudaSuccess)
			break;
		if (q != cudaErrorNotReady) {
			rc = gpt_cuda_check(q, "waiting for a collective", err);
			break;
		}
		if (now_s() > deadline) {
			ncclCommAbort(c->comm);
			c->comm = NULL;
			rc = gpt_err_set(err, GPT_EIO,
					 "nccl group %s: an asynchronous collective did not complete within %g s (a peer is missing or stuck); aborted",
					 c->name, c->timeout_s);
			break;
		}
		nap();
	}
	cudaEventDestroy(done);
	return rc;
}

extern "C" void gpt_nccl_event_free(void *event)
{
	if (event)
		cudaEventDestroy((cudaEvent_t)event);
}
