/* The shared-memory communicator: the ranks of one host, forked from one parent, summing
 * float arrays through one POSIX shared-memory segment.
 *
 * Life cycle (the parent owns the segment, the ranks only use it):
 *   parent  dt_shm_segment_create()  before fork: shm_open(O_EXCL, 0600) of a per-job name,
 *                                     posix_fallocate (a full /dev/shm is an error here, not
 *                                     SIGBUS later), mmap(MAP_SHARED), shm_unlink at once:
 *                                     children inherit the mapping, and nothing is left in
 *                                     /dev/shm whatever kills the job.
 *   rank r  dt_shm_comm_create()     after fork: a struct dt_comm over the inherited mapping.
 *   parent  dt_shm_segment_abort()   when a rank died: every rank waiting in (or entering) a
 *                                     collective returns DT_ERUNTIME naming the reason.
 *   parent  dt_shm_segment_destroy() at exit and on every failure path: unmap + shm_unlink
 *                                     (idempotent; also safe in a child, where it only unmaps).
 *                                     An atexit handler unlinks what the creator did not destroy.
 *
 * Collectives: allreduce_sum is reduce-scatter then all-gather over per-rank slots in the
 * segment, chunked (so large arrays pipeline through a bounded segment) and summed in rank
 * order (so every rank ends bit-identical); allreduce_sum_bf16 is the same with each rank's terms
 * packed into the slots as bf16 (twice the elements per chunk) and the segment's sum rounded to
 * bf16 before the all-gather (dist/bf16_sum.h); broadcast and barrier. Waiting ranks spin briefly
 * then sleep on a futex (an oversubscribed run does not burn cores), checking the abort flag
 * and the timeout while they wait.
 */
#ifndef DT_DIST_SHM_H
#define DT_DIST_SHM_H

#include <stddef.h>

#include "dist/comm.h"

struct dt_shm_segment;

#define DT_SHM_DEFAULT_CHUNK_BYTES (1u << 20) /* per rank slot; 0 in create -> this */

/* Creates and maps the segment for `size` ranks (1..1024). timeout: seconds a rank may wait for
 * the others inside one collective before failing (0 -> 300). DT_ERUNTIME naming the segment
 * on failure (nothing is left behind); at most 16 segments live in one process at a time. */
int dt_shm_segment_create(struct dt_shm_segment **out, int size, size_t chunk_bytes,
                          double timeout);
/* "/dtrain-<pid>-<random>": for messages and tests (a leftover check looks in /dev/shm). */
const char *dt_shm_segment_name(const struct dt_shm_segment *seg);
/* Marks the job aborted (first reason wins) and wakes every waiter. Async-signal-safe. */
void dt_shm_segment_abort(struct dt_shm_segment *seg, const char *reason);
void dt_shm_segment_destroy(struct dt_shm_segment *seg);

/* Rank `rank` of the segment's job (local_rank = rank, local_size = size). The comm does not
 * own the segment: its close() frees only the comm. Collectives fail with DT_ERUNTIME after an
 * abort ("job aborted: <reason>") or a timeout ("rank(s) K never arrived ..."), and the comm
 * then stays failed. Every rank must call the same collectives with the same lengths: a rank
 * whose call differs from rank 0's fails with DT_ERUNTIME "mismatched collectives: ...". */
int dt_shm_comm_create(struct dt_comm **out, struct dt_shm_segment *seg, int rank);

#endif
