/* Aligned allocation for float arenas and activations: 64-byte alignment so AVX-512 loads of
 * a tensor's start never split a cache line. */
#ifndef DT_UTIL_ALLOC_H
#define DT_UTIL_ALLOC_H

#include <stddef.h>

#define DT_ALIGN 64

/* Zero-filled, DT_ALIGN-aligned (2 MiB-aligned and on transparent huge pages where the kernel
 * grants them, for 2 MiB or more); NULL (with dt_fail message) on failure or size overflow. */
void *dt_alloc(size_t count, size_t size);
void dt_free(void *p);

#endif
