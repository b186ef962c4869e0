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

#endif
