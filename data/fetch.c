/* The fetch engine's entry (data/fetch.h): the options checked against the dataset, then one
 * dataset fetched file by file (fetch_sources.c), verified in place, or the registry listed.
 * A fetch that fails tidies what it left empty and says how to get the data offline. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "data/download.h"
#include "data/fetch_job.h"
#include "util/err.h"
#include "util/fileio.h"
#include "util/log.h"

void dt_fetch_options_default(struct dt_fetch_options *o)
{
    memset(o, 0, sizeof *o);
    o->retries = 3;
    o->retry_delay = 1.0;
    o->connect_timeout = 15;
    o->stall_timeout = 30;
    o->max_size = DT_FETCH_UNSIZED_MAX;
}

int dt_fetch_add_mirror(struct dt_fetch_options *o, const char *url)
{
    if (o->nmirrors == DT_FETCH_MAX_MIRRORS)
        return dt_fail(DT_EUSAGE, "fetch: at most %d mirrors", DT_FETCH_MAX_MIRRORS);
    o->mirrors[o->nmirrors++] = url;
    return 0;
}

/* ---- paths ---- */

bool dt_fetch_file_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

long long dt_fetch_file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (long long)st.st_size : -1;
}

int dt_fetch_join_path(char *out, const char *dir, const char *name, const char *suffix)
{
    if (snprintf(out, DT_FETCH_PATH_CAP, "%s/%s%s", dir, name, suffix) >= DT_FETCH_PATH_CAP)
        return dt_fail(DT_EUSAGE, "%s/%s: path too long", dir, name);
    return 0;
}

int dt_fetch_job_init(struct dt_fetch_job *j, const struct dt_fetch_options *o,
                      const struct dt_reg_dataset *ds, int i)
{
    memset(j, 0, sizeof *j);
    j->o = o;
    j->ds = ds;
    j->f = &ds->files[i];
    j->tty = dt_log_is_tty();
    int rc = dt_fetch_join_path(j->final, o->dir, j->f->name, "");
    return rc ? rc : dt_fetch_join_path(j->part, o->dir, j->f->name, ".part");
}

/* ---- the dataset ---- */

static int prepare_dir(const char *dir)
{
    int rc = dt_mkdir_p(dir);
    if (rc)
        return rc;
    if (access(dir, W_OK) != 0)
        return dt_fail(DT_ERUNTIME, "%s: directory is not writable: %s", dir, strerror(errno));
    return 0;
}

/* A fetch that got nothing leaves nothing: no 0-byte .part files, and no directory it made
 * that stayed empty (a part with bytes stays, for the next run to resume). */
static void tidy_failed(const struct dt_fetch_options *o, const struct dt_reg_dataset *ds,
                        bool made)
{
    for (int i = 0; i < ds->nfiles; i++) {
        char part[DT_FETCH_PATH_CAP];
        struct stat st;
        if (dt_fetch_join_path(part, o->dir, ds->files[i].name, ".part") == 0 &&
            stat(part, &st) == 0 && st.st_size == 0)
            unlink(part);
    }
    if (made)
        rmdir(o->dir); /* only succeeds when empty */
}

static int fetch_dataset(const struct dt_fetch_options *o, const struct dt_reg_dataset *ds)
{
    struct stat st;
    bool made = stat(o->dir, &st) != 0;
    int rc = prepare_dir(o->dir);
    for (int i = 0; i < ds->nfiles && !rc; i++) {
        struct dt_fetch_job j;
        rc = dt_fetch_job_init(&j, o, ds, i);
        if (!rc)
            rc = dt_fetch_file(&j);
    }
    if (rc) {
        tidy_failed(o, ds, made);
        char why[600];
        snprintf(why, sizeof why, "%s", dt_last_error());
        if (dt_exit_code(rc) == DT_ERUNTIME && strstr(why, "every mirror"))
            rc = dt_fail(DT_ERUNTIME,
                         "%s; offline? `dtrain fetch %s --from FILE` takes a copy you have, "
                         "--mirror URL (or DTRAIN_MIRROR) a reachable one",
                         why, ds->name);
        return rc;
    }
    dt_log_info("%s: %d file%s ready in %s", ds->name, ds->nfiles, ds->nfiles == 1 ? "" : "s",
                o->dir);
    dt_fetch_json_dataset_done(o, ds, "dataset_done");
    return 0;
}

