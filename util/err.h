/* Error reporting shared by every module.
 *
 * Library code (nn/, dist/, data/, util/) never prints and never exits: a failing function
 * records one human-readable line (file, record or key, what was expected, what was found)
 * with dt_fail() and returns its negative status. cmd/ prints dt_last_error() once and main.c
 * maps the status to the process exit code. The message buffer is thread-local, like errno:
 * it is the one piece of process-wide state this subsystem needs.
 */
#ifndef DT_UTIL_ERR_H
#define DT_UTIL_ERR_H

/* Exit codes, documented in README.md. Functions return 0 or the negative of one of these. */
enum dt_status {
    DT_OK = 0,
    DT_ERUNTIME = 1, /* a rank died, a peer was lost, I/O failed */
    DT_EUSAGE = 2,   /* bad command line or config */
    DT_EDATA = 3,    /* missing, corrupt or wrongly formatted data; checksum mismatch */
    DT_EINTR = 130,  /* stopped by SIGINT after a clean shutdown */
    DT_ETERM = 143,  /* stopped by SIGTERM after a clean shutdown */
};

/* Records the message and returns -code, so callers can write `return dt_fail(...)`. */
int dt_fail(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Prepends "prefix: " to the current message (adds context on the way up the stack) and
 * returns rc unchanged. */
int dt_fail_context(int rc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

const char *dt_last_error(void);
int dt_last_error_code(void);
void dt_clear_error(void);

/* Exit code for a (possibly negative) status: 0, 1, 2, 3, 130 or 143. */
int dt_exit_code(int status);

#endif
