/* Rendezvous and ring construction; the protocol is described in rendezvous.h.
 *
 * Every socket here is non-blocking and every wait is a poll() bounded by a deadline, so the
 * rendezvous timeout is a hard limit. Incoming connections are `struct pending` state machines
 * (HELLO sent -> AUTH expected -> REGISTER expected on the master port) that read exactly the
 * bytes the next validated header allows into a fixed buffer; nothing is allocated per peer.
 */
#include "dist/rendezvous.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "dist/auth.h"
#include "dist/tcp.h"
#include "dist/wire.h"
#include "util/clock.h"
#include "util/err.h"
#include "util/log.h"

#define MAX_PENDING  64
#define REGISTER_MIN 16
#define REGISTER_MAX (REGISTER_MIN + DT_RDZV_HOST_MAX)
#define TABLE_ENTRY  12
#define TABLE_GRACE  5.0 /* seconds a rank waits for the table past its own timeout */
#define ADDR_STR     (INET6_ADDRSTRLEN + 16)

enum { ST_AUTH, ST_REGISTER };

struct pending {
    int fd, stage, rank;
    double deadline;
    bool have_hdr;
    size_t have, need;
    struct dt_wire_hdr hdr;
    struct dt_auth_server auth;
    char addr[ADDR_STR];
    uint8_t buf[DT_WIRE_HDR + REGISTER_MAX];
};

struct acceptor {
    int lfd;
    const struct dt_tcp_opts *o;
    const struct dt_auth_token *tok;
    bool master;   /* master port: expect REGISTER from ranks 1..size-1 */
    int want_rank; /* data port: the previous rank, once */
    int *fds;      /* master: by rank; data port: fds[0] */
    struct dt_rdzv_peer *peers;
    int remaining;
    int np;
    struct pending p[MAX_PENDING];
};

/* ---- sockets ------------------------------------------------------------------------------ */

static void sock_tune(int fd, const struct dt_tcp_opts *o)
{
    int one = 1, buf = o->sockbuf ? o->sockbuf : DT_TCP_DEFAULT_SOCKBUF;
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (buf > 0) {
        (void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof buf);
        (void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof buf);
    }
}

static void sockaddr_string(const struct sockaddr *sa, socklen_t len, char *out, size_t cap,
                            bool with_port)
{
    char host[NI_MAXHOST], serv[NI_MAXSERV];
    if (getnameinfo(sa, len, host, sizeof host, serv, sizeof serv,
                    NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
        snprintf(out, cap, "?");
        return;
    }
    const char *h = strncmp(host, "::ffff:", 7) == 0 && strchr(host, '.') ? host + 7 : host;
    bool v6 = strchr(h, ':') != NULL;
    if (!with_port)
        snprintf(out, cap, "%s", h);
    else
        snprintf(out, cap, v6 ? "[%s]:%s" : "%s:%s", h, serv);
}

static int local_port(int fd)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    if (getsockname(fd, (struct sockaddr *)&ss, &len) < 0)
        return -1;
    return ss.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
                                    : ntohs(((struct sockaddr_in *)&ss)->sin_port);
}

/* Listens on addr:port (addr NULL: every address, IPv6 dual-stack first, then IPv4). */
static int open_listener(const char *addr, int port, const struct dt_tcp_opts *o, int *out)
{
    const char *tries[2] = {addr, NULL};
    if (!addr)
        tries[0] = "::", tries[1] = "0.0.0.0";
    char serv[16];
    snprintf(serv, sizeof serv, "%d", port);
    int err = 0;
    for (int t = 0; t < 2 && tries[t]; t++) {
        struct addrinfo hints = {.ai_socktype = SOCK_STREAM,
                                 .ai_flags = AI_PASSIVE | AI_NUMERICSERV | AI_NUMERICHOST};
        struct addrinfo *res = NULL;
        if (getaddrinfo(tries[t], serv, &hints, &res) != 0)
            continue;
        for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
            int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
            if (fd < 0) {
                err = errno;
                continue;
            }
            int one = 1, zero = 0;
            (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
            if (ai->ai_family == AF_INET6 && !addr)
                (void)setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
            sock_tune(fd, o);
            if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && listen(fd, 128) == 0) {
                freeaddrinfo(res);
                *out = fd;
                return 0;
            }
            err = errno;
            close(fd);
        }
        freeaddrinfo(res);
    }
    return dt_fail(DT_ERUNTIME, "cannot listen on %s port %d: %s", addr ? addr : "any address",
                   port, err ? strerror(err) : "no usable address");
}

