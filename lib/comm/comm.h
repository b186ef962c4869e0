/* lib/comm: how the processes of one training run find each other and talk.
 *
 * Four parts, used in this order by a worker:
 *
 *  1. gpt_dist_env: who am I? The rank, world size, local rank and master
 *     address, read from gpt-launch's GPT_* variables, else torchrun's, else
 *     PaddlePaddle's, else Slurm's, else Open MPI's, else a single process.
 *  2. gpt_store: a small TCP key-value store (set/get/wait/add/barrier) that
 *     gpt-launch serves on node 0 (or rank 0 itself under srun/mpirun). The
 *     workers meet there: shm segment names, NCCL unique ids, split tables.
 *  3. gpt_mesh: the 4-D layout of DESIGN.md section 5. tp varies fastest,
 *     then sharding, then dp, then pp:
 *        rank = ((pp_r * dp + dp_r) * sharding + sh_r) * tp + tp_r
 *     and the groups a rank belongs to (tp, sharding, dp, pp, the dp x
 *     sharding data-replica group, the first/last stage group of the tied
 *     embedding).
 *  4. gpt_comm / gpt_group: collectives (all-reduce sum/max, reduce-scatter,
 *     all-gather and their uneven in-place forms, broadcast, send/recv,
 *     barrier) over a group, through a
 *     backend ops table: `shm` (POSIX shared memory, CPU ranks on one host,
 *     bit-identical results on every rank) and `nccl` (GPUs, built with CUDA).
 *
 * Every wait has a deadline (gpt_comm_timeout: GPT_COMM_TIMEOUT seconds,
 * default 300). When it passes, the error names the group, the operation and
 * the ranks that did not arrive, and the group is unusable afterwards.
 *
 * The launcher (gpt_launch_run) lives here too: it starts the local workers
 * with the environment above, serves the store, relays logs and supervises,
 * watching the heartbeats (gpt_heartbeat_*) the workers send to catch hangs.
 */
#ifndef GPT_COMM_H
#define GPT_COMM_H

#include "backend/backend.h"
#include "core/core.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- timeouts ------------------------------------------------------------ */

#define GPT_COMM_DEFAULT_TIMEOUT_S 300.0

/* The timeout of every wait: GPT_COMM_TIMEOUT (seconds, > 0) when set and
 * valid, else GPT_COMM_DEFAULT_TIMEOUT_S. A malformed value is an error. */
int gpt_comm_timeout(double *out, gpt_err *err);

/* ---- environment discovery ------------------------------------------------ */

typedef enum gpt_dist_source {
	GPT_DIST_SINGLE = 0, /* no launcher variables: one process */
	GPT_DIST_GPT_LAUNCH, /* GPT_RANK, GPT_WORLD_SIZE, ... (gpt-launch) */
	GPT_DIST_TORCHRUN,   /* RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT */
	GPT_DIST_SLURM,      /* SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID */
	GPT_DIST_OPENMPI,    /* OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK */
	GPT_DIST_PADDLE,     /* PADDLE_TRAINER_ID, PADDLE_TRAINERS_NUM, PADDLE_TRAINER_ENDPOINTS */
} gpt_dist_source;

#define GPT_DIST_DEFAULT_PORT 29500

typedef struct gpt_dist_env {
	gpt_dist_source source;
	int rank, world_size;
	int local_rank, local_world_size;
	int node_rank;
	int restart_count;    /* GPT_RESTART_COUNT; 0 when not under gpt-launch */
	char master_host[256];
	int master_port;
	/* 1 when nobody serves the store and rank 0 must (srun, mpirun,
	 * paddle.distributed.launch, a plain torchrun-style environment); 0
	 * under gpt-launch or single process. */
	int serve_store;
	/* The CUDA device the launcher chose for this rank, as an index into
	 * the visible devices, and the variable that named it
	 * (FLAGS_selected_gpus under paddle.distributed.launch); -1 and NULL
	 * where the launcher names none. */
	int device;
	const char *device_var;
} gpt_dist_env;

