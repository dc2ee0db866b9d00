/* data.mean / data.std = "auto" (see norm_stats.h). */
#include "train/norm_stats.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/stats.h"
#include "util/err.h"
#include "util/log.h"

bool dt_run_stats_auto(const struct dt_config *cfg)
{
    return cfg->data.nmean == DT_CONFIG_AUTO || cfg->data.nstd == DT_CONFIG_AUTO;
}

char *dt_run_stats_json(const float *v, int n)
{
    size_t cap = 2 + (size_t)n * 20;
    char *s = malloc(cap);
    if (!s)
        return NULL;
    size_t o = (size_t)snprintf(s, cap, "[");
    for (int i = 0; i < n; i++)
        o += (size_t)snprintf(s + o, cap - o, "%s%.9g", i ? ", " : "", (double)v[i]);
    snprintf(s + o, cap - o, "]");
    return s;
}

static void log_stats(const char *key, const float *v, int n, size_t images)
{
    char *json = dt_run_stats_json(v, n);
    if (json)
        dt_log_info("%s = auto: %s (over %zu training images)", key, json, images);
    free(json);
}

int dt_run_stats_resolve(const struct dt_config *cfg, const struct dt_dataset *train,
                         struct dt_config **resolved)
{
    *resolved = NULL;
    if (!dt_run_stats_auto(cfg))
        return 0;
    int c = train->c;
    if (c < 1 || c > DT_MAX_CHANNELS || train->n == 0)
        return dt_fail(DT_EDATA, "%s: data.mean/std = auto: %d channels, %zu training images",
                       cfg->path, c, train->n);
    float mean[DT_MAX_CHANNELS], std[DT_MAX_CHANNELS];
    dt_dataset_channel_stats(train, mean, std);
    struct dt_config *out = malloc(sizeof *out);
    if (!out)
        return dt_fail(DT_ERUNTIME, "out of memory");
    *out = *cfg;
    if (cfg->data.nmean == DT_CONFIG_AUTO) {
        memcpy(out->data.mean, mean, sizeof mean);
        out->data.nmean = c;
        log_stats("data.mean", mean, c, train->n);
    }
    if (cfg->data.nstd == DT_CONFIG_AUTO) {
        for (int ch = 0; ch < c; ch++)
            if (!(std[ch] > 0)) {
                free(out);
                return dt_fail(DT_EDATA,
                               "%s: data.std = auto: channel %d of the %zu training images is "
                               "constant (std 0); give data.std",
                               cfg->path, ch, train->n);
            }
        memcpy(out->data.std, std, sizeof std);
        out->data.nstd = c;
        log_stats("data.std", std, c, train->n);
    }
    *resolved = out;
    return 0;
}

int dt_run_stats_to_meta(const struct dt_config *cfg, struct dt_checkpoint_meta *meta)
{
    const char *keys[2] = {"data_mean", "data_std"};
    const float *vals[2] = {cfg->data.mean, cfg->data.std};
    int counts[2] = {cfg->data.nmean, cfg->data.nstd};
    for (int i = 0; i < 2; i++) {
        if (counts[i] <= 0)
            continue;
        char *json = dt_run_stats_json(vals[i], counts[i]);
        int rc = json ? dt_checkpoint_meta_set(meta, keys[i], json)
                      : dt_fail(DT_ERUNTIME, "out of memory");
        free(json);
        if (rc)
            return rc;
    }
    return 0;
}

/* "[a, b, c]" of 1..DT_MAX_CHANNELS finite numbers. */
static int parse_list(const char *s, float *out, int *n)
{
    const char *p = s;
    *n = 0;
    while (*p == ' ')
        p++;
    if (*p++ != '[')
        return -1;
    for (;;) {
        char *end;
        double v = strtod(p, &end);
        if (end == p || !isfinite(v) || *n >= DT_MAX_CHANNELS)
            return -1;
        out[(*n)++] = (float)v;
        p = end;
        while (*p == ' ')
            p++;
        if (*p == ']')
            return p[1] == '\0' ? 0 : -1;
        if (*p++ != ',')
            return -1;
    }
}

static bool all_positive(const float *v, int n)
{
    for (int i = 0; i < n; i++)
        if (!(v[i] > 0))
            return false;
    return true;
}

int dt_run_stats_from_checkpoint(struct dt_config *cfg, const char *checkpoint)
{
    if (!dt_run_stats_auto(cfg))
        return 0;
    struct dt_checkpoint_meta meta = {0};
    int rc = dt_checkpoint_read_meta(checkpoint, &meta);
    const char *keys[2] = {"data_mean", "data_std"};
    float *vals[2] = {cfg->data.mean, cfg->data.std};
    int *counts[2] = {&cfg->data.nmean, &cfg->data.nstd};
    for (int i = 0; i < 2 && !rc; i++) {
        if (*counts[i] != DT_CONFIG_AUTO)
            continue;
        const char *v = dt_checkpoint_meta_get(&meta, keys[i]);
        float parsed[DT_MAX_CHANNELS];
        int n = 0;
        if (!v)
            rc = dt_fail(DT_EDATA, "%s: %s = auto but the checkpoint stores no %s", checkpoint,
                         i ? "data.std" : "data.mean", keys[i]);
        else if (parse_list(v, parsed, &n) || (i == 1 && !all_positive(parsed, n)))
            rc = dt_fail(DT_EDATA, "%s: metadata %s is \"%.60s\", not a list of 1 to %d numbers",
                         checkpoint, keys[i], v, DT_MAX_CHANNELS);
        else {
            memcpy(vals[i], parsed, sizeof parsed);
            *counts[i] = n;
        }
    }
    dt_checkpoint_meta_free(&meta);
    return rc;
}
