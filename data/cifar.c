/* CIFAR binary archives and the tar reader they are parsed with (see cifar.h).
 *
 * The archive is parsed while it is inflated: one 512-byte header at a time, member data read
 * in chunks of whole records straight into the split's growing arrays, so the decompressed tar
 * never exists in memory. The tar reader is strict because a damaged archive must not become
 * a silently different dataset: every header's checksum is verified, numeric fields must be
 * well-formed octal (or GNU base-256), and the archive must end with its end-of-archive block.
 *
 * CIFAR-10's training batches sit in the archive in no particular order (the published one
 * has 1, 3, 4, 2, 5); they are appended as they come and rotated into numeric order at the
 * end, so sample i is the same image torchvision calls i. The rotation copies one batch at a
 * time, so the peak memory of a load is the dataset plus one batch.
 */
#include "data/cifar.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/err.h"

#define TAR_BLOCK       512
#define TAR_PAX_MAX     (1u << 20)
#define CIFAR_PIXELS    3072
#define CIFAR_SIDE      32
#define CIFAR_META_MAX  65536
#define CIFAR_CHUNK     512 /* records read per call */
#define CIFAR_MAX_TRAIN 5

/* ------------------------------------------------------------------ tar */

const char *dt_tar_basename(const char *name)
{
    size_t n = strlen(name);
    if (n > 0 && name[n - 1] == '/') /* "dir/" names a directory, never a member we want */
        return name + n;
    const char *slash = strrchr(name, '/');
    return slash ? slash + 1 : name;
}

int dt_tar_open(struct dt_tar *t, const char *path)
{
    memset(t, 0, sizeof(*t));
    return dt_gz_open(&t->gz, path);
}

void dt_tar_close(struct dt_tar *t)
{
    dt_gz_close(t->gz);
    t->gz = NULL;
}

static int tar_truncated(struct dt_tar *t, const char *what)
{
    return dt_fail(DT_EDATA, "%s: truncated tar archive (%s at offset %llu)", dt_gz_path(t->gz),
                   what, (unsigned long long)t->offset);
}

static int tar_read_exact(struct dt_tar *t, void *buf, size_t len, const char *what)
{
    size_t got;
    int rc = dt_gz_read(t->gz, buf, len, &got);
    if (rc < 0)
        return rc;
    t->offset += got;
    return got < len ? tar_truncated(t, what) : 0;
}

static int tar_skip(struct dt_tar *t, uint64_t len, const char *what)
{
    size_t got;
    int rc = dt_gz_skip(t->gz, (size_t)len, &got);
    if (rc < 0)
        return rc;
    t->offset += got;
    return got < len ? tar_truncated(t, what) : 0;
}

/* Strict octal: optional leading spaces, at least one digit, then only NULs or spaces. */
static int tar_octal(const uint8_t *f, size_t n, uint64_t *v)
{
    size_t i = 0;
    *v = 0;
    while (i < n && f[i] == ' ')
        i++;
    size_t first = i;
    for (; i < n && f[i] >= '0' && f[i] <= '7'; i++) {
        if (*v > UINT64_MAX >> 3)
            return -1;
        *v = *v << 3 | (uint64_t)(f[i] - '0');
    }
    if (i == first)
        return -1;
    for (; i < n; i++)
        if (f[i] != 0 && f[i] != ' ')
            return -1;
    return 0;
}

/* A numeric field: octal, or GNU base-256 (first byte 0x80, big-endian rest). */
static int tar_number(const uint8_t *f, size_t n, uint64_t *v)
{
    if (f[0] == 0x80) {
        *v = 0;
        for (size_t i = 1; i < n; i++) {
            if (*v > UINT64_MAX >> 8)
                return -1;
            *v = *v << 8 | f[i];
        }
        return 0;
    }
    return tar_octal(f, n, v);
}

static int tar_checksum_ok(const uint8_t *h, uint64_t stored)
{
    uint64_t unsigned_sum = 0;
    int64_t signed_sum = 0;
    for (int i = 0; i < TAR_BLOCK; i++) {
        uint8_t b = i >= 148 && i < 156 ? ' ' : h[i];
        unsigned_sum += b;
        signed_sum += (int8_t)b;
    }
    return stored == unsigned_sum || (int64_t)stored == signed_sum;
}

