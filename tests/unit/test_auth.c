/* dist/auth: tokens (generate, env, file, bounds) and the mutual HMAC handshake over a
 * socketpair with the server in a thread: good token both ways, wrong token on either side,
 * truncated handshake, reflected answer. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dist/auth.h"
#include "dist/wire.h"
#include "util/clock.h"
#include "util/err.h"

struct server_run {
    int fd, my_rank, client_rank, rc;
    struct dt_auth_token tok;
    char err[512];
};

static void *server_main(void *p)
{
    struct server_run *s = p;
    s->rc = dt_auth_server(s->fd, &s->tok, s->my_rank, &s->client_rank, dt_now() + 2, "client");
    snprintf(s->err, sizeof s->err, "%s", dt_last_error());
    close(s->fd);
    return NULL;
}

static void tok(struct dt_auth_token *t, const char *s)
{
    assert_int_equal(dt_auth_token_set(t, s, strlen(s), "test"), 0);
}

/* Runs client (rank 3) against server (rank 0); returns the client status. */
static int handshake(const char *ctok, const char *stok, int server_rank_expected,
                     struct server_run *s)
{
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    memset(s, 0, sizeof *s);
    s->fd = sv[1], s->my_rank = 0, s->client_rank = -1;
    tok(&s->tok, stok);
    struct dt_auth_token ct;
    tok(&ct, ctok);
    pthread_t th;
    pthread_create(&th, NULL, server_main, s);
    int rc = dt_auth_client(sv[0], &ct, 3, server_rank_expected, dt_now() + 2, "master");
    close(sv[0]);
    pthread_join(th, NULL);
    return rc;
}

static const char good[] = "0123456789abcdef-good";

static void test_good_token_passes_both_ways(void **state)
{
    (void)state;
    struct server_run s;
    assert_int_equal(handshake(good, good, 0, &s), 0);
    assert_int_equal(s.rc, 0);
    assert_int_equal(s.client_rank, 3);
}

static void test_wrong_token_is_rejected(void **state)
{
    (void)state;
    struct server_run s;
    assert_int_equal(handshake("0123456789abcdef-evil", good, 0, &s), -DT_ERUNTIME);
    assert_int_equal(s.rc, -DT_ERUNTIME);
    assert_string_equal(s.err, "client: authentication failed (wrong job token?)");
    assert_string_equal(dt_last_error(), "master: connection closed");
}

static void test_server_with_wrong_token_is_rejected(void **state)
{
    (void)state;
    /* A client with the right token refuses an impostor server, whatever it answers. */
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    struct dt_auth_token ct, st;
    tok(&ct, good);
    tok(&st, "0123456789abcdef-evil");
    struct dt_auth_server srv;
    uint8_t hello[DT_AUTH_HELLO_LEN], resp[DT_AUTH_RESP_LEN], ok[DT_AUTH_OK_LEN];
    assert_int_equal(dt_auth_server_hello(&srv, 0, hello), 0);
    assert_int_equal(
        dt_wire_send_msg(sv[1], DT_OP_HELLO, 0, hello, sizeof hello, dt_now() + 1, "c"), 0);
    /* The impostor answers with a MAC it cannot have computed: queue a forged AUTH_OK before
     * the client runs (it reads HELLO, sends AUTH, then reads this). */
    uint8_t forged[DT_AUTH_OK_LEN] = {0};
    assert_int_equal(
        dt_wire_send_msg(sv[1], DT_OP_AUTH_OK, 1, forged, sizeof forged, dt_now() + 1, "c"), 0);
    assert_int_equal(dt_auth_client(sv[0], &ct, 3, 0, dt_now() + 1, "master"), -DT_ERUNTIME);
    assert_string_equal(dt_last_error(), "master: server failed authentication (wrong job token?)");
    /* And the evil server could not verify the genuine client either. */
    assert_int_equal(dt_wire_recv_msg(sv[1], DT_OP_AUTH, 0, resp, DT_AUTH_RESP_LEN,
                                      DT_AUTH_RESP_LEN, NULL, dt_now() + 1, "c"),
                     0);
    int rank;
    assert_int_equal(dt_auth_server_answer(&srv, &st, resp, &rank, ok, "10.0.0.9:4000"),
                     -DT_ERUNTIME);
    assert_string_equal(dt_last_error(), "10.0.0.9:4000: authentication failed (wrong job token?)");
    close(sv[0]);
    close(sv[1]);
}

static void test_server_rank_is_bound(void **state)
{
    (void)state;
    struct server_run s;
    /* Client meant to reach rank 2; rank 0 answered: the MACs do not match either way. */
    assert_int_equal(handshake(good, good, 2, &s), -DT_ERUNTIME);
    assert_int_equal(s.rc, -DT_ERUNTIME);
    assert_string_equal(s.err, "client: authentication failed (wrong job token?)");
}

