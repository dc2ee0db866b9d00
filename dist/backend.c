#include "dist/backend.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "dist/hier.h"
#include "dist/mpi.h"
#include "dist/rdvfile.h"
#include "dist/shm.h"
#include "dist/tcp.h"
#include "util/err.h"
#include "util/parse.h"

static const char *const names[] = {"single", "shm", "tcp", "hier", "mpi"};

const char *dt_backend_name(enum dt_backend b)
{
    return (int)b >= 0 && (size_t)b < sizeof names / sizeof names[0] ? names[b] : "unknown";
}

int dt_backend_parse(const char *name, enum dt_backend *out)
{
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strcmp(name, names[i])) {
            *out = (enum dt_backend)i;
            return 0;
        }
    return dt_fail(DT_EUSAGE, "unknown backend '%s' (valid: single, shm, tcp, hier, mpi)", name);
}

static const char *const request_names[] = {
    [DT_BACKEND_REQUEST_AUTO] = "auto", [DT_BACKEND_REQUEST_SHM] = "shm",
    [DT_BACKEND_REQUEST_TCP] = "tcp",   [DT_BACKEND_REQUEST_HIER] = "hier",
    [DT_BACKEND_REQUEST_MPI] = "mpi",
};
_Static_assert(sizeof request_names / sizeof request_names[0] == DT_BACKEND_REQUEST_COUNT,
               "one name per backend request");
const struct dt_names dt_backend_request_names = DT_NAMES(request_names);

int dt_backend_choose(enum dt_backend_request request, struct dt_backend_job *j)
{
    const char *name = dt_names_name(&dt_backend_request_names, (int)request);
    const char *launcher = j->launcher ? j->launcher : "flags";
    bool one_host = j->nodes == 1 && !j->per_rank;
    switch (request) {
    case DT_BACKEND_REQUEST_AUTO:
        if (j->world == 1)
            j->backend = DT_BACKEND_SINGLE;
        else if (one_host)
            j->backend = DT_BACKEND_SHM;
        else
            j->backend = j->per_rank ? DT_BACKEND_TCP : DT_BACKEND_HIER;
        return 0;
    case DT_BACKEND_REQUEST_MPI:
        if (!j->per_rank || strcmp(launcher, "ompi"))
            return dt_fail(DT_EUSAGE, "dist.backend mpi: start dtrain with mpirun, one process "
                                      "per rank (found no Open MPI environment)");
        j->backend = DT_BACKEND_MPI;
        return 0;
    case DT_BACKEND_REQUEST_TCP:
        j->backend = DT_BACKEND_TCP;
        break;
    case DT_BACKEND_REQUEST_SHM:
    case DT_BACKEND_REQUEST_HIER:
        if (j->per_rank)
            return dt_fail(DT_EUSAGE,
                           "dist.backend %s: ranks started by %s do not share a parent; use tcp "
                           "or mpi, or start one dtrain per host with --instances",
                           name, launcher);
        if (request == DT_BACKEND_REQUEST_SHM && !one_host)
            return dt_fail(DT_EUSAGE, "dist.backend shm: the job spans %d hosts; use hier or tcp",
                           j->nodes);
        j->backend = one_host ? DT_BACKEND_SHM : DT_BACKEND_HIER;
        break;
    default:
        return dt_fail(DT_EUSAGE, "dist.backend: unknown backend request %d", (int)request);
    }
    if (j->world == 1)
        j->backend = DT_BACKEND_SINGLE;
    return 0;
}

int dt_backend_env(int *sockbuf, const char **iface)
{
    const char *v = getenv("DTRAIN_SOCKET_BUFFER");
    const char *i = getenv("DTRAIN_SOCKET_IFNAME");
    *sockbuf = 0;
    *iface = i && *i ? i : NULL;
    if (!v || !*v)
        return 0;
    size_t bytes = 0;
    int rc = dt_parse_bytes("DTRAIN_SOCKET_BUFFER", v, (size_t)1 << 30, &bytes);
    if (rc == 0)
        *sockbuf = (int)bytes;
    return rc;
}

