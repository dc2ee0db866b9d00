/* Shared by the libFuzzer harnesses (tests/fuzz/fuzz_*.c, built and run by `make fuzz`): the
 * fuzzer's bytes as a file the file-based readers can open, in memory (memfd) so a run does
 * millions of executions without touching a disk. */
#ifndef DT_TESTS_FUZZ_COMMON_H
#define DT_TESTS_FUZZ_COMMON_H

#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>
#include <zlib.h>

#include "util/err.h"

/* Writes data to a fresh in-memory file; path gets "/proc/self/fd/N". Returns the fd. */
static inline int fuzz_file(const uint8_t *data, size_t size, char *path, size_t cap)
{
    int fd = memfd_create("fuzz", MFD_CLOEXEC);
    if (fd < 0)
        return -1;
    size_t at = 0;
    while (at < size) {
        ssize_t n = write(fd, data + at, size - at);
        if (n <= 0)
            break;
        at += (size_t)n;
    }
    snprintf(path, cap, "/proc/self/fd/%d", fd);
    return fd;
}

/* The bytes gzip-compressed, so a reader behind gzip sees the fuzzer's bytes themselves rather
 * than mostly CRC failures. Returns the compressed length, 0 on failure; *out malloc'd. */
static inline size_t fuzz_gzip(const uint8_t *data, size_t size, uint8_t **out)
{
    z_stream z = {0};
    if (deflateInit2(&z, 1, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        return 0;
    size_t cap = deflateBound(&z, size) + 64;
    *out = malloc(cap);
    z.next_in = (uint8_t *)data, z.avail_in = (uInt)size;
    z.next_out = *out, z.avail_out = (uInt)cap;
    int rc = *out ? deflate(&z, Z_FINISH) : Z_MEM_ERROR;
    size_t n = rc == Z_STREAM_END ? cap - z.avail_out : 0;
    deflateEnd(&z);
    return n;
}

#endif
