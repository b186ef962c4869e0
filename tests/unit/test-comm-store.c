/* lib/comm: the rendezvous store (set/get/add/check/wait/barrier, timeouts,
 * unreachable and busy ports) and the launcher environment discovery. */
#include "comm/comm.h"
#include "tap.h"

#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static void test_basic(gpt_store *st)
{
	gpt_err err = {0};
	is_int(gpt_store_set(st, "a", "hello", 5, &err), 0, "set");
	void *v = NULL;
	size_t len = 0;
	is_int(gpt_store_get(st, "a", &v, &len, &err), 0, "get a key that is set");
	ok(v && len == 5 && memcmp(v, "hello", 5) == 0, "get returns the value");
	free(v);
	is_int(gpt_store_set(st, "a", "", 0, &err), 0, "overwrite with an empty value");
	is_int(gpt_store_get(st, "a", &v, &len, &err), 0, "get the empty value");
	ok(len == 0 && v && ((char *)v)[0] == '\0', "an empty value reads back empty");
	free(v);
	int64_t x = 0;
	is_int(gpt_store_add(st, "n", 5, &x, &err), 0, "add to an absent key");
	is_int(x, 5, "add starts from 0");
	gpt_store_add(st, "n", -7, &x, &err);
	is_int(x, -2, "add accumulates, negative deltas too");
	is_int(gpt_store_get(st, "n", &v, NULL, &err), 0, "an added key reads as text");
	is_str((char *)v, "-2", "its text is the decimal value");
	free(v);
	int ex = -1;
	gpt_store_check(st, "n", &ex, &err);
	is_int(ex, 1, "check sees a set key");
	gpt_store_check(st, "nope", &ex, &err);
	is_int(ex, 0, "check does not wait for an absent key");
	/* Many keys: the table grows. */
	int rc = 0;
	for (int i = 0; i < 2000 && !rc; i++) {
		char k[32], val[32];
		snprintf(k, sizeof k, "k%d", i);
		snprintf(val, sizeof val, "v%d", i * 3);
		rc = gpt_store_set(st, k, val, strlen(val), &err);
	}
	is_int(rc, 0, "2000 keys");
	gpt_store_get(st, "k1234", &v, NULL, &err);
	is_str((char *)v, "v3702", "a key survives the table growing");
	free(v);
}

static void test_timeouts(gpt_store *st)
{
	gpt_err err = {0};
	void *v = NULL;
	double t0 = gpt_now_s();
	is_int(gpt_store_get(st, "never", &v, NULL, &err), GPT_EIO, "get of a key never set times out");
	double dt = gpt_now_s() - t0;
	ok(dt >= 0.25 && dt < 5, "after about the store's timeout (%.2f s)", dt);
	ok(strstr(err.msg, "'never'") && strstr(err.msg, "not set within"), "the message names the key: %s", err.msg);
	const char *keys[] = {"k1", "absent1", "k2", "absent2"};
	int missing[4] = {9, 9, 9, 9};
	is_int(gpt_store_wait(st, keys, 4, 0.2, missing, &err), GPT_EIO, "wait for absent keys times out");
	ok(missing[0] == 0 && missing[1] == 1 && missing[2] == 0 && missing[3] == 1,
	   "wait says which keys are missing");
	is_int(gpt_store_barrier(st, "b1", 1, 4, &err), GPT_EIO, "a barrier nobody else joins times out");
	ok(strstr(err.msg, "barrier b1") && strstr(err.msg, "waiting for ranks 0, 2, 3"),
	   "the barrier error names the missing ranks: %s", err.msg);
}

typedef struct barrier_arg {
	int port, index, n, rc;
} barrier_arg;

static int barrier_thread(void *p, int i)
{
	barrier_arg *a = (barrier_arg *)p + i;
	gpt_err err = {0};
	gpt_store *st = NULL;
	a->rc = gpt_store_connect("127.0.0.1", a->port, 5, 10, &st, &err);
	/* Waiters park on the server while others set: releases in any order. */
	for (int round = 0; round < 20 && !a->rc; round++) {
		char name[32];
		snprintf(name, sizeof name, "round%d", round);
		a->rc = gpt_store_barrier(st, name, a->index, a->n, &err);
	}
	if (a->rc)
		diag("thread %d: %s", i, err.msg);
	gpt_store_close(st);
	return a->rc;
}