void dt_backend_job_init(struct dt_backend_job *j)
{
    memset(j, 0, sizeof *j);
    j->world = j->local_n = j->host_ranks = j->nodes = j->groups = 1;
    j->master_fd = -1;
}

static bool uses_tcp(const struct dt_backend_job *j)
{
    return j->backend == DT_BACKEND_TCP || j->backend == DT_BACKEND_HIER;
}

/* Every rank of the job runs on this machine, forked from this process. */
static bool whole_job_here(const struct dt_backend_job *j)
{
    return !j->per_rank && j->local_n == j->world;
}

/* Rank 0's listening socket, bound before the fork on a free loopback port, so concurrent
 * jobs on one machine never collide on a fixed port. */
static int bind_loopback_master(struct dt_backend_job *j)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) < 0 || listen(fd, 1024) < 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) < 0) {
        if (fd >= 0)
            close(fd);
        return dt_fail(DT_ERUNTIME, "cannot listen on 127.0.0.1 for the rendezvous");
    }
    j->master_fd = fd;
    j->master_port = ntohs(a.sin_port);
    return 0;
}

/* The job's secret: the user's (DTRAIN_TOKEN or a token file) when given or when ranks on
 * other machines must share it; otherwise, with every rank forked here, a fresh random one. */
static int load_token(struct dt_backend_job *j)
{
    if (!whole_job_here(j) || j->token_file || getenv("DTRAIN_TOKEN"))
        return dt_auth_token_load(&j->token, j->token_file);
    char hex[2 * 32 + 1];
    int rc = dt_auth_token_generate(hex);
    return rc ? rc : dt_auth_token_set(&j->token, hex, strlen(hex), "generated token");
}

/* Rank 0: a free loopback port and a fresh token, published in a private 0600 file
 * (dist/rdvfile.h says where and what is refused). */
static int publish_rendezvous(struct dt_backend_job *j)
{
    char hex[2 * 32 + 1];
    int rc = dt_rdvfile_path(j->local_key, j->rendezvous_file, sizeof j->rendezvous_file);
    if (rc == 0)
        rc = bind_loopback_master(j);
    if (rc == 0)
        rc = dt_auth_token_generate(hex);
    if (rc == 0)
        rc = dt_auth_token_set(&j->token, hex, strlen(hex), "generated token");
    if (rc == 0)
        rc = dt_rdvfile_publish(j->rendezvous_file, j->master_port, hex);
    if (rc)
        j->rendezvous_file[0] = '\0'; /* not ours to remove */
    return rc;
}

/* The other ranks: wait for rank 0's file (from a live rank 0: a file left by a killed job is
 * not read), then take its port and token. A file or directory that is refused ends the wait
 * at once: it will not get better. */
static int read_rendezvous(struct dt_backend_job *j)
{
    char path[256];
    int rc = dt_rdvfile_path(j->local_key, path, sizeof path);
    if (rc < 0)
        return rc;
    double limit = j->rendezvous_timeout > 0 ? j->rendezvous_timeout : 120;
    for (double waited = 0; waited < limit; waited += 0.02) {
        char hex[DT_RDVFILE_HEX_MAX + 2];
        int port = 0;
        rc = dt_rdvfile_read(path, &port, hex);
        if (rc < 0)
            return rc;
        if (rc == 0) {
            j->master_port = port;
            return dt_auth_token_set(&j->token, hex, strlen(hex), path);
        }
        usleep(20000);
    }
    return dt_fail(DT_ERUNTIME,
                   "rendezvous: rank %d waited %g s for rank 0 to publish %s (is rank 0 "
                   "running on this host?)",
                   j->rank_base, limit, path);
}