/* Connects to host:port (every address getaddrinfo gives, in order) before the deadline. */
static int connect_to(const char *host, int port, double deadline, const struct dt_tcp_opts *o,
                      int *out, const char *peer)
{
    char serv[16];
    snprintf(serv, sizeof serv, "%d", port);
    struct addrinfo hints = {
        .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV};
    struct addrinfo *res = NULL;
    int g = getaddrinfo(host, serv, &hints, &res);
    if (g != 0)
        return dt_fail(DT_ERUNTIME, "%s: cannot resolve %s: %s", peer, host, gai_strerror(g));
    int rc = 1;
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0) {
            rc = dt_fail(DT_ERUNTIME, "%s: socket: %s", peer, strerror(errno));
            continue;
        }
        sock_tune(fd, o);
        int c = connect(fd, ai->ai_addr, ai->ai_addrlen), err = c < 0 ? errno : 0;
        if (c < 0 && err == EINPROGRESS) {
            int waited = dt_wire_wait(fd, POLLOUT, deadline, peer);
            socklen_t sl = sizeof err;
            if (waited < 0)
                err = ETIMEDOUT;
            else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &sl) < 0)
                err = errno;
            c = err ? -1 : 0;
        }
        if (c == 0) {
            freeaddrinfo(res);
            *out = fd;
            return 0;
        }
        rc = dt_fail(DT_ERUNTIME, "%s: connect: %s", peer, strerror(err));
        close(fd);
    }
    freeaddrinfo(res);
    return rc < 0 ? rc : dt_fail(DT_ERUNTIME, "%s: %s has no usable address", peer, host);
}

int dt_rdzv_iface_address(const char *name, int family, char *out, size_t cap)
{
    struct ifaddrs *ifs;
    if (getifaddrs(&ifs) < 0)
        return dt_fail(DT_ERUNTIME, "getifaddrs: %s", strerror(errno));
    const struct ifaddrs *best = NULL;
    bool known = false;
    for (const struct ifaddrs *i = ifs; i; i = i->ifa_next) {
        if (strcmp(i->ifa_name, name) != 0)
            continue;
        known = true;
        if (!i->ifa_addr ||
            (i->ifa_addr->sa_family != AF_INET && i->ifa_addr->sa_family != AF_INET6))
            continue;
        if (i->ifa_addr->sa_family == AF_INET6 &&
            IN6_IS_ADDR_LINKLOCAL(&((struct sockaddr_in6 *)i->ifa_addr)->sin6_addr))
            continue; /* would need a scope id on every peer */
        int want = family == AF_UNSPEC ? AF_INET : family;
        if (!best || (i->ifa_addr->sa_family == want && best->ifa_addr->sa_family != want))
            best = i;
    }
    int rc = 0;
    if (!best)
        rc = dt_fail(DT_EUSAGE, "--iface %s: %s", name,
                     known ? "interface has no IPv4 or global IPv6 address" : "no such interface");
    else
        sockaddr_string(best->ifa_addr,
                        best->ifa_addr->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
                                                              : sizeof(struct sockaddr_in),
                        out, cap, false);
    freeifaddrs(ifs);
    return rc;
}

/* ---- accepting: non-blocking handshakes --------------------------------------------------- */

/* Rejected connections go through one limiter per process: the first DROP_VERBATIM of an
 * episode are logged as they come, the rest counted and summarised at most every
 * DROP_SUMMARY_S seconds and once more when the acceptor stops. A stranger that churns garbage
 * connections (a port scanner, a misconfigured job) then costs a few lines instead of megabytes
 * of log, and the count is still reported. An episode ends after DROP_QUIET_S seconds without
 * a rejection. (Process-wide: a process runs one acceptor at a time.) */
#define DROP_VERBATIM  5
#define DROP_SUMMARY_S 5.0
#define DROP_QUIET_S   60.0

static struct {
    int shown;          /* verbatim lines in this episode */
    long held;          /* rejections counted, not yet reported */
    double since, last; /* the first held rejection; the latest rejection */
    char addr[ADDR_STR], why[160];
} drops;

static void drops_flush(void)
{
    if (drops.held == 0)
        return;
    dt_log_warn("rendezvous: %ld more rejected connection%s in the last %.1f s (the last from "
                "%s: %s)",
                drops.held, drops.held == 1 ? "" : "s", dt_now() - drops.since, drops.addr,
                drops.why);
    drops.held = 0;
}

