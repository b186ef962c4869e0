/* The loader: datasets, splits, blending, and reading a sample by index. */
#include "data/data.h"
#include "data/sample.h"
#include "data/lazy.h"

#include <dirent.h>
#include <errno.h>
#include <glob.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Blended samples per chunk of the blend index. */
enum { BLEND_CHUNK = 1 << 16 };

typedef struct loader_part {
	char *path;
	double weight;
	gpt_dataset *ds;
	int32_t *lens;      /* per document of the dataset */
	int64_t begin, end; /* the split's documents */
	gpt_samples samples;
} loader_part;

struct gpt_loader {
	int seq_len;
	loader_part *parts;
	int n_parts;
	int64_t n;          /* blended samples */
	/* A blend (more than one part): the samples each part gave before
	 * blended sample c x BLEND_CHUNK, n_parts per chunk c; a chunk's
	 * (part, sample of the part) pairs are built from them on demand. */
	int64_t *counts;
	gpt_lazy *blend;
	int64_t per_epoch;
	int64_t vocab;      /* ids are checked against it when > 0 */
};

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int add_part(gpt_loader *l, const char *path, double weight, gpt_err *err)
{
	loader_part *p = realloc(l->parts, (size_t)(l->n_parts + 1) * sizeof *p);
	if (!p)
		return gpt_err_nomem(err, 0, "dataset list");
	l->parts = p;
	p = &l->parts[l->n_parts];
	memset(p, 0, sizeof *p);
	p->path = strdup(path);
	p->weight = weight;
	if (!p->path)
		return gpt_err_nomem(err, strlen(path), "path");
	l->n_parts++;
	return 0;
}

/* The dataset a file in a listing belongs to, into out: PREFIX for
 * PREFIX.idx and for the PREFIX.bin beside it, the file itself for an
 * llm.c shard (a .bin alone); 0 for any other file. */
static int dataset_of(const char *path, char *out, size_t cap)
{
	size_t len = strlen(path);
	int idx = len > 4 && strcmp(path + len - 4, ".idx") == 0;
	int bin = len > 4 && strcmp(path + len - 4, ".bin") == 0;
	if (!idx && !bin)
		return 0;
	char other[4200];
	snprintf(other, sizeof other, "%.*s.idx", (int)len - 4, path);
	if (bin && !gpt_path_exists(other))
		snprintf(out, cap, "%s", path); /* an llm.c shard */
	else
		snprintf(out, cap, "%.*s", (int)len - 4, path);
	return 1;
}

/* Adds names[0..n) sorted, each once (a pair's .bin and .idx are one
 * dataset), weighted later by tokens; frees them. */
static int add_names(gpt_loader *l, char **names, int n, int rc, gpt_err *err)
{
	if (!rc)
		qsort(names, (size_t)n, sizeof *names, cmp_str);
	for (int i = 0; i < n && !rc; i++)
		if (i == 0 || strcmp(names[i], names[i - 1]) != 0)
			rc = add_part(l, names[i], -1.0, err);
	for (int i = 0; i < n; i++)
		free(names[i]);
	free(names);
	return rc;
}

static int push_name(char ***names, int *n, const char *name, gpt_err *err)
{
	char **grown = realloc(*names, (size_t)(*n + 1) * sizeof **names);
	if (!grown)
		return gpt_err_nomem(err, 0, "dataset list");
	*names = grown;
	if (!(grown[*n] = strdup(name)))
		return gpt_err_nomem(err, strlen(name), "dataset list");
	(*n)++;
	return 0;
}

