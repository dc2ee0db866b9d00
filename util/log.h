/* Human-facing log lines on stderr ("dtrain: ..."), with one process-wide verbosity level set
 * once by cmd/ from --quiet / --verbose. Machine-readable output (--json) goes to stdout through
 * util/json.h instead, so the two never mix. */
#ifndef DT_UTIL_LOG_H
#define DT_UTIL_LOG_H

#include <stdbool.h>

enum dt_log_level { DT_LOG_QUIET = 0, DT_LOG_NORMAL = 1, DT_LOG_VERBOSE = 2 };

void dt_log_set_level(enum dt_log_level level);
enum dt_log_level dt_log_get_level(void);
/* Optional tag printed after "dtrain" (e.g. "rank 1"), so multi-process output stays readable. */
void dt_log_set_tag(const char *tag);

/* Errors always print; warnings and info not under --quiet; debug only under --verbose. */
void dt_log_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void dt_log_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void dt_log_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void dt_log_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* --json: a command that fails also writes {"event":"error",...} on stdout (main.c), so a
 * pipeline reading only stdout sees why. Set by cmd/ from --json or log.json. */
void dt_log_set_json(bool on);
bool dt_log_json(void);

/* True when stderr is a terminal and we are not quiet: live progress lines are wanted. */
bool dt_log_is_tty(void);

#endif
