/* safetensors checkpoints (format and guarantees: nn/checkpoint.h, docs/checkpoints.md).
 *
 * Saving lists every tensor once (model parameters, buffers, optimizer state, step), lays them
 * out back to back in that order, and writes the header and bytes through an atomic file.
 *
 * Loading reads the file into memory and checks it in layers before touching the model: the
 * frame (length prefix, header bound), the header (JSON object; every entry's dtype, shape and
 * byte range; ranges inside the data and not overlapping), then the match against the model
 * (every tensor present with its dtype and shape, nothing unknown). Only then are the bytes
 * copied, in a second pass over the same matching code, so a bad file can never leave a
 * half-loaded model behind.
 *
 * Tensors are written in the host's byte order, which must be little-endian (checked at
 * compile time). num_batches_tracked lives in the float buffer arena (exact to 2^24) but is an
 * int64 scalar in PyTorch's state_dict, so it is converted both ways.
 */
#include "nn/checkpoint.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/err.h"
#include "util/fileio.h"
#include "util/json.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "checkpoints are written in host byte order, which must be little-endian"
#endif

#define MAX_DIMS      8
#define NAME_MAX_LEN  192
#define OPTIM_PREFIX  "optimizer."
#define STEP_TENSOR   "optimizer.step"
#define COUNT_SUFFIX  "num_batches_tracked"
#define MAX_EXACT_INT 9007199254740992.0 /* 2^53: larger JSON numbers are not exact doubles */

/* ---- metadata list ---- */

int dt_checkpoint_meta_set(struct dt_checkpoint_meta *meta, const char *key, const char *value)
{
    char *v = strdup(value);
    if (!v)
        return dt_fail(DT_ERUNTIME, "out of memory storing metadata %s", key);
    for (int i = 0; i < meta->n; i++) {
        if (strcmp(meta->items[i].key, key) == 0) {
            free(meta->items[i].value);
            meta->items[i].value = v;
            return 0;
        }
    }
    if (meta->n == meta->cap) {
        int cap = meta->cap ? meta->cap * 2 : 8;
        struct dt_checkpoint_meta_item *items = realloc(meta->items, (size_t)cap * sizeof *items);
        if (!items) {
            free(v);
            return dt_fail(DT_ERUNTIME, "out of memory storing metadata %s", key);
        }
        meta->items = items;
        meta->cap = cap;
    }
    char *k = strdup(key);
    if (!k) {
        free(v);
        return dt_fail(DT_ERUNTIME, "out of memory storing metadata %s", key);
    }
    meta->items[meta->n++] = (struct dt_checkpoint_meta_item){k, v};
    return 0;
}

int dt_checkpoint_meta_setf(struct dt_checkpoint_meta *meta, const char *key, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *value = NULL;
    int n = vasprintf(&value, fmt, ap);
    va_end(ap);
    if (n < 0)
        return dt_fail(DT_ERUNTIME, "out of memory storing metadata %s", key);
    int rc = dt_checkpoint_meta_set(meta, key, value);
    free(value);
    return rc;
}

const char *dt_checkpoint_meta_get(const struct dt_checkpoint_meta *meta, const char *key)
{
    for (int i = 0; i < meta->n; i++)
        if (strcmp(meta->items[i].key, key) == 0)
            return meta->items[i].value;
    return NULL;
}

void dt_checkpoint_meta_free(struct dt_checkpoint_meta *meta)
{
    for (int i = 0; i < meta->n; i++) {
        free(meta->items[i].key);
        free(meta->items[i].value);
    }
    free(meta->items);
    memset(meta, 0, sizeof *meta);
}

/* ---- dtypes ---- */

enum dtype { DT_F32, DT_I64, DT_OTHER };

struct dtype_info {
    const char *name;
    size_t size;
    enum dtype kind;
};

static const struct dtype_info dtypes[] = {
    {"F32", 4, DT_F32},   {"I64", 8, DT_I64},       {"F64", 8, DT_OTHER},
    {"F16", 2, DT_OTHER}, {"BF16", 2, DT_OTHER},    {"I32", 4, DT_OTHER},
    {"U32", 4, DT_OTHER}, {"I16", 2, DT_OTHER},     {"U16", 2, DT_OTHER},
    {"I8", 1, DT_OTHER},  {"U8", 1, DT_OTHER},      {"BOOL", 1, DT_OTHER},
    {"U64", 8, DT_OTHER}, {"F8_E4M3", 1, DT_OTHER}, {"F8_E5M2", 1, DT_OTHER},
};

