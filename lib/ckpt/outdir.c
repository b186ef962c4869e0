/* The output directory of a conversion (gpt-ckpt-merge --to-layout and
 * --from-hf): made when missing, and removed again, with the parents it
 * made, when the conversion fails or is interrupted; one the user had is
 * never removed. (Part of lib/ckpt; declared in ckpt-impl.h.) */
#include "ckpt/ckpt-impl.h"

#include <string.h>
#include <unistd.h>

typedef struct outdir {
	char path[4096];
	size_t made; /* bytes of path naming the first directory open made; 0: none */
	int lock;    /* gpt_ckpt_lock's, or -1 */
} outdir;

static void hold(const char *dir)
{
	gpt_temp_hold(dir, 1);
}

static void remove_made(const char *dir)
{
	rmdir(dir); /* empty by now: the caller discarded its staging directory */
	gpt_temp_drop(dir);
}

static void outdir_close(outdir *o, int failed)
{
	gpt_path_each_dir(o->path, o->made, 1, failed ? remove_made : gpt_temp_drop);
	o->made = 0;
	if (o->lock >= 0)
		close(o->lock); /* last: nobody else wrote there while we removed */
	o->lock = -1;
}

static int outdir_open(outdir *o, const char *out_dir, gpt_err *err)
{
	memset(o, 0, sizeof *o);
	o->lock = -1;
	size_t n = strlen(out_dir);
	if (n == 0 || n >= sizeof o->path)
		return gpt_err_set(err, GPT_EUSAGE, "output directory '%s': expected a name of 1 to %zu bytes", out_dir,
				   sizeof o->path - 1);
	memcpy(o->path, out_dir, n + 1);
	o->made = gpt_path_first_missing(out_dir); /* from which mkdir -p makes the rest */
	gpt_path_each_dir(o->path, o->made, 0, hold); /* a signal from here on removes them (gpt_cmd_remove_temps_on_signals) */
	int rc = gpt_mkdir_p(out_dir, err);
	if (!rc) /* then `latest`, which no one can write now */
		rc = gpt_ckpt_lock(NULL, out_dir, &o->lock, err);
	if (!rc)
		rc = gpt_ckpt_out_free(out_dir, err);
	if (rc)
		outdir_close(o, 1);
	return rc;
}

int gpt_ckpt_write_new(const char *out_dir, int64_t step, int (*write)(void *ctx, gpt_err *err),
		       void *ctx, gpt_err *err)
{
	outdir o;
	int rc = outdir_open(&o, out_dir, err);
	if (rc)
		return rc;
	/* Without `latest`, a step directory already there is a checkpoint
	 * copied in by hand or one a crash left unpublished: either way not
	 * this command's to replace (a save of gpt-train's would, as the same
	 * step recomputed). Refused before anything is written. */
	char p[4096];
	snprintf(p, sizeof p, "%s/step_%08lld", out_dir, (long long)step);
	if (gpt_path_exists(p)) {
		rc = gpt_err_set(err, GPT_EUSAGE, "%s: already exists; choose a new directory, or move it away to write global step %lld there",
				 p, (long long)step);
		outdir_close(&o, 1);
		return rc;
	}
	rc = write(ctx, err);
	if (rc)
		gpt_ckpt_discard_unpublished(out_dir, step);
	outdir_close(&o, rc != 0);
	return rc;
}
