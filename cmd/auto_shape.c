/* --instances auto / --threads auto (see cmd/auto_shape.h). */
#include "cmd/auto_shape.h"

#include <errno.h>
#include <math.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cmd/bench/bench.h"
#include "train/probe.h"
#include "train/setup.h"
#include "dist/topology.h"
#include "util/clock.h"
#include "util/cpu.h"
#include "util/err.h"
#include "util/fileio.h"
#include "util/json.h"
#include "util/log.h"
#include "util/names.h"

#define MAX_SHAPES 64

/* ---- the candidates ---- */

static int add_shape(struct dt_probe_row *c, int n, int instances, int threads)
{
    for (int k = 0; k < n; k++)
        if (c[k].instances == instances && c[k].threads == threads)
            return n;
    if (n < MAX_SHAPES && instances >= 1 && threads >= 1)
        c[n++] = (struct dt_probe_row){.instances = instances, .threads = threads};
    return n;
}

/* threads 0 in the config is "the CPUs divided among the instances": with instances auto that
 * is a second free dimension, so both are searched. */
static int candidates(const struct dt_config *cfg, const struct dt_auto_shape_opts *o, int cpus,
                      struct dt_probe_row *c)
{
    bool free_i = o->auto_instances, free_t = o->auto_threads || cfg->dist.threads == 0;
    int n = 0;
    if (free_i && free_t) {
        for (int i = 1; i <= cpus; i++)
            if (cpus % i == 0)
                n = add_shape(c, n, i, cpus / i);
    } else if (free_i) {
        int t = cfg->dist.threads, most = cpus / t > 0 ? cpus / t : 1;
        for (int i = 1; i < most; i *= 2)
            n = add_shape(c, n, i, t);
        n = add_shape(c, n, most, t);
    } else {
        int inst = cfg->dist.instances, most = cpus / inst > 0 ? cpus / inst : 1;
        for (int t = 1; t < most; t *= 2)
            n = add_shape(c, n, inst, t);
        n = add_shape(c, n, inst, most);
    }
    return n;
}

/* ---- the cache key ---- */

/* The text of the effective config's top-level group `name` ("model = { ... };"). */
static void group_text(const char *text, const char *name, char *out, size_t size)
{
    char head[64];
    snprintf(head, sizeof head, "\n%s = {", name);
    const char *a = strstr(text, head), *b = a ? strstr(a, "\n};") : NULL;
    if (!a || !b)
        snprintf(out, size, "?");
    else
        snprintf(out, size, "%.*s", (int)(b - a), a + 1);
}

static uint64_t fnv1a(const char *s)
{
    uint64_t h = 1469598103934665603ULL;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h;
}

static void usable_cpu_list(char *out, int size)
{
    cpu_set_t set;
    int ids[CPU_SETSIZE], n = 0;
    if (sched_getaffinity(0, sizeof set, &set) == 0)
        for (int c = 0; c < CPU_SETSIZE; c++)
            if (CPU_ISSET(c, &set))
                ids[n++] = c;
    dt_cpu_list_format(ids, n, out, size);
}

/* Everything that decides which shape is fastest, and nothing that does not (epochs, lr,
 * checkpoint or log keys). The model is hashed: the key stays one readable line. */
