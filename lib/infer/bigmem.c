/* Memory for weights that every generated token streams through: 2 MiB
 * aligned and, on Linux, advised into transparent huge pages. A token reads
 * hundreds of megabytes; in 4 KiB pages that is a TLB miss every 4 KiB,
 * which costs a measurable part of the memory bandwidth (the kernel's THP
 * mode is often "madvise", so without the advice there are no huge pages).
 * (Part of lib/infer.) */
#include "infer/infer.h"

#include <stdlib.h>
#include <sys/mman.h>

#define HUGE_PAGE ((size_t)2 << 20)

void *gpt_weights_alloc(size_t bytes, const char *what, gpt_err *err)
{
	if (bytes < HUGE_PAGE)
		return gpt_aligned_alloc(bytes, what, err);
	size_t n = (bytes + HUGE_PAGE - 1) / HUGE_PAGE * HUGE_PAGE;
	void *p = NULL;
	if (posix_memalign(&p, HUGE_PAGE, n) != 0) {
		gpt_err_nomem(err, n, what);
		return NULL;
	}
#ifdef MADV_HUGEPAGE
	/* advice only: without huge pages the memory works the same */
	(void)madvise(p, n, MADV_HUGEPAGE);
#endif
	return p;
}
