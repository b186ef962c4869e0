/* lib/cuda: the CUDA backend (compiled when the build finds nvcc; see the
 * Makefile's CUDA=auto|0|1): device discovery, device memory, dtype casts,
 * NCCL communicators (nccl.h), and gpt_backend_cuda_init, which fills a
 * gpt_backend (backend/ops.h) whose ops run on one device and one stream:
 * GEMMs through cuBLASLt (fp32, bf16, fp16 operands, fp32 accumulation, the
 * bias as an epilogue), and one .cu per op family, each checked against the
 * CPU backend by tests/gpu/test-cuda-ops.c. Ops return once their work is
 * queued; download and sync wait for it. Every function here is callable
 * from C and returns a gpt_status; none of them aborts when there is no GPU,
 * they say so. */
#ifndef GPT_CUDA_H
#define GPT_CUDA_H

#include "backend/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gpt_cuda_device_info {
	char name[256];
	int major, minor;         /* compute capability */
	int sm_count;
	size_t total_mem;         /* bytes */
} gpt_cuda_device_info;

/* Number of visible devices; 0 (not an error) when there is no driver or GPU. */
int gpt_cuda_device_count(void);
int gpt_cuda_device_info_get(int device, gpt_cuda_device_info *info, gpt_err *err);
/* "runtime 13.0, driver none, cuBLAS 13.0.0, NCCL 2.27.3, 0 devices". */
void gpt_cuda_describe(char *out, size_t size);

/* A text naming the physical device behind `device` (its UUID), the same
 * in every process whatever CUDA_VISIBLE_DEVICES renumbers: processes
 * compare them to find out whether they share a GPU. */
int gpt_cuda_device_id(int device, char out[48], gpt_err *err);

int gpt_cuda_set_device(int device, gpt_err *err);
/* Device memory; when the device has no room, err says so starting with
 * GPT_CUDA_OOM (which gpt-train looks for to add its memory plan), with the
 * bytes asked and what the device has free (gpt_cuda_oom). */
void *gpt_cuda_malloc(size_t bytes, const char *what, gpt_err *err);
#define GPT_CUDA_OOM "cuda: out of device memory"
/* Sets err (GPT_EINTERNAL) to GPT_CUDA_OOM, the bytes asked for `what` and
 * the current device's free and total memory (cudaMemGetInfo). */
int gpt_cuda_oom(gpt_err *err, size_t bytes, const char *what);
void gpt_cuda_free(void *p);
/* kind: 0 host->device, 1 device->host, 2 device->device; on the legacy
 * default stream, returning when the copy has landed (so work on any
 * stream, NCCL's included, sees it). */
int gpt_cuda_memcpy(void *dst, const void *src, size_t bytes, int kind, gpt_err *err);
int gpt_cuda_sync(gpt_err *err);

/* Page-locked host memory (cudaHostAlloc), which copies to and from the
 * device use directly: lib/comm stages device buffers in it for the shm
 * backend. gpt_cuda_host_free(NULL) does nothing. */
void *gpt_cuda_host_alloc(size_t bytes, const char *what, gpt_err *err);
void gpt_cuda_host_free(void *p);
/* 1 when p points into device memory (cudaMalloc), 0 for host memory,
 * pinned or not, and for any pointer CUDA does not know. */
int gpt_cuda_ptr_is_device(const void *p);

/* Copies that overlap the host's work with the device's (ZeRO-Offload's
 * step, lib/train/optim.c). gpt_cuda_copy_async queues a copy between
 * pinned host memory (gpt_cuda_host_alloc) and be's device memory and
 * returns at once: from the device (to_device 0) on be's stream, after the
 * work queued there; to the device (to_device 1) on a stream of its own,
 * so that the two directions run at once, unordered with be's stream until
 * gpt_cuda_copies_join makes be's stream wait for them. gpt_cuda_mark
 * records mark i (0 <= i < GPT_CUDA_MARKS) after the work queued so far on
 * be's stream, and gpt_cuda_mark_wait returns once the stream has passed
 * the mark's latest recording (at once for one never recorded). The host
 * leaves a copy's host memory alone until the copy is known done: a mark
 * after it passed, or be's stream synchronised after the join. */
enum { GPT_CUDA_MARKS = 8 };
int gpt_cuda_copy_async(gpt_backend *be, void *dst, const void *src, size_t bytes, int to_device, gpt_err *err);
int gpt_cuda_copies_join(gpt_backend *be, gpt_err *err);
int gpt_cuda_mark(gpt_backend *be, int i, gpt_err *err);
int gpt_cuda_mark_wait(gpt_backend *be, int i, gpt_err *err);

