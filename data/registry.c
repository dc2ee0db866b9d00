/* The dataset registry: a built-in table of the datasets dtrain knows, plus optional entries
 * from a registry file (JSON) that add datasets or override built-in ones by name.
 *
 * Checksums are the published ones (the dataset authors' pages, torchvision's tables); where a
 * distribution repackages an archive (Debian recompresses Fashion-MNIST) the SHA-256 of the
 * decompressed content identifies the data instead. Sizes are the published archive sizes and
 * serve for display and, where no checksum is known, as the only identity check.
 *
 * Loaded entries live in one process-wide merged table (`view`): the registry is truly
 * process-wide (one per command run), so a global is the honest representation. All strings a
 * load allocates are recorded in `owned` and freed together by dt_registry_unload(). */
#include "data/registry.h"

#include <ctype.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "util/err.h"
#include "util/fileio.h"
#include "util/json.h"

#define IDX_FILE(name, size, md5)                                                                  \
    {                                                                                              \
        name, size, md5, NULL, NULL                                                                \
    }

static const char *const fashion_names[] = {"T-shirt/top", "Trouser",   "Pullover", "Dress",
                                            "Coat",        "Sandal",    "Shirt",    "Sneaker",
                                            "Bag",         "Ankle boot"};
static const char *const digit_names[] = {"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"};
static const char *const kmnist_names[] = {"o",  "ki", "su", "tsu", "na",
                                           "ha", "ma", "ya", "re",  "wo"};

static const struct dt_reg_dataset builtin[] = {
    {
        .name = "mnist",
        .format = DT_DATA_IDX,
        .description = "MNIST handwritten digits, 60k/10k 28x28 grey",
        .classes = 10,
        .class_names = digit_names,
        .mirrors = {"https://ossci-datasets.s3.amazonaws.com/mnist/",
                    "http://yann.lecun.com/exdb/mnist/"},
        .nfiles = 4,
        .files = {IDX_FILE("train-images-idx3-ubyte.gz", 9912422,
                           "f68b3c2dcbeaaa9fbdd348bbdeb94873"),
                  IDX_FILE("train-labels-idx1-ubyte.gz", 28881, "d53e105ee54ea40749a09fcbcd1e9432"),
                  IDX_FILE("t10k-images-idx3-ubyte.gz", 1648877,
                           "9fb629c4189551a2d022fa330f9573f3"),
                  IDX_FILE("t10k-labels-idx1-ubyte.gz", 4542, "ec29112dd5afa0611ce80d1b7f02629c")},
    },
    {
        .name = "fashion-mnist",
        .format = DT_DATA_IDX,
        .description = "Zalando Fashion-MNIST, 60k/10k 28x28 grey",
        .classes = 10,
        .class_names = fashion_names,
        .mirrors = {"http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/"},
        .nfiles = 4,
        .files = {{"train-images-idx3-ubyte.gz", 26421880, "8d4fb7e6c68d591d4c3dfef9ec88bf0d", NULL,
                   "c59f468a2f672dc815687fe0f83887768d799fd8a3f3276145d20f83aa44d888"},
                  {"train-labels-idx1-ubyte.gz", 29515, "25c81989df183df01b3e8a0aad5dffbe", NULL,
                   "bad3541b69d912435c50bb6ba87bec294ff4f6a2e1246121d8633921760443d9"},
                  {"t10k-images-idx3-ubyte.gz", 4422102, "bef4ecab320f06d8554ea6380940ec79", NULL,
                   "5b4141f0afbad91edebe8549f8fcffe087ea10ca49f1dbef5c9a5cd8815ce37b"},
                  {"t10k-labels-idx1-ubyte.gz", 5148, "bb300cfdad3c16e7a12a480ee83cd310", NULL,
                   "0402a96d92fd2663957122ceb108a494c5af83dab82d92729df917d7dec38c34"}},
        .system_dir = "/usr/share/datasets/fashion-mnist",
    },
    {
        /* MD5s as torchvision publishes them for these files; sizes from their downloads. */
        .name = "kmnist",
        .format = DT_DATA_IDX,
        .description = "Kuzushiji-MNIST, 60k/10k 28x28 grey",
        .classes = 10,
        .class_names = kmnist_names,
        .mirrors = {"http://codh.rois.ac.jp/kmnist/dataset/kmnist/"},
        .nfiles = 4,
        .files = {IDX_FILE("train-images-idx3-ubyte.gz", 18165135,
                           "bdb82020997e1d708af4cf47b453dcf7"),
                  IDX_FILE("train-labels-idx1-ubyte.gz", 29497, "e144d726b3acfaa3e44228e80efcd344"),
                  IDX_FILE("t10k-images-idx3-ubyte.gz", 3041136,
                           "5c965bf0a639b31b8f53240b1b52f4d7"),
                  IDX_FILE("t10k-labels-idx1-ubyte.gz", 5120, "7320c461ea6c1c855c0b718fb2a4b134")},
    },
    {
        .name = "cifar10",
        .format = DT_DATA_CIFAR10,
        .description = "CIFAR-10 binary version, 50k/10k 32x32 RGB",
        .classes = 10,
        .mirrors = {"https://www.cs.toronto.edu/~kriz/"},
        .nfiles = 1,
        .files = {{"cifar-10-binary.tar.gz", 170052171, "c32a1d4ab5d03f1284b67883e8d87530",
                   "c4a38c50a1bc5f3a1c5537f2155ab9d68f9f25eb1ed8d9ddda3db29a59bca1dd", NULL}},
    },
    {
        /* MD5 as published on https://www.cs.toronto.edu/~kriz/cifar.html. */
        .name = "cifar100",
        .format = DT_DATA_CIFAR100,
        .description = "CIFAR-100 binary version, 50k/10k 32x32 RGB, 100 fine / 20 coarse",
        .classes = 100,
        .mirrors = {"https://www.cs.toronto.edu/~kriz/"},
        .nfiles = 1,
        .files = {{"cifar-100-binary.tar.gz", 168513733, "03b5dce01913d631647c71ecec9e9cb8", NULL,
                   NULL}},
    },
};
#define NBUILTIN (sizeof builtin / sizeof builtin[0])

