/* Parsing of human-written values shared by the command line and the environment. */
#ifndef DT_UTIL_PARSE_H
#define DT_UTIL_PARSE_H

#include <stddef.h>

/* A size: "4096", "64K", "1M", "1G" (powers of 1024), from 1 to max bytes. DT_EUSAGE naming
 * `name` (an option or variable) otherwise. */
int dt_parse_bytes(const char *name, const char *arg, size_t max, size_t *out);

#endif
