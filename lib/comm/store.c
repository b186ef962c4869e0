/* The rendezvous store's client: one blocking connection, one request at a
 * time, every read bounded by a deadline so that a dead server is an error
 * and never a hang. */
#include "comm/comm.h"
#include "comm/store-proto.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

struct gpt_store {
	int fd;
	char addr[300]; /* "host:port" for messages */
	double timeout_s;
};

/* Slack on top of a wait's own timeout before the client gives up on the
 * server's answer (the server answers "timeout" itself at the deadline). */
#define ANSWER_SLACK_S 30.0

static void sleep_s(double s)
{
	struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

static int try_connect(const char *host, int port, int *fd_out, int *gai, int *e)
{
	struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
				 .ai_flags = AI_NUMERICSERV};
	struct addrinfo *ai = NULL;
	char ps[16];
	snprintf(ps, sizeof ps, "%d", port);
	*gai = getaddrinfo(host, ps, &hints, &ai);
	if (*gai)
		return -1;
	int fd = -1;
	for (struct addrinfo *a = ai; a && fd < 0; a = a->ai_next) {
		fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
		if (fd < 0) {
			*e = errno;
			continue;
		}
		if (connect(fd, a->ai_addr, a->ai_addrlen)) {
			*e = errno;
			close(fd);
			fd = -1;
		}
	}
	freeaddrinfo(ai);
	if (fd < 0)
		return -1;
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	*fd_out = fd;
	return 0;
}

int gpt_store_connect(const char *host, int port, double connect_timeout_s, double timeout_s,
		      gpt_store **out, gpt_err *err)
{
	*out = NULL;
	double start = gpt_now_s(), backoff = 0.05;
	int fd = -1, gai = 0, e = 0;
	while (try_connect(host, port, &fd, &gai, &e)) {
		double left = connect_timeout_s - (gpt_now_s() - start);
		/* A name that does not resolve will not start resolving: fail now,
		 * unless the resolver itself is only temporarily unhappy. */
		if (gai && gai != EAI_AGAIN)
			return gpt_err_set(err, GPT_EUSAGE,
					   "rendezvous store %s:%d: cannot resolve the host: %s; check --master",
					   host, port, gai_strerror(gai));
		if (left <= 0) {
			const char *why = gai ? gai_strerror(gai) : strerror(e);
			return gpt_err_set(err, GPT_EIO,
					   "rendezvous store %s:%d: not reachable within %g s (%s); "
					   "start gpt-launch on node 0 first, or check --master and the firewall",
					   host, port, connect_timeout_s, why);
		}
		sleep_s(backoff < left ? backoff : left);
		backoff = backoff * 2 > 1.0 ? 1.0 : backoff * 2;
	}
	gpt_store *st = gpt_calloc(1, sizeof *st, "rendezvous store client", err);
	if (!st)
		return close(fd), err->code;
	st->fd = fd;
	st->timeout_s = timeout_s;
	snprintf(st->addr, sizeof st->addr, "%s:%d", host, port);
	*out = st;
	return 0;
}

void gpt_store_close(gpt_store *st)
{
	if (!st)
		return;
	close(st->fd);
	free(st);
}

double gpt_store_timeout(const gpt_store *st)
{
	return st->timeout_s;
}

