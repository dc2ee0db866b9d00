/* Layer kinds: a small vtable per kind and one table naming them all.
 *
 * Adding a layer kind means one new file (nn/layer_<kind>.c defining its dt_layer_ops) plus
 * one line in nn/layer_table.c. The table also lists which config keys each kind accepts, so
 * train/config.c validates `model.layers` entries without knowing any layer. A kind that can
 * take part in a fusion says so in the capabilities its setup reports (nn/fusion.h); one that
 * says nothing runs alone and needs to know nothing of fusions.
 */
#ifndef DT_NN_LAYERS_H
#define DT_NN_LAYERS_H

#include "nn/kernels/fp32/bn_grad.h"
#include "nn/layer_spec.h"
#include "nn/model.h"
#include "nn/fusion.h"

struct dt_layer;

/* What setup is told besides the layer (kind, spec, index, in and model are set) and what it
 * reports back besides the layer's shapes and sizes. */
struct dt_layer_setup {
    /* add, concat: the output shape of the layer `spec.from` back, and its index (-1 = the
     * model's input) */
    struct dt_shape skip;
    int skip_from;
    /* set by setup: what the model's plan may fuse here (enum dt_layer_cap, nn/fusion.h) */
    unsigned caps;
    /* set by setup: bytes of scratch init will allocate for the model's max_batch samples
     * (im2col columns, pooling indices, dropout masks). Setup allocates nothing batch-sized,
     * so the model counts this before any of it is touched (dt_model_estimate). */
    double scratch_bytes;
    /* set by setup: bytes the layer takes from the model's call scratch (nn/call_scratch.h)
     * inside one forward or backward call; the model allocates the largest layer's need once,
     * shared by all */
    double call_scratch_bytes;
    /* set by setup in a bf16 model (conv2d, linear): bytes of the layer's bf16 weight copy
     * (packed or rounded), which init takes from the model's copy arena (dt_model_copy_take,
     * nn/weight_copy.h); not in scratch_bytes */
    double copy_bytes;
    /* set by setup in a bf16 model (conv2d, linear): the path its products take, text the
     * layer keeps for its lifetime (dt_layer_summary.precision); NULL = nothing to say */
    const char *precision;
};

/* One forward call's context: the caller's, and what the model's plan fused into this layer
 * (nn/fusion.h). All zero but `run`: the layer runs alone. */
struct dt_layer_fwd {
    struct dt_forward_ctx run; /* training, seed, epoch, sample ids */
    /* When the model runs the layer on a chunk of the batch (DT_CAP_CHUNKS), the index of x's
     * first sample in the batch; 0 otherwise. */
    int first_sample;
    bool relu; /* apply the following relu at the store (DT_CAP_RELU_AT_STORE) */
    /* conv2d (DT_CAP_POOL_IN_FORWARD): the maxpool2d two layers up, which forward runs after
     * the relu; y is then that pool's output */
    struct dt_layer *pool;
    /* add, concat: the output the skip connection reads. A layer that computes the identity
     * add above it (DT_CAP_ADD_AT_STORE) gets that add's, and stores y + skip_x (then the relu
     * when `relu`); y is then the add's output. */
    const float *skip_x;
    /* how an add reads skip_x: skip_bf16, stored as bf16 elements (its layer's bf16_store;
     * only for a layer with DT_CAP_BF16_SKIP: a batchnorm2d computing an identity add at its
     * store, an add whose projection conv reads bf16);
     * round_skip, a bf16 model's identity add: the skip rounded to bf16 as it is read (the
     * same values, autocast's bf16 tensor) */
    bool skip_bf16;
    bool round_skip;
    /* bf16 model, the plan's bf16_store (nn/fusion.h): y_bf16, store y as bf16 (y points at
     * dt_bf16 elements; DT_CAP_BF16_STORE); x_bf16, x is stored so (DT_CAP_BF16_INPUT: the
     * layer reads it so in backward too) */
    bool y_bf16;
    bool x_bf16;
    /* bn_input (nn/fusion.h). DT_CAP_BN_RELU_INPUT: x is the input of this batchnorm2d, the
     * layer two below, whose output through the relu between them the layer reads by applying
     * both as it reads x (dt_batchnorm2d_relu), here and in backward. A batchnorm2d with
     * affine_above: compute the statistics and keep the affine for the layer above; y is not
     * written (NULL). */
    const struct dt_layer *bn_below;
    bool affine_above;
    /* bf16 model: the layer's bf16 copy of its weights is current (copy_weights made it in the
     * optimizer step, nn/weight_copy.h); forward does not make it again from the fp32 masters */
    bool weights_copied;
};

