/* The TCP ring communicator; the algorithms and failure semantics are described in tcp.h.
 *
 * One engine, xfer_run(), does every collective step: it sends a byte range to the next rank
 * and receives a byte range from the previous rank at the same time, in DATA frames of at most
 * FRAME bytes, on the two non-blocking sockets. The receiver knows the exact length of every
 * frame it expects, so a frame header is validated before a byte of its payload reaches the
 * caller's buffer. Received chunks are either stored in place (all-gather, broadcast) or summed
 * into the buffer (reduce-scatter, via a small scratch ring, right after each recv while the
 * bytes are in cache). A relayed send (broadcast, small all-reduce) is gated on what has
 * arrived, which pipelines the ring chunk by chunk.
 *
 * Where the time goes, measured on 2 ranks over loopback (docs/multihost.md has the numbers):
 *  - Small messages cost wake-ups, not bytes: a rank that sleeps in poll() until its peer's
 *    bytes arrive pays an idle exit (in a VM a halted vCPU woken by an IPI: 10-40 us). So the
 *    engine spins on the non-blocking sockets for SPIN_S after its last progress before it
 *    sleeps (not on an oversubscribed host, where the spinner would hold the core of the rank
 *    it waits for), and messages up to dt_tcp_small_max() floats skip the 2(size-1)-step ring
 *    for one pipelined all-gather of the whole buffers (size-1 steps), summed in rank order.
 *  - Large messages are bound by the kernel's copies in and out of socket buffers, which are
 *    fast while the bytes in flight stay in cache and several times slower once they spill to
 *    DRAM. The ring therefore runs in rounds of at most ROUND_STEP bytes per step rather than
 *    one pass over segments of n/size floats.
 */
#include "dist/tcp.h"

#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "dist/bf16_sum.h"
#include "dist/rendezvous.h"
#include "dist/wire.h"
#include "util/clock.h"
#include "util/err.h"
#include "util/log.h"

#define FRAME          (2048u << 10) /* bytes of payload per DATA frame */
#define RELAY_FRAME    (256u << 10)  /* broadcast: relayed frame by frame, so smaller ones */
#define ABORT_DEADLINE 0.5           /* seconds spent telling the next rank we gave up */
/* Tuning knobs, overridable with -D for measurements (values chosen in docs/multihost.md). */
#ifndef SPIN_S
#define SPIN_S 50e-6 /* seconds of spinning on the sockets before sleeping in poll() */
#endif
#ifndef ROUND_STEP
#define ROUND_STEP (512u << 10) /* ring all-reduce: most bytes per step (0: one pass) */
#endif
#ifndef SMALL_LINK_BYTES
#define SMALL_LINK_BYTES (256u << 10) /* small path: most bytes one link carries */
#endif
#define SCRATCH (256u << 10) /* reduce-scatter receive ring, well inside L2 */

struct link {
    int fd, rank;
    uint32_t seq; /* next DATA sequence number in this link's direction */
    char name[DT_RDZV_HOST_MAX + 64];
};

struct tcp {
    struct dt_rdzv rdzv;
    struct link next, prev;
    double timeout;
    double spin;       /* seconds of spinning after the last progress before poll() */
    float *scratch;    /* SCRATCH bytes for reduce-scatter */
    uint8_t *gather;   /* size * dt_tcp_small_max(size) floats: the small path's buffers */
    float *ones;       /* size floats for barrier */
    dt_bf16 *stage[2]; /* bf16 ring: the segment being sent and the one arriving */
    size_t stage_cap;  /* elements in each */
    int failed;        /* 0, or the status every later call returns */
    char error[1024];
};

/* One ring step: send s[0..slen) to next while receiving r[0..rlen) from prev, both cut into
 * frames of `frame` bytes (the last shorter), which every rank of a collective agrees on. */