static void test_truncated_handshake_is_rejected(void **state)
{
    (void)state;
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    struct dt_auth_token t;
    tok(&t, good);
    uint8_t h[DT_WIRE_HDR];
    dt_wire_pack(h, DT_OP_AUTH, 0, DT_AUTH_RESP_LEN);
    /* Skip reading HELLO; send a header and half the payload, then hang up. */
    assert_int_equal(write(sv[0], h, sizeof h), (ssize_t)sizeof h);
    assert_int_equal(write(sv[0], "0123456789", 10), 10);
    shutdown(sv[0], SHUT_WR);
    int rank;
    assert_int_equal(dt_auth_server(sv[1], &t, 0, &rank, dt_now() + 1, "10.0.0.5:333"),
                     -DT_ERUNTIME);
    assert_string_equal(dt_last_error(), "10.0.0.5:333: connection closed");
    close(sv[0]);
    close(sv[1]);

    /* A silent client: the deadline ends it. */
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    double t0 = dt_now();
    assert_int_equal(dt_auth_server(sv[1], &t, 0, &rank, dt_now() + 0.2, "10.0.0.5:334"),
                     -DT_ERUNTIME);
    assert_string_equal(dt_last_error(), "10.0.0.5:334: timed out");
    assert_true(dt_now() - t0 < 1.0);
    close(sv[0]);
    close(sv[1]);
}

static void test_tokens(void **state)
{
    (void)state;
    char a[65], b[65];
    assert_int_equal(dt_auth_token_generate(a), 0);
    assert_int_equal(dt_auth_token_generate(b), 0);
    assert_int_equal(strlen(a), 64);
    assert_string_not_equal(a, b);
    struct dt_auth_token t;
    assert_int_equal(dt_auth_token_set(&t, "short", 5, "DTRAIN_TOKEN"), -DT_EUSAGE);
    assert_string_equal(dt_last_error(),
                        "DTRAIN_TOKEN: job token too short (5 bytes, need at least 16)");
    char big[300];
    memset(big, 'x', sizeof big);
    assert_int_equal(dt_auth_token_set(&t, big, sizeof big, "f"), -DT_EUSAGE);
    assert_string_equal(dt_last_error(), "f: job token too long (300 bytes, at most 256)");

    unsetenv("DTRAIN_TOKEN");
    assert_int_equal(dt_auth_token_load(&t, NULL), -DT_EUSAGE);
    assert_string_equal(dt_last_error(),
                        "no job token: set DTRAIN_TOKEN or pass --token-file (every host of a "
                        "multi-host job needs the same token)");
    setenv("DTRAIN_TOKEN", a, 1);
    assert_int_equal(dt_auth_token_load(&t, NULL), 0);
    assert_int_equal(t.len, 64);
    assert_memory_equal(t.bytes, a, 64);
    unsetenv("DTRAIN_TOKEN");

    char path[] = "/tmp/dtrain-token-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, b, 64), 64);
    assert_int_equal(write(fd, "\n", 1), 1);
    close(fd);
    assert_int_equal(dt_auth_token_load(&t, path), 0);
    assert_int_equal(t.len, 64);
    assert_memory_equal(t.bytes, b, 64);
    unlink(path);
    assert_int_equal(dt_auth_token_load(&t, path), -DT_EUSAGE);
    assert_non_null(strstr(dt_last_error(), "cannot read the job token"));
}

/* A --token-file that is not a token: a FIFO (its open would block forever) and a file far
 * larger than a token (it is not read whole) are refused, naming the file and why. */
static void test_token_file_is_bounded(void **state)
{
    (void)state;
    char dir[] = "/tmp/dtrain-token-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char fifo[64], big[64], want[256];
    snprintf(fifo, sizeof fifo, "%s/fifo", dir);
    snprintf(big, sizeof big, "%s/big", dir);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    struct dt_auth_token t;
    alarm(10); /* a blocking open would hang: fail instead */
    assert_int_equal(dt_auth_token_load(&t, fifo), -DT_EUSAGE);
    alarm(0);
    snprintf(want, sizeof want,
             "--token-file: cannot read the job token: %s: is a FIFO (named pipe), not a regular "
             "file",
             fifo);
    assert_string_equal(dt_last_error(), want);
    FILE *f = fopen(big, "w");
    assert_non_null(f);
    for (int i = 0; i < DT_AUTH_TOKEN_FILE_MAX + 1; i++)
        fputc('a', f);
    fclose(f);
    chmod(big, 0600);
    assert_int_equal(dt_auth_token_load(&t, big), -DT_EUSAGE);
    snprintf(want, sizeof want, "--token-file: cannot read the job token: %s: larger than %d bytes",
             big, DT_AUTH_TOKEN_FILE_MAX);
    assert_string_equal(dt_last_error(), want);
    unlink(fifo);
    unlink(big);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_good_token_passes_both_ways),
        cmocka_unit_test(test_wrong_token_is_rejected),
        cmocka_unit_test(test_server_with_wrong_token_is_rejected),
        cmocka_unit_test(test_server_rank_is_bound),
        cmocka_unit_test(test_truncated_handshake_is_rejected),
        cmocka_unit_test(test_tokens),
        cmocka_unit_test(test_token_file_is_bounded),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
