/* lib/ckpt: checkpoints as directories of safetensors files.
 *
 * Three layers, each usable on its own:
 *  - safetensors files (gpt_st_*): a writer that streams tensors to an atomic
 *    file and hashes it on the way, and a reader that mmaps a file and checks
 *    every header field and bound before handing out pointers;
 *  - boxes (gpt_box_* in lib/core): copying the overlap of the box a piece
 *    holds and the box a rank wants is how any layout reads what any other
 *    layout wrote;
 *  - checkpoints (gpt_ckpt_*): a directory step_NNNNNNNN/ holding one
 *    safetensors file per writing rank, index.json (every global tensor ->
 *    its pieces, plus size and xxh3 of every file), state.json and
 *    config.yaml. It is written under a temporary name, fsynced and renamed,
 *    and only then is `latest` replaced, so a crash never leaves a directory
 *    that looks complete. Opening checks every file's size and checksum and
 *    that the pieces of every tensor tile it exactly once.
 */
#ifndef GPT_CKPT_H
#define GPT_CKPT_H

#include "backend/backend.h"
#include "core/core.h"
#include "model/model.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- safetensors -------------------------------------------------------- */

/* "F32", "BF16", "F16", "I8", "I32", "I64", "U16" */
const char *gpt_st_dtype_name(gpt_dtype t);
int gpt_st_dtype_parse(const char *s, gpt_dtype *out);

typedef struct gpt_st_entry {
	const char *name;
	gpt_dtype dtype;
	int ndim;
	int64_t shape[GPT_MAX_DIMS];
	const void *data;   /* dense row-major, prod(shape) elements */
} gpt_st_entry;

/* Writes entries (in the order given) to path atomically. meta is a list of
 * n_meta key/value string pairs for "__metadata__" (may be 0). On success
 * *bytes and *xxh3 (either may be NULL) describe the file written. */
int gpt_st_write(const char *path, const gpt_st_entry *entries, int n, const char *const *meta,
		 int n_meta, int64_t *bytes, uint64_t *xxh3, gpt_err *err);
/* The same where an entry's data may be NULL: fill(ctx, i, buf, err) then
 * writes entry i's bytes into buf, so only one tensor is in memory at once. */
typedef int (*gpt_st_fill_fn)(void *ctx, int i, void *buf, gpt_err *err);
int gpt_st_write_stream(const char *path, const gpt_st_entry *entries, int n,
			const char *const *meta, int n_meta, gpt_st_fill_fn fill, void *ctx,
			int64_t *bytes, uint64_t *xxh3, gpt_err *err);

typedef struct gpt_st_tensor {
	char *name;
	gpt_dtype dtype;
	int ndim;
	int64_t shape[GPT_MAX_DIMS];
	uint64_t begin, end; /* byte range within the data section */
} gpt_st_tensor;

typedef struct gpt_st_file {
	char *path;
	const unsigned char *map; /* the whole file */
	size_t size;
	const unsigned char *data; /* start of the data section */
	gpt_st_tensor *tensors;
	int n;
	char **meta;               /* key, value, key, value, ... */
	int n_meta;
} gpt_st_file;

/* Maps and validates a file: header length, JSON, dtypes, shapes, offsets
 * inside the data section, sizes equal to dtype x shape, no overlaps.
 * A bad file is GPT_EDATA with the file (and tensor) named. */
int gpt_st_open(gpt_st_file *f, const char *path, gpt_err *err);
const gpt_st_tensor *gpt_st_find(const gpt_st_file *f, const char *name);
const void *gpt_st_data(const gpt_st_file *f, const gpt_st_tensor *t);
const char *gpt_st_meta(const gpt_st_file *f, const char *key);
void gpt_st_close(gpt_st_file *f);

/* ---- checkpoints -------------------------------------------------------- */

