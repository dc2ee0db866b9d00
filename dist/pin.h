/* Which CPUs each rank of a job gets (dist/pin.c), planned over the usable CPUs of
 * dist/topology.h. docs/pinning.md has the rules with worked examples.
 *
 * dt_pin_plan_make() gives rank r its CPUs:
 *   cores    `threads` CPUs per rank. Physical cores first: the job uses one hardware thread
 *            of every core before it uses any SMT sibling, and only as many siblings as
 *            instances x threads needs. Each rank is kept inside one socket whenever that
 *            socket still has room for it (preferring the socket that gives it the most
 *            whole cores); a rank that fits nowhere spans sockets, fullest socket first.
 *            When siblings are needed, the ranks of a socket get whole cores (both threads
 *            of a core in one rank) wherever that leaves fewer cores shared between ranks.
 *   sockets  rank r gets every usable CPU of socket r % sockets.
 *   none     no pinning (each rank keeps the whole mask).
 *   list     an explicit "0-7,16-23" list (like KMP_AFFINITY's proclist): rank r takes
 *            entries r*threads .. r*threads+threads-1 of it, wrapping around at its end.
 * When instances x threads exceeds the usable CPUs the plan still succeeds: in cores mode the
 * R = usable/threads ranks that fit are planned as above and rank r reuses the CPUs of rank
 * r % R. `oversubscribed` is set whenever some CPU will run more than one of the job's threads
 * (the caller warns once).
 */
#ifndef DT_DIST_PIN_H
#define DT_DIST_PIN_H

#include <stdbool.h>

#include "dist/topology.h"
#include "util/names.h"

enum dt_pin_mode { DT_PIN_CORES, DT_PIN_SOCKETS, DT_PIN_NONE, DT_PIN_LIST };
#define DT_PIN_MODE_COUNT (DT_PIN_LIST + 1)
/* dist.pin's names: "cores", "sockets", "none" (a list is not named: dist.cpu_list). */
extern const struct dt_names dt_pin_mode_names;

struct dt_pin_plan {
    enum dt_pin_mode mode;
    int instances, threads;
    int *cpus;           /* per rank, its distinct CPU ids ascending, at cpus[r * stride];
                            NULL for DT_PIN_NONE */
    int *ncpus;          /* per rank: how many of its stride entries are set (rest are -1) */
    int stride;          /* entries reserved per rank in cpus[] */
    bool oversubscribed; /* some CPU runs more than one of the job's threads */
};

/* "cores", "sockets", "none", or anything starting with a digit (a CPU list: DT_PIN_LIST, the
 * caller passes the same string as `list`); else DT_EUSAGE naming `what`. */
int dt_pin_mode_parse(const char *s, enum dt_pin_mode *mode, const char *what);
const char *dt_pin_mode_name(enum dt_pin_mode mode);

/* mode DT_PIN_LIST uses `list`; every listed CPU must be usable (DT_EUSAGE naming it). */
int dt_pin_plan_make(struct dt_pin_plan *p, const struct dt_topology *t, enum dt_pin_mode mode,
                     const char *list, int instances, int threads);
void dt_pin_plan_free(struct dt_pin_plan *p);
/* Binds the calling thread (and so the threads it creates afterwards: call it before the
 * first OpenMP/BLAS call) to rank r's CPUs with sched_setaffinity; no-op for DT_PIN_NONE. */
int dt_pin_apply(const struct dt_pin_plan *p, int rank);

#endif
