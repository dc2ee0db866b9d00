/* The model's call scratch (nn/call_scratch.h). */
#include "nn/call_scratch.h"

#include <assert.h>
#include <string.h>

#include "util/alloc.h"
#include "util/err.h"

int dt_call_scratch_alloc(struct dt_call_scratch *s, size_t bytes)
{
    memset(s, 0, sizeof *s);
    s->base = dt_alloc(bytes ? bytes : 1, 1); /* dt_alloc zeroes it */
    if (!s->base)
        return dt_fail_context(-DT_ERUNTIME, "the layers' call scratch");
    s->bytes = bytes;
    return 0;
}

void dt_call_scratch_free(struct dt_call_scratch *s)
{
    dt_free(s->base);
    memset(s, 0, sizeof *s);
}

void *dt_call_scratch_take(struct dt_call_scratch *s, size_t bytes)
{
    assert(bytes <= s->bytes);
    if (s->key_len && s->zeroed + bytes <= s->bytes) /* room after the kept zeros */
        return s->base + s->zeroed;
    s->key_len = 0; /* the caller's writes end every layout's zeros */
    return s->base;
}

void *dt_call_scratch_zeroed(struct dt_call_scratch *s, const void *key, size_t key_len,
                             size_t zero)
{
    assert(zero <= s->bytes && key_len > 0 && key_len <= DT_CALL_SCRATCH_KEY_MAX);
    if (s->key_len != key_len || memcmp(s->key, key, key_len) != 0 || s->zeroed < zero) {
        memset(s->base, 0, zero);
        memcpy(s->key, key, key_len);
        s->key_len = key_len;
        s->zeroed = zero;
    }
    return s->base;
}
