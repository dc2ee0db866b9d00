/* Names read from disk (file and folder names) made safe for a one-line message.
 *
 * A file name may hold any byte but '/' and NUL: a newline would split an error into two
 * lines, an escape sequence would reach the user's terminal. Messages that name such a file
 * show it through dt_printable, which writes each control character (below 0x20, and 0x7f)
 * as \xNN and leaves every other byte, UTF-8 included, as it is. The name itself is never
 * changed: files are opened by their real path.
 */
#ifndef DT_UTIL_PRINTABLE_H
#define DT_UTIL_PRINTABLE_H

#include <stddef.h>

/* Room for any name in a message: messages are at most 1024 bytes (util/err.c). */
#define DT_PRINTABLE_MAX 1024

/* Writes s into buf (size bytes, at least 1) with control characters as \xNN, truncated at a
 * whole character or escape when it does not fit, and returns buf. */
const char *dt_printable(const char *s, char *buf, size_t size);

#endif
