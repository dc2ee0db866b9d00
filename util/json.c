#include "util/json.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/err.h"

/* ---- writer ---- */

static void put(struct dt_json_writer *w, const char *s, size_t n)
{
    if (w->failed)
        return;
    if (w->len + n + 1 > w->cap) {
        size_t cap = w->cap ? w->cap : 256;
        while (w->len + n + 1 > cap)
            cap *= 2;
        char *b = realloc(w->buf, cap);
        if (!b) {
            w->failed = true;
            return;
        }
        w->buf = b;
        w->cap = cap;
    }
    memcpy(w->buf + w->len, s, n);
    w->len += n;
    w->buf[w->len] = 0;
}

static void puts_(struct dt_json_writer *w, const char *s)
{
    put(w, s, strlen(s));
}

static void putf(struct dt_json_writer *w, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void putf(struct dt_json_writer *w, const char *fmt, ...)
{
    char tmp[64];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n > 0)
        put(w, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

void dt_json_escape_to(struct dt_json_writer *w, const char *s)
{
    puts_(w, "\"");
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '"':
            puts_(w, "\\\"");
            break;
        case '\\':
            puts_(w, "\\\\");
            break;
        case '\n':
            puts_(w, "\\n");
            break;
        case '\r':
            puts_(w, "\\r");
            break;
        case '\t':
            puts_(w, "\\t");
            break;
        default:
            if (*p < 0x20)
                putf(w, "\\u%04x", *p);
            else
                put(w, (const char *)p, 1);
        }
    }
    puts_(w, "\"");
}

static void key(struct dt_json_writer *w, const char *k)
{
    if (w->need_comma)
        puts_(w, ",");
    w->need_comma = true;
    dt_json_escape_to(w, k);
    puts_(w, ":");
}

void dt_jw_begin(struct dt_json_writer *w, const char *event)
{
    memset(w, 0, sizeof *w);
    puts_(w, "{");
    if (event)
        dt_jw_str(w, "event", event);
}

void dt_jw_str(struct dt_json_writer *w, const char *k, const char *v)
{
    key(w, k);
    if (v)
        dt_json_escape_to(w, v);
    else
        puts_(w, "null");
}

void dt_jw_int(struct dt_json_writer *w, const char *k, long long v)
{
    key(w, k);
    putf(w, "%lld", v);
}

void dt_jw_num(struct dt_json_writer *w, const char *k, double v)
{
    key(w, k);
    if (isfinite(v))
        putf(w, "%.9g", v);
    else
        puts_(w, "null");
}

void dt_jw_bool(struct dt_json_writer *w, const char *k, bool v)
{
    key(w, k);
    puts_(w, v ? "true" : "false");
}

void dt_jw_raw(struct dt_json_writer *w, const char *k, const char *json)
{
    key(w, k);
    puts_(w, json);
}

char *dt_jw_finish(struct dt_json_writer *w)
{
    puts_(w, "}");
    if (w->failed) {
        free(w->buf);
        return NULL;
    }
    return w->buf;
}

void dt_jw_end(struct dt_json_writer *w, FILE *out)
{
    puts_(w, "}\n");
    if (!w->failed) {
        fflush(out);
        ssize_t n = write(fileno(out), w->buf, w->len);
        (void)n;
    }
    free(w->buf);
    memset(w, 0, sizeof *w);
}

/* ---- parser: recursive descent with a depth limit ---- */

#define JSON_MAX_DEPTH 64

struct parser {
    const char *s;
    size_t len, pos;
    const char *error;
};

static void skip_ws(struct parser *p)
{
    while (p->pos < p->len && strchr(" \t\r\n", p->s[p->pos]) && p->s[p->pos])
        p->pos++;
}

static struct dt_json *parse_value(struct parser *p, int depth);

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

static char *parse_string(struct parser *p)
{
    if (p->pos >= p->len || p->s[p->pos] != '"') {
        p->error = "expected string";
        return NULL;
    }
    p->pos++;
    /* Decoded output is never longer than the input span. */
    size_t start = p->pos, end = start;
    while (end < p->len && p->s[end] != '"')
        end += (p->s[end] == '\\') ? 2 : 1;
    if (end >= p->len) {
        p->error = "unterminated string";
        return NULL;
    }
    char *out = malloc(end - start + 1), *o = out;
    if (!out) {
        p->error = "out of memory";
        return NULL;
    }
    while (p->pos < end) {
        char c = p->s[p->pos++];
        if ((unsigned char)c < 0x20) {
            p->error = "control character in string";
            free(out);
            return NULL;
        }
        if (c != '\\') {
            *o++ = c;
            continue;
        }
        char e = p->s[p->pos++];
        switch (e) {
        case '"':
            *o++ = '"';
            break;
        case '\\':
            *o++ = '\\';
            break;
        case '/':
            *o++ = '/';
            break;
        case 'b':
            *o++ = '\b';
            break;
        case 'f':
            *o++ = '\f';
            break;
        case 'n':
            *o++ = '\n';
            break;
        case 'r':
            *o++ = '\r';
            break;
        case 't':
            *o++ = '\t';
            break;
        case 'u': {
            unsigned cp = 0;
            for (int i = 0; i < 4; i++) {
                int h = p->pos < end ? hexval(p->s[p->pos++]) : -1;
                if (h < 0) {
                    p->error = "bad \\u escape";
                    free(out);
                    return NULL;
                }
                cp = cp * 16 + (unsigned)h;
            }
            /* Non-ASCII escapes are kept as UTF-8 (surrogate pairs not combined: dtrain's
             * own files never contain them). */
            if (cp < 0x80) {
                *o++ = (char)cp;
            } else if (cp < 0x800) {
                *o++ = (char)(0xc0 | (cp >> 6));
                *o++ = (char)(0x80 | (cp & 0x3f));
            } else {
                *o++ = (char)(0xe0 | (cp >> 12));
                *o++ = (char)(0x80 | ((cp >> 6) & 0x3f));
                *o++ = (char)(0x80 | (cp & 0x3f));
            }
            break;
        }
        default:
            p->error = "bad escape in string";
            free(out);
            return NULL;
        }
    }
    *o = 0;
    p->pos = end + 1;
    return out;
}

