/* Job tokens and the mutual HMAC-SHA256 challenge-response every dtrain connection performs
 * before any other byte is trusted.
 *
 * Handshake (the acceptor is the "server", the connecting rank the "client"):
 *   S -> C  HELLO    nonce_s[32]
 *   C -> S  AUTH     rank_c, nonce_c[32], HMAC(token, "dtrain-auth-v1" 'C' nonce_s nonce_c
 *                                            rank_c rank_s)
 *   S -> C  AUTH_OK  rank_s, HMAC(token, "dtrain-auth-v1" 'S' nonce_s nonce_c rank_c rank_s)
 * Both sides contribute a fresh nonce (RAND_bytes), the role letter stops a reflected answer
 * from passing and the two ranks bind the proof to this particular edge of the job. MACs are
 * compared with CRYPTO_memcmp. The token itself never crosses the wire.
 *
 * The server side is split into hello/answer steps so the rendezvous can run many handshakes
 * at once without blocking on any one of them.
 */
#ifndef DT_DIST_AUTH_H
#define DT_DIST_AUTH_H

#include <stddef.h>
#include <stdint.h>

#define DT_AUTH_TOKEN_MIN 16
#define DT_AUTH_TOKEN_MAX 256
#define DT_AUTH_NONCE     32
#define DT_AUTH_MAC       32
#define DT_AUTH_HELLO_LEN DT_AUTH_NONCE
#define DT_AUTH_RESP_LEN  (4 + DT_AUTH_NONCE + DT_AUTH_MAC)
#define DT_AUTH_OK_LEN    (4 + DT_AUTH_MAC)

/* A token file larger than this is refused before it is read (token plus whitespace). */
#define DT_AUTH_TOKEN_FILE_MAX 4096

struct dt_auth_token {
    size_t len;
    uint8_t bytes[DT_AUTH_TOKEN_MAX];
};

/* 32 random bytes (RAND_bytes) as 64 lowercase hex characters plus NUL: a token for a
 * single-host run, or to write into a token file. */
int dt_auth_token_generate(char hex[2 * 32 + 1]);
/* Copies `len` bytes; DT_EUSAGE naming `what` when shorter than DT_AUTH_TOKEN_MIN or longer
 * than DT_AUTH_TOKEN_MAX. */
int dt_auth_token_set(struct dt_auth_token *t, const void *bytes, size_t len, const char *what);
/* From `token_file` (its bytes, trailing whitespace dropped; a warning when others can read
 * it; a file that is not regular or is over DT_AUTH_TOKEN_FILE_MAX bytes is refused unread) or,
 * when token_file is NULL, from the DTRAIN_TOKEN environment variable. DT_EUSAGE when neither
 * gives a usable token. */
int dt_auth_token_load(struct dt_auth_token *t, const char *token_file);

struct dt_auth_server {
    uint8_t nonce[DT_AUTH_NONCE];
    int my_rank;
};
/* Draws the server nonce and fills the HELLO payload. */
int dt_auth_server_hello(struct dt_auth_server *s, int my_rank, uint8_t hello[DT_AUTH_HELLO_LEN]);
/* Checks the client's AUTH payload; on success *client_rank is the proven rank and ok holds
 * the AUTH_OK payload. DT_ERUNTIME naming `peer` when the proof is wrong. */
int dt_auth_server_answer(const struct dt_auth_server *s, const struct dt_auth_token *t,
                          const uint8_t resp[DT_AUTH_RESP_LEN], int *client_rank,
                          uint8_t ok[DT_AUTH_OK_LEN], const char *peer);

/* Blocking (deadline-bounded) ends of the handshake on a connected socket. The client proves
 * it is `my_rank` and checks that the server is `server_rank`. */
int dt_auth_client(int fd, const struct dt_auth_token *t, int my_rank, int server_rank,
                   double deadline, const char *peer);
int dt_auth_server(int fd, const struct dt_auth_token *t, int my_rank, int *client_rank,
                   double deadline, const char *peer);

#endif