struct xfer {
    size_t frame;
    const uint8_t *s;
    size_t slen, ssent; /* payload bytes sent */
    size_t sframe_end;  /* end of the frame being sent */
    /* Relay: s[0..sbase + *savail) has arrived. A frame is started only once all of it has,
     * so a rank that fails mid-frame can always finish the frame with real bytes. */
    const size_t *savail;
    size_t sbase;
    uint8_t shdr[DT_WIRE_HDR];
    size_t shdr_sent;
    bool sin_frame;
    uint8_t *r;
    size_t rlen, rdone; /* payload bytes received */
    size_t rframe_start, rframe_len;
    size_t rreduced; /* bytes of the frame already summed into r */
    uint8_t rhdr[DT_WIRE_HDR];
    size_t rhdr_have;
    bool reduce;   /* sum received floats into r instead of storing them */
    bool bf16;     /* reduce: the payload is bf16, r still the fp32 sums (dt_bf16_add_own_n) */
    bool rprivate; /* r is our scratch: payload may land before its header is checked */
};

static bool send_pending(const struct xfer *x)
{
    return x->ssent < x->slen || (x->sin_frame && x->shdr_sent < DT_WIRE_HDR);
}

static size_t next_frame_len(const struct xfer *x)
{
    return x->slen - x->ssent < x->frame ? x->slen - x->ssent : x->frame;
}

/* Whether sending can go on now: inside a frame, or the next frame's bytes are all here. */
static bool send_ready(const struct xfer *x)
{
    return x->sin_frame || !x->savail || x->sbase + *x->savail >= x->ssent + next_frame_len(x);
}

/* Sends as much as the socket takes now. */
static int xfer_send(struct tcp *t, struct xfer *x, bool *progress)
{
    while (send_pending(x)) {
        if (!x->sin_frame) {
            if (!send_ready(x))
                return 0; /* waiting for bytes to relay */
            size_t len = next_frame_len(x);
            dt_wire_pack(x->shdr, DT_OP_DATA, t->next.seq++, (uint32_t)len);
            x->shdr_sent = 0;
            x->sframe_end = x->ssent + len;
            x->sin_frame = true;
        }
        struct iovec iov[2];
        int n = 0;
        if (x->shdr_sent < DT_WIRE_HDR)
            iov[n++] = (struct iovec){x->shdr + x->shdr_sent, DT_WIRE_HDR - x->shdr_sent};
        if (x->sframe_end > x->ssent)
            iov[n++] = (struct iovec){(void *)(x->s + x->ssent), x->sframe_end - x->ssent};
        struct msghdr mh = {.msg_iov = iov, .msg_iovlen = (size_t)n};
        ssize_t w = sendmsg(t->next.fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return 0;
            return dt_fail(DT_ERUNTIME, "lost %s: send: %s", t->next.name, strerror(errno));
        }
        *progress = true;
        size_t h = DT_WIRE_HDR - x->shdr_sent < (size_t)w ? DT_WIRE_HDR - x->shdr_sent : (size_t)w;
        x->shdr_sent += h;
        x->ssent += (size_t)w - h;
        if (x->shdr_sent == DT_WIRE_HDR && x->ssent == x->sframe_end)
            x->sin_frame = false;
    }
    return 0;
}

static void reduce_into(float *dst, const float *src, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] += src[i];
}

/* One recvmsg into a (and then b, when nb > 0). */
static int recv_some(struct tcp *t, void *a, size_t na, void *b, size_t nb, size_t *got)
{
    struct iovec iov[2] = {{a, na}, {b, nb}};
    struct msghdr mh = {.msg_iov = iov, .msg_iovlen = nb ? 2 : 1};
    ssize_t r = recvmsg(t->prev.fd, &mh, MSG_DONTWAIT);
    if (r > 0) {
        *got = (size_t)r;
        return 0;
    }
    *got = 0;
    if (r == 0)
        return dt_fail(DT_ERUNTIME, "lost %s: connection closed", t->prev.name);
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
        return 0;
    return dt_fail(DT_ERUNTIME, "lost %s: recv: %s", t->prev.name, strerror(errno));
}

static size_t frame_want(const struct xfer *x)
{
    return x->rlen - x->rdone < x->frame ? x->rlen - x->rdone : x->frame;
}

/* A frame header arrived (with `body` bytes of what followed it already in `early`): validate
 * it against what this step expects. 1 for an ABORT (the error is set and `abort_text` holds
 * the text to pass on). */