int dt_backend_prepare(struct dt_backend_job *j)
{
    const char *iface = NULL;
    int rc = dt_backend_env(&j->sockbuf, &iface);
    if (rc)
        return rc;
    if (!j->iface)
        j->iface = iface;
    if (j->groups < 1 || j->groups > DT_BACKEND_MAX_GROUPS || j->local_n % j->groups)
        return dt_fail(DT_EUSAGE, "%d ranks do not split into %d hosts", j->local_n, j->groups);
    if (uses_tcp(j) && j->local_key)
        rc = j->rank_base == 0 ? publish_rendezvous(j) : read_rendezvous(j);
    else if (uses_tcp(j))
        rc = load_token(j);
    if (rc) {
        dt_backend_release(j);
        return rc;
    }
    bool forks = !j->per_rank && !(j->local_n == 1 && j->backend == DT_BACKEND_SINGLE);
    if (forks && (j->backend == DT_BACKEND_SHM || j->backend == DT_BACKEND_HIER)) {
        for (int g = 0; g < j->groups && !rc; g++) {
            rc = dt_shm_segment_create(&j->seg[g], j->local_n / j->groups, 0, j->timeout);
            if (rc == 0)
                j->nsegs++;
        }
    }
    if (!rc && forks && uses_tcp(j) && whole_job_here(j) && !j->master_host)
        rc = bind_loopback_master(j);
    j->prepared = rc == 0;
    if (rc)
        dt_backend_release(j);
    return rc;
}

static int tcp_join(const struct dt_backend_job *j, int rank, int size, int local_rank,
                    int local_size, int ranks_per_peer, struct dt_comm **out)
{
    struct dt_tcp_opts t;
    dt_tcp_opts_init(&t);
    t.rank = rank, t.size = size, t.local_rank = local_rank, t.local_size = local_size;
    t.master_host = j->master_host ? j->master_host : "127.0.0.1";
    t.master_port = j->master_port;
    t.master_fd = rank == 0 ? j->master_fd : -1;
    t.token = j->token.bytes, t.token_len = j->token.len;
    t.iface = j->iface;
    t.rendezvous_timeout = j->rendezvous_timeout;
    t.timeout = j->timeout;
    t.ranks_per_peer = ranks_per_peer;
    t.sockbuf = j->sockbuf;
    t.oversubscribed = j->oversubscribed;
    return dt_tcp_comm_create(out, &t);
}

int dt_backend_join(const struct dt_backend_job *j, int r, struct dt_comm **out)
{
    int local_rank = j->per_rank ? j->local_rank : r;
    switch (j->backend) {
    case DT_BACKEND_SINGLE:
        return (*out = dt_comm_single()) ? 0 : dt_fail(DT_ERUNTIME, "out of memory");
    case DT_BACKEND_SHM:
        return dt_shm_comm_create(out, j->seg[0], r);
    case DT_BACKEND_TCP:
        return tcp_join(j, j->rank_base + r, j->world, local_rank, j->host_ranks, 1, out);
    case DT_BACKEND_MPI:
        return dt_mpi_comm_create(out);
    case DT_BACKEND_HIER: {
        /* Host-major ranks, as dist/hier.h wants them: group g holds ranks [g*per, (g+1)*per). */
        int per = j->local_n / j->groups, g = r / per, local = r % per;
        int node = j->node_base + g;
        struct dt_comm *lc = NULL, *leaders = NULL;
        int rc = dt_shm_comm_create(&lc, j->seg[g], local);
        if (rc == 0 && local == 0)
            rc = tcp_join(j, node, j->nodes, 0, 1, per, &leaders);
        if (rc) {
            if (lc)
                lc->close(lc);
            return rc;
        }
        return dt_hier_comm_create(out, lc, leaders, node, j->nodes);
    }
    }
    return dt_fail(DT_EUSAGE, "internal error: backend %d", (int)j->backend);
}

void dt_backend_abort(struct dt_backend_job *j, const char *reason)
{
    for (int i = 0; i < j->nsegs; i++)
        dt_shm_segment_abort(j->seg[i], reason);
}

void dt_backend_release(struct dt_backend_job *j)
{
    for (int i = 0; i < j->nsegs; i++)
        dt_shm_segment_destroy(j->seg[i]);
    j->nsegs = 0;
    if (j->master_fd >= 0)
        close(j->master_fd);
    j->master_fd = -1;
    if (j->rendezvous_file[0])
        unlink(j->rendezvous_file);
    j->rendezvous_file[0] = '\0';
    j->prepared = false;
}
