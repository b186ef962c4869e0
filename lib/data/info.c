/* What --info and --decode show of a dataset. */
#include "data/data.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int gpt_dataset_describe(const gpt_dataset *ds, const char *path, gpt_buf *out, gpt_err *err)
{
	char size[32];
	gpt_format_bytes((double)gpt_dataset_file_bytes(ds), size, sizeof size);
	int64_t docs = gpt_dataset_num_docs(ds), tokens = gpt_dataset_num_tokens(ds);
	return gpt_buf_printf(out, err,
			      "dataset: %s\n"
			      "format: %s\n"
			      "documents: %lld\n"
			      "tokens: %lld\n"
			      "dtype: %s\n"
			      "tokens per document: %.1f\n"
			      "size: %lld bytes (%s)\n",
			      path,
			      gpt_dataset_format(ds) == GPT_DS_LLMC ? "llm.c shard" : "megatron indexed dataset",
			      (long long)docs, (long long)tokens, gpt_ds_dtype_name(gpt_dataset_dtype(ds)),
			      docs ? (double)tokens / (double)docs : 0.0, (long long)gpt_dataset_file_bytes(ds), size);
}

static int decode_doc(const gpt_dataset *ds, const gpt_tokenizer *tok, int64_t doc, int strip_eot, FILE *fp,
		      int32_t *ids, gpt_buf *text, gpt_err *err)
{
	int64_t len = gpt_dataset_doc_len(ds, doc), from = 0;
	if (strip_eot && len > 0) {
		/* Megatron's end-of-text ends a document, llm.c's starts it */
		int llmc = gpt_dataset_format(ds) == GPT_DS_LLMC;
		int rc = gpt_dataset_read(ds, doc, llmc ? 0 : len - 1, 1, ids, err);
		if (rc)
			return rc;
		if (ids[0] == gpt_tokenizer_eot(tok) && llmc)
			from = 1;
		else if (ids[0] == gpt_tokenizer_eot(tok))
			len--;
	}
	for (int64_t at = from, k; at < len; at += k) {
		k = len - at < 65536 ? len - at : 65536;
		int rc = gpt_dataset_read(ds, doc, at, k, ids, err);
		if (rc)
			return rc;
		gpt_buf_reset(text);
		if (gpt_decode(tok, ids, k, text, err)) {
			gpt_err_prefix(err, "document %lld", (long long)doc);
			size_t used = strlen(err->msg);
			snprintf(err->msg + used, sizeof err->msg - used, "; was the dataset made with another tokenizer (-t)?");
			return err->code;
		}
		if (text->len && fwrite(text->data, 1, text->len, fp) != text->len)
			return gpt_err_errno(err, GPT_EIO, errno, "decoded text: write");
	}
	return 0;
}

#define BYTES_EOT 256 /* the byte tokenizer's end-of-text: its largest id (the messages say 256) */

/* *yes = 1 when document doc ends with BYTES_EOT and holds below it only
 * bytes, 0 to 255: what the byte tokenizer (-t bytes, with --append-eod)
 * writes, which encodes an "<|endoftext|>" in the text as its 13 bytes. */
static int made_by_bytes(const gpt_dataset *ds, int64_t doc, int32_t *ids, int *yes, gpt_err *err)
{
	*yes = 0;
	int64_t len = gpt_dataset_doc_len(ds, doc), k = 0;
	for (int64_t at = 0; at < len; at += k) {
		k = len - at < 65536 ? len - at : 65536;
		int rc = gpt_dataset_read(ds, doc, at, k, ids, err);
		if (rc)
			return rc;
		for (int64_t i = 0; i < k; i++)
			if (ids[i] > BYTES_EOT || (ids[i] == BYTES_EOT && at + i < len - 1))
				return 0;
	}
	*yes = len > 0 && ids[k - 1] == BYTES_EOT;
	return 0;
}

/* A Megatron index records no tokenizer. Read as GPT-2, a dataset of the
 * byte tokenizer gives text-like garbage (or a perplexity) without an
 * error: its ids are GPT-2's single-byte tokens (in another order) and its
 * end-of-text, 256, is GPT-2's " t". GPT-2 text ends a document with 50256
 * (--append-eod) or holds merged tokens, ids above 256, but for a document
 * made only of single bytes that ends with its first " t" (such as "a t"
 * without --append-eod, which no test tells from "@" and the byte
 * tokenizer's end-of-text): so the dataset's first and last documents must
 * both look like the byte tokenizer's (one tokenizer made them all). */
int gpt_dataset_looks_bytes(const gpt_dataset *ds, int *yes, char *why, size_t why_size, gpt_err *err)
{
	*yes = 0;
	int64_t n = gpt_dataset_num_docs(ds);
	if (gpt_dataset_format(ds) != GPT_DS_MEGATRON || n == 0)
		return 0;
	int32_t *ids = gpt_malloc(65536 * sizeof *ids, "token buffer", err);
	if (!ids)
		return GPT_EINTERNAL;
	int first = 0, last = 0;
	int rc = made_by_bytes(ds, 0, ids, &first, err);
	if (!rc && first)
		rc = made_by_bytes(ds, n - 1, ids, &last, err);
	free(ids);
	*yes = !rc && first && last;
	if (*yes && why && why_size) {
		char which[96] = "document 0 holds only bytes (ids 0 to 255) and ends";
		if (n > 1)
			snprintf(which, sizeof which, "documents 0 and %lld (the last) hold only bytes (ids 0 to 255) and end",
				 (long long)n - 1);
		snprintf(why, why_size, "%s with 256, the end-of-text of the byte tokenizer: the dataset was made with -t bytes",
			 which);
	}
	return rc;
}

/* Decoding with GPT-2's tokenizer a dataset the byte tokenizer made is refused. */
static int check_not_bytes(const gpt_dataset *ds, const gpt_tokenizer *tok, gpt_err *err)
{
	if (gpt_tokenizer_kind(tok) != GPT_TOK_GPT2)
		return 0;
	int yes;
	char why[256];
	int rc = gpt_dataset_looks_bytes(ds, &yes, why, sizeof why, err);
	if (rc || !yes)
		return rc;
	return gpt_err_set(err, GPT_EDATA, "%s; decode it with -t bytes", why);
}

int gpt_dataset_decode(const gpt_dataset *ds, const gpt_tokenizer *tok, int64_t doc, FILE *fp, gpt_err *err)
{
	int64_t n = gpt_dataset_num_docs(ds);
	if (doc >= n)
		return gpt_err_set(err, GPT_EUSAGE, "--doc %lld: the dataset has %lld documents (0 to %lld)",
				   (long long)doc, (long long)n, (long long)n - 1);
	int32_t *ids = gpt_malloc(65536 * sizeof *ids, "token buffer", err);
	if (!ids)
		return GPT_EINTERNAL;
	gpt_buf text = GPT_BUF_INIT;
	int rc = check_not_bytes(ds, tok, err);
	for (int64_t i = doc < 0 ? 0 : doc; !rc && i < (doc < 0 ? n : doc + 1); i++)
		rc = decode_doc(ds, tok, i, doc >= 0, fp, ids, &text, err);
	if (!rc && fflush(fp) != 0)
		rc = gpt_err_errno(err, GPT_EIO, errno, "decoded text: write");
	free(ids);
	gpt_buf_free(&text);
	return rc;
}
