/* Name tables (util/names.h): lookups, lists and typo hints over an enum's names. */
#include "util/names.h"

#include <stdio.h>
#include <string.h>

int dt_names_find(const struct dt_names *t, const char *name)
{
    for (int v = 0; v < t->count; v++)
        if (t->names[v] && strcmp(t->names[v], name) == 0)
            return v;
    return -1;
}

const char *dt_names_name(const struct dt_names *t, int v)
{
    return v >= 0 && v < t->count && t->names[v] ? t->names[v] : "unknown";
}

void dt_names_join(const struct dt_names *t, char *out, size_t size)
{
    size_t o = 0;
    out[0] = 0;
    for (int v = 0; v < t->count && o < size; v++) {
        if (!t->names[v])
            continue;
        const char *name = t->names[v][0] ? t->names[v] : "\"\"";
        o += (size_t)snprintf(out + o, size - o, "%s%s", o ? ", " : "", name);
    }
}

int dt_edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 63 || lb > 63)
        return 99;
    int d[64][64];
    for (size_t i = 0; i <= la; i++)
        d[i][0] = (int)i;
    for (size_t j = 0; j <= lb; j++)
        d[0][j] = (int)j;
    for (size_t i = 1; i <= la; i++)
        for (size_t j = 1; j <= lb; j++) {
            int sub = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            int del = d[i - 1][j] + 1, ins = d[i][j - 1] + 1;
            d[i][j] = sub < del ? (sub < ins ? sub : ins) : (del < ins ? del : ins);
        }
    return d[la][lb];
}

const char *dt_names_suggest(const struct dt_names *t, const char *name)
{
    const char *best = NULL;
    int best_d = 3;
    for (int v = 0; v < t->count; v++) {
        if (!t->names[v] || !t->names[v][0])
            continue;
        int d = dt_edit_distance(name, t->names[v]);
        if (d < best_d) {
            best_d = d;
            best = t->names[v];
        }
    }
    return best;
}
