/* Device discovery, device memory, and the library versions this build links. */
#include "cuda/common.cuh"

#include <cublasLt.h>
#include <cublas_v2.h>
#include <nccl.h>
#include <stdio.h>
#include <string.h>

extern "C" int gpt_cuda_device_count(void)
{
	int n = 0;
	if (cudaGetDeviceCount(&n) != cudaSuccess) {
		cudaGetLastError(); /* clear the sticky "no device" error */
		return 0;
	}
	return n;
}

extern "C" int gpt_cuda_device_info_get(int device, gpt_cuda_device_info *info, gpt_err *err)
{
	cudaDeviceProp p;
	int rc = gpt_cuda_check(cudaGetDeviceProperties(&p, device), "device properties", err);
	if (rc)
		return rc;
	memset(info, 0, sizeof *info);
	snprintf(info->name, sizeof info->name, "%s", p.name);
	info->major = p.major;
	info->minor = p.minor;
	info->sm_count = p.multiProcessorCount;
	info->total_mem = p.totalGlobalMem;
	return 0;
}

extern "C" void gpt_cuda_describe(char *out, size_t size)
{
	int rt = 0, drv = 0, nccl = 0;
	cudaRuntimeGetVersion(&rt);
	if (cudaDriverGetVersion(&drv) != cudaSuccess)
		drv = 0;
	ncclGetVersion(&nccl);
	size_t lt = cublasLtGetVersion();
	int cb[3] = {0, 0, 0};
	cublasGetProperty(MAJOR_VERSION, &cb[0]);
	cublasGetProperty(MINOR_VERSION, &cb[1]);
	cublasGetProperty(PATCH_LEVEL, &cb[2]);
	int n = gpt_cuda_device_count();
	char drv_s[32] = "none";
	if (drv)
		snprintf(drv_s, sizeof drv_s, "%d.%d", drv / 1000, (drv % 1000) / 10);
	int len = snprintf(out, size,
			   "runtime %d.%d, driver %s, cuBLAS %d.%d.%d, cuBLASLt %zu.%zu.%zu, NCCL %d.%d.%d, "
			   "%d device%s",
			   rt / 1000, (rt % 1000) / 10, drv_s, cb[0], cb[1], cb[2], lt / 10000,
			   (lt / 100) % 100, lt % 100,
			   nccl / 10000, (nccl / 100) % 100, nccl % 100, n, n == 1 ? "" : "s");
	for (int i = 0; i < n && len > 0 && (size_t)len < size; i++) {
		gpt_cuda_device_info info;
		if (gpt_cuda_device_info_get(i, &info, NULL) == 0)
			len += snprintf(out + len, size - (size_t)len, "%s%s (sm_%d%d, %.0f GiB)",
					i ? ", " : ": ", info.name, info.major, info.minor,
					(double)info.total_mem / (1 << 30));
	}
}

extern "C" int gpt_cuda_device_id(int device, char out[48], gpt_err *err)
{
	cudaDeviceProp p;
	int rc = gpt_cuda_check(cudaGetDeviceProperties(&p, device), "device properties", err);
	if (rc)
		return rc;
	int len = snprintf(out, 48, "GPU-");
	for (int i = 0; i < 16; i++)
		len += snprintf(out + len, 48 - (size_t)len, "%02x", (unsigned char)p.uuid.bytes[i]);
	return 0;
}

extern "C" int gpt_cuda_set_device(int device, gpt_err *err)
{
	return gpt_cuda_check(cudaSetDevice(device), "set device", err);
}

extern "C" void *gpt_cuda_malloc(size_t bytes, const char *what, gpt_err *err)
{
	void *p = NULL;
	cudaError_t e = cudaMalloc(&p, bytes ? bytes : 1);
	if (e == cudaErrorMemoryAllocation) {
		cudaGetLastError(); /* not sticky: clear it */
		gpt_cuda_oom(err, bytes, what);
		return NULL;
	}
	if (e != cudaSuccess) {
		gpt_err_set(err, GPT_EINTERNAL, "cuda: allocating %zu bytes for %s: %s", bytes,
			    what ? what : "data", cudaGetErrorString(e));
		return NULL;
	}
	return p;
}

extern "C" void gpt_cuda_free(void *p)
{
	if (p)
		cudaFree(p);
}

extern "C" int gpt_cuda_memcpy(void *dst, const void *src, size_t bytes, int kind, gpt_err *err)
{
	static const cudaMemcpyKind kinds[] = {cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost,
					       cudaMemcpyDeviceToDevice};
	if (kind < 0 || kind > 2)
		return gpt_err_set(err, GPT_EINTERNAL, "cuda: bad memcpy kind %d", kind);
	int rc = gpt_cuda_check(cudaMemcpy(dst, src, bytes, kinds[kind]), "memcpy", err);
	/* cudaMemcpy may return before a copy from pageable memory or between
	 * device buffers has landed; work on other streams (NCCL's) does not
	 * wait for the legacy stream it ran on */
	return rc || kind == 1 ? rc : gpt_cuda_check(cudaStreamSynchronize(0), "memcpy", err);
}

extern "C" int gpt_cuda_sync(gpt_err *err)
{
	return gpt_cuda_check(cudaDeviceSynchronize(), "synchronize", err);
}

extern "C" void *gpt_cuda_host_alloc(size_t bytes, const char *what, gpt_err *err)
{
	void *p = NULL;
	cudaError_t e = cudaHostAlloc(&p, bytes ? bytes : 1, cudaHostAllocDefault);
	if (e != cudaSuccess) {
		gpt_err_set(err, GPT_EINTERNAL, "cuda: allocating %zu bytes of pinned host memory for %s: %s",
			    bytes, what ? what : "data", cudaGetErrorString(e));
		return NULL;
	}
	return p;
}

extern "C" void gpt_cuda_host_free(void *p)
{
	if (p)
		cudaFreeHost(p);
}

extern "C" int gpt_cuda_ptr_is_device(const void *p)
{
	cudaPointerAttributes a;
	if (!p || cudaPointerGetAttributes(&a, p) != cudaSuccess) {
		cudaGetLastError(); /* older runtimes fail on plain host pointers */
		return 0;
	}
	return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged;
}
