/* gpt-launch's supervisor: start this node's workers, relay and log their
 * output, stop them all when one fails or hangs, restart the group, forward
 * signals.
 *
 * Signals arrive through a signalfd (they are blocked, before the store's
 * thread starts, so that no thread takes them by default), so the whole
 * supervisor is one poll loop without handlers or global state. Each worker
 * leads its own process group: a stop reaches what it started too, and a
 * Ctrl-C on the terminal reaches the workers only through us, once. */
#include "comm/comm.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

typedef struct worker {
	pid_t pid;      /* 0: not started or reaped */
	int rank, local_rank;
	int status;     /* wait status once reaped */
	int exited;
	int out[2];     /* first local worker: its stdout and stderr pipes (read ends), else -1 */
	int log_fd;
	off_t log_start;    /* the log's size when this attempt started */
	gpt_heartbeat_slot hb;
	uint64_t hb_beats;  /* the counter when last seen; 0: not watched yet */
	int64_t hb_step;
	int hb_pid;         /* the process that beats (the worker, or what it started) */
	double hb_at;       /* when the counter last moved, by our clock */
} worker;

typedef struct launch {
	const gpt_launch_options *o;
	int nproc, world;
	char **devices;     /* one per local worker, or NULL */
	int ndevices;
	char master[300];   /* what workers get in GPT_MASTER */
	char master_host[256];
	int master_port;
	const char *log_dir;
	gpt_store_server *srv;
	gpt_store *st;      /* multi-node coordination; NULL on one node */
	char token[320];    /* random hex, then "HOST (pid N)": whose claim a node rank is */
	int sfd;            /* signalfd */
	sigset_t old_mask;
	struct sigaction old_pipe, old_xfsz;
	int term_gone[2];   /* our stdout/stderr were closed: log only */
	double timeout_s;
	double hb_timeout;  /* seconds; 0: no hang detection */
	double hb_first;    /* this attempt: when the first worker beat; 0: none yet */
	worker *w;
} launch;

static const char *sig_name(int sig, char *buf, size_t size)
{
	const char *ab = sigabbrev_np(sig);
	snprintf(buf, size, "SIG%s", ab ? ab : "?");
	return buf;
}

static void log_path(const launch *L, int rank, char *buf, size_t size)
{
	snprintf(buf, size, "%s/workerlog.%d", L->log_dir, rank);
}

/* Worker logs of ranks this run does not have, left by an earlier run with
 * more workers: gpt-logparse DIR would read them beside this run's, so the
 * launcher says which (it leaves them: they are the user's to keep). */
static void warn_stale_logs(const launch *L)
{
	DIR *d = L->o->log ? opendir(L->log_dir) : NULL;
	if (!d)
		return;
	long lo = -1, hi = -1, n = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		const char *p = e->d_name;
		if (strncmp(p, "workerlog.", 10) != 0 || p[10] < '0' || p[10] > '9')
			continue;
		char *end;
		errno = 0;
		long r = strtol(p + 10, &end, 10);
		if (*end || errno || r < L->world || (p[10] == '0' && p[11]))
			continue;
		n++;
		lo = lo < 0 || r < lo ? r : lo;
		hi = r > hi ? r : hi;
	}
	closedir(d);
	if (n == 0)
		return;
	char which[128];
	if (n == 1)
		snprintf(which, sizeof which, "workerlog.%ld, the log of a rank", lo);
	else
		snprintf(which, sizeof which, "%ld logs, workerlog.%ld to workerlog.%ld, of ranks", n, lo, hi);
	const char *it = n == 1 ? "it" : "them";
	gpt_log_printf(L->o->log, GPT_LOG_WARNING,
		       "gpt-launch: the log directory %s holds %s that this run of %d workers does not have "
		       "(an earlier run's); gpt-logparse %s would read %s with this run's logs: remove %s or give another --log-dir",
		       L->log_dir, which, L->world, L->log_dir, it, it);
}

/* ---- options ----------------------------------------------------------- */

static int parse_devices(launch *L, gpt_err *err)
{
	const char *d = L->o->devices;
	int n = 1;
	for (const char *p = d; *p; p++)
		n += *p == ',';
	L->devices = gpt_calloc((size_t)n, sizeof *L->devices, "device list", err);
	if (!L->devices)
		return err->code;
	L->ndevices = n;
	const char *p = d;
	for (int i = 0; i < n; i++) {
		size_t len = strcspn(p, ",");
		int64_t v;
		char tmp[32];
		if (len == 0 || len >= sizeof tmp)
			return gpt_err_set(err, GPT_EUSAGE, "--devices '%s': expected device numbers separated by commas", d);
		memcpy(tmp, p, len);
		tmp[len] = '\0';
		if (gpt_parse_i64(tmp, &v) || v < 0 || v > 1023)
			return gpt_err_set(err, GPT_EUSAGE, "--devices '%s': '%s' is not a device number", d, tmp);
		/* two workers on one GPU: NCCL refuses them only once they meet */
		for (int j = 0; j < i; j++) {
			int64_t w;
			if (!gpt_parse_i64(L->devices[j], &w) && w == v)
				return gpt_err_set(err, GPT_EUSAGE,
						   "--devices '%s': device %lld is listed twice; list each GPU once (one worker each)",
						   d, (long long)v);
		}
		if (!(L->devices[i] = gpt_strdup(tmp, err)))
			return err->code;
		p += len + (p[len] == ',');
	}
	if (L->o->nproc_per_node > 0 && L->o->nproc_per_node != n)
		return gpt_err_set(err, GPT_EUSAGE, "--nproc-per-node %d but --devices lists %d devices; give one of them",
				   L->o->nproc_per_node, n);
	L->nproc = n;
	return 0;
}

