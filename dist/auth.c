/* Job tokens and the HMAC-SHA256 handshake; the protocol is described in auth.h. */
#include "dist/auth.h"

#include <ctype.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "dist/wire.h"
#include "util/err.h"
#include "util/fileio.h"
#include "util/log.h"

static const char auth_label[] = "dtrain-auth-v1";

int dt_auth_token_generate(char hex[2 * 32 + 1])
{
    uint8_t raw[32];
    if (RAND_bytes(raw, sizeof raw) != 1)
        return dt_fail(DT_ERUNTIME, "cannot generate a job token: RAND_bytes failed");
    for (size_t i = 0; i < sizeof raw; i++)
        snprintf(hex + 2 * i, 3, "%02x", raw[i]);
    OPENSSL_cleanse(raw, sizeof raw);
    return 0;
}

int dt_auth_token_set(struct dt_auth_token *t, const void *bytes, size_t len, const char *what)
{
    if (len < DT_AUTH_TOKEN_MIN)
        return dt_fail(DT_EUSAGE, "%s: job token too short (%zu bytes, need at least %d)", what,
                       len, DT_AUTH_TOKEN_MIN);
    if (len > DT_AUTH_TOKEN_MAX)
        return dt_fail(DT_EUSAGE, "%s: job token too long (%zu bytes, at most %d)", what, len,
                       DT_AUTH_TOKEN_MAX);
    memcpy(t->bytes, bytes, len);
    t->len = len;
    return 0;
}

int dt_auth_token_load(struct dt_auth_token *t, const char *token_file)
{
    if (!token_file) {
        const char *env = getenv("DTRAIN_TOKEN");
        if (!env || !*env)
            return dt_fail(DT_EUSAGE, "no job token: set DTRAIN_TOKEN or pass --token-file "
                                      "(every host of a multi-host job needs the same token)");
        return dt_auth_token_set(t, env, strlen(env), "DTRAIN_TOKEN");
    }
    struct stat st;
    if (stat(token_file, &st) == 0 && (st.st_mode & 077))
        dt_log_warn("token file %s is readable by other users (chmod 600 it)", token_file);
    char *data;
    size_t len;
    /* A token is at most DT_AUTH_TOKEN_MAX bytes: a file much larger is the wrong file. */
    int rc = dt_read_file_max(token_file, DT_AUTH_TOKEN_FILE_MAX, &data, &len);
    if (rc < 0) {
        char why[512];
        snprintf(why, sizeof why, "%s", dt_last_error());
        return dt_fail(DT_EUSAGE, "--token-file: cannot read the job token: %s", why);
    }
    while (len > 0 && isspace((unsigned char)data[len - 1]))
        len--;
    rc = dt_auth_token_set(t, data, len, token_file);
    OPENSSL_cleanse(data, len);
    free(data);
    return rc;
}

/* HMAC(token, label role nonce_s nonce_c rank_c rank_s). */
static int auth_mac(const struct dt_auth_token *t, char role, const uint8_t *nonce_s,
                    const uint8_t *nonce_c, uint32_t rank_c, uint32_t rank_s,
                    uint8_t out[DT_AUTH_MAC])
{
    uint8_t msg[sizeof auth_label + 2 * DT_AUTH_NONCE + 8];
    size_t n = 0;
    memcpy(msg, auth_label, sizeof auth_label - 1), n += sizeof auth_label - 1;
    msg[n++] = (uint8_t)role;
    memcpy(msg + n, nonce_s, DT_AUTH_NONCE), n += DT_AUTH_NONCE;
    memcpy(msg + n, nonce_c, DT_AUTH_NONCE), n += DT_AUTH_NONCE;
    dt_wire_put32(msg + n, rank_c), n += 4;
    dt_wire_put32(msg + n, rank_s), n += 4;
    unsigned out_len = 0;
    if (!HMAC(EVP_sha256(), t->bytes, (int)t->len, msg, n, out, &out_len) || out_len != DT_AUTH_MAC)
        return dt_fail(DT_ERUNTIME, "HMAC-SHA256 failed");
    return 0;
}

int dt_auth_server_hello(struct dt_auth_server *s, int my_rank, uint8_t hello[DT_AUTH_HELLO_LEN])
{
    if (RAND_bytes(s->nonce, DT_AUTH_NONCE) != 1)
        return dt_fail(DT_ERUNTIME, "RAND_bytes failed");
    s->my_rank = my_rank;
    memcpy(hello, s->nonce, DT_AUTH_NONCE);
    return 0;
}

