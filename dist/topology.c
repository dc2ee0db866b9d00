/* The CPUs this process may use and their grouping, read from the affinity mask and sysfs;
 * plus the CPU-list syntax ("0-7,16-23") shared by sysfs, taskset, KMP_AFFINITY and --pin.
 * The pin plans built on top of this live in dist/pin.c.
 *
 * The usable set is the affinity mask (what taskset, a container's cpuset or a Slurm cgroup
 * allow) intersected with the online CPUs. Topology comes from
 * cpuN/topology/{physical_package_id,core_id}. Sysfs is treated as advisory: containers and
 * some virtual machines hide or fake it, and a training run must not fail because of that. If
 * any usable CPU lacks either file, the whole topology is replaced by the flat guess "each CPU
 * is its own core on socket 0" (a half-known topology would mislead the SMT rule more than no
 * topology does), and `guessed` says so. Sockets and cores are renumbered densely so the
 * planner can index arrays with them; the raw ids only matter for grouping.
 */
#include "dist/topology.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/err.h"

/* Digits only, no sign, no blanks; values past the CPU limit saturate to it so that a huge
 * number is reported as "beyond" instead of overflowing. */
static const char *parse_cpu_number(const char *p, const char *end, long *v)
{
    const char *start = p;
    *v = 0;
    while (p < end && *p >= '0' && *p <= '9') {
        if (*v <= DT_TOPO_MAX_CPUS)
            *v = *v * 10 + (*p - '0');
        p++;
    }
    return p == start ? NULL : p;
}

static int is_blank(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* One entry "N" or "A-B" in [tok, end): appends its CPUs. */
static int parse_entry(const char *tok, const char *end, int *ids, int *n, int cap,
                       const char *what)
{
    int len = (int)(end - tok);
    long a, b;
    const char *p = parse_cpu_number(tok, end, &a);
    if (p && p < end && *p == '-')
        p = parse_cpu_number(p + 1, end, &b);
    else
        b = a;
    if (!p || p != end)
        return dt_fail(DT_EUSAGE, "%s: '%.*s' is not a CPU number or range like 0-7", what, len,
                       tok);
    if (a > b)
        return dt_fail(DT_EUSAGE, "%s: range '%.*s' runs backwards", what, len, tok);
    if (b >= DT_TOPO_MAX_CPUS)
        return dt_fail(DT_EUSAGE, "%s: '%.*s' names CPUs beyond the supported %d", what, len, tok,
                       DT_TOPO_MAX_CPUS);
    for (long c = a; c <= b; c++) {
        if (*n >= cap)
            return dt_fail(DT_EUSAGE, "%s: more than %d CPUs listed", what, cap);
        ids[(*n)++] = (int)c;
    }
    return 0;
}

int dt_cpu_list_parse(const char *s, int *ids, int cap, const char *what)
{
    const char *p = s, *end = s + strlen(s);
    while (p < end && is_blank(*p))
        p++;
    while (end > p && is_blank(end[-1]))
        end--;
    if (p == end)
        return dt_fail(DT_EUSAGE, "%s: empty CPU list", what);
    int n = 0;
    for (;;) {
        const char *comma = memchr(p, ',', (size_t)(end - p));
        const char *tok_end = comma ? comma : end;
        if (tok_end == p)
            return dt_fail(DT_EUSAGE, "%s: empty entry in '%.*s'", what, (int)(end - s), s);
        int rc = parse_entry(p, tok_end, ids, &n, cap, what);
        if (rc < 0)
            return rc;
        if (!comma)
            return n;
        p = comma + 1;
    }
}

void dt_cpu_list_format(const int *ids, int n, char *buf, int cap)
{
    if (cap <= 0)
        return;
    buf[0] = '\0';
    int pos = 0;
    for (int i = 0; i < n;) {
        int j = i;
        while (j + 1 < n && ids[j + 1] == ids[j] + 1)
            j++;
        char item[32];
        const char *sep = i ? "," : "";
        int len = j > i ? snprintf(item, sizeof item, "%s%d-%d", sep, ids[i], ids[j])
                        : snprintf(item, sizeof item, "%s%d", sep, ids[i]);
        if (pos + len >= cap) {
            /* Mark the cut so a truncated list is never mistaken for the whole one. */
            int at = cap >= 4 ? (pos < cap - 4 ? pos : cap - 4) : cap - 1;
            snprintf(buf + at, (size_t)(cap - at), "...");
            return;
        }
        memcpy(buf + pos, item, (size_t)len + 1);
        pos += len;
        i = j + 1;
    }
}

/* Reads the mask into usable[]; the affinity string stands in for sched_getaffinity. */
static int read_affinity(bool *usable, const char *affinity)
{
    if (affinity) {
        int *ids = malloc(sizeof(int) * DT_TOPO_MAX_CPUS);
        if (!ids)
            return dt_fail(DT_ERUNTIME, "out of memory reading the affinity mask");
        int n = dt_cpu_list_parse(affinity, ids, DT_TOPO_MAX_CPUS, "affinity mask");
        for (int i = 0; i < n; i++)
            usable[ids[i]] = true;
        free(ids);
        return n < 0 ? n : 0;
    }
    cpu_set_t *set = CPU_ALLOC(DT_TOPO_MAX_CPUS);
    size_t size = CPU_ALLOC_SIZE(DT_TOPO_MAX_CPUS);
    if (!set)
        return dt_fail(DT_ERUNTIME, "out of memory reading the affinity mask");
    CPU_ZERO_S(size, set);
    if (sched_getaffinity(0, size, set) != 0) {
        int e = errno;
        CPU_FREE(set);
        return dt_fail(DT_ERUNTIME, "sched_getaffinity: %s", strerror(e));
    }
    for (int c = 0; c < DT_TOPO_MAX_CPUS; c++)
        usable[c] = CPU_ISSET_S(c, size, set);
    CPU_FREE(set);
    return 0;
}

/* A small sysfs file's content, NUL-terminated; false when missing or unreadable. */
static bool read_small(const char *path, char *buf, size_t cap)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    size_t n = fread(buf, 1, cap - 1, f);
    bool ok = !ferror(f);
    fclose(f);
    buf[n] = '\0';
    return ok && n > 0;
}

