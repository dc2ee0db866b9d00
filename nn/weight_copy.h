/* The bf16 weight copy written by the optimizer step (a bf16 model, nn/precision.h).
 *
 * A bf16 model's conv2d and linear layers read their weights as bf16: packed in the tile
 * kernels' layouts, or rounded (the emulated mode), a copy of the fp32 master weights that
 * each layer keeps (nn/bf16_layers.h). As oneDNN's bf16 training and the design do, the
 * optimizer step makes that copy: dt_model_optim_step runs the step in pieces
 * (dt_optim_step_pieces), and as each piece of a layer's weights is updated, on the same
 * thread, the layer copies it while the new values are in cache (struct dt_layer_ops's
 * copy_weights). The forward then reads the copy instead of the fp32 weights from memory
 * (the CIFAR CNN's linear layer: 8 MB a step).
 *
 * A copy made so is current for the next forward only (m->weights_copied, which
 * dt_model_forward clears): every other writer of the weights (a checkpoint load, init_from,
 * a test) leaves that forward to copy them from the fp32 masters, as it always did, so no
 * writer can leave a stale copy to train on. Either way the copy has the same bits.
 *
 * The copies live in one arena per model (every layer's, 64-byte aligned), or in storage the
 * caller gives: the ranks of one host share one copy of the weights and the optimizer state
 * (docs/distributed.md), and then one of the copies too. Each rank updates a slice of the
 * weights cut at piece boundaries (dt_weight_copy_cut) and copies its pieces
 * (dt_model_optim_step_slice); after the ranks' barrier every copy is current, and stays so
 * (m->copies_external: no forward clears it) until the next step: no rank ever writes the
 * copies another reads, and each packs only its slice. */
#ifndef DT_NN_WEIGHT_COPY_H
#define DT_NN_WEIGHT_COPY_H

#include "nn/model.h"
#include "nn/optim.h"

/* Bytes dt_model_copy_take takes for a request of `bytes`: 64-byte multiples. */
size_t dt_weight_copy_round(size_t bytes);
/* At build, before the layers' init: the arena of `bytes` (the layers' setups' copy_bytes,
 * rounded), in `storage` (capacity bytes, 64-byte aligned; the ranks' shared copy) when not
 * NULL. 0, -DT_ERUNTIME (out of memory, or the storage too small). */
int dt_weight_copy_arena(struct dt_model *m, size_t bytes, void *storage, size_t capacity);
/* A layer's copy, `bytes` of the arena (its init takes exactly what its setup counted). */
void *dt_model_copy_take(struct dt_model *m, size_t bytes);

/* At build: the pieces the step is cut into (each layer's copy in the pieces its copy_piece
 * allows, the other parameters in blocks of at most 64K floats); m->weight_copy stays NULL
 * when no layer keeps a copy (fp32 models). 0 or -DT_ERUNTIME. */
int dt_weight_copy_plan(struct dt_model *m);
void dt_weight_copy_free(struct dt_model *m);

/* One optimizer step over the model's arena at learning rate lr, the bits of
 * dt_optim_step(o, m->params, m->grads, m->nparams, lr), making the layers' bf16 weight copies
 * as it goes; sets m->weights_copied. Without copies (fp32), dt_optim_step. */
int dt_model_optim_step(struct dt_model *m, struct dt_optim *o, double lr);

/* Shared weights. The arena offset a rank's slice starts at for an even cut at `at`: the
 * first piece boundary at or after it (at rounded down to 16 floats, one cache line, when the
 * model keeps no copy); nparams at the end. */
size_t dt_weight_copy_cut(const struct dt_model *m, size_t at);
/* A rank's step of its slice [lo, hi) of the shared weights (dt_optim_step_range's bits),
 * copying its pieces as it goes when lo and hi are cuts (dt_weight_copy_cut); the caller's
 * barrier then makes every copy current (m->weights_copied). */
int dt_model_optim_step_slice(struct dt_model *m, struct dt_optim *o, size_t lo, size_t hi,
                              double lr);
/* The copies of the pieces in [lo, hi) from the weights as they are (the ranks' first copy). */
void dt_model_copy_slice(struct dt_model *m, size_t lo, size_t hi);

#endif
