/* xxh3-64 checksums through libxxhash. */
#include "core.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>
#include <xxhash.h>

struct gpt_hasher {
	XXH3_state_t *st;
};

uint64_t gpt_xxh3_64(const void *p, size_t n)
{
	return XXH3_64bits(p, n);
}

gpt_hasher *gpt_hasher_new(gpt_err *err)
{
	gpt_hasher *h = gpt_malloc(sizeof *h, "hasher", err);
	if (!h)
		return NULL;
	h->st = XXH3_createState();
	if (!h->st) {
		free(h);
		gpt_err_nomem(err, 0, "hasher state");
		return NULL;
	}
	XXH3_64bits_reset(h->st);
	return h;
}

void gpt_hasher_update(gpt_hasher *h, const void *p, size_t n)
{
	XXH3_64bits_update(h->st, p, n);
}

uint64_t gpt_hasher_digest(const gpt_hasher *h)
{
	return XXH3_64bits_digest(h->st);
}

void gpt_hasher_free(gpt_hasher *h)
{
	if (h) {
		XXH3_freeState(h->st);
		free(h);
	}
}

int gpt_xxh3_file(const char *path, uint64_t *out, gpt_err *err)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return gpt_err_errno_read(err, errno, "%s", path);
	gpt_hasher *h = gpt_hasher_new(err);
	char *buf = h ? gpt_malloc(1 << 20, "read buffer", err) : NULL;
	int rc = buf ? 0 : GPT_EINTERNAL;
	while (!rc) {
		ssize_t n = read(fd, buf, 1 << 20);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			rc = gpt_err_errno(err, GPT_EIO, errno, "%s: read", path);
		else if (n == 0)
			break;
		else
			gpt_hasher_update(h, buf, (size_t)n);
	}
	if (!rc)
		*out = gpt_hasher_digest(h);
	free(buf);
	gpt_hasher_free(h);
	close(fd);
	return rc;
}

void gpt_xxh3_hex(uint64_t h, char out[17])
{
	static const char hex[] = "0123456789abcdef";
	for (int i = 15; i >= 0; i--, h >>= 4)
		out[i] = hex[h & 15];
	out[16] = '\0';
}
