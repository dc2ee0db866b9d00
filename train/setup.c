#include "train/setup.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/folder.h"
#include "data/load.h"
#include "data/registry.h"
#include "data/select.h"
#include "data/split.h"
#include "dist/topology.h"
#include "nn/checkpoint.h"
#include "nn/loss.h"
#include "nn/optim.h"
#include "nn/schedule.h"
#include "train/ckpt_writer.h"
#include "train/early_stop.h"
#include "train/norm_stats.h"
#include "util/clock.h"
#include "util/err.h"
#include "util/fileio.h"
#include "util/json.h"
#include "util/log.h"

/* A registry dataset that is not there: say how to get it, and how to point elsewhere. */
static int missing_data(const struct dt_config *cfg, int rc)
{
    const struct dt_reg_dataset *reg = dt_registry_find(cfg->data.dataset);
    if (!reg || dt_exit_code(rc) != DT_EDATA || !strstr(dt_last_error(), "not found"))
        return rc;
    char msg[600], dir[1100];
    snprintf(msg, sizeof msg, "%s", dt_last_error());
    snprintf(dir, sizeof dir, "%s/%s", dt_data_root(), reg->name);
    bool default_dir = strcmp(dir, cfg->data.dir) == 0;
    return dt_fail(DT_EDATA,
                   "%s; `dtrain fetch %s%s%s` gets it, or point data.dir (eval: --data "
                   "DIR) at a copy",
                   msg, reg->name, default_dir ? "" : " --dir ", default_dir ? "" : cfg->data.dir);
}

/* A live "decoding images" line on a terminal, redrawn at most every 1/10 s. */
static void show_decode_progress(void *ctx, const char *split, size_t done, size_t total)
{
    double *last = ctx, now = dt_now();
    if (done < total && now - *last < 0.1)
        return;
    *last = now;
    fprintf(stderr, "\rdtrain: decoding %s images: %zu/%zu%s", split, done, total,
            done == total ? "\n" : "");
}

static struct dt_folder_opts folder_opts(const struct dt_config *cfg, double *last)
{
    return (struct dt_folder_opts){
        .channels = cfg->data.channels,
        .h = cfg->data.size_h,
        .w = cfg->data.size_w,
        .skip_bad = cfg->data.skip_bad,
        .max_pixels = (uint64_t)cfg->data.max_pixels,
        .progress = dt_log_is_tty() ? show_decode_progress : NULL,
        .progress_ctx = last,
    };
}

static int load_folder(const struct dt_config *cfg, struct dt_data *data)
{
    double last = 0;
    struct dt_folder_opts o = folder_opts(cfg, &last);
    int rc = dt_folder_load(data, &data->val, cfg->data.dir, &o);
    if (rc)
        return rc;
    if (cfg->data.classes && data->train.classes != cfg->data.classes) {
        rc = dt_fail(DT_EDATA, "%s/train: %d class folders, data.classes says %d", cfg->data.dir,
                     data->train.classes, cfg->data.classes);
        dt_data_free(data);
        return rc;
    }
    const struct dt_dataset *splits[3] = {&data->train, &data->test, &data->val};
    for (int s = 0; s < 3; s++)
        if (splits[s]->skipped)
            dt_log_warn("skipped %zu bad image%s in %s (data.skip_bad); first: %s",
                        splits[s]->skipped, splits[s]->skipped == 1 ? "" : "s", splits[s]->source,
                        splits[s]->first_bad);
    return 0;
}

/* data.val_fraction: the held-out part replaces the training set's share of itself. */
static int hold_out_val(const struct dt_config *cfg, struct dt_data *data)
{
    if (cfg->data.val_fraction <= 0)
        return 0;
    if (data->val.n)
        return dt_fail(DT_EUSAGE,
                       "data.val_fraction: %s/val already is the validation split; remove "
                       "one of them",
                       cfg->data.dir);
    struct dt_dataset train, val;
    int rc = dt_dataset_split(&data->train, cfg->data.val_fraction, (uint64_t)cfg->train.seed,
                              &train, &val);
    if (rc)
        return rc;
    snprintf(val.source, sizeof val.source, "%.400s (%g held out)", data->train.source,
             (double)cfg->data.val_fraction);
    dt_dataset_free(&data->train);
    data->train = train;
    data->val = val;
    return 0;
}

