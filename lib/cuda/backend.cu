/* The CUDA backend's context and table: one device, one stream, cuBLASLt;
 * memory ops on that stream. */
#include "cuda/ops.cuh"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int gpt_cuda_check_sizes(const char *op, gpt_err *err, int count, ...)
{
	va_list ap;
	va_start(ap, count);
	for (int i = 0; i < count; i++) {
		int64_t v = va_arg(ap, int64_t);
		if (v < 0) {
			va_end(ap);
			return gpt_err_set(err, GPT_EINTERNAL, "%s: size argument %d is negative (%lld)",
					   op, i + 1, (long long)v);
		}
	}
	va_end(ap);
	return 0;
}

static void *cu_alloc(gpt_backend *be, size_t bytes, const char *what, gpt_err *err)
{
	return gpt_cuda_malloc(bytes, what, err);
}

static void cu_free(gpt_backend *be, void *p)
{
	gpt_cuda_free(p);
}

/* Reports (and clears) a bad datum a kernel left since the last check. */
static int check_bad(gpt_backend *be, gpt_err *err)
{
	gpt_cuda_ctx *c = gpt_cuda_ctx_of(be);
	int bad[4];
	int rc = gpt_cuda_check(cudaMemcpyAsync(bad, c->bad, sizeof bad, cudaMemcpyDeviceToHost,
						c->stream), "reading the error flag", err);
	if (!rc)
		rc = gpt_cuda_check(cudaStreamSynchronize(c->stream), "synchronize", err);
	if (rc || bad[0] == GPT_CUDA_BAD_NONE)
		return rc;
	rc = gpt_cuda_check(cudaMemsetAsync(c->bad, 0, sizeof bad, c->stream), "clearing the error flag",
			    err);
	if (rc)
		return rc;
	if (bad[0] == GPT_CUDA_BAD_KV_ROW)
		return gpt_err_set(err, GPT_EUSAGE,
				   "attention_kv_rows: row %d has slot %d and position %d; expected a slot of the "
				   "cache and a position inside it (shorten the prompt or the generation)",
				   bad[1], bad[2], bad[3]);
	return gpt_err_set(err, GPT_EDATA, "%s: target %d in row %d is outside the vocabulary of %d",
			   bad[0] == GPT_CUDA_BAD_TARGET_FWD ? "xent_fwd" : "xent_bwd", bad[2], bad[1],
			   bad[3]);
}

/* Makes room for `need` bytes in the staging memory: on in the half in use,
 * or in the other one once the copies queued from it are done (the device
 * has long done them unless the host is a whole half of uploads ahead). */
static int stage_room(gpt_cuda_ctx *c, size_t need, gpt_err *err)
{
	const size_t half = GPT_CUDA_STAGED;
	if (c->stage_at + need <= (size_t)(c->stage_half + 1) * half)
		return 0;
	int rc = gpt_cuda_check(cudaEventRecord(c->stage_done[c->stage_half], c->stream), "upload", err);
	if (rc)
		return rc;
	c->stage_half ^= 1;
	c->stage_at = (size_t)c->stage_half * half;
	/* an event never recorded is done */
	cudaError_t q = gpt_cuda_query(cudaEventQuery(c->stage_done[c->stage_half]));
	if (q == cudaErrorNotReady)
		q = cudaEventSynchronize(c->stage_done[c->stage_half]);
	return gpt_cuda_check(q, "upload", err);
}

/* The calling thread on the backend's device. The copies below are called
 * from the comm's progress thread too (lib/comm/stage.c, async.c), whose
 * current device is 0 until it sets one: on a rank of another GPU its copies
 * would go through device 0 (a context there, hundreds of MiB) with a stream
 * of another device. cudaGetDevice reads the thread's setting only. */
static int on_device(const gpt_cuda_ctx *c, gpt_err *err)
{
	int cur = -1;
	if (cudaGetDevice(&cur) == cudaSuccess && cur == c->device)
		return 0;
	return gpt_cuda_check(cudaSetDevice(c->device), "set device", err);
}