/* One piece of a global tensor held by the writing process. */
typedef struct gpt_ckpt_piece {
	const char *tensor;   /* global name, e.g. "h.0.attn.qkv.weight", "optim.exp_avg.wte" */
	gpt_dtype dtype;
	int ndim;
	int64_t shape[GPT_MAX_DIMS]; /* the global shape */
	gpt_box box;          /* the part of the global tensor in data */
	const void *data;     /* dense row-major over box */
} gpt_ckpt_piece;

/* Writes output_dir/step_NNNNNNNN/ from one writer (rank 0 of 1): the pieces
 * must tile every tensor. state_json and config_yaml are written as given.
 * On success path (size >= 4096) receives the directory name and *bytes the
 * total size. Refuses to overwrite an existing complete step directory.
 * (gpt_ckpt_prepare + gpt_ckpt_write_part + gpt_ckpt_publish for one rank.) */
int gpt_ckpt_save(const char *output_dir, int64_t step, const gpt_ckpt_piece *pieces, int n,
		  const char *state_json, const char *config_yaml, char *path, size_t path_size,
		  int64_t *bytes, gpt_err *err);

/* Saving from many ranks, in three steps:
 *  1. gpt_ckpt_prepare (rank 0 alone): refuses when step_NNNNNNNN/ is
 *     already complete and published (an unpublished one, see
 *     gpt_ckpt_unpublished, is replaced), removes a leftover of a failed
 *     attempt and creates
 *     the staging directory output_dir/.step_NNNNNNNN.tmp; the ranks then
 *     agree that it succeeded (a collective of the caller's);
 *  2. gpt_ckpt_write_part (every rank, no communication, so it may run on a
 *     thread): rank-NNNNN.safetensors with the rank's pieces (none: no
 *     file) and rank-NNNNN.json naming them with the file's size and xxh3,
 *     both fsynced; the ranks then agree again;
 *  3. gpt_ckpt_publish (rank 0 alone): reads the n_ranks part files, checks
 *     that the pieces tile every tensor exactly once, writes state.json,
 *     config.yaml and index.json (last), fsyncs, renames the staging
 *     directory to step_NNNNNNNN/, fsyncs output_dir, replaces `latest`
 *     atomically, and when keep_last > 0 removes the oldest complete step
 *     directories beyond keep_last (never the new one, nor later steps'
 *     ones, which are not counted). On failure nothing
 *     appears under the final name.
 * stage_dir (size >= 4096) receives the staging directory's name. */
void gpt_ckpt_stage_dir(const char *output_dir, int64_t step, char *stage_dir, size_t size);
int gpt_ckpt_prepare(const char *output_dir, int64_t step, gpt_err *err);
/* What gpt_ckpt_prepare checks first: GPT_EIO naming output_dir/step_NNNNNNNN/
 * when it is a complete published checkpoint (never overwritten) or a
 * directory without index.json (a partial copy or removal: a save never
 * leaves one, and its rename would fail); 0 when it is free or unpublished. */
int gpt_ckpt_check_free(const char *output_dir, int64_t step, gpt_err *err);
/* 1 when output_dir/step_NNNNNNNN/ is complete but `latest` names no
 * checkpoint or an older one: what a save leaves when it fails (or is
 * killed) between its rename and the update of `latest`. No resume takes it
 * (they follow `latest`), and a run that resumed from an older checkpoint
 * recomputes the same step, so gpt_ckpt_prepare replaces it rather than
 * make every restart fail the same way. */
int gpt_ckpt_unpublished(const char *output_dir, int64_t step);
/* fill, when not NULL, provides the bytes of pieces whose data is NULL
 * (fill(ctx, i, buf, err) writes piece i's), one piece in memory at once. */
int gpt_ckpt_write_part(const char *stage_dir, int rank, const gpt_ckpt_piece *pieces, int n,
			gpt_st_fill_fn fill, void *ctx, gpt_err *err);
int gpt_ckpt_publish(const char *output_dir, int64_t step, int n_ranks, const char *state_json,
		     const char *config_yaml, int64_t keep_last, char *path, size_t path_size,
		     int64_t *bytes, gpt_err *err);
