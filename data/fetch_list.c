/* `fetch --list`: every registry dataset with its format, size and the status of its files
 * under the data root (verified, trusted, missing, partial, corrupt), as a table or one JSON
 * object per dataset. */
#include <stdio.h>

#include "data/fetch_job.h"
#include "util/err.h"

/* "verified", "trusted", "missing", "partial", "corrupt". */
static const char *dataset_status(const struct dt_reg_dataset *ds, const char *dir)
{
    int present = 0, good = 0, trusted = 0;
    for (int i = 0; i < ds->nfiles; i++) {
        char path[DT_FETCH_PATH_CAP];
        enum dt_match m;
        if (dt_fetch_join_path(path, dir, ds->files[i].name, "") || !dt_fetch_file_exists(path))
            continue;
        present++;
        good += dt_checksum_verify(path, &ds->files[i], NULL, &m) == 0;
        trusted += m == DT_MATCH_TRUSTED;
    }
    dt_clear_error();
    if (good == ds->nfiles)
        return trusted ? "trusted" : "verified";
    if (good < present)
        return "corrupt";
    return present ? "partial" : "missing";
}

static bool has_system_copy(const struct dt_reg_dataset *ds)
{
    char path[DT_FETCH_PATH_CAP];
    return ds->system_dir && !dt_fetch_join_path(path, ds->system_dir, ds->files[0].name, "") &&
           dt_fetch_file_exists(path);
}

static uint64_t dataset_bytes(const struct dt_reg_dataset *ds)
{
    uint64_t total = 0;
    for (int i = 0; i < ds->nfiles; i++) {
        if (!ds->files[i].size)
            return 0;
        total += ds->files[i].size;
    }
    return total;
}

static void list_one(const struct dt_fetch_options *o, const struct dt_reg_dataset *ds,
                     const char *root)
{
    char dir[DT_FETCH_PATH_CAP], size[32];
    if (dt_fetch_join_path(dir, root, ds->name, ""))
        return;
    const char *status = dataset_status(ds, dir);
    bool sys = !o->no_system && has_system_copy(ds);
    uint64_t bytes = dataset_bytes(ds);
    dt_fetch_format_bytes(bytes, size, sizeof size);
    if (o->json) {
        struct dt_json_writer w;
        dt_jw_begin(&w, "dataset");
        dt_jw_str(&w, "name", ds->name);
        dt_jw_str(&w, "format", dt_names_name(&dt_data_format_names, (int)ds->format));
        dt_jw_int(&w, "files", ds->nfiles);
        dt_jw_int(&w, "bytes", (long long)bytes);
        dt_jw_str(&w, "status", status);
        dt_jw_str(&w, "dir", dir);
        dt_jw_bool(&w, "system_copy", sys);
        dt_fetch_json_emit(&w);
        return;
    }
    printf("%-15s %-9s %-9s %-10s %s%s\n", ds->name,
           dt_names_name(&dt_data_format_names, (int)ds->format), bytes ? size : "?", status,
           ds->description, sys ? " [system copy available]" : "");
}

int dt_fetch_list(const struct dt_fetch_options *o)
{
    const char *root = o->dir ? o->dir : dt_data_root();
    size_t n;
    const struct dt_reg_dataset *all = dt_registry_all(&n);
    if (!o->json)
        printf("%-15s %-9s %-9s %-10s %s\n", "NAME", "FORMAT", "SIZE", "STATUS", "DESCRIPTION");
    for (size_t i = 0; i < n; i++)
        list_one(o, &all[i], root);
    if (!o->json)
        printf("(status of the files in %s/<name>)\n", root);
    fflush(stdout);
    return 0;
}
