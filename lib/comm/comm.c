/* Communicators and groups: opening, splitting, and the checks every
 * collective shares before it reaches a backend. */
#include "comm/comm-impl.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

const gpt_comm_backend *gpt_comm_backend_find(const char *name)
{
	if (strcmp(name, "shm") == 0)
		return &gpt_comm_backend_shm;
#if GPT_HAVE_CUDA
	if (strcmp(name, "nccl") == 0)
		return &gpt_comm_backend_nccl;
#endif
	return NULL;
}

void gpt_comm_group_key(const gpt_group *g, char *out, size_t size, const char *suffix)
{
	snprintf(out, size, "%s%s/%s", g->comm->prefix, g->key, suffix);
}

void gpt_comm_list_ranks(const gpt_group *g, const int *flag, char *out, size_t size)
{
	size_t len = strlen(out);
	int first = 1;
	for (int i = 0; i < g->size && len + 32 < size; i++) {
		if (!flag[i])
			continue;
		len += (size_t)snprintf(out + len, size - len, "%s%d (world %d)", first ? "" : ", ", i,
					g->ranks[i]);
		first = 0;
	}
}

/* Names the members whose key under tag is absent, for a timeout message. */
static int exchange_timeout(gpt_group *g, const char *tag, const char *op, gpt_err *err)
{
	int *missing = calloc((size_t)g->size, sizeof *missing);
	char key[256], sub[128], who[512] = "";
	for (int i = 0; missing && i < g->size; i++) {
		snprintf(sub, sizeof sub, "%s/%d", tag, i);
		gpt_comm_group_key(g, key, sizeof key, sub);
		int ex = 1;
		gpt_err e2 = {0};
		if (gpt_store_check(g->comm->store, key, &ex, &e2) == 0)
			missing[i] = !ex;
	}
	if (missing)
		gpt_comm_list_ranks(g, missing, who, sizeof who);
	free(missing);
	g->broken = 1;
	return gpt_err_set(err, GPT_EIO, "group %s: %s timed out after %g s waiting for ranks %s",
			   g->name, op, g->timeout_s, who[0] ? who : "(none missing now: retry)");
}

int gpt_comm_exchange(gpt_group *g, const char *tag, const char *op, const char *mine,
		      char ***vals_out, gpt_err *err)
{
	*vals_out = NULL;
	gpt_store *st = g->comm->store;
	char key[256], sub[128];
	snprintf(sub, sizeof sub, "%s/%d", tag, g->rank);
	gpt_comm_group_key(g, key, sizeof key, sub);
	int rc = gpt_store_set(st, key, mine, strlen(mine), err);
	if (rc)
		return rc;
	snprintf(sub, sizeof sub, "%s/all", tag);
	char all_key[256];
	gpt_comm_group_key(g, all_key, sizeof all_key, sub);
	char *all = NULL;
	if (g->rank == 0) {
		/* Rank 0 gathers and publishes one table, so the store sees O(n)
		 * requests rather than every member reading every key. */
		gpt_buf b = GPT_BUF_INIT;
		for (int i = 0; i < g->size && !rc; i++) {
			snprintf(sub, sizeof sub, "%s/%d", tag, i);
			gpt_comm_group_key(g, key, sizeof key, sub);
			const char *k1 = key;
			int miss = 0;
			rc = gpt_store_wait(st, &k1, 1, g->timeout_s, &miss, err);
			if (rc && miss) {
				gpt_buf_free(&b);
				return exchange_timeout(g, tag, op, err);
			}
			void *v = NULL;
			if (!rc)
				rc = gpt_store_get(st, key, &v, NULL, err);
			if (!rc && strchr(v, '\n'))
				rc = gpt_err_set(err, GPT_EINTERNAL, "group %s: %s: a value holds a newline", g->name, op);
			if (!rc)
				rc = gpt_buf_puts(&b, v, err) || gpt_buf_puts(&b, "\n", err) ? GPT_EINTERNAL : 0;
			free(v);
		}
		if (!rc)
			rc = gpt_store_set(st, all_key, b.data, b.len, err);
		if (rc) {
			gpt_buf_free(&b);
			return rc;
		}
		all = b.data;
	} else {
		const char *k1 = all_key;
		int miss = 0;
		rc = gpt_store_wait(st, &k1, 1, g->timeout_s, &miss, err);
		if (rc && miss)
			return exchange_timeout(g, tag, op, err);
		void *v = NULL;
		if (!rc)
			rc = gpt_store_get(st, all_key, &v, NULL, err);
		if (rc)
			return rc;
		all = v;
	}
	char **vals = gpt_calloc((size_t)g->size, sizeof *vals, "exchanged values", err);
	char *p = all;
	for (int i = 0; vals && i < g->size; i++) {
		char *nl = p ? strchr(p, '\n') : NULL;
		if (!nl) {
			rc = gpt_err_set(err, GPT_EINTERNAL, "group %s: %s: malformed table in the store", g->name, op);
			break;
		}
		*nl = '\0';
		if (!(vals[i] = gpt_strdup(p, err))) {
			rc = err->code;
			break;
		}
		p = nl + 1;
	}
	free(all);
	if (!vals)
		return err->code;
	if (rc) {
		for (int i = 0; i < g->size; i++)
			free(vals[i]);
		free(vals);
		return rc;
	}
	*vals_out = vals;
	return 0;
}

