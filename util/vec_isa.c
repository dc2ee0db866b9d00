#include "util/vec_isa.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "util/cpu.h"

static const char *const names[DT_VEC_ISA_COUNT] = {"generic", "avx2", "avx512"};

/* Process-wide: the level every loop of util and dist runs, -1 until the first call. Atomic
 * because the first calls may come from several OpenMP threads at once; they compute the same
 * value, so the one that stores last changes nothing. */
static _Atomic int current = -1;

bool dt_vec_isa_available(enum dt_vec_isa isa)
{
    if (isa == DT_VEC_GENERIC)
        return true;
#if defined(__x86_64__) && defined(__GNUC__)
    struct dt_cpu_features f;
    dt_cpu_features_read(&f);
    if (isa == DT_VEC_AVX2)
        return f.avx2 && f.fma;
    if (isa == DT_VEC_AVX512)
        return f.avx512;
#endif
    return false;
}

const char *dt_vec_isa_name(enum dt_vec_isa isa)
{
    return (unsigned)isa < DT_VEC_ISA_COUNT ? names[isa] : "?";
}

static enum dt_vec_isa best(void)
{
    for (int i = DT_VEC_ISA_COUNT - 1; i > 0; i--)
        if (dt_vec_isa_available((enum dt_vec_isa)i))
            return (enum dt_vec_isa)i;
    return DT_VEC_GENERIC;
}

/* DTRAIN_ISA's names (nn/kernels/isa.c) mapped to these levels: the bf16 paths run on
 * AVX-512 CPUs, so they take the avx512 loops. */
static enum dt_vec_isa from_env(void)
{
    static const struct {
        const char *name;
        enum dt_vec_isa isa;
    } map[] = {{"generic", DT_VEC_GENERIC},
               {"avx2", DT_VEC_AVX2},
               {"avx512", DT_VEC_AVX512},
               {"avx512bf16", DT_VEC_AVX512},
               {"amx", DT_VEC_AVX512}};
    const char *v = getenv("DTRAIN_ISA");
    for (size_t i = 0; v && i < sizeof map / sizeof map[0]; i++)
        if (!strcmp(v, map[i].name) && dt_vec_isa_available(map[i].isa))
            return map[i].isa;
    return best();
}

enum dt_vec_isa dt_vec_isa_get(void)
{
    int isa = atomic_load_explicit(&current, memory_order_relaxed);
    if (isa < 0) {
        isa = (int)from_env();
        atomic_store_explicit(&current, isa, memory_order_relaxed);
    }
    return (enum dt_vec_isa)isa;
}

enum dt_vec_isa dt_vec_isa_force(enum dt_vec_isa isa)
{
    enum dt_vec_isa was = dt_vec_isa_get();
    if ((unsigned)isa < DT_VEC_ISA_COUNT && dt_vec_isa_available(isa))
        atomic_store_explicit(&current, (int)isa, memory_order_relaxed);
    return was;
}
