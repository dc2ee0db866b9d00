/* The hierarchical communicator: a fast communicator inside each host (shm) composed with a
 * communicator between one leader per host (tcp).
 *
 *   allreduce_sum  local all-reduce; leaders (local rank 0) all-reduce across hosts; local
 *                  broadcast from the leader. Every rank ends with the leader's bytes, and the
 *                  leaders' ring makes those identical on every host. bf16: both sums
 *                  in bf16 (a host's sum is rounded before the leaders' ring takes it).
 *   broadcast      on the root's host, local broadcast from the root (the leader has it);
 *                  leaders broadcast from the root's host; every other host broadcasts
 *                  locally from its leader.
 *   barrier        local barrier, leaders' barrier, local barrier.
 * Ranks are host-major: global rank = node_rank * local_size + local_rank, the same local_size
 * on every host. Written against struct dt_comm only, so any pair of communicators works.
 * When a leader's cross-host step fails it closes its local communicator, so the ranks of its
 * host fail at once ("lost rank 0 ...") instead of waiting out their timeout; the comm then
 * only returns the first error.
 */
#ifndef DT_DIST_HIER_H
#define DT_DIST_HIER_H

#include "dist/comm.h"

/* Takes ownership of `local` and `leaders` (leaders is NULL exactly when local->rank != 0),
 * also on failure. DT_EUSAGE when the shapes disagree. */
int dt_hier_comm_create(struct dt_comm **out, struct dt_comm *local, struct dt_comm *leaders,
                        int node_rank, int nodes);

#endif
