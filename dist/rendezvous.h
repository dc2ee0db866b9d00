/* Rendezvous: how the ranks of a TCP job find each other and build the ring.
 *
 * Rank 0 listens on the master port. Every other rank connects (retrying with exponential
 * backoff until the rendezvous timeout), proves it holds the job token (dist/auth.h), and
 * registers {rank, local rank, host, data port}; its data port is an ephemeral listening
 * socket it opened first. When all ranks are in, rank 0 sends everyone the table and the
 * master connections close. Then each rank connects to its next neighbour's data port and
 * accepts its previous neighbour, both authenticated again (rank 0 connects first, the others
 * accept first, so the ring closes in one pass without deadlock).
 *
 * Rank 0 and every data port handle incoming connections as non-blocking state machines with
 * a per-connection handshake deadline: a silent, garbage-sending or wrong-token connection is
 * dropped and logged (dt_log_warn with its address) while the genuine ranks proceed. Only the
 * expected ranks are accepted, each once.
 */
#ifndef DT_DIST_RENDEZVOUS_H
#define DT_DIST_RENDEZVOUS_H

#include <stddef.h>

struct dt_tcp_opts;

#define DT_RDZV_HOST_MAX 255
#define DT_RDZV_MAX_SIZE 65536

struct dt_rdzv_peer {
    int rank, local_rank, port;
    char host[DT_RDZV_HOST_MAX + 1]; /* the address the rank advertised (numeric or name) */
};

struct dt_rdzv {
    int size;
    int ranks_per_peer;         /* from the options: how members are named in messages */
    struct dt_rdzv_peer *peers; /* size entries, index = rank */
    int next_fd, prev_fd;       /* ring connections (-1 when size == 1) */
};

/* "rank K (ADDR)", or "host K (ranks A-B, ADDR)" when each member stands for a host. */
void dt_rdzv_peer_name(const struct dt_rdzv *r, int rank, char *out, size_t cap);

/* Runs the whole rendezvous; on success r owns the table and the two ring sockets. */
int dt_rdzv_run(struct dt_rdzv *r, const struct dt_tcp_opts *o);
void dt_rdzv_free(struct dt_rdzv *r);

/* Numeric address of interface `name` (getifaddrs), preferring `family` (AF_INET, AF_INET6 or
 * AF_UNSPEC for IPv4 first). DT_EUSAGE naming the interface when it has no usable address. */
int dt_rdzv_iface_address(const char *name, int family, char *out, size_t cap);

#endif