/* Device-side conversion between fp32, bf16 and fp16 (round to nearest even,
 * as gpt_convert on the CPU); dst and src are device pointers. */
int gpt_cuda_convert(void *dst, gpt_dtype dst_t, const void *src, gpt_dtype src_t, size_t n,
		     gpt_err *err);

/* Fills be with the CUDA backend on `device` (this thread's current device
 * from now on) with storage dtype fp32, bf16 or fp16: a stream, cuBLAS and
 * cuBLASLt handles and a workspace. GPT_EUSAGE when there is no such device
 * or the dtype is not a float type. Differences from the CPU backend, all
 * within the ops.h contract: attention keeps fp32 softmax statistics and, on
 * the tensor cores, the output's low half (attention_saved_size is
 * gpt_attention_flash_saved, no T x T matrix); a target outside
 * the vocabulary in xent_fwd/xent_bwd is reported (GPT_EDATA) by the next
 * download or sync, since the op returns before its kernel runs; GEMMs in
 * fp32 never use TF32. embedding_bwd orders the rows on the host: by the
 * tokens given in host memory, or else read back (the host waits for the
 * device). upload returns before the copy is done (src is copied into
 * pinned staging memory first) up to a few MiB. */
int gpt_backend_cuda_init(gpt_backend *be, gpt_dtype storage, int device, gpt_err *err);
/* 1 when attention with storage dtype dt and head size HS runs on the
 * tensor cores (bf16 or fp16, HS a multiple of 16 up to 128), 0 when on the
 * CUDA cores in fp32 (any other case): the same op and results within the
 * dtype's precision, at a different speed. */
int gpt_cuda_attention_tensor_cores(gpt_dtype dt, int64_t HS);
/* The query rows a block of the tensor-core attention forward and of its
 * dq kernel take, and the keys of its dkv kernel: 64 (16 a warp) or 128
 * (32 a warp, FlashAttention-2's layout, for head sizes up to 64; larger
 * heads keep 64); and for the forward a third form,
 * GPT_CUDA_ATTN_AHEAD ("64a"): 64 rows, each warp computing the next key
 * tile's scores during this tile's softmax (dq and dkv take 64 for it);
 * and with dropout a fourth, GPT_CUDA_ATTN_MASKED ("64m"): 64 rows after
 * a kernel of its own has drawn the dropout mask, which the forward then
 * reads, as the backward does (the others draw it inside the forward).
 * The results are the
 * same bits in every form, but for the sign of an exact zero (each row's
 * products and softmax steps come in the same order; a warp's rows before
 * a tile's keys add products of 0); only the speed differs, and which is
 * faster depends on the GPU and the shape. So by default
 * (GPT_CUDA_ATTN_AUTO) each kernel's first call at a shape runs it in each
 * of its forms, timed on the device (twice each, after a first run of
 * each; the host waits for them), and that shape keeps the fastest from
 * then on, another than 64 only when it is at least 3% faster than the
 * best before it; up to GPT_CUDA_ATTN_PICKS shapes are remembered, and
 * further ones take 64. rows 64, 128, GPT_CUDA_ATTN_AHEAD or
 * GPT_CUDA_ATTN_MASKED force those for every shape (64 for a kernel or a
 * shape without that form), GPT_CUDA_ATTN_AUTO goes back to timing (what
 * was timed is kept), 0 asks without changing; returns the setting
 * before, or -1 (nothing changed) for another value.
 * The environment's GPT_CUDA_ATTN_ROWS (64, 64a, 64m, 128 or auto; or three
 * of them, comma-separated, for the forward, dq and dkv) gives the setting
 * at init. */
enum { GPT_CUDA_ATTN_AUTO = 1, GPT_CUDA_ATTN_AHEAD = 65, GPT_CUDA_ATTN_MASKED = 66, GPT_CUDA_ATTN_PICKS = 64 };
int gpt_cuda_attention_rows(gpt_backend *be, int rows);
/* The forms the forward, dq and dkv kernels ran in at their last call
 * (rows[0..2]: 64, 128, GPT_CUDA_ATTN_AHEAD or GPT_CUDA_ATTN_MASKED; 0
 * before one), for benchmarks and tests; returns the number of shapes
 * timed so far. */
int gpt_cuda_attention_rows_used(gpt_backend *be, int rows[3]);
/* The setting for kernel kind (0 the forward, 1 dq, 2 dkv): a form or
 * GPT_CUDA_ATTN_AUTO; -1 for another kind. GPT_CUDA_ATTN_ROWS=F,Q,K sets
 * each kernel's at init (a form or auto each); gpt_cuda_attention_rows
 * setting one sets them all. */