static bool read_long(const char *path, long *v)
{
    char buf[64], *end;
    if (!read_small(path, buf, sizeof buf))
        return false;
    errno = 0;
    *v = strtol(buf, &end, 10);
    while (is_blank(*end))
        end++;
    return end != buf && !*end && !errno;
}

/* Drops offline CPUs from usable[]. An unreadable or odd online file, or one that would leave
 * nothing, is ignored: the affinity mask alone is then the best knowledge there is. */
static void drop_offline(bool *usable, const char *root)
{
    char path[4096], buf[8192];
    snprintf(path, sizeof path, "%s/devices/system/cpu/online", root);
    if (!read_small(path, buf, sizeof buf))
        return;
    int *ids = malloc(sizeof(int) * DT_TOPO_MAX_CPUS);
    bool *online = calloc(DT_TOPO_MAX_CPUS, sizeof(bool));
    int n = ids && online ? dt_cpu_list_parse(buf, ids, DT_TOPO_MAX_CPUS, "online") : -1;
    if (n < 0)
        dt_clear_error(); /* advisory file: its syntax errors are not the user's */
    bool any = false;
    for (int i = 0; i < n; i++)
        if (usable[ids[i]])
            online[ids[i]] = any = true;
    if (any)
        memcpy(usable, online, sizeof(bool) * DT_TOPO_MAX_CPUS);
    free(ids);
    free(online);
}

struct raw_cpu {
    int id;
    long package, core;
};

static int by_package_core_id(const void *a, const void *b)
{
    const struct raw_cpu *x = a, *y = b;
    if (x->package != y->package)
        return x->package < y->package ? -1 : 1;
    if (x->core != y->core)
        return x->core < y->core ? -1 : 1;
    return x->id - y->id;
}

static int by_id(const void *a, const void *b)
{
    return ((const struct dt_cpu *)a)->id - ((const struct dt_cpu *)b)->id;
}

