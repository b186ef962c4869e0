/* CUDA graphs of the work on a backend's stream (cuda.h): a generation
 * step's hundred launches recorded once and queued again as one, so that
 * the host's cost of a step is one launch, not a hundred (lib/infer's
 * decode.c). */
#include "cuda/ops.cuh"

extern "C" int gpt_cuda_graph_begin(gpt_backend *be, gpt_err *err)
{
	/* thread-local: a refused call (a sync, an allocation) of this thread
	 * fails the capture; other threads are left alone */
	return gpt_cuda_check(cudaStreamBeginCapture(gpt_cuda_stream(be), cudaStreamCaptureModeThreadLocal),
			      "beginning a graph capture", err);
}

extern "C" int gpt_cuda_graph_end(gpt_backend *be, void **graph, gpt_err *err)
{
	cudaGraph_t g = NULL;
	cudaGraphExec_t x = NULL;
	*graph = NULL;
	cudaError_t e = cudaStreamEndCapture(gpt_cuda_stream(be), &g);
	if (e == cudaSuccess) {
		e = cudaGraphInstantiate(&x, g, 0);
		cudaGraphDestroy(g);
	}
	/* a failed capture's error is the thread's last one too: the next
	 * launch's check (gpt_cuda_launched) would report it as its own */
	if (e != cudaSuccess)
		(void)cudaGetLastError();
	else
		*graph = (void *)x;
	return gpt_cuda_check(e, "recording a CUDA graph", err);
}

extern "C" int gpt_cuda_graph_run(gpt_backend *be, void *graph, gpt_err *err)
{
	return gpt_cuda_check(cudaGraphLaunch((cudaGraphExec_t)graph, gpt_cuda_stream(be)), "running a CUDA graph",
			      err);
}

extern "C" void gpt_cuda_graph_free(void *graph)
{
	if (graph)
		cudaGraphExecDestroy((cudaGraphExec_t)graph);
}
