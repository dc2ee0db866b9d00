/* predict's inputs walked into a file list (see predict_files.h). */
#include "train/predict_files.h"

#include <ctype.h>
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "util/err.h"
#include "util/log.h"

static bool is_control(unsigned char c)
{
    return c < 0x20 || c == 0x7f; /* not iscntrl: the same bytes in every locale */
}

static bool is_image_name(const char *path)
{
    const char *dot = strrchr(path, '.');
    return dot &&
           (!strcasecmp(dot, ".png") || !strcasecmp(dot, ".jpg") || !strcasecmp(dot, ".jpeg"));
}

static int push(char ***items, size_t *n, size_t *cap, const char *s)
{
    if (*n == *cap) {
        size_t c = *cap ? 2 * *cap : 64;
        char **more = realloc(*items, c * sizeof *more);
        if (!more)
            return dt_fail(DT_ERUNTIME, "out of memory listing files");
        *items = more, *cap = c;
    }
    if (!((*items)[*n] = strdup(s)))
        return dt_fail(DT_ERUNTIME, "out of memory listing files");
    (*n)++;
    return 0;
}

static int list_add(struct dt_predict_files *l, const char *path)
{
    return push(&l->paths, &l->n, &l->cap, path);
}

/* An input that gave no file to predict (missing, a directory without images). */
static int list_bad(struct dt_predict_files *l, const char *input, const char *message)
{
    size_t n = l->nbad, cap = l->badcap;
    int rc = push(&l->bad_input, &n, &cap, input);
    if (!rc)
        rc = push(&l->bad_error, &l->nbad, &l->badcap, message);
    return rc;
}

/* A file a walk passed over for its extension: counted, and its extension remembered for the
 * summary line (".gif", or "no extension"). */
static void list_skip(struct dt_predict_files *l, const char *base)
{
    l->skipped++;
    const char *dot = strrchr(base, '.');
    const char *ext = dot && dot != base ? dot : "no extension";
    char e[16];
    snprintf(e, sizeof e, "%s", ext);
    for (char *c = e; *c; c++)
        *c = is_control((unsigned char)*c) ? '?' : (char)tolower((unsigned char)*c);
    for (int i = 0; i < l->nexts; i++)
        if (!strcmp(l->exts[i], e))
            return;
    if (l->nexts < (int)(sizeof l->exts / sizeof l->exts[0]))
        memcpy(l->exts[l->nexts++], e, sizeof e);
    else
        l->exts_more = true;
}

/* nftw has no context argument: the walk in progress. Process-wide only for its duration. */
static struct dt_predict_files *walking;

static int walk_entry(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    (void)st;
    /* Hidden files and folders are skipped, as the folder reader skips them. */
    const char *base = path + ftw->base;
    if (base[0] == '.' && ftw->level > 0)
        return type == FTW_D ? FTW_SKIP_SUBTREE : 0;
    if (type != FTW_F && type != FTW_SL)
        return 0;
    if (is_image_name(path))
        return list_add(walking, path) ? FTW_STOP : 0;
    list_skip(walking, base);
    return 0;
}

static int compare_paths(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int dt_predict_files_collect(const char *const *inputs, int n, struct dt_predict_files *l)
{
    memset(l, 0, sizeof *l);
    for (int i = 0; i < n; i++) {
        struct stat st;
        char msg[1100];
        if (stat(inputs[i], &st) != 0) {
            snprintf(msg, sizeof msg, "%s: no such file or directory", inputs[i]);
            if (list_bad(l, inputs[i], msg))
                return -DT_ERUNTIME;
            continue;
        }
        if (!S_ISDIR(st.st_mode)) {
            int rc = list_add(l, inputs[i]);
            if (rc)
                return rc;
            continue;
        }
        size_t first = l->n;
        walking = l;
        int rc = nftw(inputs[i], walk_entry, 32, FTW_PHYS | FTW_ACTIONRETVAL);
        walking = NULL;
        if (rc == FTW_STOP)
            return -DT_ERUNTIME;
        if (rc < 0)
            snprintf(msg, sizeof msg, "%s: cannot walk the directory: %s", inputs[i],
                     strerror(errno));
        else if (l->n == first)
            snprintf(msg, sizeof msg, "%s: no .png, .jpg or .jpeg image in it", inputs[i]);
        if ((rc < 0 || l->n == first) && list_bad(l, inputs[i], msg))
            return -DT_ERUNTIME;
        /* Nothing listed from it: l->paths may still be NULL, which is no qsort argument. */
        if (l->n > first)
            qsort(l->paths + first, l->n - first, sizeof *l->paths, compare_paths);
    }
    return 0;
}

void dt_predict_files_free(struct dt_predict_files *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->paths[i]);
    for (size_t i = 0; i < l->nbad; i++)
        free(l->bad_input[i]), free(l->bad_error[i]);
    free(l->paths);
    free(l->bad_input);
    free(l->bad_error);
}

/* "skipped 3 files with unsupported extensions (.gif, .txt); dtrain reads .png, .jpg, .jpeg" */
static int compare_exts(const void *a, const void *b)
{
    return strcmp(a, b);
}

void dt_predict_files_report_skipped(struct dt_predict_files *l)
{
    if (!l->skipped)
        return;
    qsort(l->exts, (size_t)l->nexts, sizeof l->exts[0], compare_exts); /* not the walk's order */
    char exts[200] = "";
    size_t len = 0;
    for (int i = 0; i < l->nexts && len < sizeof exts; i++)
        len += (size_t)snprintf(exts + len, sizeof exts - len, "%s%s", i ? ", " : "", l->exts[i]);
    dt_log_warn("skipped %zu file%s with unsupported extensions (%s%s); dtrain reads .png, .jpg, "
                ".jpeg",
                l->skipped, l->skipped == 1 ? "" : "s", exts, l->exts_more ? ", ..." : "");
}