int gpt_cuda_upload(gpt_backend *be, void *dst, const void *src, size_t bytes, gpt_err *err)
{
	gpt_cuda_ctx *c = gpt_cuda_ctx_of(be);
	size_t need = (bytes + 255) & ~(size_t)255; /* each copy 256-byte aligned */
	if (!bytes)
		return 0;
	int rc = on_device(c, err);
	if (rc)
		return rc;
	if (need > GPT_CUDA_STAGED) { /* from src itself: the host waits for the copy */
		rc = gpt_cuda_check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, c->stream), "upload",
				    err);
		return rc ? rc : gpt_cuda_check(cudaStreamSynchronize(c->stream), "upload", err);
	}
	/* the comm progress thread may upload through the same backend */
	pthread_mutex_lock(&c->stage_mu);
	rc = stage_room(c, need, err);
	if (!rc) {
		char *at = c->stage + c->stage_at;
		memcpy(at, src, bytes);
		rc = gpt_cuda_check(cudaMemcpyAsync(dst, at, bytes, cudaMemcpyHostToDevice, c->stream),
				    "upload", err);
		c->stage_at += need;
	}
	pthread_mutex_unlock(&c->stage_mu);
	return rc;
}

static int cu_download(gpt_backend *be, void *dst, const void *src, size_t bytes, gpt_err *err)
{
	cudaStream_t s = gpt_cuda_stream(be);
	int rc = on_device(gpt_cuda_ctx_of(be), err);
	if (!rc && bytes)
		rc = gpt_cuda_check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, s), "download", err);
	return rc ? rc : check_bad(be, err);
}

/* the stream of copies to the device and its event, made on first use */
static int side_stream(gpt_cuda_ctx *c, gpt_err *err)
{
	if (c->side_made)
		return 0;
	int rc = gpt_cuda_check(cudaStreamCreateWithFlags(&c->side, cudaStreamNonBlocking), "creating a stream", err);
	if (!rc && (rc = gpt_cuda_check(cudaEventCreateWithFlags(&c->side_done, cudaEventDisableTiming),
					"creating an event", err)))
		cudaStreamDestroy(c->side);
	c->side_made = !rc;
	return rc;
}

extern "C" int gpt_cuda_copy_async(gpt_backend *be, void *dst, const void *src, size_t bytes, int to_device,
				   gpt_err *err)
{
	gpt_cuda_ctx *c = gpt_cuda_ctx_of(be);
	int rc = on_device(c, err);
	if (!rc && to_device)
		rc = side_stream(c, err);
	if (rc || !bytes)
		return rc;
	return to_device ? gpt_cuda_check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, c->side), "upload", err)
			 : gpt_cuda_check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, c->stream), "download",
					  err);
}

extern "C" int gpt_cuda_copies_join(gpt_backend *be, gpt_err *err)
{
	gpt_cuda_ctx *c = gpt_cuda_ctx_of(be);
	int rc = on_device(c, err);
	if (rc || !c->side_made)
		return rc;
	rc = gpt_cuda_check(cudaEventRecord(c->side_done, c->side), "joining the copies", err);
	return rc ? rc : gpt_cuda_check(cudaStreamWaitEvent(c->stream, c->side_done, 0), "joining the copies", err);
}

extern "C" int gpt_cuda_mark(gpt_backend *be, int i, gpt_err *err)
{
	gpt_cuda_ctx *c = gpt_cuda_ctx_of(be);
	if (i < 0 || i >= GPT_CUDA_MARKS)
		return gpt_err_set(err, GPT_EINTERNAL, "cuda backend: mark %d outside [0, %d)", i, (int)GPT_CUDA_MARKS);
	int rc = on_device(c, err);
	while (!rc && c->marks_made < GPT_CUDA_MARKS &&
	       !(rc = gpt_cuda_check(cudaEventCreateWithFlags(&c->marks[c->marks_made], cudaEventDisableTiming),
				     "creating an event", err)))
		c->marks_made++;
	return rc ? rc : gpt_cuda_check(cudaEventRecord(c->marks[i], c->stream), "mark", err);
}

extern "C" int gpt_cuda_mark_wait(gpt_backend *be, int i, gpt_err *err)
{
	gpt_cuda_ctx *c = gpt_cuda_ctx_of(be);
	if (i < 0 || i >= GPT_CUDA_MARKS)
		return gpt_err_set(err, GPT_EINTERNAL, "cuda backend: mark %d outside [0, %d)", i, (int)GPT_CUDA_MARKS);
	if (i >= c->marks_made) /* never recorded */
		return 0;
	return gpt_cuda_check(cudaEventSynchronize(c->marks[i]), "waiting for a mark", err);
}