static const struct dtype_info *dtype_find(const char *name)
{
    for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++)
        if (strcmp(dtypes[i].name, name) == 0)
            return &dtypes[i];
    return NULL;
}

static bool is_count_buffer(const struct dt_tensor_info *t)
{
    size_t n = strlen(t->name), s = strlen(COUNT_SUFFIX);
    return t->ndim == 0 && n >= s && strcmp(t->name + n - s, COUNT_SUFFIX) == 0;
}

const char *dt_checkpoint_shape_text(char *buf, size_t cap, int ndim, const long long *shape)
{
    size_t len = (size_t)snprintf(buf, cap, "[");
    for (int d = 0; d < ndim && len < cap; d++)
        len += (size_t)snprintf(buf + len, cap - len, "%s%lld", d ? ", " : "", shape[d]);
    if (len < cap)
        snprintf(buf + len, cap - len, "]");
    return buf;
}

/* ---- saving ---- */

/* One tensor to write: float data as F32, or an int64 scalar (from a float count or a value). */
struct out_tensor {
    char name[NAME_MAX_LEN];
    const struct dtype_info *dtype;
    int ndim;
    long long shape[4];
    const float *data; /* F32: count floats; I64 from a float count: 1 float */
    size_t count;
    int64_t value; /* I64 when data is NULL */
};

struct save_plan {
    int n, cap;
    struct out_tensor *t;
};

static struct out_tensor *plan_add(struct save_plan *p, const char *prefix,
                                   const struct dt_tensor_info *info, const float *data)
{
    if (p->n == p->cap) {
        int cap = p->cap ? p->cap * 2 : 64;
        struct out_tensor *t = realloc(p->t, (size_t)cap * sizeof *t);
        if (!t) {
            dt_fail(DT_ERUNTIME, "out of memory planning the checkpoint");
            return NULL;
        }
        p->t = t;
        p->cap = cap;
    }
    struct out_tensor *t = &p->t[p->n++];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s%s", prefix, info ? info->name : "");
    t->dtype = dtype_find("F32");
    t->data = data;
    if (info) {
        t->ndim = info->ndim;
        for (int d = 0; d < info->ndim && d < 4; d++)
            t->shape[d] = info->shape[d];
        t->count = info->count;
        t->data = data + info->offset;
    }
    return t;
}

/* Parameter tensors must tile the arena, or optimizer state would be saved only in part. */
static int check_tiling(const char *path, const struct dt_tensor_info *t, int n, size_t arena,
                        const char *what)
{
    size_t total = 0;
    for (int i = 0; i < n; i++) {
        if (t[i].offset + t[i].count > arena || t[i].ndim < 0 || t[i].ndim > 4)
            return dt_fail(DT_ERUNTIME, "%s: model tensor %s lies outside the %s arena", path,
                           t[i].name, what);
        total += t[i].count;
    }
    if (total != arena)
        return dt_fail(DT_ERUNTIME, "%s: model %s tensors cover %zu of %zu floats", path, what,
                       total, arena);
    return 0;
}

static int plan_model(struct save_plan *p, const char *path, const struct dt_model *m,
                      struct dt_optim *opt)
{
    int rc = check_tiling(path, m->tensors, m->ntensors, m->nparams, "parameter");
    if (!rc)
        rc = check_tiling(path, m->buffer_tensors, m->nbuffer_tensors, m->nbuffers, "buffer");
    if (rc)
        return rc;
    for (int i = 0; i < m->ntensors; i++)
        if (!plan_add(p, "", &m->tensors[i], m->params))
            return -DT_ERUNTIME;
    for (int i = 0; i < m->nbuffer_tensors; i++) {
        struct out_tensor *t = plan_add(p, "", &m->buffer_tensors[i], m->buffers);
        if (!t)
            return -DT_ERUNTIME;
        if (is_count_buffer(&m->buffer_tensors[i]))
            t->dtype = dtype_find("I64");
    }
    if (!opt)
        return 0;
    struct dt_optim_state states[DT_OPTIM_MAX_STATES];
    int ns = dt_optim_states(opt, states);
    for (int s = 0; s < ns; s++) {
        char prefix[64];
        snprintf(prefix, sizeof prefix, OPTIM_PREFIX "%s.", states[s].name);
        for (int i = 0; i < m->ntensors; i++)
            if (!plan_add(p, prefix, &m->tensors[i], states[s].data))
                return -DT_ERUNTIME;
    }
    struct out_tensor *step = plan_add(p, STEP_TENSOR, NULL, NULL);
    if (!step)
        return -DT_ERUNTIME;
    step->dtype = dtype_find("I64");
    step->count = 1;
    step->value = (int64_t)dt_optim_steps(opt);
    return 0;
}

