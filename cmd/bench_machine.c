/* The machine a benchmark ran on, for the header of its table: a figure without the CPU, the
 * core count and the BLAS build behind it cannot be compared with anything.
 *
 * Topology is read straight from sysfs (physical_package_id, core_id of each CPU in the
 * affinity mask) so that this file stands alone; it is small on purpose, and can give way to
 * dist/topology.h's dt_topology_read() once every branch has it.
 */
#include "cmd/bench.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/json.h"

/* OpenBLAS's own introspection (cblas.h declares them; declared here to keep the include
 * list to what the build already has). */
char *openblas_get_config(void);
int openblas_get_parallel(void);

static void read_cpu_model(char *buf, size_t cap)
{
    snprintf(buf, cap, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) != 0)
            continue;
        const char *v = strchr(line, ':');
        if (!v)
            continue;
        v++;
        while (*v == ' ' || *v == '\t')
            v++;
        snprintf(buf, cap, "%s", v);
        buf[strcspn(buf, "\n")] = 0;
        break;
    }
    fclose(f);
}

static int read_sysfs_int(int cpu, const char *name)
{
    char path[128];
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/topology/%s", cpu, name);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    int v = -1;
    if (fscanf(f, "%d", &v) != 1)
        v = -1;
    fclose(f);
    return v;
}

/* Counts sockets and physical cores among the usable CPUs. */
static void read_topology(struct dt_bench_machine *m)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) != 0)
        return;
    int keys[CPU_SETSIZE][2], nkeys = 0, sockets[CPU_SETSIZE], nsockets = 0;
    for (int cpu = 0; cpu < CPU_SETSIZE; cpu++) {
        if (!CPU_ISSET(cpu, &set))
            continue;
        m->cpus++;
        int pkg = read_sysfs_int(cpu, "physical_package_id"), core = read_sysfs_int(cpu, "core_id");
        if (core < 0) /* no topology: every CPU its own core */
            core = cpu, pkg = 0;
        bool seen = false;
        for (int i = 0; i < nkeys && !seen; i++)
            seen = keys[i][0] == pkg && keys[i][1] == core;
        if (!seen)
            keys[nkeys][0] = pkg, keys[nkeys][1] = core, nkeys++;
        seen = false;
        for (int i = 0; i < nsockets && !seen; i++)
            seen = sockets[i] == pkg;
        if (!seen)
            sockets[nsockets++] = pkg;
    }
    m->cores = nkeys;
    m->sockets = nsockets;
}

void dt_bench_machine_read(struct dt_bench_machine *m)
{
    memset(m, 0, sizeof *m);
    read_cpu_model(m->cpu, sizeof m->cpu);
    read_topology(m);
    if (m->cpus < 1)
        m->cpus = 1;
    if (m->cores < 1)
        m->cores = m->cpus;
    if (m->sockets < 1)
        m->sockets = 1;
    m->smt = (m->cpus + m->cores - 1) / m->cores;
    const char *cfg = openblas_get_config();
    snprintf(m->blas, sizeof m->blas, "%s", cfg ? cfg : "OpenBLAS (unknown build)");
    static const char *const modes[] = {"sequential", "pthreads", "openmp"};
    int p = openblas_get_parallel();
    snprintf(m->threading, sizeof m->threading, "%s", p >= 0 && p <= 2 ? modes[p] : "unknown");
}

void dt_bench_machine_print(const struct dt_bench_machine *m, FILE *out, bool json,
                            const char *what)
{
    if (json) {
        struct dt_json_writer w;
        dt_jw_begin(&w, "bench_machine");
        dt_jw_str(&w, "what", what);
        dt_jw_str(&w, "dtrain", DTRAIN_VERSION);
        dt_jw_str(&w, "cpu", m->cpu);
        dt_jw_int(&w, "sockets", m->sockets);
        dt_jw_int(&w, "cores", m->cores);
        dt_jw_int(&w, "cpus", m->cpus);
        dt_jw_int(&w, "smt", m->smt);
        dt_jw_str(&w, "blas", m->blas);
        dt_jw_str(&w, "blas_threading", m->threading);
        dt_jw_end(&w, out);
        return;
    }
    fprintf(out, "# dtrain %s bench: %s\n", DTRAIN_VERSION, what);
    fprintf(out, "# machine: %s; %d socket%s, %d core%s, SMT %s (%d CPU%s usable)\n", m->cpu,
            m->sockets, m->sockets == 1 ? "" : "s", m->cores, m->cores == 1 ? "" : "s",
            m->smt > 1 ? "on" : "off", m->cpus, m->cpus == 1 ? "" : "s");
    fprintf(out, "# BLAS: %s; threading %s\n", m->blas, m->threading);
}
