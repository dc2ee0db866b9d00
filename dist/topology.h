/* Which CPUs this process may use, how they are grouped (sockets, physical cores, SMT
 * siblings), and which of them each rank of a job gets. docs/pinning.md has the rules with
 * worked examples.
 *
 * dt_topology_read() intersects the affinity mask (sched_getaffinity: containers, taskset and
 * Slurm cgroups are respected) with the online CPUs and the topology read from sysfs
 * (<root>/devices/system/cpu/{online,cpuN/topology/{physical_package_id,core_id}}); tests pass
 * a fake root. When sysfs says nothing usable (some containers) every CPU counts as its own
 * core on socket 0 and `guessed` is set: pinning still works, it just cannot avoid SMT pairs.
 *
 * Which CPUs each rank of a job gets is dist/pin.h's plan over this topology.
 */
#ifndef DT_DIST_TOPOLOGY_H
#define DT_DIST_TOPOLOGY_H

#include <stdbool.h>

#define DT_TOPO_MAX_CPUS 4096

struct dt_cpu {
    int id;     /* OS CPU number */
    int socket; /* 0..sockets-1, dense, in physical_package_id order */
    int core;   /* 0..cores-1, dense, in (socket, core_id) order: one per physical core */
    int smt;    /* 0 for the first usable hardware thread of its core, 1, 2, ... for siblings */
};

struct dt_topology {
    int ncpus;           /* usable CPUs (in the affinity mask and online) */
    struct dt_cpu *cpus; /* sorted by id */
    int sockets;         /* sockets with at least one usable CPU */
    int cores;           /* physical cores with at least one usable CPU */
    int smt;             /* most usable hardware threads on one core (1: no SMT) */
    bool guessed;        /* sysfs had no usable topology: each CPU is its own core, socket 0 */
};

/* sysfs_root: NULL for "/sys"; affinity: NULL for this process's sched_getaffinity mask, else
 * a CPU list string such as "0-3,8" (tests). DT_ERUNTIME / DT_EUSAGE with a message. */
int dt_topology_read(struct dt_topology *t, const char *sysfs_root, const char *affinity);
void dt_topology_free(struct dt_topology *t);
/* One line: "2 sockets, 16 cores, 32 CPUs usable (SMT 2)". */
void dt_topology_describe(const struct dt_topology *t, char *buf, int cap);

/* Parses "0-7,16-23" into ids in the order written (at most cap), returns the count or a
 * negative DT_EUSAGE naming `what` and the bad part. */
int dt_cpu_list_parse(const char *s, int *ids, int cap, const char *what);
/* Formats ids as a compact list "0-3,8" (ascending runs become ranges, order is kept); a list
 * that does not fit in cap ends in "...". */
void dt_cpu_list_format(const int *ids, int n, char *buf, int cap);

#endif