static char *cache_key(const struct dt_config *cfg, const struct dt_auto_shape_opts *o, int cpus,
                       const char *cpu_model)
{
    size_t cap = strlen(cfg->text) + 1;
    char *model = malloc(cap);
    if (!model)
        return NULL;
    group_text(cfg->text, "model", model, cap);
    char cpuset[512];
    usable_cpu_list(cpuset, sizeof cpuset);
    const char *isa = getenv("DTRAIN_ISA");
    char *key = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&key, &len);
    if (!f) {
        free(model);
        return NULL;
    }
    fprintf(f, "dtrain %s; cpu %s; cpus %s (%d used); isa %s; ", DTRAIN_VERSION, cpu_model, cpuset,
            cpus, isa && *isa ? isa : "auto");
    fprintf(f, "model %016llx; optimizer %s; batch %d%s; ", (unsigned long long)fnv1a(model),
            dt_names_name(&dt_optim_type_names, cfg->optimizer.type), cfg->train.batch_size,
            cfg->train.batch_per_instance ? " per instance" : "");
    free(model);
    bool folder = cfg->data.format == DT_DATA_FOLDER;
    fprintf(f, "data %s %s c%d %dx%d%s%s; ", cfg->data.dataset,
            dt_names_name(&dt_data_format_names, (int)cfg->data.format), cfg->data.channels,
            cfg->data.size_h, cfg->data.size_w, folder ? " " : "", folder ? cfg->data.dir : "");
    fprintf(f, "dist %s %s%s%s pin %s [%s]; ",
            dt_names_name(&dt_backend_request_names, cfg->dist.backend),
            dt_names_name(&dt_bn_stats_names, cfg->dist.batchnorm),
            cfg->dist.split_invariant ? " split_invariant" : "",
            cfg->dist.grad_dtype == DT_GRAD_BF16 ? " grad_bf16" : "",
            dt_names_name(&dt_pin_mode_names, cfg->dist.pin), cfg->dist.cpu_list);
    bool free_t = o->auto_threads || cfg->dist.threads == 0;
    if (o->auto_instances && free_t)
        fprintf(f, "search instances x threads");
    else if (o->auto_instances)
        fprintf(f, "search instances, threads %d", cfg->dist.threads);
    else
        fprintf(f, "search threads, instances %d", cfg->dist.instances);
    fclose(f);
    return key;
}

static int cache_path(const char *key, char *out, size_t size, char *dir, size_t dsize)
{
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    if (xdg && *xdg == '/')
        snprintf(dir, dsize, "%s/dtrain", xdg);
    else if (home && *home)
        snprintf(dir, dsize, "%s/.cache/dtrain", home);
    else
        return -1; /* nowhere to cache: probe every time */
    snprintf(out, size, "%s/shape-%016llx.json", dir, (unsigned long long)fnv1a(key));
    return 0;
}

/* ---- the result as JSON (probe.json, the cache file, the `probe` event) ---- */

struct result {
    int instances, threads;
    double seconds;
    char when[32];
    int nrows;
    struct dt_probe_row rows[MAX_SHAPES];
};

static char *result_json(const struct result *r, const char *key, const char *event, bool cached,
                         const char *cache_file)
{
    struct dt_json_writer w;
    dt_jw_begin(&w, event);
    dt_jw_int(&w, "instances", r->instances);
    dt_jw_int(&w, "threads", r->threads);
    dt_jw_bool(&w, "cached", cached);
    if (cache_file)
        dt_jw_str(&w, "cache_file", cache_file);
    dt_jw_str(&w, "measured_at", r->when);
    dt_jw_num(&w, "probe_seconds", r->seconds);
    dt_jw_int(&w, "warmup_steps", AUTO_WARMUP);
    dt_jw_num(&w, "seconds_per_shape", AUTO_SECONDS);
    dt_jw_str(&w, "key", key);
    char *rows = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&rows, &len);
    if (f) {
        fputc('[', f);
        for (int i = 0; i < r->nrows; i++) {
            const struct dt_probe_row *row = &r->rows[i];
            fprintf(f, "%s{\"instances\":%d,\"threads\":%d,\"ok\":%s", i ? "," : "", row->instances,
                    row->threads, row->ok ? "true" : "false");
            if (row->ok) {
                fprintf(f, ",\"samples_per_s\":%.3f,\"s_per_step\":%.6f,\"steps\":%d",
                        row->samples_s, row->step_s, row->steps);
            } else {
                struct dt_json_writer e = {0};
                dt_json_escape_to(&e, row->error);
                fprintf(f, ",\"error\":%s", e.buf ? e.buf : "\"?\"");
                free(e.buf);
            }
            fputc('}', f);
        }
        fputc(']', f);
        fclose(f);
    }
    dt_jw_raw(&w, "rows", rows ? rows : "[]");
    free(rows);
    return dt_jw_finish(&w);
}

