#include "util/alloc.h"

#include <stdlib.h>
#include <string.h>

#include "util/err.h"

void *dt_alloc(size_t count, size_t size)
{
    if (size && count > (size_t)-1 / size) {
        dt_fail(DT_ERUNTIME, "allocation of %zu x %zu bytes overflows", count, size);
        return NULL;
    }
    size_t bytes = count * size;
    size_t rounded = (bytes + DT_ALIGN - 1) / DT_ALIGN * DT_ALIGN;
    void *p = NULL;
    if (posix_memalign(&p, DT_ALIGN, rounded ? rounded : DT_ALIGN) != 0) {
        dt_fail(DT_ERUNTIME, "out of memory allocating %zu bytes", bytes);
        return NULL;
    }
    memset(p, 0, rounded ? rounded : DT_ALIGN);
    return p;
}

void dt_free(void *p)
{
    free(p);
}