static void drops_note(const char *addr, const char *why)
{
    double now = dt_now();
    if (drops.last > 0 && now - drops.last > DROP_QUIET_S) {
        drops_flush();
        drops.shown = 0;
    }
    drops.last = now;
    if (drops.shown < DROP_VERBATIM) {
        drops.shown++;
        dt_log_warn("rendezvous: dropped connection from %s: %s%s", addr, why,
                    drops.shown == DROP_VERBATIM ? " (further rejections are counted and "
                                                   "summarised)"
                                                 : "");
        return;
    }
    if (drops.held++ == 0)
        drops.since = now;
    snprintf(drops.addr, sizeof drops.addr, "%s", addr);
    snprintf(drops.why, sizeof drops.why, "%s", why);
    if (now - drops.since >= DROP_SUMMARY_S)
        drops_flush();
}

/* The peer is told why, in an ABORT it reads where it waits for the next handshake message,
 * so a rank with the wrong token sees "authentication failed (wrong job token?)" and not just
 * "connection closed". Best effort: a peer that does not read gets nothing. */
static void pending_drop(struct acceptor *a, int i, const char *why)
{
    drops_note(a->p[i].addr, why);
    char text[DT_WIRE_ABORT_MAX];
    int len = snprintf(text, sizeof text, "rendezvous refused the connection: %s", why);
    if (len > 0)
        dt_wire_send_msg(a->p[i].fd, DT_OP_ABORT, 0, text,
                         (uint32_t)(len < (int)sizeof text ? len : (int)sizeof text - 1),
                         dt_now() + 0.2, a->p[i].addr);
    dt_clear_error();
    close(a->p[i].fd);
    a->p[i] = a->p[--a->np];
}

static void pending_take(struct acceptor *a, int i)
{
    a->p[i] = a->p[--a->np];
}

/* All slots taken: the connection that has been waiting longest without authenticating
 * makes room. A genuine rank authenticates in a round trip, so idle connections opened to
 * fill the slots cannot keep it out. */
static void evict_oldest(struct acceptor *a)
{
    int oldest = -1;
    for (int i = 0; i < a->np; i++)
        if (a->p[i].stage == ST_AUTH && (oldest < 0 || a->p[i].deadline < a->p[oldest].deadline))
            oldest = i;
    if (oldest >= 0)
        pending_drop(a, oldest, "too many connections waiting to authenticate");
}

static void pending_start(struct acceptor *a, int fd, const char *addr)
{
    if (a->np == MAX_PENDING)
        evict_oldest(a);
    if (a->np == MAX_PENDING) {
        drops_note(addr, "too many pending connections");
        close(fd);
        return;
    }
    struct pending *p = &a->p[a->np];
    memset(p, 0, offsetof(struct pending, buf));
    p->fd = fd;
    p->stage = ST_AUTH;
    p->need = DT_WIRE_HDR;
    p->deadline = dt_now() + (a->o->handshake_timeout > 0 ? a->o->handshake_timeout
                                                          : DT_TCP_DEFAULT_HANDSHAKE_TIMEOUT);
    snprintf(p->addr, sizeof p->addr, "%s", addr);
    uint8_t hello[DT_AUTH_HELLO_LEN];
    a->np++;
    int rc = dt_auth_server_hello(&p->auth, a->o->rank, hello);
    if (rc == 0)
        rc = dt_wire_send_msg(fd, DT_OP_HELLO, 0, hello, sizeof hello, dt_now() + 1.0, addr);
    if (rc < 0)
        pending_drop(a, a->np - 1, dt_last_error());
}

static int register_parse(struct acceptor *a, struct pending *p)
{
    const uint8_t *b = p->buf + DT_WIRE_HDR;
    uint32_t rank = dt_wire_get32(b), local_rank = dt_wire_get32(b + 4),
             size = dt_wire_get32(b + 8);
    unsigned port = dt_wire_get16(b + 12), hostlen = dt_wire_get16(b + 14);
    if (rank != (uint32_t)p->rank)
        return dt_fail(DT_ERUNTIME, "registers rank %u after authenticating as rank %d", rank,
                       p->rank);
    if (size != (uint32_t)a->o->size)
        return dt_fail(DT_ERUNTIME, "rank %u expects %u ranks, this job has %d", rank, size,
                       a->o->size);
    if (local_rank > 0x7fffffff || port == 0 || hostlen == 0 ||
        hostlen != p->hdr.len - REGISTER_MIN)
        return dt_fail(DT_ERUNTIME, "malformed REGISTER from rank %u", rank);
    for (unsigned i = 0; i < hostlen; i++)
        if (b[16 + i] <= 0x20 || b[16 + i] >= 0x7f)
            return dt_fail(DT_ERUNTIME, "rank %u: host name with byte 0x%02x", rank, b[16 + i]);
    if (a->fds[rank] >= 0)
        return dt_fail(DT_ERUNTIME, "rank %u already registered", rank);
    struct dt_rdzv_peer *e = &a->peers[rank];
    e->rank = (int)rank, e->local_rank = (int)local_rank, e->port = (int)port;
    memcpy(e->host, b + 16, hostlen);
    e->host[hostlen] = 0;
    return 0;
}

