/* Fuzzes the dataset readers: Megatron's .idx/.bin pair, llm.c shards, and
 * the loader (split, sample index, sample reads) over what opens.
 *
 * Input: a 4-byte little-endian length L, one byte of seq_len (1..64) for
 * the loader, one byte of flags (bit 0: an optional split; bits 1-2: the split
 * read), then L bytes of .idx and the rest .bin. The .bin part alone is
 * also offered as an llm.c shard. Every document of a dataset that opens
 * must read whole, and every sample of the loader. */
#include "data/data.h"
#include "data/sample.h"
#include "fuzz.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static gpt_tokenizer *bytes_tok;
static char prefix[PATH_MAX], shard[PATH_MAX];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	fuzz_init(*argc > 0 ? (*argv)[0] : NULL);
	gpt_err err = {0};
	FUZZ_CHECK(gpt_tokenizer_open_bytes(&bytes_tok, &err) == 0, "%s", err.msg);
	fuzz_path(prefix, sizeof prefix, "ds");
	fuzz_path(shard, sizeof shard, "shard.bin");
	return 0;
}

static void read_all(const char *path)
{
	gpt_dataset *ds;
	gpt_err err = {0};
	int rc = gpt_dataset_open(&ds, path, &err);
	FUZZ_SAY("%s: %s", path, rc ? err.msg : "opened");
	if (rc) {
		FUZZ_CHECK(ds == NULL && err.msg[0], "rc %d without a message", rc);
		return;
	}
	int64_t docs = gpt_dataset_num_docs(ds), total = 0;
	FUZZ_CHECK(docs >= 0, "%lld documents", (long long)docs);
	int32_t *buf = NULL;
	for (int64_t i = 0; i < docs; i++) {
		int64_t len = gpt_dataset_doc_len(ds, i), n;
		FUZZ_CHECK(len >= 0, "document %lld: length %lld", (long long)i, (long long)len);
		FUZZ_CHECK(gpt_dataset_doc_data(ds, i, &n) != NULL && n == len, "document %lld", (long long)i);
		total += len;
		buf = realloc(buf, (size_t)(len ? len : 1) * sizeof *buf);
		FUZZ_CHECK(buf != NULL, "out of memory for %lld tokens", (long long)len);
		rc = gpt_dataset_read(ds, i, 0, len, buf, &err);
		FUZZ_CHECK(rc == 0 || rc == GPT_EDATA, "read of document %lld: %s", (long long)i, err.msg);
	}
	free(buf);
	FUZZ_CHECK(total == gpt_dataset_num_tokens(ds), "documents hold %lld tokens, the dataset says %lld",
		   (long long)total, (long long)gpt_dataset_num_tokens(ds));
	FUZZ_CHECK(gpt_dataset_doc_len(ds, docs) == -1 && gpt_dataset_doc_len(ds, -1) == -1,
		   "a document out of range has a length");
	gpt_buf out = GPT_BUF_INIT;
	rc = gpt_dataset_describe(ds, path, &out, &err);
	FUZZ_CHECK(rc == 0 || rc == GPT_EDATA, "describe: %s", err.msg);
	gpt_buf_free(&out);
	FILE *null = fopen("/dev/null", "w");
	FUZZ_CHECK(null != NULL, "/dev/null");
	rc = gpt_dataset_decode(ds, bytes_tok, -1, null, &err);
	FUZZ_CHECK(rc == 0 || rc == GPT_EDATA, "decode: %s", err.msg);
	if (docs)
		rc = gpt_dataset_decode(ds, bytes_tok, docs - 1, null, &err);
	FUZZ_CHECK(rc == 0 || rc == GPT_EDATA, "decode of the last document: %s", err.msg);
	fclose(null);
	gpt_dataset_close(ds);
}

static void load(const char *spec, int seq_len, int flags)
{
	static const char *const splits[] = {"949,50,1", "1", "1,1,1", "0,1"};
	gpt_loader *l;
	gpt_err err = {0};
	int which = (flags >> 1) & 3;
	int rc = gpt_loader_open(&l, spec, splits[which], which % 3, seq_len, 8, 1234,
				 flags & 1 ? GPT_LOADER_OPTIONAL : 0, &err);
	FUZZ_SAY("loader %s: %s", spec, rc ? err.msg : "opened");
	if (rc || !l) {
		FUZZ_CHECK(err.msg[0], "rc %d without a message", rc);
		return;
	}
	int64_t n = gpt_loader_size(l);
	FUZZ_CHECK(n >= 8, "the index covers %lld samples, fewer than asked", (long long)n);
	int32_t *out = malloc((size_t)(seq_len + 1) * sizeof *out);
	FUZZ_CHECK(out != NULL, "out of memory");
	for (int64_t k = 0; k < n && k < 64; k++) {
		rc = gpt_loader_sample(l, k, out, &err);
		FUZZ_CHECK(rc == 0 || rc == GPT_EDATA, "sample %lld: %s", (long long)k, err.msg);
	}
	free(out);
	gpt_loader_close(l);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 6)
		return 0;
	uint32_t L = (uint32_t)data[0] | (uint32_t)data[1] << 8 | (uint32_t)data[2] << 16 |
		     (uint32_t)data[3] << 24;
	int seq_len = 1 + data[4] % 64, flags = data[5];
	data += 6;
	size -= 6;
	if (L > size)
		L = (uint32_t)size;
	char p[PATH_MAX];
	fuzz_write("ds.idx", data, L);
	fuzz_write("ds.bin", data + L, size - L);
	fuzz_write("shard.bin", data + L, size - L);
	read_all(prefix);
	load(prefix, seq_len, flags);
	read_all(shard);
	load(shard, seq_len, flags);
	fuzz_path(p, sizeof p, "ds.idx");
	read_all(p); /* a path naming the .idx stands for its prefix */
	return 0;
}
