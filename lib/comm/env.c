/* Who am I: rank, world and master from the launcher's environment. */
#include "comm/comm.h"

#include <stdlib.h>
#include <string.h>

extern char **environ;

static const char *env_get(char *const *envp, const char *name)
{
	size_t n = strlen(name);
	for (char *const *e = envp; e && *e; e++)
		if (strncmp(*e, name, n) == 0 && (*e)[n] == '=')
			return *e + n + 1;
	return NULL;
}

/* Reads an integer variable in [lo, hi]; absent leaves *out and returns 0. */
static int env_int(char *const *envp, const char *name, int lo, int hi, int *out, gpt_err *err)
{
	const char *v = env_get(envp, name);
	if (!v)
		return 0;
	int64_t x;
	if (gpt_parse_i64(v, &x) || x < lo || x > hi)
		return gpt_err_set(err, GPT_EUSAGE, "environment variable %s='%s': expected an integer in [%d, %d]",
				   name, v, lo, hi);
	*out = (int)x;
	return 0;
}

int gpt_parse_host_port(const char *s, const char *what, char *host, size_t host_size, int *port,
			gpt_err *err)
{
	const char *colon = strrchr(s, ':');
	const char *h = s;
	size_t hl = colon ? (size_t)(colon - s) : 0;
	int bracketed = colon && s[0] == '[' && hl >= 2 && s[hl - 1] == ']';
	if (bracketed)
		h = s + 1, hl -= 2;
	int64_t p;
	if (!colon || hl == 0 || hl >= host_size || gpt_parse_i64(colon + 1, &p) || p < 1 || p > 65535)
		return gpt_err_set(err, GPT_EUSAGE, "%s '%s': expected HOST:PORT with a port in [1, 65535]",
				   what, s);
	/* an IPv6 address without its brackets ("::1:80", "[::1") would
	 * otherwise split at its last colon into another host and port */
	for (size_t i = 0; i < hl; i++)
		if ((h[i] == ':' && !bracketed) || h[i] == '[' || h[i] == ']')
			return gpt_err_set(err, GPT_EUSAGE,
					   "%s '%s': expected HOST:PORT, an IPv6 address in brackets ([::1]:6170)",
					   what, s);
	memcpy(host, h, hl);
	host[hl] = '\0';
	*port = (int)p;
	return 0;
}

const char *gpt_dist_source_name(gpt_dist_source s)
{
	switch (s) {
	case GPT_DIST_GPT_LAUNCH: return "gpt-launch";
	case GPT_DIST_TORCHRUN: return "torchrun";
	case GPT_DIST_SLURM: return "slurm";
	case GPT_DIST_OPENMPI: return "openmpi";
	case GPT_DIST_PADDLE: return "paddle";
	default: return "single";
	}
}

/* MASTER_ADDR/MASTER_PORT when set, else fallback_host and the default port. */
static int master_from_env(gpt_dist_env *d, char *const *envp, const char *fallback_host,
			   const char *why, gpt_err *err)
{
	const char *addr = env_get(envp, "MASTER_ADDR");
	d->master_port = GPT_DIST_DEFAULT_PORT;
	int rc = env_int(envp, "MASTER_PORT", 1, 65535, &d->master_port, err);
	if (rc)
		return rc;
	if (!addr || !*addr)
		addr = fallback_host;
	if (!addr)
		return gpt_err_set(err, GPT_EUSAGE,
				   "%s: no master address: set MASTER_ADDR (and MASTER_PORT) to the host of rank 0",
				   why);
	snprintf(d->master_host, sizeof d->master_host, "%s", addr);
	return 0;
}

/* The launchers whose variables we read, in the order they win: a rank
 * variable and the world size that goes with it. */
typedef struct dist_family {
	gpt_dist_source source;
	const char *rank, *size;
	const char *launcher; /* what sets both */
} dist_family;

static const dist_family families[] = {
	{GPT_DIST_GPT_LAUNCH, "GPT_RANK", "GPT_WORLD_SIZE", "gpt-launch"},
	{GPT_DIST_TORCHRUN, "RANK", "WORLD_SIZE", "torchrun"},
	{GPT_DIST_PADDLE, "PADDLE_TRAINER_ID", "PADDLE_TRAINERS_NUM", "python -m paddle.distributed.launch"},
	{GPT_DIST_SLURM, "SLURM_PROCID", "SLURM_NTASKS", "srun"},
	{GPT_DIST_OPENMPI, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "mpirun"},
};