static char *metadata_json(const struct dt_checkpoint_meta *meta, struct dt_optim *opt)
{
    struct dt_json_writer w;
    dt_jw_begin(&w, NULL);
    dt_jw_str(&w, "format", "pt");
    dt_jw_str(&w, "dtrain_version", DTRAIN_VERSION);
    char steps[32];
    if (opt) {
        dt_jw_str(&w, "optimizer", dt_optim_type_name(dt_optim_config(opt)->type));
        snprintf(steps, sizeof steps, "%llu", (unsigned long long)dt_optim_steps(opt));
        dt_jw_str(&w, "optimizer_step", steps);
    }
    static const char *const reserved[] = {"format", "dtrain_version", "optimizer",
                                           "optimizer_step"};
    for (int i = 0; meta && i < meta->n; i++) {
        bool skip = false;
        for (size_t r = 0; r < sizeof reserved / sizeof reserved[0]; r++)
            skip |= strcmp(meta->items[i].key, reserved[r]) == 0;
        if (!skip)
            dt_jw_str(&w, meta->items[i].key, meta->items[i].value);
    }
    return dt_jw_finish(&w);
}

/* The JSON header, padded with spaces to a multiple of 8 so the data starts aligned. */
static char *header_json(const struct save_plan *p, const char *metadata, size_t *len)
{
    struct dt_json_writer w;
    dt_jw_begin(&w, NULL);
    dt_jw_raw(&w, "__metadata__", metadata);
    size_t offset = 0;
    for (int i = 0; i < p->n; i++) {
        const struct out_tensor *t = &p->t[i];
        char shape[160], entry[320];
        size_t bytes = t->count * t->dtype->size;
        snprintf(entry, sizeof entry, "{\"dtype\":\"%s\",\"shape\":%s,\"data_offsets\":[%zu,%zu]}",
                 t->dtype->name, dt_checkpoint_shape_text(shape, sizeof shape, t->ndim, t->shape),
                 offset, offset + bytes);
        dt_jw_raw(&w, t->name, entry);
        offset += bytes;
    }
    char *json = dt_jw_finish(&w);
    if (!json)
        return NULL;
    size_t n = strlen(json), padded = (n + 7) / 8 * 8;
    char *out = realloc(json, padded + 1);
    if (!out) {
        free(json);
        return NULL;
    }
    memset(out + n, ' ', padded - n);
    out[padded] = 0;
    *len = padded;
    return out;
}

/* The whole file in one buffer: length prefix, header, then each tensor's bytes. */
static unsigned char *encode_file(const char *header, size_t header_len, const struct save_plan *p,
                                  size_t *len)
{
    size_t total = 8 + header_len;
    for (int i = 0; i < p->n; i++)
        total += p->t[i].count * p->t[i].dtype->size;
    unsigned char *out = malloc(total), *at = out;
    if (!out)
        return NULL;
    for (int i = 0; i < 8; i++)
        *at++ = (unsigned char)((uint64_t)header_len >> (8 * i));
    memcpy(at, header, header_len);
    at += header_len;
    for (int i = 0; i < p->n; i++) {
        const struct out_tensor *t = &p->t[i];
        if (t->dtype->size == 4) {
            memcpy(at, t->data, t->count * sizeof(float));
        } else {
            int64_t v = t->data ? (int64_t)t->data[0] : t->value;
            memcpy(at, &v, sizeof v);
        }
        at += t->count * t->dtype->size;
    }
    *len = total;
    return out;
}

int dt_checkpoint_encode(const char *path, const struct dt_model *model, struct dt_optim *opt,
                         const struct dt_checkpoint_meta *meta, unsigned char **bytes, size_t *len)
{
    *bytes = NULL;
    *len = 0;
    if (opt && dt_optim_size(opt) != model->nparams)
        return dt_fail(DT_ERUNTIME, "%s: optimizer holds state for %zu parameters, model has %zu",
                       path, dt_optim_size(opt), model->nparams);
    struct save_plan plan = {0};
    char *metadata = NULL, *header = NULL;
    size_t header_len = 0;
    int rc = plan_model(&plan, path, model, opt);
    if (!rc) {
        metadata = metadata_json(meta, opt);
        header = metadata ? header_json(&plan, metadata, &header_len) : NULL;
        rc = header ? 0 : dt_fail(DT_ERUNTIME, "%s: out of memory writing the header", path);
    }
    if (!rc && !(*bytes = encode_file(header, header_len, &plan, len)))
        rc = dt_fail(DT_ERUNTIME, "%s: out of memory encoding the checkpoint", path);
    free(header);
    free(metadata);
    free(plan.t);
    return rc;
}