static int check_options(launch *L, gpt_err *err)
{
	const gpt_launch_options *o = L->o;
	if (!o->argv || !o->argv[0])
		return gpt_err_set(err, GPT_EUSAGE, "no program to launch; usage: gpt-launch [options] [--] PROGRAM ARGS...");
	L->nproc = o->nproc_per_node > 0 ? o->nproc_per_node : 1;
	if (o->devices) {
		int rc = parse_devices(L, err);
		if (rc)
			return rc;
	}
	if (L->nproc > 4096)
		return gpt_err_set(err, GPT_EUSAGE, "--nproc-per-node %d: at most 4096 workers per node", L->nproc);
	if (o->nnodes < 1 || o->node_rank < 0 || o->node_rank >= o->nnodes)
		return gpt_err_set(err, GPT_EUSAGE, "--node-rank %d: expected 0 to %d for --nnodes %d", o->node_rank,
				   o->nnodes - 1, o->nnodes);
	if (o->nnodes > 1 && !o->master)
		return gpt_err_set(err, GPT_EUSAGE,
				   "--nnodes %d needs --master HOST:PORT (node 0's address, the same on every node)",
				   o->nnodes);
	if ((int64_t)L->nproc * o->nnodes > (1 << 24))
		return gpt_err_set(err, GPT_EUSAGE, "%d nodes x %d workers is too many", o->nnodes, L->nproc);
	L->world = L->nproc * o->nnodes;
	if (o->master) {
		int rc = gpt_parse_host_port(o->master, "--master", L->master_host, sizeof L->master_host,
					     &L->master_port, err);
		if (rc)
			return rc;
	}
	L->log_dir = o->log_dir && *o->log_dir ? o->log_dir : "log";
	return 0;
}

/* ---- workers ------------------------------------------------------------ */

/* The environment of one worker: ours, minus what we set, plus what we set. */
static char **worker_env(launch *L, int local, int restart, gpt_err *err)
{
	static const char *const ours[] = {
		"GPT_RANK", "GPT_WORLD_SIZE", "GPT_LOCAL_RANK", "GPT_LOCAL_WORLD_SIZE", "GPT_NODE_RANK",
		"GPT_MASTER", "GPT_RESTART_COUNT", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE",
		"MASTER_ADDR", "MASTER_PORT", "CUDA_VISIBLE_DEVICES", GPT_HEARTBEAT_ENV, NULL};
	size_t n = 0;
	while (environ[n])
		n++;
	enum { MAX_ADD = 16 }; /* the variables set below, at most */
	char **env = gpt_calloc(n + MAX_ADD + 1, sizeof *env, "worker environment", err);
	if (!env)
		return NULL;
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		int mine = 0;
		for (const char *const *p = ours; *p && !mine; p++) {
			size_t l = strlen(*p);
			mine = strncmp(environ[i], *p, l) == 0 && environ[i][l] == '=';
			/* Without --devices, the inherited device list stays. */
			if (mine && !L->devices && strcmp(*p, "CUDA_VISIBLE_DEVICES") == 0)
				mine = 0;
		}
		if (!mine)
			env[k++] = gpt_strdup(environ[i], NULL);
	}
	int rank = L->o->node_rank * L->nproc + local;
	char host[256];
	int port;
	gpt_parse_host_port(L->master, "master", host, sizeof host, &port, NULL);
	char *add[MAX_ADD];
	int na = 0;
	/* As torchrun does: without a setting from the user, the workers of a
	 * node share its cores, so OpenMP in each does not oversubscribe them
	 * (an oversubscribed OpenMP barrier is an order of magnitude slower). */
	int threads = gpt_cpu_count() / L->nproc;
	if (asprintf(&add[na++], "GPT_RANK=%d", rank) < 0 ||
	    asprintf(&add[na++], "GPT_WORLD_SIZE=%d", L->world) < 0 ||
	    asprintf(&add[na++], "GPT_LOCAL_RANK=%d", local) < 0 ||
	    asprintf(&add[na++], "GPT_LOCAL_WORLD_SIZE=%d", L->nproc) < 0 ||
	    asprintf(&add[na++], "GPT_NODE_RANK=%d", L->o->node_rank) < 0 ||
	    asprintf(&add[na++], "GPT_MASTER=%s", L->master) < 0 ||
	    asprintf(&add[na++], "GPT_RESTART_COUNT=%d", restart) < 0 ||
	    asprintf(&add[na++], "RANK=%d", rank) < 0 ||
	    asprintf(&add[na++], "WORLD_SIZE=%d", L->world) < 0 ||
	    asprintf(&add[na++], "LOCAL_RANK=%d", local) < 0 ||
	    asprintf(&add[na++], "LOCAL_WORLD_SIZE=%d", L->nproc) < 0 ||
	    asprintf(&add[na++], "MASTER_ADDR=%s", host) < 0 ||
	    asprintf(&add[na++], "MASTER_PORT=%d", port) < 0 ||
	    (!getenv("OMP_NUM_THREADS") &&
	     asprintf(&add[na++], "OMP_NUM_THREADS=%d", threads > 0 ? threads : 1) < 0) ||
	    (L->devices && asprintf(&add[na++], "CUDA_VISIBLE_DEVICES=%s", L->devices[local]) < 0) ||
	    (L->w[local].hb.fd >= 0 &&
	     asprintf(&add[na++], "%s=%d", GPT_HEARTBEAT_ENV, L->w[local].hb.fd) < 0)) {
		add[na - 1] = NULL;
		for (int i = 0; i < na; i++)
			free(add[i]);
		for (size_t i = 0; i < k; i++)
			free(env[i]);
		free(env);
		gpt_err_nomem(err, 64, "worker environment");
		return NULL;
	}
	for (int i = 0; i < na; i++)
		env[k++] = add[i];
	env[k] = NULL;
	return env;
}

static void free_env(char **env)
{
	for (size_t i = 0; env && env[i]; i++)
		free(env[i]);
	free(env);
}

