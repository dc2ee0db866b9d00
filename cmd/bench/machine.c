/* The machine a benchmark ran on, for the header of its table: a figure without the CPU, the
 * core count and the BLAS build behind it cannot be compared with anything.
 *
 * Topology comes from dist/topology (the affinity mask intersected with sysfs), the same view
 * the launcher pins ranks by, so "cores" here is what `--cores` defaults to and what a
 * sweep splits.
 */
#include "cmd/bench/bench.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist/topology.h"
#include "nn/kernels/fp32/blas.h"
#include "nn/kernels/isa.h"
#include "util/err.h"
#include "util/json.h"

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

/* Sockets, cores and SMT of the usable CPUs, as the launcher will see them when it pins. */
static void read_topology(struct dt_bench_machine *m)
{
    struct dt_topology t;
    if (dt_topology_read(&t, NULL, NULL) != 0) {
        dt_clear_error(); /* the header then says what it could not read: zeros */
        return;
    }
    m->cpus = t.ncpus;
    m->cores = t.cores;
    m->sockets = t.sockets;
    m->smt = t.smt;
    dt_topology_free(&t);
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
    if (m->smt < 1)
        m->smt = 1;
    struct dt_blas_info blas;
    dt_blas_info_read(&blas);
    snprintf(m->blas, sizeof m->blas, "%s", blas.config ? blas.config : "OpenBLAS (unknown build)");
    snprintf(m->threading, sizeof m->threading, "%s", dt_blas_threading_name(blas.threading));
    snprintf(m->kernels, sizeof m->kernels, "%s", blas.choice);
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
        dt_jw_str(&w, "blas_kernels", m->kernels);
        dt_jw_end(&w, out);
        return;
    }
    fprintf(out, "# dtrain %s bench: %s\n", DTRAIN_VERSION, what);
    fprintf(out, "# machine: %s; %d socket%s, %d core%s, SMT %s (%d CPU%s usable)\n", m->cpu,
            m->sockets, m->sockets == 1 ? "" : "s", m->cores, m->cores == 1 ? "" : "s",
            m->smt > 1 ? "on" : "off", m->cpus, m->cpus == 1 ? "" : "s");
    fprintf(out, "# BLAS: %s; threading %s\n", m->blas, m->threading);
    fprintf(out, "# BLAS kernels: %s\n", m->kernels);
    fprintf(out, "# dtrain kernels: %s instruction set (DTRAIN_ISA)\n", dt_isa_name());
    fprintf(out, "# dtrain bf16 products (train.precision = bf16): %s\n", dt_isa_bf16_path_text());
}