/* A registry dataset's class names on a split that has none: copied, since the registry's
 * table is static and dt_dataset_free frees what the dataset holds. */
static int registry_names(const struct dt_config *cfg, struct dt_dataset *d)
{
    const struct dt_reg_dataset *reg = dt_registry_find(cfg->data.dataset);
    if (!reg || !reg->class_names || d->names || reg->classes != d->classes || d->n == 0)
        return 0;
    char **names = calloc((size_t)reg->classes, sizeof *names);
    if (!names)
        return dt_fail(DT_ERUNTIME, "out of memory");
    for (int i = 0; i < reg->classes; i++)
        names[i] = strdup(reg->class_names[i]);
    d->names = names;
    return 0;
}

static bool is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

void dt_run_locate_data(struct dt_config *cfg, const char *checkpoint)
{
    if (is_dir(cfg->data.dir))
        return;
    char found[sizeof cfg->data.dir] = "";
    struct dt_checkpoint_meta meta = {0};
    if (dt_checkpoint_read_meta(checkpoint, &meta) == 0) {
        const char *abs = dt_checkpoint_meta_get(&meta, "data_dir");
        if (abs && is_dir(abs))
            snprintf(found, sizeof found, "%s", abs);
    }
    dt_checkpoint_meta_free(&meta);
    dt_clear_error();
    const struct dt_reg_dataset *reg = dt_registry_find(cfg->data.dataset);
    if (!found[0] && reg) {
        snprintf(found, sizeof found, "%s/%s", dt_data_root(), reg->name);
        if (!is_dir(found))
            found[0] = '\0';
    }
    if (found[0])
        memcpy(cfg->data.dir, found, sizeof found);
}

/* data.select_classes on one split (a split with no samples and no classes, an absent
 * validation set, stays as it is). */
static int select_classes(const struct dt_config *cfg, struct dt_dataset *d)
{
    const struct dt_class_select *sel = &cfg->data.select_classes;
    if (sel->n == 0 || (d->n == 0 && d->classes == 0))
        return 0;
    char what[1100];
    snprintf(what, sizeof what, "%s: data.select_classes", cfg->path);
    return dt_dataset_select_classes(d, sel->classes, sel->n, what);
}

int dt_run_load_test(const struct dt_config *cfg, struct dt_dataset *test)
{
    double last = 0;
    struct dt_folder_opts o = folder_opts(cfg, &last);
    int rc = cfg->data.format == DT_DATA_FOLDER
                 ? dt_folder_load_split(test, cfg->data.dir, "test", NULL, 0, &o)
                 : dt_data_load_test(test, cfg->data.format, cfg->data.dir, cfg->data.classes,
                                     cfg->data.coarse_labels);
    if (rc)
        return missing_data(cfg, rc);
    if (!(rc = registry_names(cfg, test)))
        rc = select_classes(cfg, test);
    return rc;
}

int dt_run_load_data(const struct dt_config *cfg, struct dt_data *data)
{
    int rc = cfg->data.format == DT_DATA_FOLDER
                 ? load_folder(cfg, data)
                 : dt_data_load(data, cfg->data.format, cfg->data.dir, cfg->data.classes,
                                cfg->data.coarse_labels);
    if (!rc && (rc = hold_out_val(cfg, data)))
        dt_data_free(data);
    if (rc)
        return missing_data(cfg, rc);
    struct dt_dataset *splits[3] = {&data->train, &data->test, &data->val};
    for (int s = 0; s < 3 && !rc; s++)
        if (!(rc = registry_names(cfg, splits[s])))
            rc = select_classes(cfg, splits[s]);
    if (rc)
        dt_data_free(data);
    return rc;
}

