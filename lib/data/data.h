/* lib/data: token datasets on disk and the text that goes into them.
 *
 * Datasets are Megatron-LM's indexed dataset: PREFIX.bin holds the tokens of
 * every document back to back (uint16 when the vocabulary has fewer than
 * 65500 ids, else int32) and PREFIX.idx the header ("MMIDIDX\0\0", version 1
 * as uint64, dtype code as uint8, sequence count and document count as
 * uint64), the int32 length and int64 byte offset of each sequence, and the
 * int64 document indices (0, then the end of each document, so one more entry
 * than there are documents). Each document is one sequence here. The reader
 * maps both files and checks every header field and bound before handing
 * out a token, so a truncated, swapped or corrupted pair is an error, never
 * a crash; it also reads llm.c's token shards (magic 20240520).
 *
 * Input is read through libarchive: plain text, JSON lines, and either inside
 * tar/zip archives or gzip/xz/zstd/bzip2 streams (nested in any mix), from
 * files, directories and stdin. gpt_preprocess ties input, tokenizer and
 * writer together, on N threads with output identical for every N.
 */
#ifndef GPT_DATA_H
#define GPT_DATA_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "core/core.h"
#include "text/text.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- token dtypes: Megatron's codes ------------------------------------ */

typedef enum gpt_ds_dtype {
	GPT_DS_UINT8 = 1,
	GPT_DS_INT8 = 2,
	GPT_DS_INT16 = 3,
	GPT_DS_INT32 = 4,
	GPT_DS_INT64 = 5,
	GPT_DS_FLOAT64 = 6,
	GPT_DS_FLOAT32 = 7,
	GPT_DS_UINT16 = 8,
} gpt_ds_dtype;

/* Bytes per element, 0 for a code that is not one of the above. */
int gpt_ds_dtype_size(int code);
/* "uint16", ...; "unknown" for a bad code. */
const char *gpt_ds_dtype_name(int code);
/* Megatron's choice: uint16 when vocab_size < 65500, else int32. */
gpt_ds_dtype gpt_ds_dtype_for_vocab(int64_t vocab_size);

/* ---- reading ------------------------------------------------------------ */

typedef enum gpt_ds_format {
	GPT_DS_MEGATRON = 1, /* PREFIX.bin + PREFIX.idx */
	GPT_DS_LLMC = 2,     /* one llm.c shard: 256 int32 header, uint16 tokens */
} gpt_ds_format;

typedef struct gpt_dataset gpt_dataset;

/* Opens a dataset. path is a Megatron prefix (PREFIX.bin/.idx; a path ending
 * in .bin or .idx is taken as its prefix) or an llm.c shard file. GPT_ENOINPUT
 * when the files are missing, GPT_EDATA (naming the file and the field) when
 * they are malformed, inconsistent or truncated, GPT_EIO on read errors. */
int gpt_dataset_open(gpt_dataset **out, const char *path, gpt_err *err);
/* The length of path without a final ".bin" or ".idx" (unless that is the
 * whole file name): the Megatron prefix it names, for readers and writers
 * alike. */
size_t gpt_ds_prefix_len(const char *path);
void gpt_dataset_close(gpt_dataset *ds);

gpt_ds_format gpt_dataset_format(const gpt_dataset *ds);
/* Number of documents. In an llm.c shard a document starts at each
 * end-of-text token (50256), as llm.c's writers put one before each. */
int64_t gpt_dataset_num_docs(const gpt_dataset *ds);
int64_t gpt_dataset_num_tokens(const gpt_dataset *ds);
gpt_ds_dtype gpt_dataset_dtype(const gpt_dataset *ds);
/* Total size of the files in bytes. */
int64_t gpt_dataset_file_bytes(const gpt_dataset *ds);
/* Length of document i in tokens (-1 when i is out of range). */
int64_t gpt_dataset_doc_len(const gpt_dataset *ds, int64_t i);
/* The tokens of document i in the file's dtype, mapped read-only; NULL when
 * i is out of range. Valid until close. */
const void *gpt_dataset_doc_data(const gpt_dataset *ds, int64_t i, int64_t *ntokens);
/* Copies tokens [start, start + n) of document i into out as int32;
 * GPT_EUSAGE when the range is outside the document. */