/* In the child: become a process group leader, wire up output, exec. */
static void exec_worker(launch *L, worker *w, int pout[2], int perr[2], char **env, pid_t parent)
{
	setpgid(0, 0);
	/* Should gpt-launch itself be killed, its workers must not run on. */
	prctl(PR_SET_PDEATHSIG, SIGTERM);
	if (getppid() != parent)
		_exit(128 + SIGTERM);
	sigprocmask(SIG_SETMASK, &L->old_mask, NULL);
	sigaction(SIGPIPE, &L->old_pipe, NULL);
	sigaction(SIGXFSZ, &L->old_xfsz, NULL);
	int devnull = open("/dev/null", O_RDONLY);
	if (devnull > 0) {
		dup2(devnull, 0);
		close(devnull);
	}
	if (pout[1] >= 0) {
		dup2(pout[1], 1);
		dup2(perr[1], 2);
	} else {
		dup2(w->log_fd, 1);
		dup2(w->log_fd, 2);
	}
	/* The one descriptor the worker inherits on purpose. */
	if (w->hb.fd >= 0)
		fcntl(w->hb.fd, F_SETFD, 0);
	environ = env;
	execvp(L->o->argv[0], L->o->argv);
	int e = errno;
	dprintf(2, "gpt-launch: rank %d: cannot run %s: %s\n", w->rank, L->o->argv[0], strerror(e));
	_exit(e == ENOENT ? 127 : 126);
}

static int start_worker(launch *L, int local, int restart, gpt_err *err)
{
	worker *w = &L->w[local];
	*w = (worker){.rank = L->o->node_rank * L->nproc + local, .local_rank = local, .out = {-1, -1},
		      .hb = {.fd = -1}};
	/* A fresh slot each attempt: a restarted worker starts unwatched. */
	if (L->hb_timeout > 0) {
		int rc = gpt_heartbeat_slot_create(&w->hb, err);
		if (rc)
			return gpt_err_prefix(err, "rank %d", w->rank);
	}
	char path[4096];
	log_path(L, w->rank, path, sizeof path);
	/* A restart appends, so that the failed attempt's output stays. */
	w->log_fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_APPEND | (restart ? 0 : O_TRUNC), 0644);
	if (w->log_fd < 0)
		return gpt_err_errno(err, GPT_EIO, errno, "%s: cannot open the worker log", path);
	w->log_start = lseek(w->log_fd, 0, SEEK_END);
	int pout[2] = {-1, -1}, perr[2] = {-1, -1};
	if (local == 0 && (pipe2(pout, O_CLOEXEC) || pipe2(perr, O_CLOEXEC)))
		return gpt_err_errno(err, GPT_EIO, errno, "rank %d: cannot create output pipes", w->rank);
	char **env = worker_env(L, local, restart, err);
	if (!env)
		return err->code;
	pid_t self = getpid();
	pid_t pid = fork();
	if (pid < 0) {
		free_env(env);
		return gpt_err_errno(err, GPT_EIO, errno, "rank %d: cannot fork", w->rank);
	}
	if (pid == 0)
		exec_worker(L, w, pout, perr, env, self);
	/* Also here, so that a kill of the group right away cannot miss it. */
	setpgid(pid, pid);
	free_env(env);
	w->pid = pid;
	if (local == 0) {
		close(pout[1]);
		close(perr[1]);
		w->out[0] = pout[0];
		w->out[1] = perr[0];
	}
	return 0;
}

static int running(const launch *L)
{
	int n = 0;
	for (int i = 0; i < L->nproc; i++)
		n += L->w[i].pid > 0 && !L->w[i].exited;
	return n;
}

static void signal_all(launch *L, int sig)
{
	for (int i = 0; i < L->nproc; i++)
		if (L->w[i].pid > 0 && !L->w[i].exited)
			kill(-L->w[i].pid, sig);
}

/* Copies what the first local worker wrote to its log and our terminal. */
static void relay(launch *L, int which)
{
	worker *w = &L->w[0];
	char buf[65536];
	ssize_t n = read(w->out[which], buf, sizeof buf);
	if (n <= 0) {
		if (n < 0 && errno == EINTR)
			return;
		close(w->out[which]);
		w->out[which] = -1;
		return;
	}
	gpt_write_all(w->log_fd, buf, (size_t)n, "worker log", NULL);
	/* A reader that went away (gpt-launch ... | head) costs the terminal
	 * copy, never the run. */
	if (!L->term_gone[which] &&
	    gpt_write_all(which ? L->o->err_fd : L->o->out_fd, buf, (size_t)n, "terminal", NULL))
		L->term_gone[which] = 1;
}

/* ---- one attempt ------------------------------------------------------------ */

static int all_exited_ok(const launch *L)
{
	for (int i = 0; i < L->nproc; i++)
		if (!L->w[i].exited || !WIFEXITED(L->w[i].status) || WEXITSTATUS(L->w[i].status) != 0)
			return 0;
	return 1;
}

typedef struct outcome {
	int code;          /* 0: all exited 0; else the exit status to return */
	int interrupted;   /* the signal we received, or 0 */
	int failed;        /* the local index of the worker that failed, or -1 */
	char msg[GPT_ERR_MSG_MAX];
} outcome;

static void describe_failure(const launch *L, const worker *w, int others, outcome *out)
{
	char sn[32], tail[96], log[4096];
	log_path(L, w->rank, log, sizeof log);
	out->failed = w->local_rank;
	if (others)
		snprintf(tail, sizeof tail, "; stopped the other %d worker%s", others, others == 1 ? "" : "s");
	else
		snprintf(tail, sizeof tail, "; no other worker was running");
	if (WIFSIGNALED(w->status)) {
		int sig = WTERMSIG(w->status);
		out->code = 128 + sig;
		snprintf(out->msg, sizeof out->msg, "rank %d (pid %d) was killed by signal %d (%s; output in %s)%s",
			 w->rank, (int)w->pid, sig, sig_name(sig, sn, sizeof sn), log, tail);
	} else {
		out->code = WEXITSTATUS(w->status);
		snprintf(out->msg, sizeof out->msg, "rank %d (pid %d) exited with status %d (%soutput in %s)%s",
			 w->rank, (int)w->pid, out->code, out->code == 127 ? "program not found; " : "", log, tail);
	}
}

/* The store key under which a node says that attempt `restart` failed. */
static const char *fail_key_of(int restart, char *buf, size_t size)
{
	snprintf(buf, size, "launch/%d/failed", restart);
	return buf;
}