static int xfer_header(struct tcp *t, struct xfer *x, const uint8_t *early, size_t body,
                       char *abort_text)
{
    struct dt_wire_hdr h;
    size_t want = frame_want(x);
    int rc = dt_wire_check(&h, x->rhdr, DT_OP_DATA, t->prev.seq, (uint32_t)want, (uint32_t)want,
                           t->prev.name);
    if (rc < 0)
        return dt_fail_context(rc, "lost");
    if (h.op == DT_OP_ABORT) {
        dt_wire_recv_abort_rest(t->prev.fd, &h, early, body, dt_now() + ABORT_DEADLINE,
                                t->prev.name, abort_text);
        return 1;
    }
    t->prev.seq++;
    x->rframe_start = x->rdone;
    x->rframe_len = want;
    x->rreduced = 0;
    return 0;
}

/* Where the payload byte at offset `at` of the current frame goes: the scratch (a ring of
 * SCRATCH bytes) when reducing, else straight into r; *room: how many bytes fit from there. */
static uint8_t *recv_dst(struct tcp *t, const struct xfer *x, size_t at, size_t len, size_t *room)
{
    size_t left = len - at;
    if (!x->reduce) {
        *room = left;
        return x->r + x->rdone;
    }
    size_t off = at % SCRATCH;
    *room = SCRATCH - off < left ? SCRATCH - off : left;
    return (uint8_t *)t->scratch + off;
}

/* Sums the whole elements of the current frame received since the last call (still in cache)
 * into the fp32 sums at r: payload byte b is element b / esize. SCRATCH is a multiple of both
 * element sizes, so no element straddles the scratch ring's end. */
static void reduce_received(struct tcp *t, struct xfer *x)
{
    size_t esize = x->bf16 ? sizeof(dt_bf16) : sizeof(float);
    size_t at = x->rdone - x->rframe_start, end = at - at % esize;
    if (end == x->rreduced)
        return;
    float *dst = (float *)x->r + (x->rframe_start + x->rreduced) / esize;
    const void *src = (uint8_t *)t->scratch + x->rreduced % SCRATCH;
    if (x->bf16)
        dt_bf16_add_own_n(dst, src, (end - x->rreduced) / esize);
    else
        reduce_into(dst, src, (end - x->rreduced) / esize);
    x->rreduced = end;
}

/* Receives what has arrived. Into private memory (reduce scratch, small-path buffers) a frame
 * is read with one recvmsg for header and payload together; into the caller's buffer the
 * header is read and checked first, so a bad frame never writes a byte there. */
static int xfer_recv(struct tcp *t, struct xfer *x, bool *progress, char *abort_text)
{
    while (x->rdone < x->rlen) {
        size_t got, body;
        if (x->rhdr_have < DT_WIRE_HDR) {
            size_t room = 0;
            uint8_t *early =
                x->reduce || x->rprivate ? recv_dst(t, x, 0, frame_want(x), &room) : NULL;
            size_t hl = DT_WIRE_HDR - x->rhdr_have;
            int rc = recv_some(t, x->rhdr + x->rhdr_have, hl, early, room, &got);
            if (rc < 0 || got == 0)
                return rc;
            *progress = true;
            body = got > hl ? got - hl : 0;
            x->rhdr_have += got - body;
            if (x->rhdr_have < DT_WIRE_HDR)
                continue;
            rc = xfer_header(t, x, early, body, abort_text);
            if (rc != 0)
                return rc;
        } else {
            size_t room, at = x->rdone - x->rframe_start;
            uint8_t *dst = recv_dst(t, x, at, x->rframe_len, &room);
            int rc = recv_some(t, dst, room, NULL, 0, &got);
            if (rc < 0 || got == 0)
                return rc;
            *progress = true;
            body = got;
        }
        x->rdone += body;
        if (x->reduce)
            reduce_received(t, x);
        if (x->rdone == x->rframe_start + x->rframe_len)
            x->rhdr_have = 0;
    }
    return 0;
}

/* Marks the communicator failed, tells the next rank why (finishing the frame in flight so
 * the ABORT lands on a frame boundary) and closes both links so neighbours notice at once. */
