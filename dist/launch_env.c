/* Launch-environment detection; sources and precedence are described in launch_env.h.
 *
 * Everything is read through env_get() from an explicit environment array so the tests can
 * fake mpirun, srun and torchrun without touching the process environment. Numbers are parsed
 * strictly (whole string, in range): a half-set environment is a usage error, never a guess.
 */
#include "dist/launch_env.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/err.h"

extern char **environ;

static const char *env_get(char *const *envp, const char *name)
{
    size_t n = strlen(name);
    for (char *const *e = envp ? envp : environ; e && *e; e++)
        if (strncmp(*e, name, n) == 0 && (*e)[n] == '=')
            return *e + n + 1;
    return NULL;
}

static int parse_int(const char *s, int lo, int hi, int *out, const char *what)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (!*s || *end || errno || v < lo || v > hi)
        return dt_fail(DT_EUSAGE, "%s: '%s' is not an integer in %d..%d", what, s, lo, hi);
    *out = (int)v;
    return 0;
}

/* Reads integer variable `name` into *out; *out stays as is when it is unset. */
static int env_int(char *const *envp, const char *name, int lo, int hi, int *out)
{
    const char *v = env_get(envp, name);
    return v ? parse_int(v, lo, hi, out, name) : 0;
}

int dt_launch_parse_hostport(const char *s, char *host, int *port, const char *what)
{
    const char *colon, *h = s;
    size_t hl;
    if (s[0] == '[') {
        const char *close = strchr(s, ']');
        if (!close || close[1] != ':')
            return dt_fail(DT_EUSAGE, "%s: '%s' is not [ADDRESS]:PORT", what, s);
        h = s + 1, hl = (size_t)(close - h), colon = close + 1;
    } else {
        colon = strrchr(s, ':');
        if (!colon || memchr(s, ':', (size_t)(colon - s)))
            return dt_fail(DT_EUSAGE, "%s: '%s' is not HOST:PORT (write IPv6 as [ADDRESS]:PORT)",
                           what, s);
        hl = (size_t)(colon - s);
    }
    if (hl == 0 || hl > DT_LAUNCH_HOST_MAX)
        return dt_fail(DT_EUSAGE, "%s: '%s' has no usable host", what, s);
    int rc = parse_int(colon + 1, 1, 65535, port, what);
    if (rc < 0)
        return rc;
    memcpy(host, h, hl);
    host[hl] = 0;
    return 0;
}

int dt_launch_slurm_first_host(const char *list, char *out, int cap)
{
    int n = 0;
    const char *p = list;
    while (*p && *p != ',') {
        if (*p == ']')
            return dt_fail(DT_EUSAGE, "SLURM_JOB_NODELIST: unbalanced ']' in '%s'", list);
        if (*p != '[') {
            if (n + 1 >= cap)
                return dt_fail(DT_EUSAGE, "SLURM_JOB_NODELIST: host name too long in '%s'", list);
            out[n++] = *p++;
            continue;
        }
        /* A range set "[01-04,07]": its first element's low bound, zero padding kept. */
        const char *close = strchr(p, ']');
        if (!close || close == p + 1)
            return dt_fail(DT_EUSAGE, "SLURM_JOB_NODELIST: malformed range in '%s'", list);
        for (p++; p < close && *p != ',' && *p != '-'; p++) {
            if (*p < '0' || *p > '9' || n + 1 >= cap)
                return dt_fail(DT_EUSAGE, "SLURM_JOB_NODELIST: malformed range in '%s'", list);
            out[n++] = *p;
        }
        if (out[n - 1] < '0' || out[n - 1] > '9')
            return dt_fail(DT_EUSAGE, "SLURM_JOB_NODELIST: malformed range in '%s'", list);
        p = close + 1;
    }
    if (n == 0)
        return dt_fail(DT_EUSAGE, "SLURM_JOB_NODELIST: no host in '%s'", list);
    out[n] = 0;
    return 0;
}

void dt_launch_flags_init(struct dt_launch_flags *f)
{
    f->nodes = f->node_rank = -1;
    f->master = NULL;
    f->no_master = false;
    f->instances = 1;
}

/* Process identity from four variables that come as a set; the local size may be missing
 * when `local_size_optional` (Slurm computes it from the node count). */
static int env_ranks(struct dt_launch_env *e, char *const *envp, const char *const names[4],
                     bool local_size_optional)
{
    for (int i = 0; i < 2; i++)
        if (!env_get(envp, names[i]))
            return dt_fail(DT_EUSAGE, "%s is set but %s is not", names[1 - i], names[i]);
    if (!local_size_optional && env_get(envp, names[2]) && !env_get(envp, names[3]))
        return dt_fail(DT_EUSAGE, "%s is set but %s is not", names[2], names[3]);
    int rc = env_int(envp, names[1], 1, 1 << 24, &e->size);
    if (rc == 0)
        rc = env_int(envp, names[0], 0, e->size - 1, &e->rank);
    e->local_rank = 0, e->local_size = local_size_optional ? e->size : 1;
    if (rc == 0)
        rc = env_int(envp, names[3], 1, e->size, &e->local_size);
    if (rc == 0)
        rc = env_int(envp, names[2], 0, e->local_size - 1, &e->local_rank);
    return rc;
}

