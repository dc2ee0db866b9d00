/* dist/wire: header validation (every field), deadline-bounded I/O over a socketpair. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "dist/wire.h"
#include "util/clock.h"
#include "util/err.h"

static int check(uint8_t *h, unsigned op, uint32_t seq, uint32_t lo, uint32_t hi)
{
    struct dt_wire_hdr d;
    return dt_wire_check(&d, h, op, seq, lo, hi, "rank 3 (10.0.0.3)");
}

static void test_good_header_round_trips(void **state)
{
    (void)state;
    uint8_t h[DT_WIRE_HDR];
    struct dt_wire_hdr d;
    dt_wire_pack(h, DT_OP_DATA, 42, 1000);
    assert_int_equal(dt_wire_check(&d, h, DT_OP_DATA, 42, 1000, 1000, "p"), 0);
    assert_int_equal(d.op, DT_OP_DATA);
    assert_int_equal(d.seq, 42);
    assert_int_equal(d.len, 1000);
    assert_memory_equal(h, "DTRN\0\1\0\6\0\0\0\x2a\0\0\3\xe8", 16);
}

static void test_bad_fields_are_rejected(void **state)
{
    (void)state;
    uint8_t h[DT_WIRE_HDR];
    dt_wire_pack(h, DT_OP_DATA, 1, 64);
    h[0] = 'X';
    assert_int_equal(check(h, DT_OP_DATA, 1, 64, 64), -DT_ERUNTIME);
    assert_string_equal(dt_last_error(),
                        "rank 3 (10.0.0.3): bad message magic 0x5854524e (expected 0x4454524e)");
    dt_wire_pack(h, DT_OP_DATA, 1, 64);
    h[5] = 9;
    assert_int_equal(check(h, DT_OP_DATA, 1, 64, 64), -DT_ERUNTIME);
    assert_string_equal(dt_last_error(), "rank 3 (10.0.0.3): protocol version 9 (expected 1)");
    dt_wire_pack(h, DT_OP_TABLE, 1, 64);
    assert_int_equal(check(h, DT_OP_DATA, 1, 64, 64), -DT_ERUNTIME);
    assert_string_equal(dt_last_error(),
                        "rank 3 (10.0.0.3): unexpected message op 5 (TABLE), expected DATA");
    dt_wire_pack(h, 999, 1, 64);
    assert_int_equal(check(h, DT_OP_DATA, 1, 64, 64), -DT_ERUNTIME);
    assert_string_equal(dt_last_error(),
                        "rank 3 (10.0.0.3): unexpected message op 999 (unknown), expected DATA");
    dt_wire_pack(h, DT_OP_DATA, 7, 64);
    assert_int_equal(check(h, DT_OP_DATA, 1, 64, 64), -DT_ERUNTIME);
    assert_string_equal(dt_last_error(), "rank 3 (10.0.0.3): DATA message sequence 7, expected 1");
    dt_wire_pack(h, DT_OP_DATA, 1, 0xffffffffu);
    assert_int_equal(check(h, DT_OP_DATA, 1, 64, 64), -DT_ERUNTIME);
    assert_string_equal(dt_last_error(),
                        "rank 3 (10.0.0.3): DATA message length 4294967295, expected 64");
    dt_wire_pack(h, DT_OP_REGISTER, 1, 300);
    assert_int_equal(check(h, DT_OP_REGISTER, 1, 16, 271), -DT_ERUNTIME);
    assert_string_equal(dt_last_error(),
                        "rank 3 (10.0.0.3): REGISTER message length 300, expected 16..271");
    dt_wire_pack(h, DT_OP_ABORT, 99, 10);
    assert_int_equal(check(h, DT_OP_DATA, 1, 64, 64), 0); /* ABORT is accepted anywhere */
    dt_wire_pack(h, DT_OP_ABORT, 1, DT_WIRE_ABORT_MAX + 1);
    assert_int_equal(check(h, DT_OP_DATA, 1, 64, 64), -DT_ERUNTIME);
    assert_string_equal(dt_last_error(),
                        "rank 3 (10.0.0.3): ABORT message of 481 bytes (at most 480)");
}

static void test_messages_over_a_socketpair(void **state)
{
    (void)state;
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    uint8_t buf[64];
    uint32_t len;
    assert_int_equal(dt_wire_send_msg(sv[0], DT_OP_TABLE, 2, "hello", 5, dt_now() + 1, "a"), 0);
    assert_int_equal(
        dt_wire_recv_msg(sv[1], DT_OP_TABLE, 2, buf, 1, sizeof buf, &len, dt_now() + 1, "b"), 0);
    assert_int_equal(len, 5);
    assert_memory_equal(buf, "hello", 5);

    /* An ABORT becomes the peer's text, control bytes defused. */
    assert_int_equal(
        dt_wire_send_msg(sv[0], DT_OP_ABORT, 0, "lost rank 2\n", 12, dt_now() + 1, "a"), 0);
    assert_int_equal(
        dt_wire_recv_msg(sv[1], DT_OP_TABLE, 3, buf, 1, sizeof buf, &len, dt_now() + 1, "b"),
        -DT_ERUNTIME);
    assert_string_equal(dt_last_error(), "lost rank 2? (reported by b)");

    /* Nothing arrives: the deadline holds. */
    double t0 = dt_now();
    assert_int_equal(dt_wire_recv_all(sv[1], buf, 1, dt_now() + 0.1, "rank 1"), -DT_ERUNTIME);
    assert_string_equal(dt_last_error(), "rank 1: timed out");
    assert_true(dt_now() - t0 < 1.0);

    /* Truncated message, then the peer closes. */
    uint8_t h[DT_WIRE_HDR];
    dt_wire_pack(h, DT_OP_TABLE, 4, 10);
    assert_int_equal(dt_wire_send_all(sv[0], h, sizeof h, dt_now() + 1, "a"), 0);
    assert_int_equal(dt_wire_send_all(sv[0], "abc", 3, dt_now() + 1, "a"), 0);
    close(sv[0]);
    assert_int_equal(
        dt_wire_recv_msg(sv[1], DT_OP_TABLE, 4, buf, 1, sizeof buf, &len, dt_now() + 1, "rank 1"),
        -DT_ERUNTIME);
    assert_string_equal(dt_last_error(), "rank 1: connection closed");
    /* Sending to a closed peer is an error, not a SIGPIPE. */
    uint8_t big[65536] = {0};
    int rc = 0;
    for (int i = 0; i < 8 && rc == 0; i++)
        rc = dt_wire_send_all(sv[1], big, sizeof big, dt_now() + 1, "rank 1");
    assert_int_equal(rc, -DT_ERUNTIME);
    assert_non_null(strstr(dt_last_error(), "rank 1: send: "));
    close(sv[1]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_good_header_round_trips),
        cmocka_unit_test(test_bad_fields_are_rejected),
        cmocka_unit_test(test_messages_over_a_socketpair),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