int dt_run_load_split(const struct dt_config *cfg, enum dt_split split, struct dt_dataset *out)
{
    if (split == DT_SPLIT_TEST)
        return dt_run_load_test(cfg, out);
    struct dt_data data;
    memset(out, 0, sizeof *out);
    int rc = dt_run_load_data(cfg, &data);
    if (rc)
        return rc;
    struct dt_dataset *want = split == DT_SPLIT_TRAIN ? &data.train : &data.val;
    if (want->n == 0)
        rc = dt_fail(DT_EDATA,
                     "%s: no val split (an image folder's val/, or data.val_fraction held out "
                     "of train)",
                     cfg->data.dir);
    else
        *out = *want, memset(want, 0, sizeof *want);
    dt_data_free(&data);
    return rc;
}

struct dt_batch_opts dt_run_batch_opts(const struct dt_config *cfg)
{
    return (struct dt_batch_opts){
        .mean = cfg->data.mean,
        .nmean = cfg->data.nmean,
        .std = cfg->data.std,
        .nstd = cfg->data.nstd,
        .hflip = cfg->data.hflip,
        .crop_padding = cfg->data.crop_padding,
        .augment = &cfg->data.augment,
        .seed = (uint64_t)cfg->train.seed,
    };
}

void dt_run_log_precision(const struct dt_model *m)
{
    if (m->precision != DT_PRECISION_BF16)
        return;
    for (int i = 0; i < m->nlayers; i++) {
        struct dt_layer_summary s;
        dt_model_layer_summary(m, i, &s);
        if (s.precision[0])
            dt_log_debug("bf16: layer %d %s: %s", i, s.type, s.precision);
    }
}

int dt_run_build_model(const struct dt_config *cfg, struct dt_shape in, int max_batch, int classes,
                       struct dt_model **out)
{
    int rc = dt_run_build_model_in(cfg, in, max_batch, classes, NULL, 0, NULL, 0, out);
    if (rc == 0)
        dt_run_log_precision(*out);
    return rc;
}

int dt_run_build_model_in(const struct dt_config *cfg, struct dt_shape in, int max_batch,
                          int classes, float *params, size_t capacity, void *copies,
                          size_t copy_capacity, struct dt_model **out)
{
    struct dt_model_options opt;
    int rc = dt_model_default_options(&opt);
    if (rc)
        return rc;
    opt.precision = cfg->train.precision;
    opt.bf16_winograd = cfg->train.bf16_winograd;
    opt.copy_storage = copies;
    opt.copy_capacity = copy_capacity;
    rc = dt_model_build_in(out, cfg->model.layers, cfg->model.nlayers, in, max_batch,
                           cfg->loss.type, (uint64_t)cfg->train.seed, params, capacity, &opt);
    if (rc)
        return dt_fail_context(rc, "%s: model", cfg->path);
    (*out)->label_smoothing = cfg->loss.label_smoothing;
    if (classes > 0 && (*out)->classes < classes)
        return dt_fail(DT_EUSAGE,
                       "%s: model: the last layer has %d outputs but the dataset has %d classes",
                       cfg->path, (*out)->classes, classes);
    return 0;
}

/* ---- memory ---- */

/* The first number after `key` in the file, in its units; -1 when absent. */
static double read_number(const char *path, const char *key)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    char line[256];
    double v = -1;
    size_t klen = strlen(key);
    while (fgets(line, sizeof line, f))
        if (strncmp(line, key, klen) == 0) {
            char *end;
            double x = strtod(line + klen, &end);
            if (end != line + klen)
                v = x;
            break;
        }
    fclose(f);
    return v;
}

/* Room left under a cgroup's memory limit, from `dir` up to `top`: the tightest of the limits
 * on the way (a limit may sit on a parent). -1 when there is none. */
static double cgroup_room(const char *dir, const char *top, const char *limit_file,
                          const char *usage_file)
{
    char path[PATH_MAX + 64], d[PATH_MAX];
    double best = -1;
    snprintf(d, sizeof d, "%s", dir);
    for (;;) {
        snprintf(path, sizeof path, "%s/%s", d, limit_file);
        double limit = read_number(path, ""); /* "max" reads as absent */
        snprintf(path, sizeof path, "%s/%s", d, usage_file);
        double used = read_number(path, "");
        /* v1 writes "no limit" as a number near 2^63 */
        if (limit > 0 && limit < 1e18) {
            double room = limit - (used > 0 ? used : 0);
            room = room > 0 ? room : 0;
            best = best < 0 || room < best ? room : best;
        }
        char *slash = strrchr(d, '/');
        if (strlen(d) <= strlen(top) || !slash)
            break;
        *slash = 0;
    }
    return best;
}