static int tar_is_zero(const uint8_t *h)
{
    for (int i = 0; i < TAR_BLOCK; i++)
        if (h[i])
            return 0;
    return 1;
}

/* ustar's prefix field extends the name only with the POSIX magic "ustar\0". */
static void tar_header_name(const uint8_t *h, char *out, size_t size)
{
    int posix = memcmp(h + 257, "ustar\0", 6) == 0;
    size_t nlen = strnlen((const char *)h, 100);
    size_t plen = posix ? strnlen((const char *)h + 345, 155) : 0;
    if (plen)
        snprintf(out, size, "%.*s/%.*s", (int)plen, (const char *)h + 345, (int)nlen,
                 (const char *)h);
    else
        snprintf(out, size, "%.*s", (int)nlen, (const char *)h);
}

struct tar_override {
    char name[DT_TAR_NAME_MAX];
    int have_name;
    uint64_t size;
    int have_size;
};

static int tar_bad_pax(struct dt_tar *t, uint64_t at)
{
    return dt_fail(DT_EDATA, "%s: bad pax header record at offset %llu", dt_gz_path(t->gz),
                   (unsigned long long)at);
}

/* Records "LEN key=value\n"; path and size apply to the next member. */
static int tar_parse_pax(struct dt_tar *t, const char *p, size_t n, uint64_t at,
                         struct tar_override *o)
{
    size_t pos = 0;
    while (pos < n) {
        size_t len = 0, i = pos;
        for (; i < n && p[i] >= '0' && p[i] <= '9' && len < n; i++)
            len = len * 10 + (size_t)(p[i] - '0');
        if (i == pos || i >= n || p[i] != ' ' || len < 5 || len > n - pos ||
            p[pos + len - 1] != '\n')
            return tar_bad_pax(t, at);
        const char *kv = p + i + 1, *end = p + pos + len - 1;
        const char *eq = memchr(kv, '=', (size_t)(end - kv));
        if (!eq)
            return tar_bad_pax(t, at);
        size_t klen = (size_t)(eq - kv), vlen = (size_t)(end - eq - 1);
        if (klen == 4 && memcmp(kv, "path", 4) == 0) {
            if (vlen >= sizeof(o->name))
                return tar_bad_pax(t, at);
            memcpy(o->name, eq + 1, vlen);
            o->name[vlen] = 0;
            o->have_name = 1;
        } else if (klen == 4 && memcmp(kv, "size", 4) == 0) {
            uint64_t v = 0;
            if (vlen == 0 || vlen > 19)
                return tar_bad_pax(t, at);
            for (size_t k = 0; k < vlen; k++) {
                if (eq[1 + k] < '0' || eq[1 + k] > '9')
                    return tar_bad_pax(t, at);
                v = v * 10 + (uint64_t)(eq[1 + k] - '0');
            }
            o->size = v;
            o->have_size = 1;
        }
        pos += len;
    }
    return 0;
}

static uint64_t tar_pad(uint64_t size)
{
    return (TAR_BLOCK - size % TAR_BLOCK) % TAR_BLOCK;
}

/* Reads the data of a pax ('x') or GNU long-name ('L') header into a malloc'd string. */
static int tar_read_extension(struct dt_tar *t, uint64_t size, uint64_t limit, char **out)
{
    *out = NULL;
    if (size > limit)
        return dt_fail(DT_EDATA,
                       "%s: tar extension header at offset %llu is too large (%llu "
                       "bytes)",
                       dt_gz_path(t->gz), (unsigned long long)t->offset, (unsigned long long)size);
    char *buf = malloc((size_t)size + 1);
    if (!buf)
        return dt_fail(DT_ERUNTIME, "%s: out of memory", dt_gz_path(t->gz));
    int rc = tar_read_exact(t, buf, (size_t)size, "extension header data");
    if (rc == 0)
        rc = tar_skip(t, tar_pad(size), "header padding");
    if (rc < 0) {
        free(buf);
        return rc;
    }
    buf[size] = 0;
    *out = buf;
    return 0;
}

/* A member's data must fit in what the archive can inflate to: a size near 2^64 would wrap the
 * offset arithmetic (size plus padding) and read the next header from inside this data. */
