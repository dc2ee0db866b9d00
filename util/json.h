/* JSON: a line writer for --json events (one object per line on stdout) and a small parser
 * for the JSON that dtrain reads (safetensors headers, test fixtures).
 *
 * The writer builds one object in memory and emits it with a single write, so events from
 * different processes never interleave mid-line.
 */
#ifndef DT_UTIL_JSON_H
#define DT_UTIL_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct dt_json_writer {
    char *buf;
    size_t len, cap;
    bool need_comma;
    bool failed;
};

/* Starts an object: {"event": "<event>", ... */
void dt_jw_begin(struct dt_json_writer *w, const char *event);
void dt_jw_str(struct dt_json_writer *w, const char *key, const char *value);
void dt_jw_int(struct dt_json_writer *w, const char *key, long long value);
/* Non-finite numbers are written as null (JSON has no NaN). */
void dt_jw_num(struct dt_json_writer *w, const char *key, double value);
void dt_jw_bool(struct dt_json_writer *w, const char *key, bool value);
/* Raw JSON value (already valid JSON: an array or object built by the caller). */
void dt_jw_raw(struct dt_json_writer *w, const char *key, const char *json);
/* Closes the object, writes it plus '\n' to `out` in one call, frees the buffer. */
void dt_jw_end(struct dt_json_writer *w, FILE *out);
/* Closes the object and hands back the malloc'd string (caller frees). */
char *dt_jw_finish(struct dt_json_writer *w);

/* Appends a JSON string literal (quoted, escaped) for `s` to a malloc'd buffer. */
void dt_json_escape_to(struct dt_json_writer *w, const char *s);

/* ---- parser ---- */
enum dt_json_type {
    DT_JSON_NULL,
    DT_JSON_BOOL,
    DT_JSON_NUM,
    DT_JSON_STR,
    DT_JSON_ARR,
    DT_JSON_OBJ
};

struct dt_json {
    enum dt_json_type type;
    bool b;
    double num;
    char *str;             /* DT_JSON_STR: decoded, NUL-terminated */
    char *key;             /* set when this value is an object member */
    struct dt_json *child; /* first element / member */
    struct dt_json *next;  /* next sibling */
    size_t count;          /* number of children */
};

/* Parses len bytes (need not be NUL-terminated). Depth and size are bounded; on error returns
 * NULL and dt_fail(DT_EDATA, "<what> at byte N"). */
struct dt_json *dt_json_parse(const char *text, size_t len);
void dt_json_free(struct dt_json *v);
/* Object member by key, or NULL. */
const struct dt_json *dt_json_get(const struct dt_json *obj, const char *key);

#endif
