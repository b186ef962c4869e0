/* Reading a FleetX-style YAML file (libyaml's document API) into the typed
 * configuration, with file:line:column on every message. */
#include "config/config.h"

#include <libgen.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <yaml.h>

/* A configuration is a few kilobytes; this bounds what a mistaken path
 * (a dataset, a checkpoint) can make us read. */
#define MAX_CONFIG_BYTES (16u << 20)
#define MAX_BASE_DEPTH 8
#define MAX_PATH_LEN 256
/* A configuration nests four levels deep; libyaml's scanner slows down
 * quadratically with nesting, so deeper input is refused while streaming,
 * before it gets that far. Aliases are bounded for the same reason. */
#define MAX_DEPTH 32
#define MAX_ALIASES 1024

typedef struct reader {
	gpt_config *cfg;
	yaml_document_t *doc;
	const char *file; /* in the arena */
	const char *dir;  /* for _base_ */
	/* per key: the spelling and the value node that set it in this file,
	 * so that two spellings of one key (adam_beta1 and beta1) with two
	 * values are not both taken */
	const char **set_as;
	const yaml_node_t **set_by;
} reader;

static int at(reader *r, const yaml_node_t *n, gpt_err *err, const char *fmt, ...)
	GPT_PRINTF(4, 5);
static int at(reader *r, const yaml_node_t *n, gpt_err *err, const char *fmt, ...)
{
	char msg[GPT_ERR_MSG_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	return gpt_err_set(err, GPT_EDATA, "%s:%zu:%zu: %s", r->file, n->start_mark.line + 1,
			   n->start_mark.column + 1, msg);
}

static int plain_null(const yaml_node_t *n)
{
	if (n->type != YAML_SCALAR_NODE || n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
		return 0;
	const char *s = (const char *)n->data.scalar.value;
	return !*s || strcmp(s, "~") == 0 || strcasecmp(s, "null") == 0 || strcmp(s, "None") == 0;
}

static const char *kind(const yaml_node_t *n)
{
	return n->type == YAML_MAPPING_NODE ? "a mapping" : n->type == YAML_SEQUENCE_NODE ? "a sequence"
											       : "a scalar";
}

/* 1 when two value nodes are the same text: scalars, or sequences of
 * scalars item by item. */
static int same_value(reader *r, const yaml_node_t *a, const yaml_node_t *b)
{
	if (a->type != b->type)
		return 0;
	if (a->type == YAML_SCALAR_NODE)
		return a->data.scalar.length == b->data.scalar.length &&
		       memcmp(a->data.scalar.value, b->data.scalar.value, a->data.scalar.length) == 0;
	if (a->type != YAML_SEQUENCE_NODE)
		return 0;
	const yaml_node_item_t *ia = a->data.sequence.items.start, *ib = b->data.sequence.items.start;
	if (a->data.sequence.items.top - ia != b->data.sequence.items.top - ib)
		return 0;
	for (; ia < a->data.sequence.items.top; ia++, ib++) {
		const yaml_node_t *x = yaml_document_get_node(r->doc, *ia), *y = yaml_document_get_node(r->doc, *ib);
		if (!x || !y || x->type != YAML_SCALAR_NODE || !same_value(r, x, y))
			return 0;
	}
	return 1;
}

static int set_leaf(reader *r, int k, const char *path, const yaml_node_t *v, gpt_err *err)
{
	gpt_config_origin o = {GPT_SRC_FILE, r->file, (int)v->start_mark.line + 1,
			       (int)v->start_mark.column + 1};
	int nk;
	const gpt_config_key *key = &gpt_config_keys(&nk)[k];
	if (r->set_as[k]) {
		/* the same value under both spellings (a config written for two
		 * versions of FleetX) is what either alone would give */
		if (same_value(r, r->set_by[k], v))
			return 0;
		return at(r, v, err, "%s: %s was already given as %s at line %zu, with another value; keep one",
			  path, key->name, r->set_as[k], (size_t)r->set_by[k]->start_mark.line + 1);
	}
	if (!(r->set_as[k] = gpt_arena_strdup(&r->cfg->arena, path, err)))
		return err->code;
	r->set_by[k] = v;
	if (v->type == YAML_SCALAR_NODE) {
		const char *means = plain_null(v) ? gpt_config_null_means(path) : NULL;
		return gpt_config_set_scalar(r->cfg, k, means ? means : (const char *)v->data.scalar.value,
					     plain_null(v) && !means, &o, err);
	}
	if (v->type == YAML_MAPPING_NODE)
		return at(r, v, err, "%s: expected a value, found a mapping", path);
	int n = (int)(v->data.sequence.items.top - v->data.sequence.items.start);
	if (key->type != GPT_CT_STRLIST && key->type != GPT_CT_INTLIST && key->type != GPT_CT_SPLIT)
		return at(r, v, err, "%s: expected a single value, found a sequence", path);
	if (n > 64)
		return at(r, v, err, "%s: expected at most 64 items, found %d", path, n);
	const char *items[64];
	for (int i = 0; i < n; i++) {
		yaml_node_t *it = yaml_document_get_node(r->doc, v->data.sequence.items.start[i]);
		if (!it || it->type != YAML_SCALAR_NODE)
			return at(r, it ? it : v, err, "%s: expected a list of scalars, found %s in it",
				  path, it ? kind(it) : "nothing");
		items[i] = (const char *)it->data.scalar.value;
	}
	return gpt_config_set_list(r->cfg, k, items, n, &o, err);
}

static int walk(reader *r, const yaml_node_t *map, const char *prefix, gpt_err *err);

static int read_path(gpt_config *cfg, const char *path, gpt_err *err);

static int entry(reader *r, const char *prefix, const yaml_node_t *kn, const yaml_node_t *vn,
		 gpt_err *err)
{
	if (kn->type != YAML_SCALAR_NODE)
		return at(r, kn, err, "expected a key name, found %s", kind(kn));
	const char *name = (const char *)kn->data.scalar.value;
	if (!*prefix && strcmp(name, "_base_") == 0)
		return 0; /* read before everything else, see read_doc */
	char path[MAX_PATH_LEN];
	if ((size_t)snprintf(path, sizeof path, "%s%s%s", prefix, *prefix ? "." : "", name) >=
	    sizeof path)
		return at(r, kn, err, "key %.60s...: expected a configuration key, found a name of "
				      "%zu bytes", path, strlen(name));
	if (strchr(name, '.') || !*name) {
		const char *near = gpt_config_key_nearest(path);
		return at(r, kn, err, "unknown key %s; did you mean %s? (nest sections as mappings)",
			  path, near ? near : "?");
	}
	int k = gpt_config_key_find(path);
	/* "Optimizer.grad_clip" is both a section and (as a number) an alias. */
	if (k >= 0 && !(vn->type == YAML_MAPPING_NODE && gpt_config_is_section(path)))
		return set_leaf(r, k, path, vn, err);
	if (gpt_config_is_section(path)) {
		if (vn->type == YAML_MAPPING_NODE)
			return walk(r, vn, path, err);
		if (plain_null(vn))
			return 0; /* an empty section */
		return at(r, vn, err, "%s: expected a mapping of keys (see gpt-config(5)), found %s",
			  path, kind(vn));
	}
	/* the sections of a MindFormers configuration (run_gpt2_13b.yaml) */
	static const char *const mindformers[] = {
		"context", "parallel", "parallel_config", "recompute_config", "runner_config",
		"runner_wrapper", "train_dataset", "lr_schedule", NULL,
	};
	for (int i = 0; !*prefix && mindformers[i]; i++)
		if (strcmp(name, mindformers[i]) == 0)
			return at(r, kn, err, "unknown key %s: a section of MindFormers' configurations, "
					      "which gptkit does not read; write its settings in FleetX's "
					      "sections (Global, Engine, Model, Distributed, ...) as "
					      "gpt-config(5) says under MindFormers", path);
	const char *near = gpt_config_key_nearest(path), *note = gpt_config_unread_note(path);
	if (note)
		return at(r, kn, err, "unknown key %s: %s", path, note);
	return at(r, kn, err, "unknown key %s; did you mean %s?", path, near ? near : "?");
}

/* YAML's merge key (`<<: *anchor`, or a sequence of them), which PyYAML and
 * so FleetX honour: the merged mappings' keys count as this mapping's, after
 * its own keys and the earlier merged mappings' (a shallow merge: a section
 * given here replaces a merged one of the same name). */
#define MAX_MERGE_NAMES 256
#define MAX_MERGE_MAPS 64

typedef struct merge_state {
	const char *names[MAX_MERGE_NAMES]; /* keys this mapping has taken */
	int n_names;
	const yaml_node_t *maps[MAX_MERGE_MAPS]; /* mappings merged, each once */
	int n_maps;
} merge_state;

static int is_merge_key(const yaml_node_t *kn)
{
	return kn->type == YAML_SCALAR_NODE && kn->data.scalar.style == YAML_PLAIN_SCALAR_STYLE &&
	       strcmp((const char *)kn->data.scalar.value, "<<") == 0;
}

static int merge_pairs(reader *r, const yaml_node_t *map, const char *prefix, merge_state *m,
		       gpt_err *err);

static int merge_from(reader *r, const yaml_node_t *kn, const yaml_node_t *src, const char *prefix,
		      merge_state *m, gpt_err *err)
{
	if (src->type != YAML_MAPPING_NODE)
		return at(r, src, err, "%s%s<<: expected a mapping (or a sequence of mappings) to "
				       "merge, found %s", prefix, *prefix ? "." : "", kind(src));
	for (int i = 0; i < m->n_maps; i++)
		if (m->maps[i] == src)
			return 0; /* merged already: every key of it is taken */
	if (m->n_maps == MAX_MERGE_MAPS)
		return at(r, kn, err, "<<: expected at most %d merged mappings, found more",
			  MAX_MERGE_MAPS);
	m->maps[m->n_maps++] = src;
	return merge_pairs(r, src, prefix, m, err);
}

static int merge_pairs(reader *r, const yaml_node_t *map, const char *prefix, merge_state *m,
		       gpt_err *err)
{
	yaml_node_pair_t *start = map->data.mapping.pairs.start, *top = map->data.mapping.pairs.top;
	for (yaml_node_pair_t *p = start; p < top; p++) {
		yaml_node_t *kn = yaml_document_get_node(r->doc, p->key);
		yaml_node_t *vn = yaml_document_get_node(r->doc, p->value);
		if (!kn || !vn)
			return gpt_err_set(err, GPT_EINTERNAL, "%s: libyaml returned a broken node", r->file);
		/* A duplicated key is almost always an editing mistake. */
		if (kn->type == YAML_SCALAR_NODE)
			for (yaml_node_pair_t *q = start; q < p; q++) {
				yaml_node_t *qk = yaml_document_get_node(r->doc, q->key);
				if (qk && qk->type == YAML_SCALAR_NODE &&
				    strcmp((char *)qk->data.scalar.value, (char *)kn->data.scalar.value) == 0)
					return at(r, kn, err,
						  "duplicate key %s%s%s (first at line %zu); keep one",
						  prefix, *prefix ? "." : "", (char *)kn->data.scalar.value,
						  qk->start_mark.line + 1);
			}
		if (is_merge_key(kn))
			continue; /* after this mapping's own keys, below */
		if (kn->type == YAML_SCALAR_NODE) {
			const char *name = (const char *)kn->data.scalar.value;
			int taken = 0;
			for (int i = 0; i < m->n_names && !taken; i++)
				taken = strcmp(m->names[i], name) == 0;
			if (taken)
				continue; /* given by a mapping that merges this one */
			if (m->n_names == MAX_MERGE_NAMES)
				return at(r, kn, err, "expected at most %d keys in a mapping, found more",
					  MAX_MERGE_NAMES);
			m->names[m->n_names++] = name;
		}
		int rc = entry(r, prefix, kn, vn, err);
		if (rc)
			return rc;
	}
	for (yaml_node_pair_t *p = start; p < top; p++) {
		yaml_node_t *kn = yaml_document_get_node(r->doc, p->key);
		yaml_node_t *vn = yaml_document_get_node(r->doc, p->value);
		if (!is_merge_key(kn))
			continue;
		int rc = 0;
		if (vn->type == YAML_SEQUENCE_NODE) {
			for (yaml_node_item_t *it = vn->data.sequence.items.start;
			     !rc && it < vn->data.sequence.items.top; it++) {
				yaml_node_t *src = yaml_document_get_node(r->doc, *it);
				if (!src)
					return gpt_err_set(err, GPT_EINTERNAL,
							   "%s: libyaml returned a broken node", r->file);
				rc = merge_from(r, kn, src, prefix, m, err);
			}
		} else {
			rc = merge_from(r, kn, vn, prefix, m, err);
		}
		if (rc)
			return rc;
	}
	return 0;
}

static int walk(reader *r, const yaml_node_t *map, const char *prefix, gpt_err *err)
{
	merge_state *m = calloc(1, sizeof *m);
	if (!m)
		return gpt_err_set(err, GPT_EINTERNAL, "%s: out of memory", r->file);
	m->maps[m->n_maps++] = map;
	int rc = merge_pairs(r, map, prefix, m, err);
	free(m);
	return rc;
}

static int read_doc(reader *r, gpt_err *err)
{
	yaml_node_t *root = yaml_document_get_root_node(r->doc);
	if (!root || plain_null(root))
		return gpt_err_set(err, GPT_EDATA,
				   "%s: the configuration is empty; expected sections such as Global, "
				   "Engine, Model (see gpt-config(5))", r->file);
	if (root->type != YAML_MAPPING_NODE)
		return at(r, root, err, "expected a mapping of sections (Global, Engine, Model, ...), "
					"found %s", kind(root));
	for (yaml_node_pair_t *p = root->data.mapping.pairs.start; p < root->data.mapping.pairs.top;
	     p++) {
		yaml_node_t *kn = yaml_document_get_node(r->doc, p->key);
		yaml_node_t *vn = yaml_document_get_node(r->doc, p->value);
		if (!kn || !vn || kn->type != YAML_SCALAR_NODE ||
		    strcmp((char *)kn->data.scalar.value, "_base_") != 0)
			continue;
		if (vn->type != YAML_SCALAR_NODE || plain_null(vn))
			return at(r, vn, err, "_base_: expected a file name, found %s",
				  vn->type == YAML_SCALAR_NODE ? "null" : kind(vn));
		if (r->cfg->base_depth >= MAX_BASE_DEPTH)
			return at(r, vn, err, "_base_: expected at most %d nested bases; is there a cycle?",
				  MAX_BASE_DEPTH);
		const char *b = (const char *)vn->data.scalar.value;
		gpt_buf path = GPT_BUF_INIT;
		if (gpt_buf_printf(&path, err, "%s%s%s", b[0] == '/' ? "" : r->dir,
				   b[0] == '/' ? "" : "/", b))
			return err->code;
		r->cfg->base_depth++;
		int rc = read_path(r->cfg, path.data, err);
		r->cfg->base_depth--;
		gpt_buf_free(&path);
		if (rc)
			return gpt_err_prefix(err, "%s:%zu:%zu: _base_", r->file, vn->start_mark.line + 1,
					      vn->start_mark.column + 1);
	}
	return walk(r, root, "", err);
}

static int syntax_error(yaml_parser_t *p, const char *text, size_t len, const char *name,
			gpt_err *err)
{
	if (p->error == YAML_READER_ERROR) {
		/* libyaml gives a decoding error a byte offset, not a mark; a bad
		 * trailing byte is shown at the start of its sequence */
		size_t off = p->problem_offset < len ? p->problem_offset : len, line = 1, col = 1;
		size_t j = off;
		if (p->problem && strstr(p->problem, "trailing")) {
			while (j > 0 && off - j < 3 && ((unsigned char)text[j - 1] & 0xc0) == 0x80)
				j--;
			if (j > 0 && (unsigned char)text[j - 1] >= 0xc0)
				off = j - 1;
		}
		for (size_t i = 0; i < off; i++) {
			unsigned char c = (unsigned char)text[i];
			if (c == '\n')
				line++, col = 1;
			else if ((c & 0xc0) != 0x80)
				col++;
		}
		if (off < len)
			return gpt_err_set(err, GPT_EDATA,
					   "%s:%zu:%zu: expected UTF-8 text, found byte 0x%02x (%s)", name,
					   line, col, (unsigned char)text[off],
					   p->problem ? p->problem : "not decodable");
		return gpt_err_set(err, GPT_EDATA, "%s:%zu:%zu: expected UTF-8 text, found %s", name,
				   line, col, p->problem ? p->problem : "an undecodable end");
	}
	return gpt_err_set(err, GPT_EDATA, "%s:%zu:%zu: YAML syntax error: %s%s%s", name,
			   p->problem_mark.line + 1, p->problem_mark.column + 1,
			   p->problem ? p->problem : "unknown problem", p->context ? " " : "",
			   p->context ? p->context : "");
}

/* One pass over the event stream that stops at the first sign of abuse. */
static int prescan(const char *text, size_t len, const char *name, gpt_err *err)
{
	yaml_parser_t parser;
	yaml_event_t ev;
	int depth = 0, aliases = 0, rc = 0;
	if (!yaml_parser_initialize(&parser))
		return gpt_err_set(err, GPT_EINTERNAL, "%s: cannot initialise libyaml", name);
	yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
	for (;;) {
		if (!yaml_parser_parse(&parser, &ev)) {
			rc = syntax_error(&parser, text, len, name, err);
			break;
		}
		yaml_event_type_t t = ev.type;
		size_t line = ev.start_mark.line + 1, col = ev.start_mark.column + 1;
		yaml_event_delete(&ev);
		if (t == YAML_STREAM_END_EVENT)
			break;
		if (t == YAML_SEQUENCE_START_EVENT || t == YAML_MAPPING_START_EVENT)
			depth++;
		else if (t == YAML_SEQUENCE_END_EVENT || t == YAML_MAPPING_END_EVENT)
			depth--;
		else if (t == YAML_ALIAS_EVENT)
			aliases++;
		if (depth > MAX_DEPTH) {
			rc = gpt_err_set(err, GPT_EDATA,
					 "%s:%zu:%zu: expected a configuration nested at most %d levels, "
					 "found deeper nesting", name, line, col, MAX_DEPTH);
			break;
		}
		if (aliases > MAX_ALIASES) {
			rc = gpt_err_set(err, GPT_EDATA,
					 "%s:%zu:%zu: expected at most %d YAML aliases, found more", name,
					 line, col, MAX_ALIASES);
			break;
		}
	}
	yaml_parser_delete(&parser);
	return rc;
}

static int parse_text(gpt_config *cfg, const char *text, size_t len, const char *name,
		      const char *dir, gpt_err *err)
{
	reader r = {cfg, NULL, NULL, dir, NULL, NULL};
	int nk;
	gpt_config_keys(&nk);
	if (!(r.file = gpt_arena_strdup(&cfg->arena, name, err)))
		return err->code;
	int rc = prescan(text, len, name, err);
	if (rc)
		return rc;
	r.set_as = gpt_arena_alloc(&cfg->arena, sizeof *r.set_as * (size_t)nk, 8, err);
	r.set_by = gpt_arena_alloc(&cfg->arena, sizeof *r.set_by * (size_t)nk, 8, err);
	if (!r.set_as || !r.set_by)
		return err->code;
	memset(r.set_as, 0, sizeof *r.set_as * (size_t)nk);
	yaml_parser_t parser;
	yaml_document_t doc;
	if (!yaml_parser_initialize(&parser))
		return gpt_err_set(err, GPT_EINTERNAL, "%s: cannot initialise libyaml", name);
	yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
	if (!yaml_parser_load(&parser, &doc)) {
		rc = syntax_error(&parser, text, len, name, err);
		yaml_parser_delete(&parser);
		return rc;
	}
	r.doc = &doc;
	rc = read_doc(&r, err);
	if (!rc) {
		/* One document per file: a second one would be silently ignored. */
		yaml_document_t more;
		if (!yaml_parser_load(&parser, &more)) {
			rc = syntax_error(&parser, text, len, name, err);
		} else {
			yaml_node_t *root2 = yaml_document_get_root_node(&more);
			if (root2)
				rc = gpt_err_set(err, GPT_EDATA,
						 "%s:%zu:%zu: expected one YAML document, found a "
						 "second one; merge them or split the file",
						 name, root2->start_mark.line + 1,
						 root2->start_mark.column + 1);
			yaml_document_delete(&more);
		}
	}
	yaml_document_delete(&doc);
	yaml_parser_delete(&parser);
	return rc;
}

int gpt_config_read_text(gpt_config *cfg, const char *text, size_t len, const char *name,
			 gpt_err *err)
{
	return parse_text(cfg, text, len, name, ".", err);
}

static int read_path(gpt_config *cfg, const char *path, gpt_err *err)
{
	char *text = NULL;
	size_t len = 0;
	char *real = realpath(path, NULL);
	cfg->base_chain[cfg->base_depth] = NULL;
	if (real) {
		for (int i = 0; i < cfg->base_depth; i++)
			if (cfg->base_chain[i] && strcmp(cfg->base_chain[i], real) == 0) {
				free(real);
				return gpt_err_set(err, GPT_EDATA,
						   "%s: expected a chain of _base_ files, found a cycle back "
						   "to this file", path);
			}
		cfg->base_chain[cfg->base_depth] = gpt_arena_strdup(&cfg->arena, real, err);
		free(real);
		if (!cfg->base_chain[cfg->base_depth])
			return err->code;
	}
	int rc = gpt_file_read_all(path, MAX_CONFIG_BYTES, &text, &len, err);
	if (rc) {
		if (rc == GPT_EDATA)
			return gpt_err_set(err, GPT_EDATA,
					   "%s: expected a YAML configuration of at most %u MB, found a "
					   "larger file", path, MAX_CONFIG_BYTES >> 20);
		return rc;
	}
	if (memchr(text, '\0', len)) {
		free(text);
		return gpt_err_set(err, GPT_EDATA,
				   "%s: expected a YAML text file, found NUL bytes (a binary file?)", path);
	}
	if (!cfg->file && !(cfg->file = gpt_arena_strdup(&cfg->arena, path, err))) {
		free(text);
		return err->code;
	}
	char *dcopy = gpt_strdup(path, err);
	if (!dcopy) {
		free(text);
		return err->code;
	}
	char *dir = gpt_arena_strdup(&cfg->arena, dirname(dcopy), err);
	free(dcopy);
	rc = dir ? parse_text(cfg, text, len, path, dir, err) : err->code;
	free(text);
	return rc;
}

int gpt_config_read_file(gpt_config *cfg, const char *path, gpt_err *err)
{
	return read_path(cfg, path, err);
}