static int half_set(const dist_family *f, const char *rank, gpt_err *err)
{
	return gpt_err_set(err, GPT_EUSAGE,
			   "environment variable %s='%s' is set but %s is not, so the number of ranks is unknown; set %s to it (%s sets both), or unset %s to run as a single process",
			   f->rank, rank, f->size, f->size, f->launcher, f->rank);
}

/* Picks the launcher (GPT_RANK alone picks gpt-launch: only gpt-launch sets
 * it; the others need both variables), reads its rank and world size and
 * checks them. A rank variable without its world size where no launcher's
 * pair is complete is an error, not a single process that believes it is
 * alone, save SLURM_PROCID=0 alone: Slurm sets that in a batch script,
 * which runs once. */
static int read_ranks(gpt_dist_env *d, char *const *envp, gpt_err *err)
{
	const int BIG = 1 << 24;
	const dist_family *f = NULL, *half = NULL;
	for (size_t i = 0; i < sizeof families / sizeof *families && !f; i++) {
		const dist_family *c = &families[i];
		int has_size = env_get(envp, c->size) != NULL;
		if (env_get(envp, c->rank) && (has_size || c->source == GPT_DIST_GPT_LAUNCH))
			f = c;
		else if (env_get(envp, c->rank) && !half)
			half = c;
	}
	d->source = f ? f->source : GPT_DIST_SINGLE;
	if (!f && half) {
		int r = 0;
		int rc = env_int(envp, half->rank, 0, BIG, &r, err);
		if (rc || half->source != GPT_DIST_SLURM || r != 0)
			return rc ? rc : half_set(half, env_get(envp, half->rank), err);
	}
	if (!f)
		return 0;
	d->world_size = -1;
	int rc = env_int(envp, f->rank, 0, BIG, &d->rank, err);
	if (!rc)
		rc = env_int(envp, f->size, 1, BIG, &d->world_size, err);
	if (rc)
		return rc;
	if (d->world_size < 0)
		return half_set(f, env_get(envp, f->rank), err);
	if (d->rank >= d->world_size)
		return gpt_err_set(err, GPT_EUSAGE,
				   "environment variable %s=%d is outside the world of %d ranks (%s=%d); expected 0 to %d",
				   f->rank, d->rank, d->world_size, f->size, d->world_size, d->world_size - 1);
	return 0;
}

static int check_local(const gpt_dist_env *d, gpt_err *err)
{
	if (d->local_rank < 0 || d->local_rank >= d->local_world_size)
		return gpt_err_set(err, GPT_EUSAGE,
				   "local rank %d is outside the %d local ranks; check the launcher's variables",
				   d->local_rank, d->local_world_size);
	return 0;
}

/* Copies entry i of the comma-separated list into buf; returns the number of
 * entries. */
static int list_entry(const char *list, int i, char *buf, size_t size)
{
	buf[0] = '\0';
	for (int n = 0;; n++) {
		size_t len = strcspn(list, ",");
		if (n == i)
			snprintf(buf, size, "%.*s", (int)len, list);
		if (!list[len])
			return n + 1;
		list += len + 1;
	}
}

/* PADDLE_TRAINER_ENDPOINTS: one HOST:PORT per trainer, in rank order. Checks
 * every entry and the count, takes entry 0 as the master (where Paddle's own
 * trainers put their store) and counts this host's trainers, this host being
 * PADDLE_CURRENT_ENDPOINT's (else this rank's entry's). */