/* Tells the other nodes' launchers (check_remote) that this attempt failed. */
static void publish_failure(launch *L, const char *fail_key, int code, const char *msg)
{
	if (!L->st)
		return;
	char val[GPT_ERR_MSG_MAX + 16];
	snprintf(val, sizeof val, "%d node %d: %s", code, L->o->node_rank, msg);
	gpt_store_set(L->st, fail_key, val, strlen(val), NULL);
}

/* ---- the claim on a node rank -------------------------------------------- */

/* Each launcher writes its token under launch/node/R before it first meets
 * the others, so a second launcher given the same --node-rank overwrites the
 * first one's. Whichever of the two reads the claim next (every launcher
 * does after each meeting and every 0.2 s while its workers run) finds a
 * token not its own: it marks the claim disputed ("!" and the message, so
 * that the other one stops too) and says so under launch/conflict, which
 * the nodes still meeting watch. A launcher that died is never the second
 * one: its successor takes the claim over silently. */
#define CONFLICT_KEY "launch/conflict"

static void claim_key(const launch *L, char *key, size_t size)
{
	snprintf(key, size, "launch/node/%d", L->o->node_rank);
}

static void make_token(launch *L)
{
	uint64_t nonce = 0;
	if (getrandom(&nonce, sizeof nonce, GRND_NONBLOCK) != (ssize_t)sizeof nonce)
		nonce = (uint64_t)(gpt_now_s() * 1e9) ^ (uint64_t)getpid() << 40;
	char host[256] = "";
	if (gethostname(host, sizeof host - 1) || !*host)
		snprintf(host, sizeof host, "an unnamed host");
	snprintf(L->token, sizeof L->token, "%016llx %s (pid %d)", (unsigned long long)nonce, host,
		 (int)getpid());
}

/* 0 while the claim on this node's rank is ours; else GPT_EUSAGE naming
 * both launchers (or the store's error). */
static int claim_check(launch *L, gpt_err *err)
{
	char key[64];
	claim_key(L, key, sizeof key);
	void *v = NULL;
	int rc = gpt_store_get(L->st, key, &v, NULL, err);
	if (rc)
		return rc;
	const char *cur = v, *other = strchr(cur, ' ');
	if (strcmp(cur, L->token) == 0) {
		free(v);
		return 0;
	}
	if (cur[0] == '!') {
		rc = gpt_err_set(err, GPT_EUSAGE, "%s", cur + 1);
	} else {
		int n = L->o->nnodes;
		rc = gpt_err_set(err, GPT_EUSAGE,
				 "--node-rank %d was given to two gpt-launch processes: %s and %s; give each of the %d nodes its own --node-rank, 0 to %d",
				 L->o->node_rank, strchr(L->token, ' ') + 1, other ? other + 1 : cur, n, n - 1);
		char note[GPT_ERR_MSG_MAX + 2];
		snprintf(note, sizeof note, "!%s", err->msg);
		gpt_store_set(L->st, key, note, strlen(note), NULL);
		gpt_store_set(L->st, CONFLICT_KEY, err->msg, strlen(err->msg), NULL);
	}
	free(v);
	return rc;
}

/* A signal that ends gpt-launch (INT, TERM, HUP, or Slurm's USR1 before a
 * time limit) while the nodes meet, before any worker started: the error
 * 128 + its number, the exit status of a launcher it stopped; 0 for none. */
static int meeting_signal(launch *L, gpt_err *err)
{
	struct signalfd_siginfo si;
	while (read(L->sfd, &si, sizeof si) == (ssize_t)sizeof si) {
		char sn[32];
		if (si.ssi_signo == SIGCHLD)
			continue;
		return gpt_err_set(err, 128 + (int)si.ssi_signo,
				   "received %s while the nodes met; no worker was started",
				   sig_name((int)si.ssi_signo, sn, sizeof sn));
	}
	return 0;
}

/* While the nodes meet: GPT_EUSAGE once any node rank is disputed, or a
 * signal's error (meeting_signal). */
static int conflict_check(void *ctx, gpt_err *err)
{
	launch *L = ctx;
	int ex = 0;
	void *v = NULL;
	int rc = meeting_signal(L, err);
	if (rc)
		return rc;
	rc = gpt_store_check(L->st, CONFLICT_KEY, &ex, err);
	if (!rc && ex && !(rc = gpt_store_get(L->st, CONFLICT_KEY, &v, NULL, err))) {
		rc = gpt_err_set(err, GPT_EUSAGE, "%s", (char *)v);
		free(v);
	}
	return rc ? rc : claim_check(L, err);
}

/* Reaps exited workers; on the first failure starts stopping the rest. */
static void reap(launch *L, outcome *out, int *stopping, double *kill_at, char *fail_key)
{
	for (;;) {
		int status;
		pid_t p = waitpid(-1, &status, WNOHANG);
		if (p <= 0)
			return;
		for (int i = 0; i < L->nproc; i++) {
			worker *w = &L->w[i];
			if (w->pid != p || w->exited)
				continue;
			w->exited = 1;
			w->status = status;
			gpt_comm_shm_remove((int)p);
			int ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
			if (ok || out->code || out->interrupted)
				continue;
			int others = running(L);
			describe_failure(L, w, others, out);
			signal_all(L, SIGTERM);
			*stopping = 1;
			*kill_at = gpt_now_s() + L->o->grace_s;
			publish_failure(L, fail_key, out->code, out->msg);
		}
	}
}