/* One backward call's context: what the model's plan and the skip connections hand this
 * layer. All zero: the layer runs alone. */
struct dt_layer_bwd {
    /* add, concat: the skip connection's input (skip_x) and the gradient the model collects
     * for it (skip_dx; NULL when no gradient is needed there). skip_dx_fresh: nothing has
     * reached skip_dx yet in this backward, so the layer STORES into it, else ADDS (the model
     * never clears it). skip_in_dy (identity add): skip_dx is dy itself, nothing to store. */
    const float *skip_x;
    float *skip_dx;
    bool skip_dx_fresh;
    bool skip_in_dy;
    bool skip_bf16; /* skip_x is stored as bf16 (DT_CAP_BF16_SKIP: an add's projection reads it) */
    /* DT_CAP_DY_EXTRA: what skip connections sent back to y, to add to dy (NULL: nothing) */
    const float *dy_extra;
    /* DT_CAP_RELU_BELOW_GRAD: x is a relu's output and dx is written as that relu's backward
     * would write it: (dx + below_extra), 0 where x is not > 0 (below_extra: what skip
     * connections sent to the relu's output, NULL for nothing). maxpool2d run by the conv
     * below: dy masked where y is not > 0, the backward of the relu between them. */
    bool relu_below;
    const float *below_extra;
    /* DT_CAP_BN_ABOVE_GRAD: dy is the output gradient of this batchnorm2d, whose input is
     * this layer's y; backward computes its dx as it reads dy (dt_batchnorm2d_grad) */
    const struct dt_layer *bn_above;
    /* DT_CAP_POOL_ABOVE_GRAD: dy is the output gradient of this maxpool2d (the one forward
     * runs), whose output is pool_y; backward computes its dx sample by sample as it reads dy
     * (dt_maxpool2d_grad_source) */
    const struct dt_layer *pool_above;
    const float *pool_y;
    /* DT_CAP_READS_DY_ROUNDED: dy comes rounded to bf16, the dx of a DT_CAP_DX_ROUNDED conv
     * above (dx_rounded) */
    bool dy_rounded;
    /* batchnorm2d (or maxpool2d, pool_grad) whose input gradient the layer below computes:
     * keep the factors for it (dt_batchnorm2d_grad); the model passes no dx */
    bool grad_in_below;
    /* x is stored as bf16, and read through this batchnorm2d -> relu (as in the forward's
     * struct dt_layer_fwd); with relu_below, the relu's mask is read so too */
    bool x_bf16;
    const struct dt_layer *bn_below;
    /* bn_sums (with bn_below and relu_below) and add_sums (with relu_below): the conv2d
     * stores, as it stores dx, each sample's two backward sums of a batchnorm2d whose dy that
     * dx is (bn_grad.h's struct dt_dx_sums, pointers to sample 0: sums.out its
     * dt_batchnorm2d_sample_sums, sums.x its input, stored as bf16, sums.mean its mean): that
     * batchnorm -> relu below, or the batchnorm whose output reaches the relu below, through
     * an identity add it computes or not. The batchnorm2d is then told sums_given and adds them
     * up instead of reading dy and x again. sums.out NULL: none. */
    struct dt_dx_sums sums;
    bool sums_given;
    /* proj_dx: DT_CAP_DX_EVEN, an add's projection stores skip_dx (a conv2d, dx) at the even
     * rows' even columns only, [C][(H + 1) / 2][(W + 1) / 2] a sample, all its input gradient
     * reaches; DT_CAP_EXTRA_EVEN, below_extra comes so, zero elsewhere */
    bool dx_even;
    bool extra_even;
};

struct dt_layer_ops {
    /* Checks the spec against the input shape, sets l->out and the number of trainable and
     * buffer floats the layer needs (l->nparams, l->nbuffers), and in *s its capabilities and
     * scratch; allocates nothing batch-sized. DT_EUSAGE with a message naming what does not
     * fit. */
    int (*setup)(struct dt_layer *l, const struct dt_layer_spec *spec, struct dt_shape in,
                 struct dt_layer_setup *s);
    /* Describes the layer's tensors (names relative to the layer, e.g. "weight") into the
     * model's tables and initialises parameters with PyTorch's default distribution. */
    int (*init)(struct dt_layer *l, uint64_t seed);
    void (*forward)(struct dt_layer *l, const float *x, float *y, int batch,
                    const struct dt_layer_fwd *c);
    /* dy: gradient w.r.t. y; writes dx (may be NULL for the first layer) and WRITES (does not
     * accumulate) every parameter gradient of the layer into l->grads, so the model never has
     * to clear the gradient arena on a normal step. Uses the mode (training or eval) of the
     * layer's last forward. batch >= 1. */
    void (*backward)(struct dt_layer *l, const float *x, const float *y, const float *dy, float *dx,
                     int batch, const struct dt_layer_bwd *c);
    void (*destroy)(struct dt_layer *l);
    /* bf16 model: the layer's bf16 copy of its weights (its first *count params: packed for
     * the tile kernels, or rounded), which forward makes from the fp32 masters unless told
     * weights_copied, made instead by the optimizer step as it updates them
     * (nn/weight_copy.h). copy_piece returns the piece in floats: copy_weights makes the copy
     * of params [lo, hi) alone when lo and hi are multiples of it or hi = *count; 0 (or a NULL
     * op): the layer keeps no copy. */
    size_t (*copy_piece)(const struct dt_layer *l, size_t *count);
    void (*copy_weights)(struct dt_layer *l, size_t lo, size_t hi);
};

