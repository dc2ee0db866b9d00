#include "util/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* Process-wide: set once from the command line before any work starts. */
static enum dt_log_level log_level = DT_LOG_NORMAL;
static char log_tag[64];
static bool log_json;

void dt_log_set_json(bool on)
{
    log_json = on;
}

bool dt_log_json(void)
{
    return log_json;
}

void dt_log_set_level(enum dt_log_level level)
{
    log_level = level;
}

enum dt_log_level dt_log_get_level(void)
{
    return log_level;
}

void dt_log_set_tag(const char *tag)
{
    snprintf(log_tag, sizeof log_tag, "%s", tag ? tag : "");
}

static void emit(const char *kind, const char *fmt, va_list ap)
{
    char line[2048];
    int n = snprintf(line, sizeof line, "dtrain%s%s: %s", log_tag[0] ? " " : "", log_tag, kind);
    if (n < 0 || (size_t)n >= sizeof line)
        n = 0;
    vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
    /* One write per line so lines of concurrent ranks do not interleave mid-line. */
    size_t len = strlen(line);
    if (len + 1 < sizeof line) {
        line[len++] = '\n';
    }
    fflush(stderr);
    ssize_t w = write(STDERR_FILENO, line, len);
    (void)w;
}

#define DEFINE_LOG(name, kind, min_level)                                                          \
    void name(const char *fmt, ...)                                                                \
    {                                                                                              \
        if (log_level < (min_level))                                                               \
            return;                                                                                \
        va_list ap;                                                                                \
        va_start(ap, fmt);                                                                         \
        emit(kind, fmt, ap);                                                                       \
        va_end(ap);                                                                                \
    }

DEFINE_LOG(dt_log_error, "error: ", DT_LOG_QUIET)
DEFINE_LOG(dt_log_warn, "warning: ", DT_LOG_NORMAL)
DEFINE_LOG(dt_log_info, "", DT_LOG_NORMAL)
DEFINE_LOG(dt_log_debug, "", DT_LOG_VERBOSE)

bool dt_log_is_tty(void)
{
    return log_level >= DT_LOG_NORMAL && isatty(STDERR_FILENO);
}