/* Reads the variables from envp (NULL-terminated "NAME=value" strings, as
 * environ). GPT_* win, then torchrun's, then PaddlePaddle's, then Slurm's,
 * then Open MPI's: the launchers that start one process per device win over
 * the allocation (srun, mpirun) they may run inside. A
 * variable that is set but malformed (a rank outside the world, a bad port)
 * is a GPT_EUSAGE error naming it, and so is a rank variable (GPT_RANK,
 * RANK, PADDLE_TRAINER_ID, SLURM_PROCID, OMPI_COMM_WORLD_RANK) without its
 * world size when no
 * launcher's pair is complete, save SLURM_PROCID=0 (a Slurm batch script:
 * one process). Under Slurm and Open MPI the master is
 * MASTER_ADDR/MASTER_PORT when set, else (Slurm) SLURM_LAUNCH_NODE_IPADDR, else
 * (one node) 127.0.0.1; the port defaults to GPT_DIST_DEFAULT_PORT. Under
 * torchrun (TORCHELASTIC_RUN_ID set) torchrun's own store holds MASTER_PORT, so
 * ours uses MASTER_PORT + 1. Under paddle.distributed.launch the master is
 * where Paddle's own init_parallel_env puts its store: MASTER_ADDR:MASTER_PORT
 * when both are set, else PADDLE_MASTER, else the first entry of
 * PADDLE_TRAINER_ENDPOINTS (rank 0's own endpoint, which the launcher keeps
 * for it); the local rank and size are PADDLE_LOCAL_RANK (PADDLE_RANK_IN_NODE)
 * and PADDLE_LOCAL_SIZE, else the endpoints on PADDLE_CURRENT_ENDPOINT's host;
 * the device is the first entry of FLAGS_selected_gpus. */
int gpt_dist_env_parse(gpt_dist_env *out, char *const *envp, gpt_err *err);
/* The launcher, rank and world size only, checked as gpt_dist_env_parse
 * does; the rest of *out as for a single process. For a process that runs
 * alone whatever the launcher says, and must still refuse a rank without
 * its world size. */
int gpt_dist_env_parse_ranks(gpt_dist_env *out, char *const *envp, gpt_err *err);
/* gpt_dist_env_parse(out, environ, err). */
int gpt_dist_env_detect(gpt_dist_env *out, gpt_err *err);
/* "gpt-launch", "torchrun", "paddle", "slurm", "openmpi", "single". */
const char *gpt_dist_source_name(gpt_dist_source s);

/* Splits "HOST:PORT" (or "[v6addr]:PORT"); GPT_EUSAGE naming `what` when bad. */
int gpt_parse_host_port(const char *s, const char *what, char *host, size_t host_size, int *port,
			gpt_err *err);

/* ---- rendezvous store ------------------------------------------------------- */

typedef struct gpt_store_server gpt_store_server;
typedef struct gpt_store gpt_store;

/* Serves a store on bind_host:port from a thread (bind_host NULL: every
 * interface; port 0: a free port, see gpt_store_server_port). A port in use is
 * GPT_EUSAGE naming it. */
int gpt_store_server_start(const char *bind_host, int port, gpt_store_server **out, gpt_err *err);
int gpt_store_server_port(const gpt_store_server *s);
/* How many clients are connected now (from any thread). */
int gpt_store_server_clients(gpt_store_server *s);
/* Stops the thread, closes every connection and frees the store. */
void gpt_store_server_stop(gpt_store_server *s);

/* Connects to host:port, retrying with backoff (50 ms doubling to 1 s) until
 * connect_timeout_s has passed; then GPT_EIO naming the address and what to
 * check. `timeout_s` bounds every later wait on this connection. */
int gpt_store_connect(const char *host, int port, double connect_timeout_s, double timeout_s,
		      gpt_store **out, gpt_err *err);
void gpt_store_close(gpt_store *st);

int gpt_store_set(gpt_store *st, const char *key, const void *val, size_t len, gpt_err *err);
/* Waits up to the store's timeout for key, then returns a malloc'd copy of its
 * value (NUL-terminated beyond len; free() it). GPT_EIO on timeout. */
int gpt_store_get(gpt_store *st, const char *key, void **val, size_t *len, gpt_err *err);
/* Atomically adds delta to the integer at key (absent: 0); *out = the new value. */
int gpt_store_add(gpt_store *st, const char *key, int64_t delta, int64_t *out, gpt_err *err);
/* *exists = 1 when key is set, without waiting. */
int gpt_store_check(gpt_store *st, const char *key, int *exists, gpt_err *err);
/* Waits until every key is set, up to timeout_s (< 0: the store's timeout).
 * On timeout returns GPT_EIO with a generic message and, when missing is not
 * NULL, sets missing[i] = 1 for each key that is still absent (else 0). */
