/* Message framing and deadline-bounded socket I/O; see wire.h for the format and invariants. */
#include "dist/wire.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>

#include "util/clock.h"
#include "util/err.h"

static const char *const op_names[DT_OP_COUNT_] = {
    [DT_OP_HELLO] = "HELLO",       [DT_OP_AUTH] = "AUTH",   [DT_OP_AUTH_OK] = "AUTH_OK",
    [DT_OP_REGISTER] = "REGISTER", [DT_OP_TABLE] = "TABLE", [DT_OP_DATA] = "DATA",
    [DT_OP_ABORT] = "ABORT",
};

const char *dt_wire_op_name(unsigned op)
{
    return op > 0 && op < DT_OP_COUNT_ ? op_names[op] : "unknown";
}

void dt_wire_put32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24), p[1] = (uint8_t)(v >> 16), p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

uint32_t dt_wire_get32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

void dt_wire_put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)(v >> 8), p[1] = (uint8_t)v;
}

uint16_t dt_wire_get16(const uint8_t *p)
{
    return (uint16_t)(p[0] << 8 | p[1]);
}

void dt_wire_pack(uint8_t out[DT_WIRE_HDR], unsigned op, uint32_t seq, uint32_t len)
{
    dt_wire_put32(out, DT_WIRE_MAGIC);
    dt_wire_put16(out + 4, DT_WIRE_VERSION);
    dt_wire_put16(out + 6, (uint16_t)op);
    dt_wire_put32(out + 8, seq);
    dt_wire_put32(out + 12, len);
}

int dt_wire_check(struct dt_wire_hdr *h, const uint8_t in[DT_WIRE_HDR], unsigned want_op,
                  uint32_t want_seq, uint32_t min_len, uint32_t max_len, const char *peer)
{
    h->magic = dt_wire_get32(in);
    h->version = dt_wire_get16(in + 4);
    h->op = dt_wire_get16(in + 6);
    h->seq = dt_wire_get32(in + 8);
    h->len = dt_wire_get32(in + 12);
    if (h->magic != DT_WIRE_MAGIC)
        return dt_fail(DT_ERUNTIME, "%s: bad message magic 0x%08x (expected 0x%08x)", peer,
                       h->magic, DT_WIRE_MAGIC);
    if (h->version != DT_WIRE_VERSION)
        return dt_fail(DT_ERUNTIME, "%s: protocol version %u (expected %u)", peer, h->version,
                       DT_WIRE_VERSION);
    if (h->op == DT_OP_ABORT) {
        if (h->len > DT_WIRE_ABORT_MAX)
            return dt_fail(DT_ERUNTIME, "%s: ABORT message of %u bytes (at most %u)", peer, h->len,
                           DT_WIRE_ABORT_MAX);
        return 0;
    }
    if (h->op != want_op)
        return dt_fail(DT_ERUNTIME, "%s: unexpected message op %u (%s), expected %s", peer, h->op,
                       dt_wire_op_name(h->op), dt_wire_op_name(want_op));
    if (h->seq != want_seq)
        return dt_fail(DT_ERUNTIME, "%s: %s message sequence %u, expected %u", peer,
                       dt_wire_op_name(h->op), h->seq, want_seq);
    if (h->len < min_len || h->len > max_len) {
        if (min_len == max_len)
            return dt_fail(DT_ERUNTIME, "%s: %s message length %u, expected %u", peer,
                           dt_wire_op_name(h->op), h->len, min_len);
        return dt_fail(DT_ERUNTIME, "%s: %s message length %u, expected %u..%u", peer,
                       dt_wire_op_name(h->op), h->len, min_len, max_len);
    }
    return 0;
}

