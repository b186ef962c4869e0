/* Forking ranks for the comm tests, around a rendezvous store served from a
 * process of its own.
 *
 * The store server is a thread. A child forked while another thread of its
 * parent holds a lock (the allocator's: AddressSanitizer's takes one per
 * size class) inherits that lock held for good, and its first allocation of
 * that size waits forever; test-comm-async hung that way now and then under
 * ASan. So the process that forks the ranks never runs a thread: it forks
 * the server's process first, reads the port from it, forks the ranks, and
 * stops the server by closing a pipe.
 *
 * test_run_ranks(n, limit_s, fn, arg) runs fn(rank, n, port, arg) in n
 * forked ranks and returns how many failed (returned non-zero or died);
 * ranks still running after limit_s seconds are killed and count as failed. */
#ifndef GPT_TEST_RANKS_H
#define GPT_TEST_RANKS_H

#include "comm/comm.h"
#include "tap.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef struct test_store {
	pid_t pid;   /* the server's process */
	int port;
	int stop_fd; /* closing it stops the server */
} test_store;

/* Starts the server's process; returns 0, or -1 after a diagnostic. */
static int test_store_start(test_store *s)
{
	int portp[2], stopp[2];
	if (pipe(portp) || pipe(stopp)) {
		diag("test store: pipe: %s", strerror(errno));
		return -1;
	}
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0) {
		diag("test store: fork: %s", strerror(errno));
		return -1;
	}
	if (pid == 0) {
		close(portp[0]);
		close(stopp[1]);
		gpt_err err = {0};
		gpt_store_server *srv = NULL;
		int port = -1;
		if (gpt_store_server_start("127.0.0.1", 0, &srv, &err))
			fprintf(stderr, "test store: %s\n", err.msg);
		else
			port = gpt_store_server_port(srv);
		if (write(portp[1], &port, sizeof port) != (ssize_t)sizeof port || port < 0)
			_exit(1);
		close(portp[1]);
		char c;
		ssize_t k;
		do
			k = read(stopp[0], &c, 1);
		while (k > 0 || (k < 0 && errno == EINTR));
		gpt_store_server_stop(srv);
		_exit(0);
	}
	close(portp[1]);
	close(stopp[0]);
	s->pid = pid;
	s->stop_fd = stopp[1];
	s->port = -1;
	ssize_t got = read(portp[0], &s->port, sizeof s->port);
	close(portp[0]);
	if (got != (ssize_t)sizeof s->port || s->port < 0) {
		diag("test store: the server's process did not start");
		close(s->stop_fd);
		waitpid(pid, NULL, 0);
		return -1;
	}
	return 0;
}

static void test_store_stop(test_store *s)
{
	close(s->stop_fd);
	waitpid(s->pid, NULL, 0);
}

typedef int (*test_rank_fn)(int rank, int n, int port, void *arg);

static int test_run_ranks(int n, double limit_s, test_rank_fn fn, void *arg)
{
	test_store s;
	if (n > 128 || test_store_start(&s))
		return n;
	pid_t pids[128];
	int left = 0;
	fflush(NULL);
	for (int r = 0; r < n; r++) {
		pids[r] = fork();
		if (pids[r] == 0) {
			close(s.stop_fd);
			_exit(fn(r, n, s.port, arg) ? 1 : 0);
		}
		left += pids[r] > 0;
	}
	int failed = n - left;
	struct timespec t0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	int killed = 0;
	while (left > 0) {
		int status;
		for (int r = 0; r < n; r++) {
			if (pids[r] <= 0 || waitpid(pids[r], &status, WNOHANG) != pids[r])
				continue;
			pids[r] = 0;
			left--;
			failed += !WIFEXITED(status) || WEXITSTATUS(status) != 0;
		}
		struct timespec now;
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (!killed && (double)(now.tv_sec - t0.tv_sec) + 1e-9 * (double)(now.tv_nsec - t0.tv_nsec) > limit_s) {
			diag("ranks still running after %g s: killing them", limit_s);
			for (int r = 0; r < n; r++)
				if (pids[r] > 0)
					kill(pids[r], SIGKILL);
			killed = 1;
		}
		struct timespec ts = {0, 2000000};
		nanosleep(&ts, NULL);
	}
	test_store_stop(&s);
	return failed;
}

#endif