static int cu_copy(gpt_backend *be, void *dst, const void *src, size_t bytes, gpt_err *err)
{
	if (!bytes || dst == src)
		return 0;
	int rc = on_device(gpt_cuda_ctx_of(be), err);
	return rc ? rc
		  : gpt_cuda_check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, gpt_cuda_stream(be)),
				   "copy", err);
}

static int cu_zero(gpt_backend *be, void *dst, size_t bytes, gpt_err *err)
{
	if (!bytes)
		return 0;
	int rc = on_device(gpt_cuda_ctx_of(be), err);
	return rc ? rc : gpt_cuda_check(cudaMemsetAsync(dst, 0, bytes, gpt_cuda_stream(be)), "zero", err);
}

static int cu_sync(gpt_backend *be, gpt_err *err)
{
	int rc = on_device(gpt_cuda_ctx_of(be), err);
	return rc ? rc : check_bad(be, err);
}

static int cu_convert(gpt_backend *be, void *dst, gpt_dtype dst_t, const void *src,
		      gpt_dtype src_t, int64_t n, gpt_err *err)
{
	if (n < 0)
		return gpt_err_set(err, GPT_EINTERNAL, "convert: negative count %lld", (long long)n);
	return gpt_cuda_convert_on(gpt_cuda_stream(be), dst, dst_t, src, src_t, (size_t)n, err);
}

static const gpt_backend_ops cuda_ops = {
	cu_alloc,
	cu_free,
	gpt_cuda_upload,
	cu_download,
	cu_copy,
	cu_zero,
	cu_sync,
	cu_convert,
	gpt_cuda_gemm,
	gpt_cuda_gemm_batched,
	gpt_cuda_linear_fwd,
	gpt_cuda_linear_bwd,
	gpt_cuda_bias_add,
	gpt_cuda_layernorm_fwd,
	gpt_cuda_layernorm_bwd,
	gpt_cuda_gelu_fwd,
	gpt_cuda_gelu_bwd,
	gpt_cuda_attention_fwd,
	gpt_cuda_attention_bwd,
	gpt_cuda_attention_saved_size,
	gpt_cuda_attention_kv,
	gpt_cuda_attention_kv_rows,
	gpt_cuda_xent_fwd,
	gpt_cuda_xent_rescale,
	gpt_cuda_xent_loss,
	gpt_cuda_xent_bwd,
	gpt_cuda_embedding_fwd,
	gpt_cuda_embedding_rows_fwd,
	gpt_cuda_embedding_bwd,
	gpt_cuda_residual_fwd,
	gpt_cuda_residual_bwd,
	gpt_cuda_dropout_fwd,
	gpt_cuda_dropout_bwd,
	gpt_cuda_adamw,
	gpt_cuda_sum_squares,
	gpt_cuda_check_finite,
	gpt_cuda_quant_absmax,
	gpt_cuda_fake_quant,
	gpt_cuda_quant_moving_avg,
	gpt_cuda_pact_fwd,
	gpt_cuda_pact_bwd,
	gpt_cuda_residual_layernorm_fwd,
	gpt_cuda_residual_layernorm_bwd,
	gpt_cuda_linear_gelu_fwd,
	gpt_cuda_linear_dgelu_bwd,
	gpt_cuda_xent_fused,
	gpt_cuda_gelu_bwd_bias,
	gpt_cuda_adamw_runs,
};

/* bytes as "N.NN GiB" or, below one, "N.N MiB" */
static const char *mem_text(char *out, size_t size, double bytes)
{
	if (bytes >= 1024.0 * 1024 * 1024)
		snprintf(out, size, "%.2f GiB", bytes / (1024.0 * 1024 * 1024));
	else
		snprintf(out, size, "%.1f MiB", bytes / (1024.0 * 1024));
	return out;
}

extern "C" int gpt_cuda_oom(gpt_err *err, size_t bytes, const char *what)
{
	size_t free_b = 0, total_b = 0;
	char a[32], f[32], t[32];
	if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) {
		cudaGetLastError();
		return gpt_err_set(err, GPT_EINTERNAL, GPT_CUDA_OOM ": %s asked for %s", mem_text(a, sizeof a, (double)bytes),
				   what ? what : "data");
	}
	return gpt_err_set(err, GPT_EINTERNAL,
			   GPT_CUDA_OOM ": %s asked for %s with %s of the device's %s free (nvidia-smi shows what holds the rest)",
			   mem_text(a, sizeof a, (double)bytes), what ? what : "data", mem_text(f, sizeof f, (double)free_b),
			   mem_text(t, sizeof t, (double)total_b));
}