bool dt_cgroup_memory_path(const char *line, bool v2, char *out, size_t size)
{
    const char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
    if (!c2)
        return false;
    bool match = false;
    if (v2) {
        match = c1 == line + 1 && line[0] == '0' && c2 == c1 + 1; /* "0::PATH" */
    } else { /* "ID:CONTROLLER,CONTROLLER:PATH" with "memory" among the controllers */
        for (const char *t = c1 + 1; t < c2 && !match;) {
            size_t n = strcspn(t, ",:");
            match = n == 6 && strncmp(t, "memory", 6) == 0;
            t += n + 1;
        }
    }
    if (!match)
        return false;
    const char *path = c2 + 1;
    int len = (int)strcspn(path, "\n");
    snprintf(out, size, "%.*s", len == 1 && path[0] == '/' ? 0 : len, path);
    return true;
}

/* This process's cgroup path for the v2 hierarchy or v1's memory controller. */
static bool cgroup_path(bool v2, char *out, size_t size)
{
    FILE *f = fopen("/proc/self/cgroup", "r");
    if (!f)
        return false;
    char line[1024];
    bool found = false;
    while (!found && fgets(line, sizeof line, f))
        found = dt_cgroup_memory_path(line, v2, out, size);
    fclose(f);
    return found;
}

double dt_run_memory_available(char *from, size_t size)
{
    double avail = read_number("/proc/meminfo", "MemAvailable:");
    avail = avail >= 0 ? avail * 1024 : 0; /* kB */
    char src[96] = "MemAvailable in /proc/meminfo";
    char rel[512], dir[1100];
    double room = -1;
    if (cgroup_path(true, rel, sizeof rel)) {
        snprintf(dir, sizeof dir, "/sys/fs/cgroup%s", rel);
        room = cgroup_room(dir, "/sys/fs/cgroup", "memory.max", "memory.current");
        if (room >= 0 && (avail <= 0 || room < avail))
            snprintf(src, sizeof src, "room under the cgroup's memory.max");
    }
    /* a hybrid hierarchy lists "0::" too but keeps the memory controller in v1 */
    if (room < 0 && cgroup_path(false, rel, sizeof rel)) {
        snprintf(dir, sizeof dir, "/sys/fs/cgroup/memory%s", rel);
        room = cgroup_room(dir, "/sys/fs/cgroup/memory", "memory.limit_in_bytes",
                           "memory.usage_in_bytes");
        if (room >= 0 && (avail <= 0 || room < avail))
            snprintf(src, sizeof src, "room under the cgroup's memory.limit_in_bytes");
    }
    if (room >= 0 && (avail <= 0 || room < avail))
        avail = room;
    if (from)
        snprintf(from, size, "%s", avail > 0 ? src : "unknown");
    return avail;
}

int dt_run_memory(const struct dt_config *cfg, const struct dt_job_plan *plan,
                  const struct dt_dataset *train, struct dt_run_memory *out)
{
    memset(out, 0, sizeof *out);
    struct dt_job_steps steps;
    int rc = dt_job_plan_steps(plan, cfg, train->n, &steps);
    if (rc)
        return rc;
    /* as the ranks build it (train/loop.c): for the larger of the two batches */
    int batch = steps.rank_batch, eval = cfg->train.eval_batch_size;
    out->batch = eval > batch ? eval : batch;
    out->ranks = plan->job.local_n > 0 ? plan->job.local_n : 1;
    struct dt_shape in = {train->c, train->h, train->w};
    struct dt_model_options opt;
    rc = dt_model_default_options(&opt);
    if (rc)
        return rc;
    opt.precision = cfg->train.precision; /* as dt_run_build_model_in builds it */
    opt.bf16_winograd = cfg->train.bf16_winograd;
    rc = dt_model_estimate_with(cfg->model.layers, cfg->model.nlayers, in, out->batch,
                                cfg->loss.type, &opt, &out->model);
    if (rc)
        return dt_fail_context(rc, "%s: model", cfg->path);
    struct dt_optim_config oc;
    dt_run_optim_config(cfg, &oc);
    out->parameters = out->model.params / sizeof(float);
    out->optimizer = out->model.params * (double)dt_optim_state_count(&oc);
    double sample = (double)train->c * train->h * train->w;
    out->batches = 2.0 * out->batch * (sample * sizeof(float) + 1);
    double rank = dt_model_memory_total(&out->model) + out->batches;
    if (dt_job_plan_shares_memory(plan)) /* one shared copy of the weights, state and copies */
        out->total = out->ranks * (rank - out->model.params - out->model.copies) +
                     out->model.params + out->model.copies + out->optimizer;
    else
        out->total = out->ranks * (rank + out->optimizer);
    out->available = dt_run_memory_available(out->available_from, sizeof out->available_from);
    return 0;
}

