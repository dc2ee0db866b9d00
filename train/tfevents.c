/* TensorBoard event files (see tfevents.h): a protobuf wire encoder and decoder for the three
 * messages dtrain writes, and the TFRecord framing around them. */
#include "train/tfevents.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/crc32c.h"
#include "util/err.h"
#include "util/fileio.h"

/* Protobuf wire types. */
enum { WIRE_VARINT = 0, WIRE_FIXED64 = 1, WIRE_BYTES = 2, WIRE_FIXED32 = 5 };
/* Field numbers of event.proto and summary.proto. */
enum {
    EVENT_WALL_TIME = 1,
    EVENT_STEP = 2,
    EVENT_FILE_VERSION = 3,
    EVENT_SUMMARY = 5,
    EVENT_SESSION_LOG = 6
};
enum { SUMMARY_VALUE = 1, VALUE_TAG = 1, VALUE_SIMPLE = 2, SESSION_STATUS = 1, SESSION_START = 1 };

static const char file_version[] = "brain.Event:2";

/* A message under construction; small, so a fixed buffer: 16 scalars of short tags fit. */
struct pb {
    unsigned char b[1024];
    size_t n;
    bool overflow;
};

static void pb_byte(struct pb *p, unsigned char c)
{
    if (p->n < sizeof p->b)
        p->b[p->n++] = c;
    else
        p->overflow = true;
}

static void pb_varint(struct pb *p, uint64_t v)
{
    while (v >= 0x80) {
        pb_byte(p, (unsigned char)(v | 0x80));
        v >>= 7;
    }
    pb_byte(p, (unsigned char)v);
}

static void pb_key(struct pb *p, int field, int wire)
{
    pb_varint(p, (uint64_t)field << 3 | (uint64_t)wire);
}

static void pb_le(struct pb *p, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++)
        pb_byte(p, (unsigned char)(v >> (8 * i)));
}

static void pb_bytes(struct pb *p, int field, const void *data, size_t len)
{
    pb_key(p, field, WIRE_BYTES);
    pb_varint(p, len);
    for (size_t i = 0; i < len; i++)
        pb_byte(p, ((const unsigned char *)data)[i]);
}

static void pb_double(struct pb *p, int field, double v)
{
    uint64_t bits;
    memcpy(&bits, &v, sizeof bits);
    pb_key(p, field, WIRE_FIXED64);
    pb_le(p, bits, 8);
}

static void pb_float(struct pb *p, int field, float v)
{
    uint32_t bits;
    memcpy(&bits, &v, sizeof bits);
    pb_key(p, field, WIRE_FIXED32);
    pb_le(p, bits, 4);
}

/* An Event's wall_time and step, the fields every record starts with. */
static void event_head(struct pb *e, double wall_time, long long step)
{
    pb_double(e, EVENT_WALL_TIME, wall_time);
    pb_key(e, EVENT_STEP, WIRE_VARINT);
    pb_varint(e, (uint64_t)step); /* int64: two's complement, as protobuf does */
}

/* TFRecord framing of a message, malloc'd. */
static int frame(const struct pb *msg, unsigned char **rec, size_t *len)
{
    if (msg->overflow)
        return dt_fail(DT_ERUNTIME, "tfevents: an event does not fit %zu bytes", sizeof msg->b);
    unsigned char *r = malloc(msg->n + 16);
    if (!r)
        return dt_fail(DT_ERUNTIME, "tfevents: out of memory");
    uint64_t n = msg->n;
    for (int i = 0; i < 8; i++)
        r[i] = (unsigned char)(n >> (8 * i));
    uint32_t c = dt_crc32c_masked(r, 8);
    for (int i = 0; i < 4; i++)
        r[8 + i] = (unsigned char)(c >> (8 * i));
    memcpy(r + 12, msg->b, msg->n);
    c = dt_crc32c_masked(msg->b, msg->n);
    for (int i = 0; i < 4; i++)
        r[12 + msg->n + i] = (unsigned char)(c >> (8 * i));
    *rec = r;
    *len = msg->n + 16;
    return 0;
}

int dt_tfevents_encode_scalars(double wall_time, long long step, const struct dt_tf_scalar *s,
                               int n, unsigned char **rec, size_t *len)
{
    if (n > DT_TF_MAX_SCALARS)
        return dt_fail(DT_ERUNTIME, "tfevents: %d scalars in one event, at most %d", n,
                       DT_TF_MAX_SCALARS);
    struct pb e = {.n = 0}, summary = {.n = 0};
    event_head(&e, wall_time, step);
    for (int i = 0; i < n; i++) {
        struct pb value = {.n = 0};
        pb_bytes(&value, VALUE_TAG, s[i].tag, s[i].tag_len ? s[i].tag_len : strlen(s[i].tag));
        pb_float(&value, VALUE_SIMPLE, s[i].value);
        pb_bytes(&summary, SUMMARY_VALUE, value.b, value.n);
        summary.overflow |= value.overflow;
    }
    pb_bytes(&e, EVENT_SUMMARY, summary.b, summary.n);
    e.overflow |= summary.overflow;
    return frame(&e, rec, len);
}

