#include "nn/kernels/bf16/amx.h"

#include <errno.h>
#include <immintrin.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "util/cpu.h"

#define ARCH_REQ_XCOMP_PERM 0x1023
#define XFEATURE_XTILEDATA  18

static pthread_once_t once = PTHREAD_ONCE_INIT;
static bool usable;
static char why_not[128];

static void ask_linux(void)
{
    struct dt_cpu_features f;
    dt_cpu_features_read(&f);
    if (!f.amx_bf16) {
        snprintf(why_not, sizeof why_not, "the CPU has no AMX-BF16");
        return;
    }
    if (syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) != 0) {
        snprintf(why_not, sizeof why_not, "Linux refused the AMX tile data (arch_prctl: %s)",
                 strerror(errno));
        return;
    }
    usable = true;
}

bool dt_amx_usable(const char **why)
{
    pthread_once(&once, ask_linux);
    if (why)
        *why = usable ? "" : why_not;
    return usable;
}

/* Palette 1: 8 tiles, each 16 rows of 64 bytes. */
struct tile_config {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
};

/* In static memory, not built on the stack: gcc 12 does not see that ldtilecfg reads the whole
 * 64 bytes and dropped the stores of rows and colsb (the load then faulted). */
static const struct tile_config config = {
    .palette = 1,
    .colsb = {64, 64, 64, 64, 64, 64, 64, 64},
    .rows = {16, 16, 16, 16, 16, 16, 16, 16},
};

static _Thread_local bool configured;

__attribute__((target("amx-tile"))) void dt_amx_configure_thread(void)
{
    if (configured)
        return;
    dt_amx_usable(NULL); /* the permission request, if no caller made it yet */
    _tile_loadconfig(&config);
    configured = true;
}