static int tcp_fail(struct tcp *t, struct xfer *x, const char *why, bool next_is_lost)
{
    char forward[DT_WIRE_ABORT_MAX + 1];
    snprintf(forward, sizeof forward, "%s", why);
    snprintf(t->error, sizeof t->error, "%s", dt_last_error());
    t->failed = -DT_ERUNTIME;
    if (t->next.fd >= 0 && !next_is_lost) {
        double deadline = dt_now() + ABORT_DEADLINE;
        int rc = 0;
        if (x && x->sin_frame) {
            rc = dt_wire_send_all(t->next.fd, x->shdr + x->shdr_sent, DT_WIRE_HDR - x->shdr_sent,
                                  deadline, t->next.name);
            if (rc == 0)
                rc = dt_wire_send_all(t->next.fd, x->s + x->ssent, x->sframe_end - x->ssent,
                                      deadline, t->next.name);
        }
        size_t len = strnlen(forward, DT_WIRE_ABORT_MAX);
        if (rc == 0)
            dt_wire_send_msg(t->next.fd, DT_OP_ABORT, t->next.seq, forward, (uint32_t)len, deadline,
                             t->next.name);
    }
    for (struct link *l = &t->next; l; l = l == &t->next ? &t->prev : NULL)
        if (l->fd >= 0) {
            close(l->fd);
            l->fd = -1;
        }
    t->rdzv.next_fd = t->rdzv.prev_fd = -1;
    dt_fail(DT_ERUNTIME, "%s", t->error);
    return t->failed;
}

static int xfer_run(struct tcp *t, struct xfer *x)
{
    char abort_text[DT_WIRE_ABORT_MAX + 1] = "";
    double last = dt_now();
    for (;;) {
        bool progress = false;
        int rc = xfer_send(t, x, &progress);
        if (rc < 0)
            return tcp_fail(t, x, dt_last_error(), true);
        rc = xfer_recv(t, x, &progress, abort_text);
        if (rc != 0)
            return tcp_fail(t, x, rc > 0 ? abort_text : dt_last_error(), false);
        bool sp = send_pending(x), rp = x->rdone < x->rlen;
        if (!sp && !rp)
            return 0;
        double now = dt_now();
        if (progress)
            last = now;
        if (now - last < t->spin)
            continue;
        if (now - last >= t->timeout) {
            const struct link *l = rp ? &t->prev : &t->next;
            dt_fail(DT_ERUNTIME, "lost %s: no progress for %.1f s (collective timeout)", l->name,
                    t->timeout);
            return tcp_fail(t, x, dt_last_error(), !rp);
        }
        struct pollfd p[2];
        int n = 0;
        if (sp && send_ready(x))
            p[n++] = (struct pollfd){.fd = t->next.fd, .events = POLLOUT};
        if (rp)
            p[n++] = (struct pollfd){.fd = t->prev.fd, .events = POLLIN};
        int ms = (int)((last + t->timeout - now) * 1000) + 1;
        if (poll(p, (nfds_t)n, ms > 1000 ? 1000 : ms) < 0 && errno != EINTR) {
            dt_fail(DT_ERUNTIME, "tcp: poll: %s", strerror(errno));
            return tcp_fail(t, x, dt_last_error(), false);
        }
    }
}

static int tcp_check(struct tcp *t)
{
    if (t->failed)
        return dt_fail(-t->failed, "%s", t->error);
    return 0;
}

static int ring_step(struct tcp *t, const void *s, size_t slen, void *r, size_t rlen, bool reduce)
{
    if (slen == 0 && rlen == 0)
        return 0;
    struct xfer x = {.frame = FRAME, .s = s, .slen = slen, .r = r, .rlen = rlen, .reduce = reduce};
    return xfer_run(t, &x);
}

static size_t seg_off(size_t n, int size, int i)
{
    size_t base = n / (size_t)size, rem = n % (size_t)size;
    return (size_t)i * base + ((size_t)i < rem ? (size_t)i : rem);
}

size_t dt_tcp_small_max(int size)
{
    return size < 2 ? 0 : SMALL_LINK_BYTES / (size_t)(size - 1) / sizeof(float);
}

/* Small messages: one pipelined all-gather of the whole buffers around the ring (each rank
 * relays what it received), then every rank sums the size buffers in rank order 0..size-1, so
 * all end bit-identical. Block k of t->gather holds rank (rank - k) mod size's buffer; the send
 * stream is blocks 0..size-2 and the receive stream blocks 1..size-1 of the same area, so a
 * block is forwarded as soon as it arrives. */