extern "C" void gpt_backend_cuda_free(gpt_backend *be)
{
	gpt_cuda_ctx *c = gpt_cuda_ctx_of(be);
	if (!c)
		return;
	if (c->stream)
		cudaStreamSynchronize(c->stream);
	gpt_cuda_host_free(c->stage);
	if (c->stage_events) {
		cudaEventDestroy(c->stage_done[0]);
		cudaEventDestroy(c->stage_done[1]);
	}
	for (int i = 0; i < c->marks_made; i++)
		cudaEventDestroy(c->marks[i]);
	if (c->side_made) {
		cudaStreamSynchronize(c->side);
		cudaEventDestroy(c->side_done);
		cudaStreamDestroy(c->side);
	}
	pthread_mutex_destroy(&c->stage_mu);
	if (be->scratch)
		cudaFree(be->scratch);
	gpt_cuda_lt_plans_free(c);
	cudaFree(c->workspace);
	cudaFree(c->bad);
	cudaFree(c->dev_idx);
	free(c->host_idx);
	if (c->lt)
		cublasLtDestroy(c->lt);
	if (c->blas)
		cublasDestroy(c->blas);
	if (c->stream)
		cudaStreamDestroy(c->stream);
	free(c);
	memset(be, 0, sizeof *be);
}