/* A failure reported by another node: stop ours too. */
static void check_remote(launch *L, outcome *out, int *stopping, double *kill_at, const char *fail_key,
			 double *next_check)
{
	double now = gpt_now_s();
	if (!L->st || out->code || out->interrupted || now < *next_check)
		return;
	*next_check = now + 0.2;
	int ex = 0;
	gpt_err e2 = {0};
	void *v = NULL;
	if (gpt_store_check(L->st, fail_key, &ex, &e2) == 0 && ex && gpt_store_get(L->st, fail_key, &v, NULL, &e2) == 0) {
		int code = atoi(v);
		const char *what = strchr(v, ' ');
		int n = running(L);
		out->code = code > 0 ? code : 1;
		snprintf(out->msg, sizeof out->msg, "%s; stopped the %d worker%s of node %d", what ? what + 1 : "another node failed",
			 n, n == 1 ? "" : "s", L->o->node_rank);
		free(v);
	} else if (!e2.code && claim_check(L, &e2) == GPT_EUSAGE) {
		/* a second launcher with our --node-rank came after the meeting */
		int n = running(L);
		out->code = GPT_EUSAGE;
		snprintf(out->msg, sizeof out->msg, "%s; stopped the %d worker%s of node %d", e2.msg, n,
			 n == 1 ? "" : "s", L->o->node_rank);
		publish_failure(L, fail_key, out->code, e2.msg);
	} else if (e2.code) {
		int n = running(L);
		out->code = GPT_EIO;
		snprintf(out->msg, sizeof out->msg, "%s; stopped the %d worker%s of node %d", e2.msg, n,
			 n == 1 ? "" : "s", L->o->node_rank);
	} else {
		return;
	}
	signal_all(L, SIGTERM);
	*stopping = 1;
	*kill_at = now + L->o->grace_s;
}

static void free_heartbeats(launch *L)
{
	for (int i = 0; L->w && i < L->nproc; i++)
		gpt_heartbeat_slot_free(&L->w[i].hb);
}