static bool shape_in(const struct dt_probe_row *c, int n, int instances, int threads)
{
    for (int i = 0; i < n; i++)
        if (c[i].instances == instances && c[i].threads == threads)
            return true;
    return false;
}

/* The cached result for key, when the file is there, whole, has this key and a shape that is
 * still a candidate. */
static bool cache_read(const char *path, const char *key, const struct dt_probe_row *c, int n,
                       struct result *r)
{
    char *text = NULL;
    size_t len = 0;
    if (dt_read_file_max(path, 1 << 20, &text, &len) != 0) {
        dt_clear_error();
        return false;
    }
    struct dt_json *j = dt_json_parse(text, len);
    free(text);
    if (!j)
        return false;
    const struct dt_json *k = dt_json_get(j, "key"), *i = dt_json_get(j, "instances"),
                         *t = dt_json_get(j, "threads"), *rows = dt_json_get(j, "rows"),
                         *when = dt_json_get(j, "measured_at"),
                         *secs = dt_json_get(j, "probe_seconds");
    bool ok = k && k->type == DT_JSON_STR && !strcmp(k->str, key) && i && i->type == DT_JSON_NUM &&
              t && t->type == DT_JSON_NUM && shape_in(c, n, (int)i->num, (int)t->num) && rows &&
              rows->type == DT_JSON_ARR;
    if (ok) {
        memset(r, 0, sizeof *r);
        r->instances = (int)i->num;
        r->threads = (int)t->num;
        r->seconds = secs && secs->type == DT_JSON_NUM ? secs->num : NAN;
        snprintf(r->when, sizeof r->when, "%s",
                 when && when->type == DT_JSON_STR ? when->str : "?");
        for (const struct dt_json *e = rows->child; e && r->nrows < MAX_SHAPES; e = e->next) {
            const struct dt_json *ri = dt_json_get(e, "instances"), *rt = dt_json_get(e, "threads"),
                                 *rs = dt_json_get(e, "samples_per_s"),
                                 *rn = dt_json_get(e, "steps"), *re = dt_json_get(e, "error");
            struct dt_probe_row *row = &r->rows[r->nrows++];
            row->instances = ri && ri->type == DT_JSON_NUM ? (int)ri->num : 0;
            row->threads = rt && rt->type == DT_JSON_NUM ? (int)rt->num : 0;
            row->ok = rs && rs->type == DT_JSON_NUM;
            row->samples_s = row->ok ? rs->num : 0;
            row->step_s = 0;
            row->steps = rn && rn->type == DT_JSON_NUM ? (int)rn->num : 0;
            snprintf(row->error, sizeof row->error, "%s",
                     re && re->type == DT_JSON_STR ? re->str : "");
        }
    }
    dt_json_free(j);
    return ok;
}

/* ---- the probe ---- */

/* Loads the datasets (out->data: the run takes them over, so they are read once) and measures
 * every candidate on them; r gets the rows and the fastest shape. */