/* Removes the staging directory of a failed save (rank 0). */
void gpt_ckpt_discard(const char *output_dir, int64_t step);
/* Opens output_dir into *fd and takes its lock (flock, exclusive, without
 * waiting): the one gpt-train's rank 0 holds for a run and gpt-ckpt-merge
 * while it writes a checkpoint, so that one writer at a time saves into a
 * directory and removes leftovers there. Closing *fd releases it; *fd is
 * -1 after a failure. GPT_EUSAGE when another process holds it ("WHAT
 * OUTPUT_DIR: another run is training into it or gpt-ckpt-merge is writing
 * into it; ..."), GPT_EIO when output_dir cannot be opened or locked; what
 * (a config key, or NULL) goes before output_dir in messages. */
int gpt_ckpt_lock(const char *what, const char *output_dir, int *fd, gpt_err *err);
/* Removes what processes killed while they saved into output_dir left:
 * the temporaries of `latest` (gpt_file_write_atomic's .latest.tmp.PID.N;
 * *files counts them) and the staging directories of saves
 * (.step_N.tmp, .step_N.unpublished; *dirs), which hold a checkpoint's
 * worth of parts. Call it only while holding output_dir's lock (gpt-train's
 * rank 0 does when it starts): a run saving into the same directory at the
 * same time would lose its files from under it. */
void gpt_ckpt_remove_leftovers(const char *output_dir, int *files, int *dirs);

/* ---- who writes what ---------------------------------------------------- */

/* A rank's place, as far as saving is concerned. */
typedef struct gpt_ckpt_rank {
	int64_t tp_rank, pp_rank, dp_rank; /* dp_rank: among replicas holding the same shards */
	int64_t begin, end;                /* the flat range its optimizer owns */
	int writers_only;                  /* 1: only what gpt_ckpt_writes gives this rank
					      (saving); 0: everything held (loading) */
} gpt_ckpt_rank;

/* 1 when a rank at r is the one copy that writes table entry p: data
 * replica 0, tensor parallel rank 0 for what tp does not split, the first
 * pipeline stage for the embedding (the last stage holds wte too, tied). */
int gpt_ckpt_writes(const gpt_param_info *p, const gpt_ckpt_rank *r);

/* One contiguous run of a rank's flat buffers: part of table entry
 * `tensor`, the global box `box`, starting at element `flat`. */
typedef struct gpt_ckpt_slice {
	int64_t tensor;
	gpt_box box;
	int64_t flat;
} gpt_ckpt_slice;

/* The slices of [r->begin, r->end) of a rank's flat buffers, where table
 * entry i is held as box[i] at offset[i] (-1: not held); with writers_only,
 * only the entries the rank writes. *out is malloc'd. */
int gpt_ckpt_slices(const gpt_param_info *table, int64_t n_table, const int64_t *offset,
		    const gpt_box *box, const gpt_ckpt_rank *r, gpt_ckpt_slice **out, int64_t *n,
		    gpt_err *err);
/* Elements [first, first + count) of box b in row-major order as at most
 * 2 x ndim - 1 boxes (global coordinates), each contiguous in that order,
 * in order; returns how many (0 for an empty or out-of-range request). */
int gpt_box_range_split(const gpt_box *b, int64_t first, int64_t count, gpt_box *out);

typedef struct gpt_ckpt gpt_ckpt;

/* Opens a checkpoint directory, or a directory holding `latest` (then the
 * step it names). Verifies every file's size and xxh3 and that the index
 * tiles every tensor exactly once; any failure names the file/tensor and
 * nothing is returned. */
int gpt_ckpt_open(gpt_ckpt **out, const char *path, gpt_err *err);
/* The same; checksums 0 skips the xxh3 of the files (sizes, headers and the
 * tiling are still checked): for the other ranks of a job whose rank 0 has
 * verified the same directory, so a load hashes each byte once, not once
 * per rank. */
int gpt_ckpt_open_opts(gpt_ckpt **out, const char *path, int checksums, gpt_err *err);
/* Another trainer's checkpoint at path, for an error: what it is, that
 * gptkit does not read it, and what to give instead where there is a way
 * ("a Megatron-LM checkpoint ..."); NULL when path is none of those known:
 * PaddlePaddle's model.pdparams, Megatron-LM's save directories, llm.c's
 * model files. */