/* 1 when pid is stopped by a signal (or a tracer), from /proc. */
static int is_stopped(int pid)
{
	char path[64], buf[512];
	snprintf(path, sizeof path, "/proc/%d/stat", pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	/* "pid (comm) S ...": comm may hold spaces and parentheses */
	const char *p = strrchr(buf, ')');
	return p && p[1] == ' ' && (p[2] == 'T' || p[2] == 't');
}

/* Watches the heartbeats: a worker whose counter has not moved for the
 * timeout is hung. Watching starts with the first beat of any worker of the
 * node: the workers run the same program, so from then on one that has not
 * beaten yet is silent too (a program that never beats is never judged).
 * The whole group is killed at once, since a hung rank cannot finish its
 * step and the others wait for it in a collective, so a grace period would
 * only delay the restart. SIGKILL ends a stopped process too. */
static void check_hangs(launch *L, outcome *out, int *stopping, double *kill_at, const char *fail_key)
{
	if (L->hb_timeout <= 0 || out->code || out->interrupted || *stopping)
		return;
	double now = gpt_now_s();
	for (int i = 0; i < L->nproc; i++) {
		worker *w = &L->w[i];
		uint64_t beats;
		int64_t step;
		int pid;
		if (w->pid <= 0 || w->exited || !w->hb.map)
			continue;
		gpt_heartbeat_slot_read(&w->hb, &beats, &step, &pid);
		if (beats != w->hb_beats) {
			w->hb_beats = beats;
			w->hb_step = step;
			w->hb_pid = pid;
			w->hb_at = now;
			if (!L->hb_first)
				L->hb_first = now;
		}
	}
	if (!L->hb_first)
		return;
	/* Every rank goes quiet when one hangs: name a stopped process first,
	 * then the one furthest behind (one that never beat is furthest), then
	 * the one silent longest. */
	worker *c = NULL;
	int c_stopped = 0, late = 0;
	for (int i = 0; i < L->nproc; i++) {
		worker *w = &L->w[i];
		if (w->pid <= 0 || w->exited || !w->hb.map)
			continue;
		if (!w->hb_beats) {
			w->hb_at = L->hb_first;
			w->hb_step = -1;
		}
		late |= now - w->hb_at > L->hb_timeout;
		int st = is_stopped(w->pid) || (w->hb_pid > 0 && is_stopped(w->hb_pid));
		if (!c || st > c_stopped ||
		    (st == c_stopped && (w->hb_step < c->hb_step || (w->hb_step == c->hb_step && w->hb_at < c->hb_at)))) {
			c = w;
			c_stopped = st;
		}
	}
	if (!late || !c)
		return;
	int n = running(L);
	char last[96];
	if (c->hb_beats)
		snprintf(last, sizeof last, "the last at global step %lld", (long long)c->hb_step);
	else
		snprintf(last, sizeof last, "it never sent one");
	out->code = GPT_EIO;
	snprintf(out->msg, sizeof out->msg,
		 "rank %d (pid %d) hung: no heartbeat for %.1f s (--heartbeat-timeout %g), %s%s; killed all %d worker%s",
		 c->rank, (int)c->pid, now - c->hb_at, L->hb_timeout, last,
		 c_stopped ? ", and the process is stopped by a signal" : "", n, n == 1 ? "" : "s");
	signal_all(L, SIGKILL);
	*stopping = 1;
	*kill_at = now;
	publish_failure(L, fail_key, out->code, out->msg);
}

static int attempt(launch *L, int restart, outcome *out, gpt_err *err)
{
	memset(out, 0, sizeof *out);
	out->failed = -1;
	char fail_key[64];
	fail_key_of(restart, fail_key, sizeof fail_key);
	int rc = 0;
	for (int i = 0; i < L->nproc; i++)
		L->w[i] = (worker){.out = {-1, -1}, .log_fd = -1, .hb = {.fd = -1}};
	L->hb_first = 0;
	for (int i = 0; i < L->nproc && !rc; i++)
		rc = start_worker(L, i, restart, err);
	int stopping = 0;
	double kill_at = 0, next_check = 0;
	if (rc) {
		/* Those already started must not outlive us. */
		signal_all(L, SIGKILL);
		stopping = 1;
	}
	for (;;) {
		reap(L, out, &stopping, &kill_at, fail_key);
		check_hangs(L, out, &stopping, &kill_at, fail_key);
		check_remote(L, out, &stopping, &kill_at, fail_key, &next_check);
		worker *w0 = &L->w[0];
		if (!running(L) && w0->out[0] < 0 && w0->out[1] < 0)
			break;
		struct pollfd pf[3] = {{L->sfd, POLLIN, 0}, {w0->out[0], POLLIN, 0}, {w0->out[1], POLLIN, 0}};
		int tmo = 200;
		/* Output of a worker's children may keep a pipe open after the
		 * workers are gone: drain briefly, then let go. */
		if (!running(L))
			tmo = 500;
		int pr = poll(pf, 3, tmo);
		if (pr < 0 && errno != EINTR)
			return gpt_err_errno(err, GPT_EINTERNAL, errno, "gpt-launch: poll");
		if (pr == 0 && !running(L)) {
			for (int k = 0; k < 2; k++)
				if (w0->out[k] >= 0)
					close(w0->out[k]), w0->out[k] = -1;
		}
		for (int k = 0; k < 2; k++)
			if (w0->out[k] >= 0 && (pf[1 + k].revents & (POLLIN | POLLHUP | POLLERR)))
				relay(L, k);
		if (pf[0].revents & POLLIN) {
			struct signalfd_siginfo si;
			while (read(L->sfd, &si, sizeof si) == (ssize_t)sizeof si) {
				int sig = (int)si.ssi_signo;
				if (sig == SIGCHLD)
					continue;
				if (out->interrupted) {
					/* A second signal: no more grace. */
					signal_all(L, SIGKILL);
					continue;
				}
				char sn[32];
				if (stopping) {
					/* Stopping after a failure (the workers have their
					 * SIGTERM and grace): no restart after it. */
					out->interrupted = sig;
					size_t l = strlen(out->msg);
					snprintf(out->msg + l, sizeof out->msg - l, "; received %s while stopping: no restart",
						 sig_name(sig, sn, sizeof sn));
					continue;
				}
				int n = running(L);
				out->interrupted = sig;
				out->code = 128 + sig;
				snprintf(out->msg, sizeof out->msg, "received %s; forwarded it to the %d running worker%s",
					 sig_name(sig, sn, sizeof sn), n, n == 1 ? "" : "s");
				signal_all(L, sig);
				stopping = 1;
				kill_at = gpt_now_s() + L->o->grace_s;
				if (L->st) {
					char val[GPT_ERR_MSG_MAX + 16];
					snprintf(val, sizeof val, "%d node %d received %s", out->code, L->o->node_rank, sn);
					gpt_store_set(L->st, fail_key, val, strlen(val), NULL);
				}
			}
		}
		if (stopping && gpt_now_s() >= kill_at && running(L))
			signal_all(L, SIGKILL);
	}
	for (int i = 0; i < L->nproc; i++)
		if (L->w[i].log_fd >= 0)
			close(L->w[i].log_fd), L->w[i].log_fd = -1;
	free_heartbeats(L);
	return rc;
}

/* ---- nodes ------------------------------------------------------------------ */

/* Every node's launcher meets before each attempt, and they check that they
 * agree on the number of workers per node and that no node rank is claimed
 * twice. Each counts itself in (launch/R/arrived) before the barrier and
 * out (launch/R/checked) after checking its claim, and none goes on before
 * the two counts agree: so a second launcher with the same --node-rank that
 * arrived in time is found before any worker starts, even when the barrier
 * (by node rank) was complete without it. */
static int nodes_meet(launch *L, int restart, gpt_err *err)
{
	char key[64], val[32], in_key[64], out_key[64];
	int rc = 0;
	if (restart == 0) {
		claim_key(L, key, sizeof key);
		rc = gpt_store_set(L->st, key, L->token, strlen(L->token), err);
	}
	snprintf(in_key, sizeof in_key, "launch/%d/arrived", restart);
	snprintf(out_key, sizeof out_key, "launch/%d/checked", restart);
	if (!rc)
		rc = gpt_store_add(L->st, in_key, 1, NULL, err);
	snprintf(key, sizeof key, "launch/nproc/%d", L->o->node_rank);
	snprintf(val, sizeof val, "%d", L->nproc);
	if (!rc)
		rc = gpt_store_set(L->st, key, val, strlen(val), err);
	snprintf(key, sizeof key, "launch/%d/start", restart);
	if (!rc && (rc = gpt_store_barrier_poll(L->st, key, L->o->node_rank, L->o->nnodes, 0.2, conflict_check,
						L, err))) {
		/* so that a launcher started again in our place is not waited for twice */
		gpt_store_add(L->st, in_key, -1, NULL, NULL);
		const char *who = strstr(err->msg, "waiting for ranks ");
		if (rc == GPT_EIO && who) {
			/* the barrier's indices are node ranks: say which nodes and how to start them */
			char nodes[GPT_ERR_MSG_MAX];
			snprintf(nodes, sizeof nodes, "%s", who + strlen("waiting for ranks "));
			return gpt_err_set(err, GPT_EIO,
					   "nodes did not all start: no gpt-launch with --node-rank %s (of --nnodes %d) came to the rendezvous store at %s within %g s (GPT_COMM_TIMEOUT); start one on each node with the same --master and --nnodes and its own --node-rank, 0 to %d (without --node-rank a launcher is node 0)",
					   nodes, L->o->nnodes, L->master, gpt_store_timeout(L->st), L->o->nnodes - 1);
		}
		return rc == GPT_EUSAGE || rc > 128 ? rc
						    : gpt_err_prefix(err, "nodes did not all start (a node's rank is a barrier index)");
	}
	int mine = claim_check(L, err);
	if ((rc = gpt_store_add(L->st, out_key, 1, NULL, err)) || (rc = mine))
		return rc;
	for (double end = gpt_now_s() + gpt_store_timeout(L->st);;) {
		int64_t in = 0, out = 0;
		if ((rc = gpt_store_add(L->st, in_key, 0, &in, err)) || (rc = gpt_store_add(L->st, out_key, 0, &out, err)) ||
		    (rc = conflict_check(L, err)) || out >= in)
			break;
		if (gpt_now_s() > end)
			return gpt_err_set(err, GPT_EIO,
					   "nodes did not all start: %lld launchers met but only %lld checked their node rank within %g s (one was killed while the nodes met?)",
					   (long long)in, (long long)out, gpt_store_timeout(L->st));
		const char *ck = CONFLICT_KEY;
		gpt_store_wait(L->st, &ck, 1, 0.2, NULL, NULL);
	}
	for (int n = 0; n < L->o->nnodes && !rc; n++) {
		void *v = NULL;
		snprintf(key, sizeof key, "launch/nproc/%d", n);
		if ((rc = gpt_store_get(L->st, key, &v, NULL, err)))
			break;
		if (atoi(v) != L->nproc)
			rc = gpt_err_set(err, GPT_EUSAGE, "node %d runs %s workers but node %d runs %d; give every node the same --nproc-per-node",
					 n, (char *)v, L->o->node_rank, L->nproc);
		free(v);
	}
	return rc;
}

/* After this node's workers all succeeded: say so, and on node 0 keep the
 * store up until every node has, since the others still need it. A failure
 * elsewhere or a signal ends the wait. Returns 0 or fills out. */
static int nodes_finish(launch *L, int restart, outcome *out, gpt_err *err)
{
	char key[64], fail_key[64];
	snprintf(key, sizeof key, "launch/%d/done/%d", restart, L->o->node_rank);
	fail_key_of(restart, fail_key, sizeof fail_key);
	int rc = gpt_store_set(L->st, key, "1", 1, err);
	if (rc || L->o->node_rank != 0)
		return rc;
	int n = L->o->nnodes;
	char **keys = gpt_calloc((size_t)n, sizeof *keys, "node keys", err);
	for (int i = 0; keys && i < n && !rc; i++) {
		snprintf(key, sizeof key, "launch/%d/done/%d", restart, i);
		if (!(keys[i] = gpt_strdup(key, err)))
			rc = err->code;
	}
	if (!keys)
		return err->code;
	while (!rc) {
		gpt_err e2 = {0};
		int missing_any = gpt_store_wait(L->st, (const char *const *)keys, n, 0.2, NULL, &e2);
		if (!missing_any)
			break;
		int ex = 0;
		void *v = NULL;
		if (gpt_store_check(L->st, fail_key, &ex, err)) {
			rc = err->code;
		} else if (ex && (rc = gpt_store_get(L->st, fail_key, &v, NULL, err)) == 0) {
			const char *what = strchr(v, ' ');
			out->code = atoi(v) > 0 ? atoi(v) : 1;
			snprintf(out->msg, sizeof out->msg, "%s (the workers of node 0 had finished)",
				 what ? what + 1 : "another node failed");
			free(v);
			break;
		}
		struct signalfd_siginfo si;
		while (!rc && read(L->sfd, &si, sizeof si) == (ssize_t)sizeof si) {
			char sn[32];
			if (si.ssi_signo == SIGCHLD)
				continue;
			out->interrupted = (int)si.ssi_signo;
			out->code = 128 + (int)si.ssi_signo;
			snprintf(out->msg, sizeof out->msg, "received %s while waiting for the other nodes to finish",
				 sig_name((int)si.ssi_signo, sn, sizeof sn));
		}
		if (out->code)
			break;
	}
	for (int i = 0; i < n; i++)
		free(keys[i]);
	free(keys);
	return rc;
}

static int setup(launch *L, gpt_err *err)
{
	const gpt_launch_options *o = L->o;
	int rc = gpt_comm_timeout(&L->timeout_s, err);
	L->hb_timeout = o->heartbeat_s;
	if (!rc && o->heartbeat_s < 0)
		rc = gpt_heartbeat_timeout(&L->hb_timeout, err);
	if (rc)
		return rc;
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGCHLD);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGUSR1); /* Slurm's --signal=USR1@T before a time limit */
	/* Under nohup SIGHUP stays ignored, by us and by the workers: a blocked
	 * signal is queued even when ignored, so the signalfd would take it and
	 * a closed terminal would stop the run that nohup should keep. */
	struct sigaction hup;
	if (sigaction(SIGHUP, NULL, &hup) != 0 || hup.sa_handler != SIG_IGN)
		sigaddset(&set, SIGHUP);
	/* Before the store's thread exists, so that it inherits the mask. */
	sigprocmask(SIG_BLOCK, &set, &L->old_mask);
	/* A shell starts background jobs with SIGINT ignored: take INT and
	 * TERM back, so that the workers inherit the default and a forwarded
	 * SIGINT stops them. */
	signal(SIGINT, SIG_DFL);
	signal(SIGTERM, SIG_DFL);
	struct sigaction ign = {.sa_handler = SIG_IGN};
	sigaction(SIGPIPE, &ign, &L->old_pipe);
	/* A worker log past the file size limit (ulimit -f) costs its lines,
	 * as a full disk does, not the launcher and with it the run. */
	sigaction(SIGXFSZ, &ign, &L->old_xfsz);
	L->sfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
	if (L->sfd < 0)
		return gpt_err_errno(err, GPT_EINTERNAL, errno, "gpt-launch: signalfd");
	if (o->node_rank == 0) {
		rc = gpt_store_server_start(o->master ? NULL : "127.0.0.1", o->master ? L->master_port : 0, &L->srv, err);
		if (rc)
			return rc;
		if (o->master)
			snprintf(L->master, sizeof L->master, "%s", o->master);
		else
			snprintf(L->master, sizeof L->master, "127.0.0.1:%d", gpt_store_server_port(L->srv));
	} else {
		snprintf(L->master, sizeof L->master, "%s", o->master);
	}
	if (o->nnodes > 1) {
		make_token(L);
		const char *host = o->node_rank == 0 ? "127.0.0.1" : L->master_host;
		if ((rc = gpt_store_connect(host, L->master_port, L->timeout_s, L->timeout_s, &L->st, err)))
			return gpt_err_prefix(err, "node %d", o->node_rank);
	}
	return 0;
}