int dt_auth_server_answer(const struct dt_auth_server *s, const struct dt_auth_token *t,
                          const uint8_t resp[DT_AUTH_RESP_LEN], int *client_rank,
                          uint8_t ok[DT_AUTH_OK_LEN], const char *peer)
{
    uint32_t rank_c = dt_wire_get32(resp);
    const uint8_t *nonce_c = resp + 4, *mac_c = resp + 4 + DT_AUTH_NONCE;
    uint8_t want[DT_AUTH_MAC];
    int rc = auth_mac(t, 'C', s->nonce, nonce_c, rank_c, (uint32_t)s->my_rank, want);
    if (rc < 0)
        return rc;
    if (CRYPTO_memcmp(want, mac_c, DT_AUTH_MAC) != 0)
        return dt_fail(DT_ERUNTIME, "%s: authentication failed (wrong job token?)", peer);
    if (rank_c > 0x7fffffff)
        return dt_fail(DT_ERUNTIME, "%s: claims invalid rank %u", peer, rank_c);
    dt_wire_put32(ok, (uint32_t)s->my_rank);
    *client_rank = (int)rank_c;
    return auth_mac(t, 'S', s->nonce, nonce_c, rank_c, (uint32_t)s->my_rank, ok + 4);
}

int dt_auth_client(int fd, const struct dt_auth_token *t, int my_rank, int server_rank,
                   double deadline, const char *peer)
{
    uint8_t nonce_s[DT_AUTH_NONCE], resp[DT_AUTH_RESP_LEN], ok[DT_AUTH_OK_LEN], want[DT_AUTH_MAC];
    int rc = dt_wire_recv_msg(fd, DT_OP_HELLO, 0, nonce_s, DT_AUTH_HELLO_LEN, DT_AUTH_HELLO_LEN,
                              NULL, deadline, peer);
    if (rc < 0)
        return rc;
    dt_wire_put32(resp, (uint32_t)my_rank);
    if (RAND_bytes(resp + 4, DT_AUTH_NONCE) != 1)
        return dt_fail(DT_ERUNTIME, "RAND_bytes failed");
    rc = auth_mac(t, 'C', nonce_s, resp + 4, (uint32_t)my_rank, (uint32_t)server_rank,
                  resp + 4 + DT_AUTH_NONCE);
    if (rc == 0)
        rc = dt_wire_send_msg(fd, DT_OP_AUTH, 0, resp, sizeof resp, deadline, peer);
    if (rc == 0)
        rc = dt_wire_recv_msg(fd, DT_OP_AUTH_OK, 1, ok, DT_AUTH_OK_LEN, DT_AUTH_OK_LEN, NULL,
                              deadline, peer);
    if (rc < 0)
        return rc;
    if (dt_wire_get32(ok) != (uint32_t)server_rank)
        return dt_fail(DT_ERUNTIME, "%s: answered as rank %u, expected rank %d", peer,
                       dt_wire_get32(ok), server_rank);
    rc = auth_mac(t, 'S', nonce_s, resp + 4, (uint32_t)my_rank, (uint32_t)server_rank, want);
    if (rc < 0)
        return rc;
    if (CRYPTO_memcmp(want, ok + 4, DT_AUTH_MAC) != 0)
        return dt_fail(DT_ERUNTIME, "%s: server failed authentication (wrong job token?)", peer);
    return 0;
}

int dt_auth_server(int fd, const struct dt_auth_token *t, int my_rank, int *client_rank,
                   double deadline, const char *peer)
{
    struct dt_auth_server s;
    uint8_t hello[DT_AUTH_HELLO_LEN], resp[DT_AUTH_RESP_LEN], ok[DT_AUTH_OK_LEN];
    int rc = dt_auth_server_hello(&s, my_rank, hello);
    if (rc == 0)
        rc = dt_wire_send_msg(fd, DT_OP_HELLO, 0, hello, sizeof hello, deadline, peer);
    if (rc == 0)
        rc = dt_wire_recv_msg(fd, DT_OP_AUTH, 0, resp, DT_AUTH_RESP_LEN, DT_AUTH_RESP_LEN, NULL,
                              deadline, peer);
    if (rc == 0)
        rc = dt_auth_server_answer(&s, t, resp, client_rank, ok, peer);
    if (rc == 0)
        rc = dt_wire_send_msg(fd, DT_OP_AUTH_OK, 1, ok, sizeof ok, deadline, peer);
    return rc;
}