static int paddle_endpoints(gpt_dist_env *d, const char *list, const char *cur, gpt_err *err)
{
	const char *var = "environment variable PADDLE_TRAINER_ENDPOINTS";
	char mine[512], e[512], what[96], my_host[256], host[256];
	int port, rc, n = list_entry(list, d->rank, mine, sizeof mine);
	if (n != d->world_size)
		return gpt_err_set(err, GPT_EUSAGE,
				   "%s has %d entries but PADDLE_TRAINERS_NUM=%d; expected one HOST:PORT per trainer, in rank order",
				   var, n, d->world_size);
	if (cur && strcmp(cur, mine) != 0)
		return gpt_err_set(err, GPT_EUSAGE,
				   "environment variable PADDLE_CURRENT_ENDPOINT='%s' is not entry %d of PADDLE_TRAINER_ENDPOINTS ('%s'), the entry of PADDLE_TRAINER_ID=%d; expected the endpoints in rank order",
				   cur, d->rank, mine, d->rank);
	snprintf(what, sizeof what, "%s entry %d", var, d->rank);
	if ((rc = gpt_parse_host_port(mine, what, my_host, sizeof my_host, &port, err)))
		return rc;
	d->local_rank = d->local_world_size = 0;
	for (int i = 0; i < n; i++) {
		list_entry(list, i, e, sizeof e);
		snprintf(what, sizeof what, "%s entry %d", var, i);
		if ((rc = gpt_parse_host_port(e, what, host, sizeof host, &port, err)))
			return rc;
		if (i == 0) {
			snprintf(d->master_host, sizeof d->master_host, "%s", host);
			d->master_port = port;
		}
		if (strcmp(host, my_host) == 0) {
			d->local_world_size++;
			d->local_rank += i < d->rank;
		}
	}
	return 0;
}

/* paddle.distributed.launch (and fleetrun): the master as Paddle's
 * init_parallel_env finds it, MASTER_ADDR and MASTER_PORT when both are set,
 * else PADDLE_MASTER, else the first trainer endpoint; the local rank and
 * size from PADDLE_LOCAL_RANK (PADDLE_RANK_IN_NODE in older launchers) and
 * PADDLE_LOCAL_SIZE, else from the endpoints. */
static int paddle_env(gpt_dist_env *d, char *const *envp, gpt_err *err)
{
	const int BIG = 1 << 24;
	const char *list = env_get(envp, "PADDLE_TRAINER_ENDPOINTS");
	const char *pm = env_get(envp, "PADDLE_MASTER");
	const char *ma = env_get(envp, "MASTER_ADDR"), *mp = env_get(envp, "MASTER_PORT");
	int rc;
	d->local_rank = d->rank;
	d->local_world_size = d->world_size;
	if (list && (rc = paddle_endpoints(d, list, env_get(envp, "PADDLE_CURRENT_ENDPOINT"), err)))
		return rc;
	if (ma && *ma && mp && *mp)
		rc = master_from_env(d, envp, NULL, "paddle environment", err);
	else if (pm && *pm)
		rc = gpt_parse_host_port(pm, "environment variable PADDLE_MASTER", d->master_host,
					 sizeof d->master_host, &d->master_port, err);
	else if (!list)
		rc = gpt_err_set(err, GPT_EUSAGE,
				 "paddle environment: no master address: set PADDLE_TRAINER_ENDPOINTS to the HOST:PORT of every trainer in rank order (python -m paddle.distributed.launch sets it), or MASTER_ADDR and MASTER_PORT");
	if (rc || (rc = env_int(envp, "PADDLE_RANK_IN_NODE", 0, BIG, &d->local_rank, err)) ||
	    (rc = env_int(envp, "PADDLE_LOCAL_RANK", 0, BIG, &d->local_rank, err)) ||
	    (rc = env_int(envp, "PADDLE_LOCAL_SIZE", 1, BIG, &d->local_world_size, err)) ||
	    (rc = check_local(d, err)))
		return rc;
	/* Paddle puts as many trainers on every node, in node order. */
	d->node_rank = d->rank >= d->local_rank ? (d->rank - d->local_rank) / d->local_world_size : 0;
	d->serve_store = 1;
	/* The launcher's device index for this trainer ("2" for --gpus 2,3);
	 * the whole list when it starts one trainer per node: use its first. */
	const char *gpus = env_get(envp, "FLAGS_selected_gpus");
	if (gpus && *gpus) {
		char first[32];
		int64_t dev;
		list_entry(gpus, 0, first, sizeof first);
		if (gpt_parse_i64(first, &dev) || dev < 0 || dev > BIG)
			return gpt_err_set(err, GPT_EUSAGE,
					   "environment variable FLAGS_selected_gpus='%s': expected CUDA device numbers separated by commas",
					   gpus);
		d->device = (int)dev;
		d->device_var = "FLAGS_selected_gpus";
	}
	return 0;
}