int dt_run_check_memory(const struct dt_config *cfg, const struct dt_run_memory *mem)
{
    if (mem->available <= 0 || mem->total <= mem->available)
        return 0;
    const double gib = 1 << 30;
    return dt_fail(DT_EUSAGE,
                   "%s: model needs %.1f GiB at batch %d per rank x %d rank%s (%.0f parameters; "
                   "weights, gradients and optimizer state %.1f GiB, activations %.1f GiB, layer "
                   "scratch %.1f GiB, input batches %.1f GiB): more than the %.1f GiB available "
                   "(%s); lower train.batch_size or dist.instances",
                   cfg->path, mem->total / gib, mem->batch, mem->ranks, mem->ranks == 1 ? "" : "s",
                   mem->parameters,
                   (mem->model.params + mem->model.grads + mem->optimizer) * mem->ranks / gib,
                   mem->model.activations * mem->ranks / gib, mem->model.scratch * mem->ranks / gib,
                   mem->batches * mem->ranks / gib, mem->available / gib, mem->available_from);
}

void dt_run_optim_config(const struct dt_config *cfg, struct dt_optim_config *oc)
{
    dt_optim_config_defaults(oc, cfg->optimizer.type);
    oc->lr = cfg->optimizer.lr;
    oc->weight_decay = cfg->optimizer.weight_decay;
    oc->momentum = cfg->optimizer.momentum;
    oc->dampening = cfg->optimizer.dampening;
    oc->nesterov = cfg->optimizer.nesterov;
    oc->beta1 = cfg->optimizer.beta1;
    oc->beta2 = cfg->optimizer.beta2;
    oc->amsgrad = cfg->optimizer.amsgrad;
    oc->eps = cfg->optimizer.eps;
    oc->rho = cfg->optimizer.rho;
}

int dt_run_make_optimizer(struct dt_optim **out, const struct dt_config *cfg, size_t nparams,
                          float *storage)
{
    struct dt_optim_config oc;
    dt_run_optim_config(cfg, &oc);
    return dt_optim_create_in(out, &oc, nparams, storage);
}

int dt_run_schedule(const struct dt_config *cfg, long long steps_per_epoch, struct dt_schedule *s)
{
    memset(s, 0, sizeof *s);
    s->type = cfg->optimizer.schedule.type;
    s->lr = cfg->optimizer.lr;
    s->step_size = cfg->optimizer.schedule.step_size;
    s->gamma = cfg->optimizer.schedule.gamma;
    s->min_lr = cfg->optimizer.schedule.min_lr;
    s->warmup_steps = cfg->optimizer.schedule.warmup_steps;
    s->pct_start = cfg->optimizer.schedule.pct_start;
    s->div_factor = cfg->optimizer.schedule.div_factor;
    s->final_div_factor = cfg->optimizer.schedule.final_div_factor;
    s->warmup_steps += (long)cfg->optimizer.schedule.warmup_epochs * (long)steps_per_epoch;
    int rc = dt_schedule_validate(s);
    return rc ? dt_fail_context(rc, "%s: optimizer.schedule", cfg->path) : 0;
}

