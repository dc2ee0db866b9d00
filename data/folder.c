/* Image-folder walking and parallel decoding (see folder.h). */
#include "data/folder.h"

#include <dirent.h>
#include <errno.h>
#include <stdatomic.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "data/image.h"
#include "util/cpu.h"
#include "util/err.h"
#include "util/printable.h"

#define MAX_IMAGES ((size_t)1 << 31)

struct names {
    char **v;
    size_t n, cap;
};

static void names_free(struct names *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i]);
    free(l->v);
    memset(l, 0, sizeof *l);
}

static int names_push(struct names *l, const char *s)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 64;
        char **v = realloc(l->v, cap * sizeof *v);
        if (!v)
            return -1;
        l->v = v;
        l->cap = cap;
    }
    if (!(l->v[l->n] = strdup(s)))
        return -1;
    l->n++;
    return 0;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int is_image_name(const char *name)
{
    const char *dot = strrchr(name, '.');
    return dot && (strcasecmp(dot, ".png") == 0 || strcasecmp(dot, ".jpg") == 0 ||
                   strcasecmp(dot, ".jpeg") == 0);
}

/* Messages name files through this: a name on disk may hold control characters. */
#define SHOWN(s, buf) dt_printable((s), (buf), sizeof(buf))

/* Sorted, non-hidden entries of `path`: sub-directories (want_dirs), or image names. */
static int list_dir(const char *path, int want_dirs, struct names *out)
{
    char shown[DT_PRINTABLE_MAX];
    DIR *d = opendir(path);
    if (!d)
        return dt_fail(DT_EDATA, "%s: cannot open directory: %s", SHOWN(path, shown),
                       strerror(errno));
    struct dirent *e;
    int rc = 0;
    while (!rc && (errno = 0, e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        if (want_dirs) {
            char sub[4352];
            struct stat st;
            if ((size_t)snprintf(sub, sizeof sub, "%s/%s", path, e->d_name) >= sizeof sub)
                continue;
            /* stat follows symlinks; a loop fails with ELOOP instead of recursing. Files at
             * this level are ignored, as ImageFolder does. */
            if (stat(sub, &st) != 0) {
                if (errno == ELOOP)
                    rc = dt_fail(DT_EDATA, "%s: symlink loop", SHOWN(sub, shown));
                continue;
            }
            if (!S_ISDIR(st.st_mode))
                continue;
        } else if (!is_image_name(e->d_name)) {
            continue;
        }
        if (names_push(out, e->d_name))
            rc = dt_fail(DT_ERUNTIME, "%s: out of memory listing it", SHOWN(path, shown));
    }
    if (!rc && errno)
        rc =
            dt_fail(DT_EDATA, "%s: cannot read directory: %s", SHOWN(path, shown), strerror(errno));
    closedir(d);
    if (!rc && out->n)
        qsort(out->v, out->n, sizeof *out->v, cmp_str);
    return rc;
}

/* One image into its slot. The thread-local error message is what the caller reports. */
static int decode_one(const char *path, const struct dt_folder_opts *o, int *h, int *w,
                      uint8_t *slot)
{
    uint8_t *buf;
    size_t len;
    int rc = dt_image_read_file(path, &buf, &len);
    if (rc)
        return rc;
    struct dt_image img;
    rc = dt_image_decode(buf, len, path, o->channels, o->max_pixels, &img);
    free(buf);
    if (rc)
        return rc;
    if (*h == 0) { /* no target size: report the image's own so the caller can check it */
        *h = img.h;
        *w = img.w;
        dt_image_free(&img);
        return 1;
    }
    if (!o->h && (img.h != *h || img.w != *w)) {
        char shown[DT_PRINTABLE_MAX];
        rc = dt_fail(DT_EDATA,
                     "%s: image is %dx%d but the first one is %dx%d; set data.size = [H, W] "
                     "to resize them all",
                     SHOWN(path, shown), img.h, img.w, *h, *w);
    } else {
        rc = dt_image_fit(&img, *h, *w, slot);
    }
    dt_image_free(&img);
    return rc;
}

struct walk {
    struct names paths; /* "dir/split/class/file" */
    uint8_t *labels;
};

static int walk_split(struct walk *wk, const char *root, char *const *classes, int nclasses)
{
    char path[4352], shown[DT_PRINTABLE_MAX];
    for (int c = 0; c < nclasses; c++) {
        struct names files = {0};
        if ((size_t)snprintf(path, sizeof path, "%s/%s", root, classes[c]) >= sizeof path)
            return dt_fail(DT_EDATA, "%s: path too long", SHOWN(path, shown));
        int rc = list_dir(path, 0, &files);
        if (!rc && files.n == 0)
            rc = dt_fail(DT_EDATA, "%s: class folder has no .png, .jpg or .jpeg images",
                         SHOWN(path, shown));
        size_t before = wk->paths.n;
        for (size_t i = 0; !rc && i < files.n; i++) {
            char file[8704];
            if ((size_t)snprintf(file, sizeof file, "%s/%s", path, files.v[i]) >= sizeof file)
                rc = dt_fail(DT_EDATA, "%s: path too long", SHOWN(file, shown));
            else if (names_push(&wk->paths, file) || wk->paths.n > MAX_IMAGES)
                rc = dt_fail(DT_ERUNTIME, "%s: too many images or out of memory",
                             SHOWN(root, shown));
        }
        names_free(&files);
        if (rc)
            return rc;
        uint8_t *l = realloc(wk->labels, wk->paths.n);
        if (!l)
            return dt_fail(DT_ERUNTIME, "%s: out of memory", SHOWN(root, shown));
        wk->labels = l;
        memset(l + before, c, wk->paths.n - before);
    }
    return 0;
}

static int read_classes(const char *root, struct names *cls)
{
    char shown[DT_PRINTABLE_MAX];
    int rc = list_dir(root, 1, cls);
    if (!rc && cls->n == 0)
        rc = dt_fail(DT_EDATA, "%s: no class folders (expected %s/<class>/<image>.png)",
                     SHOWN(root, shown), shown);
    if (!rc && cls->n > DT_MAX_CLASSES)
        rc = dt_fail(DT_EDATA, "%s: %zu class folders, at most %d are supported",
                     SHOWN(root, shown), cls->n, DT_MAX_CLASSES);
    return rc;
}

/* The on-disk names, byte for byte: names shown with '?' for control characters could
 * agree while the folders differ. */
static int same_classes(const char *root, const struct names *got, char *const *want, int n)
{
    char shown[DT_PRINTABLE_MAX], got_shown[DT_PRINTABLE_MAX], want_shown[DT_PRINTABLE_MAX];
    for (size_t i = 0; i < got->n && i < (size_t)n; i++)
        if (strcmp(got->v[i], want[i]) != 0)
            return dt_fail(DT_EDATA, "%s: class folder '%s' where the training set has '%s'",
                           SHOWN(root, shown), SHOWN(got->v[i], got_shown),
                           SHOWN(want[i], want_shown));
    if (got->n != (size_t)n)
        return dt_fail(DT_EDATA, "%s: %zu class folders, the training set has %d",
                       SHOWN(root, shown), got->n, n);
    return 0;
}

/* Decoding runs in the parent, before the ranks are forked, so it uses plain threads that
 * are joined before it returns: an OpenMP team would leave GNU OpenMP's thread pool behind,
 * and a pool does not survive fork (the ranks' first parallel region then waits for ever;
 * dist/launcher.c refuses to fork while such threads are alive). */
struct decode_job {
    struct dt_dataset *d;
    const struct walk *wk;
    const struct dt_folder_opts *o;
    uint8_t *bad;
    size_t sample;
    atomic_size_t next, done;
};

#define DECODE_CHUNK 32

/* Decodes the next chunk of paths; returns how many, 0 when none are left. */
static size_t decode_chunk(struct decode_job *j)
{
    size_t n = j->wk->paths.n, at = atomic_fetch_add(&j->next, DECODE_CHUNK);
    if (at >= n)
        return 0;
    size_t end = at + DECODE_CHUNK < n ? at + DECODE_CHUNK : n;
    for (size_t i = at; i < end; i++) {
        int h = j->d->h, w = j->d->w;
        j->bad[i] = decode_one(j->wk->paths.v[i], j->o, &h, &w, j->d->x + i * j->sample) != 0;
    }
    atomic_fetch_add(&j->done, end - at);
    return end - at;
}

static void *decode_worker(void *arg)
{
    while (decode_chunk(arg))
        ;
    return NULL;
}

/* Decodes every path into d->x on o->threads threads (the calling one included, which also
 * reports progress); marks failures in bad[]. */
static void decode_all(struct dt_dataset *d, const struct walk *wk, const char *split,
                       const struct dt_folder_opts *o, uint8_t *bad)
{
    size_t n = wk->paths.n;
    struct decode_job j = {
        .d = d, .wk = wk, .o = o, .bad = bad, .sample = dt_dataset_sample_bytes(d)};
    atomic_init(&j.next, 0);
    atomic_init(&j.done, 0);
    int threads = o->threads > 0 ? o->threads : dt_cpu_usable();
    if ((size_t)threads > n / DECODE_CHUNK + 1)
        threads = (int)(n / DECODE_CHUNK + 1);
    pthread_t *tid = threads > 1 ? calloc((size_t)threads - 1, sizeof *tid) : NULL;
    int started = 0;
    /* A helper that cannot be started leaves its share to the others (work is dynamic). */
    while (tid && started < threads - 1 &&
           pthread_create(&tid[started], NULL, decode_worker, &j) == 0)
        started++;
    while (decode_chunk(&j))
        if (o->progress)
            o->progress(o->progress_ctx, split, atomic_load(&j.done), n);
    for (int t = 0; t < started; t++)
        pthread_join(tid[t], NULL);
    free(tid);
    if (o->progress)
        o->progress(o->progress_ctx, split, n, n);
}

/* Drops the bad samples (skip_bad), keeping order. */
static void compact(struct dt_dataset *d, const uint8_t *bad)
{
    size_t sample = dt_dataset_sample_bytes(d), k = 0;
    for (size_t i = 0; i < d->n; i++) {
        if (bad[i]) {
            free(d->files[i]);
            continue;
        }
        if (k != i) {
            memmove(d->x + k * sample, d->x + i * sample, sample);
            d->y[k] = d->y[i];
            d->files[k] = d->files[i];
        }
        k++;
    }
    d->skipped = d->n - k;
    d->n = k;
}

static int fill_split(struct dt_dataset *d, const char *root, const char *split, struct walk *wk,
                      const struct dt_folder_opts *o)
{
    char shown[DT_PRINTABLE_MAX];
    size_t n = wk->paths.n;
    d->h = o->h;
    d->w = o->w;
    if (!d->h) { /* the first decodable image sets the size for all */
        for (size_t i = 0; i < n && !d->h; i++) {
            int h = 0, w = 0;
            if (decode_one(wk->paths.v[i], o, &h, &w, NULL) == 1) {
                d->h = h;
                d->w = w;
            } else if (!o->skip_bad) {
                return -DT_EDATA;
            }
        }
        if (!d->h)
            return dt_fail(DT_EDATA, "%s: no image could be decoded", SHOWN(root, shown));
    }
    d->c = o->channels;
    d->n = n;
    d->y = wk->labels;
    wk->labels = NULL;
    d->x = malloc(n * dt_dataset_sample_bytes(d));
    d->files = calloc(n + 1, sizeof *d->files);
    /* Each sample's name for reports: its path below the data directory ("test/cat/1.png"). */
    size_t below_dir = strlen(root) - strlen(split);
    bool named = d->files != NULL;
    for (size_t i = 0; named && i < n; i++)
        named = (d->files[i] = strdup(wk->paths.v[i] + below_dir)) != NULL;
    uint8_t *bad = calloc(n, 1);
    if (!d->x || !named || !bad) {
        free(bad);
        return dt_fail(DT_ERUNTIME, "%s: out of memory for %zu images", SHOWN(root, shown), n);
    }
    decode_all(d, wk, split, o, bad);
    size_t first = n;
    for (size_t i = 0; i < n && first == n; i++)
        if (bad[i])
            first = i;
    int rc = 0;
    if (first < n) {
        /* Decode it again here: the message was recorded in a worker thread's buffer. */
        int h = d->h, w = d->w;
        uint8_t *scratch = malloc(dt_dataset_sample_bytes(d));
        rc = scratch ? decode_one(wk->paths.v[first], o, &h, &w, scratch)
                     : dt_fail(DT_ERUNTIME, "out of memory");
        free(scratch);
        if (!rc)
            rc = dt_fail(DT_EDATA, "%s: could not be decoded (transient read error?)",
                         SHOWN(wk->paths.v[first], shown));
        if (o->skip_bad) {
            snprintf(d->first_bad, sizeof d->first_bad, "%s", dt_last_error());
            dt_clear_error();
            rc = 0;
            compact(d, bad);
            if (d->n == 0)
                rc = dt_fail(DT_EDATA, "%s: every image is bad (first: %s)", SHOWN(root, shown),
                             d->first_bad);
        }
    }
    free(bad);
    return rc;
}

/* One split, its class names as they are on disk (dt_folder_load compares the other splits'
 * folders with them before they are made printable). */
static int load_split(struct dt_dataset *d, const char *dir, const char *split,
                      char *const *classes, int nclasses, const struct dt_folder_opts *o)
{
    memset(d, 0, sizeof *d);
    if (o->channels != 1 && o->channels != 3)
        return dt_fail(DT_EUSAGE, "data.channels: %d, expected 1 or 3", o->channels);
    if ((o->h == 0) != (o->w == 0) || o->h < 0 || o->w < 0)
        return dt_fail(DT_EUSAGE, "data.size: %dx%d is not a size", o->h, o->w);
    char root[4200], shown[DT_PRINTABLE_MAX];
    if ((size_t)snprintf(root, sizeof root, "%s/%s", dir, split) >= sizeof root)
        return dt_fail(DT_EUSAGE, "data.dir: '%s' is too long", SHOWN(dir, shown));
    struct names cls = {0};
    struct walk wk = {0};
    int rc = read_classes(root, &cls);
    if (!rc && classes)
        rc = same_classes(root, &cls, classes, nclasses);
    if (!rc)
        rc = walk_split(&wk, root, cls.v, (int)cls.n);
    if (!rc)
        rc = fill_split(d, root, split, &wk, o);
    if (!rc) {
        d->classes = (int)cls.n;
        d->names = cls.v; /* the dataset owns them now */
        cls.v = NULL;
        cls.n = 0;
        snprintf(d->source, sizeof d->source, "%s/%s/<class>/*", dir, split);
    } else {
        dt_dataset_free(d);
    }
    names_free(&cls);
    names_free(&wk.paths);
    free(wk.labels);
    return rc;
}

/* Class names are printed and logged: control characters become '?' (the files were opened
 * by their real paths already). */
static void printable_names(struct dt_dataset *d)
{
    for (int i = 0; d->names && i < d->classes; i++)
        dt_class_name_sanitize(d->names[i]);
}

int dt_folder_load_split(struct dt_dataset *d, const char *dir, const char *split,
                         char *const *classes, int nclasses, const struct dt_folder_opts *o)
{
    int rc = load_split(d, dir, split, classes, nclasses, o);
    if (!rc)
        printable_names(d);
    return rc;
}

/* Without data.size each split takes its first image's size; they must agree. */
static int same_size(const char *dir, const char *split, const struct dt_dataset *d,
                     const struct dt_dataset *train)
{
    if (d->h == train->h && d->w == train->w)
        return 0;
    char shown[DT_PRINTABLE_MAX];
    return dt_fail(DT_EDATA,
                   "%s/%s: images are %dx%d but the training images are %dx%d; set data.size "
                   "= [H, W] to resize them all",
                   SHOWN(dir, shown), split, d->h, d->w, train->h, train->w);
}

int dt_folder_load(struct dt_data *out, struct dt_dataset *val, const char *dir,
                   const struct dt_folder_opts *o)
{
    memset(out, 0, sizeof *out);
    if (val)
        memset(val, 0, sizeof *val);
    int rc = load_split(&out->train, dir, "train", NULL, 0, o);
    if (!rc)
        rc = load_split(&out->test, dir, "test", out->train.names, out->train.classes, o);
    if (!rc)
        rc = same_size(dir, "test", &out->test, &out->train);
    char vdir[4200];
    struct stat st;
    snprintf(vdir, sizeof vdir, "%s/val", dir);
    if (!rc && val && stat(vdir, &st) == 0 && S_ISDIR(st.st_mode)) {
        rc = load_split(val, dir, "val", out->train.names, out->train.classes, o);
        if (!rc)
            rc = same_size(dir, "val", val, &out->train);
    }
    if (rc) {
        dt_data_free(out);
        if (val)
            dt_dataset_free(val);
        return rc;
    }
    printable_names(&out->train);
    printable_names(&out->test);
    if (val)
        printable_names(val);
    return 0;
}