static void test_barrier_threads(int port)
{
	barrier_arg a[6];
	for (int i = 0; i < 6; i++)
		a[i] = (barrier_arg){port, i, 6, -1};
	gpt_err err = {0};
	is_int(gpt_threads_run(6, barrier_thread, a, &err), 0, "6 clients pass 20 barriers together");
}

static void test_connect_errors(void)
{
	gpt_err err = {0};
	/* A port nobody listens on: take a free one and close it again. */
	gpt_store_server *tmp = NULL;
	gpt_store_server_start("127.0.0.1", 0, &tmp, &err);
	int port = gpt_store_server_port(tmp);
	gpt_store_server_stop(tmp);
	gpt_store *st = NULL;
	double t0 = gpt_now_s();
	is_int(gpt_store_connect("127.0.0.1", port, 0.4, 1, &st, &err), GPT_EIO, "connect to a closed port fails");
	double dt = gpt_now_s() - t0;
	ok(dt >= 0.35 && dt < 3, "after retrying for the connect timeout (%.2f s)", dt);
	ok(strstr(err.msg, "not reachable within 0.4 s") && strstr(err.msg, "gpt-launch on node 0"),
	   "the message says what to check: %s", err.msg);
	is_int(gpt_store_connect("no-such-host.invalid", 1234, 5, 1, &st, &err), GPT_EUSAGE,
	       "an unresolvable host fails at once");

	gpt_store_server *a = NULL, *b = NULL;
	is_int(gpt_store_server_start(NULL, 0, &a, &err), 0, "serve on a free port");
	is_int(gpt_store_server_start(NULL, gpt_store_server_port(a), &b, &err), GPT_EUSAGE,
	       "a second server on that port fails");
	ok(strstr(err.msg, "Address already in use") && strstr(err.msg, "--master"),
	   "and says the address is in use: %s", err.msg);
	gpt_store_server_stop(a);
}

static void test_server_gone(void)
{
	gpt_err err = {0};
	gpt_store_server *srv = NULL;
	gpt_store_server_start("127.0.0.1", 0, &srv, &err);
	gpt_store *st = NULL;
	gpt_store_connect("127.0.0.1", gpt_store_server_port(srv), 2, 2, &st, &err);
	gpt_store_server_stop(srv);
	int rc = gpt_store_set(st, "x", "1", 1, &err);
	if (!rc)
		rc = gpt_store_set(st, "y", "1", 1, &err);
	is_int(rc, GPT_EIO, "a request after the server stopped fails");
	ok(strstr(err.msg, "did gpt-launch on node 0 exit?") != NULL, "naming the likely cause: %s", err.msg);
	gpt_store_close(st);
}

static void test_host_port(void)
{
	char host[64];
	int port = 0;
	gpt_err err = {0};
	is_int(gpt_parse_host_port("10.0.0.1:6170", "--master", host, sizeof host, &port, &err), 0, "HOST:PORT");
	ok(strcmp(host, "10.0.0.1") == 0 && port == 6170, "parsed host and port");
	is_int(gpt_parse_host_port("[::1]:80", "--master", host, sizeof host, &port, &err), 0, "[v6]:PORT");
	is_str(host, "::1", "brackets removed");
	is_int(gpt_parse_host_port("node1", "--master", host, sizeof host, &port, &err), GPT_EUSAGE, "no port");
	ok(strstr(err.msg, "--master 'node1': expected HOST:PORT") == err.msg, "message: %s", err.msg);
	is_int(gpt_parse_host_port("h:0", "--master", host, sizeof host, &port, &err), GPT_EUSAGE, "port 0");
	is_int(gpt_parse_host_port("h:65536", "--master", host, sizeof host, &port, &err), GPT_EUSAGE, "port too big");
	is_int(gpt_parse_host_port(":80", "--master", host, sizeof host, &port, &err), GPT_EUSAGE, "no host");
	is_int(gpt_parse_host_port("::1:80", "--master", host, sizeof host, &port, &err), GPT_EUSAGE,
	       "IPv6 without brackets");
	ok(strstr(err.msg, "--master '::1:80': expected HOST:PORT, an IPv6 address in brackets") == err.msg,
	   "message: %s", err.msg);
	is_int(gpt_parse_host_port("[::1", "--master", host, sizeof host, &port, &err), GPT_EUSAGE, "no ]");
	is_int(gpt_parse_host_port("[::1]x:80", "--master", host, sizeof host, &port, &err), GPT_EUSAGE,
	       "text after ]");
}

