/* Fuzzes the safetensors reader and the checkpoint index (index.json).
 *
 * The first byte picks the mode.
 *  - even: the rest is a safetensors file, opened from disk (gpt_st_open)
 *    and from memory (gpt_st_open_mapped); the two must agree, and every
 *    tensor of a file that opens is read whole (gpt_st_read_f32 too).
 *  - odd: a checkpoint directory step_00000001/ with the parts
 *    INDEX %%%% STATE %%%% CONFIG %%%% SHARD as index.json, state.json,
 *    config.yaml and rank-00000.safetensors, found through `latest`. With
 *    bit 1 set, the harness writes the true size and xxh3 of each of those
 *    files into index.json's "files" (where it has an object for them), so
 *    that the fuzzer gets past the checksums to the tensors and pieces. A
 *    checkpoint that opens is described, every tensor read whole in its
 *    dtype and in fp32, and consolidated into one safetensors file that
 *    must open again. */
#include "ckpt/ckpt.h"
#include "fuzz.h"
#include "infer/infer.h"

#include <jansson.h>
#include <sys/mman.h>
#include <sys/stat.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Reads beyond this many elements would only cost time: the data is there
 * (the reader checked the sizes); the harness still reads the first ones. */
#define MAX_READ_ELEMS (1 << 22)

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	fuzz_init(*argc > 0 ? (*argv)[0] : NULL);
	char p[PATH_MAX];
	fuzz_path(p, sizeof p, "ck");
	FUZZ_CHECK(mkdir(p, 0777) == 0, "%s", p);
	fuzz_path(p, sizeof p, "ck/step_00000001");
	FUZZ_CHECK(mkdir(p, 0777) == 0, "%s", p);
	fuzz_write("ck/latest", "step_00000001\n", 14);
	return 0;
}

static int64_t numel(int ndim, const int64_t *shape)
{
	int64_t n = 1;
	for (int d = 0; d < ndim; d++)
		if (__builtin_mul_overflow(n, shape[d], &n))
			return INT64_MAX;
	return n;
}

static void read_st(const gpt_st_file *f)
{
	gpt_err err = {0};
	for (int i = 0; i < f->n; i++) {
		const gpt_st_tensor *t = &f->tensors[i];
		FUZZ_CHECK(t->begin <= t->end && t->end <= (uint64_t)(f->map + f->size - f->data),
			   "tensor %s: bytes [%llu, %llu) outside the data", t->name,
			   (unsigned long long)t->begin, (unsigned long long)t->end);
		FUZZ_CHECK(gpt_st_find(f, t->name) != NULL, "tensor %s is not found by name", t->name);
		const unsigned char *p = gpt_st_data(f, t);
		uint64_t h = gpt_xxh3_64(p, (size_t)(t->end - t->begin));
		(void)h;
		int64_t n = numel(t->ndim, t->shape);
		FUZZ_CHECK((uint64_t)n * gpt_dtype_size(t->dtype) == t->end - t->begin,
			   "tensor %s: %lld elements in %llu bytes", t->name, (long long)n,
			   (unsigned long long)(t->end - t->begin));
		if (n > MAX_READ_ELEMS)
			continue;
		float *dst = malloc((size_t)(n ? n : 1) * sizeof *dst);
		FUZZ_CHECK(dst != NULL, "out of memory");
		int rc = gpt_st_read_f32(f, t->name, t->ndim, t->shape, dst, &err);
		FUZZ_CHECK(rc == 0 || rc == GPT_EDATA, "st_read_f32 %s: %s", t->name, err.msg);
		free(dst);
	}
	for (int i = 0; i < f->n_meta; i++)
		FUZZ_CHECK(gpt_st_meta(f, f->meta[2 * i]) != NULL, "metadata key lost");
}

