/* lib/data loader: one prefix, a directory of datasets, weighted blends. */
#include "data/data.h"
#include "data/sample.h"
#include "tap.h"

#include <stdlib.h>
#include <string.h>

static char dir[] = "/tmp/gptkit-loader-XXXXXX";

/* A dataset of `docs` documents. Counting: int32 tokens tag, tag + 1, ...
 * (a token names its place) in documents of 1 to `len` tokens, every third
 * empty; else `len` tokens, every one equal to `tag`. */
static int make_ds(const char *name, int docs, int len, int32_t tag, int counting)
{
	char prefix[256];
	snprintf(prefix, sizeof prefix, "%s/%s", dir, name);
	gpt_err err = {0};
	gpt_ds_writer *w;
	if (gpt_ds_writer_open(&w, prefix, counting ? GPT_DS_INT32 : GPT_DS_UINT16, &err))
		return -1;
	int32_t *ids = malloc((size_t)len * 4), next = tag;
	for (int d = 0; d < docs; d++) {
		int n = !counting ? len : d % 3 == 2 ? 0 : 1 + (d * 7 + tag) % len;
		for (int i = 0; i < n; i++)
			ids[i] = counting ? next++ : tag;
		gpt_ds_writer_add(w, ids, n, &err);
	}
	free(ids);
	return gpt_ds_writer_commit(w, &err);
}

static int make(const char *name, int docs, int len, int32_t tag)
{
	return make_ds(name, docs, len, tag, 0);
}

/* Fraction of samples (of the first n) whose tokens are `tag`. */
static double share(gpt_loader *l, int64_t n, int seq, int32_t tag)
{
	int32_t *buf = malloc((size_t)(seq + 1) * 4);
	int64_t hits = 0;
	gpt_err err = {0};
	for (int64_t k = 0; k < n; k++)
		if (!gpt_loader_sample(l, k, buf, &err) && buf[0] == tag)
			hits++;
	free(buf);
	return (double)hits / (double)n;
}