static int small_allreduce(struct tcp *t, int size, int rank, float *buf, size_t n)
{
    size_t bytes = n * sizeof(float);
    struct xfer x = {.frame = bytes, /* a block per frame: relayed as soon as it is whole */
                     .r = t->gather + bytes,
                     .rlen = (size_t)(size - 1) * bytes,
                     .rprivate = true};
    if (size == 2) {
        x.s = (const uint8_t *)buf, x.slen = bytes;
    } else {
        memcpy(t->gather, buf, bytes);
        x.s = t->gather, x.slen = x.rlen, x.sbase = bytes, x.savail = &x.rdone;
    }
    int rc = xfer_run(t, &x);
    if (rc < 0)
        return rc;
    if (size == 2) { /* a + b == b + a exactly */
        reduce_into(buf, (const float *)(t->gather + bytes), n);
        return 0;
    }
    for (int q = 0; q < size; q++) {
        const float *b = (const float *)(t->gather + (size_t)((rank - q + size) % size) * bytes);
        if (q == 0)
            memcpy(buf, b, bytes);
        else
            reduce_into(buf, b, n);
    }
    return 0;
}

static int ring_allreduce(struct tcp *t, int size, int r, float *buf, size_t n)
{
    int rc = 0;
    /* Reduce-scatter: after size-1 steps rank r holds the full sum of segment r+1. */
    for (int k = 0; k < size - 1 && rc == 0; k++) {
        int s = ((r - k) % size + size) % size, v = ((r - k - 1) % size + size) % size;
        size_t so = seg_off(n, size, s), vo = seg_off(n, size, v);
        rc = ring_step(t, buf + so, (seg_off(n, size, s + 1) - so) * sizeof(float), buf + vo,
                       (seg_off(n, size, v + 1) - vo) * sizeof(float), true);
    }
    /* All-gather: pass the finished segments on, copying bytes (bit-identical everywhere). */
    for (int k = 0; k < size - 1 && rc == 0; k++) {
        int s = ((r + 1 - k) % size + size) % size, v = ((r - k) % size + size) % size;
        size_t so = seg_off(n, size, s), vo = seg_off(n, size, v);
        rc = ring_step(t, buf + so, (seg_off(n, size, s + 1) - so) * sizeof(float), buf + vo,
                       (seg_off(n, size, v + 1) - vo) * sizeof(float), false);
    }
    return rc;
}

/* ---- bf16 (dist.grad_dtype; the rules are dist/bf16_sum.h's) ---- */

/* Twice fp32's elements: the same bytes per link, and exactly the bytes t->gather holds. */
static size_t small_max_bf16(int size)
{
    return 2 * dt_tcp_small_max(size);
}

/* The small path in bf16: every rank's terms rounded once, gathered whole, summed in fp32 in
 * rank order 0..size-1, the sum rounded (what a ring's all-gather would have carried). */
static int small_allreduce_bf16(struct tcp *t, int size, int rank, float *buf, size_t n)
{
    size_t bytes = n * sizeof(dt_bf16);
    dt_bf16_from_f32_n(buf, (dt_bf16 *)t->gather, n);
    struct xfer x = {.frame = bytes,
                     .s = t->gather,
                     .slen = (size_t)(size - 1) * bytes,
                     .sbase = bytes,
                     .r = t->gather + bytes,
                     .rlen = (size_t)(size - 1) * bytes,
                     .rprivate = true};
    x.savail = &x.rdone;
    int rc = xfer_run(t, &x);
    if (rc < 0)
        return rc;
    for (int q = 0; q < size; q++) {
        const dt_bf16 *b =
            (const dt_bf16 *)(t->gather + (size_t)((rank - q + size) % size) * bytes);
        if (q == 0)
            dt_bf16_to_f32_n(b, buf, n);
        else
            dt_bf16_add_n(buf, b, n);
    }
    dt_bf16_round_n(buf, buf, n);
    return 0;
}

static int stage_reserve(struct tcp *t, size_t n)
{
    if (n <= t->stage_cap)
        return 0;
    for (int i = 0; i < 2; i++) {
        dt_bf16 *p = realloc(t->stage[i], n * sizeof *p);
        if (!p)
            return dt_fail(DT_ERUNTIME, "tcp: out of memory for the bf16 ring (%zu values)", n);
        t->stage[i] = p;
    }
    t->stage_cap = n;
    return 0;
}

