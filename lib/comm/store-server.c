/* The rendezvous store's server: one thread, one poll loop, a hash table.
 *
 * Clients are synchronous (one request in flight each), so a GET or WAIT
 * whose keys are absent parks its client until a SET or ADD completes it or
 * its deadline passes; the loop never blocks on one client. */
#include "comm/comm.h"
#include "comm/store-proto.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

typedef struct kv {
	char *key; /* NULL: empty slot */
	uint8_t *val;
	uint32_t len;
} kv;

typedef struct client {
	int fd;
	uint8_t *in;        /* bytes received, not yet a whole message */
	size_t in_len, in_cap;
	gpt_buf out;        /* reply bytes not yet written */
	size_t out_done;
	uint8_t *pending;   /* a parked GET/WAIT request body (owned), or NULL */
	uint32_t pending_len;
	uint64_t deadline_ns;
} client;

struct gpt_store_server {
	int listen_fd;
	int wake[2];        /* a byte here stops the loop */
	int port;
	pthread_t thread;
	kv *tab;
	size_t cap, count;  /* cap is a power of two */
	client *cl;
	size_t ncl, capcl;
	atomic_int connected; /* ncl, for other threads */
};

/* ---- the table ---------------------------------------------------------- */

static size_t slot_of(const gpt_store_server *s, const char *key, size_t klen)
{
	size_t i = (size_t)gpt_xxh3_64(key, klen) & (s->cap - 1);
	while (s->tab[i].key && (strlen(s->tab[i].key) != klen || memcmp(s->tab[i].key, key, klen)))
		i = (i + 1) & (s->cap - 1);
	return i;
}

static kv *kv_find(gpt_store_server *s, const uint8_t *key, uint32_t klen)
{
	kv *e = &s->tab[slot_of(s, (const char *)key, klen)];
	return e->key ? e : NULL;
}

static int kv_grow(gpt_store_server *s)
{
	size_t ncap = s->cap * 2;
	kv *old = s->tab, *nt = calloc(ncap, sizeof *nt);
	if (!nt)
		return -1;
	size_t ocap = s->cap;
	s->tab = nt, s->cap = ncap;
	for (size_t i = 0; i < ocap; i++)
		if (old[i].key)
			s->tab[slot_of(s, old[i].key, strlen(old[i].key))] = old[i];
	free(old);
	return 0;
}

/* Sets key to val (copied). Returns 0, or -1 when out of memory. */
static int kv_set(gpt_store_server *s, const uint8_t *key, uint32_t klen, const void *val,
		  uint32_t len)
{
	if ((s->count + 1) * 2 > s->cap && kv_grow(s))
		return -1;
	kv *e = &s->tab[slot_of(s, (const char *)key, klen)];
	uint8_t *v = malloc(len + 1u);
	if (!v)
		return -1;
	memcpy(v, val, len);
	v[len] = 0;
	if (!e->key) {
		e->key = malloc(klen + 1u);
		if (!e->key)
			return free(v), -1;
		memcpy(e->key, key, klen);
		e->key[klen] = '\0';
		s->count++;
	}
	free(e->val);
	e->val = v, e->len = len;
	return 0;
}

/* ---- replies ------------------------------------------------------------ */

static void reply(client *c, uint8_t status, const void *payload, uint32_t len)
{
	uint8_t head[5];
	store_put_u32(head, len + 1u);
	head[4] = status;
	/* On allocation failure the client sees the connection stall and times
	 * out with a message; there is nobody else to tell. */
	if (gpt_buf_append(&c->out, head, sizeof head, NULL) == 0 && len)
		gpt_buf_append(&c->out, payload, len, NULL);
}

/* Tries to answer a GET or WAIT; returns 1 when answered, 0 when it must
 * wait. final: the deadline passed, answer "timeout" now. */
