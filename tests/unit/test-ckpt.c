/* lib/ckpt: safetensors round trips and damage, boxes, checkpoint
 * directories (tiling, checksums, latest, refusal of partial ones). */
#include "ckpt/ckpt.h"
#include "tap.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[] = "/tmp/gptkit-ckpt-XXXXXX";

static int sh(const char *fmt, const char *arg)
{
	char cmd[1024];
	snprintf(cmd, sizeof cmd, fmt, arg, arg, arg);
	return system(cmd);
}

static void test_safetensors(void)
{
	float a[6] = {1, 2, 3, 4, 5, 6};
	uint16_t b[3] = {0x3f80, 0x4000, 0xc040};
	int32_t c[1] = {-7};
	gpt_st_entry e[3] = {
		{"a", GPT_DTYPE_F32, 2, {2, 3}, a},
		{"b.weight", GPT_DTYPE_BF16, 1, {3}, b},
		{"scalar", GPT_DTYPE_I32, 0, {0}, c},
	};
	const char *meta[] = {"format", "pt", "creator", "gptkit"};
	char path[256];
	snprintf(path, sizeof path, "%s/t.safetensors", dir);
	gpt_err err = {0};
	int64_t bytes = 0;
	uint64_t h = 0;
	ok(gpt_st_write(path, e, 3, meta, 2, &bytes, &h, &err) == 0, "write a safetensors file %s", err.msg);
	uint64_t hf;
	ok(gpt_xxh3_file(path, &hf, &err) == 0 && hf == h, "the returned checksum is the file's");
	gpt_st_file f;
	ok(gpt_st_open(&f, path, &err) == 0, "open it back %s", err.msg);
	is_int(f.n, 3, "three tensors");
	is_int((int64_t)f.size, bytes, "size as reported");
	ok((f.data - f.map) % 8 == 0, "the data section is 8-byte aligned");
	const gpt_st_tensor *t = gpt_st_find(&f, "a");
	ok(t && t->ndim == 2 && t->shape[1] == 3 && memcmp(gpt_st_data(&f, t), a, sizeof a) == 0, "fp32 data");
	t = gpt_st_find(&f, "b.weight");
	ok(t && t->dtype == GPT_DTYPE_BF16 && memcmp(gpt_st_data(&f, t), b, sizeof b) == 0, "bf16 data");
	t = gpt_st_find(&f, "scalar");
	int32_t sc = 0; /* safetensors does not align tensors: copy, never cast */
	if (t)
		memcpy(&sc, gpt_st_data(&f, t), 4);
	ok(t && t->ndim == 0 && sc == -7, "a 0-d tensor");
	is_str(gpt_st_meta(&f, "creator"), "gptkit", "metadata");
	gpt_st_close(&f);

	/* Damage: truncation, a huge header length, bad JSON, overlap. */
	char bad[300];
	snprintf(bad, sizeof bad, "%s/bad.safetensors", dir);
	snprintf(path, sizeof path, "%s/t.safetensors", dir);
	char cmd[1024];
	snprintf(cmd, sizeof cmd, "head -c %lld %s > %s", (long long)bytes - 1, path, bad);
	ok(system(cmd) == 0 && gpt_st_open(&f, bad, &err) == GPT_EDATA && strstr(err.msg, bad) &&
	   strstr(err.msg, "truncated"), "a truncated file is refused: %s", err.msg);
	snprintf(cmd, sizeof cmd, "printf '\\377\\377\\377\\377\\377\\377\\377\\177{}' > %s", bad);
	ok(system(cmd) == 0 && gpt_st_open(&f, bad, &err) == GPT_EDATA, "a huge header length is refused: %s", err.msg);
	snprintf(cmd, sizeof cmd, "printf '\\010\\0\\0\\0\\0\\0\\0\\0{\"a\":1 ' > %s", bad);
	ok(system(cmd) == 0 && gpt_st_open(&f, bad, &err) == GPT_EDATA, "bad JSON is refused: %s", err.msg);
	const char *ov = "{\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
			 "\"y\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}";
	FILE *fp = fopen(bad, "wb");
	uint64_t hl = strlen(ov);
	fwrite(&hl, 8, 1, fp);
	fputs(ov, fp);
	fwrite("0123456789ab", 12, 1, fp);
	fclose(fp);
	ok(gpt_st_open(&f, bad, &err) == GPT_EDATA && strstr(err.msg, "overlaps"), "overlapping tensors are refused: %s", err.msg);
	ok(gpt_st_open(&f, "/nonexistent.safetensors", &err) == GPT_ENOINPUT, "a missing file is GPT_ENOINPUT");
}

