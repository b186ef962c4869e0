/* lib/data: the indexed dataset writer and reader, and llm.c shards. */
#include "tap.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "data/data.h"

static char dir[] = "/tmp/test-indexed.XXXXXX";

static void path(char *out, size_t size, const char *name)
{
	snprintf(out, size, "%s/%s", dir, name);
}

static void test_roundtrip(gpt_ds_dtype dtype, const char *name)
{
	gpt_err err = {0};
	char prefix[256];
	path(prefix, sizeof prefix, name);
	gpt_ds_writer *w;
	is_int(gpt_ds_writer_open(&w, prefix, dtype, &err), 0, "%s: writer opens", name);
	int32_t big = dtype == GPT_DS_INT32 ? 1000000 : 65535;
	int32_t d0[] = {1, 2, 3}, d2[] = {big, 0, 7, 50256};
	gpt_ds_writer_add(w, d0, 3, &err);
	gpt_ds_writer_add(w, NULL, 0, &err);
	gpt_ds_writer_add(w, d2, 4, &err);
	is_int(gpt_ds_writer_docs(w), 3, "%s: three documents", name);
	is_int(gpt_ds_writer_commit(w, &err), 0, "%s: commit", name);

	gpt_dataset *ds;
	if (!ok(gpt_dataset_open(&ds, prefix, &err) == 0, "%s: reader opens", name)) {
		diag("%s", err.msg);
		return;
	}
	is_int(gpt_dataset_format(ds), GPT_DS_MEGATRON, "%s: Megatron format", name);
	is_int(gpt_dataset_dtype(ds), dtype, "%s: dtype", name);
	is_int(gpt_dataset_num_docs(ds), 3, "%s: documents", name);
	is_int(gpt_dataset_num_tokens(ds), 7, "%s: tokens", name);
	is_int(gpt_dataset_doc_len(ds, 1), 0, "%s: the empty document", name);
	is_int(gpt_dataset_doc_len(ds, 3), -1, "%s: no document 3", name);
	int32_t got[4] = {0};
	is_int(gpt_dataset_read(ds, 2, 0, 4, got, &err), 0, "%s: read document 2", name);
	ok(memcmp(got, d2, sizeof d2) == 0, "%s: its tokens", name);
	is_int(gpt_dataset_read(ds, 0, 1, 2, got, &err), 0, "%s: read a slice", name);
	ok(got[0] == 2 && got[1] == 3, "%s: the slice's tokens", name);
	is_int(gpt_dataset_read(ds, 0, 2, 2, got, &err), GPT_EUSAGE, "%s: a slice past the end is refused", name);
	int64_t n;
	ok(gpt_dataset_doc_data(ds, 5, &n) == NULL && n == 0, "%s: no data for a missing document", name);
	gpt_dataset_close(ds);
}

static void test_errors(void)
{
	gpt_err err = {0};
	char prefix[256], file[300];
	path(prefix, sizeof prefix, "bad");
	gpt_ds_writer *w;
	gpt_ds_writer_open(&w, prefix, GPT_DS_UINT16, &err);
	int32_t too_big = 70000;
	is_int(gpt_ds_writer_add(w, &too_big, 1, &err), GPT_EDATA, "an id above 65535 does not fit uint16");
	gpt_ds_writer_abort(w);
	snprintf(file, sizeof file, "%s.bin", prefix);
	ok(access(file, F_OK) != 0, "abort leaves no .bin");
	gpt_dataset *ds;
	is_int(gpt_dataset_open(&ds, prefix, &err), GPT_ENOINPUT, "a missing dataset is GPT_ENOINPUT");
	is_int(gpt_ds_writer_open(&w, prefix, GPT_DS_FLOAT32, &err), GPT_EUSAGE, "float tokens cannot be written");

	/* A valid pair, then its index cut short. */
	path(prefix, sizeof prefix, "cut");
	gpt_ds_writer_open(&w, prefix, GPT_DS_UINT16, &err);
	int32_t d[] = {5, 6};
	gpt_ds_writer_add(w, d, 2, &err);
	gpt_ds_writer_commit(w, &err);
	snprintf(file, sizeof file, "%s.idx", prefix);
	is_int(truncate(file, 40), 0, "truncate the index");
	is_int(gpt_dataset_open(&ds, prefix, &err), GPT_EDATA, "a truncated index is GPT_EDATA");
	ok(strstr(err.msg, "truncated") != NULL, "and says so: %s", err.msg);
}

static void test_llmc(void)
{
	gpt_err err = {0};
	char file[256];
	path(file, sizeof file, "shard.bin");
	int32_t header[256] = {20240520, 1, 6};
	uint16_t toks[6] = {50256, 10, 11, 50256, 12, 50256};
	FILE *fp = fopen(file, "wb");
	fwrite(header, 4, 256, fp);
	fwrite(toks, 2, 6, fp);
	fclose(fp);
	gpt_dataset *ds;
	if (!ok(gpt_dataset_open(&ds, file, &err) == 0, "llm.c shard opens")) {
		diag("%s", err.msg);
		return;
	}
	is_int(gpt_dataset_format(ds), GPT_DS_LLMC, "llm.c format");
	is_int(gpt_dataset_num_docs(ds), 3, "a document starts at each end-of-text");
	is_int(gpt_dataset_doc_len(ds, 1), 2, "the second has 2 tokens");
	int32_t got[3];
	gpt_dataset_read(ds, 0, 0, 3, got, &err);
	ok(got[0] == 50256 && got[1] == 10 && got[2] == 11, "its tokens");
	gpt_dataset_close(ds);
	header[1] = 2;
	fp = fopen(file, "wb");
	fwrite(header, 4, 256, fp);
	fwrite(toks, 2, 6, fp);
	fclose(fp);
	is_int(gpt_dataset_open(&ds, file, &err), GPT_EDATA, "version 2 is refused");
}

int main(void)
{
	(void)skip_all;
	if (!mkdtemp(dir))
		return 1;
	is_int(gpt_ds_dtype_for_vocab(50257), GPT_DS_UINT16, "GPT-2 fits uint16");
	is_int(gpt_ds_dtype_for_vocab(65500), GPT_DS_INT32, "65500 ids need int32");
	is_int(gpt_ds_dtype_size(GPT_DS_UINT16), 2, "uint16 is 2 bytes");
	is_int(gpt_ds_dtype_size(9), 0, "code 9 is unknown");
	is_str(gpt_ds_dtype_name(GPT_DS_INT32), "int32", "names");
	test_roundtrip(GPT_DS_UINT16, "u16");
	test_roundtrip(GPT_DS_INT32, "i32");
	test_errors();
	test_llmc();
	char cmd[300];
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	if (system(cmd) != 0)
		diag("could not remove %s", dir);
	return done_testing();
}