int gpt_store_wait(gpt_store *st, const char *const *keys, int n, double timeout_s, int *missing,
		   gpt_err *err);
/* Every one of n participants calls this with its index; returns when all
 * have. On timeout: "barrier NAME: timed out after S s waiting for ranks 2, 5". */
int gpt_store_barrier(gpt_store *st, const char *name, int index, int n, gpt_err *err);
/* gpt_store_barrier that wakes every slice_s seconds to call poll_fn(ctx,
 * err): a non-zero return ends the wait with that error (a peer reported a
 * failure, so waiting on is pointless). */
int gpt_store_barrier_poll(gpt_store *st, const char *name, int index, int n, double slice_s,
			   int (*poll_fn)(void *ctx, gpt_err *err), void *ctx, gpt_err *err);
double gpt_store_timeout(const gpt_store *st);

/* ---- mesh ----------------------------------------------------------------- */

typedef struct gpt_mesh {
	int tp, sharding, dp, pp; /* degrees, each >= 1 */
	int world;                /* their product */
} gpt_mesh;

typedef struct gpt_mesh_coord {
	int tp, sh, dp, pp;
} gpt_mesh_coord;

typedef enum gpt_mesh_axis {
	GPT_MESH_TP = 0,
	GPT_MESH_SHARDING,
	GPT_MESH_DP,
	GPT_MESH_PP,
	GPT_MESH_DATA,  /* dp x sharding: the ranks holding one (tp_r, pp_r) slice, by replica */
	GPT_MESH_EMBED, /* first and last pipeline stage of one (tp_r, sh_r, dp_r) */
	GPT_MESH_AXES
} gpt_mesh_axis;

/* Checks the degrees (>= 1, product == world_size) and fills m. */
int gpt_mesh_init(gpt_mesh *m, int tp, int sharding, int dp, int pp, int world_size, gpt_err *err);
int gpt_mesh_rank(const gpt_mesh *m, gpt_mesh_coord c);
gpt_mesh_coord gpt_mesh_coord_of(const gpt_mesh *m, int rank);
/* The data replica this rank reads for: dp_r * sharding + sh_r. */
int gpt_mesh_replica(const gpt_mesh *m, int rank);
/* "tp", "sharding", "dp", "pp", "data", "embed". */
const char *gpt_mesh_axis_name(gpt_mesh_axis a);
/* The group of `axis` that holds rank: ranks[0..*n) are its global ranks in
 * group-rank order (ranks needs room for m->world). *n = 0 when rank is in
 * no group of that axis (GPT_MESH_EMBED off the first and last stage). The
 * return value is the group's colour (equal for the members of one group,
 * distinct between groups of one axis), -1 with *n = 0. */
int gpt_mesh_group(const gpt_mesh *m, gpt_mesh_axis axis, int rank, int *ranks, int *n);

/* ---- collectives ------------------------------------------------------------ */

typedef enum gpt_reduce_op {
	GPT_REDUCE_SUM = 0,
	GPT_REDUCE_MAX,
} gpt_reduce_op;

typedef struct gpt_comm gpt_comm;
typedef struct gpt_group gpt_group;

/* An asynchronous collective in flight (gpt_comm_all_reduce_start). */
typedef struct gpt_comm_req gpt_comm_req;
/* A group's progress thread and its queue (comm-impl.h). */
typedef struct gpt_comm_engine gpt_comm_engine;

/* One point-to-point transfer of a batch (gpt_comm_p2p). */
typedef struct gpt_p2p {
	int peer;     /* group rank */
	int is_send;  /* 1: send buf to peer; 0: receive into buf from peer */
	void *buf;
	int64_t count;
} gpt_p2p;

/* A backend: a NULL slot means "not supported" and the dispatcher says so.
 * Counts are elements. Buffers are host memory for shm and device memory for
 * nccl. Every call returns 0 or a gpt_status with a message that names the
 * group and the operation. */
