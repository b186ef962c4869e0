/* lib/cuda: the CUDA backend (compiled when the build finds nvcc; see the
 * Makefile's CUDA=auto|0|1). So far: device discovery, device memory and the
 * dtype cast kernels, each checked against the CPU reference in tests/gpu.
 * Every function here is callable from C and returns a gpt_status; none of
 * them aborts when there is no GPU, they say so. */
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

int gpt_cuda_set_device(int device, gpt_err *err);
void *gpt_cuda_malloc(size_t bytes, const char *what, gpt_err *err);
void gpt_cuda_free(void *p);
/* kind: 0 host->device, 1 device->host, 2 device->device. */
int gpt_cuda_memcpy(void *dst, const void *src, size_t bytes, int kind, gpt_err *err);
int gpt_cuda_sync(gpt_err *err);

/* Device-side conversion between fp32, bf16 and fp16 (round to nearest even,
 * as gpt_convert on the CPU); dst and src are device pointers. */
int gpt_cuda_convert(void *dst, gpt_dtype dst_t, const void *src, gpt_dtype src_t, size_t n,
		     gpt_err *err);

#ifdef __cplusplus
}
#endif

#endif