/* The merged view after dt_registry_load(); NULL means "built-in only". */
static struct dt_reg_dataset *view;
static size_t view_count;
static char **owned;
static size_t owned_count, owned_cap;
static char names_buf[1024];

const struct dt_reg_dataset *dt_registry_all(size_t *count)
{
    if (view) {
        *count = view_count;
        return view;
    }
    *count = NBUILTIN;
    return builtin;
}

const struct dt_reg_dataset *dt_registry_find(const char *name)
{
    size_t n;
    const struct dt_reg_dataset *all = dt_registry_all(&n);
    for (size_t i = 0; i < n; i++)
        if (strcmp(all[i].name, name) == 0)
            return &all[i];
    return NULL;
}

const char *dt_registry_names(void)
{
    size_t n, len = 0;
    const struct dt_reg_dataset *all = dt_registry_all(&n);
    names_buf[0] = 0;
    for (size_t i = 0; i < n && len < sizeof names_buf; i++)
        len += (size_t)snprintf(names_buf + len, sizeof names_buf - len, "%s%s", i ? ", " : "",
                                all[i].name);
    return names_buf;
}

int dt_reg_file_has_checksum(const struct dt_reg_file *f)
{
    return f->md5 || f->sha256 || f->content_sha256;
}

void dt_registry_unload(void)
{
    for (size_t i = 0; i < owned_count; i++)
        free(owned[i]);
    free(owned);
    free(view);
    owned = NULL;
    owned_count = owned_cap = 0;
    view = NULL;
    view_count = 0;
}

/* ---- loading a registry file ---- */

struct loader {
    const char *path;
    int failed;
};

static const char *keep_string(const char *s)
{
    if (owned_count == owned_cap) {
        size_t cap = owned_cap ? owned_cap * 2 : 32;
        char **bigger = realloc(owned, cap * sizeof *bigger);
        if (!bigger)
            return NULL;
        owned = bigger;
        owned_cap = cap;
    }
    char *copy = strdup(s);
    if (copy)
        owned[owned_count++] = copy;
    return copy;
}

static int bad(const char *path, const char *what, const char *where)
{
    return dt_fail(DT_EUSAGE, "%s: %s%s%s", path, where ? where : "", where ? ": " : "", what);
}

static int get_string(const char *path, const struct dt_json *obj, const char *key,
                      const char *where, int required, const char **out)
{
    const struct dt_json *v = dt_json_get(obj, key);
    if (!v) {
        if (!required)
            return 0;
        char msg[128];
        snprintf(msg, sizeof msg, "missing key \"%s\"", key);
        return bad(path, msg, where);
    }
    if (v->type != DT_JSON_STR) {
        char msg[128];
        snprintf(msg, sizeof msg, "\"%s\" must be a string", key);
        return bad(path, msg, where);
    }
    if (!(*out = keep_string(v->str)))
        return dt_fail(DT_ERUNTIME, "%s: out of memory", path);
    return 0;
}