static int tar_check_size(struct dt_tar *t, const char *name, uint64_t size, uint64_t at)
{
    if (size <= dt_gz_plausible_size(t->gz))
        return 0;
    return dt_fail(DT_EDATA,
                   "%s: tar member %s (header at offset %llu) claims %llu bytes, more than "
                   "the archive can hold",
                   dt_gz_path(t->gz), name, (unsigned long long)at, (unsigned long long)size);
}

/* Handles one non-empty header. Returns 1 when it starts a regular member. */
static int tar_header(struct dt_tar *t, const uint8_t *h, uint64_t at, struct tar_override *o)
{
    const char *path = dt_gz_path(t->gz);
    uint64_t stored, size;
    if (tar_octal(h + 148, 8, &stored) < 0 || !tar_checksum_ok(h, stored))
        return dt_fail(DT_EDATA,
                       "%s: bad tar header checksum at offset %llu (not a tar "
                       "archive, or corrupt)",
                       path, (unsigned long long)at);
    if (tar_number(h + 124, 12, &size) < 0)
        return dt_fail(DT_EDATA, "%s: bad size field in tar header at offset %llu", path,
                       (unsigned long long)at);
    char type = (char)h[156], *ext;
    int rc;
    switch (type) {
    case 'L': /* GNU long name */
        if ((rc = tar_read_extension(t, size, DT_TAR_NAME_MAX - 1, &ext)) < 0)
            return rc;
        snprintf(o->name, sizeof(o->name), "%s", ext);
        o->have_name = 1;
        free(ext);
        return 0;
    case 'x': /* pax extended header for the next member */
        if ((rc = tar_read_extension(t, size, TAR_PAX_MAX, &ext)) < 0)
            return rc;
        rc = tar_parse_pax(t, ext, (size_t)size, at, o);
        free(ext);
        return rc;
    case '0':
    case '\0':
    case '7':
        if (o->have_name)
            snprintf(t->name, sizeof(t->name), "%s", o->name);
        else
            tar_header_name(h, t->name, sizeof(t->name));
        if ((rc = tar_check_size(t, t->name, o->have_size ? o->size : size, at)) < 0)
            return rc;
        t->size = o->have_size ? o->size : size;
        t->remaining = t->size;
        t->padding = tar_pad(t->size);
        return 1;
    default: /* directories, links, global pax ('g'), GNU long link ('K'): skip */
        if (o->have_name)
            snprintf(t->name, sizeof(t->name), "%s", o->name);
        else
            tar_header_name(h, t->name, sizeof(t->name));
        if ((rc = tar_check_size(t, t->name, size, at)) < 0)
            return rc;
        memset(o, 0, sizeof(*o));
        return tar_skip(t, size + tar_pad(size), "skipped entry");
    }
}

int dt_tar_next(struct dt_tar *t)
{
    int rc = tar_skip(t, t->remaining + t->padding, "member data");
    if (rc < 0)
        return rc;
    t->remaining = t->padding = 0;
    struct tar_override o;
    memset(&o, 0, sizeof(o));
    for (;;) {
        uint8_t h[TAR_BLOCK];
        size_t got;
        uint64_t at = t->offset;
        if ((rc = dt_gz_read(t->gz, h, sizeof(h), &got)) < 0)
            return rc;
        t->offset += got;
        if (got == 0)
            return tar_truncated(t, "no end-of-archive marker");
        if (got < sizeof(h))
            return tar_truncated(t, "partial header");
        if (tar_is_zero(h))
            return 0;
        if ((rc = tar_header(t, h, at, &o)) != 0)
            return rc;
    }
}

int dt_tar_read(struct dt_tar *t, void *buf, size_t len)
{
    if (len > t->remaining)
        return dt_fail(DT_ERUNTIME, "%s: read of %zu bytes past the end of member %s",
                       dt_gz_path(t->gz), len, t->name);
    int rc = tar_read_exact(t, buf, len, "member data");
    if (rc == 0)
        t->remaining -= len;
    return rc;
}

/* ------------------------------------------------------------------ CIFAR */

struct cifar_format {
    const char *dir; /* the published archive's directory, for messages */
    const char *train[CIFAR_MAX_TRAIN];
    int ntrain;
    const char *test;
    const char *meta;
    int label_bytes, label_offset, classes;
};

struct cifar_split {
    uint8_t *x, *y;
    size_t n, cap;
    /* train members as they arrived: where each one's records start and how many */
    size_t start[CIFAR_MAX_TRAIN], count[CIFAR_MAX_TRAIN];
};

