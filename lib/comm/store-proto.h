/* The rendezvous store's wire format, shared by the server and the client.
 *
 * A message is a little-endian u32 length and that many bytes. A request's
 * first byte is the operation, a reply's first byte the status. Strings are
 * a u32 length and the bytes. Timeouts travel in milliseconds so that the
 * server, which owns the data, decides when a wait has failed. */
#ifndef GPT_COMM_STORE_PROTO_H
#define GPT_COMM_STORE_PROTO_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

enum {
	STORE_OP_SET = 1,   /* key, value -> ok */
	STORE_OP_GET = 2,   /* timeout_ms, key -> ok value | timeout */
	STORE_OP_ADD = 3,   /* key, u64 delta -> ok u64 new value */
	STORE_OP_CHECK = 4, /* key -> ok u8 exists */
	STORE_OP_WAIT = 5,  /* timeout_ms, n, keys -> ok | timeout u8 missing[n] */
};

enum {
	STORE_OK = 0,
	STORE_TIMEOUT = 1,
	STORE_BAD = 2,
};

/* No message is larger: keys and values are small (ids, names, tables). */
#define STORE_MAX_MSG (64u << 20)

static inline void store_put_u32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v, p[1] = (uint8_t)(v >> 8), p[2] = (uint8_t)(v >> 16), p[3] = (uint8_t)(v >> 24);
}

static inline uint32_t store_get_u32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline void store_put_u64(uint8_t *p, uint64_t v)
{
	store_put_u32(p, (uint32_t)v);
	store_put_u32(p + 4, (uint32_t)(v >> 32));
}

static inline uint64_t store_get_u64(const uint8_t *p)
{
	return (uint64_t)store_get_u32(p) | (uint64_t)store_get_u32(p + 4) << 32;
}

/* A cursor over a received message; any read past the end sets bad. */
typedef struct store_rd {
	const uint8_t *p;
	size_t left;
	int bad;
} store_rd;

static inline uint32_t store_rd_u32(store_rd *r)
{
	if (r->bad || r->left < 4)
		return r->bad = 1, 0;
	uint32_t v = store_get_u32(r->p);
	r->p += 4, r->left -= 4;
	return v;
}

static inline uint64_t store_rd_u64(store_rd *r)
{
	if (r->bad || r->left < 8)
		return r->bad = 1, 0;
	uint64_t v = store_get_u64(r->p);
	r->p += 8, r->left -= 8;
	return v;
}

static inline uint8_t store_rd_u8(store_rd *r)
{
	if (r->bad || r->left < 1)
		return r->bad = 1, 0;
	r->left--;
	return *r->p++;
}

static inline const uint8_t *store_rd_bytes(store_rd *r, uint32_t *len)
{
	*len = store_rd_u32(r);
	if (r->bad || r->left < *len)
		return r->bad = 1, NULL;
	const uint8_t *s = r->p;
	r->p += *len, r->left -= *len;
	return s;
}

#endif
