/* CRC-32C, bytewise with a table made on first use: the history writes a few hundred bytes
 * per logged step, so a table is plenty (no SSE4.2 instruction needed). */
#include "util/crc32c.h"

#include <pthread.h>

/* Process-wide and written once, under pthread_once: a pure function of the polynomial. */
static uint32_t table[256];
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

static void make_table(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? (c >> 1) ^ 0x82f63b78u : c >> 1; /* the reflected Castagnoli polynomial */
        table[i] = c;
    }
}

uint32_t dt_crc32c(const void *data, size_t len)
{
    pthread_once(&table_once, make_table);
    const unsigned char *p = data;
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < len; i++)
        c = table[(c ^ p[i]) & 0xff] ^ (c >> 8);
    return c ^ 0xffffffffu;
}

uint32_t dt_crc32c_masked(const void *data, size_t len)
{
    uint32_t c = dt_crc32c(data, len);
    return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}