/* Every dataset in a directory, sorted by name, weighted later by tokens. */
static int add_dir(gpt_loader *l, const char *dir, gpt_err *err)
{
	DIR *d = opendir(dir);
	if (!d)
		return gpt_err_errno_read(err, errno, "%s", dir);
	char **names = NULL;
	int n = 0, rc = 0, fleetx = 0;
	struct dirent *e;
	while ((e = readdir(d)) && !rc) {
		size_t len = strlen(e->d_name);
		/* what FleetX's preprocess_data.py writes: PREFIX_ids.npy, PREFIX_idx.npz */
		fleetx |= len > 8 && (strcmp(e->d_name + len - 8, "_idx.npz") == 0 ||
				      strcmp(e->d_name + len - 8, "_ids.npy") == 0);
		char path[4096], name[4096];
		snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
		if (dataset_of(path, name, sizeof name))
			rc = push_name(&names, &n, name, err);
	}
	closedir(d);
	if (!rc && n == 0 && fleetx)
		rc = gpt_err_set(err, GPT_ENOINPUT,
				 "%s: no datasets (*.idx/*.bin) in this directory, only PaddleFleetX's "
				 "*_ids.npy/*_idx.npz, which gptkit does not read; tokenize the text "
				 "again with gpt-preprocess", dir);
	else if (!rc && n == 0)
		rc = gpt_err_set(err, GPT_ENOINPUT, "%s: no datasets (*.idx/*.bin) in this directory; make one with gpt-preprocess",
				 dir);
	return add_names(l, names, n, rc, err);
}

static int is_pattern(const char *w) { return strpbrk(w, "*?") != NULL; }

/* llm.c's -i pattern ("dev/data/fineweb_train_*.bin"): every dataset of
 * the files it matches, as a directory's. */
static int add_pattern(gpt_loader *l, const char *pat, gpt_err *err)
{
	glob_t g = {0};
	char **names = NULL;
	int n = 0, rc = glob(pat, 0, NULL, &g);
	if (rc == GLOB_NOMATCH)
		rc = gpt_err_set(err, GPT_ENOINPUT, "'%s' matches no file", pat);
	else if (rc)
		rc = gpt_err_set(err, rc == GLOB_NOSPACE ? GPT_EINTERNAL : GPT_EIO, "'%s': the pattern could not be read",
				 pat);
	for (size_t i = 0; !rc && i < g.gl_pathc; i++) {
		char name[4096];
		/* another file is passed on whole: opening it names what it is not */
		rc = push_name(&names, &n, dataset_of(g.gl_pathv[i], name, sizeof name) ? name : g.gl_pathv[i], err);
	}
	globfree(&g);
	return add_names(l, names, n, rc, err);
}

/* "PREFIX", "DIR", "PATTERN" (llm.c's: * and ? in a name) or
 * "W1 PREFIX1 W2 PREFIX2 ..." */
static int parse_spec(gpt_loader *l, const char *spec, gpt_err *err)
{
	char *copy = strdup(spec), *save = NULL;
	if (!copy)
		return gpt_err_nomem(err, strlen(spec), "spec");
	/* A blend can name thousands of shards: as many words as the spec has. */
	size_t cap = strlen(spec) / 2 + 1;
	char **words = gpt_malloc(cap * sizeof *words, "dataset blend", err);
	if (!words) {
		free(copy);
		return GPT_EINTERNAL;
	}
	int n = 0, rc = 0;
	for (char *w = strtok_r(copy, " \t\n,[]", &save); w; w = strtok_r(NULL, " \t\n,[]", &save))
		words[n++] = w;
	int weights = 0; /* words that read as numbers */
	for (int i = 0; i < n; i++) {
		double w;
		weights += !gpt_parse_f64(words[i], &w);
	}
	if (n == 0)
		rc = gpt_err_set(err, GPT_EUSAGE, "'%s' names no dataset; give a dataset prefix, a directory or a blend",
				 spec);
	else if (n == 1) {
		struct stat st;
		if (stat(words[0], &st) == 0 && S_ISDIR(st.st_mode))
			rc = add_dir(l, words[0], err);
		else if (is_pattern(words[0]) && stat(words[0], &st) != 0)
			rc = add_pattern(l, words[0], err);
		else
			rc = add_part(l, words[0], 1.0, err);
	} else if (weights == 0) {
		/* Megatron-LM's blend without weights: each dataset by its size */
		for (int i = 0; i < n && !rc; i++) {
			struct stat st;
			if (is_pattern(words[i]) && stat(words[i], &st) != 0)
				rc = add_pattern(l, words[i], err);
			else
				rc = add_part(l, words[i], -1.0, err);
		}
	} else if (n % 2) {
		rc = gpt_err_set(err, GPT_EUSAGE,
				 "dataset blend '%s': expected pairs of weight and prefix, or prefixes alone", spec);
	} else {
		for (int i = 0; i < n && !rc; i += 2) {
			double w;
			struct stat st;
			if (gpt_parse_f64(words[i], &w) || !(w > 0))
				rc = gpt_err_set(err, GPT_EUSAGE, "dataset blend '%s': '%s' is not a positive weight",
						 spec, words[i]);
			else if (is_pattern(words[i + 1]) && stat(words[i + 1], &st) != 0)
				rc = gpt_err_set(err, GPT_EUSAGE,
						 "dataset blend '%s': '%s' is a pattern, and a weight goes with one dataset; "
						 "give the datasets it matches weights of their own, or leave the weights out",
						 spec, words[i + 1]);
			else
				rc = add_part(l, words[i + 1], w, err);
		}
	}
	free(words);
	free(copy);
	return rc;
}