int gpt_dataset_read(const gpt_dataset *ds, int64_t i, int64_t start, int64_t n, int32_t *out, gpt_err *err);
/* The n ids in t, tokens [start, start + n) of document doc, are all in
 * [0, vocab): else GPT_EDATA naming the first that is not (the caller adds
 * the dataset's name). */
int gpt_dataset_check_ids(const int32_t *t, int64_t n, int64_t vocab, int64_t doc, int64_t start,
			  gpt_err *err);
/* The index in t of the first of the n ids outside [0, vocab), or -1. */
int64_t gpt_ids_outside(const int32_t *t, int64_t n, int64_t vocab);
/* The first id of the dataset outside [0, vocab): its document, its token
 * within and the id (*doc = -1 when every id is inside). */
int gpt_dataset_find_outside(const gpt_dataset *ds, int64_t vocab, int64_t *doc, int64_t *token, int32_t *id,
			     gpt_err *err);

/* *yes = 1 when ds looks made by the byte tokenizer (gpt-preprocess -t bytes
 * with its end-of-text): a Megatron dataset whose first and last documents
 * hold only bytes (0 to 255) and end with 256, which GPT-2's tokenizer
 * (ending a document with 50256, or merging bytes into ids above 255)
 * hardly writes.
 * why, when not NULL, then gets the words that say so, to which a caller
 * adds what to do. */
int gpt_dataset_looks_bytes(const gpt_dataset *ds, int *yes, char *why, size_t why_size, gpt_err *err);

/* Writes the summary --info prints (format, documents, tokens, dtype, sizes). */
int gpt_dataset_describe(const gpt_dataset *ds, const char *path, gpt_buf *out, gpt_err *err);
/* Decodes documents to fp: doc < 0 writes every document's tokens in order
 * (end-of-text tokens appear as "<|endoftext|>"); doc >= 0 writes that
 * document without its final end-of-text token (an llm.c shard's: the one
 * that starts it). */
int gpt_dataset_decode(const gpt_dataset *ds, const gpt_tokenizer *tok, int64_t doc, FILE *fp, gpt_err *err);

/* ---- writing ------------------------------------------------------------ */

typedef struct gpt_ds_writer gpt_ds_writer;

/* Starts PREFIX.bin/.idx under temporary names; nothing named PREFIX.* is
 * touched until commit. dtype is GPT_DS_UINT16 or GPT_DS_INT32. */
int gpt_ds_writer_open(gpt_ds_writer **out, const char *prefix, gpt_ds_dtype dtype, gpt_err *err);
/* Appends one document; an id that does not fit the dtype is GPT_EDATA. */
int gpt_ds_writer_add(gpt_ds_writer *w, const int32_t *ids, int64_t n, gpt_err *err);
/* The same in parts: append tokens to the current document, then end it
 * (a document longer than INT32_MAX tokens is GPT_EDATA). */
int gpt_ds_writer_append(gpt_ds_writer *w, const int32_t *ids, int64_t n, gpt_err *err);
int gpt_ds_writer_end_doc(gpt_ds_writer *w, gpt_err *err);
int64_t gpt_ds_writer_docs(const gpt_ds_writer *w);
int64_t gpt_ds_writer_tokens(const gpt_ds_writer *w);
/* Writes the index, removes an old PREFIX.idx, renames PREFIX.bin then
 * PREFIX.idx into place: an interruption leaves no pair that looks complete.
 * Frees w either way. */
int gpt_ds_writer_commit(gpt_ds_writer *w, gpt_err *err);
/* Removes the temporary files; frees w. */
void gpt_ds_writer_abort(gpt_ds_writer *w);

/* ---- input -------------------------------------------------------------- */

typedef enum gpt_input_format {
	GPT_IN_AUTO = 0, /* by name: .jsonl/.ndjson/.json are JSON lines, the rest text */
	GPT_IN_TEXT,     /* one document per file */
	GPT_IN_LINES,    /* one document per non-empty line */
	GPT_IN_JSONL,    /* one document per JSON record */
} gpt_input_format;

#define GPT_INPUT_MAX_KEYS 16