/* One complete message arrived on a pending connection: 1 when the connection is finished
 * and handed over, 0 to keep reading, < 0 to drop it. */
static int pending_message(struct acceptor *a, struct pending *p)
{
    if (p->stage == ST_AUTH) {
        uint8_t ok[DT_AUTH_OK_LEN];
        int rank;
        int rc = dt_auth_server_answer(&p->auth, a->tok, p->buf + DT_WIRE_HDR, &rank, ok, p->addr);
        if (rc < 0)
            return rc;
        if (a->master && (rank < 1 || rank >= a->o->size || a->fds[rank] >= 0))
            return dt_fail(DT_ERUNTIME, "claims rank %d, which is not an expected rank", rank);
        if (!a->master && rank != a->want_rank)
            return dt_fail(DT_ERUNTIME, "claims rank %d, expected rank %d", rank, a->want_rank);
        rc = dt_wire_send_msg(p->fd, DT_OP_AUTH_OK, 1, ok, sizeof ok, dt_now() + 1.0, p->addr);
        if (rc < 0)
            return rc;
        p->rank = rank;
        if (!a->master) {
            a->fds[0] = p->fd;
            a->remaining = 0;
            return 1;
        }
        p->stage = ST_REGISTER;
        p->have = 0, p->need = DT_WIRE_HDR, p->have_hdr = false;
        return 0;
    }
    int rc = register_parse(a, p);
    if (rc < 0)
        return rc;
    a->fds[p->rank] = p->fd;
    a->remaining--;
    return 1;
}

static int pending_read(struct acceptor *a, struct pending *p)
{
    ssize_t r = recv(p->fd, p->buf + p->have, p->need - p->have, MSG_DONTWAIT);
    if (r == 0)
        return dt_fail(DT_ERUNTIME, "connection closed during handshake");
    if (r < 0)
        return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR
                   ? 0
                   : dt_fail(DT_ERUNTIME, "recv: %s", strerror(errno));
    p->have += (size_t)r;
    if (p->have < p->need)
        return 0;
    if (!p->have_hdr) {
        bool auth = p->stage == ST_AUTH;
        int rc = dt_wire_check(&p->hdr, p->buf, auth ? DT_OP_AUTH : DT_OP_REGISTER, auth ? 0 : 1,
                               auth ? DT_AUTH_RESP_LEN : REGISTER_MIN,
                               auth ? DT_AUTH_RESP_LEN : REGISTER_MAX, "handshake");
        if (rc < 0)
            return rc;
        if (p->hdr.op == DT_OP_ABORT)
            return dt_fail(DT_ERUNTIME, "peer sent ABORT during handshake");
        p->have_hdr = true;
        p->need = DT_WIRE_HDR + p->hdr.len;
        if (p->have < p->need)
            return 0;
    }
    return pending_message(a, p);
}