/* Shows the end of what the failed worker wrote in this attempt on our
 * standard error, as paddle.distributed.launch does: the error that made it
 * fail is usually there, and only the first worker's output reached the
 * terminal (so nothing is shown when that one failed). Lines that start
 * with '[' are gpt-train's log lines: left out, so that the terminal's copy
 * of rank 0's log (gpt-launch ... 2>&1 | tee) gains no steps of another
 * rank for gpt-logparse to read as a restart. */
static void show_failed_log(launch *L, const outcome *out)
{
	enum { MAX_BYTES = 16384, MAX_LINES = 10 };
	if (out->failed <= 0 || out->failed >= L->nproc || L->term_gone[1])
		return;
	const worker *w = &L->w[out->failed];
	char path[4096], *buf = malloc(MAX_BYTES);
	if (!buf)
		return;
	log_path(L, w->rank, path, sizeof path);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	off_t end = fd >= 0 ? lseek(fd, 0, SEEK_END) : 0, from = end - MAX_BYTES;
	if (from < w->log_start)
		from = w->log_start;
	ssize_t n = fd >= 0 && end > from ? pread(fd, buf, (size_t)(end - from), from) : 0;
	if (fd >= 0)
		close(fd);
	size_t len = n > 0 ? (size_t)n : 0, at = 0;
	/* a line cut by the start of the window is not shown */
	if (from > w->log_start) {
		const char *nl = memchr(buf, '\n', len);
		at = nl ? (size_t)(nl - buf) + 1 : len;
	}
	/* the last MAX_LINES lines to show, as [b, e) with the newline: a ring */
	size_t b[MAX_LINES], e[MAX_LINES];
	int count = 0;
	while (at < len) {
		const char *nl = memchr(buf + at, '\n', len - at);
		size_t next = nl ? (size_t)(nl - buf) + 1 : len;
		if (buf[at] != '[' && buf[at] != '\n') {
			b[count % MAX_LINES] = at;
			e[count % MAX_LINES] = next;
			count++;
		}
		at = next;
	}
	if (count) {
		char head[4200];
		int hl = snprintf(head, sizeof head, "gpt-launch: the end of %s (rank %d):\n", path, w->rank);
		int bad = gpt_write_all(L->o->err_fd, head, hl > 0 && (size_t)hl < sizeof head ? (size_t)hl : 0,
					"terminal", NULL);
		for (int k = count > MAX_LINES ? count - MAX_LINES : 0; k < count && !bad; k++) {
			size_t lb = b[k % MAX_LINES], le = e[k % MAX_LINES];
			bad = gpt_write_all(L->o->err_fd, buf + lb, le - lb, "terminal", NULL) ||
			      (buf[le - 1] != '\n' && gpt_write_all(L->o->err_fd, "\n", 1, "terminal", NULL));
		}
		if (bad)
			L->term_gone[1] = 1;
	}
	free(buf);
}

