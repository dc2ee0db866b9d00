/* A model's call scratch: memory a layer uses only inside one forward or one backward call,
 * shared by all the layers of the model. A model runs one layer at a time, so one buffer sized
 * by the largest layer's need serves them all, where each layer owning its own would cost the
 * sum (in a bf16 ResNet-20 at batch 128: the tile convs' per-thread and per-chunk operand
 * buffers and the emulated convs' rounded x and dy, docs/bf16.md "Memory").
 *
 * A layer states its need at setup (dt_layer_setup.call_scratch_bytes); the model allocates the
 * largest before the layers' init (nn/model.c) and every layer reaches it through l->model.
 * Nothing survives from one call to the next but zeros: a layer whose buffers keep their
 * padding zero from one call to the next (the bf16 tile convs write only the image of each
 * sample, docs/bf16.md) takes the scratch with dt_call_scratch_zeroed and a key naming its
 * layout; the scratch is cleared when the key differs from the last one it was cleared for,
 * so layers of one shape (a ResNet stage's convs) share the zeros and only a change of shape
 * (or another layer's use that does not fit after them) costs a memset.
 */
#ifndef DT_NN_CALL_SCRATCH_H
#define DT_NN_CALL_SCRATCH_H

#include <stddef.h>

#define DT_CALL_SCRATCH_KEY_MAX 64

struct dt_call_scratch {
    unsigned char *base;
    size_t bytes;
    /* the layout [0, zeroed) was cleared for and has since been written only by users of that
     * layout (key_len 0: none) */
    unsigned char key[DT_CALL_SCRATCH_KEY_MAX];
    size_t key_len, zeroed;
};

/* Allocates `bytes` (at least one), zeroed. 0 or -DT_ERUNTIME. */
int dt_call_scratch_alloc(struct dt_call_scratch *s, size_t bytes);
void dt_call_scratch_free(struct dt_call_scratch *s);

/* `bytes` (<= s->bytes) of the scratch for a caller that writes all it reads: after the part
 * the last dt_call_scratch_zeroed kept zero where they fit, so that layers of one layout
 * keep their zeros across other layers' calls (a ResNet stage's convs across its emulated
 * projection's); else its start, which ends those zeros. Aligned as the zeroed part's end. */
void *dt_call_scratch_take(struct dt_call_scratch *s, size_t bytes);

/* The scratch with its first `zero` bytes zero but for what earlier callers with the same key
 * (key_len <= DT_CALL_SCRATCH_KEY_MAX bytes) wrote there: cleared unless the last caller
 * was one of them. Callers of one key must keep their padding zero themselves. */
void *dt_call_scratch_zeroed(struct dt_call_scratch *s, const void *key, size_t key_len,
                             size_t zero);

#endif