int gpt_cuda_attention_kind_rows(gpt_backend *be, int kind);
/* A form's name as GPT_CUDA_ATTN_ROWS spells it: "64", "64a", "64m" or "128". */
const char *gpt_cuda_attention_form(int rows);
/* Where linear_bwd takes a bias gradient asked for beside the weight
 * gradient from: GPT_CUDA_BGRAD_SUMS (the default), the column sums of the
 * output's gradient (colsum.cuh: fp32 sums added to the gradient, one
 * rounding); or GPT_CUDA_BGRAD_GEMM, cuBLASLt's BGRADB epilogue in the
 * weight gradient's GEMM, which reads that gradient anyway, writing the
 * sums in the storage dtype, then added (two roundings in bf16 and fp16;
 * the column sums where cuBLASLt has no algorithm with the epilogue for the
 * shape). Either is deterministic; they differ in the sums' order. Returns
 * the setting before, or -1 (nothing changed) for another value; 0 asks.
 * The environment's GPT_CUDA_BIAS_GRAD (sums or gemm) gives the setting at
 * init. */
enum { GPT_CUDA_BGRAD_SUMS = 1, GPT_CUDA_BGRAD_GEMM = 2 };
int gpt_cuda_bias_grad(gpt_backend *be, int how);
/* How many bias gradients the BGRADB epilogue has given so far. */
int64_t gpt_cuda_bias_grad_gemms(gpt_backend *be);
/* Which of cuBLASLt's algorithms a GEMM shape runs: the first its
 * heuristic names (n 1, the default), or the fastest of its first n (up to
 * GPT_CUDA_GEMM_TUNE_MAX), timed on the device at the shape's first call
 * outside a CUDA graph's capture, into a scratch copy of the output (device
 * memory of its size for the while), and taken over the first only when
 * at least 3% faster: as PyTorch's cudnn.benchmark, faster but not the same
 * bits from run to run, as the timing may pick another. n 0 reads the
 * setting, which init takes from the environment's GPT_CUDA_GEMM_TUNE;
 * shapes met before a change keep what they took. gpt_cuda_gemm_tuned: the
 * shapes timed so far, and in *moved (unless NULL) those that took another
 * than the first. */
enum { GPT_CUDA_GEMM_TUNE_MAX = 16 };
int gpt_cuda_gemm_tune(gpt_backend *be, int n);
int64_t gpt_cuda_gemm_tuned(gpt_backend *be, int64_t *moved);
/* Releases everything init made, the scratch included; be can be
 * initialised again. */
void gpt_backend_cuda_free(gpt_backend *be);

/* Weight-only int8 linear layer for generation (qgemm.cu), queued on be's
 * stream: out (M, N) = (x (M, K) w^T) * step + bias, where w holds N x K
 * int8 codes (row-major) and step one fp32 factor per row of w (per output
 * column), both device memory; x, out and bias (N values, may be NULL) are
 * device memory in be's storage dtype. Sums in fp32, with the arithmetic
 * of lib/infer's CPU path for the same M (the sums in another order): for
 * M <= 8 each output is (sum of code * x) * step + bias, streaming the
 * codes once (a warp per 2 rows of w; 16-byte loads when K is a multiple
 * of 16 and x and w are 16-byte aligned, else a tiled kernel); for more
 * rows, a tiled kernel, the sum of x * (code * step), + bias. */
int gpt_cuda_linear_i8(gpt_backend *be, void *out, const void *x, const int8_t *w,
		       const float *step, const void *bias, int64_t M, int64_t K, int64_t N,
		       gpt_err *err);

/* CUDA graphs of the work a sequence of ops queues on be's stream (the
 * steps of lib/infer's generation): gpt_cuda_graph_begin starts recording
 * it instead of running it; gpt_cuda_graph_end stops and makes *graph of
 * it (an error, *graph NULL and nothing recorded kept when an op could not
 * be recorded, a sync or an allocation say: the CUDA runtime refuses
 * those during a capture; the work asked for while recording has not
 * run); gpt_cuda_graph_run queues the recorded work again, on whatever the
 * memory it names then holds, as one launch; gpt_cuda_graph_free frees
 * one (NULL: nothing). The ops recorded must be the same calls each time
 * (sizes, pointers and numbers): what changes between runs lives in
 * device memory. */
int gpt_cuda_graph_begin(gpt_backend *be, gpt_err *err);
int gpt_cuda_graph_end(gpt_backend *be, void **graph, gpt_err *err);
int gpt_cuda_graph_run(gpt_backend *be, void *graph, gpt_err *err);
void gpt_cuda_graph_free(void *graph);

#ifdef __cplusplus
}
#endif

#endif