static void test_env(void)
{
	gpt_dist_env d;
	gpt_err err = {0};
	char *none[] = {"PATH=/bin", NULL};
	is_int(gpt_dist_env_parse(&d, none, &err), 0, "no launcher variables");
	ok(d.source == GPT_DIST_SINGLE && d.rank == 0 && d.world_size == 1, "is a single process");

	char *gl[] = {"GPT_RANK=5", "GPT_WORLD_SIZE=8", "GPT_LOCAL_RANK=1", "GPT_LOCAL_WORLD_SIZE=4",
		      "GPT_NODE_RANK=1", "GPT_MASTER=node0:6170", "GPT_RESTART_COUNT=2",
		      "RANK=99", "SLURM_PROCID=3", "SLURM_NTASKS=4", NULL};
	is_int(gpt_dist_env_parse(&d, gl, &err), 0, "gpt-launch variables");
	ok(d.source == GPT_DIST_GPT_LAUNCH && d.rank == 5 && d.world_size == 8 && d.local_rank == 1 &&
	   d.local_world_size == 4 && d.node_rank == 1 && d.restart_count == 2 && d.master_port == 6170 &&
	   strcmp(d.master_host, "node0") == 0 && !d.serve_store,
	   "GPT_* win over the others, and gpt-launch serves the store");

	char *tr[] = {"RANK=3", "WORLD_SIZE=4", "LOCAL_RANK=1", "LOCAL_WORLD_SIZE=2", "MASTER_ADDR=10.1.1.1",
		      "MASTER_PORT=29400", "SLURM_PROCID=0", "SLURM_NTASKS=1", NULL};
	is_int(gpt_dist_env_parse(&d, tr, &err), 0, "torchrun variables");
	ok(d.source == GPT_DIST_TORCHRUN && d.rank == 3 && d.world_size == 4 && d.local_rank == 1 &&
	   strcmp(d.master_host, "10.1.1.1") == 0 && d.master_port == 29400 && d.serve_store,
	   "torchrun's win over Slurm's; rank 0 serves the store");
	char *te[] = {"RANK=0", "WORLD_SIZE=2", "MASTER_ADDR=h", "MASTER_PORT=29400", "TORCHELASTIC_RUN_ID=x", NULL};
	gpt_dist_env_parse(&d, te, &err);
	is_int(d.master_port, 29401, "under torchrun itself the store moves to MASTER_PORT + 1");

	char *sl[] = {"SLURM_PROCID=6", "SLURM_NTASKS=8", "SLURM_LOCALID=2", "SLURM_NODEID=1",
		      "SLURM_NNODES=2", "SLURM_TASKS_PER_NODE=4(x2)", "SLURM_LAUNCH_NODE_IPADDR=10.0.0.7",
		      "OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_SIZE=2", NULL};
	is_int(gpt_dist_env_parse(&d, sl, &err), 0, "slurm variables");
	ok(d.source == GPT_DIST_SLURM && d.rank == 6 && d.world_size == 8 && d.local_rank == 2 &&
	   d.local_world_size == 4 && d.node_rank == 1 && strcmp(d.master_host, "10.0.0.7") == 0 &&
	   d.master_port == GPT_DIST_DEFAULT_PORT,
	   "Slurm's win over Open MPI's; master from SLURM_LAUNCH_NODE_IPADDR");

	char *om[] = {"OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_SIZE=2", "OMPI_COMM_WORLD_LOCAL_RANK=1",
		      "OMPI_COMM_WORLD_LOCAL_SIZE=2", NULL};
	is_int(gpt_dist_env_parse(&d, om, &err), 0, "open mpi variables");
	ok(d.source == GPT_DIST_OPENMPI && d.rank == 1 && d.world_size == 2 && d.local_rank == 1 &&
	   strcmp(d.master_host, "127.0.0.1") == 0, "one node: master is 127.0.0.1");
	char *om2[] = {"OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_SIZE=4", "OMPI_COMM_WORLD_LOCAL_RANK=1",
		       "OMPI_COMM_WORLD_LOCAL_SIZE=2", NULL};
	is_int(gpt_dist_env_parse(&d, om2, &err), GPT_EUSAGE, "open mpi on two nodes needs MASTER_ADDR");
	ok(strstr(err.msg, "set MASTER_ADDR") != NULL, "and says so: %s", err.msg);

	/* paddle.distributed.launch: two nodes of two trainers, inside srun */
	char *pd[] = {"PADDLE_TRAINER_ID=3", "PADDLE_TRAINERS_NUM=4", "PADDLE_RANK_IN_NODE=1",
		      "PADDLE_TRAINER_ENDPOINTS=10.0.0.1:6170,10.0.0.1:6171,10.0.0.2:6170,10.0.0.2:6171",
		      "PADDLE_CURRENT_ENDPOINT=10.0.0.2:6171", "SLURM_PROCID=0", "SLURM_NTASKS=1", NULL};
	is_int(gpt_dist_env_parse(&d, pd, &err), 0, "paddle variables");
	ok(d.source == GPT_DIST_PADDLE && d.rank == 3 && d.world_size == 4 && d.local_rank == 1 &&
	   d.local_world_size == 2 && d.node_rank == 1 && strcmp(d.master_host, "10.0.0.1") == 0 &&
	   d.master_port == 6170 && d.serve_store,
	   "Paddle's win over Slurm's; master from the first endpoint, rank 0 serves the store");
	ok(strcmp(gpt_dist_source_name(d.source), "paddle") == 0, "named paddle");
	ok(d.device == -1 && !d.device_var, "no FLAGS_selected_gpus: no device of the launcher's");
	char *pd2[] = {"PADDLE_TRAINER_ID=2", "PADDLE_TRAINERS_NUM=4",
		       "PADDLE_TRAINER_ENDPOINTS=10.0.0.1:6170,10.0.0.1:6171,10.0.0.2:6170,10.0.0.2:6171", NULL};
	is_int(gpt_dist_env_parse(&d, pd2, &err), 0, "paddle endpoints alone");
	ok(d.device == -1, "no device of the launcher's");
	ok(d.local_rank == 0 && d.local_world_size == 2 && d.node_rank == 1,
	   "local rank and size from the endpoints on this host (%d of %d, node %d)", d.local_rank,
	   d.local_world_size, d.node_rank);
	char *pd3[] = {"PADDLE_TRAINER_ID=1", "PADDLE_TRAINERS_NUM=2", "PADDLE_LOCAL_RANK=1", "PADDLE_LOCAL_SIZE=2",
		       "PADDLE_TRAINER_ENDPOINTS=h:6170,h:6171", "PADDLE_MASTER=h:41234", "FLAGS_selected_gpus=3", NULL};
	is_int(gpt_dist_env_parse(&d, pd3, &err), 0, "paddle with PADDLE_MASTER");
	ok(strcmp(d.master_host, "h") == 0 && d.master_port == 41234 && d.local_rank == 1,
	   "PADDLE_MASTER wins over the endpoints");
	ok(d.device == 3 && d.device_var && strcmp(d.device_var, "FLAGS_selected_gpus") == 0,
	   "the device from FLAGS_selected_gpus (%d)", d.device);
	char *pd6[] = {"PADDLE_TRAINER_ID=0", "PADDLE_TRAINERS_NUM=1", "PADDLE_TRAINER_ENDPOINTS=h:6170",
		       "FLAGS_selected_gpus=4,5,6", NULL};
	is_int(gpt_dist_env_parse(&d, pd6, &err), 0, "one trainer given the node's devices");
	is_int(d.device, 4, "uses the first");
	char *pd4[] = {"PADDLE_TRAINER_ID=1", "PADDLE_TRAINERS_NUM=2", "PADDLE_TRAINER_ENDPOINTS=h:6170,h:6171",
		       "PADDLE_MASTER=h:41234", "MASTER_ADDR=m", "MASTER_PORT=7000", NULL};
	gpt_dist_env_parse(&d, pd4, &err);
	ok(strcmp(d.master_host, "m") == 0 && d.master_port == 7000, "MASTER_ADDR and MASTER_PORT win over both");
	char *pd5[] = {"RANK=1", "WORLD_SIZE=2", "MASTER_ADDR=m", "PADDLE_TRAINER_ID=0", "PADDLE_TRAINERS_NUM=1", NULL};
	gpt_dist_env_parse(&d, pd5, &err);
	ok(d.source == GPT_DIST_TORCHRUN && d.rank == 1, "torchrun's win over Paddle's");
	char *pbad[][5] = {
		{"PADDLE_TRAINER_ID=1", "PADDLE_TRAINERS_NUM=3", "PADDLE_TRAINER_ENDPOINTS=h:1,h:2", NULL},
		{"PADDLE_TRAINER_ID=1", "PADDLE_TRAINERS_NUM=2", "PADDLE_TRAINER_ENDPOINTS=h:1,h:2",
		 "PADDLE_CURRENT_ENDPOINT=h:1", NULL},
		{"PADDLE_TRAINER_ID=0", "PADDLE_TRAINERS_NUM=2", "PADDLE_TRAINER_ENDPOINTS=h:1,h", NULL},
		{"PADDLE_TRAINER_ID=0", "PADDLE_TRAINERS_NUM=2", NULL},
		{"PADDLE_TRAINER_ID=2", "PADDLE_TRAINERS_NUM=2", "PADDLE_TRAINER_ENDPOINTS=h:1,h:2", NULL},
		{"PADDLE_TRAINER_ID=x", "PADDLE_TRAINERS_NUM=2", "PADDLE_TRAINER_ENDPOINTS=h:1,h:2", NULL},
		{"PADDLE_TRAINER_ID=0", "PADDLE_TRAINERS_NUM=2", "PADDLE_TRAINER_ENDPOINTS=h:1,h:2",
		 "PADDLE_MASTER=h", NULL},
		{"PADDLE_TRAINER_ID=0", "PADDLE_TRAINERS_NUM=2", "PADDLE_TRAINER_ENDPOINTS=h:1,h:2",
		 "FLAGS_selected_gpus=gpu0", NULL},
	};
	const char *pwhy[] = {
		"PADDLE_TRAINER_ENDPOINTS has 2 entries but PADDLE_TRAINERS_NUM=3",
		"PADDLE_CURRENT_ENDPOINT='h:1' is not entry 1 of PADDLE_TRAINER_ENDPOINTS ('h:2')",
		"PADDLE_TRAINER_ENDPOINTS entry 1 'h': expected HOST:PORT",
		"no master address: set PADDLE_TRAINER_ENDPOINTS",
		"PADDLE_TRAINER_ID=2 is outside the world of 2 ranks (PADDLE_TRAINERS_NUM=2)",
		"PADDLE_TRAINER_ID='x': expected an integer",
		"PADDLE_MASTER 'h': expected HOST:PORT",
		"FLAGS_selected_gpus='gpu0': expected CUDA device numbers",
	};
	for (int i = 0; i < 8; i++) {
		is_int(gpt_dist_env_parse(&d, pbad[i], &err), GPT_EUSAGE, "bad paddle variables %d", i);
		ok(strstr(err.msg, pwhy[i]) != NULL, "names them: %s", err.msg);
	}

	char *bad1[] = {"GPT_RANK=4", "GPT_WORLD_SIZE=4", "GPT_MASTER=h:1", NULL};
	is_int(gpt_dist_env_parse(&d, bad1, &err), GPT_EUSAGE, "a rank outside the world");
	ok(strstr(err.msg, "GPT_RANK=4") != NULL, "names the variable: %s", err.msg);
	char *bad2[] = {"GPT_RANK=x", "GPT_WORLD_SIZE=4", "GPT_MASTER=h:1", NULL};
	is_int(gpt_dist_env_parse(&d, bad2, &err), GPT_EUSAGE, "a malformed rank");
	ok(strstr(err.msg, "GPT_RANK='x'") != NULL, "names the variable and value: %s", err.msg);
	char *bad3[] = {"GPT_RANK=0", "GPT_WORLD_SIZE=1", NULL};
	is_int(gpt_dist_env_parse(&d, bad3, &err), GPT_EUSAGE, "GPT_RANK without GPT_MASTER");

	/* A rank without its world size is not a single process. */
	char *half[][3] = {{"GPT_RANK=3", "RANK=3", NULL}, {"RANK=3", NULL}, {"RANK=0", NULL},
			   {"SLURM_PROCID=3", "SLURM_NNODES=1", NULL}, {"OMPI_COMM_WORLD_RANK=1", NULL},
			   {"PADDLE_TRAINER_ID=0", "PADDLE_TRAINER_ENDPOINTS=h:1,h:2", NULL}};
	const char *missing[] = {"GPT_WORLD_SIZE", "WORLD_SIZE", "WORLD_SIZE", "SLURM_NTASKS",
				 "OMPI_COMM_WORLD_SIZE", "PADDLE_TRAINERS_NUM"};
	for (int i = 0; i < 6; i++) {
		is_int(gpt_dist_env_parse(&d, half[i], &err), GPT_EUSAGE, "%s without %s", half[i][0], missing[i]);
		char want[128];
		const char *eq = strchr(half[i][0], '=');
		snprintf(want, sizeof want, "%.*s='%s' is set but %s is not", (int)(eq - half[i][0]), half[i][0],
			 eq + 1, missing[i]);
		ok(strstr(err.msg, want) != NULL, "names both: %s", err.msg);
		is_int(gpt_dist_env_parse_ranks(&d, half[i], &err), GPT_EUSAGE, "also when only the ranks are read");
	}
	char *batch[] = {"SLURM_PROCID=0", "SLURM_NNODES=2", "SLURM_JOB_ID=7", NULL};
	is_int(gpt_dist_env_parse(&d, batch, &err), 0, "SLURM_PROCID=0 alone (a batch script)");
	ok(d.source == GPT_DIST_SINGLE && d.world_size == 1, "is a single process");
	char *stray[] = {"RANK=3", "SLURM_PROCID=1", "SLURM_NTASKS=2", NULL};
	is_int(gpt_dist_env_parse(&d, stray, &err), 0, "a half pair beside a whole one");
	ok(d.source == GPT_DIST_SLURM && d.rank == 1, "the whole one wins, as before");
	char *size_only[] = {"WORLD_SIZE=4", "SLURM_PROCID=1", "SLURM_NTASKS=2", NULL};
	is_int(gpt_dist_env_parse(&d, size_only, &err), 0, "WORLD_SIZE beside srun's variables");
	char *neg[] = {"RANK=-1", "WORLD_SIZE=4", NULL};
	is_int(gpt_dist_env_parse_ranks(&d, neg, &err), GPT_EUSAGE, "a negative rank");
	ok(strstr(err.msg, "RANK='-1'") != NULL, "names it: %s", err.msg);
	char *past[] = {"OMPI_COMM_WORLD_RANK=2", "OMPI_COMM_WORLD_SIZE=2", NULL};
	is_int(gpt_dist_env_parse_ranks(&d, past, &err), GPT_EUSAGE, "rank == world size");
	ok(strstr(err.msg, "OMPI_COMM_WORLD_RANK=2 is outside the world of 2 ranks (OMPI_COMM_WORLD_SIZE=2)") != NULL,
	   "names both: %s", err.msg);
	char *whole[] = {"RANK=3", "WORLD_SIZE=4", NULL};
	is_int(gpt_dist_env_parse_ranks(&d, whole, &err), 0, "only the ranks: no master needed");
	ok(d.source == GPT_DIST_TORCHRUN && d.rank == 3 && d.world_size == 4, "rank 3 of 4");

	setenv("GPT_COMM_TIMEOUT", "2.5", 1);
	double t = 0;
	is_int(gpt_comm_timeout(&t, &err), 0, "GPT_COMM_TIMEOUT");
	is_near(t, 2.5, 0, "is read in seconds");
	setenv("GPT_COMM_TIMEOUT", "-1", 1);
	is_int(gpt_comm_timeout(&t, &err), GPT_EUSAGE, "a negative timeout is an error");
	unsetenv("GPT_COMM_TIMEOUT");
	gpt_comm_timeout(&t, &err);
	is_near(t, GPT_COMM_DEFAULT_TIMEOUT_S, 0, "default timeout");
}