static void fuzz_file(const uint8_t *data, size_t size)
{
	char path[PATH_MAX];
	fuzz_path(path, sizeof path, "t.safetensors");
	fuzz_write("t.safetensors", data, size);
	gpt_st_file f, g;
	gpt_err err = {0}, err2 = {0};
	int rc = gpt_st_open(&f, path, &err);
	FUZZ_SAY("file: %s", rc ? err.msg : "opened");
	void *map = mmap(NULL, size ? size : 1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	FUZZ_CHECK(map != MAP_FAILED, "mmap");
	if (size)
		memcpy(map, data, size);
	int rc2 = gpt_st_open_mapped(&g, "t.safetensors", map, size, &err2);
	FUZZ_CHECK((rc == 0) == (rc2 == 0), "from disk: %d %s; from memory: %d %s", rc, err.msg, rc2,
		   err2.msg);
	if (!rc) {
		FUZZ_CHECK(f.n == g.n && f.n_meta == g.n_meta, "the readers disagree");
		read_st(&f);
		gpt_st_close(&f);
		gpt_st_close(&g);
	} else {
		FUZZ_CHECK(rc == GPT_EDATA && err.msg[0], "a bad file is %d: %s", rc, err.msg);
	}
}

/* The size and xxh3 of the files written, into index.json's "files". */
static char *fix_index(const char *text, size_t len, const char *const *names, const fuzz_part *parts,
		       int n)
{
	json_error_t je;
	json_t *root = json_loadb(text, len, 0, &je);
	json_t *files = json_object_get(root, "files");
	if (!json_is_object(files)) {
		json_decref(root);
		return NULL;
	}
	for (int i = 0; i < n; i++) {
		json_t *e = json_object_get(files, names[i]);
		if (!json_is_object(e))
			continue;
		char hex[17];
		gpt_xxh3_hex(gpt_xxh3_64(parts[i].p, parts[i].n), hex);
		json_object_set_new(e, "size", json_integer((json_int_t)parts[i].n));
		json_object_set_new(e, "xxh3", json_string(hex));
	}
	char *out = json_dumps(root, JSON_PRESERVE_ORDER);
	json_decref(root);
	return out;
}

static void read_ckpt(gpt_ckpt *ck)
{
	gpt_err err = {0};
	gpt_buf out = GPT_BUF_INIT;
	FUZZ_CHECK(gpt_ckpt_describe(ck, &out, &err) == 0, "describe: %s", err.msg);
	gpt_buf_free(&out);
	int n = gpt_ckpt_tensor_count(ck);
	for (int i = 0; i < n; i++) {
		const char *name;
		gpt_dtype dt;
		int nd;
		const int64_t *shape;
		FUZZ_CHECK(gpt_ckpt_tensor_info(ck, i, &name, &dt, &nd, &shape) == 0, "tensor %d", i);
		int64_t e = numel(nd, shape);
		if (e > MAX_READ_ELEMS)
			continue;
		gpt_box all = gpt_box_full(nd, shape);
		void *a = malloc((size_t)(e ? e : 1) * gpt_dtype_size(dt));
		float *b = malloc((size_t)(e ? e : 1) * sizeof *b);
		FUZZ_CHECK(a && b, "out of memory");
		int rc = gpt_ckpt_read_box(ck, name, dt, nd, shape, &all, a, &err);
		FUZZ_CHECK(rc == 0, "a tensor of a checkpoint that opened does not read: %s", err.msg);
		rc = gpt_ckpt_read_box(ck, name, GPT_DTYPE_F32, nd, shape, &all, b, &err);
		FUZZ_CHECK(rc == 0 || rc == GPT_EDATA || rc == GPT_EUSAGE, "read as fp32: %d %s", rc, err.msg);
		free(a);
		free(b);
	}
	char p[PATH_MAX];
	fuzz_path(p, sizeof p, "consolidated.safetensors");
	int rc = gpt_ckpt_consolidate(ck, p, GPT_DTYPE_F32, 0, NULL, &err);
	FUZZ_SAY("consolidate: %s", rc ? err.msg : "done");
	if (!rc) {
		gpt_st_file f;
		FUZZ_CHECK(gpt_st_open(&f, p, &err) == 0, "the consolidated file does not open: %s", err.msg);
		gpt_st_close(&f);
	}
}

static void fuzz_ckpt(int fix, const uint8_t *data, size_t size)
{
	static const char *const names[] = {"index.json", "state.json", "config.yaml",
					    "rank-00000.safetensors"};
	fuzz_part part[4];
	int np = fuzz_split(data, size, part, 4);
	char *fixed = NULL;
	if (fix && np > 1)
		fixed = fix_index((const char *)part[0].p, part[0].n, names + 1, part + 1, np - 1);
	char p[PATH_MAX];
	for (int i = 0; i < 4; i++) {
		snprintf(p, sizeof p, "ck/step_00000001/%s", names[i]);
		if (i == 0 && fixed)
			fuzz_write(p, fixed, strlen(fixed));
		else if (i < np)
			fuzz_write(p, part[i].p, part[i].n);
		else {
			char q[PATH_MAX];
			fuzz_path(q, sizeof q, p);
			unlink(q);
		}
	}
	free(fixed);
	gpt_ckpt *ck;
	gpt_err err = {0};
	fuzz_path(p, sizeof p, "ck");
	int rc = gpt_ckpt_open(&ck, p, &err);
	FUZZ_SAY("checkpoint: %s", rc ? err.msg : "opened");
	if (rc) {
		FUZZ_CHECK(ck == NULL && err.msg[0], "rc %d without a message", rc);
		return;
	}
	read_ckpt(ck);
	gpt_ckpt_close(ck);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	if (data[0] & 1)
		fuzz_ckpt(data[0] & 2, data + 1, size - 1);
	else
		fuzz_file(data + 1, size - 1);
	return 0;
}
