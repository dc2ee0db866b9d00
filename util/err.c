#include "util/err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static _Thread_local char last_message[1024];
static _Thread_local int last_code;

int dt_fail(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_message, sizeof last_message, fmt, ap);
    va_end(ap);
    last_code = code;
    return -code;
}

int dt_fail_context(int rc, const char *fmt, ...)
{
    char prefix[512], old[sizeof last_message];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, last_message, sizeof old);
    /* Truncation is acceptable for a message. */
    int n = snprintf(last_message, sizeof last_message, "%s: ", prefix);
    if (n > 0 && (size_t)n < sizeof last_message) {
        size_t room = sizeof last_message - (size_t)n - 1, len = strnlen(old, room);
        memcpy(last_message + n, old, len);
        last_message[(size_t)n + len] = 0;
    }
    return rc;
}

const char *dt_last_error(void)
{
    return last_message[0] ? last_message : "unknown error";
}

int dt_last_error_code(void)
{
    return last_code;
}

void dt_clear_error(void)
{
    last_message[0] = 0;
    last_code = 0;
}

int dt_exit_code(int status)
{
    int code = status < 0 ? -status : status;
    switch (code) {
    case DT_OK:
    case DT_ERUNTIME:
    case DT_EUSAGE:
    case DT_EDATA:
    case DT_EINTR:
    case DT_ETERM:
        return code;
    default:
        return DT_ERUNTIME;
    }
}