static void test_boxes(void)
{
	int64_t shape[3] = {4, 5, 6};
	float full[120], back[120];
	for (int i = 0; i < 120; i++)
		full[i] = (float)i;
	gpt_box g = gpt_box_full(3, shape);
	/* Cut into 2 x 1 x 3 boxes along dims 0 and 2, copy out and back. */
	memset(back, 0, sizeof back);
	int all_ok = 1;
	for (int i = 0; i < 2; i++)
		for (int k = 0; k < 3; k++) {
			gpt_box b = {3, {2 * i, 0, 2 * k}, {2, 5, 2}};
			float piece[20];
			gpt_box_copy(piece, &b, full, &g, &b, sizeof(float));
			/* element (1, 3, 1) of the piece is global (2i+1, 3, 2k+1) */
			if (piece[(1 * 5 + 3) * 2 + 1] != full[((2 * i + 1) * 5 + 3) * 6 + 2 * k + 1])
				all_ok = 0;
			gpt_box_copy(back, &g, piece, &b, &b, sizeof(float));
		}
	ok(all_ok, "pieces hold the right elements");
	ok(memcmp(full, back, sizeof full) == 0, "pieces reassemble the tensor");
	gpt_box a = {2, {0, 0}, {4, 4}}, b = {2, {2, 3}, {4, 4}}, r;
	ok(gpt_box_intersect(&a, &b, &r) && r.off[0] == 2 && r.len[0] == 2 && r.off[1] == 3 && r.len[1] == 1,
	   "intersection");
	gpt_box c = {2, {4, 0}, {1, 1}};
	ok(!gpt_box_intersect(&a, &c, &r), "touching boxes do not intersect");
}

static void make_pieces(gpt_ckpt_piece *p, float *w, float *bias)
{
	/* w [4, 6] in two row blocks (as tp would cut it), bias [6] whole. */
	p[0] = (gpt_ckpt_piece){"w", GPT_DTYPE_F32, 2, {4, 6}, {2, {0, 0}, {2, 6}}, w};
	p[1] = (gpt_ckpt_piece){"w", GPT_DTYPE_F32, 2, {4, 6}, {2, {2, 0}, {2, 6}}, w + 12};
	p[2] = (gpt_ckpt_piece){"bias", GPT_DTYPE_F32, 1, {6}, {1, {0}, {6}}, bias};
}

