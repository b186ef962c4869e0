/* Fuzzes the YAML configuration reader, -o overrides and PaddleNLP flags.
 *
 * Input: leading lines "-o Key=value" (an override each) and "--flag value"
 * (gpt_config_paddlenlp), then the YAML text. Whatever resolves must print
 * as YAML that reads back and prints the same (gpt_config_write_yaml's
 * promise). */
#include "config/config.h"
#include "fuzz.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	fuzz_init(*argc > 0 ? (*argv)[0] : NULL);
	/* the world size comes from the degrees, never from the environment */
	static const char *const vars[] = {"GPT_WORLD_SIZE", "WORLD_SIZE", "SLURM_NTASKS",
					   "OMPI_COMM_WORLD_SIZE"};
	for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
		unsetenv(vars[i]);
	return 0;
}

/* The resolved config as YAML (malloc'd). */
static char *to_yaml(const gpt_config *cfg, size_t *len)
{
	char *text = NULL;
	FILE *fp = open_memstream(&text, len);
	FUZZ_CHECK(fp != NULL, "open_memstream");
	gpt_err err = {0};
	int rc = gpt_config_write_yaml(cfg, fp, &err);
	fclose(fp);
	FUZZ_CHECK(rc == 0, "write_yaml failed: %s", err.msg);
	return text;
}

static void roundtrip(const gpt_config *cfg)
{
	size_t len1, len2;
	char *y1 = to_yaml(cfg, &len1);
	gpt_config again;
	gpt_err err = {0};
	int rc = gpt_config_init(&again, &err);
	if (!rc)
		rc = gpt_config_read_text(&again, y1, len1, "resolved.yaml", &err);
	if (!rc)
		rc = gpt_config_resolve(&again, 0, &err);
	FUZZ_CHECK(rc == 0, "the printed configuration does not read back: %s\n%s", err.msg, y1);
	char *y2 = to_yaml(&again, &len2);
	FUZZ_CHECK(len1 == len2 && memcmp(y1, y2, len1) == 0,
		   "the printed configuration reads back differently:\n%s\n---\n%s", y1, y2);
	gpt_config_free(&again);
	free(y1);
	free(y2);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = fuzz_strndup(data, size);
	gpt_config cfg;
	gpt_err err = {0};
	int rc = gpt_config_init(&cfg, &err);
	FUZZ_CHECK(rc == 0, "init: %s", err.msg);
	char *p = text;
	while (!rc && (strncmp(p, "-o ", 3) == 0 || strncmp(p, "--", 2) == 0)) {
		char *eol = strchr(p, '\n');
		if (eol)
			*eol = 0;
		if (p[1] == 'o') {
			rc = gpt_config_override(&cfg, p + 3, &err);
		} else {
			char *flag = p + 2, *val = strchr(flag, ' ');
			if (val)
				*val++ = 0;
			rc = gpt_config_paddlenlp(&cfg, flag, val ? val : "", &err);
		}
		if (!eol) {
			p += strlen(p);
			break;
		}
		p = eol + 1;
	}
	/* the YAML part keeps its length: NUL bytes in it must be reported */
	size_t off = (size_t)(p - text);
	if (!rc && off < size)
		rc = gpt_config_read_text(&cfg, (const char *)data + off, size - off, "fuzz.yaml", &err);
	if (!rc)
		rc = gpt_config_resolve(&cfg, 0, &err);
	FUZZ_SAY("%s", rc ? err.msg : "resolved");
	if (rc) {
		FUZZ_CHECK(err.msg[0] && !strchr(err.msg, '\n'), "error %d without a one-line message: '%s'",
			   rc, err.msg);
	} else {
		roundtrip(&cfg);
	}
	gpt_config_free(&cfg);
	free(text);
	return 0;
}
