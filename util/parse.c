/* See util/parse.h. */
#include "util/parse.h"

#include <errno.h>
#include <stdlib.h>

#include "util/err.h"

int dt_parse_bytes(const char *name, const char *arg, size_t max, size_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(arg, &end, 10);
    unsigned long long mult = 1;
    if (*end == 'K' || *end == 'k')
        mult = 1ull << 10, end++;
    else if (*end == 'M' || *end == 'm')
        mult = 1ull << 20, end++;
    else if (*end == 'G' || *end == 'g')
        mult = 1ull << 30, end++;
    if (errno || end == arg || *end || arg[0] == '-' || v == 0 || v > max / mult)
        return dt_fail(DT_EUSAGE,
                       "%s: expected a size such as 4096, 64K or 1M (at most %zu), got '%s'", name,
                       max, arg);
    *out = (size_t)(v * mult);
    return 0;
}