static void free_vals(char **vals, int n)
{
	for (int i = 0; vals && i < n; i++)
		free(vals[i]);
	free(vals);
}

static gpt_group *group_alloc(gpt_comm *c, int size, gpt_err *err)
{
	gpt_group *g = gpt_calloc(1, sizeof *g, "group", err);
	if (!g)
		return NULL;
	g->ranks = gpt_calloc((size_t)size, sizeof *g->ranks, "group ranks", err);
	if (!g->ranks) {
		free(g);
		return NULL;
	}
	g->comm = c;
	g->be = c->be;
	g->size = size;
	g->timeout_s = c->timeout_s;
	return g;
}

void gpt_group_free(gpt_group *g)
{
	if (!g)
		return;
	gpt_comm_async_free(g);
	if (g->be && g->be->group_free && g->impl)
		g->be->group_free(g);
	free(g->ranks);
	free(g);
}

static int open_prefixed(gpt_comm **out, gpt_store *st, int rank, int world,
			 const gpt_comm_options *o, const char *prefix, gpt_err *err)
{
	*out = NULL;
	const char *bname = o && o->backend ? o->backend : "shm";
	const gpt_comm_backend *be = gpt_comm_backend_find(bname);
	if (!be)
		return gpt_err_set(err, GPT_EUSAGE, "communication backend '%s': %s", bname,
				   strcmp(bname, "nccl") == 0 ? "this build has no CUDA (rebuild with CUDA=1)"
							      : "expected shm or nccl");
	if (world < 1 || rank < 0 || rank >= world)
		return gpt_err_set(err, GPT_EUSAGE, "rank %d outside a world of %d", rank, world);
	gpt_comm *c = gpt_calloc(1, sizeof *c, "communicator", err);
	if (!c)
		return err->code;
	c->store = st;
	c->rank = rank;
	c->world = world;
	c->be = be;
	c->device = o ? o->device : 0;
	c->timeout_s = o && o->timeout_s > 0 ? o->timeout_s : gpt_store_timeout(st);
	snprintf(c->prefix, sizeof c->prefix, "%s", prefix);
	gpt_group *w = group_alloc(c, world, err);
	if (!w) {
		free(c);
		return err->code;
	}
	w->rank = rank;
	for (int i = 0; i < world; i++)
		w->ranks[i] = i;
	snprintf(w->key, sizeof w->key, "w");
	snprintf(w->name, sizeof w->name, "world");
	int rc = be->group_init(c, NULL, 0, rank, w, err);
	if (rc) {
		free(w->ranks);
		free(w);
		free(c);
		return rc;
	}
	c->world_group = w;
	*out = c;
	return 0;
}