/* Opens a part and builds its index; *empty is set when the split holds
 * none of its documents. */
static int open_part(loader_part *p, const char *split, int which, int seq_len, int64_t min_samples,
		     uint64_t seed, int *empty, gpt_err *err)
{
	int rc = gpt_dataset_open(&p->ds, p->path, err);
	if (rc)
		return rc;
	int64_t nd = gpt_dataset_num_docs(p->ds);
	double w[3];
	int64_t b[4];
	if ((rc = gpt_split_parse(split, w, err)))
		return gpt_err_prefix(err, "Data.*.dataset.split");
	gpt_split_ranges(w, nd, b);
	int64_t n = b[which + 1] - b[which];
	static const char *names[] = {"training", "validation", "test"};
	*empty = n <= 0;
	p->begin = b[which];
	p->end = b[which + 1];
	if (n <= 0 && w[which] <= 0) /* asked for: Megatron-LM's 100,0,0 */
		return gpt_err_set(err, GPT_EDATA, "%s: the %s split of '%s' has weight 0%s", p->path,
				   names[which], split, which ? "" : "; give it one in Data.Train.dataset.split");
	if (n <= 0)
		return gpt_err_set(err, GPT_EDATA,
				   "%s: the %s split of '%s' over %lld documents is empty; give it more documents or change Data.*.dataset.split",
				   p->path, names[which], split, (long long)nd);
	p->lens = gpt_malloc((size_t)(nd ? nd : 1) * sizeof *p->lens, "document lengths", err);
	int64_t *ids = gpt_malloc((size_t)n * sizeof *ids, "document ids", err);
	if (!p->lens || !ids) {
		free(ids);
		return GPT_EINTERNAL;
	}
	for (int64_t i = 0; i < nd; i++)
		p->lens[i] = (int32_t)gpt_dataset_doc_len(p->ds, i);
	for (int64_t i = 0; i < n; i++)
		ids[i] = b[which] + i;
	rc = gpt_samples_build(&p->samples, ids, n, p->lens, seq_len, min_samples, seed, err);
	free(ids);
	if (rc)
		gpt_err_prefix(err, "%s (%s split)", p->path, names[which]);
	return rc;
}

/* Megatron's blend: blended sample k goes to the part furthest behind its
 * share, given the samples count[] each part gave before it. */
static int blend_pick(const gpt_loader *l, int64_t k, const int64_t *count)
{
	int best = 0;
	double best_err = -INFINITY;
	for (int i = 0; i < l->n_parts; i++) {
		double e = l->parts[i].weight * (double)(k + 1) - (double)count[i];
		if (e > best_err) {
			best_err = e;
			best = i;
		}
	}
	return best;
}

/* A chunk of the blend index: the part of each of its samples, the
 * sample of the part, and room for the counts while they are made. */
typedef struct blend_chunk {
	int64_t *local;
	int32_t *which;
	int64_t *count;
} blend_chunk;

static blend_chunk chunk_view(void *block)
{
	blend_chunk c = {.local = block};
	c.which = (int32_t *)(c.local + BLEND_CHUNK);
	c.count = (int64_t *)(c.which + BLEND_CHUNK);
	return c;
}