/* Hosts from a per-rank launch: placement is by node (ranks of one host are consecutive). */
static void nodes_from_ranks(struct dt_launch_env *e)
{
    e->nodes = (e->size + e->local_size - 1) / e->local_size;
    e->node_rank = e->rank / e->local_size;
}

static int detect_slurm(struct dt_launch_env *e, char *const *envp)
{
    static const char *const names[4] = {"SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID",
                                         "SLURM_NTASKS_PER_NODE"};
    bool per_node = env_get(envp, names[3]) != NULL;
    int rc = env_ranks(e, envp, names, true);
    if (rc < 0)
        return rc;
    e->nodes = per_node ? (e->size + e->local_size - 1) / e->local_size : 1;
    rc = env_int(envp, "SLURM_NNODES", 1, e->size, &e->nodes);
    if (rc == 0 && !per_node) {
        e->local_size = (e->size + e->nodes - 1) / e->nodes;
        if (e->local_rank >= e->local_size)
            e->local_size = e->local_rank + 1;
    }
    e->node_rank = e->rank / e->local_size;
    if (e->node_rank >= e->nodes)
        e->node_rank = e->nodes - 1;
    if (rc == 0)
        rc = env_int(envp, "SLURM_NODEID", 0, e->nodes - 1, &e->node_rank);
    const char *list = env_get(envp, "SLURM_JOB_NODELIST");
    if (rc == 0 && list && !env_get(envp, "MASTER_ADDR")) {
        rc = dt_launch_slurm_first_host(list, e->master_host, sizeof e->master_host);
        int job = 0;
        if (rc == 0)
            rc = env_int(envp, "SLURM_JOB_ID", 0, 0x7fffffff, &job);
        e->master_port = DT_LAUNCH_DEFAULT_PORT + job % 1000;
    }
    return rc;
}

