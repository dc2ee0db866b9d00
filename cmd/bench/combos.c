/* The combinations a sweep runs (every split of C cores, the thread-only sweep, an explicit
 * --grid list) and the median of repeated figures: pure functions, unit-tested on their own
 * (tests/unit/test_bench.c). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/bench/bench.h"
#include "util/err.h"

int dt_bench_combos_split(int cores, struct dt_bench_combo **out)
{
    struct dt_bench_combo *c = calloc((size_t)cores, sizeof *c);
    if (!c)
        return dt_fail(DT_ERUNTIME, "out of memory");
    int n = 0;
    for (int i = 1; i <= cores; i++)
        if (cores % i == 0)
            c[n++] = (struct dt_bench_combo){i, cores / i};
    *out = c;
    return n;
}

int dt_bench_combos_threads(int cores, struct dt_bench_combo **out)
{
    struct dt_bench_combo *c = calloc(34, sizeof *c);
    if (!c)
        return dt_fail(DT_ERUNTIME, "out of memory");
    int n = 0;
    for (int t = 1; t < cores && n < 32; t *= 2)
        c[n++] = (struct dt_bench_combo){1, t};
    c[n++] = (struct dt_bench_combo){1, cores};
    *out = c;
    return n;
}

int dt_bench_combos_parse(const char *grid, struct dt_bench_combo **out)
{
    size_t cap = 1;
    for (const char *p = grid; *p; p++)
        cap += *p == ',';
    struct dt_bench_combo *c = calloc(cap, sizeof *c);
    if (!c)
        return dt_fail(DT_ERUNTIME, "out of memory");
    int n = 0;
    for (const char *p = grid; *p;) {
        char *end;
        long i = strtol(p, &end, 10), t = 0;
        bool good = end != p && (*end == 'x' || *end == 'X');
        if (good) {
            const char *q = end + 1;
            t = strtol(q, &end, 10);
            good = end != q && ((*end == ',' && end[1]) || *end == 0) && i >= 1 && i <= 1024 &&
                   t >= 1 && t <= 4096;
        }
        if (!good) {
            free(c);
            return dt_fail(DT_EUSAGE,
                           "--grid: '%s' is not a list of INSTANCESxTHREADS such as "
                           "\"1x16,2x8,4x4\"",
                           grid);
        }
        c[n++] = (struct dt_bench_combo){(int)i, (int)t};
        p = *end ? end + 1 : end;
    }
    if (n == 0) {
        free(c);
        return dt_fail(DT_EUSAGE, "--grid: empty list");
    }
    *out = c;
    return n;
}

static int compare_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

double dt_bench_median(const double *v, int n)
{
    double *tmp = n > 0 ? malloc((size_t)n * sizeof *tmp) : NULL;
    if (!tmp)
        return NAN;
    memcpy(tmp, v, (size_t)n * sizeof *tmp);
    qsort(tmp, (size_t)n, sizeof *tmp, compare_double);
    double m = n % 2 ? tmp[n / 2] : 0.5 * (tmp[n / 2 - 1] + tmp[n / 2]);
    free(tmp);
    return m;
}