struct cifar_load {
    const char *path;
    const struct cifar_format *fmt;
    int classes;
    struct cifar_split train, test;
    uint64_t max_bytes; /* the tar's decompressed size may not exceed this */
    uint8_t *chunk;
    char *meta; /* the class-name member's text */
    char found[CIFAR_MAX_TRAIN + 2][DT_TAR_NAME_MAX];
};

static void cifar_format_init(struct cifar_format *f, int cifar100, int coarse)
{
    memset(f, 0, sizeof(*f));
    if (!cifar100) {
        static const char *train[] = {"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin",
                                      "data_batch_4.bin", "data_batch_5.bin"};
        *f = (struct cifar_format){.dir = "cifar-10-batches-bin",
                                   .ntrain = 5,
                                   .test = "test_batch.bin",
                                   .meta = "batches.meta.txt",
                                   .label_bytes = 1,
                                   .label_offset = 0,
                                   .classes = 10};
        memcpy(f->train, train, sizeof(train));
        return;
    }
    *f = (struct cifar_format){.dir = "cifar-100-binary",
                               .train = {"train.bin"},
                               .ntrain = 1,
                               .test = "test.bin",
                               .meta = coarse ? "coarse_label_names.txt" : "fine_label_names.txt",
                               .label_bytes = 2,
                               .label_offset = coarse ? 0 : 1,
                               .classes = coarse ? 20 : 100};
}

/* Slot of a wanted member: 0..ntrain-1 train, ntrain test, ntrain+1 meta; -1 otherwise. */
static int cifar_slot(const struct cifar_format *f, const char *base)
{
    for (int i = 0; i < f->ntrain; i++)
        if (strcmp(base, f->train[i]) == 0)
            return i;
    if (strcmp(base, f->test) == 0)
        return f->ntrain;
    if (strcmp(base, f->meta) == 0)
        return f->ntrain + 1;
    return -1;
}

static const char *cifar_slot_name(const struct cifar_format *f, int slot)
{
    return slot < f->ntrain ? f->train[slot] : slot == f->ntrain ? f->test : f->meta;
}

static int cifar_reserve(struct cifar_load *L, struct cifar_split *s, size_t more)
{
    if (s->n + more <= s->cap)
        return 0;
    size_t cap = s->cap ? s->cap * 2 : 1024;
    while (cap < s->n + more)
        cap *= 2;
    uint8_t *x = realloc(s->x, cap * CIFAR_PIXELS);
    if (x)
        s->x = x;
    uint8_t *y = x ? realloc(s->y, cap) : NULL;
    if (!y)
        return dt_fail(DT_ERUNTIME, "%s: out of memory for %zu records", L->path, cap);
    s->y = y;
    s->cap = cap;
    return 0;
}

/* Reads a records member into split s, checking every label. */
static int cifar_read_records(struct cifar_load *L, struct dt_tar *t, struct cifar_split *s)
{
    size_t rec = (size_t)L->fmt->label_bytes + CIFAR_PIXELS;
    if (t->size % rec != 0)
        return dt_fail(DT_EDATA,
                       "%s: member %s is %llu bytes, not a multiple of the %zu-byte "
                       "record size",
                       L->path, t->name, (unsigned long long)t->size, rec);
    if (t->size / rec > dt_gz_plausible_size(t->gz) / rec)
        return dt_fail(DT_EDATA, "%s: member %s claims %llu bytes, more than the archive can hold",
                       L->path, t->name, (unsigned long long)t->size);
    size_t records = (size_t)(t->size / rec);
    for (size_t done = 0; done < records;) {
        size_t k = records - done < CIFAR_CHUNK ? records - done : CIFAR_CHUNK;
        int rc = cifar_reserve(L, s, k);
        if (rc == 0)
            rc = dt_tar_read(t, L->chunk, k * rec);
        if (rc < 0)
            return rc;
        for (size_t i = 0; i < k; i++) {
            const uint8_t *r = L->chunk + i * rec;
            uint8_t label = r[L->fmt->label_offset];
            if (label >= L->classes)
                return dt_fail(DT_EDATA,
                               "%s: %s: label %u of record %zu is out of range "
                               "(classes %d)",
                               L->path, t->name, label, done + i, L->classes);
            s->y[s->n] = label;
            memcpy(s->x + s->n * CIFAR_PIXELS, r + L->fmt->label_bytes, CIFAR_PIXELS);
            s->n++;
        }
        done += k;
    }
    return 0;
}

