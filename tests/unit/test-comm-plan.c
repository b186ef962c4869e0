/* lib/comm: gpt_comm_gpu_plan, the choice of communication backend and CUDA
 * device of one rank (nccl with a GPU per rank, shm where ranks share one),
 * and GPT_COMM_BACKEND's overrides and refusals. Pure: no GPU needed. Also
 * that a comm without CUDA memory attached, or with attachment in a build
 * without CUDA, leaves host collectives as they were (gpt_comm_set_memory). */
#include "comm/comm.h"
#include "tap.h"

#include <string.h>

static gpt_dist_env env_of(int rank, int world, int local_rank, int local_world)
{
	gpt_dist_env e;
	memset(&e, 0, sizeof e);
	e.source = GPT_DIST_GPT_LAUNCH;
	e.rank = rank;
	e.world_size = world;
	e.local_rank = local_rank;
	e.local_world_size = local_world;
	e.device = -1;
	return e;
}

/* Returns the status; *be and *dev get the plan, err.msg the message. */
static int plan(const char *req, gpt_dist_env e, int gpu, int ndev, const char **be, int *dev, gpt_err *err)
{
	memset(err, 0, sizeof *err);
	*be = "?";
	*dev = -2;
	return gpt_comm_gpu_plan(req, &e, gpu, ndev, be, dev, err);
}

int main(void)
{
	const char *be;
	int dev;
	gpt_err err;

	/* the CPU: shm, no device, whatever the count */
	is_int(plan(NULL, env_of(1, 4, 1, 4), 0, 0, &be, &dev, &err), 0, "cpu job: no error");
	ok(strcmp(be, "shm") == 0 && dev == -1, "cpu job: shm and no device (%s, %d)", be, dev);
	is_int(plan("shm", env_of(1, 4, 1, 4), 0, 8, &be, &dev, &err), 0, "cpu job, shm asked: fine");
	is_int(plan("nccl", env_of(1, 4, 1, 4), 0, 8, &be, &dev, &err), GPT_EUSAGE, "cpu job, nccl asked: refused");
	ok(strstr(err.msg, "GPT_COMM_BACKEND: nccl") && strstr(err.msg, "Global.device"), "names the variable and the key: %s", err.msg);

	/* a GPU each: nccl, device = local rank */
	is_int(plan(NULL, env_of(5, 8, 5, 8), 1, 8, &be, &dev, &err), 0, "8 ranks, 8 GPUs");
	ok(strcmp(be, "nccl") == 0 && dev == 5, "8 ranks, 8 GPUs: nccl on device 5 (%s, %d)", be, dev);
	is_int(plan("auto", env_of(9, 16, 1, 8), 1, 8, &be, &dev, &err), 0, "two hosts of 8 ranks and 8 GPUs");
	ok(strcmp(be, "nccl") == 0 && dev == 1, "two hosts: nccl on device local_rank (%s, %d)", be, dev);

	/* ranks sharing GPUs: shm, device = local rank mod count */
	is_int(plan(NULL, env_of(3, 4, 3, 4), 1, 1, &be, &dev, &err), 0, "4 ranks, 1 GPU");
	ok(strcmp(be, "auto") == 0 && dev == 0, "4 ranks, 1 GPU: decided at open by the devices, device 0 (%s, %d)", be, dev);
	is_int(plan("", env_of(3, 4, 3, 4), 1, 2, &be, &dev, &err), 0, "4 ranks, 2 GPUs");
	ok(strcmp(be, "auto") == 0 && dev == 1, "4 ranks, 2 GPUs: decided at open, rank 3 on device 1 (%s, %d)", be, dev);

	/* overrides */
	is_int(plan("shm", env_of(1, 2, 1, 2), 1, 2, &be, &dev, &err), 0, "shm asked with a GPU each");
	ok(strcmp(be, "shm") == 0 && dev == 1, "shm asked: shm, device 1 (%s, %d)", be, dev);
	is_int(plan("nccl", env_of(1, 2, 1, 2), 1, 1, &be, &dev, &err), 0, "nccl asked, one device visible (each rank its own)");
	ok(strcmp(be, "nccl") == 0 && dev == 0, "nccl asked: nccl on device 0 (%s, %d)", be, dev);
	is_int(plan("shm", env_of(9, 16, 1, 8), 1, 8, &be, &dev, &err), GPT_EUSAGE, "shm asked for two hosts: refused");
	ok(strstr(err.msg, "one host") != NULL, "says shm is one host only: %s", err.msg);
	is_int(plan(NULL, env_of(9, 16, 1, 8), 1, 4, &be, &dev, &err), 0, "two hosts, fewer GPUs than ranks");
	ok(strcmp(be, "auto") == 0 && dev == 1, "decided at open (shm across hosts is refused there) (%s, %d)", be, dev);
	is_int(plan("gloo", env_of(0, 2, 0, 2), 1, 2, &be, &dev, &err), GPT_EUSAGE, "an unknown backend");
	is_str(err.msg, "GPT_COMM_BACKEND: 'gloo': expected auto, nccl or shm", "names it and the choices");
	is_int(plan(NULL, env_of(0, 2, 0, 2), 1, 0, &be, &dev, &err), GPT_EUSAGE, "a GPU job with no device");
	ok(strstr(err.msg, "no CUDA device") != NULL, "says so: %s", err.msg);

	/* the launcher's device (paddle.distributed.launch --gpus 2,3) */
	gpt_dist_env pe = env_of(1, 2, 1, 2);
	pe.device = 3;
	pe.device_var = "FLAGS_selected_gpus";
	is_int(plan(NULL, pe, 1, 8, &be, &dev, &err), 0, "a device chosen by the launcher");
	ok(strcmp(be, "nccl") == 0 && dev == 3, "is the one used, not the local rank (%s, %d)", be, dev);
	is_int(plan(NULL, pe, 1, 2, &be, &dev, &err), GPT_EUSAGE, "a launcher's device that is not visible");
	ok(strstr(err.msg, "FLAGS_selected_gpus: device 3 is not visible to rank 1, which sees 2 CUDA devices") != NULL,
	   "names the variable: %s", err.msg);
	is_int(plan(NULL, pe, 0, 0, &be, &dev, &err), 0, "a CPU job under a launcher that chose a device");
	ok(dev == -1, "has no device (%d)", dev);

	/* attaching no device memory leaves host collectives alone (one rank) */
	gpt_store_server *srv = NULL;
	gpt_store *st = NULL;
	gpt_comm *c = NULL;
	gpt_comm_options o = {.backend = "shm", .timeout_s = 30};
	int rc = gpt_store_server_start("127.0.0.1", 0, &srv, &err);
	rc = rc ? rc : gpt_store_connect("127.0.0.1", gpt_store_server_port(srv), 10, 30, &st, &err);
	rc = rc ? rc : gpt_comm_open_store(&c, st, 0, 1, &o, &err);
	float v[3] = {1, 2, 3}, w[3] = {0};
	memset(&err, 0, sizeof err);
	if (!rc) {
		gpt_comm_set_memory(c, NULL);
		rc = gpt_comm_all_reduce(gpt_comm_world(c), v, w, 3, GPT_DTYPE_F32, GPT_REDUCE_SUM, &err);
	}
	ok(rc == 0 && w[0] == 1 && w[1] == 2 && w[2] == 3, "one rank, nothing attached: all-reduce of host values (%s)", err.msg);
	gpt_comm_close(c);
	gpt_store_close(st);
	gpt_store_server_stop(srv);
	return done_testing();
}
