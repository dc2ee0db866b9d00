/* The Winograd kernel tests' walk over the kernels' builds (test_conv_winograd.c,
 * test_winograd_products.c): check() once on each build this CPU runs (the avx512bf16 build:
 * the AVX-512 kernels plus VDPBF16PS; avx512; avx2), naming the ones it cannot run, the path
 * in use restored after; skipped where it runs none. Include after <cmocka.h>. */
#ifndef DT_TESTS_WINOGRAD_BUILDS_H
#define DT_TESTS_WINOGRAD_BUILDS_H

#include <stdio.h>

#include "nn/kernels/isa.h"

static inline void on_each_build(void (*check)(void))
{
    static const enum dt_isa isas[] = {DT_ISA_AVX512BF16, DT_ISA_AVX512, DT_ISA_AVX2};
    enum dt_isa was = dt_isa_get();
    char err[160];
    int ran = 0;
    for (size_t i = 0; i < sizeof isas / sizeof isas[0]; i++) {
        if (!dt_isa_available(isas[i])) {
            printf("# skipped the %s build: this CPU cannot run it\n", dt_isa_label(isas[i]));
            continue;
        }
        assert_int_equal(dt_isa_set(isas[i], err, sizeof err), 0);
        check();
        ran++;
    }
    assert_int_equal(dt_isa_set(was, err, sizeof err), 0);
    if (!ran)
        skip();
}

#endif