int dt_checkpoint_save(const char *path, const struct dt_model *model, struct dt_optim *opt,
                       const struct dt_checkpoint_meta *meta)
{
    unsigned char *bytes;
    size_t len;
    int rc = dt_checkpoint_encode(path, model, opt, meta, &bytes, &len);
    if (!rc)
        rc = dt_write_file_atomic(path, bytes, len);
    free(bytes);
    return rc;
}

/* ---- loading: frame and header ---- */

struct entry {
    const char *name;
    const struct dtype_info *dtype;
    int ndim;
    long long shape[MAX_DIMS];
    size_t begin, end; /* into the data section */
};

struct parsed {
    const char *path;
    char *file;
    size_t len;
    const unsigned char *data; /* after the header (once read_data ran) */
    size_t data_len, header_len;
    int fd;
    struct dt_json *header;
    const struct dt_json *meta; /* may be NULL */
    int nentries;
    struct entry *entries;
};

static void parsed_free(struct parsed *pf)
{
    dt_json_free(pf->header);
    free(pf->entries);
    free(pf->file);
    if (pf->fd >= 0)
        close(pf->fd);
}

/* Reads exactly len bytes at the file's current offset. */
static int read_exact(int fd, char *buf, size_t len, const char *path)
{
    for (size_t at = 0; at < len;) {
        ssize_t n = read(fd, buf + at, len - at);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return dt_fail(DT_EDATA, "%s: %s", path,
                           n < 0 ? strerror(errno) : "truncated while it was being read");
        at += (size_t)n;
    }
    return 0;
}

/* The frame and the JSON header only: the data section is read by read_data once the header
 * says what it must hold, so a FIFO, a device or a huge file with a small header is refused
 * before its bytes are. */
static int read_frame(struct parsed *pf)
{
    /* O_NONBLOCK: opening a FIFO must not wait for a writer. */
    pf->fd = open(pf->path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (pf->fd < 0)
        return dt_fail(DT_EDATA, "%s: cannot open: %s", pf->path, strerror(errno));
    struct stat st;
    if (fstat(pf->fd, &st) != 0 || !S_ISREG(st.st_mode))
        return dt_fail(DT_EDATA, "%s: not a regular file", pf->path);
    pf->len = (size_t)st.st_size;
    if (pf->len < 8)
        return dt_fail(DT_EDATA,
                       "%s: not a safetensors file: %zu bytes, too short for the 8-byte header "
                       "length",
                       pf->path, pf->len);
    unsigned char prefix[9] = {0};
    int rc = read_exact(pf->fd, (char *)prefix, pf->len > 8 ? 9 : 8, pf->path);
    if (rc)
        return rc;
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--)
        n = n << 8 | prefix[i];
    /* A safetensors header is a JSON object, so its first byte tells a file of another kind
     * (text, a PyTorch zip) from one that was cut short. */
    if ((pf->len > 8 && prefix[8] != '{') || n > DT_CHECKPOINT_MAX_HEADER)
        return dt_fail(DT_EDATA,
                       "%s: not a safetensors file: no 8-byte header length followed by a JSON "
                       "object",
                       pf->path);
    if (n > pf->len - 8)
        return dt_fail(DT_EDATA,
                       "%s: truncated: the header is %llu bytes but only %zu follow its length",
                       pf->path, (unsigned long long)n, pf->len - 8);
    if (!(pf->file = malloc(8 + (size_t)n + 1)))
        return dt_fail(DT_ERUNTIME, "%s: out of memory reading the header", pf->path);
    memcpy(pf->file, prefix, 9);
    if (n > 1 && (rc = read_exact(pf->fd, pf->file + 9, (size_t)n - 1, pf->path)))
        return rc;
    pf->header_len = (size_t)n;
    pf->header = dt_json_parse(pf->file + 8, (size_t)n);
    if (!pf->header)
        return dt_fail_context(-DT_EDATA, "%s: header", pf->path);
    if (pf->header->type != DT_JSON_OBJ)
        return dt_fail(DT_EDATA, "%s: header is not a JSON object", pf->path);
    pf->data_len = pf->len - 8 - (size_t)n;
    return 0;
}

