/* Internal to lib/ckpt: what its files share (saving, opening, resharding, export). */
#ifndef GPT_CKPT_IMPL_H
#define GPT_CKPT_IMPL_H

#include "ckpt/ckpt.h"

#define GPT_CKPT_FORMAT "gptkit-checkpoint"
#define GPT_CKPT_VERSION 1

/* Checks that boxes lie inside the tensor, do not overlap and add up to all
 * of it: together an exact tiling. `where` and `name` go into the message. */
int gpt_ckpt_check_tiling(const char *where, const char *name, int ndim, const int64_t *shape,
			  const gpt_box *boxes, int n, gpt_err *err);

/* Reads the checkpoint's config.yaml into cfg (initialised here, not
 * resolved; gpt_config_free it, after a failure too); messages name the
 * file with its directory, line and column. */
int gpt_ckpt_read_config(const gpt_ckpt *ck, gpt_config *cfg, gpt_err *err);

/* Runs write(ctx, err), which writes step's checkpoint into out_dir
 * (gpt_ckpt_prepare, gpt_ckpt_write_part, gpt_ckpt_publish), for a
 * conversion: out_dir is made when missing (mkdir -p), locked as
 * gpt-train locks its output_dir (gpt_ckpt_lock; GPT_EUSAGE while a run or
 * another conversion writes there) until write is done, and refused when
 * it already holds checkpoints (gpt_ckpt_out_free). The directories made here
 * are held as temporaries (gpt_temp_hold) until write succeeds, so a signal
 * removes them; a failure removes what write left (its staging directory,
 * and the step directory when `latest` could not be written) and then the
 * directories made here. A directory that existed is never removed. */
int gpt_ckpt_write_new(const char *out_dir, int64_t step, int (*write)(void *ctx, gpt_err *err),
		       void *ctx, gpt_err *err);
/* (Its cleanup, in save.c.) Removes the staging directory of step
 * (gpt_ckpt_discard) and step's directory when gpt_ckpt_publish renamed it
 * into place but could not write `latest` (gpt_ckpt_unpublished). */
void gpt_ckpt_discard_unpublished(const char *output_dir, int64_t step);

#endif