float dt_run_lr(const struct dt_schedule *s, long long step, long long steps_per_epoch,
                long long total_steps)
{
    long epoch = steps_per_epoch > 0 ? (long)(step / steps_per_epoch) : 0;
    return (float)dt_schedule_lr(s, (long)step, epoch, (long)total_steps);
}

char *dt_run_class_names_json(const struct dt_dataset *d)
{
    char *out = NULL, buf[32];
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    if (!f)
        return NULL;
    for (int i = 0; i < d->classes; i++) {
        struct dt_json_writer s;
        memset(&s, 0, sizeof s);
        dt_json_escape_to(&s, dt_dataset_class_name(d, i, buf, sizeof buf));
        fprintf(f, "%s%s", i ? "," : "[", s.buf ? s.buf : "null");
        free(s.buf);
    }
    fputs(d->classes ? "]" : "[]", f);
    fclose(f);
    return out;
}

/* The running sums of a checkpoint's epoch, in dt_run_resume's order. */
static const char *const epoch_sum_keys[3] = {"epoch_loss_sum", "epoch_correct", "epoch_samples"};

static int save_one(const char *path, const struct dt_config *cfg, const struct dt_model *m,
                    const struct dt_optim *o, const struct dt_run_resume *r,
                    struct dt_ckpt_writer *w)
{
    struct dt_checkpoint_meta meta = {0};
    int rc = dt_checkpoint_meta_set(&meta, "config", cfg->text ? cfg->text : "");
    rc = rc ? rc : dt_checkpoint_meta_set(&meta, "config_path", cfg->path);
    rc = rc ? rc : dt_checkpoint_meta_setf(&meta, "step", "%lld", r->step);
    rc = rc ? rc : dt_checkpoint_meta_setf(&meta, "epoch", "%lld", r->epoch);
    rc = rc ? rc : dt_checkpoint_meta_setf(&meta, "seed", "%lld", cfg->train.seed);
    rc = rc ? rc : dt_checkpoint_meta_setf(&meta, "best_accuracy", "%.17g", r->best_accuracy);
    if (r->has_best) {
        rc = rc ? rc
                : dt_checkpoint_meta_set(&meta, "best_on",
                                         r->best_on_val ? "val_accuracy" : "train_loss");
        rc = rc ? rc : dt_checkpoint_meta_setf(&meta, "best_score", "%.17g", r->best_score);
        rc = rc ? rc : dt_checkpoint_meta_setf(&meta, "best_epoch", "%lld", r->best_epoch);
        rc = rc ? rc : dt_checkpoint_meta_setf(&meta, "best_step", "%lld", r->best_step);
    }
    if (!rc && r->early_stop)
        rc = dt_early_stop_save(r->early_stop, &meta);
    for (int i = 0; i < 3 && r->has_epoch_sums; i++)
        rc = rc ? rc : dt_checkpoint_meta_setf(&meta, epoch_sum_keys[i], "%.17g", r->epoch_sums[i]);
    rc = rc ? rc : dt_checkpoint_meta_setf(&meta, "test_accuracy", "%.17g", r->test_accuracy);
    rc = rc ? rc : dt_checkpoint_meta_setf(&meta, "test_loss", "%.17g", r->test_loss);
    rc = rc ? rc : dt_checkpoint_meta_setf(&meta, "instances", "%d", cfg->dist.instances);
    /* What `predict` needs to use the model without the training data. */
    rc = rc ? rc
            : dt_checkpoint_meta_setf(&meta, "input", "%dx%dx%d", m->input.c, m->input.h,
                                      m->input.w);
    if (!rc && r->class_names)
        rc = dt_checkpoint_meta_set(&meta, "class_names", r->class_names);
    rc = rc ? rc : dt_run_stats_to_meta(cfg, &meta); /* data.mean/std = "auto" in eval */
    /* Where the data was, absolute, so eval finds it from any directory. */
    char abs[PATH_MAX];
    if (!rc && realpath(cfg->data.dir, abs))
        rc = dt_checkpoint_meta_set(&meta, "data_dir", abs);
    /* The optimizer is only read; the checkpoint API takes it non-const for its state
     * accessor. */
    unsigned char *bytes = NULL;
    size_t len = 0;
    if (!rc)
        rc = dt_checkpoint_encode(path, m, (struct dt_optim *)o, &meta, &bytes, &len);
    dt_checkpoint_meta_free(&meta);
    return rc ? rc : dt_ckpt_writer_submit(w, path, bytes, len); /* takes bytes */
}