/* The data section, whose length the header has already been checked against. */
static int read_data(struct parsed *pf)
{
    char *all = realloc(pf->file, pf->len + 1);
    if (!all)
        return dt_fail(DT_ERUNTIME, "%s: out of memory reading %zu bytes", pf->path, pf->len);
    pf->file = all;
    int rc = read_exact(pf->fd, all + 8 + pf->header_len, pf->data_len, pf->path);
    pf->data = (const unsigned char *)all + 8 + pf->header_len;
    return rc;
}

static bool json_uint(const struct dt_json *v, double limit, long long *out)
{
    if (!v || v->type != DT_JSON_NUM || !(v->num >= 0) || v->num > limit || v->num != floor(v->num))
        return false;
    *out = (long long)v->num;
    return true;
}

static int parse_shape(const struct parsed *pf, const char *name, const struct dt_json *shape,
                       struct entry *e, size_t *count)
{
    if (!shape || shape->type != DT_JSON_ARR)
        return dt_fail(DT_EDATA, "%s: tensor %s: missing or non-array \"shape\"", pf->path, name);
    if (shape->count > MAX_DIMS)
        return dt_fail(DT_EDATA, "%s: tensor %s: %zu dimensions (at most %d supported)", pf->path,
                       name, shape->count, MAX_DIMS);
    e->ndim = (int)shape->count;
    *count = 1;
    int d = 0;
    for (const struct dt_json *v = shape->child; v; v = v->next, d++) {
        if (!json_uint(v, MAX_EXACT_INT, &e->shape[d]))
            return dt_fail(DT_EDATA, "%s: tensor %s: shape entry %d is not a non-negative integer",
                           pf->path, name, d);
        size_t dim = (size_t)e->shape[d];
        if (dim && *count > SIZE_MAX / dim)
            return dt_fail(DT_EDATA, "%s: tensor %s: shape overflows", pf->path, name);
        *count *= dim;
    }
    return 0;
}

static int parse_offsets(const struct parsed *pf, const char *name, const struct dt_json *off,
                         struct entry *e, size_t count)
{
    long long b, end;
    if (!off || off->type != DT_JSON_ARR || off->count != 2 ||
        !json_uint(off->child, MAX_EXACT_INT, &b) ||
        !json_uint(off->child->next, MAX_EXACT_INT, &end))
        return dt_fail(DT_EDATA,
                       "%s: tensor %s: missing or malformed \"data_offsets\" "
                       "(expected [begin, end])",
                       pf->path, name);
    if (b <= end && (unsigned long long)end > pf->data_len)
        return dt_fail(
            DT_EDATA,
            "%s: truncated: tensor %s ends at data byte %lld but the file holds %zu data bytes",
            pf->path, name, end, pf->data_len);
    if (b > end)
        return dt_fail(DT_EDATA, "%s: tensor %s: data_offsets [%lld, %lld] end before they begin",
                       pf->path, name, b, end);
    if (count > SIZE_MAX / e->dtype->size || (size_t)(end - b) != count * e->dtype->size)
        return dt_fail(DT_EDATA,
                       "%s: tensor %s: data_offsets span %lld bytes, shape and dtype %s "
                       "need %zu",
                       pf->path, name, end - b, e->dtype->name, count * e->dtype->size);
    e->begin = (size_t)b;
    e->end = (size_t)end;
    return 0;
}

static int parse_entry(const struct parsed *pf, const struct dt_json *v, struct entry *e)
{
    e->name = v->key;
    if (v->type != DT_JSON_OBJ)
        return dt_fail(DT_EDATA, "%s: tensor %s: entry is not a JSON object", pf->path, e->name);
    const struct dt_json *dtype = dt_json_get(v, "dtype");
    if (!dtype || dtype->type != DT_JSON_STR)
        return dt_fail(DT_EDATA, "%s: tensor %s: missing \"dtype\"", pf->path, e->name);
    e->dtype = dtype_find(dtype->str);
    if (!e->dtype)
        return dt_fail(DT_EDATA, "%s: tensor %s: unknown dtype \"%s\"", pf->path, e->name,
                       dtype->str);
    size_t count = 0;
    int rc = parse_shape(pf, e->name, dt_json_get(v, "shape"), e, &count);
    return rc ? rc : parse_offsets(pf, e->name, dt_json_get(v, "data_offsets"), e, count);
}