static void fill_chunk(const void *ctx, int64_t c, void *block)
{
	const gpt_loader *l = ctx;
	blend_chunk v = chunk_view(block);
	memcpy(v.count, l->counts + c * l->n_parts, (size_t)l->n_parts * sizeof *v.count);
	int64_t k0 = c * BLEND_CHUNK, k1 = k0 + BLEND_CHUNK < l->n ? k0 + BLEND_CHUNK : l->n;
	for (int64_t k = k0; k < k1; k++) {
		int best = blend_pick(l, k, v.count);
		v.which[k - k0] = best;
		v.local[k - k0] = v.count[best]++;
	}
}

/* The blend's counts at every chunk, in one pass over the blended samples
 * that checks no part runs out. */
static int blend_index(gpt_loader *l, gpt_err *err)
{
	int64_t chunks = (l->n - 1) / BLEND_CHUNK + 1;
	size_t parts = (size_t)l->n_parts;
	l->counts = gpt_calloc((size_t)chunks * parts, sizeof *l->counts, "blend index", err);
	int64_t *count = gpt_calloc(parts, sizeof *count, "blend counts", err);
	l->blend = gpt_lazy_new(BLEND_CHUNK * (sizeof(int64_t) + sizeof(int32_t)) + parts * sizeof(int64_t),
				"a chunk of the blend index", err);
	int rc = l->counts && count && l->blend ? 0 : GPT_EINTERNAL;
	for (int64_t k = 0; k < l->n && !rc; k++) {
		if (k % BLEND_CHUNK == 0)
			memcpy(l->counts + k / BLEND_CHUNK * l->n_parts, count, parts * sizeof *count);
		int best = blend_pick(l, k, count);
		if (count[best]++ >= l->parts[best].samples.n_samples)
			rc = gpt_err_set(err, GPT_EINTERNAL, "dataset blend: %s ran out of samples",
					 l->parts[best].path);
	}
	free(count);
	return rc;
}

int gpt_loader_open(gpt_loader **out, const char *spec, const char *split, int which, int seq_len,
		    int64_t min_samples, uint64_t seed, int flags, gpt_err *err)
{
	*out = NULL;
	gpt_loader *l = gpt_calloc(1, sizeof *l, "loader", err);
	if (!l)
		return GPT_EINTERNAL;
	l->seq_len = seq_len;
	int rc = parse_spec(l, spec, err);
	/* Directory members and blends without weights go by their tokens. */
	double total_w = 0;
	for (int i = 0; i < l->n_parts && !rc; i++) {
		if (l->parts[i].weight < 0) {
			gpt_dataset *ds;
			if (!(rc = gpt_dataset_open(&ds, l->parts[i].path, err))) {
				l->parts[i].weight = (double)gpt_dataset_num_tokens(ds);
				gpt_dataset_close(ds);
			}
		}
		total_w += rc ? 0 : l->parts[i].weight;
	}
	if (!rc && !(total_w > 0))
		rc = gpt_err_set(err, GPT_EDATA, "%s: the datasets hold no tokens", spec);
	int n_empty = 0;
	gpt_err why = {0}; /* the first part whose split is empty */
	for (int i = 0; i < l->n_parts && !rc; i++) {
		loader_part *p = &l->parts[i];
		p->weight /= total_w;
		/* a little more than its share, so the greedy blend never runs out */
		int64_t need = (int64_t)ceil((double)min_samples * p->weight * 1.005) + 1;
		int empty = 0;
		rc = open_part(p, split, which, seq_len, need, seed + (uint64_t)i * 0x9e37u, &empty, err);
		l->per_epoch += rc ? 0 : p->samples.per_epoch;
		if (empty && (flags & GPT_LOADER_OPTIONAL)) {
			if (!n_empty++ && err)
				why = *err;
			rc = 0;
		}
	}
	if (!rc && n_empty && n_empty == l->n_parts) {
		/* an optional split none of the datasets has */
		if (err)
			*err = why;
		gpt_loader_close(l);
		return 0;
	}
	if (!rc && n_empty) {
		rc = GPT_EDATA;
		if (err)
			*err = why;
	}
	if (!rc) {
		/* One dataset: all it built (at least an epoch). A blend: the
		 * samples asked for, which every part was sized to cover. */
		if (l->n_parts == 1)
			l->n = l->parts[0].samples.n_samples;
		else {
			l->n = min_samples > 0 ? min_samples : 1;
			rc = blend_index(l, err);
		}
	}
	if (rc) {
		gpt_loader_close(l);
		return rc;
	}
	*out = l;
	return 0;
}