typedef struct gpt_comm_backend {
	const char *name;
	/* Called on every rank of parent (whole-world creation: parent NULL) after
	 * the members were agreed; child is NULL on ranks outside the new group
	 * (color < 0), else has rank/size/ranks/name filled and gets its impl. */
	int (*group_init)(gpt_comm *comm, gpt_group *parent, int color, int key, gpt_group *child,
			  gpt_err *err);
	void (*group_free)(gpt_group *g);
	int (*all_reduce)(gpt_group *g, const void *send, void *recv, int64_t count, gpt_dtype t,
			  gpt_reduce_op op, gpt_err *err);
	/* send holds size * count elements; recv gets this rank's count. */
	int (*reduce_scatter)(gpt_group *g, const void *send, void *recv, int64_t count, gpt_dtype t,
			      gpt_reduce_op op, gpt_err *err);
	/* send holds count elements; recv gets size * count, by group rank. */
	int (*all_gather)(gpt_group *g, const void *send, void *recv, int64_t count, gpt_dtype t,
			  gpt_err *err);
	int (*broadcast)(gpt_group *g, void *buf, int64_t count, gpt_dtype t, int root, gpt_err *err);
	/* The uneven pair, in place (see gpt_comm_reduce_scatter_v): buf holds
	 * the pieces of counts[0..size), by group rank, one after another. */
	int (*reduce_scatter_v)(gpt_group *g, void *buf, const int64_t *counts, gpt_dtype t, gpt_reduce_op op,
				gpt_err *err);
	int (*all_gather_v)(gpt_group *g, void *buf, const int64_t *counts, gpt_dtype t, gpt_err *err);
	/* Runs the transfers as one batch: they progress together, so a rank may
	 * send to and receive from its neighbours in one call without deadlock. */
	int (*p2p)(gpt_group *g, const gpt_p2p *ops, int n, gpt_dtype t, gpt_err *err);
	int (*barrier)(gpt_group *g, gpt_err *err);
	/* Asynchronous collectives done by the device (nccl): start enqueues
	 * request r (comm-impl.h) behind the work already queued on the compute
	 * stream and returns; finish waits for it on the host, with the group's
	 * deadline (a stream cannot time out); drop releases what start kept when r is
	 * never finished. NULL: a progress thread of lib/comm runs the
	 * synchronous slots (see gpt_comm_all_reduce_start). */
	int (*start)(gpt_group *g, gpt_comm_req *r, gpt_err *err);
	int (*finish)(gpt_group *g, gpt_comm_req *r, gpt_err *err);
	void (*drop)(gpt_comm_req *r);
	/* 1: buffers must be device memory (nccl); 0: host memory (shm). */
	int device_memory;
} gpt_comm_backend;

struct gpt_group {
	gpt_comm *comm;
	const gpt_comm_backend *be;
	void *impl;       /* the backend's state */
	int rank, size;   /* this process's rank in the group, and the member count */
	int *ranks;       /* the members' world ranks, by group rank */
	char key[96];     /* unique per comm, the same on every member: scopes store keys */
	int nsplit;       /* splits of this group so far (the same count on every member) */
	char name[64];    /* "world", "tp.3", ... for messages */
	double timeout_s; /* every wait of a call on this group; the caller may change it */
	int broken;       /* 1 after a failure: every later call fails at once */
	gpt_comm_engine *engine; /* started by the first asynchronous request, or NULL */
};

typedef struct gpt_comm_options {
	/* "shm" or "nccl"; gpt_comm_open also takes "auto" (GPU ranks, see
	 * gpt_comm_gpu_plan): shm when two ranks of the job hold one device
	 * (compared by UUID through the store), else nccl */
	const char *backend;
	double timeout_s;         /* <= 0: gpt_comm_timeout() */
	double connect_timeout_s; /* <= 0: timeout_s */
	int device;               /* nccl: the CUDA device (usually the local rank) */
} gpt_comm_options;

/* Connects this process to its peers: connects the store at env's master
 * (and serves it when env->serve_store and rank 0), then creates the world
 * group. Collective over all ranks. An unknown or unbuilt backend is
 * GPT_EUSAGE naming it. Store keys are scoped by env->restart_count, so a
 * restarted group never reads the previous attempt's keys. */
int gpt_comm_open(gpt_comm **out, const gpt_dist_env *env, const gpt_comm_options *o, gpt_err *err);
/* The same over a store the caller owns (tests); st must outlive the comm. */
int gpt_comm_open_store(gpt_comm **out, gpt_store *st, int rank, int world,
			const gpt_comm_options *o, gpt_err *err);
void gpt_comm_close(gpt_comm *c);
/* "shm" or "nccl": the backend c runs (what "auto" became). */
const char *gpt_comm_backend_name(const gpt_comm *c);
gpt_group *gpt_comm_world(gpt_comm *c);
gpt_store *gpt_comm_store(gpt_comm *c);
/* The backend table for name, or NULL when this build has none by that name. */
const gpt_comm_backend *gpt_comm_backend_find(const char *name);