static int probe(const struct dt_config *cfg, const struct dt_auto_shape_opts *o,
                 struct dt_probe_row *c, int n, struct dt_auto_shape *out, struct result *r)
{
    int rc = dt_run_load_data(cfg, &out->data);
    if (rc) { /* dt_run_load_data freed what it had read */
        memset(&out->data, 0, sizeof out->data);
        return rc;
    }
    out->loaded = true;
    const struct dt_probe_opts po = {.warmup = AUTO_WARMUP,
                                     .seconds = AUTO_SECONDS,
                                     .min_steps = AUTO_MIN_STEPS,
                                     .max_steps = AUTO_MAX_STEPS};
    memset(r, 0, sizeof *r);
    memcpy(r->rows, c, (size_t)n * sizeof *c);
    double t0 = dt_now();
    int done = 0;
    rc = dt_probe_shapes(cfg, o->job, &out->data, &po, r->rows, n, &done);
    r->seconds = dt_now() - t0;
    r->nrows = done;
    if (rc)
        return rc;
    int best = -1;
    for (int i = 0; i < done; i++)
        if (r->rows[i].ok && (best < 0 || r->rows[i].samples_s > r->rows[best].samples_s))
            best = i;
    if (best < 0)
        return dt_fail(DT_ERUNTIME,
                       "--instances/--threads auto: every probe run failed; %d x %d: %s",
                       r->rows[0].instances, r->rows[0].threads, r->rows[0].error);
    r->instances = r->rows[best].instances;
    r->threads = r->rows[best].threads;
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(r->when, sizeof r->when, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return 0;
}

static void print_table(const struct result *r, const char *how)
{
    dt_log_info("auto shape: %d x %d (%s)", r->instances, r->threads, how);
    for (int i = 0; i < r->nrows; i++) {
        const struct dt_probe_row *row = &r->rows[i];
        bool chosen = row->instances == r->instances && row->threads == r->threads;
        if (row->ok)
            dt_log_info("  %3d x %-3d %10.1f samples/s%s", row->instances, row->threads,
                        row->samples_s, chosen ? "  <- chosen" : "");
        else
            dt_log_info("  %3d x %-3d     failed: %s", row->instances, row->threads, row->error);
    }
}

int dt_auto_shape_choose(const struct dt_config *cfg, const struct dt_auto_shape_opts *o,
                         struct dt_auto_shape *out)
{
    memset(out, 0, sizeof *out);
    int cpus = o->cores > 0 ? o->cores : dt_cpu_usable();
    struct dt_probe_row c[MAX_SHAPES];
    int n = candidates(cfg, o, cpus, c);
    struct dt_bench_machine m;
    dt_bench_machine_read(&m);
    char *key = cache_key(cfg, o, cpus, m.cpu);
    if (!key)
        return dt_fail(DT_ERUNTIME, "out of memory");
    char path[1200], dir[1100];
    bool can_cache = cache_path(key, path, sizeof path, dir, sizeof dir) == 0;
    struct result *r = calloc(1, sizeof *r);
    if (!r) {
        free(key);
        return dt_fail(DT_ERUNTIME, "out of memory");
    }
    int rc = 0;
    char how[1400];
    if (n == 1) { /* nothing to compare */
        r->instances = c[0].instances;
        r->threads = c[0].threads;
        snprintf(r->when, sizeof r->when, "-");
        snprintf(how, sizeof how, "the only shape of %d CPU%s", cpus, cpus == 1 ? "" : "s");
        can_cache = false;
    } else if (can_cache && !o->again && cache_read(path, key, c, n, r)) {
        out->cached = true;
        snprintf(how, sizeof how, "probed %s, cached in %s; --probe-again measures again", r->when,
                 path);
    } else {
        if (!o->quiet)
            dt_log_info("auto shape: probing %d shape%s of %d CPU%s: %d warm-up steps, then about "
                        "%g s of timed steps each",
                        n, n == 1 ? "" : "s", cpus, cpus == 1 ? "" : "s", AUTO_WARMUP,
                        AUTO_SECONDS);
        if ((rc = probe(cfg, o, c, n, out, r)))
            goto out;
        snprintf(how, sizeof how, "probe took %.2f s", r->seconds);
        char *text = can_cache ? result_json(r, key, "probe", false, NULL) : NULL;
        /* a cache that cannot be written costs the next run a probe, nothing more */
        if (text && (dt_mkdir_p(dir) || dt_write_file_atomic(path, text, strlen(text)))) {
            dt_log_warn("auto shape: cannot cache the probe: %s", dt_last_error());
            dt_clear_error();
        } else if (text) {
            size_t len = strlen(how);
            snprintf(how + len, sizeof how - len, ", cached in %s", path);
        }
        free(text);
    }
    out->instances = r->instances;
    out->threads = r->threads;
    if (!o->quiet)
        print_table(r, how);
    /* probe.json and the `probe` event: the run emits it through its history (train/loop.c) */
    out->json = result_json(r, key, "probe", out->cached, can_cache ? path : NULL);
out:
    free(r);
    free(key);
    return rc;
}