static int parse_metadata(struct parsed *pf, const struct dt_json *v)
{
    if (v->type != DT_JSON_OBJ)
        return dt_fail(DT_EDATA, "%s: __metadata__ is not a JSON object", pf->path);
    for (const struct dt_json *item = v->child; item; item = item->next)
        if (item->type != DT_JSON_STR)
            return dt_fail(DT_EDATA, "%s: __metadata__ value for \"%s\" is not a string", pf->path,
                           item->key);
    pf->meta = v;
    return 0;
}

static int compare_begin(const void *a, const void *b)
{
    const struct entry *x = *(const struct entry *const *)a, *y = *(const struct entry *const *)b;
    return x->begin < y->begin   ? -1
           : x->begin > y->begin ? 1
                                 : (x->end > y->end) - (x->end < y->end);
}

static int compare_name(const void *a, const void *b)
{
    return strcmp((*(const struct entry *const *)a)->name, (*(const struct entry *const *)b)->name);
}

/* The tensors tile the data section exactly: no name twice, no overlap, no hole, nothing
 * after the last tensor (bytes no tensor owns are either a damaged file or smuggled data).
 * Sorting keeps a header of many names at n log n. */
static int check_layout(const struct parsed *pf)
{
    const struct entry **order = calloc((size_t)pf->nentries + 1, sizeof *order);
    if (!order)
        return dt_fail(DT_ERUNTIME, "%s: out of memory checking the header", pf->path);
    for (int i = 0; i < pf->nentries; i++)
        order[i] = &pf->entries[i];
    int rc = 0;
    qsort(order, (size_t)pf->nentries, sizeof *order, compare_name);
    for (int i = 1; i < pf->nentries && !rc; i++)
        if (strcmp(order[i]->name, order[i - 1]->name) == 0)
            rc = dt_fail(DT_EDATA, "%s: tensor %s appears twice in the header", pf->path,
                         order[i]->name);
    qsort(order, (size_t)pf->nentries, sizeof *order, compare_begin);
    size_t end = 0;
    for (int i = 0; i < pf->nentries && !rc; i++) {
        if (order[i]->begin < end)
            rc = dt_fail(DT_EDATA, "%s: tensor %s: data_offsets overlap those of tensor %s",
                         pf->path, order[i]->name, order[i - 1]->name);
        else if (order[i]->begin > end)
            rc = dt_fail(DT_EDATA, "%s: tensor %s: %zu bytes before it belong to no tensor",
                         pf->path, order[i]->name, order[i]->begin - end);
        end = order[i]->end;
    }
    if (!rc && end != pf->data_len)
        rc = dt_fail(DT_EDATA, "%s: %zu bytes after the last tensor belong to no tensor", pf->path,
                     pf->data_len - end);
    free(order);
    return rc;
}

static int parse_header(struct parsed *pf)
{
    pf->entries = calloc(pf->header->count ? pf->header->count : 1, sizeof *pf->entries);
    if (!pf->entries)
        return dt_fail(DT_ERUNTIME, "%s: out of memory reading the header", pf->path);
    for (const struct dt_json *v = pf->header->child; v; v = v->next) {
        int rc = strcmp(v->key, "__metadata__") == 0
                     ? parse_metadata(pf, v)
                     : parse_entry(pf, v, &pf->entries[pf->nentries++]);
        if (rc)
            return rc;
    }
    return check_layout(pf);
}

static int parse_file(struct parsed *pf, const char *path)
{
    memset(pf, 0, sizeof *pf);
    pf->fd = -1;
    pf->path = path;
    int rc = read_frame(pf);
    if (rc == 0)
        rc = parse_header(pf);
    return rc ? rc : read_data(pf);
}

static int copy_metadata(const struct parsed *pf, struct dt_checkpoint_meta *meta)
{
    memset(meta, 0, sizeof *meta);
    for (const struct dt_json *v = pf->meta ? pf->meta->child : NULL; v; v = v->next) {
        int rc = dt_checkpoint_meta_set(meta, v->key, v->str);
        if (rc) {
            dt_checkpoint_meta_free(meta);
            return rc;
        }
    }
    return 0;
}

/* ---- loading: matching the model ---- */

static const struct entry *find_entry(const struct parsed *pf, const char *name)
{
    for (int i = 0; i < pf->nentries; i++)
        if (strcmp(pf->entries[i].name, name) == 0)
            return &pf->entries[i];
    return NULL;
}

