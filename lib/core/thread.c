/* Spawn-and-join for small fixed sets of worker threads. */
#include "core.h"

#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

typedef struct thread_slot {
	gpt_thread_fn fn;
	void *arg;
	int index;
	int rc;
} thread_slot;

static void *thread_main(void *p)
{
	thread_slot *s = p;
	s->rc = s->fn(s->arg, s->index);
	return NULL;
}

int gpt_threads_run(int n, gpt_thread_fn fn, void *arg, gpt_err *err)
{
	if (n <= 1)
		return n == 1 ? fn(arg, 0) : 0;
	thread_slot *slots = gpt_calloc((size_t)n, sizeof *slots, "thread slots", err);
	pthread_t *tids = gpt_calloc((size_t)n, sizeof *tids, "threads", err);
	if (!slots || !tids) {
		free(slots);
		free(tids);
		return GPT_EINTERNAL;
	}
	int started = 1, start_rc = 0;
	for (int i = 0; i < n; i++)
		slots[i] = (thread_slot){fn, arg, i, 0};
	for (int i = 1; i < n; i++) {
		int e = pthread_create(&tids[i], NULL, thread_main, &slots[i]);
		if (e) {
			start_rc = gpt_err_errno(err, GPT_EINTERNAL, e, "cannot start thread %d of %d", i, n);
			break;
		}
		started++;
	}
	/* The caller's thread does slot 0 even when a start failed, so that the
	 * threads already running are not left waiting on work nobody does. */
	thread_main(&slots[0]);
	for (int i = 1; i < started; i++)
		pthread_join(tids[i], NULL);
	int rc = start_rc;
	for (int i = 0; i < started && !rc; i++)
		rc = slots[i].rc;
	free(slots);
	free(tids);
	return rc;
}

int gpt_cpu_count(void)
{
	cpu_set_t set;
	if (sched_getaffinity(0, sizeof set, &set) == 0) {
		int n = CPU_COUNT(&set);
		if (n > 0)
			return n;
	}
	return 1;
}