static int cifar_read_meta(struct cifar_load *L, struct dt_tar *t)
{
    if (t->size > CIFAR_META_MAX)
        return dt_fail(DT_EDATA, "%s: member %s is too large for a class-name list (%llu bytes)",
                       L->path, t->name, (unsigned long long)t->size);
    L->meta = malloc((size_t)t->size + 1);
    if (!L->meta)
        return dt_fail(DT_ERUNTIME, "%s: out of memory", L->path);
    L->meta[t->size] = 0;
    return dt_tar_read(t, L->meta, (size_t)t->size);
}

static int cifar_member(struct cifar_load *L, struct dt_tar *t)
{
    int slot = cifar_slot(L->fmt, dt_tar_basename(t->name));
    if (slot < 0)
        return 0;
    if (L->found[slot][0])
        return dt_fail(DT_EDATA, "%s: member %s appears twice (%s and %s)", L->path,
                       cifar_slot_name(L->fmt, slot), L->found[slot], t->name);
    snprintf(L->found[slot], sizeof(L->found[slot]), "%s", t->name);
    if (slot == L->fmt->ntrain + 1)
        return cifar_read_meta(L, t);
    struct cifar_split *s = slot < L->fmt->ntrain ? &L->train : &L->test;
    if (slot < L->fmt->ntrain)
        L->train.start[slot] = L->train.n;
    int rc = cifar_read_records(L, t, s);
    if (slot < L->fmt->ntrain)
        L->train.count[slot] = L->train.n - L->train.start[slot];
    return rc;
}

/* Moves bytes [mid, end) in front of [a, mid) using a copy of the moved block. */
static int cifar_rotate(uint8_t *a, uint8_t *mid, uint8_t *end)
{
    size_t moved = (size_t)(end - mid);
    if (moved == 0 || mid == a)
        return 0;
    uint8_t *tmp = malloc(moved);
    if (!tmp)
        return -1;
    memcpy(tmp, mid, moved);
    memmove(a + moved, a, (size_t)(mid - a));
    memcpy(a, tmp, moved);
    free(tmp);
    return 0;
}

/* Puts the training batches in numeric order (see the file comment). */
static int cifar_order_train(struct cifar_load *L)
{
    struct cifar_split *s = &L->train;
    size_t pos = 0;
    for (int k = 0; k < L->fmt->ntrain; k++) {
        size_t st = s->start[k], cnt = s->count[k];
        if (cifar_rotate(s->x + pos * CIFAR_PIXELS, s->x + st * CIFAR_PIXELS,
                         s->x + (st + cnt) * CIFAR_PIXELS) < 0 ||
            cifar_rotate(s->y + pos, s->y + st, s->y + st + cnt) < 0)
            return dt_fail(DT_ERUNTIME, "%s: out of memory ordering batches", L->path);
        for (int j = 0; j < L->fmt->ntrain; j++)
            if (s->start[j] >= pos && s->start[j] < st)
                s->start[j] += cnt;
        s->start[k] = pos;
        pos += cnt;
    }
    return 0;
}

static int cifar_parse_names(struct cifar_load *L, char ***names_out)
{
    char **names = calloc((size_t)L->classes, sizeof(char *));
    if (!names)
        return dt_fail(DT_ERUNTIME, "%s: out of memory", L->path);
    int count = 0;
    for (char *line = L->meta; line && *line;) {
        char *nl = strchr(line, '\n'), *end = nl ? nl : line + strlen(line);
        while (end > line && (end[-1] == '\r' || end[-1] == ' ' || end[-1] == '\t'))
            end--;
        if (end > line) {
            if (count < L->classes) {
                names[count] = strndup(line, (size_t)(end - line));
                dt_class_name_sanitize(names[count]);
            }
            count++;
        }
        line = nl ? nl + 1 : NULL;
    }
    if (count != L->fmt->classes) {
        for (int i = 0; i < L->classes; i++)
            free(names[i]);
        free(names);
        return dt_fail(DT_EDATA, "%s: %s lists %d class names, expected %d", L->path,
                       L->found[L->fmt->ntrain + 1], count, L->fmt->classes);
    }
    *names_out = names;
    return 0;
}

