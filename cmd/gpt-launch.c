/* gpt-launch: start the workers of a (multi-node) run, like torchrun or
 * paddle.distributed.launch. The supervision is gpt_launch_run in lib/comm. */
#include "comm/comm.h"
#include "core/core.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum {
	OPT_NPROC = 1, OPT_DEVICES, OPT_NNODES, OPT_NODE_RANK, OPT_MASTER, OPT_LOG_DIR,
	OPT_MAX_RESTARTS, OPT_GRACE, OPT_HEARTBEAT, OPT_HELP, OPT_VERSION,
};

static const gpt_opt options[] = {
	{"nproc-per-node", 0, "N", OPT_NPROC, "workers on this node (default 1, or one per --devices entry)"},
	{"devices", 0, "LIST", OPT_DEVICES, "GPUs to use, e.g. 0,1,2,3: one worker each, CUDA_VISIBLE_DEVICES set"},
	{"nnodes", 0, "N", OPT_NNODES, "number of nodes (default 1)"},
	{"node-rank", 0, "R", OPT_NODE_RANK, "this node's index, 0 to N-1 (default 0)"},
	{"master", 0, "HOST:PORT", OPT_MASTER, "node 0's rendezvous store (default 127.0.0.1, a free port)"},
	{"log-dir", 0, "DIR", OPT_LOG_DIR, "where workerlog.RANK files go (default log)"},
	{"max-restarts", 0, "N", OPT_MAX_RESTARTS, "restart the group up to N times after a failure (default 0)"},
	{"grace-period", 0, "SECONDS", OPT_GRACE, "between SIGTERM and SIGKILL when stopping workers (default 5)"},
	{"heartbeat-timeout", 0, "SECONDS", OPT_HEARTBEAT,
	 "a worker without a heartbeat this long is hung: kill the group, restart or fail (default 600; 0: off)"},
	/* torchrun's and paddle.distributed.launch's spellings (see usage) */
	{"nproc_per_node", 0, "N", OPT_NPROC, NULL},
	{"node_rank", 0, "R", OPT_NODE_RANK, NULL},
	{"rank", 0, "R", OPT_NODE_RANK, NULL}, /* paddle.distributed.launch: the node rank */
	{"log_dir", 0, "DIR", OPT_LOG_DIR, NULL},
	{"max_restarts", 0, "N", OPT_MAX_RESTARTS, NULL},
	{"gpus", 0, "LIST", OPT_DEVICES, NULL},
	{"help", 'h', NULL, OPT_HELP, "show this help and exit"},
	{"version", 'V', NULL, OPT_VERSION, "show the version and exit"},
	{NULL, 0, NULL, 0, NULL},
};

static void usage(FILE *fp)
{
	fprintf(fp, "Usage: gpt-launch [OPTIONS] [--] PROGRAM [ARGS...]\n"
		    "Start PROGRAM once per worker of this node with its rank in GPT_RANK, GPT_WORLD_SIZE,\n"
		    "GPT_LOCAL_RANK, GPT_MASTER, ... (and torchrun's RANK, WORLD_SIZE, ...); log each to\n"
		    "LOG_DIR/workerlog.RANK; stop them all when one fails.\n\nOptions:\n");
	gpt_opts_help(options, fp);
	fprintf(fp, "\nThe spellings of torchrun and python -m paddle.distributed.launch work too:\n"
		    "--nproc_per_node, --node_rank (Paddle's --rank), --log_dir, --max_restarts, and --gpus for\n"
		    "--devices.\n");
	fprintf(fp, "\nEnvironment: GPT_COMM_TIMEOUT (seconds, default 300) bounds the rendezvous;\n"
		    "GPT_HEARTBEAT_TIMEOUT is the default of --heartbeat-timeout. See gpt-launch(1).\n");
}

static int int_arg(const char *prog, const char *name, const char *s, int lo, int hi, int *out)
{
	int64_t v;
	if (gpt_parse_i64(s, &v) || v < lo || v > hi) {
		gpt_err err;
		gpt_err_set(&err, GPT_EUSAGE, "--%s '%s': expected an integer from %d to %d", name, s, lo, hi);
		return gpt_cmd_fail(prog, &err);
	}
	*out = (int)v;
	return 0;
}

int main(int argc, char **argv)
{
	const char *prog = "gpt-launch";
	gpt_err err = {0};
	gpt_launch_options o = {.nnodes = 1, .grace_s = 5, .heartbeat_s = -1, .out_fd = 1, .err_fd = 2};
	gpt_opts op;
	gpt_opts_init(&op, options, argc, argv);
	op.stop_at_first_operand = 1;
	int id, rc = 0;
	while (!rc && (id = gpt_opts_next(&op, &err)) != 0) {
		switch (id) {
		case -1: return gpt_cmd_fail(prog, &err);
		case OPT_NPROC: rc = int_arg(prog, "nproc-per-node", op.arg, 1, 4096, &o.nproc_per_node); break;
		case OPT_DEVICES: o.devices = op.arg; break;
		case OPT_NNODES: rc = int_arg(prog, "nnodes", op.arg, 1, 1 << 20, &o.nnodes); break;
		case OPT_NODE_RANK: rc = int_arg(prog, "node-rank", op.arg, 0, (1 << 20) - 1, &o.node_rank); break;
		case OPT_MASTER: o.master = op.arg; break;
		case OPT_LOG_DIR: o.log_dir = op.arg; break;
		case OPT_MAX_RESTARTS: rc = int_arg(prog, "max-restarts", op.arg, 0, 1000000, &o.max_restarts); break;
		case OPT_GRACE:
			if (gpt_parse_f64(op.arg, &o.grace_s) || !(o.grace_s >= 0) || o.grace_s > 86400) {
				gpt_err_set(&err, GPT_EUSAGE, "--grace-period '%s': expected seconds from 0 to 86400", op.arg);
				return gpt_cmd_fail(prog, &err);
			}
			break;
		case OPT_HEARTBEAT:
			if (gpt_parse_f64(op.arg, &o.heartbeat_s) || !(o.heartbeat_s >= 0) || o.heartbeat_s > 1e7) {
				gpt_err_set(&err, GPT_EUSAGE,
					    "--heartbeat-timeout '%s': expected seconds from 0 (off) to 10000000", op.arg);
				return gpt_cmd_fail(prog, &err);
			}
			break;
		case OPT_HELP: usage(stdout); return gpt_cmd_stdout_done(prog);
		case OPT_VERSION: gpt_cmd_version(prog, stdout); return gpt_cmd_stdout_done(prog);
		}
	}
	if (rc)
		return rc;
	o.argv = argv + op.index;
	gpt_log lg;
	gpt_log_init(&lg, stderr, GPT_LOG_INFO);
	o.log = &lg;
	fflush(stdout);
	if (gpt_launch_run(&o, &err))
		return gpt_cmd_fail(prog, &err);
	return 0;
}