const char *gpt_ckpt_foreign(const char *path);
/* The directory actually opened (after following `latest`). */
const char *gpt_ckpt_path(const gpt_ckpt *ck);
int64_t gpt_ckpt_step(const gpt_ckpt *ck);
const char *gpt_ckpt_state_json(const gpt_ckpt *ck);
const char *gpt_ckpt_config_yaml(const gpt_ckpt *ck);
/* 1 when the checkpoint holds tensor `name` (a weights-only checkpoint has
 * no optim.* tensors). */
int gpt_ckpt_has_tensor(const gpt_ckpt *ck, const char *name);
/* Number of tensors and their names/shapes, for listing. */
int gpt_ckpt_tensor_count(const gpt_ckpt *ck);
int gpt_ckpt_tensor_info(const gpt_ckpt *ck, int i, const char **name, gpt_dtype *dtype, int *ndim,
			 const int64_t **shape);
/* Reads the part `box` of tensor `name` into dst (dense row-major over box),
 * converting to dtype (fp32/bf16/fp16 among each other). A missing tensor or
 * a shape that differs from want_shape (when want_shape is not NULL) is an
 * error naming both shapes. */
int gpt_ckpt_read_box(const gpt_ckpt *ck, const char *name, gpt_dtype dtype, int ndim,
		      const int64_t *want_shape, const gpt_box *box, void *dst, gpt_err *err);
void gpt_ckpt_close(gpt_ckpt *ck);

/* Reads output_dir/latest: the step directory it names, or GPT_ENOINPUT. */
int gpt_ckpt_latest(const char *output_dir, char *path, size_t size, gpt_err *err);
/* For a checkpoint that would not open: path is a step directory
 * DIR/step_N, or a directory DIR whose `latest` names one (or names
 * nothing valid). Returns 1 with DIR/step_M in out for the newest complete
 * step directory (one with index.json, not verified) of DIR with M < N
 * (any M when `latest` names nothing); 0 when there is none or path names
 * no step_N. bad gets DIR/step_N, or "" when there is none. bad and out
 * have size bytes, at least 4096. For messages saying what to resume from. */
int gpt_ckpt_earlier(const char *path, char *bad, char *out, size_t size);

/* gpt-ckpt-merge: what a checkpoint holds (step, state.json, every tensor
 * with dtype and shape), appended to out as text. */
int gpt_ckpt_describe(const gpt_ckpt *ck, gpt_buf *out, gpt_err *err);
/* One consolidated safetensors file at out_file (written atomically, one
 * tensor in memory at a time): the weights in dtype (fp32, bf16, fp16) and,
 * unless weights_only, the optimizer state in fp32; __metadata__ has the step
 * and "format": "pt". */
int gpt_ckpt_consolidate(const gpt_ckpt *ck, const char *out_file, gpt_dtype dtype,
			 int weights_only, int64_t *bytes, gpt_err *err);


/* ---- resharding and Hugging Face import (gpt-ckpt-merge) ---------------- */

/* A parallel layout as gpt-ckpt-merge --to-layout names it. */
typedef struct gpt_ckpt_layout {
	int64_t tp, pp, dp, sharding, stage;
	int64_t vpp;   /* virtual pipeline stages per rank */
	int64_t micro; /* Global.micro_batch_size of the copy's config; 0: the checkpoint's */
} gpt_ckpt_layout;

/* "mp=2,pp=4,vpp=2,dp=1,sharding=2,stage=2" (tp= is mp=); an item left out is 1,
 * stage 1 when sharding > 1 else 0. GPT_EUSAGE naming the bad item. */
int gpt_ckpt_layout_parse(const char *spec, gpt_ckpt_layout *out, gpt_err *err);
/* The model shape from a checkpoint's config.yaml. */
int gpt_ckpt_model_shape(const gpt_ckpt *ck, gpt_model_shape *s, gpt_err *err);
/* GPT_EUSAGE when out (a file or directory to write) is ck's step
 * directory or inside it: writing would replace what is being read. */