static int answer_wait(gpt_store_server *s, client *c, const uint8_t *body, uint32_t blen, int final)
{
	store_rd r = {body + 1, blen - 1u, 0};
	uint8_t op = body[0];
	(void)store_rd_u32(&r); /* the timeout */
	if (op == STORE_OP_GET) {
		uint32_t klen;
		const uint8_t *key = store_rd_bytes(&r, &klen);
		if (r.bad)
			return reply(c, STORE_BAD, NULL, 0), 1;
		kv *e = kv_find(s, key, klen);
		if (e) {
			uint8_t l[4];
			store_put_u32(l, e->len);
			uint8_t *buf = malloc(4u + e->len);
			if (!buf)
				return reply(c, STORE_BAD, NULL, 0), 1;
			memcpy(buf, l, 4);
			memcpy(buf + 4, e->val, e->len);
			reply(c, STORE_OK, buf, 4u + e->len);
			free(buf);
			return 1;
		}
		if (final)
			return reply(c, STORE_TIMEOUT, NULL, 0), 1;
		return 0;
	}
	uint32_t n = store_rd_u32(&r);
	if (r.bad || n > blen)
		return reply(c, STORE_BAD, NULL, 0), 1;
	uint8_t *missing = calloc(n ? n : 1, 1);
	if (!missing)
		return reply(c, STORE_BAD, NULL, 0), 1;
	int any = 0;
	for (uint32_t i = 0; i < n; i++) {
		uint32_t klen;
		const uint8_t *key = store_rd_bytes(&r, &klen);
		if (r.bad)
			break;
		missing[i] = kv_find(s, key, klen) == NULL;
		any |= missing[i];
	}
	int done = 1;
	if (r.bad)
		reply(c, STORE_BAD, NULL, 0);
	else if (!any)
		reply(c, STORE_OK, NULL, 0);
	else if (final)
		reply(c, STORE_TIMEOUT, missing, n);
	else
		done = 0;
	free(missing);
	return done;
}

/* Handles one whole request body; parks it when it must wait. */
static void handle(gpt_store_server *s, client *c, const uint8_t *body, uint32_t blen)
{
	store_rd r = {body + 1, blen - 1u, 0};
	switch (body[0]) {
	case STORE_OP_SET: {
		uint32_t klen, vlen;
		const uint8_t *key = store_rd_bytes(&r, &klen);
		const uint8_t *val = store_rd_bytes(&r, &vlen);
		if (r.bad || kv_set(s, key, klen, val, vlen))
			return reply(c, STORE_BAD, NULL, 0);
		return reply(c, STORE_OK, NULL, 0);
	}
	case STORE_OP_ADD: {
		uint32_t klen;
		const uint8_t *key = store_rd_bytes(&r, &klen);
		uint64_t delta = store_rd_u64(&r);
		if (r.bad)
			return reply(c, STORE_BAD, NULL, 0);
		kv *e = kv_find(s, key, klen);
		int64_t cur = 0;
		if (e && gpt_parse_i64((const char *)e->val, &cur))
			return reply(c, STORE_BAD, NULL, 0);
		char num[32];
		int nl = snprintf(num, sizeof num, "%lld", (long long)(int64_t)((uint64_t)cur + delta));
		if (kv_set(s, key, klen, num, (uint32_t)nl))
			return reply(c, STORE_BAD, NULL, 0);
		uint8_t out[8];
		store_put_u64(out, (uint64_t)cur + delta);
		return reply(c, STORE_OK, out, 8);
	}
	case STORE_OP_CHECK: {
		uint32_t klen;
		const uint8_t *key = store_rd_bytes(&r, &klen);
		if (r.bad)
			return reply(c, STORE_BAD, NULL, 0);
		uint8_t ex = kv_find(s, key, klen) != NULL;
		return reply(c, STORE_OK, &ex, 1);
	}
	case STORE_OP_GET:
	case STORE_OP_WAIT: {
		uint32_t ms = store_rd_u32(&r);
		if (r.bad)
			return reply(c, STORE_BAD, NULL, 0);
		if (answer_wait(s, c, body, blen, 0))
			return;
		c->pending = malloc(blen);
		if (!c->pending)
			return reply(c, STORE_BAD, NULL, 0);
		memcpy(c->pending, body, blen);
		c->pending_len = blen;
		c->deadline_ns = gpt_now_ns() + (uint64_t)ms * 1000000u;
		return;
	}
	default:
		return reply(c, STORE_BAD, NULL, 0);
	}
}

/* Re-examines the parked requests after a change or a tick. */
static void wake_waiters(gpt_store_server *s, uint64_t now)
{
	for (size_t i = 0; i < s->ncl; i++) {
		client *c = &s->cl[i];
		if (!c->pending)
			continue;
		if (answer_wait(s, c, c->pending, c->pending_len, now >= c->deadline_ns)) {
			free(c->pending);
			c->pending = NULL;
		}
	}
}