int dt_wire_wait(int fd, short events, double deadline, const char *peer)
{
    for (;;) {
        double left = deadline - dt_now();
        if (left <= 0)
            return dt_fail(DT_ERUNTIME, "%s: timed out", peer);
        struct pollfd p = {.fd = fd, .events = events};
        int ms = left > 1e6 ? 1000000000 : (int)(left * 1000) + 1;
        int r = poll(&p, 1, ms);
        if (r > 0)
            return 0;
        if (r < 0 && errno != EINTR)
            return dt_fail(DT_ERUNTIME, "%s: poll: %s", peer, strerror(errno));
    }
}

int dt_wire_send_all(int fd, const void *buf, size_t n, double deadline, const char *peer)
{
    const char *p = buf;
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w > 0) {
            p += w, n -= (size_t)w;
            continue;
        }
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
            return dt_fail(DT_ERUNTIME, "%s: send: %s", peer, strerror(errno));
        int rc = dt_wire_wait(fd, POLLOUT, deadline, peer);
        if (rc < 0)
            return rc;
    }
    return 0;
}

int dt_wire_recv_all(int fd, void *buf, size_t n, double deadline, const char *peer)
{
    char *p = buf;
    while (n > 0) {
        ssize_t r = recv(fd, p, n, MSG_DONTWAIT);
        if (r > 0) {
            p += r, n -= (size_t)r;
            continue;
        }
        if (r == 0)
            return dt_fail(DT_ERUNTIME, "%s: connection closed", peer);
        if (errno == EINTR)
            continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK)
            return dt_fail(DT_ERUNTIME, "%s: recv: %s", peer, strerror(errno));
        int rc = dt_wire_wait(fd, POLLIN, deadline, peer);
        if (rc < 0)
            return rc;
    }
    return 0;
}

int dt_wire_send_msg(int fd, unsigned op, uint32_t seq, const void *payload, uint32_t len,
                     double deadline, const char *peer)
{
    uint8_t hdr[DT_WIRE_HDR];
    dt_wire_pack(hdr, op, seq, len);
    int rc = dt_wire_send_all(fd, hdr, sizeof hdr, deadline, peer);
    return rc < 0 || len == 0 ? rc : dt_wire_send_all(fd, payload, len, deadline, peer);
}

int dt_wire_recv_abort(int fd, const struct dt_wire_hdr *h, double deadline, const char *peer,
                       char *out)
{
    return dt_wire_recv_abort_rest(fd, h, NULL, 0, deadline, peer, out);
}

int dt_wire_recv_abort_rest(int fd, const struct dt_wire_hdr *h, const void *have, size_t nhave,
                            double deadline, const char *peer, char *out)
{
    char buf[DT_WIRE_ABORT_MAX + 1], *text = out ? out : buf;
    if (nhave > h->len)
        nhave = h->len; /* nothing may follow an ABORT: extra bytes are ignored */
    if (nhave)
        memcpy(text, have, nhave);
    int rc = dt_wire_recv_all(fd, text + nhave, h->len - nhave, deadline, peer);
    if (rc < 0)
        return rc;
    text[h->len] = 0;
    for (uint32_t i = 0; i < h->len; i++)
        if ((unsigned char)text[i] < 0x20 || text[i] == 0x7f)
            text[i] = '?';
    return dt_fail(DT_ERUNTIME, "%s (reported by %s)", text, peer);
}

int dt_wire_recv_msg(int fd, unsigned op, uint32_t seq, void *payload, uint32_t min_len,
                     uint32_t max_len, uint32_t *len, double deadline, const char *peer)
{
    uint8_t raw[DT_WIRE_HDR];
    struct dt_wire_hdr h;
    int rc = dt_wire_recv_all(fd, raw, sizeof raw, deadline, peer);
    if (rc == 0)
        rc = dt_wire_check(&h, raw, op, seq, min_len, max_len, peer);
    if (rc < 0)
        return rc;
    if (h.op == DT_OP_ABORT)
        return dt_wire_recv_abort(fd, &h, deadline, peer, NULL);
    if (len)
        *len = h.len;
    return dt_wire_recv_all(fd, payload, h.len, deadline, peer);
}