/* --verify: every file must be present and match; all are checked, the last failure is
 * returned and earlier ones are logged. */
static int verify_dataset(const struct dt_fetch_options *o, const struct dt_reg_dataset *ds)
{
    int failed = 0, rc = 0;
    for (int i = 0; i < ds->nfiles; i++) {
        struct dt_fetch_job j;
        int jrc = dt_fetch_job_init(&j, o, ds, i);
        if (jrc)
            return jrc;
        enum dt_match m = DT_MATCH_NONE;
        int frc = dt_fetch_file_exists(j.final) ? dt_checksum_verify(j.final, j.f, j.final, &m)
                                                : dt_fail(DT_EDATA, "%s: missing", j.final);
        dt_fetch_json_verified(&j, frc == 0, m);
        if (frc == 0) {
            dt_fetch_report_verified(&j, "present", m);
            continue;
        }
        if (failed++)
            dt_log_error("%s", dt_last_error()); /* not the one main.c will print */
        rc = frc;
    }
    if (failed > 1)
        return dt_fail_context(rc, "%s: %d of %d files failed verification", ds->name, failed,
                               ds->nfiles);
    if (!failed) {
        dt_log_info("%s: all %d files verified in %s", ds->name, ds->nfiles, o->dir);
        dt_fetch_json_dataset_done(o, ds, "dataset_verified");
    }
    return rc;
}

/* ---- the options against the dataset ---- */

/* --from FILE, --trust and --sha256 against the dataset they are for. */
static int check_local_args(const struct dt_fetch_options *o, const struct dt_reg_dataset *ds)
{
    if (dt_fetch_from_is_file(o->from) && ds->nfiles != 1)
        return dt_fail(DT_EUSAGE,
                       "fetch: --from %s is a file, but %s has %d files; give the directory "
                       "that holds them",
                       o->from, ds->name, ds->nfiles);
    if (o->trust && !o->from)
        return dt_fail(DT_EUSAGE, "fetch: --trust vouches for a copy you have; it needs --from "
                                  "FILE or DIR");
    if (o->sha256 && ds->nfiles != 1)
        return dt_fail(DT_EUSAGE,
                       "fetch: --sha256 names one file's checksum, but %s has %d files (use "
                       "--from DIR --trust)",
                       ds->name, ds->nfiles);
    return 0;
}

static int check_args(const struct dt_fetch_options *o)
{
    if (o->list && o->name)
        return dt_fail(DT_EUSAGE, "fetch: --list takes no dataset name");
    if (!o->list && !o->name)
        return dt_fail(DT_EUSAGE, "fetch: which dataset? known: %s", dt_registry_names());
    if (o->list)
        return 0;
    if (!dt_registry_find(o->name))
        return dt_fail(DT_EUSAGE, "fetch: unknown dataset '%s' (known: %s)", o->name,
                       dt_registry_names());
    if (o->verify && (o->from || o->force || o->trust || o->sha256))
        return dt_fail(DT_EUSAGE, "fetch: --verify checks what is there; it takes no --from, "
                                  "--force, --trust or --sha256");
    return check_local_args(o, dt_registry_find(o->name));
}

int dt_fetch_run(const struct dt_fetch_options *opts)
{
    struct dt_fetch_options o = *opts;
    const char *registry = o.registry ? o.registry : getenv("DTRAIN_REGISTRY");
    int rc = registry && *registry ? dt_registry_load(registry) : 0;
    if (!rc)
        rc = check_args(&o);
    char dir[DT_FETCH_PATH_CAP];
    if (!rc && !o.dir && !o.list) {
        rc = dt_fetch_join_path(dir, dt_data_root(), o.name, "");
        o.dir = dir;
    }
    if (rc)
        return rc;
    if (o.list)
        return dt_fetch_list(&o);
    const struct dt_reg_dataset *ds = dt_registry_find(o.name);
    if (o.verify)
        return verify_dataset(&o, ds);
    if ((rc = dt_download_global_init()))
        return rc;
    rc = fetch_dataset(&o, ds);
    dt_download_global_cleanup();
    return rc;
}