static int write_record(struct dt_tfevents *t, const struct pb *msg)
{
    unsigned char *rec;
    size_t len;
    int rc = frame(msg, &rec, &len);
    if (rc)
        return rc;
    ssize_t w = write(t->fd, rec, len); /* O_APPEND: one record, one write */
    free(rec);
    if (w != (ssize_t)len)
        return dt_fail(DT_ERUNTIME, "tfevents: write failed: %s",
                       w < 0 ? strerror(errno) : "short write");
    return 0;
}

int dt_tfevents_open(struct dt_tfevents *t, const char *dir, double wall_time)
{
    char host[256] = "localhost";
    if (gethostname(host, sizeof host - 1) == 0)
        host[sizeof host - 1] = '\0';
    for (char *c = host; *c; c++) /* a file name, whatever the host calls itself */
        if (*c == '/')
            *c = '_';
    char *path = t->path;
    snprintf(path, sizeof t->path, "%s/events.out.tfevents.%lld.%s", dir, (long long)wall_time,
             host);
    t->fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (t->fd < 0)
        return dt_fail(DT_ERUNTIME, "%s: cannot create: %s", path, strerror(errno));
    struct pb e = {.n = 0};
    event_head(&e, wall_time, 0);
    pb_bytes(&e, EVENT_FILE_VERSION, file_version, sizeof file_version - 1);
    int rc = write_record(t, &e);
    if (rc) {
        dt_tfevents_close(t);
        return dt_fail_context(rc, "%s", path);
    }
    return 0;
}

int dt_tfevents_scalars(struct dt_tfevents *t, double wall_time, long long step,
                        const struct dt_tf_scalar *s, int n)
{
    unsigned char *rec;
    size_t len;
    int rc = dt_tfevents_encode_scalars(wall_time, step, s, n, &rec, &len);
    if (rc)
        return rc;
    ssize_t w = write(t->fd, rec, len);
    free(rec);
    if (w != (ssize_t)len)
        return dt_fail(DT_ERUNTIME, "tfevents: write failed: %s",
                       w < 0 ? strerror(errno) : "short write");
    return 0;
}

int dt_tfevents_session_start(struct dt_tfevents *t, double wall_time, long long step)
{
    struct pb e = {.n = 0}, log = {.n = 0};
    event_head(&e, wall_time, step);
    pb_key(&log, SESSION_STATUS, WIRE_VARINT);
    pb_varint(&log, SESSION_START);
    pb_bytes(&e, EVENT_SESSION_LOG, log.b, log.n);
    return write_record(t, &e);
}

void dt_tfevents_close(struct dt_tfevents *t)
{
    if (t->fd >= 0)
        close(t->fd);
    t->fd = -1;
}

/* ---- reader ---- */

/* A bounded view of bytes being decoded. */
struct cursor {
    const unsigned char *p, *end;
};

static bool get_varint(struct cursor *c, uint64_t *v)
{
    *v = 0;
    for (int shift = 0; shift < 64 && c->p < c->end; shift += 7) {
        unsigned char b = *c->p++;
        *v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80))
            return true;
    }
    return false;
}