static int is_hex(const char *s, size_t len)
{
    if (strlen(s) != len)
        return 0;
    for (size_t i = 0; i < len; i++)
        if (!isxdigit((unsigned char)s[i]))
            return 0;
    return 1;
}

static int get_hex(const char *path, const struct dt_json *obj, const char *key, size_t len,
                   const char *where, const char **out)
{
    int rc = get_string(path, obj, key, where, 0, out);
    if (rc || !*out || is_hex(*out, len))
        return rc;
    char msg[160];
    snprintf(msg, sizeof msg, "\"%s\" must be %zu hex digits, found \"%.80s\"", key, len, *out);
    return bad(path, msg, where);
}

static int check_keys(const char *path, const struct dt_json *obj, const char *const *allowed,
                      const char *where)
{
    for (const struct dt_json *m = obj->child; m; m = m->next) {
        int known = 0;
        for (const char *const *k = allowed; *k; k++)
            known |= strcmp(*k, m->key) == 0;
        if (!known) {
            char msg[160];
            snprintf(msg, sizeof msg, "unknown key \"%.100s\"", m->key);
            return bad(path, msg, where);
        }
    }
    return 0;
}

static int parse_file(const char *path, const struct dt_json *fj, const char *where,
                      struct dt_reg_file *f)
{
    static const char *const keys[] = {"name", "size", "md5", "sha256", "content_sha256", NULL};
    if (fj->type != DT_JSON_OBJ)
        return bad(path, "each entry of \"files\" must be an object", where);
    int rc;
    if ((rc = check_keys(path, fj, keys, where)) ||
        (rc = get_string(path, fj, "name", where, 1, &f->name)))
        return rc;
    if (strchr(f->name, '/') || !f->name[0] || !strcmp(f->name, ".") || !strcmp(f->name, ".."))
        return bad(path, "file \"name\" must be a plain file name", where);
    const struct dt_json *size = dt_json_get(fj, "size");
    if (size && (size->type != DT_JSON_NUM || size->num < 0 || size->num > 1e15))
        return bad(path, "\"size\" must be a non-negative number of bytes", where);
    f->size = size ? (size_t)size->num : 0;
    if ((rc = get_hex(path, fj, "md5", 32, where, &f->md5)) ||
        (rc = get_hex(path, fj, "sha256", 64, where, &f->sha256)))
        return rc;
    return get_hex(path, fj, "content_sha256", 64, where, &f->content_sha256);
}

static int parse_files(const char *path, const struct dt_json *files, const char *where,
                       struct dt_reg_dataset *d)
{
    if (!files || files->type != DT_JSON_ARR || files->count == 0 ||
        files->count > DT_REG_MAX_FILES) {
        char msg[128];
        snprintf(msg, sizeof msg, "\"files\" must be an array of 1 to %d entries",
                 DT_REG_MAX_FILES);
        return bad(path, msg, where);
    }
    for (const struct dt_json *fj = files->child; fj; fj = fj->next) {
        int rc = parse_file(path, fj, where, &d->files[d->nfiles]);
        if (rc)
            return rc;
        d->nfiles++;
    }
    return 0;
}

static int parse_mirrors(const char *path, const struct dt_json *mirrors, const char *where,
                         struct dt_reg_dataset *d)
{
    if (!mirrors)
        return 0;
    if (mirrors->type != DT_JSON_ARR || mirrors->count > DT_REG_MAX_MIRRORS) {
        char msg[128];
        snprintf(msg, sizeof msg, "\"mirrors\" must be an array of at most %d URLs",
                 DT_REG_MAX_MIRRORS);
        return bad(path, msg, where);
    }
    int i = 0;
    for (const struct dt_json *m = mirrors->child; m; m = m->next, i++) {
        if (m->type != DT_JSON_STR)
            return bad(path, "each mirror must be a string", where);
        if (!(d->mirrors[i] = keep_string(m->str)))
            return dt_fail(DT_ERUNTIME, "%s: out of memory", path);
    }
    return 0;
}

static int parse_classes(const char *path, const struct dt_json *dj, const char *where,
                         struct dt_reg_dataset *d)
{
    const struct dt_json *classes = dt_json_get(dj, "classes");
    d->classes = d->format == DT_DATA_CIFAR100 ? 100 : 10;
    if (!classes)
        return 0;
    if (classes->type != DT_JSON_NUM || classes->num < 2 || classes->num > 256 ||
        classes->num != (int)classes->num)
        return bad(path, "\"classes\" must be an integer from 2 to 256", where);
    d->classes = (int)classes->num;
    return 0;
}

