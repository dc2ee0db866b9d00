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
 * the shared weights' slices other ranks write, a test) leaves that forward to copy them from
 * the fp32 masters, as it always did, so no writer can leave a stale copy to train on. Either
 * way the copy has the same bits. */
#ifndef DT_NN_WEIGHT_COPY_H
#define DT_NN_WEIGHT_COPY_H

#include "nn/model.h"
#include "nn/optim.h"

/* At build: the pieces the step is cut into (each layer's copy in the pieces its copy_piece
 * allows, the other parameters in blocks of at most 64K floats); m->weight_copy stays NULL
 * when no layer keeps a copy (fp32 models). 0 or -DT_ERUNTIME. */
int dt_weight_copy_plan(struct dt_model *m);
void dt_weight_copy_free(struct dt_model *m);

/* One optimizer step over the model's arena at learning rate lr, the bits of
 * dt_optim_step(o, m->params, m->grads, m->nparams, lr), making the layers' bf16 weight copies
 * as it goes; sets m->weights_copied. Without copies (fp32), dt_optim_step. */
int dt_model_optim_step(struct dt_model *m, struct dt_optim *o, double lr);

#endif