/* Node 0 serves the store: after a disputed node rank it stays until the
 * other launchers have read why and hung up, so that each says it too. */
static void linger_after_conflict(launch *L)
{
	int ex = 0;
	if (!L->srv || !L->st || gpt_store_check(L->st, CONFLICT_KEY, &ex, NULL) || !ex)
		return;
	for (double end = gpt_now_s() + L->timeout_s; gpt_now_s() < end;) {
		if (gpt_store_server_clients(L->srv) <= 1)
			break;
		poll(NULL, 0, 50);
	}
}

static void teardown(launch *L)
{
	free_heartbeats(L);
	gpt_store_close(L->st);
	gpt_store_server_stop(L->srv);
	if (L->sfd >= 0) {
		close(L->sfd);
		sigprocmask(SIG_SETMASK, &L->old_mask, NULL);
		sigaction(SIGPIPE, &L->old_pipe, NULL);
		sigaction(SIGXFSZ, &L->old_xfsz, NULL);
	}
	for (int i = 0; L->devices && i < L->ndevices; i++)
		free(L->devices[i]);
	free(L->devices);
	free(L->w);
}

int gpt_launch_run(const gpt_launch_options *o, gpt_err *err)
{
	launch L = {.o = o, .sfd = -1};
	int rc = check_options(&L, err);
	if (!rc)
		rc = setup(&L, err);
	if (!rc && !(L.w = gpt_calloc((size_t)L.nproc, sizeof *L.w, "workers", err)))
		rc = err->code;
	for (int i = 0; L.w && i < L.nproc; i++)
		L.w[i].hb.fd = -1;
	/* Only now: a launch that cannot start leaves no empty log directory. */
	if (!rc && gpt_mkdir_p(L.log_dir, err))
		rc = gpt_err_prefix(err, "--log-dir (where the workerlog.RANK files go)");
	if (!rc)
		warn_stale_logs(&L);
	for (int restart = 0; !rc; restart++) {
		char fk[64];
		if (L.st && (rc = nodes_meet(&L, restart, err))) {
			/* a node rank given twice, or another --nproc-per-node: the
			 * nodes that met without this launcher stop too */
			if (rc == GPT_EUSAGE)
				publish_failure(&L, fail_key_of(restart, fk, sizeof fk), rc, err->msg);
			break;
		}
		outcome out;
		if ((rc = attempt(&L, restart, &out, err)))
			break;
		if (out.code)
			show_failed_log(&L, &out);
		/* A forwarded SIGTERM or SIGUSR1 that every worker answered by
		 * saving and exiting 0 (gpt-train's save_on_signal) is a clean stop. */
		if (out.interrupted && all_exited_ok(&L)) {
			if (o->log)
				gpt_log_printf(o->log, GPT_LOG_INFO, "gpt-launch: %s; every worker exited 0",
					       out.msg);
			out.code = 0;
		}
		if (!out.code && L.st && (rc = nodes_finish(&L, restart, &out, err)))
			break;
		if (!out.code)
			break;
		if (out.interrupted || restart >= o->max_restarts) {
			rc = gpt_err_set(err, out.code, "%s", out.msg);
			if (o->max_restarts > 0 && !out.interrupted)
				gpt_err_prefix(err, "gave up after %d restart%s", o->max_restarts,
					       o->max_restarts == 1 ? "" : "s");
			break;
		}
		if (o->log)
			gpt_log_printf(o->log, GPT_LOG_WARNING, "gpt-launch: %s; restarting the group (restart %d of %d)",
				       out.msg, restart + 1, o->max_restarts);
	}
	linger_after_conflict(&L);
	teardown(&L);
	return rc;
}