static char **cifar_copy_names(char **names, int classes)
{
    char **copy = calloc((size_t)classes, sizeof(char *));
    for (int i = 0; copy && i < classes; i++)
        copy[i] = names[i] ? strdup(names[i]) : NULL;
    return copy;
}

static int cifar_check_complete(struct cifar_load *L)
{
    for (int slot = 0; slot < L->fmt->ntrain + 2; slot++)
        if (!L->found[slot][0])
            return dt_fail(DT_EDATA, "%s: tar member %s/%s missing", L->path, L->fmt->dir,
                           cifar_slot_name(L->fmt, slot));
    if (L->train.n == 0 || L->test.n == 0)
        return dt_fail(DT_EDATA, "%s: empty dataset (%zu training and %zu test records)", L->path,
                       L->train.n, L->test.n);
    return 0;
}

/* Reads the whole archive (to its end, so the gzip CRC of everything is verified). */
static int cifar_scan(struct cifar_load *L)
{
    struct dt_tar t;
    int rc = dt_tar_open(&t, L->path);
    if (rc < 0)
        return rc;
    dt_gz_set_limit(t.gz, L->max_bytes);
    while ((rc = dt_tar_next(&t)) == 1)
        if ((rc = cifar_member(L, &t)) < 0)
            break;
    size_t got;
    if (rc == 0) /* after the end marker: padding, then the gzip trailer to check */
        rc = dt_gz_skip(t.gz, DT_GZ_MAX_BYTES, &got);
    dt_tar_close(&t);
    return rc;
}

static void cifar_fill(struct dt_dataset *d, struct cifar_split *s, int classes)
{
    d->n = s->n;
    d->c = 3;
    d->h = d->w = CIFAR_SIDE;
    d->x = realloc(s->x, s->n * CIFAR_PIXELS);
    d->y = realloc(s->y, s->n);
    if (!d->x)
        d->x = s->x;
    if (!d->y)
        d->y = s->y;
    s->x = s->y = NULL;
    d->classes = classes;
}

int dt_cifar_load(struct dt_data *out, const char *path, int cifar100, int classes,
                  int coarse_labels)
{
    return dt_cifar_load_limited(out, path, cifar100, classes, coarse_labels, DT_CIFAR_MAX_BYTES);
}

int dt_cifar_load_limited(struct dt_data *out, const char *path, int cifar100, int classes,
                          int coarse_labels, uint64_t max_bytes)
{
    struct cifar_format fmt;
    cifar_format_init(&fmt, cifar100, coarse_labels);
    memset(out, 0, sizeof(*out));
    struct cifar_load *L = calloc(1, sizeof(*L));
    uint8_t *chunk = malloc(CIFAR_CHUNK * (CIFAR_PIXELS + 2));
    if (!L || !chunk) {
        free(L);
        free(chunk);
        return dt_fail(DT_ERUNTIME, "%s: out of memory", path);
    }
    *L = (struct cifar_load){.path = path, .fmt = &fmt, .chunk = chunk, .max_bytes = max_bytes};
    L->classes = classes > 0 ? classes : fmt.classes;
    char **names = NULL;
    int rc = cifar_scan(L);
    if (rc == 0)
        rc = cifar_check_complete(L);
    if (rc == 0)
        rc = cifar_order_train(L);
    if (rc == 0)
        rc = cifar_parse_names(L, &names);
    if (rc == 0) {
        cifar_fill(&out->train, &L->train, L->classes);
        cifar_fill(&out->test, &L->test, L->classes);
        out->train.names = names;
        out->test.names = cifar_copy_names(names, L->classes);
        if (fmt.ntrain > 1)
            snprintf(out->train.source, sizeof(out->train.source), "%s (%s..%s)", path,
                     fmt.train[0], fmt.train[fmt.ntrain - 1]);
        else
            snprintf(out->train.source, sizeof(out->train.source), "%s (%s)", path, fmt.train[0]);
        snprintf(out->test.source, sizeof(out->test.source), "%s (%s)", path, fmt.test);
    }
    free(L->train.x);
    free(L->train.y);
    free(L->test.x);
    free(L->test.y);
    free(L->meta);
    free(L->chunk);
    free(L);
    return rc;
}
