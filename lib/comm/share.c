/* Whether the GPU ranks of a job share devices, for GPT_COMM_BACKEND=auto
 * when a host has more ranks than visible GPUs: that happens both when
 * ranks share GPUs and when each rank sees only its own (gpt-launch
 * --devices, Slurm's per-task binding). Each rank publishes its host name
 * and its device's UUID in the store; every rank reads the whole table and
 * so reaches the same verdict: shm when any two ranks hold one device,
 * else nccl. */
#include "comm/comm-impl.h"

#if GPT_HAVE_CUDA
#include "cuda/cuda.h"
#endif

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int gpt_comm_resolve_auto(gpt_store *st, const char *prefix, const gpt_dist_env *env, int device,
			  const char **backend, gpt_err *err)
{
#if !GPT_HAVE_CUDA
	(void)st, (void)prefix, (void)env, (void)device, (void)backend;
	return gpt_err_set(err, GPT_EUSAGE, "communication backend auto: this build has no CUDA (rebuild with CUDA=1)");
#else
	char host[256] = "", id[48], mine[320], key[128];
	if (gethostname(host, sizeof host - 1))
		snprintf(host, sizeof host, "?");
	int rc = gpt_cuda_device_id(device, id, err);
	if (rc)
		return gpt_err_prefix(err, "rank %d: identifying GPU %d", env->rank, device);
	snprintf(mine, sizeof mine, "%s %s", host, id);
	snprintf(key, sizeof key, "%sgpu/%d", prefix, env->rank);
	if ((rc = gpt_store_set(st, key, mine, strlen(mine), err)))
		return rc;
	char **all = gpt_calloc((size_t)env->world_size, sizeof *all, "device table", err);
	if (!all)
		return err->code;
	for (int r = 0; r < env->world_size && !rc; r++) {
		snprintf(key, sizeof key, "%sgpu/%d", prefix, r);
		void *v = NULL;
		rc = gpt_store_get(st, key, &v, NULL, err);
		all[r] = v;
		if (rc)
			gpt_err_prefix(err, "rank %d: waiting for the GPU of rank %d", env->rank, r);
	}
	int share = 0;
	for (int a = 0; !rc && a < env->world_size && !share; a++)
		for (int b = a + 1; b < env->world_size && !share; b++)
			share = strcmp(all[a], all[b]) == 0;
	for (int r = 0; r < env->world_size; r++)
		free(all[r]);
	free(all);
	if (rc)
		return rc;
	int local = env->local_world_size > 0 ? env->local_world_size : 1;
	if (share && env->world_size > local)
		return gpt_err_set(err, GPT_EUSAGE,
				   "ranks sharing GPUs: shm reaches the ranks of one host only, and this job has %d ranks, %d on this host; give every rank a GPU of its own for nccl",
				   env->world_size, local);
	*backend = share ? "shm" : "nccl";
	return 0;
#endif
}