static struct dt_json *new_value(struct parser *p, enum dt_json_type t)
{
    struct dt_json *v = calloc(1, sizeof *v);
    if (!v)
        p->error = "out of memory";
    else
        v->type = t;
    return v;
}

static struct dt_json *parse_container(struct parser *p, int depth, bool is_obj)
{
    struct dt_json *v = new_value(p, is_obj ? DT_JSON_OBJ : DT_JSON_ARR);
    if (!v)
        return NULL;
    char close = is_obj ? '}' : ']';
    struct dt_json **tail = &v->child;
    p->pos++;
    skip_ws(p);
    if (p->pos < p->len && p->s[p->pos] == close) {
        p->pos++;
        return v;
    }
    for (;;) {
        char *k = NULL;
        if (is_obj) {
            skip_ws(p);
            if (!(k = parse_string(p)))
                break;
            skip_ws(p);
            if (p->pos >= p->len || p->s[p->pos] != ':') {
                free(k);
                p->error = "expected ':'";
                break;
            }
            p->pos++;
        }
        struct dt_json *item = parse_value(p, depth + 1);
        if (!item) {
            free(k);
            break;
        }
        item->key = k;
        *tail = item;
        tail = &item->next;
        v->count++;
        skip_ws(p);
        if (p->pos < p->len && p->s[p->pos] == ',') {
            p->pos++;
            continue;
        }
        if (p->pos < p->len && p->s[p->pos] == close) {
            p->pos++;
            return v;
        }
        p->error = is_obj ? "expected ',' or '}'" : "expected ',' or ']'";
        break;
    }
    dt_json_free(v);
    return NULL;
}

static struct dt_json *parse_value(struct parser *p, int depth)
{
    if (depth > JSON_MAX_DEPTH) {
        p->error = "nesting too deep";
        return NULL;
    }
    skip_ws(p);
    if (p->pos >= p->len) {
        p->error = "unexpected end";
        return NULL;
    }
    char c = p->s[p->pos];
    if (c == '{' || c == '[')
        return parse_container(p, depth, c == '{');
    if (c == '"') {
        char *s = parse_string(p);
        if (!s)
            return NULL;
        struct dt_json *v = new_value(p, DT_JSON_STR);
        if (!v) {
            free(s);
            return NULL;
        }
        v->str = s;
        return v;
    }
    static const struct {
        const char *word;
        enum dt_json_type t;
        bool b;
    } words[] = {{"true", DT_JSON_BOOL, true},
                 {"false", DT_JSON_BOOL, false},
                 {"null", DT_JSON_NULL, false}};
    for (size_t i = 0; i < 3; i++) {
        size_t n = strlen(words[i].word);
        if (p->len - p->pos >= n && memcmp(p->s + p->pos, words[i].word, n) == 0) {
            p->pos += n;
            struct dt_json *v = new_value(p, words[i].t);
            if (v)
                v->b = words[i].b;
            return v;
        }
    }
    if (c == '-' || (c >= '0' && c <= '9')) {
        char tmp[64];
        size_t n = 0;
        while (p->pos + n < p->len && n < sizeof tmp - 1 &&
               strchr("+-.eE0123456789", p->s[p->pos + n]))
            n++;
        memcpy(tmp, p->s + p->pos, n);
        tmp[n] = 0;
        char *end;
        double d = strtod(tmp, &end);
        if (end != tmp + n || n == sizeof tmp - 1) {
            p->error = "bad number";
            return NULL;
        }
        p->pos += n;
        struct dt_json *v = new_value(p, DT_JSON_NUM);
        if (v)
            v->num = d;
        return v;
    }
    p->error = "unexpected character";
    return NULL;
}

struct dt_json *dt_json_parse(const char *text, size_t len)
{
    struct parser p = {text, len, 0, NULL};
    struct dt_json *v = parse_value(&p, 0);
    if (v) {
        skip_ws(&p);
        if (p.pos != len) {
            dt_json_free(v);
            v = NULL;
            p.error = "trailing characters";
        }
    }
    if (!v)
        dt_fail(DT_EDATA, "invalid JSON: %s at byte %zu", p.error ? p.error : "error", p.pos);
    return v;
}

void dt_json_free(struct dt_json *v)
{
    while (v) {
        struct dt_json *next = v->next;
        dt_json_free(v->child);
        free(v->str);
        free(v->key);
        free(v);
        v = next;
    }
}

const struct dt_json *dt_json_get(const struct dt_json *obj, const char *k)
{
    if (!obj || obj->type != DT_JSON_OBJ)
        return NULL;
    for (const struct dt_json *c = obj->child; c; c = c->next)
        if (c->key && strcmp(c->key, k) == 0)
            return c;
    return NULL;
}
