/* dist/wire.c: the input as what a peer sends on a connection (header, payload, or an ABORT
 * with its text), read by dt_wire_recv_msg through a socketpair. */
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "dist/wire.h"
#include "fuzz_common.h"
#include "util/clock.h"

static void seed(const char *dir, const char *name, unsigned op, const char *payload)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f)
        return;
    uint8_t hdr[DT_WIRE_HDR];
    uint32_t len = (uint32_t)strlen(payload);
    dt_wire_pack(hdr, op, 0, len);
    fwrite(hdr, 1, sizeof hdr, f);
    fwrite(payload, 1, len, f);
    fclose(f);
}

/* With FUZZ_SEED_DIR set, valid frames to start the corpus from: a message and an ABORT. */
int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    const char *dir = getenv("FUZZ_SEED_DIR");
    if (dir) {
        seed(dir, "message", 1, "0123456789abcdef");
        seed(dir, "abort", DT_OP_ABORT, "rank 3: out of memory");
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int sv[2];
    if (size > 60000 || socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0)
        return 0;
    size_t at = 0;
    while (at < size) {
        ssize_t n = write(sv[0], data + at, size - at);
        if (n <= 0)
            break;
        at += (size_t)n;
    }
    close(sv[0]);
    uint8_t payload[4096];
    uint32_t len;
    dt_wire_recv_msg(sv[1], 1, 0, payload, 0, sizeof payload, &len, dt_now() + 1, "fuzz peer");
    close(sv[1]);
    return 0;
}