/* Attaches the CUDA backend whose device memory the collectives of c may be
 * given (NULL detaches). From then on every buffer may be device or host
 * memory, whatever the backend: one of the kind the backend cannot take (a
 * device buffer for shm, a host one for nccl) is staged through a buffer of
 * the other kind (pinned host memory for shm, device memory for nccl) that
 * c keeps and grows, copied with be's upload and download, so the copies
 * follow be's stream; device buffers that nccl takes as they are wait for
 * be's stream first. This is how several ranks share one GPU over shm, and
 * how host values (flags, loss sums) travel over nccl. Without it, buffers
 * are what the backend expects and nothing is checked. */
void gpt_comm_set_memory(gpt_comm *c, gpt_backend *be);

/* The variable that overrides the choice of gpt_comm_gpu_plan. */
#define GPT_COMM_BACKEND_ENV "GPT_COMM_BACKEND"

/* How one rank of a job talks and which CUDA device it computes on.
 * requested is GPT_COMM_BACKEND's value: NULL, "" or "auto" to choose,
 * "nccl" or "shm". ndev is the number of visible devices, gpu whether the
 * job trains on them. On the CPU the backend is shm and *device -1. On GPUs
 * *device is the launcher's (env->device) when it chose one, else
 * local_rank mod ndev, and the choice is nccl when every local
 * rank can have a device of its own (local_world_size <= ndev); with fewer
 * visible devices than local ranks it is "auto", which gpt_comm_open
 * settles by comparing the ranks' devices: shm where ranks share one (its
 * collectives then stage device buffers through pinned host memory,
 * gpt_comm_set_memory, so that any layout runs on one GPU), nccl where each
 * rank sees only its own (gpt-launch --devices, Slurm's GPU binding).
 * GPT_EUSAGE, naming GPT_COMM_BACKEND where it was set: an unknown name,
 * nccl on the CPU, shm for a job on several hosts, no device for a GPU job;
 * a launcher's device that is not visible is GPT_EUSAGE naming its variable.
 * nccl asked for ranks that share a device fails in NCCL's set-up. */
int gpt_comm_gpu_plan(const char *requested, const gpt_dist_env *env, int gpu, int ndev,
		      const char **backend, int *device, gpt_err *err);

/* Collective over every rank of parent: ranks with the same color >= 0 form
 * a new group, ordered by (key, parent rank); *out is NULL for color < 0.
 * name prefixes the group's name for messages ("tp" gives "tp.<color>"). */
int gpt_group_split(gpt_group *parent, int color, int key, const char *name, gpt_group **out,
		    gpt_err *err);
void gpt_group_free(gpt_group *g);

int gpt_comm_all_reduce(gpt_group *g, const void *send, void *recv, int64_t count, gpt_dtype t,
			gpt_reduce_op op, gpt_err *err);
int gpt_comm_reduce_scatter(gpt_group *g, const void *send, void *recv, int64_t count,
			    gpt_dtype t, gpt_reduce_op op, gpt_err *err);
int gpt_comm_all_gather(gpt_group *g, const void *send, void *recv, int64_t count, gpt_dtype t,
			gpt_err *err);
int gpt_comm_broadcast(gpt_group *g, void *buf, int64_t count, gpt_dtype t, int root, gpt_err *err);
/* Uneven reduce-scatter and all-gather, in place. buf holds the pieces of
 * the group's ranks one after another: rank r's is counts[r] elements from
 * counts[0] + ... + counts[r-1]; counts (size entries, any of them 0) is the
 * same on every member. reduce_scatter_v leaves in this rank's piece the
 * reduction of every member's piece over the group, with the bits
 * gpt_comm_all_reduce would give there, and the rest of buf unspecified;
 * all_gather_v fills every other piece of buf with its owner's. Where the
 * pieces are the parts of a ZeRO shard layout that a gradient or parameter
 * window covers, each moves about half of what an all-reduce does. */
int gpt_comm_reduce_scatter_v(gpt_group *g, void *buf, const int64_t *counts, gpt_dtype t,
			      gpt_reduce_op op, gpt_err *err);