/* Parses whole messages out of c->in while the client is not parked. */
static int consume(gpt_store_server *s, client *c)
{
	size_t off = 0;
	int changed = 0;
	while (!c->pending && c->in_len - off >= 4) {
		uint32_t len = store_get_u32(c->in + off);
		if (len == 0 || len > STORE_MAX_MSG)
			return -1;
		if (c->in_len - off - 4 < len)
			break;
		const uint8_t *body = c->in + off + 4;
		changed |= body[0] == STORE_OP_SET || body[0] == STORE_OP_ADD;
		handle(s, c, body, len);
		off += 4u + len;
	}
	memmove(c->in, c->in + off, c->in_len - off);
	c->in_len -= off;
	return changed;
}

static void client_drop(gpt_store_server *s, size_t i)
{
	client *c = &s->cl[i];
	close(c->fd);
	free(c->in);
	free(c->pending);
	gpt_buf_free(&c->out);
	s->cl[i] = s->cl[--s->ncl];
	atomic_store(&s->connected, (int)s->ncl);
}

static void accept_one(gpt_store_server *s)
{
	int fd = accept4(s->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
	if (fd < 0)
		return;
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	if (s->ncl == s->capcl) {
		size_t nc = s->capcl ? s->capcl * 2 : 16;
		client *n = realloc(s->cl, nc * sizeof *n);
		if (!n) {
			close(fd);
			return;
		}
		s->cl = n, s->capcl = nc;
	}
	s->cl[s->ncl++] = (client){.fd = fd, .out = GPT_BUF_INIT};
	atomic_store(&s->connected, (int)s->ncl);
}

/* Reads what is there; returns -1 when the client is gone or misbehaved. */
static int client_read(gpt_store_server *s, client *c, int *changed)
{
	for (;;) {
		if (c->in_cap - c->in_len < 4096) {
			size_t nc = c->in_cap ? c->in_cap * 2 : 8192;
			uint8_t *n = realloc(c->in, nc);
			if (!n)
				return -1;
			c->in = n, c->in_cap = nc;
		}
		ssize_t r = read(c->fd, c->in + c->in_len, c->in_cap - c->in_len);
		if (r == 0)
			return -1;
		if (r < 0)
			return errno == EAGAIN || errno == EINTR ? 0 : -1;
		c->in_len += (size_t)r;
		int ch = consume(s, c);
		if (ch < 0)
			return -1;
		*changed |= ch;
	}
}

static int client_write(client *c)
{
	while (c->out_done < c->out.len) {
		ssize_t w = write(c->fd, c->out.data + c->out_done, c->out.len - c->out_done);
		if (w < 0)
			return errno == EAGAIN || errno == EINTR ? 0 : -1;
		c->out_done += (size_t)w;
	}
	gpt_buf_reset(&c->out);
	c->out_done = 0;
	return 0;
}

static void *serve(void *arg)
{
	gpt_store_server *s = arg;
	struct pollfd *pf = NULL;
	size_t pcap = 0;
	for (;;) {
		if (pcap < s->ncl + 2) {
			pcap = (s->ncl + 2) * 2;
			struct pollfd *n = realloc(pf, pcap * sizeof *n);
			if (!n)
				break;
			pf = n;
		}
		pf[0] = (struct pollfd){s->wake[0], POLLIN, 0};
		pf[1] = (struct pollfd){s->listen_fd, POLLIN, 0};
		uint64_t now = gpt_now_ns(), next = UINT64_MAX;
		for (size_t i = 0; i < s->ncl; i++) {
			client *c = &s->cl[i];
			pf[i + 2] = (struct pollfd){c->fd, (short)(POLLIN | (c->out.len ? POLLOUT : 0)), 0};
			if (c->pending && c->deadline_ns < next)
				next = c->deadline_ns;
		}
		int tmo = next == UINT64_MAX ? -1 : next <= now ? 0 : (int)((next - now) / 1000000u + 1);
		size_t npf = s->ncl + 2;
		if (poll(pf, npf, tmo) < 0 && errno != EINTR)
			break;
		if (pf[0].revents)
			break;
		int changed = 0;
		/* Walk backwards so that dropping a client (swap with the last)
		 * never skips one whose events are still to be handled. */
		for (size_t i = npf - 2; i-- > 0;) {
			short ev = pf[i + 2].revents;
			client *c = &s->cl[i];
			if ((ev & (POLLIN | POLLHUP | POLLERR)) && client_read(s, c, &changed))
				client_drop(s, i);
		}
		if (pf[1].revents & POLLIN)
			accept_one(s);
		uint64_t after = gpt_now_ns();
		int expired = after >= next;
		/* Answering a parked request lets its client's next requests run,
		 * which may set keys other parked requests wait for: repeat until
		 * nothing changes. */
		while (changed || expired) {
			wake_waiters(s, after);
			changed = expired = 0;
			for (size_t i = s->ncl; i-- > 0;) {
				client *c = &s->cl[i];
				int ch = !c->pending && c->in_len ? consume(s, c) : 0;
				if (ch < 0) {
					client_drop(s, i);
					continue;
				}
				changed |= ch;
			}
		}
		for (size_t i = s->ncl; i-- > 0;)
			if (s->cl[i].out.len && client_write(&s->cl[i]))
				client_drop(s, i);
	}
	free(pf);
	return NULL;
}

int gpt_store_server_start(const char *bind_host, int port, gpt_store_server **out, gpt_err *err)
{
	*out = NULL;
	struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
				 .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
	struct addrinfo *ai = NULL;
	char ps[16];
	snprintf(ps, sizeof ps, "%d", port);
	int g = getaddrinfo(bind_host, ps, &hints, &ai);
	if (g)
		return gpt_err_set(err, GPT_EUSAGE, "rendezvous store: cannot resolve %s: %s",
				   bind_host ? bind_host : "*", gai_strerror(g));
	int fd = -1, e = 0;
	/* Prefer IPv4 for the wildcard so that 127.0.0.1 clients reach it. */
	for (int pass = 0; pass < 2 && fd < 0; pass++)
		for (struct addrinfo *a = ai; a && fd < 0; a = a->ai_next) {
			if ((pass == 0) != (a->ai_family == AF_INET))
				continue;
			fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
			if (fd < 0) {
				e = errno;
				continue;
			}
			int one = 1;
			setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
			if (bind(fd, a->ai_addr, a->ai_addrlen) || listen(fd, 1024)) {
				e = errno;
				close(fd);
				fd = -1;
			}
		}
	freeaddrinfo(ai);
	if (fd < 0)
		return gpt_err_set(err, GPT_EUSAGE, "rendezvous store: cannot listen on %s:%d: %s%s",
				   bind_host ? bind_host : "*", port, strerror(e),
				   e == EADDRINUSE ? "; pick another port with --master HOST:PORT" : "");
	gpt_store_server *s = gpt_calloc(1, sizeof *s, "rendezvous store", err);
	if (!s)
		return close(fd), err->code;
	s->listen_fd = fd;
	s->cap = 256;
	s->tab = gpt_calloc(s->cap, sizeof *s->tab, "rendezvous store table", err);
	struct sockaddr_storage sa;
	socklen_t sl = sizeof sa;
	getsockname(fd, (struct sockaddr *)&sa, &sl);
	s->port = ntohs(sa.ss_family == AF_INET ? ((struct sockaddr_in *)&sa)->sin_port
						: ((struct sockaddr_in6 *)&sa)->sin6_port);
	fcntl(fd, F_SETFL, O_NONBLOCK);
	if (!s->tab || pipe2(s->wake, O_CLOEXEC)) {
		int rc = s->tab ? gpt_err_errno(err, GPT_EINTERNAL, errno, "rendezvous store: pipe") : err->code;
		close(fd);
		free(s->tab);
		free(s);
		return rc;
	}
	int pe = pthread_create(&s->thread, NULL, serve, s);
	if (pe) {
		close(fd), close(s->wake[0]), close(s->wake[1]);
		free(s->tab);
		free(s);
		return gpt_err_errno(err, GPT_EINTERNAL, pe, "rendezvous store: cannot start its thread");
	}
	*out = s;
	return 0;
}

int gpt_store_server_clients(gpt_store_server *s)
{
	return atomic_load(&s->connected);
}

int gpt_store_server_port(const gpt_store_server *s)
{
	return s->port;
}

void gpt_store_server_stop(gpt_store_server *s)
{
	if (!s)
		return;
	char b = 1;
	while (write(s->wake[1], &b, 1) < 0 && errno == EINTR)
		;
	pthread_join(s->thread, NULL);
	while (s->ncl)
		client_drop(s, s->ncl - 1);
	free(s->cl);
	for (size_t i = 0; i < s->cap; i++)
		free(s->tab[i].key), free(s->tab[i].val);
	free(s->tab);
	close(s->listen_fd);
	close(s->wake[0]);
	close(s->wake[1]);
	free(s);
}