/* Finds `name` and checks it has dtype `want` and the shape of `info` (shape [] when NULL). */
static int match(const struct parsed *pf, const char *name, const struct dt_tensor_info *info,
                 enum dtype want, const struct entry **out)
{
    const struct entry *e = find_entry(pf, name);
    if (!e)
        return dt_fail(DT_EDATA, "%s: tensor %s missing", pf->path, name);
    if (e->dtype->kind != want)
        return dt_fail(DT_EDATA, "%s: tensor %s: dtype %s, expected %s", pf->path, name,
                       e->dtype->name, want == DT_F32 ? "F32" : "I64");
    long long shape[4] = {0};
    int ndim = info ? info->ndim : 0;
    for (int d = 0; d < ndim; d++)
        shape[d] = info->shape[d];
    bool same = e->ndim == ndim;
    for (int d = 0; same && d < ndim; d++)
        same = e->shape[d] == shape[d];
    if (!same) {
        char expected[96], found[160];
        return dt_fail(DT_EDATA, "%s: tensor %s: shape %s expected, found %s", pf->path, name,
                       dt_checkpoint_shape_text(expected, sizeof expected, ndim, shape),
                       dt_checkpoint_shape_text(found, sizeof found, e->ndim, e->shape));
    }
    *out = e;
    return 0;
}

static int64_t read_i64(const struct parsed *pf, const struct entry *e)
{
    int64_t v;
    memcpy(&v, pf->data + e->begin, sizeof v);
    return v;
}

/* The file's name for tensor t under `prefix` ("" or "optimizer.exp_avg."): its name, or the
 * layers.<index> name a checkpoint written before layers had names uses for it. */
static void file_name(const struct parsed *pf, const char *prefix, const struct dt_tensor_info *t,
                      char *out, size_t size)
{
    snprintf(out, size, "%s%s", prefix, t->name);
    if (find_entry(pf, out) || strcmp(t->name, t->index_name) == 0)
        return;
    char old[NAME_MAX_LEN];
    snprintf(old, sizeof old, "%s%s", prefix, t->index_name);
    if (find_entry(pf, old))
        snprintf(out, size, "%s", old);
}

/* Validates (apply false) or copies (apply true) one model tensor into its arena. */
static int load_tensor(const struct parsed *pf, const char *prefix, const struct dt_tensor_info *t,
                       float *arena, bool count, bool apply)
{
    const struct entry *e;
    char name[NAME_MAX_LEN];
    file_name(pf, prefix, t, name, sizeof name);
    int rc = match(pf, name, t, count ? DT_I64 : DT_F32, &e);
    if (rc || !apply)
        return rc;
    if (count)
        arena[t->offset] = (float)read_i64(pf, e);
    else
        memcpy(arena + t->offset, pf->data + e->begin, t->count * sizeof(float));
    return 0;
}

static bool is_model_tensor(const struct dt_model *m, const char *name)
{
    for (int i = 0; i < m->ntensors; i++)
        if (!strcmp(m->tensors[i].name, name) || !strcmp(m->tensors[i].index_name, name))
            return true;
    for (int i = 0; i < m->nbuffer_tensors; i++)
        if (!strcmp(m->buffer_tensors[i].name, name) ||
            !strcmp(m->buffer_tensors[i].index_name, name))
            return true;
    return false;
}

static int load_model(const struct parsed *pf, struct dt_model *m, bool apply)
{
    if (apply)
        m->weights_copied = false; /* the next forward copies the weights it loads */
    for (int i = 0; i < pf->nentries; i++) {
        const char *name = pf->entries[i].name;
        if (strncmp(name, OPTIM_PREFIX, strlen(OPTIM_PREFIX)) != 0 && !is_model_tensor(m, name))
            return dt_fail(DT_EDATA, "%s: tensor %s is not part of the model", pf->path, name);
    }
    for (int i = 0; i < m->ntensors; i++) {
        int rc = load_tensor(pf, "", &m->tensors[i], m->params, false, apply);
        if (rc)
            return rc;
    }
    for (int i = 0; i < m->nbuffer_tensors; i++) {
        const struct dt_tensor_info *t = &m->buffer_tensors[i];
        int rc = load_tensor(pf, "", t, m->buffers, is_count_buffer(t), apply);
        if (rc)
            return rc;
    }
    return 0;
}

