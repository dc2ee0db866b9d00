/* Name tables of the enums a config selects (optimizer.type, dist.backend, ...).
 *
 * The module whose enum it is owns the table: names[v] is the config spelling of value v,
 * dense from 0 to count - 1 (a _Static_assert beside each table keeps it as long as its
 * enum), NULL for a value no config may name (dist.pin's explicit list comes from
 * dist.cpu_list, not from a name). train/config.c reads a config's string through the table
 * once, at load, and stores the value; its choice lists, did-you-mean hints, the effective
 * config and --config-reference all come from here, so a new value is its enum constant, its
 * row in the table, and the code that acts on it.
 */
#ifndef DT_UTIL_NAMES_H
#define DT_UTIL_NAMES_H

#include <stddef.h>

struct dt_names {
    const char *const *names; /* indexed by the enum's value; NULL = not selectable by name */
    int count;                /* the enum's number of values */
};

/* DT_NAMES(table) for a `static const char *const table[N]` whose N is the enum's count. */
#define DT_NAMES(table)                                                                            \
    {                                                                                              \
        (table), (int)(sizeof(table) / sizeof((table)[0]))                                         \
    }

/* The value named `name`, or -1. */
int dt_names_find(const struct dt_names *t, const char *name);
/* The name of value v; "unknown" for a value outside the table or without a name. */
const char *dt_names_name(const struct dt_names *t, int v);
/* "a, b, c" (the named values in enum order) into out. */
void dt_names_join(const struct dt_names *t, char *out, size_t size);
/* The name closest to `name` within two edits (a typo), or NULL. */
const char *dt_names_suggest(const struct dt_names *t, const char *name);
/* Levenshtein distance of a and b, 99 when either is longer than 63 characters. */
int dt_edit_distance(const char *a, const char *b);

#endif