/* One process: gpt_comm_open serves its own store; argument checks. */
static void test_single(void)
{
	gpt_err err = {0};
	gpt_dist_env env;
	char *none[] = {NULL};
	gpt_dist_env_parse(&env, none, &err);
	gpt_comm *c = NULL;
	gpt_comm_options o = {.backend = "tcp"};
	is_int(gpt_comm_open(&c, &env, &o, &err), GPT_EUSAGE, "an unknown backend");
	ok(strstr(err.msg, "communication backend 'tcp': expected shm or nccl") != NULL, "names it: %s", err.msg);
	o.backend = "shm";
	is_int(gpt_comm_open(&c, &env, &o, &err), 0, "a single process opens a world of one");
	gpt_group *w = gpt_comm_world(c);
	ok(w->size == 1 && w->rank == 0 && strcmp(w->name, "world") == 0, "its world group");
	float x[3] = {1, 2, 3}, y[3] = {0};
	is_int(gpt_comm_all_reduce(w, x, y, 3, GPT_DTYPE_F32, GPT_REDUCE_SUM, &err), 0, "all-reduce of one rank");
	int8_t b[4] = {0};
	is_int(gpt_comm_all_reduce(w, b, b, 4, GPT_DTYPE_I8, GPT_REDUCE_SUM, &err), GPT_EUSAGE, "int8 is refused");
	ok(strstr(err.msg, "group world: all-reduce: dtype int8 is not supported") != NULL, "and named: %s", err.msg);
	is_int(gpt_comm_broadcast(w, x, 3, GPT_DTYPE_F32, 1, &err), GPT_EUSAGE, "a root outside the group");
	is_int(gpt_comm_all_gather(w, x, y, -1, GPT_DTYPE_F32, &err), GPT_EUSAGE, "a negative count");
	is_int(gpt_comm_barrier(w, &err), 0, "usage errors leave the group usable");
	gpt_group *sub = NULL;
	is_int(gpt_group_split(w, -1, 0, "none", &sub, &err), 0, "a split with no colour");
	ok(sub == NULL, "gives no group");
	is_int(gpt_group_split(w, 5, 0, "tp", &sub, &err), 0, "a split with a colour");
	ok(sub && strcmp(sub->name, "tp.5") == 0 && sub->size == 1, "gives a group named by it");
	gpt_group_free(sub);
	gpt_comm_close(c);
#if !GPT_HAVE_CUDA
	o.backend = "nccl";
	is_int(gpt_comm_open(&c, &env, &o, &err), GPT_EUSAGE, "nccl without CUDA");
	ok(strstr(err.msg, "rebuild with CUDA=1") != NULL, "says how to get it: %s", err.msg);
#endif
}

int main(void)
{
	gpt_err err = {0};
	gpt_store_server *srv = NULL;
	if (gpt_store_server_start("127.0.0.1", 0, &srv, &err)) {
		printf("Bail out! %s\n", err.msg);
		return 1;
	}
	gpt_store *st = NULL;
	is_int(gpt_store_connect("127.0.0.1", gpt_store_server_port(srv), 2, 0.3, &st, &err), 0,
	       "connect to a local store");
	test_basic(st);
	test_timeouts(st);
	test_barrier_threads(gpt_store_server_port(srv));
	gpt_store_close(st);
	gpt_store_server_stop(srv);
	test_connect_errors();
	test_server_gone();
	test_host_port();
	test_env();
	test_single();
	return done_testing();
}