struct dt_layer_kind {
    const char *name;
    const char *const *keys; /* config keys accepted besides "type", NULL-terminated */
    const struct dt_layer_ops *ops;
};

/* What every layer has. What fusions and skip connections need is the model's (m->plan,
 * nn/fusion.h) and reaches forward and backward in their call context. */
struct dt_layer {
    const struct dt_layer_kind *kind;
    struct dt_layer_spec spec;
    int index; /* position in model.layers, for names and messages */
    struct dt_shape in, out;
    float *params, *grads; /* this layer's slice of the model arenas */
    size_t nparams;
    float *buffers;
    size_t nbuffers;
    void *state;            /* kind-specific (scratch, cached masks, ...) */
    struct dt_model *model; /* owner: max_batch, allreduce, grad slices, tensor tables */
};

/* Registers one tensor of layer l in the model's tables as "<spec name>.<name>" (index name
 * "layers.<index>.<name>", the name too when the spec has none); offset is
 * in floats from the start of the layer's params (trainable) or buffers slice. ndim <= 4;
 * ndim 0 is a scalar. Called from a kind's init. */
void dt_layer_describe(struct dt_layer *l, const char *name, bool trainable, size_t offset,
                       int ndim, const int *shape);

/* Runs the init of sub-layer `sub` of a layer that owns sub-layers (add's projection) with its
 * tensors named "<layer>.<prefix><name>", e.g. "layers.5.proj.0.weight" or
 * "layer2.0.shortcut.proj.0.weight" (the sub-layer's spec carries its parent's name). */
int dt_layer_init_sub(struct dt_layer *sub, const char *prefix, uint64_t seed);

/* enum dt_conv2d_algo, conv2d's algorithm, is the `algo` key's enum (nn/layer_spec.h). Forces the
 * algorithm of conv2d layers set up from now on, over the layer's own `algo` key (WINOGRAD falls
 * back to DIRECT, and DIRECT to GEMM, for shapes they do not support); returns the previous
 * setting. Process-wide, for tests and benchmarks that compare paths. */
enum dt_conv2d_algo dt_conv2d_force_algo(enum dt_conv2d_algo algo);
/* The algorithm layer l (a conv2d) runs; DT_CONV2D_AUTO for other kinds. */
enum dt_conv2d_algo dt_conv2d_algo_of(const struct dt_layer *l);

/* The fusions (enum dt_fusion: add, bn_grad, bf16_store) layer l, an add, runs inside its
 * projection shortcut (nn/layer_add.c); 0 for other layers and identity adds. */
unsigned dt_add_projection_fusions(const struct dt_layer *l);

/* The input gradient of batchnorm2d layer l after a backward called with grad_in_below, for
 * its input x: pointers into l's state, valid until its next backward. */
void dt_batchnorm2d_grad(const struct dt_layer *l, const float *x, struct dt_bn_grad *out);
/* The forward of batchnorm2d layer l followed by a relu, for the layer above to apply (its
 * last forward was called with affine_above): l's state, valid until its next forward. */
const struct dt_bn_relu *dt_batchnorm2d_relu(const struct dt_layer *l);
/* Where the layer above stores batchnorm2d layer l's per-sample backward sums for it
 * (bn_sums): [max_batch][2][c] doubles, sum dy then sum dy (x - mean), in bn_grad.h's order. */
double *dt_batchnorm2d_sample_sums(const struct dt_layer *l);

/* The kind named `name`, or NULL. */
const struct dt_layer_kind *dt_layer_kind_find(const char *name);
/* Whether the kind takes config key `key` (one of its keys[]). */
bool dt_layer_kind_takes(const struct dt_layer_kind *kind, const char *key);
/* "conv2d, linear, ..." for error messages. */
const char *dt_layer_kind_names(void);

#endif