static int send_all(gpt_store *st, const uint8_t *p, size_t n, gpt_err *err)
{
	while (n) {
		ssize_t w = send(st->fd, p, n, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return gpt_err_errno(err, GPT_EIO, errno,
					     "rendezvous store %s: lost the connection (did gpt-launch on node 0 exit?)",
					     st->addr);
		p += w, n -= (size_t)w;
	}
	return 0;
}

static int recv_all(gpt_store *st, uint8_t *p, size_t n, double deadline, gpt_err *err)
{
	while (n) {
		double left = deadline - gpt_now_s();
		if (left <= 0)
			return gpt_err_set(err, GPT_EIO, "rendezvous store %s: no answer within %g s",
					   st->addr, st->timeout_s + ANSWER_SLACK_S);
		struct pollfd pf = {st->fd, POLLIN, 0};
		int pr = poll(&pf, 1, (int)(left * 1000) + 1);
		if (pr < 0 && errno == EINTR)
			continue;
		if (pr <= 0)
			continue;
		ssize_t r = recv(st->fd, p, n, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return gpt_err_set(err, GPT_EIO,
					   "rendezvous store %s: the server closed the connection (did gpt-launch on node 0 exit?)",
					   st->addr);
		p += r, n -= (size_t)r;
	}
	return 0;
}

/* Sends the request in req (its first 4 bytes are filled here) and reads the
 * reply into *rep (malloc'd, status first). */
static int roundtrip(gpt_store *st, gpt_buf *req, double wait_s, uint8_t **rep, uint32_t *rlen,
		     gpt_err *err)
{
	store_put_u32((uint8_t *)req->data, (uint32_t)(req->len - 4));
	int rc = send_all(st, (const uint8_t *)req->data, req->len, err);
	if (rc)
		return rc;
	double deadline = gpt_now_s() + wait_s + ANSWER_SLACK_S;
	uint8_t head[4];
	if ((rc = recv_all(st, head, 4, deadline, err)))
		return rc;
	uint32_t len = store_get_u32(head);
	if (len == 0 || len > STORE_MAX_MSG)
		return gpt_err_set(err, GPT_EIO, "rendezvous store %s: malformed reply of %u bytes",
				   st->addr, len);
	uint8_t *b = gpt_malloc(len, "rendezvous store reply", err);
	if (!b)
		return err->code;
	if ((rc = recv_all(st, b, len, deadline, err)))
		return free(b), rc;
	if (b[0] == STORE_BAD) {
		free(b);
		return gpt_err_set(err, GPT_EINTERNAL,
				   "rendezvous store %s: the server rejected a request (out of memory, or a non-integer value under an add key)",
				   st->addr);
	}
	*rep = b, *rlen = len;
	return 0;
}

static int req_begin(gpt_buf *b, uint8_t op, gpt_err *err)
{
	uint8_t h[5] = {0, 0, 0, 0, op};
	return gpt_buf_append(b, h, sizeof h, err);
}

static int req_u32(gpt_buf *b, uint32_t v, gpt_err *err)
{
	uint8_t x[4];
	store_put_u32(x, v);
	return gpt_buf_append(b, x, 4, err);
}

static int req_bytes(gpt_buf *b, const void *p, size_t n, gpt_err *err)
{
	if (n > STORE_MAX_MSG / 2)
		return gpt_err_set(err, GPT_EUSAGE, "rendezvous store: a value of %zu bytes is too large", n);
	return req_u32(b, (uint32_t)n, err) || gpt_buf_append(b, p, n, err) ? err->code : 0;
}

static uint32_t ms_of(double s)
{
	return s <= 0 ? 0 : s > 4e6 ? 4000000000u : (uint32_t)(s * 1000.0 + 0.5);
}

int gpt_store_set(gpt_store *st, const char *key, const void *val, size_t len, gpt_err *err)
{
	gpt_buf b = GPT_BUF_INIT;
	uint8_t *rep = NULL;
	uint32_t rl;
	int rc = req_begin(&b, STORE_OP_SET, err);
	if (!rc)
		rc = req_bytes(&b, key, strlen(key), err);
	if (!rc)
		rc = req_bytes(&b, val, len, err);
	if (!rc)
		rc = roundtrip(st, &b, 0, &rep, &rl, err);
	gpt_buf_free(&b);
	free(rep);
	return rc;
}

int gpt_store_get(gpt_store *st, const char *key, void **val, size_t *len, gpt_err *err)
{
	*val = NULL;
	gpt_buf b = GPT_BUF_INIT;
	uint8_t *rep = NULL;
	uint32_t rl = 0;
	int rc = req_begin(&b, STORE_OP_GET, err);
	if (!rc)
		rc = req_u32(&b, ms_of(st->timeout_s), err);
	if (!rc)
		rc = req_bytes(&b, key, strlen(key), err);
	if (!rc)
		rc = roundtrip(st, &b, st->timeout_s, &rep, &rl, err);
	gpt_buf_free(&b);
	if (rc)
		return rc;
	if (rep[0] == STORE_TIMEOUT) {
		free(rep);
		return gpt_err_set(err, GPT_EIO, "rendezvous store %s: key '%s' not set within %g s",
				   st->addr, key, st->timeout_s);
	}
	store_rd r = {rep + 1, rl - 1u, 0};
	uint32_t vl;
	const uint8_t *v = store_rd_bytes(&r, &vl);
	char *copy = r.bad ? NULL : gpt_malloc((size_t)vl + 1, "rendezvous store value", err);
	if (copy) {
		memcpy(copy, v, vl);
		copy[vl] = '\0';
		*val = copy;
		if (len)
			*len = vl;
	}
	free(rep);
	if (r.bad)
		return gpt_err_set(err, GPT_EIO, "rendezvous store %s: malformed reply to get", st->addr);
	return copy ? 0 : err->code;
}

int gpt_store_add(gpt_store *st, const char *key, int64_t delta, int64_t *out, gpt_err *err)
{
	gpt_buf b = GPT_BUF_INIT;
	uint8_t *rep = NULL;
	uint32_t rl = 0;
	uint8_t d[8];
	store_put_u64(d, (uint64_t)delta);
	int rc = req_begin(&b, STORE_OP_ADD, err);
	if (!rc)
		rc = req_bytes(&b, key, strlen(key), err);
	if (!rc)
		rc = gpt_buf_append(&b, d, 8, err);
	if (!rc)
		rc = roundtrip(st, &b, 0, &rep, &rl, err);
	gpt_buf_free(&b);
	if (rc)
		return rc;
	if (rl < 9)
		rc = gpt_err_set(err, GPT_EIO, "rendezvous store %s: malformed reply to add", st->addr);
	else if (out)
		*out = (int64_t)store_get_u64(rep + 1);
	free(rep);
	return rc;
}

int gpt_store_check(gpt_store *st, const char *key, int *exists, gpt_err *err)
{
	gpt_buf b = GPT_BUF_INIT;
	uint8_t *rep = NULL;
	uint32_t rl = 0;
	int rc = req_begin(&b, STORE_OP_CHECK, err);
	if (!rc)
		rc = req_bytes(&b, key, strlen(key), err);
	if (!rc)
		rc = roundtrip(st, &b, 0, &rep, &rl, err);
	gpt_buf_free(&b);
	if (rc)
		return rc;
	if (rl < 2)
		rc = gpt_err_set(err, GPT_EIO, "rendezvous store %s: malformed reply to check", st->addr);
	else
		*exists = rep[1] != 0;
	free(rep);
	return rc;
}

int gpt_store_wait(gpt_store *st, const char *const *keys, int n, double timeout_s, int *missing,
		   gpt_err *err)
{
	if (timeout_s < 0)
		timeout_s = st->timeout_s;
	gpt_buf b = GPT_BUF_INIT;
	uint8_t *rep = NULL;
	uint32_t rl = 0;
	int rc = req_begin(&b, STORE_OP_WAIT, err);
	if (!rc)
		rc = req_u32(&b, ms_of(timeout_s), err);
	if (!rc)
		rc = req_u32(&b, (uint32_t)n, err);
	for (int i = 0; i < n && !rc; i++)
		rc = req_bytes(&b, keys[i], strlen(keys[i]), err);
	if (!rc)
		rc = roundtrip(st, &b, timeout_s, &rep, &rl, err);
	gpt_buf_free(&b);
	if (rc)
		return rc;
	if (missing)
		for (int i = 0; i < n; i++)
			missing[i] = rep[0] == STORE_TIMEOUT && (uint32_t)i + 1 < rl && rep[1 + i];
	if (rep[0] == STORE_TIMEOUT)
		rc = gpt_err_set(err, GPT_EIO, "rendezvous store %s: keys not set within %g s",
				 st->addr, timeout_s);
	free(rep);
	return rc;
}

/* Appends "2, 5, 7" (the indices with flag set) to out. */
static void list_indices(char *out, size_t size, const int *flag, int n)
{
	size_t len = strlen(out);
	int first = 1;
	for (int i = 0; i < n && len + 16 < size; i++)
		if (flag[i]) {
			len += (size_t)snprintf(out + len, size - len, "%s%d", first ? "" : ", ", i);
			first = 0;
		}
}

int gpt_store_barrier_poll(gpt_store *st, const char *name, int index, int n, double slice_s,
			   int (*poll_fn)(void *ctx, gpt_err *err), void *ctx, gpt_err *err)
{
	size_t kl = strlen(name) + 16;
	char **keys = gpt_calloc((size_t)n, sizeof *keys, "barrier keys", err);
	int *missing = gpt_calloc((size_t)n, sizeof *missing, "barrier keys", err);
	int rc = keys && missing ? 0 : GPT_EINTERNAL;
	for (int i = 0; i < n && !rc; i++) {
		keys[i] = gpt_malloc(kl, "barrier key", err);
		if (!keys[i])
			rc = err->code;
		else
			snprintf(keys[i], kl, "%s/%d", name, i);
	}
	if (!rc)
		rc = gpt_store_set(st, keys[index], "1", 1, err);
	double deadline = gpt_now_s() + st->timeout_s;
	int timed_out = 0;
	while (!rc) {
		double left = deadline - gpt_now_s();
		int last = !poll_fn || left <= slice_s;
		rc = gpt_store_wait(st, (const char *const *)keys, n, last ? (left > 0 ? left : 0) : slice_s,
				    missing, err);
		for (int i = 0; rc && i < n; i++)
			timed_out |= missing[i];
		if (!rc || !timed_out || last)
			break;
		timed_out = 0;
		rc = poll_fn(ctx, err);
	}
	if (timed_out) {
		char who[512] = "";
		list_indices(who, sizeof who, missing, n);
		gpt_err_set(err, GPT_EIO, "barrier %s: timed out after %g s waiting for ranks %s",
			    name, st->timeout_s, who);
	}
	for (int i = 0; keys && i < n; i++)
		free(keys[i]);
	free(keys);
	free(missing);
	return rc;
}

int gpt_store_barrier(gpt_store *st, const char *name, int index, int n, gpt_err *err)
{
	return gpt_store_barrier_poll(st, name, index, n, 0, NULL, NULL, err);
}