extern "C" int gpt_backend_cuda_init(gpt_backend *be, gpt_dtype dtype, int device, gpt_err *err)
{
	memset(be, 0, sizeof *be);
	if (dtype != GPT_DTYPE_F32 && dtype != GPT_DTYPE_BF16 && dtype != GPT_DTYPE_F16)
		return gpt_err_set(err, GPT_EUSAGE,
				   "cuda backend: storage dtype %s is not a float type; use fp32, bf16 "
				   "or fp16", gpt_dtype_name(dtype));
	int n = gpt_cuda_device_count();
	if (n == 0)
		return gpt_err_set(err, GPT_EUSAGE,
				   "cuda backend: no CUDA device is visible (no driver or no GPU); "
				   "use the cpu device");
	if (device < 0 || device >= n)
		return gpt_err_set(err, GPT_EUSAGE,
				   "cuda backend: device %d does not exist (%d visible); check "
				   "CUDA_VISIBLE_DEVICES", device, n);
	int rows = GPT_CUDA_ATTN_AUTO, kind_rows[3] = {0, 0, 0};
	const char *ev = getenv("GPT_CUDA_ATTN_ROWS");
	if (ev && *ev) {
		/* one form, or three: the forward's, dq's and dkv's (named as
		 * gpt_cuda_attention_form names them, or auto) */
		static const int forms[] = {64, GPT_CUDA_ATTN_AHEAD, GPT_CUDA_ATTN_MASKED, 128, GPT_CUDA_ATTN_AUTO};
		int n = 0, bad = 0;
		for (const char *p = ev; !bad; p += strcspn(p, ",") + 1) {
			size_t len = strcspn(p, ",");
			int r = 0;
			for (size_t i = 0; i < sizeof forms / sizeof *forms && !r; i++) {
				const char *f = forms[i] == GPT_CUDA_ATTN_AUTO ? "auto" : gpt_cuda_attention_form(forms[i]);
				r = strlen(f) == len && !strncmp(p, f, len) ? forms[i] : 0;
			}
			bad = !r || n == 3;
			if (!bad)
				kind_rows[n++] = r;
			if (!p[len])
				break;
		}
		if (bad || n == 2)
			return gpt_err_set(err, GPT_EUSAGE,
					   "cuda backend: GPT_CUDA_ATTN_ROWS is '%s'; expected 64, 64a, 64m, 128 or auto "
					   "(the default: each shape's fastest, timed), or three of them separated by "
					   "commas: the forward's, dq's and dkv's", ev);
		if (n == 1)
			rows = kind_rows[0], kind_rows[0] = 0;
	}
	int bgrad = GPT_CUDA_BGRAD_SUMS;
	if ((ev = getenv("GPT_CUDA_BIAS_GRAD")) && *ev) {
		bgrad = !strcmp(ev, "sums") ? GPT_CUDA_BGRAD_SUMS : !strcmp(ev, "gemm") ? GPT_CUDA_BGRAD_GEMM : 0;
		if (!bgrad)
			return gpt_err_set(err, GPT_EUSAGE,
					   "cuda backend: GPT_CUDA_BIAS_GRAD is '%s'; expected sums (the default: "
					   "column sums) or gemm (cuBLASLt's BGRADB epilogue)", ev);
	}
	int tune = 1;
	if ((ev = getenv("GPT_CUDA_GEMM_TUNE")) && *ev) {
		int64_t v;
		if (gpt_parse_i64(ev, &v) || v < 1 || v > GPT_CUDA_GEMM_TUNE_MAX)
			return gpt_err_set(err, GPT_EUSAGE,
					   "cuda backend: GPT_CUDA_GEMM_TUNE is '%s'; expected 1 (the default: cuBLASLt's "
					   "first algorithm for each GEMM shape) to %d (the fastest of its first that many, "
					   "timed at the shape's first call)",
					   ev, (int)GPT_CUDA_GEMM_TUNE_MAX);
		tune = (int)v;
	}
	gpt_cuda_ctx *c = (gpt_cuda_ctx *)calloc(1, sizeof *c);
	if (!c)
		return gpt_err_set(err, GPT_EINTERNAL, "cuda backend: out of host memory");
	c->attn_rows = rows;
	memcpy(c->attn_kind_rows, kind_rows, sizeof kind_rows);
	c->bgrad = bgrad;
	c->gemm_tune = tune;
	pthread_mutex_init(&c->stage_mu, NULL);
	be->impl = c;
	be->name = "cuda";
	be->ops = &cuda_ops;
	be->dtype = dtype;
	be->threads = 1;
	c->device = device;
	int rc = gpt_cuda_set_device(device, err);
	if (!rc)
		rc = gpt_cuda_check(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking),
				    "creating a stream", err);
	if (!rc && cublasLtCreate(&c->lt) != CUBLAS_STATUS_SUCCESS)
		rc = gpt_err_set(err, GPT_EINTERNAL, "cuda backend: cublasLtCreate failed");
	if (!rc && cublasCreate(&c->blas) != CUBLAS_STATUS_SUCCESS)
		rc = gpt_err_set(err, GPT_EINTERNAL, "cuda backend: cublasCreate failed");
	if (!rc && (cublasSetStream(c->blas, c->stream) != CUBLAS_STATUS_SUCCESS ||
		    cublasSetMathMode(c->blas, CUBLAS_DEFAULT_MATH) != CUBLAS_STATUS_SUCCESS))
		rc = gpt_err_set(err, GPT_EINTERNAL, "cuda backend: configuring cuBLAS failed");
	if (!rc) {
		c->workspace_size = GPT_CUDA_BLAS_WORKSPACE; /* what its fastest Hopper kernels ask for */
		c->workspace = gpt_cuda_malloc(c->workspace_size, "the cuBLASLt workspace", err);
		rc = c->workspace ? 0 : GPT_EINTERNAL;
	}
	/* cuBLAS's fallback products (gemm.cu) use it too, one at a time on
	 * the stream: without one of its own, cuBLAS allocates one on first use,
	 * which a CUDA graph's recording would refuse */
	if (!rc && cublasSetWorkspace(c->blas, c->workspace, c->workspace_size) != CUBLAS_STATUS_SUCCESS)
		rc = gpt_err_set(err, GPT_EINTERNAL, "cuda backend: cublasSetWorkspace failed");
	if (!rc) {
		c->bad = (int *)gpt_cuda_malloc(4 * sizeof(int), "the error flag", err);
		/* on the stream: the default stream does not order a non-blocking one */
		rc = c->bad ? gpt_cuda_check(cudaMemsetAsync(c->bad, 0, 4 * sizeof(int), c->stream),
					     "zero", err)
			    : GPT_EINTERNAL;
	}
	if (!rc) {
		c->stage = (char *)gpt_cuda_host_alloc(2 * (size_t)GPT_CUDA_STAGED, "upload staging", err);
		rc = c->stage ? gpt_cuda_check(cudaEventCreateWithFlags(&c->stage_done[0],
									 cudaEventDisableTiming),
					       "creating an event", err)
			      : GPT_EINTERNAL;
	}
	if (!rc) {
		rc = gpt_cuda_check(cudaEventCreateWithFlags(&c->stage_done[1], cudaEventDisableTiming),
				    "creating an event", err);
		if (rc)
			cudaEventDestroy(c->stage_done[0]);
		c->stage_events = !rc;
	}
	if (rc)
		gpt_backend_cuda_free(be);
	return rc;
}