int64_t gpt_loader_epoch_samples(const gpt_loader *l) { return l->per_epoch; }
int64_t gpt_loader_size(const gpt_loader *l) { return l->n; }
int gpt_loader_num_datasets(const gpt_loader *l) { return l->n_parts; }

const gpt_dataset *gpt_loader_dataset(const gpt_loader *l, int i, const char **path)
{
	*path = l->parts[i].path;
	return l->parts[i].ds;
}

int gpt_loader_sample(const gpt_loader *l, int64_t k, int32_t *out, gpt_err *err)
{
	if (k < 0 || k >= l->n)
		return gpt_err_set(err, GPT_EINTERNAL, "loader: sample %lld outside the index of %lld",
				   (long long)k, (long long)l->n);
	int which = 0;
	int64_t local = k;
	if (l->blend) {
		const void *block = gpt_lazy_lock(l->blend, k / BLEND_CHUNK, fill_chunk, l, err);
		if (!block)
			return GPT_EINTERNAL;
		blend_chunk v = chunk_view((void *)block);
		which = v.which[k % BLEND_CHUNK];
		local = v.local[k % BLEND_CHUNK];
		gpt_lazy_unlock(l->blend);
	}
	const loader_part *p = &l->parts[which];
	/* the pieces of a sample: a few documents, unless they are tiny */
	gpt_sample_piece few[64], *pc = few;
	int64_t n = gpt_samples_pieces(&p->samples, local, pc, 64, err);
	if (n > 64 && (pc = gpt_malloc((size_t)n * sizeof *pc, "sample pieces", err)))
		n = gpt_samples_pieces(&p->samples, local, pc, n, err);
	int rc = n < 0 || !pc ? GPT_EINTERNAL : 0;
	for (int64_t i = 0, got = 0; i < n && !rc; got += pc[i++].len) {
		rc = gpt_dataset_read(p->ds, pc[i].doc, pc[i].off, pc[i].len, out + got, err);
		if (!rc && l->vocab > 0)
			rc = gpt_dataset_check_ids(out + got, pc[i].len, l->vocab, pc[i].doc, pc[i].off, err);
		if (rc)
			gpt_err_prefix(err, "%s", p->path);
	}
	if (pc != few)
		free(pc);
	return rc;
}

int gpt_loader_disjoint(const gpt_loader *a, const gpt_loader *b, gpt_err *err)
{
	for (int i = 0; i < a->n_parts; i++)
		for (int j = 0; j < b->n_parts; j++) {
			const loader_part *p = &a->parts[i], *q = &b->parts[j];
			int64_t lo = p->begin > q->begin ? p->begin : q->begin;
			int64_t hi = p->end < q->end ? p->end : q->end;
			if (lo < hi && strcmp(p->path, q->path) == 0)
				return hi - lo == 1
					? gpt_err_set(err, GPT_EUSAGE, "%s: document %lld is in both", p->path,
						      (long long)lo)
					: gpt_err_set(err, GPT_EUSAGE, "%s: documents %lld to %lld are in both",
						      p->path, (long long)lo, (long long)hi - 1);
		}
	return 0;
}

void gpt_loader_check_vocab(gpt_loader *l, int64_t vocab)
{
	l->vocab = vocab;
}

void gpt_loader_close(gpt_loader *l)
{
	if (!l)
		return;
	for (int i = 0; i < l->n_parts; i++) {
		free(l->parts[i].path);
		if (l->parts[i].ds)
			gpt_dataset_close(l->parts[i].ds);
		free(l->parts[i].lens);
		gpt_samples_free(&l->parts[i].samples);
	}
	free(l->parts);
	free(l->counts);
	gpt_lazy_free(l->blend);
	free(l);
}