static int detect_torchrun(struct dt_launch_env *e, char *const *envp)
{
    static const char *const names[4] = {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"};
    if (env_get(envp, "RANK") || env_get(envp, "WORLD_SIZE")) {
        int rc = env_ranks(e, envp, names, false);
        nodes_from_ranks(e);
        return rc;
    }
    if (!env_get(envp, "NNODES") || !env_get(envp, "NODE_RANK"))
        return dt_fail(DT_EUSAGE, "%s is set but %s is not",
                       env_get(envp, "NNODES") ? "NNODES" : "NODE_RANK",
                       env_get(envp, "NNODES") ? "NODE_RANK" : "NNODES");
    int rc = env_int(envp, "NNODES", 1, 1 << 20, &e->nodes);
    return rc < 0 ? rc : env_int(envp, "NODE_RANK", 0, e->nodes - 1, &e->node_rank);
}

/* --instances N > 1 under a launcher that starts processes (mpirun, srun, torchrun, a
 * Kubernetes PyTorchJob): this dtrain forks N ranks, so the launcher must have started one
 * dtrain per host, and its rank numbers count hosts (as NODE_RANK / NNODES would). One process
 * per host is what its local size says: OMPI_COMM_WORLD_LOCAL_SIZE, SLURM_NTASKS_PER_NODE (or
 * SLURM_NTASKS / SLURM_NNODES), LOCAL_WORLD_SIZE; absent, as in a PyTorchJob's pods (RANK = the
 * pod's index, WORLD_SIZE = pods, no LOCAL_*), it is 1. Several processes per host, each
 * forking N ranks, would be N times the ranks the launcher was asked for: refused. */
static int ranks_are_hosts(struct dt_launch_env *e, int instances)
{
    if (e->local_size > 1) {
        const char *how = !strcmp(e->source, "ompi")    ? "mpirun --npernode 1"
                          : !strcmp(e->source, "slurm") ? "srun --ntasks-per-node=1"
                                                        : "torchrun --nproc-per-node 1, or no "
                                                          "torchrun: RANK and WORLD_SIZE then "
                                                          "count hosts";
        return dt_fail(DT_EUSAGE,
                       "dist.instances is %d, but %s started %d processes on this host, one per "
                       "rank: leave instances at 1, or start one dtrain per host (%s) and let it "
                       "fork the ranks",
                       instances, e->source, e->local_size, how);
    }
    e->nodes = e->size, e->node_rank = e->rank;
    e->rank = e->size = e->local_rank = e->local_size = -1;
    return 0;
}

static int detect_master(struct dt_launch_env *e, const struct dt_launch_flags *f,
                         char *const *envp)
{
    if (f && f->master)
        return dt_launch_parse_hostport(f->master, e->master_host, &e->master_port, "--master");
    const char *addr = env_get(envp, "MASTER_ADDR"), *port = env_get(envp, "MASTER_PORT");
    if (addr) {
        if (!*addr || strlen(addr) > DT_LAUNCH_HOST_MAX)
            return dt_fail(DT_EUSAGE, "MASTER_ADDR: '%s' is not a host name", addr);
        snprintf(e->master_host, sizeof e->master_host, "%s", addr);
        e->master_port = DT_LAUNCH_DEFAULT_PORT;
    }
    if (port)
        return parse_int(port, 1, 65535, &e->master_port, "MASTER_PORT");
    return 0;
}

/* The launcher's id of this job, the same in every rank of it: what names the rendezvous
 * file of a one-host per-rank job. Empty when the launcher sets none dtrain knows. */
static void local_job_key(struct dt_launch_env *e, char *const *envp)
{
    const char *ns = env_get(envp, "PMIX_NAMESPACE");
    if (!ns)
        ns = env_get(envp, "OMPI_MCA_ess_base_jobid");
    const char *job = env_get(envp, "SLURM_JOB_ID"), *step = env_get(envp, "SLURM_STEP_ID");
    if (!strcmp(e->source, "ompi") && ns && *ns)
        snprintf(e->local_key, sizeof e->local_key, "ompi-%s", ns);
    else if (!strcmp(e->source, "slurm") && job && *job)
        snprintf(e->local_key, sizeof e->local_key, "slurm-%s.%s", job, step ? step : "0");
}

int dt_launch_env_detect(struct dt_launch_env *e, const struct dt_launch_flags *f,
                         char *const *envp)
{
    *e = (struct dt_launch_env){
        .source = "none", .nodes = 1, .rank = -1, .size = -1, .local_rank = -1, .local_size = -1};
    int rc = 0;
    bool flags = f && (f->nodes >= 0 || f->node_rank >= 0);
    if (flags) {
        e->source = "flags";
    } else if (env_get(envp, "OMPI_COMM_WORLD_SIZE") || env_get(envp, "OMPI_COMM_WORLD_RANK")) {
        static const char *const names[4] = {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                                             "OMPI_COMM_WORLD_LOCAL_RANK",
                                             "OMPI_COMM_WORLD_LOCAL_SIZE"};
        e->source = "ompi";
        rc = env_ranks(e, envp, names, false);
        nodes_from_ranks(e);
    } else if (env_get(envp, "SLURM_PROCID") || env_get(envp, "SLURM_NTASKS")) {
        e->source = "slurm";
        rc = detect_slurm(e, envp);
    } else if (env_get(envp, "RANK") || env_get(envp, "WORLD_SIZE") || env_get(envp, "NNODES") ||
               env_get(envp, "NODE_RANK")) {
        e->source = "torchrun";
        rc = detect_torchrun(e, envp);
    }
    if (rc == 0 && e->rank >= 0 && f && f->instances > 1)
        rc = ranks_are_hosts(e, f->instances);
    if (rc == 0)
        rc = detect_master(e, f, envp);
    if (rc < 0)
        return rc;
    if (f && f->nodes >= 0)
        e->nodes = f->nodes;
    if (f && f->node_rank >= 0)
        e->node_rank = f->node_rank;
    if (e->nodes < 1)
        return dt_fail(DT_EUSAGE, "--nodes %d: need at least 1", e->nodes);
    if (e->node_rank < 0 || e->node_rank >= e->nodes)
        return dt_fail(DT_EUSAGE, "--node-rank %d out of range for %d nodes", e->node_rank,
                       e->nodes);
    bool one_host_per_rank = e->size > 1 && e->nodes == 1 && e->local_size == e->size;
    bool user_master = (f && f->master) || env_get(envp, "MASTER_ADDR");
    if (one_host_per_rank && !user_master && !(f && f->no_master)) {
        local_job_key(e, envp);
        if (e->local_key[0]) {
            snprintf(e->master_host, sizeof e->master_host, "127.0.0.1");
            e->master_port = 0; /* rank 0 picks a free one and publishes it */
            return 0;
        }
    }
    if (!e->master_host[0]) {
        if ((e->nodes > 1 || e->size > 1) && !(f && f->no_master))
            return dt_fail(DT_EUSAGE,
                           "%d %s need a master address: pass --master HOST:PORT or set "
                           "MASTER_ADDR and MASTER_PORT",
                           e->nodes > 1 ? e->nodes : e->size, e->nodes > 1 ? "nodes" : "ranks");
        snprintf(e->master_host, sizeof e->master_host, "127.0.0.1");
        e->master_port = 0; /* one host: the launcher picks a free port */
    }
    return 0;
}