static int parse_dataset(const char *path, const struct dt_json *dj, int index,
                         struct dt_reg_dataset *d)
{
    static const char *const keys[] = {"name",    "format", "description", "classes",
                                       "mirrors", "files",  "system_dir",  NULL};
    char where[160];
    snprintf(where, sizeof where, "datasets[%d]", index);
    if (dj->type != DT_JSON_OBJ)
        return bad(path, "must be an object", where);
    memset(d, 0, sizeof *d);
    int rc;
    if ((rc = check_keys(path, dj, keys, where)) ||
        (rc = get_string(path, dj, "name", where, 1, &d->name)))
        return rc;
    snprintf(where, sizeof where, "dataset \"%.100s\"", d->name);
    /* The name becomes a directory under the data root: nothing that climbs out of it. */
    bool plain = d->name[0] && d->name[0] != '.' && strlen(d->name) <= 64;
    for (const char *c = d->name; *c && plain; c++)
        plain = isalnum((unsigned char)*c) || *c == '-' || *c == '_' || *c == '.';
    if (!plain)
        return bad(path,
                   "\"name\" must be 1-64 letters, digits, '-', '_' or '.', not starting "
                   "with '.'",
                   where);
    const char *format;
    if ((rc = get_string(path, dj, "format", where, 1, &format)))
        return rc;
    int f = dt_names_find(&dt_data_format_names, format);
    if (f != DT_DATA_IDX && f != DT_DATA_CIFAR10 && f != DT_DATA_CIFAR100)
        return bad(path, "\"format\" must be \"idx\", \"cifar10\" or \"cifar100\"", where);
    d->format = (enum dt_data_format)f;
    if ((rc = get_string(path, dj, "description", where, 0, &d->description)) ||
        (rc = get_string(path, dj, "system_dir", where, 0, &d->system_dir)) ||
        (rc = parse_classes(path, dj, where, d)) ||
        (rc = parse_mirrors(path, dt_json_get(dj, "mirrors"), where, d)))
        return rc;
    if (!d->description)
        d->description = d->name;
    return parse_files(path, dt_json_get(dj, "files"), where, d);
}

/* Adds or replaces `d` in the view (which starts as a copy of the built-in table). */
static int merge(const struct dt_reg_dataset *d)
{
    for (size_t i = 0; i < view_count; i++)
        if (strcmp(view[i].name, d->name) == 0) {
            view[i] = *d;
            return 0;
        }
    struct dt_reg_dataset *bigger = realloc(view, (view_count + 1) * sizeof *view);
    if (!bigger)
        return dt_fail(DT_ERUNTIME, "out of memory loading the registry");
    view = bigger;
    view[view_count++] = *d;
    return 0;
}

static int load_parsed(const char *path, const struct dt_json *root)
{
    const struct dt_json *list = root->type == DT_JSON_OBJ ? dt_json_get(root, "datasets") : NULL;
    if (!list || list->type != DT_JSON_ARR)
        return bad(path, "expected an object with a \"datasets\" array", NULL);
    static const char *const keys[] = {"datasets", NULL};
    int rc = check_keys(path, root, keys, NULL);
    view = malloc(sizeof builtin);
    if (!view)
        return dt_fail(DT_ERUNTIME, "out of memory loading the registry");
    memcpy(view, builtin, sizeof builtin);
    view_count = NBUILTIN;
    int i = 0;
    for (const struct dt_json *dj = list->child; dj && !rc; dj = dj->next, i++) {
        struct dt_reg_dataset d;
        rc = parse_dataset(path, dj, i, &d);
        if (!rc)
            rc = merge(&d);
    }
    return rc;
}

int dt_registry_load(const char *path)
{
    dt_registry_unload();
    char *text;
    size_t len;
    int rc = dt_read_file_max(path, DT_REGISTRY_FILE_MAX, &text, &len);
    if (rc)
        return dt_fail_context(-DT_EUSAGE, "registry file");
    struct dt_json *root = dt_json_parse(text, len);
    free(text);
    if (!root)
        return dt_fail_context(-DT_EUSAGE, "%s", path);
    rc = load_parsed(path, root);
    dt_json_free(root);
    if (rc)
        dt_registry_unload();
    return rc;
}

const char *dt_data_root(void)
{
    const char *env = getenv("DTRAIN_DATA");
    return env && *env ? env : "data";
}