int gpt_dist_env_parse_ranks(gpt_dist_env *d, char *const *envp, gpt_err *err)
{
	memset(d, 0, sizeof *d);
	d->world_size = d->local_world_size = 1;
	d->device = -1;
	snprintf(d->master_host, sizeof d->master_host, "127.0.0.1");
	return read_ranks(d, envp, err);
}

int gpt_dist_env_parse(gpt_dist_env *d, char *const *envp, gpt_err *err)
{
	const int BIG = 1 << 24;
	int rc = gpt_dist_env_parse_ranks(d, envp, err);
	if (rc)
		return rc;
	if (d->source == GPT_DIST_GPT_LAUNCH) {
		d->local_rank = d->rank;
		d->local_world_size = d->world_size;
		if ((rc = env_int(envp, "GPT_LOCAL_RANK", 0, BIG, &d->local_rank, err)) ||
		    (rc = env_int(envp, "GPT_LOCAL_WORLD_SIZE", 1, BIG, &d->local_world_size, err)) ||
		    (rc = env_int(envp, "GPT_NODE_RANK", 0, BIG, &d->node_rank, err)) ||
		    (rc = env_int(envp, "GPT_RESTART_COUNT", 0, BIG, &d->restart_count, err)))
			return rc;
		const char *m = env_get(envp, "GPT_MASTER");
		if (!m)
			return gpt_err_set(err, GPT_EUSAGE, "GPT_RANK is set but GPT_MASTER (HOST:PORT) is not");
		if ((rc = gpt_parse_host_port(m, "environment variable GPT_MASTER", d->master_host,
					      sizeof d->master_host, &d->master_port, err)))
			return rc;
		return check_local(d, err);
	}
	if (d->source == GPT_DIST_TORCHRUN) {
		d->local_rank = d->rank;
		d->local_world_size = d->world_size;
		if ((rc = env_int(envp, "LOCAL_RANK", 0, BIG, &d->local_rank, err)) ||
		    (rc = env_int(envp, "LOCAL_WORLD_SIZE", 1, BIG, &d->local_world_size, err)) ||
		    (rc = env_int(envp, "GROUP_RANK", 0, BIG, &d->node_rank, err)) ||
		    (rc = env_int(envp, "TORCHELASTIC_RESTART_COUNT", 0, BIG, &d->restart_count, err)) ||
		    (rc = master_from_env(d, envp, d->world_size == d->local_world_size ? "127.0.0.1" : NULL,
					  "torchrun environment", err)))
			return rc;
		/* torchrun's agent keeps its own store on MASTER_PORT. */
		if (env_get(envp, "TORCHELASTIC_RUN_ID"))
			d->master_port = d->master_port == 65535 ? 65534 : d->master_port + 1;
		d->serve_store = 1;
		return check_local(d, err);
	}
	if (d->source == GPT_DIST_PADDLE)
		return paddle_env(d, envp, err);
	if (d->source == GPT_DIST_SLURM) {
		if ((rc = env_int(envp, "SLURM_LOCALID", 0, BIG, &d->local_rank, err)) ||
		    (rc = env_int(envp, "SLURM_NODEID", 0, BIG, &d->node_rank, err)))
			return rc;
		d->local_world_size = d->world_size;
		/* SLURM_TASKS_PER_NODE is "4(x2)" or "4,3": its first number is
		 * this layout's tasks per node when they are even. */
		const char *tpn = env_get(envp, "SLURM_NTASKS_PER_NODE");
		if (tpn && (rc = env_int(envp, "SLURM_NTASKS_PER_NODE", 1, BIG, &d->local_world_size, err)))
			return rc;
		if (!tpn && (tpn = env_get(envp, "SLURM_TASKS_PER_NODE")))
			d->local_world_size = atoi(tpn) > 0 ? atoi(tpn) : d->world_size;
		int nnodes = 1;
		if ((rc = env_int(envp, "SLURM_NNODES", 1, BIG, &nnodes, err)) ||
		    (rc = master_from_env(d, envp,
					  env_get(envp, "SLURM_LAUNCH_NODE_IPADDR") ? env_get(envp, "SLURM_LAUNCH_NODE_IPADDR")
					  : nnodes == 1 ? "127.0.0.1" : NULL,
					  "slurm environment", err)))
			return rc;
		d->serve_store = 1;
		return check_local(d, err);
	}
	if (d->source == GPT_DIST_OPENMPI) {
		d->local_world_size = d->world_size;
		if ((rc = env_int(envp, "OMPI_COMM_WORLD_LOCAL_RANK", 0, BIG, &d->local_rank, err)) ||
		    (rc = env_int(envp, "OMPI_COMM_WORLD_LOCAL_SIZE", 1, BIG, &d->local_world_size, err)) ||
		    (rc = env_int(envp, "OMPI_COMM_WORLD_NODE_RANK", 0, BIG, &d->node_rank, err)) ||
		    (rc = master_from_env(d, envp, d->local_world_size == d->world_size ? "127.0.0.1" : NULL,
					  "open mpi environment", err)))
			return rc;
		d->serve_store = 1;
		return check_local(d, err);
	}
	return 0;
}