static uint64_t get_le(const unsigned char *p, int bytes)
{
    uint64_t v = 0;
    for (int i = 0; i < bytes; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

/* One field: its number, wire type and payload (a sub-cursor for bytes, the value else). */
struct field {
    int number, wire;
    uint64_t value;
    struct cursor bytes;
};

static bool next_field(struct cursor *c, struct field *f)
{
    uint64_t key;
    if (!get_varint(c, &key))
        return false;
    f->number = (int)(key >> 3);
    f->wire = (int)(key & 7);
    switch (f->wire) {
    case WIRE_VARINT:
        return get_varint(c, &f->value);
    case WIRE_FIXED64:
    case WIRE_FIXED32: {
        size_t n = f->wire == WIRE_FIXED64 ? 8 : 4;
        if ((size_t)(c->end - c->p) < n)
            return false;
        f->value = get_le(c->p, (int)n);
        c->p += n;
        return true;
    }
    case WIRE_BYTES: {
        uint64_t n;
        if (!get_varint(c, &n) || n > (uint64_t)(c->end - c->p))
            return false;
        f->bytes = (struct cursor){c->p, c->p + n};
        c->p += n;
        return true;
    }
    default: /* groups (3, 4) are not in these messages */
        return false;
    }
}

static bool decode_value(struct cursor c, struct dt_tf_scalar *s, bool *has_simple)
{
    struct field f;
    *has_simple = false;
    s->tag = "";
    s->tag_len = 0;
    while (c.p < c.end) {
        if (!next_field(&c, &f))
            return false;
        if (f.number == VALUE_TAG && f.wire == WIRE_BYTES) {
            s->tag = (const char *)f.bytes.p;
            s->tag_len = (size_t)(f.bytes.end - f.bytes.p);
        } else if (f.number == VALUE_SIMPLE && f.wire == WIRE_FIXED32) {
            uint32_t bits = (uint32_t)f.value;
            memcpy(&s->value, &bits, sizeof bits);
            *has_simple = true;
        }
    }
    return true;
}

static bool decode_summary(struct cursor c, struct dt_tf_event *e)
{
    struct field f;
    while (c.p < c.end) {
        if (!next_field(&c, &f))
            return false;
        bool simple;
        if (f.number != SUMMARY_VALUE || f.wire != WIRE_BYTES)
            continue;
        if (!decode_value(f.bytes, &e->scalars[e->nscalars], &simple))
            return false;
        if (simple && e->nscalars < DT_TF_MAX_SCALARS) /* images, histograms: not ours */
            e->nscalars++;
    }
    return true;
}

static bool decode_event(struct cursor c, struct dt_tf_event *e)
{
    memset(e, 0, sizeof *e);
    struct field f;
    while (c.p < c.end) {
        if (!next_field(&c, &f))
            return false;
        if (f.number == EVENT_WALL_TIME && f.wire == WIRE_FIXED64)
            memcpy(&e->wall_time, &f.value, sizeof e->wall_time);
        else if (f.number == EVENT_STEP && f.wire == WIRE_VARINT)
            e->step = (long long)f.value;
        else if (f.number == EVENT_FILE_VERSION && f.wire == WIRE_BYTES)
            e->file_version = true;
        else if (f.number == EVENT_SUMMARY && f.wire == WIRE_BYTES) {
            if (!decode_summary(f.bytes, e))
                return false;
        } else if (f.number == EVENT_SESSION_LOG && f.wire == WIRE_BYTES) {
            struct cursor s = f.bytes;
            struct field g;
            while (s.p < s.end)
                if (!next_field(&s, &g))
                    return false;
                else if (g.number == SESSION_STATUS && g.wire == WIRE_VARINT)
                    e->session_start = g.value == SESSION_START;
        }
    }
    return true;
}

/* Event files are small (a few hundred bytes per logged step); a run of a million steps logged
 * every step is still under 1 GiB. */
#define TFEVENTS_MAX_BYTES ((size_t)1 << 30)

int dt_tfevents_read(const char *path, int (*on_event)(void *ctx, const struct dt_tf_event *e),
                     void *ctx, bool *torn)
{
    char *data;
    size_t len;
    *torn = false;
    int rc = dt_read_file_max(path, TFEVENTS_MAX_BYTES, &data, &len);
    if (rc)
        return rc;
    const unsigned char *b = (const unsigned char *)data;
    size_t at = 0;
    while (rc == 0 && at < len) {
        if (len - at < 12) {
            *torn = true; /* not even a whole length header: the write a crash cut */
            break;
        }
        uint64_t n = get_le(b + at, 8);
        if ((uint32_t)get_le(b + at + 8, 4) != dt_crc32c_masked(b + at, 8)) {
            rc = dt_fail(DT_EDATA, "%s: record at byte %zu: length CRC mismatch", path, at);
            break;
        }
        if (n > len - at - 12 || len - at - 12 - n < 4) {
            *torn = true;
            break;
        }
        const unsigned char *msg = b + at + 12;
        if ((uint32_t)get_le(msg + n, 4) != dt_crc32c_masked(msg, n)) {
            rc = dt_fail(DT_EDATA, "%s: record at byte %zu: data CRC mismatch", path, at);
            break;
        }
        struct dt_tf_event e;
        if (!decode_event((struct cursor){msg, msg + n}, &e)) {
            rc = dt_fail(DT_EDATA, "%s: record at byte %zu: not a well-formed Event message", path,
                         at);
            break;
        }
        rc = on_event(ctx, &e);
        at += 12 + n + 4;
    }
    free(data);
    return rc;
}