int gpt_comm_all_gather_v(gpt_group *g, void *buf, const int64_t *counts, gpt_dtype t, gpt_err *err);
int gpt_comm_send(gpt_group *g, const void *buf, int64_t count, gpt_dtype t, int peer, gpt_err *err);
int gpt_comm_recv(gpt_group *g, void *buf, int64_t count, gpt_dtype t, int peer, gpt_err *err);
int gpt_comm_p2p(gpt_group *g, const gpt_p2p *ops, int n, gpt_dtype t, gpt_err *err);
int gpt_comm_barrier(gpt_group *g, gpt_err *err);

/* ---- asynchronous collectives ----------------------------------------------
 *
 * The same reductions as gpt_comm_all_reduce, gpt_comm_reduce_scatter and
 * gpt_comm_reduce_scatter_v, with the same bits in the result, started now
 * and finished later: start returns a request at once and
 * gpt_comm_wait(request) returns once the result is usable. In between, send must not change and recv must be
 * neither read nor written (the reduction is still reading and writing
 * them); other buffers, and other groups, may be used freely.
 *
 * Ordering is what keeps this free of deadlock: every member of a group
 * must start the same requests on it in the same order, interleaved in the
 * same order with its synchronous calls on the group, exactly as if each
 * request ran synchronously at its start. The requests of a group then run
 * one after another in start order on every member, and a synchronous call
 * on a group (any of the calls above) first waits for the group's requests
 * still running. Waits may come in any order.
 *
 * How each backend does it:
 *  - shm: a progress thread per group (made by the group's first request)
 *    takes the requests in start order and runs the synchronous collective
 *    for each, so a request's result is the synchronous call's bit for bit.
 *  - nccl: start enqueues the collective on the communicator's stream,
 *    behind an event recorded on the compute stream (the backend attached
 *    by gpt_comm_set_memory); start does not block the host, wait does,
 *    until the collective is done or the group's timeout passes (then the
 *    communicator is aborted and the wait fails): a compute stream made to
 *    wait instead would wait forever for a peer that died, and the host's
 *    next wait for that stream with it.
 *  - staging (a backend attached and a buffer of the other kind): for shm,
 *    start copies device inputs into pinned host memory of the request's own
 *    (pooled) and the thread reduces there; wait copies the result back to
 *    the device. Host buffers over nccl are reduced at start, synchronously.
 *
 * A request that fails leaves the group broken (as a synchronous call
 * does): its wait returns the error, and so do the later starts, waits and
 * calls on the group. *req is NULL when start fails. */
int gpt_comm_all_reduce_start(gpt_group *g, const void *send, void *recv, int64_t count,
			      gpt_dtype t, gpt_reduce_op op, gpt_comm_req **req, gpt_err *err);
int gpt_comm_reduce_scatter_start(gpt_group *g, const void *send, void *recv, int64_t count,
				  gpt_dtype t, gpt_reduce_op op, gpt_comm_req **req, gpt_err *err);
/* gpt_comm_reduce_scatter_v, started now: buf is both send and recv
 * (counts is copied; only this rank's piece is a result). */
int gpt_comm_reduce_scatter_v_start(gpt_group *g, void *buf, const int64_t *counts, gpt_dtype t,
				    gpt_reduce_op op, gpt_comm_req **req, gpt_err *err);
/* Waits for req and frees it: 0, or the request's failure. NULL: 0. Every
 * request must be waited for before its group is freed. */
int gpt_comm_wait(gpt_comm_req *req, gpt_err *err);

/* The groups of one rank in a mesh; a member is NULL where the rank is in no
 * group of that axis (embed off the first and last stage). */
typedef struct gpt_mesh_groups {
	gpt_group *g[GPT_MESH_AXES]; /* indexed by gpt_mesh_axis */
} gpt_mesh_groups;

/* Removes the shm segments that process pid created and had not yet
 * unlinked (it died while a group was being set up): a supervisor calls
 * this for each worker that exited, so a crash leaves nothing in /dev/shm. */
void gpt_comm_shm_remove(int pid);

/* Builds every group of m by splitting world (collective over world). */
int gpt_mesh_groups_init(gpt_mesh_groups *out, gpt_group *world, const gpt_mesh *m, gpt_err *err);
void gpt_mesh_groups_free(gpt_mesh_groups *mg);

/* ---- heartbeat ---------------------------------------------------------------- */

