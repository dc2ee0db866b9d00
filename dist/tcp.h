/* The TCP communicator: ranks on any hosts joined in a ring of authenticated TCP connections.
 *
 * dt_tcp_comm_create() runs the rendezvous (dist/rendezvous.h) and returns a struct dt_comm
 * whose collectives move data around the ring:
 *   allreduce_sum  up to dt_tcp_small_max(size) floats: one pipelined all-gather of the
 *                  whole buffers around the ring, then every rank sums them in rank order
 *                  0..size-1. Larger: in rounds of at most 512 KiB per step, reduce-scatter
 *                  then all-gather, each step sending to the next rank while receiving from the
 *                  previous one (non-blocking I/O, a short spin before poll()), in framed
 *                  chunks. Segment j is always summed in the same rank order and the all-gather
 *                  copies bytes, so every rank ends bit-identical.
 *   allreduce_sum_bf16  the same two paths with bf16 payloads (half the bytes, so twice the
 *                  elements per round and a small path up to twice as long): the small path
 *                  sums the gathered bf16 terms in fp32 in rank order and rounds the sum; the
 *                  ring adds each arriving bf16 partial sum to the receiver's own terms
 *                  (rounded) in fp32 and rounds before the next hop, so a segment's sum is
 *                  rounded once per hop (size - 1 times) and once more before the all-gather,
 *                  which passes bf16 bytes on unchanged (dist/bf16_sum.h).
 *   broadcast      the root's bytes passed along the ring, chunk by chunk (pipelined).
 *   barrier        an all-reduce of one float per rank (no rank can finish it before every
 *                  rank has entered).
 * Failure: a closed connection, a malformed message or no progress for `timeout` seconds makes
 * the collective return DT_ERUNTIME "lost rank R (HOST): what happened"; the rank then sends an
 * ABORT carrying that text to its next neighbour, which passes it on, so every rank names the
 * rank that was actually lost. After a failure the communicator only returns that error.
 */
#ifndef DT_DIST_TCP_H
#define DT_DIST_TCP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dist/comm.h"

#define DT_TCP_DEFAULT_RENDEZVOUS_TIMEOUT 120.0
#define DT_TCP_DEFAULT_TIMEOUT            300.0
#define DT_TCP_DEFAULT_HANDSHAKE_TIMEOUT  10.0
#define DT_TCP_DEFAULT_SOCKBUF            (4 << 20)

struct dt_tcp_opts {
    int rank, size;             /* global rank of this process and the number of ranks */
    int local_rank, local_size; /* within this host (reported in the comm, sent to the master) */
    const char *master_host;    /* host name or address of rank 0 (IPv4, IPv6, name) */
    int master_port;            /* rank 0 listens here; 0 only with master_fd */
    int master_fd;              /* rank 0: an already listening socket to use instead, or -1 */
    const uint8_t *token;       /* the job token (see dist/auth.h) */
    size_t token_len;
    const char *iface;         /* interface whose address is advertised and bound, or NULL */
    double rendezvous_timeout; /* seconds; 0 -> DT_TCP_DEFAULT_RENDEZVOUS_TIMEOUT */
    double timeout;            /* collective: seconds without progress; 0 -> default */
    double handshake_timeout;  /* per incoming connection; 0 -> default */
    int sockbuf;               /* SO_SNDBUF/SO_RCVBUF bytes; 0 -> default, < 0 -> kernel's */
    bool oversubscribed;       /* this host runs more threads than it has CPUs: wait in poll()
                                  at once, since spinning would steal the core of the very rank
                                  being waited for */
    int ranks_per_peer;        /* > 1: each member stands for a host of that many ranks (the
                                  leaders' ring of the hierarchical backend), and messages name
                                  "host K (ranks A-B, ADDR)" instead of "rank K (ADDR)" */
};

/* The most floats an all-reduce among `size` ranks sends by the small-message path (a single
 * all-gather of the whole buffers, summed in rank order, instead of reduce-scatter +
 * all-gather): fewer ring steps, more bytes per link, so the limit shrinks as size grows. */
size_t dt_tcp_small_max(int size);

/* Fills opts with defaults (rank 0 of 1, master_fd -1, timeouts 0 = defaults). */
void dt_tcp_opts_init(struct dt_tcp_opts *o);

/* Joins the job. DT_EUSAGE for inconsistent options, DT_ERUNTIME when the rendezvous fails
 * (timeout naming the ranks that never arrived, master unreachable, ...). */
int dt_tcp_comm_create(struct dt_comm **out, const struct dt_tcp_opts *o);

#endif
