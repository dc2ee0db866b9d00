#include "util/alloc.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "util/err.h"

/* A buffer of at least this many bytes starts on a huge-page boundary and asks the kernel for
 * transparent huge pages over its whole 2 MiB extents (MADV_HUGEPAGE; Debian's default THP
 * mode, "madvise", gives them only on request). The batch-wide activations and gradients are
 * walked plane by plane with a sample's stride between planes (batchnorm's per-channel passes),
 * a new 4 KiB page every plane; on huge pages a ResNet-20 step took about 3 % less time
 * (docs/kernels.md). A kernel that refuses (THP "never") keeps 4 KiB pages, and nothing else
 * changes. */
#define HUGE_PAGE ((size_t)2 << 20)

void *dt_alloc(size_t count, size_t size)
{
    if (size && count > (size_t)-1 / size) {
        dt_fail(DT_ERUNTIME, "allocation of %zu x %zu bytes overflows", count, size);
        return NULL;
    }
    size_t bytes = count * size;
    size_t rounded = (bytes + DT_ALIGN - 1) / DT_ALIGN * DT_ALIGN;
    rounded = rounded ? rounded : DT_ALIGN;
    bool huge = rounded >= HUGE_PAGE;
    void *p = NULL;
    if (posix_memalign(&p, huge ? HUGE_PAGE : DT_ALIGN, rounded) != 0) {
        dt_fail(DT_ERUNTIME, "out of memory allocating %zu bytes", bytes);
        return NULL;
    }
    if (huge) /* before the first touch (the zeroing below), so that it faults in huge pages */
        (void)madvise(p, rounded / HUGE_PAGE * HUGE_PAGE, MADV_HUGEPAGE);
    memset(p, 0, rounded);
    return p;
}

void dt_free(void *p)
{
    free(p);
}
