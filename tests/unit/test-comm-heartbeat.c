/* lib/comm: heartbeat slots. The launcher's side creates a slot; a worker
 * finds it through GPT_HEARTBEAT_FD (here, in an environment we build), and
 * its beats, step and pid reach the launcher's mapping, also from another
 * process. Values that do not name a slot are refused with the variable. */
#include "comm/comm.h"
#include "tap.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void env_with(char *buf, size_t size, char **envp, const char *val)
{
	snprintf(buf, size, "%s=%s", GPT_HEARTBEAT_ENV, val);
	envp[0] = "OTHER=1";
	envp[1] = buf;
	envp[2] = NULL;
}

static void test_no_variable(void)
{
	gpt_err err = {0};
	gpt_heartbeat *hb = (gpt_heartbeat *)&err;
	char *envp[] = {"PATH=/bin", NULL};
	is_int(gpt_heartbeat_open(&hb, envp, &err), 0, "no variable: not an error");
	ok(hb == NULL, "no variable: no heartbeat");
	gpt_heartbeat_beat(NULL, 5);
	gpt_heartbeat_close(NULL);
	ok(1, "beat and close accept NULL");
	char *empty[] = {GPT_HEARTBEAT_ENV "=", NULL};
	is_int(gpt_heartbeat_open(&hb, empty, &err), 0, "an empty variable is no variable");
}

static void test_beats(void)
{
	gpt_err err = {0};
	gpt_heartbeat_slot s;
	is_int(gpt_heartbeat_slot_create(&s, &err), 0, "create a slot");
	ok(s.fd >= 0 && (fcntl(s.fd, F_GETFD) & FD_CLOEXEC), "its descriptor is close-on-exec");
	uint64_t beats = 7;
	int64_t step = 7;
	int pid = 7;
	gpt_heartbeat_slot_read(&s, &beats, &step, &pid);
	ok(beats == 0 && step == 0 && pid == 0, "a new slot reads 0: not watched");

	char var[64], fd[16], *envp[3];
	snprintf(fd, sizeof fd, "%d", s.fd);
	env_with(var, sizeof var, envp, fd);
	gpt_heartbeat *hb = NULL;
	is_int(gpt_heartbeat_open(&hb, envp, &err), 0, "open the slot from the environment");
	ok(hb != NULL, "a heartbeat");
	gpt_heartbeat_slot_read(&s, &beats, &step, &pid);
	is_int(beats, 1, "opening is the first beat");
	is_int(pid, getpid(), "the slot names the process that opened it");
	gpt_heartbeat_beat(hb, 41);
	gpt_heartbeat_beat(hb, 42);
	gpt_heartbeat_slot_read(&s, &beats, &step, NULL);
	is_int(beats, 3, "each beat counts");
	is_int(step, 42, "the last beat's step");
	gpt_heartbeat_close(hb);

	/* A worker is another process that inherited the descriptor. */
	pid_t child = fork();
	if (child == 0) {
		gpt_heartbeat *h2 = NULL;
		if (gpt_heartbeat_open(&h2, envp, &err))
			_exit(2);
		for (int i = 0; i < 1000; i++)
			gpt_heartbeat_beat(h2, 1000 + i);
		gpt_heartbeat_close(h2);
		_exit(0);
	}
	int status = -1;
	waitpid(child, &status, 0);
	ok(WIFEXITED(status) && WEXITSTATUS(status) == 0, "a child process opens and beats");
	gpt_heartbeat_slot_read(&s, &beats, &step, &pid);
	is_int(beats, 3 + 1001, "its beats add to the counter");
	is_int(step, 1999, "its last step is seen");
	is_int(pid, child, "its pid is seen");
	gpt_heartbeat_slot_free(&s);
	ok(s.fd == -1 && s.map == NULL, "free clears the slot");
	gpt_heartbeat_slot_free(&s);
	gpt_heartbeat_slot_read(&s, &beats, &step, &pid);
	ok(beats == 0 && step == 0 && pid == 0, "a freed slot reads 0");
}

static void test_bad_values(void)
{
	gpt_err err = {0};
	gpt_heartbeat *hb = NULL;
	char var[64], *envp[3];
	env_with(var, sizeof var, envp, "three");
	is_int(gpt_heartbeat_open(&hb, envp, &err), GPT_EUSAGE, "a word for a descriptor");
	is_str(err.msg, "environment variable GPT_HEARTBEAT_FD='three': expected a file descriptor number (gpt-launch sets it)",
	       "  names the variable and its value");

	int fd = open("/dev/null", O_RDONLY);
	char num[16];
	snprintf(num, sizeof num, "%d", fd);
	env_with(var, sizeof var, envp, num);
	is_int(gpt_heartbeat_open(&hb, envp, &err), GPT_EUSAGE, "a descriptor that is not a file");
	ok(strstr(err.msg, "is not gpt-launch's heartbeat file") && strstr(err.msg, "--heartbeat-timeout 0"),
	   "  says so and how to turn hang detection off: %s", err.msg);
	close(fd);
	is_int(gpt_heartbeat_open(&hb, envp, &err), GPT_EUSAGE, "a closed descriptor");

	/* A regular file of the right size without the launcher's mark. */
	char path[] = "/tmp/test-heartbeat-XXXXXX";
	fd = mkstemp(path);
	unlink(path);
	char zero[256] = {0};
	ok(fd >= 0 && write(fd, zero, sizeof zero) == (ssize_t)sizeof zero, "a plain file");
	snprintf(num, sizeof num, "%d", fd);
	env_with(var, sizeof var, envp, num);
	is_int(gpt_heartbeat_open(&hb, envp, &err), GPT_EUSAGE, "a file without the mark");
	ok(hb == NULL && strstr(err.msg, "did a wrapper reuse it?"), "  is refused: %s", err.msg);
	char back[256];
	ok(pread(fd, back, sizeof back, 0) == (ssize_t)sizeof back && memcmp(back, zero, sizeof zero) == 0,
	   "  and left unchanged");
	close(fd);
}

static void test_timeout_env(void)
{
	gpt_err err = {0};
	double t = -1;
	unsetenv("GPT_HEARTBEAT_TIMEOUT");
	is_int(gpt_heartbeat_timeout(&t, &err), 0, "no GPT_HEARTBEAT_TIMEOUT");
	is_near(t, GPT_HEARTBEAT_DEFAULT_TIMEOUT_S, 0, "the default");
	setenv("GPT_HEARTBEAT_TIMEOUT", "2.5", 1);
	gpt_heartbeat_timeout(&t, &err);
	is_near(t, 2.5, 0, "seconds, fractions too");
	setenv("GPT_HEARTBEAT_TIMEOUT", "0", 1);
	gpt_heartbeat_timeout(&t, &err);
	is_near(t, 0, 0, "0: off");
	setenv("GPT_HEARTBEAT_TIMEOUT", "-1", 1);
	is_int(gpt_heartbeat_timeout(&t, &err), GPT_EUSAGE, "a negative timeout");
	is_str(err.msg, "environment variable GPT_HEARTBEAT_TIMEOUT='-1': expected seconds >= 0 (0 turns hang detection off)",
	       "  names the variable");
	unsetenv("GPT_HEARTBEAT_TIMEOUT");
}

int main(void)
{
	test_no_variable();
	test_beats();
	test_bad_values();
	test_timeout_env();
	return done_testing();
}