int gpt_dist_env_detect(gpt_dist_env *out, gpt_err *err)
{
	return gpt_dist_env_parse(out, environ, err);
}

int gpt_comm_timeout(double *out, gpt_err *err)
{
	*out = GPT_COMM_DEFAULT_TIMEOUT_S;
	const char *v = getenv("GPT_COMM_TIMEOUT");
	if (!v || !*v)
		return 0;
	double t;
	if (gpt_parse_f64(v, &t) || !(t > 0) || t > 1e7)
		return gpt_err_set(err, GPT_EUSAGE,
				   "environment variable GPT_COMM_TIMEOUT='%s': expected seconds > 0", v);
	*out = t;
	return 0;
}

int gpt_comm_gpu_plan(const char *requested, const gpt_dist_env *env, int gpu, int ndev,
		      const char **backend, int *device, gpt_err *err)
{
	const char *var = GPT_COMM_BACKEND_ENV;
	int asked = requested && *requested && strcmp(requested, "auto") != 0;
	if (asked && strcmp(requested, "nccl") != 0 && strcmp(requested, "shm") != 0)
		return gpt_err_set(err, GPT_EUSAGE, "%s: '%s': expected auto, nccl or shm", var, requested);
	*backend = "shm";
	*device = -1;
	if (!gpu) {
		if (asked && strcmp(requested, "nccl") == 0)
			return gpt_err_set(err, GPT_EUSAGE,
					   "%s: nccl: this job trains on the CPU (Global.device: cpu), whose ranks talk over shm; unset it or train with -o Global.device=gpu",
					   var);
		return 0;
	}
	if (ndev < 1)
		return gpt_err_set(err, GPT_EUSAGE,
				   "Global.device: gpu: no CUDA device is visible to rank %d (check nvidia-smi and CUDA_VISIBLE_DEVICES)",
				   env->rank);
	int local = env->local_world_size > 0 ? env->local_world_size : 1;
	int multi_host = env->world_size > local;
	*device = (env->local_rank > 0 ? env->local_rank : 0) % ndev;
	if (env->device_var && env->device >= ndev)
		return gpt_err_set(err, GPT_EUSAGE,
				   "environment variable %s: device %d is not visible to rank %d, which sees %d CUDA device%s; check the launcher's device list and CUDA_VISIBLE_DEVICES",
				   env->device_var, env->device, env->rank, ndev, ndev == 1 ? "" : "s");
	if (env->device_var)
		*device = env->device;
	if (!asked) {
		/* fewer devices than ranks: shared, or one each behind
		 * CUDA_VISIBLE_DEVICES; gpt_comm_open finds out */
		*backend = local > ndev ? "auto" : "nccl";
		return 0;
	}
	if (strcmp(requested, "shm") == 0 && multi_host)
		return gpt_err_set(err, GPT_EUSAGE,
				   "%s: shm: shm reaches the ranks of one host only, and this job has %d ranks, %d on this host; use nccl (unset %s)",
				   var, env->world_size, local, var);
	*backend = requested;
	return 0;
}