int gpt_comm_open_store(gpt_comm **out, gpt_store *st, int rank, int world,
			const gpt_comm_options *o, gpt_err *err)
{
	return open_prefixed(out, st, rank, world, o, "r0/", err);
}

int gpt_comm_open(gpt_comm **out, const gpt_dist_env *env, const gpt_comm_options *o, gpt_err *err)
{
	*out = NULL;
	double timeout = o && o->timeout_s > 0 ? o->timeout_s : 0;
	int rc = 0;
	if (timeout <= 0 && (rc = gpt_comm_timeout(&timeout, err)))
		return rc;
	double ctimeout = o && o->connect_timeout_s > 0 ? o->connect_timeout_s : timeout;
	gpt_store_server *srv = NULL;
	const char *host = env->master_host;
	int port = env->master_port;
	if (env->source == GPT_DIST_SINGLE) {
		/* One process still gets a store, so that every code path is the
		 * multi-rank one. */
		if ((rc = gpt_store_server_start("127.0.0.1", 0, &srv, err)))
			return rc;
		host = "127.0.0.1";
		port = gpt_store_server_port(srv);
	} else if (env->serve_store && env->rank == 0) {
		if ((rc = gpt_store_server_start(NULL, port, &srv, err)))
			return gpt_err_prefix(err, "rank 0 (%s)", gpt_dist_source_name(env->source));
		host = "127.0.0.1";
	}
	gpt_store *st = NULL;
	if ((rc = gpt_store_connect(host, port, ctimeout, timeout, &st, err))) {
		gpt_store_server_stop(srv);
		return rc;
	}
	gpt_comm_options oo = o ? *o : (gpt_comm_options){0};
	oo.timeout_s = timeout;
	/* The prefix must be in place before the world group meets. */
	gpt_comm *c = NULL;
	char prefix[32];
	snprintf(prefix, sizeof prefix, "r%d/", env->restart_count);
	if (oo.backend && strcmp(oo.backend, "auto") == 0)
		rc = gpt_comm_resolve_auto(st, prefix, env, oo.device, &oo.backend, err);
	if (!rc)
		rc = open_prefixed(&c, st, env->rank, env->world_size, &oo, prefix, err);
	if (rc) {
		gpt_store_close(st);
		gpt_store_server_stop(srv);
		return rc;
	}
	c->server = srv;
	c->own_store = 1;
	*out = c;
	return 0;
}

void gpt_comm_close(gpt_comm *c)
{
	if (!c)
		return;
	gpt_group_free(c->world_group);
	gpt_comm_stage_free(c);
	gpt_comm_blocks_free(c);
	if (c->own_store)
		gpt_store_close(c->store);
	gpt_store_server_stop(c->server);
	free(c);
}

void gpt_comm_set_memory(gpt_comm *c, gpt_backend *be)
{
	if (c->mem != be)
		gpt_comm_stage_free(c);
	c->mem = be;
}

const char *gpt_comm_backend_name(const gpt_comm *c)
{
	return c->be->name;
}

gpt_group *gpt_comm_world(gpt_comm *c)
{
	return c->world_group;
}

gpt_store *gpt_comm_store(gpt_comm *c)
{
	return c->store;
}

/* Orders members by (key, parent rank), as ncclCommSplit does. */
typedef struct member {
	int key, prank;
} member;

static int member_cmp(const void *a, const void *b)
{
	const member *x = a, *y = b;
	if (x->key != y->key)
		return x->key < y->key ? -1 : 1;
	return x->prank < y->prank ? -1 : x->prank > y->prank;
}