int dt_run_save_checkpoints(const struct dt_config *cfg, const char *dir, const struct dt_model *m,
                            const struct dt_optim *o, const struct dt_run_resume *meta, bool last,
                            bool best, struct dt_ckpt_writer *w)
{
    int rc = dt_mkdir_p(dir);
    if (rc)
        return rc;
    char path[1200];
    if (last) {
        snprintf(path, sizeof path, "%s/last.safetensors", dir);
        if ((rc = save_one(path, cfg, m, o, meta, w)))
            return rc;
    }
    if (best) {
        snprintf(path, sizeof path, "%s/best.safetensors", dir);
        if ((rc = save_one(path, cfg, m, o, meta, w)))
            return rc;
    }
    return 0;
}

static double meta_number(const struct dt_checkpoint_meta *meta, const char *key)
{
    const char *v = dt_checkpoint_meta_get(meta, key);
    return v ? strtod(v, NULL) : 0.0;
}

/* step and epoch: whole numbers a run can have reached, or the checkpoint is refused (a
 * crafted "1e300" must not become an undefined conversion). */
static int meta_count(const char *path, const struct dt_checkpoint_meta *meta, const char *key,
                      long long *out)
{
    const char *v = dt_checkpoint_meta_get(meta, key);
    char *end = NULL;
    errno = 0;
    long long n = v ? strtoll(v, &end, 10) : 0;
    if (v && (errno || end == v || *end || n < 0 || n > 1000000000000000LL))
        return dt_fail(DT_EDATA, "%s: metadata %s is \"%.40s\", not a count from 0 to 1e15", path,
                       key, v);
    *out = n;
    return 0;
}

int dt_run_load_checkpoint(const char *path, struct dt_model *m, struct dt_optim *o,
                           struct dt_run_resume *r)
{
    struct dt_checkpoint_meta meta = {0};
    int rc = dt_checkpoint_load(path, m, o, &meta);
    if (!rc) {
        rc = meta_count(path, &meta, "step", &r->step);
        if (rc == 0)
            rc = meta_count(path, &meta, "epoch", &r->epoch);
        /* Every training step is one optimizer step: a file where they differ (edited, or
         * put together from two runs) would resume a trajectory that never existed. */
        if (rc == 0 && o && dt_optim_steps(o) != (uint64_t)r->step)
            rc = dt_fail(DT_EDATA,
                         "%s: metadata step %lld but the optimizer has taken %llu steps "
                         "(tensor optimizer.step): not a checkpoint a run wrote; cannot resume "
                         "from it",
                         path, r->step, (unsigned long long)dt_optim_steps(o));
        r->best_accuracy = meta_number(&meta, "best_accuracy");
        r->test_accuracy = meta_number(&meta, "test_accuracy");
        r->test_loss = meta_number(&meta, "test_loss");
        /* Absent (an older checkpoint) or not a finite number: the next epoch scored is best. */
        const char *on = dt_checkpoint_meta_get(&meta, "best_on");
        r->best_score = meta_number(&meta, "best_score");
        r->has_best = on && dt_checkpoint_meta_get(&meta, "best_score") && isfinite(r->best_score);
        r->best_on_val = on && !strcmp(on, "val_accuracy");
        if (r->early_stop)
            dt_early_stop_load(r->early_stop, &meta);
        long long pos[2] = {0, 0};
        for (int i = 0; i < 2 && rc == 0; i++)
            if (dt_checkpoint_meta_get(&meta, i ? "best_step" : "best_epoch"))
                rc = meta_count(path, &meta, i ? "best_step" : "best_epoch", &pos[i]);
        r->best_epoch = pos[0];
        r->best_step = pos[1];
        r->has_epoch_sums = true;
        for (int i = 0; i < 3; i++) {
            r->epoch_sums[i] = meta_number(&meta, epoch_sum_keys[i]);
            r->has_epoch_sums &= dt_checkpoint_meta_get(&meta, epoch_sum_keys[i]) != NULL &&
                                 isfinite(r->epoch_sums[i]) && r->epoch_sums[i] >= 0;
        }
    }
    dt_checkpoint_meta_free(&meta);
    return rc;
}