int main(void)
{
	if (!mkdtemp(dir))
		return skip_all("no scratch directory");
	ok(make("a", 20, 100, 7) == 0 && make("b", 20, 300, 9) == 0, "two datasets (2,000 and 6,000 tokens)");
	gpt_err err = {0};
	gpt_loader *l = NULL;
	char spec[512];
	int seq = 16;

	snprintf(spec, sizeof spec, "%s/a", dir);
	ok(gpt_loader_open(&l, spec, "1", 0, seq, 50, 1, 0, &err) == 0, "one prefix %s", err.msg);
	ok(l && share(l, 50, seq, 7) == 1.0, "only its tokens");
	gpt_loader_close(l);

	snprintf(spec, sizeof spec, "0.25 %s/a 0.75 %s/b", dir, dir);
	ok(gpt_loader_open(&l, spec, "1", 0, seq, 400, 1, 0, &err) == 0, "a blend %s", err.msg);
	double sa = l ? share(l, 400, seq, 7) : 0;
	is_near(sa, 0.25, 0.01, "the blend draws a quarter of the samples from the first (%.3f)", sa);
	gpt_loader_close(l);

	ok(gpt_loader_open(&l, dir, "1", 0, seq, 400, 1, 0, &err) == 0, "a directory %s", err.msg);
	sa = l ? share(l, 400, seq, 7) : 0;
	is_near(sa, 0.25, 0.01, "a directory weighs its datasets by tokens (2,000 of 8,000: %.3f)", sa);
	int64_t per = l ? gpt_loader_epoch_samples(l) : 0;
	is_int(per, (2000 - 1) / seq + (6000 - 1) / seq, "samples per epoch add up over the datasets");
	gpt_loader_close(l);

	/* Megatron blends often name hundreds of shards: the last pair of a
	 * long spec counts as much as the first. */
	gpt_buf many = GPT_BUF_INIT;
	for (int i = 0; i < 200; i++)
		gpt_buf_printf(&many, &err, "0.001 %s/a ", dir);
	gpt_buf_printf(&many, &err, "1 %s/b", dir);
	ok(gpt_loader_open(&l, many.data, "1", 0, seq, 400, 1, 0, &err) == 0, "a blend of 201 datasets %s", err.msg);
	double sb = l ? share(l, 400, seq, 9) : 0;
	is_near(sb, 1 / 1.2, 0.01, "the 201st dataset gets its share (%.3f)", sb);
	gpt_loader_close(l);
	gpt_buf_free(&many);

	snprintf(spec, sizeof spec, "%s/a %s/b", dir, dir);
	ok(gpt_loader_open(&l, spec, "1", 0, seq, 400, 1, 0, &err) == 0, "a blend of prefixes alone %s", err.msg);
	sa = l ? share(l, 400, seq, 7) : 0;
	is_near(sa, 0.25, 0.01, "weighs its datasets by tokens, as a directory does (%.3f)", sa);
	gpt_loader_close(l);
	ok(gpt_loader_open(&l, " ", "1", 0, seq, 10, 1, 0, &err) == GPT_EUSAGE && strstr(err.msg, "names no dataset"),
	   "a spec of blanks: %s", err.msg);

	snprintf(spec, sizeof spec, "0.5 %s/a 0.5", dir);
	ok(gpt_loader_open(&l, spec, "1", 0, seq, 10, 1, 0, &err) == GPT_EUSAGE && strstr(err.msg, "pairs"),
	   "an odd blend is refused: %s", err.msg);
	snprintf(spec, sizeof spec, "-1 %s/a 1 %s/b", dir, dir);
	ok(gpt_loader_open(&l, spec, "1", 0, seq, 10, 1, 0, &err) == GPT_EUSAGE && strstr(err.msg, "weight"),
	   "a negative weight is refused: %s", err.msg);
	snprintf(spec, sizeof spec, "%s/empty-dir", dir);
	char cmd[600];
	snprintf(cmd, sizeof cmd, "mkdir -p %s", spec);
	ok(system(cmd) == 0 && gpt_loader_open(&l, spec, "1", 0, seq, 10, 1, 0, &err) == GPT_ENOINPUT,
	   "an empty directory: %s", err.msg);
	snprintf(spec, sizeof spec, "%s/a", dir);
	ok(gpt_loader_open(&l, spec, "1,0,1", 1, seq, 10, 1, 0, &err) == GPT_EDATA && strstr(err.msg, "validation split"),
	   "an empty split names it: %s", err.msg);
	/* Megatron-LM's '100,0,0': no validation set, and no error */
	l = (gpt_loader *)&err;
	ok(gpt_loader_open(&l, spec, "100,0,0", 1, seq, 10, 1, GPT_LOADER_OPTIONAL, &err) == 0 && l == NULL &&
	   strstr(err.msg, "validation split of '100,0,0' has weight 0"),
	   "an optional split that is empty: no loader, and why: %s", err.msg);
	gpt_err_clear(&err);
	ok(gpt_loader_open(&l, spec, "19,1,0", 1, seq, 10, 1, GPT_LOADER_OPTIONAL, &err) == 0 && l != NULL,
	   "an optional split that is not empty opens %s", err.msg);
	gpt_loader_close(l);
	/* 20 documents of a and 40 of b: 40 x 0.025 rounds to 1, 20 x 0.025 to 0 */
	gpt_err_clear(&err);
	ok(make("b40", 40, 50, 9) == 0, "a dataset of 40 documents");
	snprintf(spec, sizeof spec, "%s/a %s/b40", dir, dir);
	ok(gpt_loader_open(&l, spec, "39,1,0", 1, seq, 10, 1, GPT_LOADER_OPTIONAL, &err) == GPT_EDATA && l == NULL &&
	   strstr(err.msg, "/a: the validation split"),
	   "a blend whose split is empty in one dataset only is an error naming it: %s", err.msg);

	/* llm.c's -i pattern: the shards it matches, not the rest of their
	 * directory (its val shards); a pair's .bin and .idx are one dataset. */
	{
		static const char *shards[] = {"fw_train_000001.bin", "fw_train_000002.bin", "fw_val_000000.bin"};
		int made = 1;
		for (int i = 0; i < 3; i++) {
			int32_t head[256] = {20240520, 1, 1000};
			uint16_t tok[1000];
			for (int k = 0; k < 1000; k++)
				tok[k] = (uint16_t)(i < 2 ? 5 : 6);
			char path[300];
			snprintf(path, sizeof path, "%s/%s", dir, shards[i]);
			FILE *f = fopen(path, "wb");
			made &= f && fwrite(head, sizeof head, 1, f) == 1 && fwrite(tok, sizeof tok, 1, f) == 1;
			made &= f && fclose(f) == 0;
		}
		ok(made, "three llm.c shards, two of them train");
		snprintf(spec, sizeof spec, "%s/fw_train_*.bin", dir);
		ok(gpt_loader_open(&l, spec, "1", 0, seq, 100, 1, 0, &err) == 0, "a pattern %s", err.msg);
		is_int(l ? gpt_loader_epoch_samples(l) : 0, 2 * ((1000 - 1) / seq), "both train shards, once each");
		ok(l && share(l, 100, seq, 5) == 1.0, "and nothing of the val shard");
		gpt_loader_close(l);
		snprintf(spec, sizeof spec, "%s/a* %s/fw_val_*", dir, dir);
		ok(gpt_loader_open(&l, spec, "1", 0, seq, 100, 1, 0, &err) == 0, "patterns in a blend %s", err.msg);
		is_int(l ? gpt_loader_epoch_samples(l) : 0, (2000 - 1) / seq + (1000 - 1) / seq,
		       "a.bin and a.idx are one dataset");
		gpt_loader_close(l);
		snprintf(spec, sizeof spec, "%s/fw_test_*.bin", dir);
		ok(gpt_loader_open(&l, spec, "1", 0, seq, 10, 1, 0, &err) == GPT_ENOINPUT && strstr(err.msg, "matches no file"),
		   "a pattern that matches nothing: %s", err.msg);
		snprintf(spec, sizeof spec, "1 %s/fw_train_*.bin 1 %s/a", dir, dir);
		ok(gpt_loader_open(&l, spec, "1", 0, seq, 10, 1, 0, &err) == GPT_EUSAGE && strstr(err.msg, "is a pattern"),
		   "a pattern with a weight is refused: %s", err.msg);
		gpt_err_clear(&err);
	}

	/* The samples of an epoch come in a shuffled order, as Megatron-LM's and
	 * FleetX's shuffle index gives them (FleetX's sampler shuffle flag does
	 * not change that): one document of tokens 0, 1, ..., 1999 */
	{
		gpt_ds_writer *w;
		int32_t ramp[2000];
		for (int i = 0; i < 2000; i++)
			ramp[i] = i;
		snprintf(spec, sizeof spec, "%s/ramp", dir);
		ok(gpt_ds_writer_open(&w, spec, GPT_DS_UINT16, &err) == 0 && gpt_ds_writer_add(w, ramp, 2000, &err) == 0 &&
		   gpt_ds_writer_commit(w, &err) == 0, "a dataset of one ramp");
		ok(gpt_loader_open(&l, spec, "1", 0, seq, 124, 1, 0, &err) == 0, "its loader %s", err.msg);
		int64_t per_ep = l ? gpt_loader_epoch_samples(l) : 0, in_order = 0, good = per_ep == 1999 / seq;
		char seen[1999 / 16] = {0};
		int32_t buf[17];
		for (int64_t k = 0; k < per_ep && good; k++) {
			good = gpt_loader_sample(l, k, buf, &err) == 0 && buf[0] % seq == 0 && !seen[buf[0] / seq] &&
			       buf[seq] == buf[0] + seq;
			if (good)
				seen[buf[0] / seq] = 1;
			in_order += buf[0] == k * seq;
		}
		ok(good, "an epoch reads every window once");
		ok(in_order < per_ep / 4, "in a shuffled order: %lld of %lld windows in stream order", (long long)in_order,
		   (long long)per_ep);
		gpt_loader_close(l);
	}

	/* 40 documents: '98,2,0' trains on 0..38 (39.2 rounds to 39), '949,50,1'
	 * validates on 38..39 (37.96 and 2 round to 38 and 2) */
	gpt_loader *tl = NULL, *vl = NULL;
	snprintf(spec, sizeof spec, "%s/b40", dir);
	ok(gpt_loader_open(&tl, spec, "98,2,0", 0, seq, 10, 1, 0, &err) == 0 &&
	   gpt_loader_open(&vl, spec, "98,2,0", 1, seq, 10, 1, 0, &err) == 0, "training and validation splits");
	ok(tl && vl && gpt_loader_disjoint(tl, vl, &err) == 0, "the splits of one split string are disjoint");
	gpt_loader_close(vl);
	ok(gpt_loader_open(&vl, spec, "949,50,1", 1, seq, 10, 1, 0, &err) == 0 && gpt_loader_disjoint(tl, vl, &err) == GPT_EUSAGE &&
	   strstr(err.msg, "/b40: document 38 is in both"), "another split string's validation overlaps: %s", err.msg);
	gpt_loader_close(vl);
	snprintf(spec, sizeof spec, "%s/a %s/b40", dir, dir);
	ok(gpt_loader_open(&vl, spec, "90,10,0", 1, seq, 10, 1, 0, &err) == 0 && gpt_loader_disjoint(tl, vl, &err) == GPT_EUSAGE &&
	   strstr(err.msg, "/b40: documents 36 to 38 are in both"), "so does a blend holding the dataset: %s", err.msg);
	gpt_loader_close(vl);
	gpt_loader_close(tl);
	/* The index is built as it is read: 10^12 samples over 2,000 tokens
	 * (once 32 bytes a sample) open, and the last one reads. */
	gpt_err_clear(&err);
	snprintf(spec, sizeof spec, "%s/a", dir);
	ok(gpt_loader_open(&l, spec, "1", 0, seq, 1000000000000, 1, 0, &err) == 0 && gpt_loader_size(l) >= 1000000000000,
	   "an index of 10^12 samples over a small dataset opens %s", err.msg);
	int32_t last[17] = {0};
	ok(l && gpt_loader_sample(l, gpt_loader_size(l) - 1, last, &err) == 0 && last[0] == 7 && last[16] == 7,
	   "and reads its last sample %s", err.msg);
	gpt_loader_close(l);

	/* The blend index is built a chunk of 2^16 blended samples at a time
	 * from the counts at the chunk's start. Over 4 chunks and a part of a
	 * fifth, blended sample k is sample local[k] of dataset which[k] as
	 * Megatron's rule gives them (the dataset furthest behind its share),
	 * read in order, backwards or at random. */
	{
		ok(make_ds("c1", 30, 40, 100000, 1) == 0 && make_ds("c2", 50, 40, 200000, 1) == 0 &&
		   make_ds("c3", 20, 40, 300000, 1) == 0, "three datasets of counting tokens");
		enum { N = 4 * 65536 + 1234, S = 4 };
		snprintf(spec, sizeof spec, "3 %s/c1 2 %s/c2 1 %s/c3", dir, dir, dir);
		ok(gpt_loader_open(&l, spec, "1", 0, S, N, 5, 0, &err) == 0 && gpt_loader_size(l) == N, "their blend %s",
		   err.msg);
		int32_t *which = malloc(N * sizeof *which);
		int64_t *local = malloc(N * sizeof *local), count[3] = {0};
		double w[3] = {3.0 / 6.0, 2.0 / 6.0, 1.0 / 6.0};
		for (int64_t k = 0; k < N; k++) {
			int best = 0;
			for (int i = 1; i < 3; i++)
				if (w[i] * (double)(k + 1) - (double)count[i] > w[best] * (double)(k + 1) - (double)count[best])
					best = i;
			which[k] = best;
			local[k] = count[best]++;
		}
		/* each dataset alone, with the blend's seed for it */
		gpt_loader *one[3] = {0};
		for (int i = 0; i < 3; i++) {
			snprintf(spec, sizeof spec, "%s/c%d", dir, i + 1);
			gpt_loader_open(&one[i], spec, "1", 0, S, count[i], 5 + (uint64_t)i * 0x9e37u, 0, &err);
		}
		int64_t bad = !one[0] || !one[1] || !one[2] || !l;
		int32_t got[S + 1], want[S + 1];
		uint64_t st = 3;
		for (int pass = 0; pass < 3 && !bad; pass++)
			for (int64_t i = 0; i < (pass < 2 ? N : 5000); i++) {
				int64_t k = pass == 0 ? i : pass == 1 ? N - 1 - i : (int64_t)(gpt_splitmix64(&st) % N);
				bad += gpt_loader_sample(l, k, got, &err) || gpt_loader_sample(one[which[k]], local[k], want, &err) ||
				       memcmp(got, want, sizeof got) != 0;
			}
		is_int(bad, 0, "every blended sample is its dataset's sample by Megatron's rule, in order, backwards, at random");
		for (int i = 0; i < 3; i++)
			gpt_loader_close(one[i]);
		gpt_loader_close(l);
		free(which);
		free(local);
	}

	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	ok(system(cmd) == 0, "cleanup");
	return done_testing();
}