static void test_checkpoint(void)
{
	float w[24], bias[6];
	for (int i = 0; i < 24; i++)
		w[i] = (float)i * 0.5f;
	for (int i = 0; i < 6; i++)
		bias[i] = -(float)i;
	gpt_ckpt_piece p[3];
	make_pieces(p, w, bias);
	char out[256], path[4096];
	snprintf(out, sizeof out, "%s/output", dir);
	gpt_err err = {0};
	int64_t bytes = 0;
	ok(gpt_ckpt_save(out, 100, p, 3, "{\"step\": 100}", "Global:\n  seed: 1\n", path, sizeof path,
			 &bytes, &err) == 0, "save a checkpoint %s", err.msg);
	ok(strstr(path, "/step_00000100") && bytes > 0, "named step_00000100 (%lld bytes)", (long long)bytes);
	ok(sh("test \"$(cat %s/output/latest)\" = step_00000100", dir) == 0, "latest names it");
	ok(sh("test -z \"$(ls -A %s/output | grep tmp)\"", dir) == 0, "no temporary directory is left");

	gpt_ckpt *ck = NULL;
	ok(gpt_ckpt_open(&ck, out, &err) == 0, "open through latest %s", err.msg);
	if (!ck)
		return;
	is_int(gpt_ckpt_step(ck), 100, "step");
	is_str(gpt_ckpt_state_json(ck), "{\"step\": 100}", "state.json");
	float got[24];
	int64_t wshape[2] = {4, 6};
	gpt_box full = gpt_box_full(2, wshape);
	ok(gpt_ckpt_read_box(ck, "w", GPT_DTYPE_F32, 2, wshape, &full, got, &err) == 0 &&
	   memcmp(got, w, sizeof w) == 0, "read the whole tensor from two pieces");
	/* A column block, as a different tp layout would want it. */
	gpt_box cols = {2, {0, 3}, {4, 3}};
	float cb[12];
	ok(gpt_ckpt_read_box(ck, "w", GPT_DTYPE_F32, 2, wshape, &cols, cb, &err) == 0 &&
	   cb[0] == w[3] && cb[11] == w[23] && cb[5] == w[1 * 6 + 5], "read a box that spans both pieces");
	uint16_t hb[6];
	int64_t bshape[1] = {6};
	gpt_box bfull = gpt_box_full(1, bshape);
	ok(gpt_ckpt_read_box(ck, "bias", GPT_DTYPE_BF16, 1, bshape, &bfull, hb, &err) == 0 &&
	   gpt_bf16_to_f32(hb[5]) == -5.0f, "read with conversion to bf16");
	int64_t wrong[2] = {4, 7};
	ok(gpt_ckpt_read_box(ck, "w", GPT_DTYPE_F32, 2, wrong, &full, got, &err) == GPT_EDATA &&
	   strstr(err.msg, "[4, 6]") && strstr(err.msg, "[4, 7]"), "a shape mismatch names both shapes: %s", err.msg);
	ok(gpt_ckpt_read_box(ck, "nope", GPT_DTYPE_F32, 2, wshape, &full, got, &err) == GPT_EDATA,
	   "a missing tensor is an error");
	gpt_ckpt_close(ck);

	ok(gpt_ckpt_save(out, 100, p, 3, "{}", "", path, sizeof path, NULL, &err) != 0 &&
	   strstr(err.msg, "not overwriting"), "an existing checkpoint is not overwritten");

	/* A save killed between its rename and the update of latest leaves a
	 * complete directory that latest does not reach; the resumed run saves
	 * that step again and must not be refused, or every restart fails. */
	ok(sh("cp -r %s/output/step_00000100 %s/output/step_00000150", dir) == 0,
	   "a complete step_00000150 beyond latest");
	ok(gpt_ckpt_save(out, 150, p, 3, "{\"step\": 150}", "", path, sizeof path, NULL, &err) == 0,
	   "is replaced by a new save of that step: %s", err.msg);
	ok(sh("grep -qx step_00000150 %s/output/latest && grep -q 150 %s/output/step_00000150/state.json && "
	      "! ls -a %s/output | grep -q orphan", dir) == 0,
	   "  latest names the new one; nothing set aside remains");
	ok(gpt_ckpt_save(out, 100, p, 3, "{}", "", path, sizeof path, NULL, &err) != 0 &&
	   strstr(err.msg, "not overwriting"), "one before latest is still not overwritten");
	ok(sh("printf step_00000100 >%s/output/latest", dir) == 0, "latest back to step 100");

	/* Pieces that do not tile are refused before anything is written. */
	gpt_ckpt_piece gap[2] = {p[0], p[2]};
	ok(gpt_ckpt_save(out, 200, gap, 2, "{}", "", path, sizeof path, NULL, &err) != 0 &&
	   strstr(err.msg, "cover 12 of 24"), "pieces with a gap are refused: %s", err.msg);
	ok(sh("test ! -e %s/output/step_00000200", dir) == 0, "and nothing was written");

	/* Damage the saved checkpoint in a copy, in several ways. */
	ok(sh("cp -r %s/output/step_00000100 %s/flip && printf 'X' | dd of=%s/flip/rank-00000.safetensors bs=1 seek=100 conv=notrunc 2>/dev/null", dir) == 0,
	   "flip a byte");
	snprintf(path, sizeof path, "%s/flip", dir);
	ok(gpt_ckpt_open(&ck, path, &err) == GPT_EDATA && strstr(err.msg, "rank-00000.safetensors") &&
	   strstr(err.msg, "corrupted"), "a flipped byte is found: %s", err.msg);
	ok(sh("cp -r %s/output/step_00000100 %s/trunc && truncate -s -4 %s/trunc/rank-00000.safetensors", dir) == 0,
	   "truncate a shard");
	snprintf(path, sizeof path, "%s/trunc", dir);
	ok(gpt_ckpt_open(&ck, path, &err) == GPT_EDATA && strstr(err.msg, "truncated"), "a truncated shard is found: %s", err.msg);
	ok(sh("cp -r %s/output/step_00000100 %s/miss && rm %s/miss/state.json", dir) == 0, "remove state.json");
	snprintf(path, sizeof path, "%s/miss", dir);
	ok(gpt_ckpt_open(&ck, path, &err) == GPT_EDATA && strstr(err.msg, "state.json"), "a missing file is named, the checkpoint incomplete (bad data): %s", err.msg);
	ok(sh("cp -r %s/output/step_00000100 %s/tile", dir) == 0, "copy for an index edit");
	snprintf(path, sizeof path, "%s/tile/index.json", dir);
	json_t *idx = json_load_file(path, 0, NULL);
	json_t *piece = json_array_get(json_object_get(json_object_get(json_object_get(idx, "tensors"), "w"), "pieces"), 1);
	json_array_set_new(json_object_get(piece, "offset"), 0, json_integer(1)); /* rows 1..2: overlaps rows 0..1 */
	ok(json_dump_file(idx, path, 0) == 0, "move the second piece of w up one row");
	json_decref(idx);
	snprintf(path, sizeof path, "%s/tile", dir);
	ok(gpt_ckpt_open(&ck, path, &err) == GPT_EDATA && strstr(err.msg, "'w'") && strstr(err.msg, "overlap"),
	   "an index that does not tile a tensor is refused: %s", err.msg);
	/* Numbers no tensor has (found by fuzzing): they overflowed the box arithmetic. */
	for (int k = 0; k < 2; k++) {
		ok(sh("rm -rf %s/huge && cp -r %s/output/step_00000100 %s/huge", dir) == 0,
		   "copy for a huge %s", k ? "shape" : "offset");
		snprintf(path, sizeof path, "%s/huge/index.json", dir);
		idx = json_load_file(path, 0, NULL);
		json_t *tw = json_object_get(json_object_get(idx, "tensors"), "w");
		if (k)
			json_array_set_new(json_object_get(tw, "shape"), 0, json_integer(INT64_C(1) << 62));
		else
			json_array_set_new(json_object_get(json_array_get(json_object_get(tw, "pieces"), 1), "offset"), 0,
					   json_integer(INT64_MAX));
		ok(json_dump_file(idx, path, 0) == 0, "write it");
		json_decref(idx);
		snprintf(path, sizeof path, "%s/huge", dir);
		ok(gpt_ckpt_open(&ck, path, &err) == GPT_EDATA && strstr(err.msg, "'w'"),
		   "a huge %s is refused: %s", k ? "shape" : "offset", err.msg);
	}
	/* latest pointing at a directory without index.json */
	ok(sh("mkdir -p %s/out2/step_00000005 && echo step_00000005 > %s/out2/latest", dir) == 0, "a partial step");
	snprintf(path, sizeof path, "%s/out2", dir);
	ok(gpt_ckpt_open(&ck, path, &err) == GPT_EDATA && strstr(err.msg, "refusing to read it: name a complete step directory of") &&
	   !strstr(err.msg, "resume"),
	   "latest naming a partial checkpoint is refused: %s", err.msg);
	snprintf(path, sizeof path, "%s/none", dir);
	ok(gpt_ckpt_open(&ck, path, &err) == GPT_ENOINPUT, "no such directory");
}

int main(void)
{
	if (!mkdtemp(dir))
		return skip_all("cannot create a scratch directory");
	test_safetensors();
	test_boxes();
	test_checkpoint();
	sh("rm -rf %s", dir);
	return done_testing();
}