/* Fills raw[i].package/core from sysfs; false as soon as one CPU lacks them. */
static bool read_ids(struct raw_cpu *raw, int n, const char *root)
{
    char path[4096];
    for (int i = 0; i < n; i++) {
        const char *dir = "devices/system/cpu";
        snprintf(path, sizeof path, "%s/%s/cpu%d/topology/physical_package_id", root, dir,
                 raw[i].id);
        if (!read_long(path, &raw[i].package))
            return false;
        snprintf(path, sizeof path, "%s/%s/cpu%d/topology/core_id", root, dir, raw[i].id);
        if (!read_long(path, &raw[i].core))
            return false;
    }
    return true;
}

/* Dense socket/core numbers and SMT ranks from the raw ids, walking CPUs in (package, core,
 * id) order so each group is contiguous. */
static void number_cpus(struct dt_topology *t, struct raw_cpu *raw, bool known)
{
    int n = t->ncpus;
    if (known)
        qsort(raw, (size_t)n, sizeof *raw, by_package_core_id);
    t->sockets = t->cores = t->smt = 0;
    for (int i = 0, smt = 0; i < n; i++) {
        bool new_socket = !known ? i == 0 : i == 0 || raw[i].package != raw[i - 1].package;
        bool new_core = !known || new_socket || raw[i].core != raw[i - 1].core;
        t->sockets += new_socket;
        t->cores += new_core;
        smt = new_core ? 0 : smt + 1;
        t->cpus[i] = (struct dt_cpu){raw[i].id, t->sockets - 1, t->cores - 1, smt};
        if (smt + 1 > t->smt)
            t->smt = smt + 1;
    }
    qsort(t->cpus, (size_t)n, sizeof *t->cpus, by_id);
    t->guessed = !known;
}

int dt_topology_read(struct dt_topology *t, const char *sysfs_root, const char *affinity)
{
    const char *root = sysfs_root ? sysfs_root : "/sys";
    memset(t, 0, sizeof *t);
    bool *usable = calloc(DT_TOPO_MAX_CPUS, sizeof(bool));
    if (!usable)
        return dt_fail(DT_ERUNTIME, "out of memory reading the CPU topology");
    int rc = read_affinity(usable, affinity);
    if (rc < 0) {
        free(usable);
        return rc;
    }
    drop_offline(usable, root);
    for (int c = 0; c < DT_TOPO_MAX_CPUS; c++)
        t->ncpus += usable[c];
    struct raw_cpu *raw = calloc((size_t)t->ncpus + 1, sizeof *raw);
    t->cpus = calloc((size_t)t->ncpus + 1, sizeof *t->cpus);
    if (!raw || !t->cpus || t->ncpus == 0) {
        free(raw);
        free(usable);
        dt_topology_free(t);
        return t->ncpus ? dt_fail(DT_ERUNTIME, "out of memory reading the CPU topology")
                        : dt_fail(DT_ERUNTIME, "the affinity mask allows no online CPU");
    }
    for (int c = 0, i = 0; c < DT_TOPO_MAX_CPUS; c++)
        if (usable[c])
            raw[i++].id = c;
    free(usable);
    number_cpus(t, raw, read_ids(raw, t->ncpus, root));
    free(raw);
    return 0;
}

void dt_topology_free(struct dt_topology *t)
{
    free(t->cpus);
    t->cpus = NULL;
}

void dt_topology_describe(const struct dt_topology *t, char *buf, int cap)
{
    char smt[32] = "no SMT";
    if (t->smt > 1)
        snprintf(smt, sizeof smt, "SMT %d", t->smt);
    snprintf(buf, (size_t)(cap > 0 ? cap : 0), "%d socket%s, %d core%s, %d CPU%s usable (%s)",
             t->sockets, t->sockets == 1 ? "" : "s", t->cores, t->cores == 1 ? "" : "s", t->ncpus,
             t->ncpus == 1 ? "" : "s",
             t->guessed ? "no topology in sysfs: each CPU counted as a core" : smt);
}