int gpt_ckpt_out_outside(const gpt_ckpt *ck, const char *out, gpt_err *err);
/* GPT_EUSAGE when out_dir already holds checkpoints (a `latest` file). */
int gpt_ckpt_out_free(const char *out_dir, gpt_err *err);
/* Writes out_dir/step_NNNNNNNN/ (and out_dir/latest) holding ck's tensors
 * cut as the ranks of layout lo would have saved them (one part per rank,
 * the same owner rule and flat ranges as the trainer; pipeline stages take
 * contiguous runs of layers), in the stored dtypes; state.json gets the new
 * layout and keeps the old one as "resharded_from"; config.yaml is ck's
 * configuration for layout lo (its Distributed degrees; local_batch_size,
 * accumulate_steps, pipeline_schedule and pp_layers derived again for the
 * kept global_batch_size and micro_batch_size, or lo->micro; sequence
 * parallelism off with mp 1), resolved for the new world size: GPT_EUSAGE
 * before anything is written when lo cannot train that global batch.
 * One piece is in memory at a time. progress (may be NULL) gets a progress
 * line per rank written. out_dir is made when missing; a failure (or a
 * signal, with gpt_cmd_remove_temps_on_signals) leaves nothing it made,
 * out_dir and its parents included when they were made here. */
int gpt_ckpt_reshard(const gpt_ckpt *ck, const gpt_ckpt_layout *lo, const char *out_dir,
		     FILE *progress, char *path, size_t path_size, int64_t *bytes, gpt_err *err);
/* The weights of a Hugging Face directory: its model.safetensors (n 1,
 * index NULL), or, without one, the n shards its
 * model.safetensors.index.json (index, the path) lists, each tensor checked
 * to be in the shard the index's weight_map names and in no other. */
/* The Hugging Face GPT-2 name of parameter p under prefix ("transformer."
 * or ""), into out; *conv 1 for a Conv1D weight, which HF stores [in, out]
 * where ours is [out, in]. -1 (out empty) for a parameter GPT-2 has no
 * name for. */
int gpt_hf_param_name(const gpt_param_info *p, const char *prefix, char *out, size_t size, int *conv);
typedef struct gpt_hf_weights {
	gpt_st_file *files;
	int n;
	char *index;
} gpt_hf_weights;
/* The tensor called name in any of the files (NULL if none), and *file
 * (may be NULL) the file holding it. */
const gpt_st_tensor *gpt_hf_find(const gpt_hf_weights *w, const char *name, const gpt_st_file **file);
void gpt_hf_weights_close(gpt_hf_weights *w);
/* The Hugging Face GPT-2 directory hf_dir checked as gpt_ckpt_from_hf
 * checks it (config.json, every tensor of the weights in its place with
 * the shape config.json implies, none unknown, a tied head): on success
 * *shape is its model, *w its open weights (gpt_hf_weights_close them) and
 * *prefix the tensor names' "transformer." or "". */
int gpt_hf_open(const char *hf_dir, gpt_model_shape *shape, gpt_hf_weights *w, const char **prefix,
		gpt_err *err);
/* Converts a Hugging Face GPT-2 directory (config.json, model.safetensors
 * or, without one, the shards of model.safetensors.index.json, as
 * transformers' from_pretrained picks them; names with or without the
 * "transformer." prefix, fp32/fp16/bf16) into a gptkit
 * checkpoint out_dir/step_00000000/ of the weights in fp32 (no optimizer
 * state: training from it starts the moments at zero): Conv1D weights [in,
 * out] transposed to [out, in], c_attn [C, 3C] to qkv [3, C, C], the
 * vocabulary padded with zero rows to a multiple of 128, the attention
 * mask buffers dropped, a tied lm_head.weight checked equal to wte. A
 * config.json gptkit cannot reproduce (another activation or LayerNorm
 * epsilon, untied head) is GPT_EDATA naming the key. As with
 * gpt_ckpt_reshard, out_dir is made when missing and a failure leaves
 * nothing it made. */
