/* lib/text: turning bytes into token ids and back.
 *
 * Two tokenizers share one interface. The GPT-2 byte-level BPE loads OpenAI's
 * `encoder.json` + `vocab.bpe` (or Hugging Face's `vocab.json` + `merges.txt`)
 * from a directory and reproduces OpenAI's tokenizer (tiktoken's r50k_base)
 * id for id: the text is cut at `<|endoftext|>` (encoded as the special token
 * 50256), then into maximal runs of valid and of invalid UTF-8; valid runs are
 * split into pieces by the GPT-2 pattern (PCRE2, UTF mode, JIT), invalid runs
 * are pieces of their own; each piece is looked up whole, else merged by
 * rank (a pair of ids merges when their concatenation is a vocabulary token,
 * lowest merge rank first, leftmost on ties, as tiktoken does). The byte
 * tokenizer maps each byte to its value and has one more id, end-of-text
 * (256), for tests and for users without vocabulary files.
 *
 * Any byte string encodes, and decodes back to itself.
 *
 * A gpt_tokenizer is read-only once loaded and may be shared by threads; each
 * thread encodes through its own gpt_encoder, which holds the regex match
 * state and a cache of recently seen pieces.
 */
#ifndef GPT_TEXT_H
#define GPT_TEXT_H

#include <stddef.h>
#include <stdint.h>

#include "core/core.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum gpt_tok_kind {
	GPT_TOK_GPT2 = 1,  /* byte-level BPE from vocabulary files */
	GPT_TOK_BYTES = 2, /* one id per byte, plus end-of-text */
} gpt_tok_kind;

typedef struct gpt_tokenizer gpt_tokenizer;
typedef struct gpt_encoder gpt_encoder;

/* A growable array of token ids. */
typedef struct gpt_ids {
	int32_t *data;
	int64_t len;
	int64_t cap;
} gpt_ids;

#define GPT_IDS_INIT {NULL, 0, 0}
int gpt_ids_reserve(gpt_ids *v, int64_t extra, gpt_err *err);
void gpt_ids_free(gpt_ids *v);

/* The text of the GPT-2 end-of-text token. */
#define GPT_TEXT_EOT "<|endoftext|>"

/* Loads the BPE from dir: encoder.json + vocab.bpe, else vocab.json +
 * merges.txt, else gpt2-vocab.json + gpt2-merges.txt. GPT_ENOINPUT when no
 * pair is there (the message says how to get the files), GPT_EUSAGE when
 * dir is a file (the message names its directory), GPT_EDATA when a file
 * is malformed. */
int gpt_tokenizer_open_bpe(gpt_tokenizer **out, const char *dir, gpt_err *err);
/* The names of the pair gpt_tokenizer_open_bpe reads in dir (encoder.json
 * and vocab.bpe, or one of the other two pairs): 0, or -1 when dir holds
 * none of them. */
int gpt_vocab_pair(const char *dir, const char **encoder, const char **merges);
/* The same from the texts of the two files held in memory (an inference
 * bundle read in place); name is used in messages. */
int gpt_tokenizer_open_bpe_mem(gpt_tokenizer **out, const char *name, const char *encoder,
			       size_t encoder_len, const char *merges, size_t merges_len, gpt_err *err);
/* The byte tokenizer (cannot fail except for memory). */
int gpt_tokenizer_open_bytes(gpt_tokenizer **out, gpt_err *err);
void gpt_tokenizer_free(gpt_tokenizer *t);

gpt_tok_kind gpt_tokenizer_kind(const gpt_tokenizer *t);
/* Number of ids (largest id + 1): 50257 for GPT-2, 257 for bytes. */
int32_t gpt_tokenizer_vocab_size(const gpt_tokenizer *t);
/* The end-of-text id (50256 for GPT-2, 256 for bytes), -1 if there is none. */
int32_t gpt_tokenizer_eot(const gpt_tokenizer *t);
/* The bytes of one token; NULL (and *len 0) for an id out of range. */
const uint8_t *gpt_tokenizer_token(const gpt_tokenizer *t, int32_t id, size_t *len);

/* Finds the default vocabulary directory for the program at exe_path
 * (argv[0] or /proc/self/exe): <exe dir>/../share/gpt2, then
 * <exe dir>/../share/gptkit/gpt2. Writes the first that holds a vocabulary
 * into out; GPT_ENOINPUT otherwise, with a message naming the places and
 * saying how to get one: howto, what the program offers, or NULL for
 * make deps or its --vocab DIR. */
int gpt_vocab_find(const char *exe_path, const char *howto, char *out, size_t size, gpt_err *err);

/* A per-thread encoder. `specials`: 1 (the default) turns the text of a
 * special token (`<|endoftext|>`) into its id; 0 encodes it as plain text. */
int gpt_encoder_new(gpt_encoder **out, const gpt_tokenizer *t, gpt_err *err);
void gpt_encoder_set_specials(gpt_encoder *e, int specials);
void gpt_encoder_free(gpt_encoder *e);

/* Appends the ids of text[0..n) to out. Fails only for memory or an internal
 * regex error. */
int gpt_encode(gpt_encoder *e, const void *text, size_t n, gpt_ids *out, gpt_err *err);

/* A place at or after `target` where text[0..n) can be cut in two without
 * changing its encoding (the ids of the halves, concatenated, equal the ids
 * of the whole), so long documents can be encoded in parallel; n when there
 * is none. For GPT-2: a space after a printable ASCII character, which the
 * pattern always starts a new piece at. */
size_t gpt_encode_cut(const gpt_tokenizer *t, const void *text, size_t n, size_t target);

/* Appends the bytes of ids[0..n) to out; an id out of range is GPT_EDATA. */
int gpt_decode(const gpt_tokenizer *t, const int32_t *ids, int64_t n, gpt_buf *out, gpt_err *err);

/* Length of the longest prefix of p[0..n) that is valid UTF-8 (RFC 3629). */
size_t gpt_utf8_valid_prefix(const uint8_t *p, size_t n);
/* Number of bytes at p[0..n) that cannot start a valid UTF-8 character,
 * counted up to the next byte that can. */
size_t gpt_utf8_invalid_run(const uint8_t *p, size_t n);
/* Appends p[0..n) to out as valid UTF-8: each maximal subpart of an
 * ill-formed sequence (Unicode 3.9: the longest start of a well-formed
 * character there, else one byte) becomes one U+FFFD, as Python's
 * decode(errors="replace") does, and so Hugging Face's and tiktoken's
 * decode: "\x80\x80" gives two, a truncated "\xf0\x9f\x98" one. */
int gpt_utf8_lossy(const void *p, size_t n, gpt_buf *out, gpt_err *err);

#ifdef __cplusplus
}
#endif

#endif