/* Hang detection under gpt-launch. The launcher gives each local worker a
 * heartbeat slot (a small shared file; its descriptor number is in
 * GPT_HEARTBEAT_FD) and watches the slot's beat counter. A worker proves
 * progress, not mere liveness: it beats once per completed unit of work (a
 * training step, an eval batch, a checkpoint tensor), so a rank stuck in a
 * collective stops beating as surely as a stopped one. A beat is one atomic
 * add in shared memory: no system call. Watching starts at the first beat
 * of any worker of the node (from then on, one that never beat is silent
 * too), so a program that never opens its slot is never judged. */

#define GPT_HEARTBEAT_ENV "GPT_HEARTBEAT_FD"
#define GPT_HEARTBEAT_DEFAULT_TIMEOUT_S 600.0

typedef struct gpt_heartbeat gpt_heartbeat;

/* Worker side: opens the slot GPT_HEARTBEAT_FD names in envp (as environ)
 * and beats once. Without the variable (no gpt-launch, or its hang detection
 * off) *out = NULL and 0: every call below accepts NULL and does nothing. A
 * value that is not gpt-launch's slot is GPT_EUSAGE naming the variable. */
int gpt_heartbeat_open(gpt_heartbeat **out, char *const *envp, gpt_err *err);
/* Progress was made; step is the global step reached (shown when it hangs). */
void gpt_heartbeat_beat(gpt_heartbeat *hb, int64_t step);
void gpt_heartbeat_close(gpt_heartbeat *hb);

/* Launcher side: one slot per worker and attempt. */
typedef struct gpt_heartbeat_slot {
	int fd;    /* close-on-exec; the launcher clears that in the worker's child */
	void *map;
} gpt_heartbeat_slot;

int gpt_heartbeat_slot_create(gpt_heartbeat_slot *s, gpt_err *err);
/* The beat counter (0: the worker has not opened the slot), and the step and
 * pid of the last beat (either may be NULL). */
void gpt_heartbeat_slot_read(const gpt_heartbeat_slot *s, uint64_t *beats, int64_t *step, int *pid);
void gpt_heartbeat_slot_free(gpt_heartbeat_slot *s);
/* GPT_HEARTBEAT_TIMEOUT (seconds >= 0; 0: off) when set, else
 * GPT_HEARTBEAT_DEFAULT_TIMEOUT_S. A malformed value is GPT_EUSAGE. */
int gpt_heartbeat_timeout(double *out, gpt_err *err);

/* ---- launcher --------------------------------------------------------------- */

typedef struct gpt_launch_options {
	int nproc_per_node;      /* workers on this node (>= 1) */
	const char *devices;     /* "0,1,2,3": one worker per device, CUDA_VISIBLE_DEVICES; or NULL */
	int nnodes;              /* >= 1 */
	int node_rank;           /* 0 .. nnodes-1 */
	const char *master;      /* "HOST:PORT"; NULL: 127.0.0.1 and a free port (one node only) */
	const char *log_dir;     /* worker logs; NULL: "log" */
	int max_restarts;        /* restarts of the whole group after a failure */
	double grace_s;          /* between SIGTERM and SIGKILL when stopping workers */
	double heartbeat_s;      /* a worker silent this long is hung; 0: off; < 0: gpt_heartbeat_timeout() */
	double timeout_s;        /* rendezvous timeout (store connect, node barrier) */
	char **argv;             /* the worker program and its arguments, NULL-terminated */
	int out_fd, err_fd;      /* where rank 0's stdout and stderr are shown */
	gpt_log *log;            /* launcher notices (restarts, stops) */
} gpt_launch_options;

/* Runs the workers until they all exit 0 (returns 0) or the group fails for
 * the last time. Then the return value is the exit status gpt-launch should
 * exit with: the failed worker's exit status, or 128 + its signal, or 128 +
 * the signal gpt-launch received, or GPT_EIO for a hung worker (its heartbeat
 * silent for heartbeat_s: the whole group is killed with SIGKILL), and err
 * says which rank failed and how, e.g. "rank 2 (pid 1234) was killed by
 * signal 9 (SIGKILL; output in log/workerlog.2); stopped the other 3
 * workers"; the end of that worker's log (unless it is the first local one,
 * whose output is on err_fd already) is written to err_fd before. Bad options are
 * GPT_EUSAGE. */
int gpt_launch_run(const gpt_launch_options *o, gpt_err *err);

#ifdef __cplusplus
}
#endif

#endif
