/* Which CPUs this process may use, how they are grouped (sockets, physical cores, SMT
 * siblings), and which of them each rank of a job gets.
 *
 * dt_topology_read() intersects the affinity mask (sched_getaffinity: containers, taskset and
 * Slurm cgroups are respected) with the topology read from sysfs
 * (<root>/devices/system/cpu/cpuN/topology/{physical_package_id,core_id}); tests pass a fake
 * root. dt_pin_plan() then gives rank r its own range of `threads` CPUs:
 *   cores    physical cores first (one hardware thread per core, in socket order), SMT
 *            siblings only once every core has one rank-thread; a rank's range is kept inside
 *            one socket whenever it fits in what that socket has left.
 *   sockets  rank r gets every usable CPU of socket r % sockets.
 *   none     no pinning (each rank keeps the whole mask).
 *   list     an explicit "0-7,16-23" list (like KMP_AFFINITY's proclist): ranks take
 *            consecutive `threads`-sized ranges of it, in the order written.
 * When instances x threads exceeds the usable CPUs the plan still succeeds, wrapping around,
 * and sets `oversubscribed` (the caller warns once).
 */
#ifndef DT_DIST_TOPOLOGY_H
#define DT_DIST_TOPOLOGY_H

#include <stdbool.h>

#define DT_TOPO_MAX_CPUS 4096

struct dt_cpu {
    int id;     /* OS CPU number */
    int socket; /* physical_package_id */
    int core;   /* core_id (unique within a socket) */
    int smt;    /* 0 for the first hardware thread of its core, 1, 2, ... for siblings */
};

struct dt_topology {
    int ncpus;           /* usable CPUs (in the affinity mask and online) */
    struct dt_cpu *cpus; /* sorted by id */
    int sockets;         /* sockets with at least one usable CPU */
    int cores;           /* physical cores with at least one usable CPU */
};

enum dt_pin_mode { DT_PIN_CORES, DT_PIN_SOCKETS, DT_PIN_NONE, DT_PIN_LIST };

struct dt_pin_plan {
    int instances, threads;
    int *cpus;           /* instances x threads CPU ids, rank-major (NULL for DT_PIN_NONE) */
    int *ncpus;          /* per rank: how many of its entries are set (sockets mode varies) */
    int stride;          /* entries reserved per rank in cpus[] */
    bool oversubscribed; /* instances x threads > usable CPUs */
};

/* sysfs_root: NULL for "/sys"; affinity: NULL for this process's sched_getaffinity mask, else
 * a CPU list string such as "0-3,8" (tests). DT_ERUNTIME / DT_EUSAGE with a message. */
int dt_topology_read(struct dt_topology *t, const char *sysfs_root, const char *affinity);
void dt_topology_free(struct dt_topology *t);
/* One line: "2 sockets, 16 cores, 32 CPUs usable (SMT 2)". */
void dt_topology_describe(const struct dt_topology *t, char *buf, int cap);

/* Parses "0-7,16-23" into ids (at most cap), returns the count or a negative DT_EUSAGE naming
 * `what` and the bad part. */
int dt_cpu_list_parse(const char *s, int *ids, int cap, const char *what);
/* Formats ids as a compact list "0-3,8". */
void dt_cpu_list_format(const int *ids, int n, char *buf, int cap);

/* mode DT_PIN_LIST uses `list`; every listed CPU must be usable (DT_EUSAGE naming it). */
int dt_pin_plan_make(struct dt_pin_plan *p, const struct dt_topology *t, enum dt_pin_mode mode,
                     const char *list, int instances, int threads);
void dt_pin_plan_free(struct dt_pin_plan *p);
/* Applies rank r's CPUs to the calling process (sched_setaffinity); no-op for DT_PIN_NONE. */
int dt_pin_apply(const struct dt_pin_plan *p, int rank);

#endif