int gpt_group_split(gpt_group *parent, int color, int key, const char *name, gpt_group **out,
		    gpt_err *err)
{
	*out = NULL;
	int rc = gpt_comm_async_drain(parent, "split", err);
	if (rc)
		return rc;
	if (parent->broken)
		return gpt_err_set(err, GPT_EIO, "group %s: split: unusable after an earlier failure", parent->name);
	char tag[32], mine[48];
	snprintf(tag, sizeof tag, "split%d", parent->nsplit);
	int seq = parent->nsplit++;
	snprintf(mine, sizeof mine, "%d %d", color < 0 ? -1 : color, key);
	char **vals = NULL;
	rc = gpt_comm_exchange(parent, tag, "split", mine, &vals, err);
	if (rc)
		return rc;
	member *mem = gpt_calloc((size_t)parent->size, sizeof *mem, "split table", err);
	int n = 0;
	for (int i = 0; mem && i < parent->size; i++) {
		int c2, k2;
		if (sscanf(vals[i], "%d %d", &c2, &k2) != 2) {
			rc = gpt_err_set(err, GPT_EINTERNAL, "group %s: split: malformed entry '%s'", parent->name, vals[i]);
			break;
		}
		if (color >= 0 && c2 == color)
			mem[n++] = (member){k2, i};
	}
	free_vals(vals, parent->size);
	if (!mem)
		return err->code;
	gpt_group *child = NULL;
	if (!rc && color >= 0) {
		qsort(mem, (size_t)n, sizeof *mem, member_cmp);
		child = group_alloc(parent->comm, n, err);
		if (!child)
			rc = err->code;
		for (int i = 0; child && i < n; i++) {
			child->ranks[i] = parent->ranks[mem[i].prank];
			if (mem[i].prank == parent->rank)
				child->rank = i;
		}
		if (child) {
			snprintf(child->key, sizeof child->key, "%s.%d.%d", parent->key, seq, color);
			snprintf(child->name, sizeof child->name, "%s.%d", name, color);
		}
	}
	free(mem);
	if (rc)
		return gpt_group_free(child), rc;
	rc = parent->be->group_init(parent->comm, parent, color, key, child, err);
	if (rc) {
		if (child)
			free(child->ranks), free(child);
		return rc;
	}
	*out = child;
	return 0;
}

/* ---- dispatch ----------------------------------------------------------- */

int gpt_comm_check_args(const gpt_group *g, int have, const char *op, int64_t count, gpt_dtype t,
			gpt_err *err)
{
	if (!have)
		return gpt_err_set(err, GPT_EUSAGE, "group %s: the %s backend has no %s", g->name, g->be->name, op);
	if (count < 0)
		return gpt_err_set(err, GPT_EUSAGE, "group %s: %s of %lld elements", g->name, op, (long long)count);
	if (!(t == GPT_DTYPE_F32 || t == GPT_DTYPE_BF16 || t == GPT_DTYPE_F16 || t == GPT_DTYPE_I32 ||
	      t == GPT_DTYPE_I64))
		return gpt_err_set(err, GPT_EUSAGE, "group %s: %s: dtype %s is not supported (fp32, bf16, fp16, int32, int64)",
				   g->name, op, gpt_dtype_name(t));
	return 0;
}

int gpt_comm_check_unstaged(const gpt_group *g, const char *op, const void *a, const void *b, gpt_err *err)
{
	const void *p = gpt_comm_unstaged_host(g, a) ? a : gpt_comm_unstaged_host(g, b) ? b : NULL;
	if (!p)
		return 0;
	return gpt_err_set(err, GPT_EUSAGE,
			   "group %s: %s: buffer %p is host memory, which the %s backend cannot read, and no CUDA "
			   "backend is attached to stage it through device memory; attach one first "
			   "(gpt_comm_set_memory) or pass device buffers",
			   g->name, op, p, g->be->name);
}

static int ready(gpt_group *g, int have, const char *op, int64_t count, gpt_dtype t, gpt_err *err)
{
	/* after the group's asynchronous requests, in every member's order */
	int rc = gpt_comm_async_drain(g, op, err);
	if (rc)
		return rc;
	if (g->broken)
		return gpt_err_set(err, GPT_EIO, "group %s: %s: unusable after an earlier failure", g->name, op);
	return gpt_comm_check_args(g, have, op, count, t, err);
}

/* A failed collective leaves peers mid-protocol: the group is done for. */
static int after(gpt_group *g, int rc)
{
	if (rc && rc != GPT_EUSAGE)
		g->broken = 1;
	return rc;
}