typedef struct gpt_input_opts {
	gpt_input_format format;
	const char *keys[GPT_INPUT_MAX_KEYS]; /* JSON keys tried in order; "text" when none */
	int n_keys;
	int stdin_json;  /* 1: stdin in AUTO format is JSON lines (a key was given) */
	int skip_bad;    /* 1: skip bad JSON records (counted) instead of failing */
	int skip_binary; /* 1: skip files that look binary; 0: encode them too (counted) */
	/* Files that are never input (the run's own output pair, NULL when
	 * none): left out of directory walks, an error when named. */
	const char *not_input[2];
} gpt_input_opts;

typedef struct gpt_input_stats {
	int64_t total_bytes;   /* size of all input files on disk; 0 when unknown (stdin) */
	int64_t bytes;         /* input bytes consumed so far (compressed, as on disk) */
	int64_t files;         /* files and archive members read */
	int64_t docs;          /* documents handed out */
	int64_t text_bytes;    /* bytes of document text handed out */
	int64_t empty;         /* empty documents skipped */
	int64_t bad_records;   /* bad JSON records skipped (skip_bad) */
	int64_t binary;        /* files that look binary (a NUL byte in the first 8000): skipped or encoded */
	int64_t json_like;     /* files read as text (by their name) whose first line is a JSON object */
	int64_t links;         /* archive members that are symbolic or hard links: not followed, skipped */
	int corrupt;           /* 1: the reading stopped at a corrupt or truncated file (the error names it) */
	char first_bad[512];   /* where the first skipped bad record was */
	char first_binary[512];
	char first_json_like[512];
	char first_link[1024]; /* ARCHIVE:MEMBER -> TARGET */
} gpt_input_stats;

/* How a part of a document ends (gpt_input_fn's `end`). */
enum {
	GPT_INPUT_MORE = 0,  /* the document goes on, its text joined to the next part's */
	GPT_INPUT_END = 1,   /* the document's last part */
	GPT_INPUT_PIECE = 2, /* the document goes on, but this part is tokenized on its
				own (one string of a JSON list, as Megatron-LM does) */
};

/* Called with each document in input order, in one or more parts (a long
 * file streams through in blocks; a JSON list gives a piece per non-empty
 * string): `end` says how the part ends. Parts are never empty except for
 * the end of a document whose size was a multiple of the block. The bytes
 * are valid only during the call. `where` names the file (and member). A
 * non-zero return stops the reading and is returned. */
typedef int (*gpt_input_fn)(void *ctx, const char *where, const uint8_t *p, size_t n, int end, gpt_err *err);

/* Reads every input ("-" is stdin; directories are walked recursively in
 * name order) and calls fn for each document. A file of o->not_input
 * named as an input is GPT_EUSAGE. */
int gpt_input_read(const char *const *paths, int n_paths, const gpt_input_opts *o, gpt_input_fn fn, void *ctx,
		   gpt_input_stats *st, gpt_err *err);

/* ---- the preprocessing pipeline ----------------------------------------- */

typedef struct gpt_preprocess_opts {
	const gpt_tokenizer *tok;
	const char *prefix;   /* output PREFIX.bin/.idx */
	int append_eod;       /* end each document with the end-of-text id */
	int threads;          /* tokenizer threads, >= 1 */
	gpt_input_opts input;
	FILE *progress;       /* progress reporter stream (stderr), or NULL */
} gpt_preprocess_opts;

typedef struct gpt_preprocess_stats {
	gpt_input_stats input;
	int64_t docs;
	int64_t tokens;
	double seconds;
} gpt_preprocess_stats;

/* Tokenizes the inputs and writes the dataset. No documents at all is
 * GPT_EDATA and writes nothing. */
int gpt_preprocess(const gpt_preprocess_opts *o, const char *const *paths, int n_paths, gpt_preprocess_stats *st,
		   gpt_err *err);

/* After gpt-preprocess's option parsing refused arg with "unknown option
 * --...": when it is an option of Megatron-LM's or PaddleFleetX's
 * preprocess_data.py, err says whose it is and what to give instead
 * (gpt_opts_foreign_hint); otherwise err is kept. */
void gpt_preprocess_flag_hint(const char *arg, gpt_err *err);

#ifdef __cplusplus
}
#endif

#endif