int dt_run_check_resume(const char *path)
{
    struct dt_checkpoint_meta meta = {0};
    int rc = dt_checkpoint_read_meta(path, &meta);
    long long step = 0, optim_step = 0;
    if (rc == 0)
        rc = meta_count(path, &meta, "step", &step);
    if (rc == 0 && dt_checkpoint_meta_get(&meta, "optimizer_step"))
        rc = meta_count(path, &meta, "optimizer_step", &optim_step);
    else if (rc == 0)
        optim_step = step; /* the rank's load names the missing optimizer state */
    if (rc == 0 && step != optim_step)
        rc = dt_fail(DT_EDATA,
                     "%s: metadata step %lld but optimizer_step %lld: not a checkpoint a run "
                     "wrote; cannot resume from it",
                     path, step, optim_step);
    dt_checkpoint_meta_free(&meta);
    return rc;
}

int dt_run_checkpoint_config(const char *path, char **text)
{
    struct dt_checkpoint_meta meta = {0};
    int rc = dt_checkpoint_read_meta(path, &meta);
    if (!rc) {
        const char *cfg = dt_checkpoint_meta_get(&meta, "config");
        if (!cfg || !*cfg)
            rc = dt_fail(DT_EDATA, "%s: checkpoint has no stored config; pass --config", path);
        else if (!(*text = strdup(cfg)))
            rc = dt_fail(DT_ERUNTIME, "out of memory");
    }
    dt_checkpoint_meta_free(&meta);
    return rc;
}

int dt_run_config_for_checkpoint(struct dt_config *cfg, const char *checkpoint,
                                 const char *config_file, const char *const *overrides, int n)
{
    if (config_file) {
        int rc = dt_config_load(cfg, config_file, overrides, n);
        return rc ? rc : dt_run_stats_from_checkpoint(cfg, checkpoint);
    }
    char *text = NULL;
    int rc = dt_run_checkpoint_config(checkpoint, &text);
    if (rc)
        return rc;
    /* A checkpoint is data: its config may not make libconfig read other files. */
    for (const char *line = text; line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
        while (*line == ' ' || *line == '\t')
            line++;
        if (!strncmp(line, "@include", 8)) {
            free(text);
            return dt_fail(DT_EDATA,
                           "%s: the stored config has an @include; a checkpoint's "
                           "config must be self-contained (pass --config)",
                           checkpoint);
        }
    }
    char name[1100];
    snprintf(name, sizeof name, "%s (stored config)", checkpoint);
    /* An oversized stored config is a damaged checkpoint (data), not a usage error. */
    rc = dt_config_check_size(name, text, DT_EDATA);
    if (!rc)
        rc = dt_config_load_string(cfg, name, text, overrides, n);
    free(text);
    return rc ? rc : dt_run_stats_from_checkpoint(cfg, checkpoint);
}

/* CPUs this run may use: those of dist.cpu_list when given, else the affinity mask (taskset,
 * cgroups and Slurm respected). At least 1. */
static int usable_cpus(const struct dt_config *cfg)
{
    struct dt_topology t;
    if (dt_topology_read(&t, NULL, NULL) < 0)
        return 1;
    int n = t.ncpus;
    dt_topology_free(&t);
    if (cfg->dist.cpu_list[0]) {
        int *ids = calloc(DT_TOPO_MAX_CPUS, sizeof *ids);
        int k = ids ? dt_cpu_list_parse(cfg->dist.cpu_list, ids, DT_TOPO_MAX_CPUS, "cpu_list") : -1;
        free(ids);
        if (k > 0)
            n = k;
    }
    return n > 0 ? n : 1;
}

int dt_run_threads(const struct dt_config *cfg, int processes)
{
    if (cfg->dist.threads > 0)
        return cfg->dist.threads;
    int per = usable_cpus(cfg) / (processes > 0 ? processes : 1);
    return per > 0 ? per : 1;
}