static int load_optim(const struct parsed *pf, const struct dt_model *m, struct dt_optim *opt,
                      bool apply)
{
    const char *want = dt_optim_type_name(dt_optim_config(opt)->type);
    const struct dt_json *type = pf->meta ? dt_json_get(pf->meta, "optimizer") : NULL;
    if (type && strcmp(type->str, want) != 0)
        return dt_fail(DT_EDATA, "%s: optimizer state is for %s, not %s", pf->path, type->str,
                       want);
    if (dt_optim_size(opt) != m->nparams)
        return dt_fail(DT_ERUNTIME, "%s: optimizer holds state for %zu parameters, model has %zu",
                       pf->path, dt_optim_size(opt), m->nparams);
    const struct entry *step;
    int rc = match(pf, STEP_TENSOR, NULL, DT_I64, &step);
    if (rc)
        return rc;
    if (read_i64(pf, step) < 0)
        return dt_fail(DT_EDATA, "%s: tensor " STEP_TENSOR ": negative step count %lld", pf->path,
                       (long long)read_i64(pf, step));
    struct dt_optim_state states[DT_OPTIM_MAX_STATES];
    int ns = dt_optim_states(opt, states);
    for (int s = 0; s < ns; s++) {
        for (int i = 0; i < m->ntensors; i++) {
            char prefix[64];
            snprintf(prefix, sizeof prefix, OPTIM_PREFIX "%s.", states[s].name);
            rc = load_tensor(pf, prefix, &m->tensors[i], states[s].data, false, apply);
            if (rc)
                return rc;
        }
    }
    if (apply)
        dt_optim_set_steps(opt, (uint64_t)read_i64(pf, step));
    return 0;
}

static int load_all(const struct parsed *pf, struct dt_model *m, struct dt_optim *opt, bool apply)
{
    int rc = load_model(pf, m, apply);
    if (!rc && opt)
        rc = load_optim(pf, m, opt, apply);
    return rc;
}

int dt_checkpoint_load(const char *path, struct dt_model *model, struct dt_optim *opt,
                       struct dt_checkpoint_meta *meta)
{
    struct parsed pf;
    int rc = parse_file(&pf, path);
    if (!rc)
        rc = load_all(&pf, model, opt, false);
    if (!rc && meta)
        rc = copy_metadata(&pf, meta);
    if (!rc)
        rc = load_all(&pf, model, opt, true);
    parsed_free(&pf);
    return rc;
}

int dt_checkpoint_read_meta(const char *path, struct dt_checkpoint_meta *meta)
{
    struct parsed pf;
    int rc = parse_file(&pf, path);
    if (!rc)
        rc = copy_metadata(&pf, meta);
    parsed_free(&pf);
    return rc;
}

/* ---- reading tensors one by one ---- */

struct dt_checkpoint_file {
    struct parsed pf;
};

int dt_checkpoint_open(const char *path, struct dt_checkpoint_file **out)
{
    *out = NULL;
    struct dt_checkpoint_file *f = calloc(1, sizeof *f);
    if (!f)
        return dt_fail(DT_ERUNTIME, "%s: out of memory", path);
    int rc = parse_file(&f->pf, path);
    if (rc) {
        parsed_free(&f->pf);
        free(f);
        return rc;
    }
    *out = f;
    return 0;
}

int dt_checkpoint_file_count(const struct dt_checkpoint_file *f)
{
    return f->pf.nentries;
}

void dt_checkpoint_file_tensor(const struct dt_checkpoint_file *f, int i,
                               struct dt_checkpoint_tensor *out)
{
    const struct entry *e = &f->pf.entries[i];
    memset(out, 0, sizeof *out);
    out->name = e->name;
    out->dtype = e->dtype->name;
    out->f32 = e->dtype->kind == DT_F32;
    out->i64 = e->dtype->kind == DT_I64;
    out->ndim = e->ndim;
    for (int d = 0; d < e->ndim && d < 8; d++)
        out->shape[d] = e->shape[d];
    out->data = f->pf.data + e->begin;
}

bool dt_checkpoint_file_find(const struct dt_checkpoint_file *f, const char *name,
                             struct dt_checkpoint_tensor *out)
{
    const struct entry *e = find_entry(&f->pf, name);
    if (e)
        dt_checkpoint_file_tensor(f, (int)(e - f->pf.entries), out);
    return e != NULL;
}

void dt_checkpoint_close(struct dt_checkpoint_file *f)
{
    if (!f)
        return;
    parsed_free(&f->pf);
    free(f);
}