/* The ring in bf16. Reduce-scatter: a segment leaves its rank rounded to bf16 (its own terms
 * at the first step, the partial sum after), and the receiver adds it in fp32 to its own terms,
 * rounded as if they had been sent; so a segment's sum over size ranks is rounded at each of
 * its size - 1 hops. The finished segment is rounded once more and the all-gather passes the
 * bf16 bytes on unchanged, so every rank ends with the same values. */
static int ring_allreduce_bf16(struct tcp *t, int size, int r, float *buf, size_t n)
{
    dt_bf16 *send = t->stage[0], *recv = t->stage[1];
    int rc = 0;
    for (int k = 0; k < size - 1 && rc == 0; k++) {
        int s = ((r - k) % size + size) % size, v = ((r - k - 1) % size + size) % size;
        size_t so = seg_off(n, size, s), vo = seg_off(n, size, v);
        size_t slen = seg_off(n, size, s + 1) - so, vlen = seg_off(n, size, v + 1) - vo;
        dt_bf16_from_f32_n(buf + so, send, slen);
        struct xfer x = {.frame = FRAME,
                         .s = (const uint8_t *)send,
                         .slen = slen * sizeof(dt_bf16),
                         .r = (uint8_t *)(buf + vo),
                         .rlen = vlen * sizeof(dt_bf16),
                         .reduce = true,
                         .bf16 = true};
        rc = vlen || slen ? xfer_run(t, &x) : 0;
    }
    int f = (r + 1) % size;
    size_t fo = seg_off(n, size, f), flen = seg_off(n, size, f + 1) - fo;
    dt_bf16_from_f32_n(buf + fo, send, flen);
    dt_bf16_to_f32_n(send, buf + fo, flen);
    for (int k = 0; k < size - 1 && rc == 0; k++) {
        int s = ((r + 1 - k) % size + size) % size, v = ((r - k) % size + size) % size;
        size_t slen = seg_off(n, size, s + 1) - seg_off(n, size, s);
        size_t vo = seg_off(n, size, v), vlen = seg_off(n, size, v + 1) - vo;
        rc = ring_step(t, send, slen * sizeof(dt_bf16), recv, vlen * sizeof(dt_bf16), false);
        if (rc == 0)
            dt_bf16_to_f32_n(recv, buf + vo, vlen);
        dt_bf16 *tmp = send; /* what arrived is what goes on next */
        send = recv, recv = tmp;
    }
    return rc;
}

static int tcp_allreduce_sum_bf16(struct dt_comm *c, float *buf, size_t n)
{
    struct tcp *t = c->impl;
    int rc = tcp_check(t), size = c->size, r = c->rank;
    if (rc < 0 || size == 1 || n == 0)
        return rc;
    if (n <= small_max_bf16(size))
        return small_allreduce_bf16(t, size, r, buf, n);
    /* Rounds of the same bytes per step as fp32's, so twice the elements. */
    size_t chunk = ROUND_STEP ? (size_t)ROUND_STEP / sizeof(dt_bf16) * (size_t)size : n;
    size_t first = n < chunk ? n : chunk;
    if ((rc = stage_reserve(t, first / (size_t)size + 1)) < 0)
        return rc;
    for (size_t off = 0; off < n && rc == 0; off += chunk)
        rc = ring_allreduce_bf16(t, size, r, buf + off, n - off < chunk ? n - off : chunk);
    return rc;
}

static int tcp_allreduce_sum(struct dt_comm *c, float *buf, size_t n)
{
    struct tcp *t = c->impl;
    int rc = tcp_check(t), size = c->size, r = c->rank;
    if (rc < 0 || size == 1 || n == 0)
        return rc;
    if (n <= dt_tcp_small_max(size))
        return small_allreduce(t, size, r, buf, n);
    /* Rounds: every rank cuts the buffer the same way, so results stay bit-identical. */
    size_t chunk = ROUND_STEP ? (size_t)ROUND_STEP / sizeof(float) * (size_t)size : n;
    for (size_t off = 0; off < n && rc == 0; off += chunk)
        rc = ring_allreduce(t, size, r, buf + off, n - off < chunk ? n - off : chunk);
    return rc;
}