static void acceptor_accept(struct acceptor *a)
{
    for (;;) {
        struct sockaddr_storage ss;
        socklen_t len = sizeof ss;
        int fd = accept4(a->lfd, (struct sockaddr *)&ss, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0)
            return; /* EAGAIN, or a connection that vanished: poll again */
        char addr[ADDR_STR];
        sockaddr_string((struct sockaddr *)&ss, len, addr, sizeof addr, true);
        int one = 1;
        (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        pending_start(a, fd, addr);
    }
}

/* Runs handshakes until every expected rank is in (0) or the deadline passes (1). */
static int acceptor_run(struct acceptor *a, double deadline)
{
    struct pollfd pfd[MAX_PENDING + 1];
    while (a->remaining > 0) {
        double now = dt_now(), wake = deadline;
        for (int i = a->np - 1; i >= 0; i--)
            if (a->p[i].deadline <= now)
                pending_drop(a, i, "handshake timed out");
        if (now >= deadline)
            return 1;
        for (int i = 0; i < a->np; i++) {
            pfd[i] = (struct pollfd){.fd = a->p[i].fd, .events = POLLIN};
            if (a->p[i].deadline < wake)
                wake = a->p[i].deadline;
        }
        pfd[a->np] = (struct pollfd){.fd = a->lfd, .events = POLLIN};
        int n = a->np + 1;
        int r = poll(pfd, (nfds_t)n, (int)((wake - now) * 1000) + 1);
        if (r < 0 && errno != EINTR)
            return dt_fail(DT_ERUNTIME, "rendezvous: poll: %s", strerror(errno));
        if (r <= 0)
            continue;
        /* Pending entries move when one finishes, so walk from the end; new ones come after. */
        int np = a->np;
        for (int i = np - 1; i >= 0 && a->remaining > 0; i--) {
            if (!pfd[i].revents)
                continue;
            int rc = pending_read(a, &a->p[i]);
            if (rc < 0)
                pending_drop(a, i, dt_last_error());
            else if (rc > 0)
                pending_take(a, i);
        }
        if (pfd[n - 1].revents && a->remaining > 0)
            acceptor_accept(a);
    }
    return 0;
}

static void acceptor_close(struct acceptor *a)
{
    for (int i = 0; i < a->np; i++)
        close(a->p[i].fd);
    a->np = 0;
    drops_flush();
}

/* ---- the table ---------------------------------------------------------------------------- */

static size_t table_max(int size)
{
    return 4 + (size_t)size * (TABLE_ENTRY + DT_RDZV_HOST_MAX);
}

static size_t table_encode(const struct dt_rdzv *r, uint8_t *out)
{
    size_t n = 4;
    dt_wire_put32(out, (uint32_t)r->size);
    for (int i = 0; i < r->size; i++) {
        const struct dt_rdzv_peer *e = &r->peers[i];
        size_t hl = strlen(e->host);
        dt_wire_put32(out + n, (uint32_t)e->rank);
        dt_wire_put32(out + n + 4, (uint32_t)e->local_rank);
        dt_wire_put16(out + n + 8, (uint16_t)e->port);
        dt_wire_put16(out + n + 10, (uint16_t)hl);
        memcpy(out + n + TABLE_ENTRY, e->host, hl);
        n += TABLE_ENTRY + hl;
    }
    return n;
}

static int table_decode(struct dt_rdzv *r, const uint8_t *in, size_t len, const char *peer)
{
    if (len < 4 || dt_wire_get32(in) != (uint32_t)r->size)
        return dt_fail(DT_ERUNTIME, "%s: rank table for %u ranks, expected %d", peer,
                       len < 4 ? 0 : dt_wire_get32(in), r->size);
    size_t n = 4;
    for (int i = 0; i < r->size; i++) {
        if (len - n < TABLE_ENTRY)
            return dt_fail(DT_ERUNTIME, "%s: rank table truncated at rank %d", peer, i);
        struct dt_rdzv_peer *e = &r->peers[i];
        unsigned hl = dt_wire_get16(in + n + 10);
        e->rank = (int)dt_wire_get32(in + n);
        e->local_rank = (int)dt_wire_get32(in + n + 4);
        e->port = dt_wire_get16(in + n + 8);
        if (e->rank != i || e->port == 0 || hl == 0 || hl > DT_RDZV_HOST_MAX ||
            len - n - TABLE_ENTRY < hl)
            return dt_fail(DT_ERUNTIME, "%s: malformed rank table entry %d", peer, i);
        memcpy(e->host, in + n + TABLE_ENTRY, hl);
        e->host[hl] = 0;
        n += TABLE_ENTRY + hl;
    }
    return n == len
               ? 0
               : dt_fail(DT_ERUNTIME, "%s: %zu stray bytes after the rank table", peer, len - n);
}

/* ---- the two sides of the rendezvous ------------------------------------------------------ */

static double rdzv_timeout(const struct dt_tcp_opts *o)
{
    return o->rendezvous_timeout > 0 ? o->rendezvous_timeout : DT_TCP_DEFAULT_RENDEZVOUS_TIMEOUT;
}

static void missing_ranks(const int *fds, int size, char *out, size_t cap)
{
    size_t n = 0;
    int shown = 0, missing = 0;
    out[0] = 0;
    for (int i = 1; i < size; i++) {
        if (fds[i] >= 0)
            continue;
        missing++;
        if (shown < 16 && n < cap) {
            n += (size_t)snprintf(out + n, cap - n, "%s%d", shown ? ", " : "", i);
            shown++;
        }
    }
    if (missing > shown && n < cap)
        snprintf(out + n, cap - n, " and %d more", missing - shown);
}

static void abort_all(int *fds, int size, const char *text)
{
    for (int i = 1; i < size; i++)
        if (fds[i] >= 0)
            (void)dt_wire_send_msg(fds[i], DT_OP_ABORT, 2, text, (uint32_t)strlen(text),
                                   dt_now() + 0.5, "rank");
}

static int master_gather(struct dt_rdzv *r, const struct dt_tcp_opts *o,
                         const struct dt_auth_token *tok, int lfd)
{
    int *fds = malloc((size_t)r->size * sizeof *fds);
    uint8_t *table = malloc(table_max(r->size));
    if (!fds || !table) {
        free(fds), free(table);
        return dt_fail(DT_ERUNTIME, "out of memory for the rank table");
    }
    for (int i = 0; i < r->size; i++)
        fds[i] = -1;
    struct acceptor *a = calloc(1, sizeof *a);
    int rc = a ? 0 : dt_fail(DT_ERUNTIME, "out of memory");
    if (a) {
        *a = (struct acceptor){.lfd = lfd,
                               .o = o,
                               .tok = tok,
                               .master = true,
                               .fds = fds,
                               .peers = r->peers,
                               .remaining = r->size - 1};
        double t = rdzv_timeout(o);
        rc = acceptor_run(a, dt_now() + t);
        acceptor_close(a);
        if (rc > 0) {
            char miss[200], text[DT_WIRE_ABORT_MAX];
            missing_ranks(fds, r->size, miss, sizeof miss);
            snprintf(text, sizeof text,
                     "rendezvous timed out after %.1f s: %s%s %s never arrived (%d of %d "
                     "registered)",
                     t, r->ranks_per_peer > 1 ? "host" : "rank",
                     r->size - 1 - a->remaining == r->size - 2 ? "" : "s", miss,
                     r->size - a->remaining, r->size);
            abort_all(fds, r->size, text);
            rc = dt_fail(DT_ERUNTIME, "%s", text);
        }
    }
    if (rc == 0) {
        size_t len = table_encode(r, table);
        for (int i = 1; i < r->size && rc == 0; i++) {
            char peer[DT_RDZV_HOST_MAX + 64];
            dt_rdzv_peer_name(r, i, peer, sizeof peer);
            rc = dt_wire_send_msg(fds[i], DT_OP_TABLE, 2, table, (uint32_t)len,
                                  dt_now() + rdzv_timeout(o), peer);
        }
    }
    for (int i = 0; i < r->size; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    free(a), free(fds), free(table);
    return rc;
}

/* This process in the ring's numbering, said as every host of the job says it: a leader of
 * the hierarchical backend is a host (ring index = host index) standing for several ranks. */
static void self_name(const struct dt_tcp_opts *o, char *out, size_t cap)
{
    int per = o->ranks_per_peer;
    if (per > 1)
        snprintf(out, cap, "host %d (ranks %d-%d)", o->rank, o->rank * per,
                 o->rank * per + per - 1);
    else
        snprintf(out, cap, "rank %d", o->rank);
}

/* Connects and authenticates to the master, retrying with exponential backoff. */
static int join_master(const struct dt_tcp_opts *o, const struct dt_auth_token *tok,
                       double deadline, int *out, const char *peer)
{
    double backoff = 0.05,
           hs = o->handshake_timeout > 0 ? o->handshake_timeout : DT_TCP_DEFAULT_HANDSHAKE_TIMEOUT;
    char last[300] = "";
    for (;;) {
        int fd = -1;
        int rc = connect_to(o->master_host, o->master_port, deadline, o, &fd, peer);
        if (rc == 0) {
            double d = dt_now() + hs < deadline ? dt_now() + hs : deadline;
            rc = dt_auth_client(fd, tok, o->rank, 0, d, peer);
            if (rc == 0) {
                *out = fd;
                return 0;
            }
            close(fd);
        }
        snprintf(last, sizeof last, "%s", dt_last_error());
        char me[64];
        self_name(o, me, sizeof me);
        dt_log_debug("rendezvous: %s: %s; retrying in %.2f s", me, last, backoff);
        if (dt_now() + backoff >= deadline)
            return dt_fail(DT_ERUNTIME,
                           "rendezvous timed out after %.1f s: %s could not join %s "
                           "(last error: %s)",
                           rdzv_timeout(o), me, peer, last);
        dt_sleep(backoff);
        backoff = backoff * 2 > 2.0 ? 2.0 : backoff * 2;
    }
}

static int client_register(struct dt_rdzv *r, const struct dt_tcp_opts *o,
                           const struct dt_auth_token *tok, int *data_lfd, char *host)
{
    char peer[DT_RDZV_HOST_MAX + 64];
    snprintf(peer, sizeof peer, strchr(o->master_host, ':') ? "master [%s]:%d" : "master %s:%d",
             o->master_host, o->master_port);
    double deadline = dt_now() + rdzv_timeout(o);
    int fd = -1;
    int rc = join_master(o, tok, deadline, &fd, peer);
    if (rc < 0)
        return rc;
    if (!o->iface) {
        /* Advertise the address this host used to reach the master: it routes back. */
        struct sockaddr_storage ss;
        socklen_t len = sizeof ss;
        getsockname(fd, (struct sockaddr *)&ss, &len);
        sockaddr_string((struct sockaddr *)&ss, len, host, DT_RDZV_HOST_MAX + 1, false);
    }
    rc = open_listener(o->iface ? host : NULL, 0, o, data_lfd);
    uint8_t reg[REGISTER_MAX];
    size_t hl = strlen(host);
    if (rc == 0) {
        dt_wire_put32(reg, (uint32_t)o->rank);
        dt_wire_put32(reg + 4, (uint32_t)o->local_rank);
        dt_wire_put32(reg + 8, (uint32_t)o->size);
        dt_wire_put16(reg + 12, (uint16_t)local_port(*data_lfd));
        dt_wire_put16(reg + 14, (uint16_t)hl);
        memcpy(reg + 16, host, hl);
        rc = dt_wire_send_msg(fd, DT_OP_REGISTER, 1, reg, (uint32_t)(16 + hl), deadline, peer);
    }
    uint8_t *table = rc == 0 ? malloc(table_max(r->size)) : NULL;
    uint32_t len = 0;
    if (rc == 0 && !table)
        rc = dt_fail(DT_ERUNTIME, "out of memory for the rank table");
    /* The master's own timeout runs from a little earlier than ours; wait past it so its
     * verdict (the table, or an ABORT naming the missing ranks) is what we report. */
    if (rc == 0) {
        rc = dt_wire_recv_msg(fd, DT_OP_TABLE, 2, table, 4, (uint32_t)table_max(r->size), &len,
                              deadline + TABLE_GRACE, peer);
        if (rc < 0 && dt_now() >= deadline + TABLE_GRACE)
            rc = dt_fail(DT_ERUNTIME, "rendezvous timed out after %.1f s: %s sent no rank table",
                         rdzv_timeout(o), peer);
    }
    if (rc == 0)
        rc = table_decode(r, table, len, peer);
    if (rc == 0 && (r->peers[o->rank].port != local_port(*data_lfd) ||
                    strcmp(r->peers[o->rank].host, host) != 0))
        rc = dt_fail(DT_ERUNTIME, "%s: rank table has the wrong entry for rank %d", peer, o->rank);
    free(table);
    close(fd);
    return rc;
}

/* ---- the ring ----------------------------------------------------------------------------- */

void dt_rdzv_peer_name(const struct dt_rdzv *r, int rank, char *out, size_t cap)
{
    int per = r->ranks_per_peer;
    if (per > 1)
        snprintf(out, cap, "host %d (ranks %d-%d, %s)", rank, rank * per, rank * per + per - 1,
                 r->peers[rank].host);
    else
        snprintf(out, cap, "rank %d (%s)", rank, r->peers[rank].host);
}

static int ring_connect_next(struct dt_rdzv *r, const struct dt_tcp_opts *o,
                             const struct dt_auth_token *tok, double deadline)
{
    int next = (o->rank + 1) % r->size, fd = -1;
    char peer[DT_RDZV_HOST_MAX + 64];
    dt_rdzv_peer_name(r, next, peer, sizeof peer);
    int rc = connect_to(r->peers[next].host, r->peers[next].port, deadline, o, &fd, peer);
    if (rc == 0) {
        rc = dt_auth_client(fd, tok, o->rank, next, deadline, peer);
        if (rc < 0)
            close(fd);
    }
    if (rc == 0)
        r->next_fd = fd;
    return rc;
}

static int ring_accept_prev(struct dt_rdzv *r, const struct dt_tcp_opts *o,
                            const struct dt_auth_token *tok, int lfd, double deadline)
{
    int prev = (o->rank + r->size - 1) % r->size, fd = -1;
    struct acceptor *a = calloc(1, sizeof *a);
    if (!a)
        return dt_fail(DT_ERUNTIME, "out of memory");
    *a = (struct acceptor){.lfd = lfd,
                           .o = o,
                           .tok = tok,
                           .want_rank = prev,
                           .fds = &fd,
                           .peers = r->peers,
                           .remaining = 1};
    int rc = acceptor_run(a, deadline);
    acceptor_close(a);
    free(a);
    if (rc > 0) {
        char peer[DT_RDZV_HOST_MAX + 64];
        dt_rdzv_peer_name(r, prev, peer, sizeof peer);
        char me[64];
        self_name(o, me, sizeof me);
        return dt_fail(DT_ERUNTIME, "ring setup timed out: %s never connected to %s", peer, me);
    }
    if (rc == 0)
        r->prev_fd = fd;
    return rc;
}

static int rdzv_check_opts(const struct dt_tcp_opts *o)
{
    if (o->size < 1 || o->size > DT_RDZV_MAX_SIZE || o->rank < 0 || o->rank >= o->size)
        return dt_fail(DT_EUSAGE, "tcp: rank %d of %d is out of range", o->rank, o->size);
    if (o->local_rank < 0 || (o->local_size > 0 && o->local_rank >= o->local_size))
        return dt_fail(DT_EUSAGE, "tcp: local rank %d of %d is out of range", o->local_rank,
                       o->local_size);
    if (o->size == 1)
        return 0;
    if (!o->master_host || !*o->master_host)
        return dt_fail(DT_EUSAGE, "tcp: no master address (--master HOST:PORT)");
    if (strlen(o->master_host) > DT_RDZV_HOST_MAX)
        return dt_fail(DT_EUSAGE, "tcp: master host name longer than %d bytes", DT_RDZV_HOST_MAX);
    if ((o->master_port < 1 || o->master_port > 65535) && !(o->rank == 0 && o->master_fd >= 0))
        return dt_fail(DT_EUSAGE, "tcp: master port %d out of range 1..65535", o->master_port);
    return 0;
}

int dt_rdzv_run(struct dt_rdzv *r, const struct dt_tcp_opts *o)
{
    memset(r, 0, sizeof *r);
    r->next_fd = r->prev_fd = -1;
    int rc = rdzv_check_opts(o);
    if (rc < 0)
        return rc;
    struct dt_auth_token tok;
    if (o->size > 1 &&
        (rc = dt_auth_token_set(&tok, o->token, o->token ? o->token_len : 0, "tcp")) < 0)
        return rc;
    r->size = o->size;
    r->ranks_per_peer = o->ranks_per_peer;
    r->peers = calloc((size_t)o->size, sizeof *r->peers);
    if (!r->peers)
        return dt_fail(DT_ERUNTIME, "out of memory for %d ranks", o->size);
    struct dt_rdzv_peer *me = &r->peers[o->rank];
    me->rank = o->rank, me->local_rank = o->local_rank;
    snprintf(me->host, sizeof me->host, "%s", o->master_host ? o->master_host : "localhost");
    if (o->size == 1)
        return 0;
    int data_lfd = -1, master_lfd = -1;
    if (o->iface) {
        int family = o->master_host && strchr(o->master_host, ':') ? AF_INET6 : AF_UNSPEC;
        rc = dt_rdzv_iface_address(o->iface, family, me->host, sizeof me->host);
    }
    if (rc == 0 && o->rank == 0) {
        if (o->master_fd >= 0) {
            master_lfd = o->master_fd;
            fcntl(master_lfd, F_SETFL, fcntl(master_lfd, F_GETFL) | O_NONBLOCK);
        } else {
            rc = open_listener(o->iface ? me->host : NULL, o->master_port, o, &master_lfd);
        }
        if (rc == 0)
            rc = open_listener(o->iface ? me->host : NULL, 0, o, &data_lfd);
        if (rc == 0) {
            me->port = local_port(data_lfd);
            rc = master_gather(r, o, &tok, master_lfd);
        }
        if (master_lfd >= 0 && master_lfd != o->master_fd)
            close(master_lfd);
    } else if (rc == 0) {
        rc = client_register(r, o, &tok, &data_lfd, me->host);
    }
    double deadline = dt_now() + rdzv_timeout(o);
    if (rc == 0 && o->rank == 0) {
        rc = ring_connect_next(r, o, &tok, deadline);
        if (rc == 0)
            rc = ring_accept_prev(r, o, &tok, data_lfd, deadline);
    } else if (rc == 0) {
        rc = ring_accept_prev(r, o, &tok, data_lfd, deadline);
        if (rc == 0)
            rc = ring_connect_next(r, o, &tok, deadline);
    }
    if (data_lfd >= 0)
        close(data_lfd);
    if (rc < 0)
        dt_rdzv_free(r);
    return rc;
}

void dt_rdzv_free(struct dt_rdzv *r)
{
    if (r->next_fd >= 0)
        close(r->next_fd);
    if (r->prev_fd >= 0)
        close(r->prev_fd);
    free(r->peers);
    r->peers = NULL;
    r->next_fd = r->prev_fd = -1;
}
