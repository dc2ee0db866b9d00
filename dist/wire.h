/* Message framing for every dtrain TCP connection (rendezvous, authentication, ring data).
 *
 * A message is a 16-byte big-endian header {magic, version, op, sequence, length} followed by
 * `length` payload bytes. The receiver always knows which op and sequence number comes next
 * and how long its payload may be, so dt_wire_check() rejects anything else before a single
 * payload byte is read: a peer can never make us allocate or read from a length it chose.
 * The one op accepted anywhere is ABORT (a short text saying why the sender gave up), so a
 * failure travels along the ring instead of turning into a timeout further on.
 *
 * The I/O helpers below work on any socket (they use MSG_DONTWAIT and poll), never raise
 * SIGPIPE (MSG_NOSIGNAL) and never block past their deadline (dt_now() seconds).
 */
#ifndef DT_DIST_WIRE_H
#define DT_DIST_WIRE_H

#include <stddef.h>
#include <stdint.h>

#define DT_WIRE_MAGIC     0x4454524eu /* "DTRN" */
#define DT_WIRE_VERSION   1
#define DT_WIRE_HDR       16
#define DT_WIRE_ABORT_MAX 480 /* bytes of text in an ABORT message */

enum dt_wire_op {
    DT_OP_HELLO = 1,    /* server -> client: nonce */
    DT_OP_AUTH = 2,     /* client -> server: rank, nonce, HMAC */
    DT_OP_AUTH_OK = 3,  /* server -> client: rank, HMAC */
    DT_OP_REGISTER = 4, /* rank -> master: rank, local rank, size, data port, host */
    DT_OP_TABLE = 5,    /* master -> rank: every rank's host and data port */
    DT_OP_DATA = 6,     /* ring payload chunk */
    DT_OP_ABORT = 7,    /* text: why the sender stopped; ends the connection's use */
    DT_OP_COUNT_
};

struct dt_wire_hdr {
    uint32_t magic;
    uint16_t version, op;
    uint32_t seq, len;
};

const char *dt_wire_op_name(unsigned op);

void dt_wire_pack(uint8_t out[DT_WIRE_HDR], unsigned op, uint32_t seq, uint32_t len);

/* Decodes and validates a header from `peer`: magic, version, op == want_op (or ABORT), seq ==
 * want_seq (not checked for ABORT), min_len <= len <= max_len (ABORT: <= DT_WIRE_ABORT_MAX).
 * DT_ERUNTIME with a message naming the peer and the offending field. */
int dt_wire_check(struct dt_wire_hdr *h, const uint8_t in[DT_WIRE_HDR], unsigned want_op,
                  uint32_t want_seq, uint32_t min_len, uint32_t max_len, const char *peer);

/* Waits until fd is ready for `events` (POLLIN/POLLOUT). 0 ready, DT_ERUNTIME on timeout
 * ("<peer>: timed out") or poll failure. */
int dt_wire_wait(int fd, short events, double deadline, const char *peer);
int dt_wire_send_all(int fd, const void *buf, size_t n, double deadline, const char *peer);
/* "<peer>: connection closed" when the peer closes before n bytes arrived. */
int dt_wire_recv_all(int fd, void *buf, size_t n, double deadline, const char *peer);

int dt_wire_send_msg(int fd, unsigned op, uint32_t seq, const void *payload, uint32_t len,
                     double deadline, const char *peer);
/* Receives one message of `op` into payload (capacity max_len); *len gets its length. An
 * ABORT from the peer becomes DT_ERUNTIME carrying the peer's text. */
int dt_wire_recv_msg(int fd, unsigned op, uint32_t seq, void *payload, uint32_t min_len,
                     uint32_t max_len, uint32_t *len, double deadline, const char *peer);
/* Reads the payload of an ABORT whose header was already checked and returns DT_ERUNTIME with
 * "<text> (reported by <peer>)"; the sanitized text alone goes to `text` (DT_WIRE_ABORT_MAX + 1
 * bytes) unless it is NULL. */
int dt_wire_recv_abort(int fd, const struct dt_wire_hdr *h, double deadline, const char *peer,
                       char *text);
/* The same when the first `nhave` bytes of the text were already read (together with the
 * header, by a reader that asked for header and payload at once). */
int dt_wire_recv_abort_rest(int fd, const struct dt_wire_hdr *h, const void *have, size_t nhave,
                            double deadline, const char *peer, char *text);

/* Big-endian field helpers for payloads. */
void dt_wire_put32(uint8_t *p, uint32_t v);
uint32_t dt_wire_get32(const uint8_t *p);
void dt_wire_put16(uint8_t *p, uint16_t v);
uint16_t dt_wire_get16(const uint8_t *p);

#endif