static int tcp_broadcast(struct dt_comm *c, void *buf, size_t bytes, int root)
{
    struct tcp *t = c->impl;
    if (root < 0 || root >= c->size)
        return dt_fail(DT_EUSAGE, "broadcast root %d out of range (size %d)", root, c->size);
    int rc = tcp_check(t);
    if (rc < 0 || c->size == 1 || bytes == 0)
        return rc;
    struct xfer x = {.frame = RELAY_FRAME};
    if (c->rank == root) {
        x.s = buf, x.slen = bytes;
    } else {
        x.r = buf, x.rlen = bytes;
        if ((c->rank + 1) % c->size != root)
            x.s = buf, x.slen = bytes, x.savail = &x.rdone;
    }
    return xfer_run(t, &x);
}

static int tcp_barrier(struct dt_comm *c)
{
    struct tcp *t = c->impl;
    for (int i = 0; i < c->size; i++)
        t->ones[i] = 1.0f;
    int rc = tcp_allreduce_sum(c, t->ones, (size_t)c->size);
    if (rc == 0 && t->ones[0] != (float)c->size)
        return dt_fail(DT_ERUNTIME, "tcp barrier: counted %g ranks, expected %d",
                       (double)t->ones[0], c->size);
    return rc;
}

static void tcp_close(struct dt_comm *c)
{
    if (!c)
        return;
    struct tcp *t = c->impl;
    if (t) {
        dt_rdzv_free(&t->rdzv);
        free(t->scratch);
        free(t->gather);
        free(t->ones);
        free(t->stage[0]);
        free(t->stage[1]);
        free(t);
    }
    free(c);
}

void dt_tcp_opts_init(struct dt_tcp_opts *o)
{
    memset(o, 0, sizeof *o);
    o->size = 1;
    o->local_size = 1;
    o->master_fd = -1;
}

static void link_init(struct link *l, const struct dt_rdzv *r, int rank, int fd)
{
    l->fd = fd;
    l->rank = rank;
    l->seq = 1; /* the client's AUTH was message 0 in this direction */
    dt_rdzv_peer_name(r, rank, l->name, sizeof l->name);
}

int dt_tcp_comm_create(struct dt_comm **out, const struct dt_tcp_opts *o)
{
    *out = NULL;
    struct dt_comm *c = calloc(1, sizeof *c);
    struct tcp *t = calloc(1, sizeof *t);
    if (!c || !t) {
        free(c), free(t);
        return dt_fail(DT_ERUNTIME, "out of memory");
    }
    c->impl = t;
    c->rank = o->rank, c->size = o->size;
    c->local_rank = o->local_rank, c->local_size = o->local_size > 0 ? o->local_size : 1;
    c->backend = "tcp";
    c->allreduce_sum = tcp_allreduce_sum;
    c->allreduce_sum_bf16 = tcp_allreduce_sum_bf16;
    c->broadcast = tcp_broadcast;
    c->barrier = tcp_barrier;
    c->close = tcp_close;
    t->timeout = o->timeout > 0 ? o->timeout : DT_TCP_DEFAULT_TIMEOUT;
    t->spin = o->oversubscribed ? 0 : SPIN_S;
    t->next.fd = t->prev.fd = -1;
    int rc = dt_rdzv_run(&t->rdzv, o);
    if (rc == 0) {
        t->scratch = malloc(SCRATCH);
        t->ones = malloc((size_t)o->size * sizeof(float));
        /* calloc: a failing relay pads its frame from here, never with stale heap bytes */
        t->gather = calloc((size_t)o->size * dt_tcp_small_max(o->size) + 1, sizeof(float));
        if (!t->scratch || !t->ones || !t->gather)
            rc = dt_fail(DT_ERUNTIME, "out of memory");
    }
    if (rc < 0) {
        tcp_close(c);
        return rc;
    }
    if (o->size > 1) {
        link_init(&t->next, &t->rdzv, (o->rank + 1) % o->size, t->rdzv.next_fd);
        link_init(&t->prev, &t->rdzv, (o->rank + o->size - 1) % o->size, t->rdzv.prev_fd);
    }
    *out = c;
    return 0;
}