int gpt_comm_all_reduce(gpt_group *g, const void *send, void *recv, int64_t count, gpt_dtype t,
			gpt_reduce_op op, gpt_err *err)
{
	int rc = ready(g, g->be->all_reduce != NULL, "all-reduce", count, t, err);
	if (!rc)
		rc = gpt_comm_check_unstaged(g, "all-reduce", send, recv, err);
	if (rc)
		return rc;
	return after(g, g->comm->mem ? gpt_comm_stage_all_reduce(g, send, recv, count, t, op, err)
				   : g->be->all_reduce(g, send, recv, count, t, op, err));
}

int gpt_comm_reduce_scatter(gpt_group *g, const void *send, void *recv, int64_t count,
			    gpt_dtype t, gpt_reduce_op op, gpt_err *err)
{
	int rc = ready(g, g->be->reduce_scatter != NULL, "reduce-scatter", count, t, err);
	if (!rc)
		rc = gpt_comm_check_unstaged(g, "reduce-scatter", send, recv, err);
	if (rc)
		return rc;
	return after(g, g->comm->mem ? gpt_comm_stage_reduce_scatter(g, send, recv, count, t, op, err)
				   : g->be->reduce_scatter(g, send, recv, count, t, op, err));
}

int gpt_comm_all_gather(gpt_group *g, const void *send, void *recv, int64_t count, gpt_dtype t,
			gpt_err *err)
{
	int rc = ready(g, g->be->all_gather != NULL, "all-gather", count, t, err);
	if (!rc)
		rc = gpt_comm_check_unstaged(g, "all-gather", send, recv, err);
	if (rc)
		return rc;
	return after(g, g->comm->mem ? gpt_comm_stage_all_gather(g, send, recv, count, t, err)
				   : g->be->all_gather(g, send, recv, count, t, err));
}

int gpt_comm_broadcast(gpt_group *g, void *buf, int64_t count, gpt_dtype t, int root, gpt_err *err)
{
	int rc = ready(g, g->be->broadcast != NULL, "broadcast", count, t, err);
	if (!rc)
		rc = gpt_comm_check_unstaged(g, "broadcast", buf, NULL, err);
	if (!rc && (root < 0 || root >= g->size))
		rc = gpt_err_set(err, GPT_EUSAGE, "group %s: broadcast from rank %d of %d", g->name, root, g->size);
	if (rc)
		return rc;
	return after(g, g->comm->mem ? gpt_comm_stage_broadcast(g, buf, count, t, root, err)
				   : g->be->broadcast(g, buf, count, t, root, err));
}

int gpt_comm_check_counts(const gpt_group *g, const char *op, const int64_t *counts, int64_t *total,
			  gpt_err *err)
{
	*total = 0;
	for (int r = 0; r < g->size; r++) {
		if (counts[r] < 0)
			return gpt_err_set(err, GPT_EUSAGE, "group %s: %s: rank %d's piece has %lld elements", g->name,
					   op, r, (long long)counts[r]);
		*total += counts[r];
	}
	return 0;
}

int64_t gpt_comm_piece_at(const int64_t *counts, int r)
{
	int64_t at = 0;
	for (int i = 0; i < r; i++)
		at += counts[i];
	return at;
}

int gpt_comm_reduce_scatter_v(gpt_group *g, void *buf, const int64_t *counts, gpt_dtype t,
			      gpt_reduce_op op, gpt_err *err)
{
	int64_t total = 0;
	int rc = ready(g, g->be->reduce_scatter_v != NULL, "reduce-scatter", 0, t, err);
	if (!rc)
		rc = gpt_comm_check_counts(g, "reduce-scatter", counts, &total, err);
	if (!rc)
		rc = gpt_comm_check_unstaged(g, "reduce-scatter", buf, NULL, err);
	if (rc)
		return rc;
	return after(g, g->comm->mem ? gpt_comm_stage_reduce_scatter_v(g, buf, counts, total, t, op, err)
				   : g->be->reduce_scatter_v(g, buf, counts, t, op, err));
}