int gpt_ckpt_from_hf(const char *hf_dir, const char *out_dir, FILE *progress, char *path,
		     size_t path_size, int64_t *bytes, gpt_err *err);

/* ---- inference exports (gpt-export) ------------------------------------- */

/* Like gpt_st_open on `size` bytes at map, a region from mmap (anonymous or
 * not) that the file takes over: gpt_st_close unmaps it, also on failure.
 * name is used in messages. For safetensors read from an archive in place. */
int gpt_st_open_mapped(gpt_st_file *f, const char *name, void *map, size_t size, gpt_err *err);

/* gpt-export: a training checkpoint as an inference bundle (a tar, zstd or
 * gzip, holding model.safetensors with the merged weights only, config.yaml
 * with the Model and Generation sections, the tokenizer files and
 * manifest.json with the size and xxh3 of each), a Hugging Face GPT-2
 * directory, or a GGUF file for llama.cpp's gpt2 architecture. Weights are
 * written in fp32, bf16, fp16 or int8 (bundle only: weight matrices as I8
 * with an F32 NAME.scale per output row; biases, LayerNorms and wpe stay
 * fp32). Every output appears atomically: written under a temporary name,
 * then renamed. */
typedef enum gpt_export_format {
	GPT_EXPORT_BUNDLE = 0,
	GPT_EXPORT_GGUF,
	GPT_EXPORT_HF,
} gpt_export_format;

/* The name of a bundle gpt-export writes into a directory (FleetX's
 * -o Engine.save_load.output_dir), and gpt-infer reads from FleetX's
 * Inference.model_dir. */
#define GPT_EXPORT_BUNDLE_NAME "model.tar.zst"

typedef struct gpt_export_opts {
	gpt_export_format format;
	gpt_dtype dtype;    /* F32, BF16, F16 or I8 */
	const char *out;    /* NULL: model.tar.zst, model.gguf or model-hf */
	const char *vocab;  /* GPT-2 vocabulary directory; NULL: found from exe */
	const char *exe;    /* argv[0] */
	const char *out_dir; /* with out NULL: the directory that name goes in, made
			      * when missing (and removed again when the export
			      * fails); NULL: the current one */
} gpt_export_opts;

/* "bundle", "gguf", "hf"; -1 when s names none. */
int gpt_export_format_parse(const char *s, gpt_export_format *out);

/* Exports the checkpoint at ckpt_path (a step directory or a directory with
 * `latest`). On success out_path receives the name written. GPT_EUSAGE for
 * a dtype the format cannot hold or an output that exists (directories) or
 * has an unknown extension (bundles: .tar.zst, .tar.gz, .tgz, .tar). */
int gpt_export(const char *ckpt_path, const gpt_export_opts *o, char *out_path, size_t size,
	       gpt_err *err);

/* FleetX's tools/export.py names what it exports and where in its
 * configuration: -c FILE (the YAML) and -o overrides of
 * Engine.save_load.ckpt_dir (the checkpoint) and Engine.save_load.output_dir
 * (the directory the export goes into; FleetX's default ./output when a
 * file is given). config may be NULL; overrides are "KEY=VALUE". Sets
 * ckpt (or "" when neither names it) and out_dir (or "" when there is
 * none to use), each of PATH_MAX bytes, and *by_override to
 * GPT_EXPORT_CKPT_BY_O and/or GPT_EXPORT_DIR_BY_O for those an override set
 * (the command line, which wins over the file). An override of any other
 * key is GPT_EUSAGE, naming it: nothing else of a configuration applies to
 * an export. */
enum { GPT_EXPORT_CKPT_BY_O = 1, GPT_EXPORT_DIR_BY_O = 2 };
int gpt_export_fleetx_names(const char *config, const char *const *overrides, int n_overrides, char *ckpt,
			    char *out_dir, int *by_override, gpt_err *err);

#ifdef __cplusplus
}
#endif

#endif