int gpt_comm_all_gather_v(gpt_group *g, void *buf, const int64_t *counts, gpt_dtype t, gpt_err *err)
{
	int64_t total = 0;
	int rc = ready(g, g->be->all_gather_v != NULL, "all-gather", 0, t, err);
	if (!rc)
		rc = gpt_comm_check_counts(g, "all-gather", counts, &total, err);
	if (!rc)
		rc = gpt_comm_check_unstaged(g, "all-gather", buf, NULL, err);
	if (rc)
		return rc;
	return after(g, g->comm->mem ? gpt_comm_stage_all_gather_v(g, buf, counts, total, t, err)
				   : g->be->all_gather_v(g, buf, counts, t, err));
}

int gpt_comm_p2p(gpt_group *g, const gpt_p2p *ops, int n, gpt_dtype t, gpt_err *err)
{
	int rc = ready(g, g->be->p2p != NULL, "send/recv", 0, t, err);
	for (int i = 0; !rc && i < n; i++)
		if (ops[i].peer < 0 || ops[i].peer >= g->size || ops[i].peer == g->rank || ops[i].count < 0)
			rc = gpt_err_set(err, GPT_EUSAGE, "group %s: %s %lld elements %s rank %d of %d (this is rank %d)",
					 g->name, ops[i].is_send ? "send" : "recv", (long long)ops[i].count,
					 ops[i].is_send ? "to" : "from", ops[i].peer, g->size, g->rank);
	for (int i = 0; !rc && i < n; i++)
		rc = gpt_comm_check_unstaged(g, ops[i].is_send ? "send" : "recv", ops[i].buf, NULL, err);
	if (rc)
		return rc;
	return after(g, g->comm->mem ? gpt_comm_stage_p2p(g, ops, n, t, err) : g->be->p2p(g, ops, n, t, err));
}

int gpt_comm_send(gpt_group *g, const void *buf, int64_t count, gpt_dtype t, int peer, gpt_err *err)
{
	gpt_p2p op = {peer, 1, (void *)buf, count};
	return gpt_comm_p2p(g, &op, 1, t, err);
}

int gpt_comm_recv(gpt_group *g, void *buf, int64_t count, gpt_dtype t, int peer, gpt_err *err)
{
	gpt_p2p op = {peer, 0, buf, count};
	return gpt_comm_p2p(g, &op, 1, t, err);
}

int gpt_comm_barrier(gpt_group *g, gpt_err *err)
{
	int rc = ready(g, g->be->barrier != NULL, "barrier", 0, GPT_DTYPE_F32, err);
	return rc ? rc : after(g, g->be->barrier(g, err));
}

/* ---- mesh groups ------------------------------------------------------------ */

int gpt_mesh_groups_init(gpt_mesh_groups *out, gpt_group *world, const gpt_mesh *m, gpt_err *err)
{
	memset(out, 0, sizeof *out);
	if (m->world != world->size)
		return gpt_err_set(err, GPT_EUSAGE, "mesh of %d ranks over a world of %d", m->world, world->size);
	int *ranks = gpt_calloc((size_t)m->world, sizeof *ranks, "mesh group", err);
	if (!ranks)
		return err->code;
	int rc = 0;
	for (int a = 0; a < GPT_MESH_AXES && !rc; a++) {
		int n = 0;
		int color = gpt_mesh_group(m, (gpt_mesh_axis)a, world->rank, ranks, &n);
		int key = 0;
		for (int i = 0; i < n; i++)
			if (ranks[i] == world->rank)
				key = i;
		rc = gpt_group_split(world, n ? color : -1, key, gpt_mesh_axis_name((gpt_mesh_axis)a),
				     &out->g[a], err);
	}
	free(ranks);
	if (rc)
		gpt_mesh_groups_free(out);
	return rc;
}

void gpt_mesh_groups_free(gpt_mesh_groups *mg)
{
	for (int a = 0; a < GPT_MESH_AXES; a++) {
		gpt_group_free(mg->g[a]);
		mg->g[a] = NULL;
	}
}
