/* Layer kinds: a small vtable per kind and one table naming them all.
 *
 * Adding a layer kind means one new file (nn/layer_<kind>.c defining its dt_layer_ops) plus
 * one line in nn/layer_table.c. The table also lists which config keys each kind accepts, so
 * train/config.c validates `model.layers` entries without knowing any layer.
 */
#ifndef DT_NN_LAYERS_H
#define DT_NN_LAYERS_H

#include "nn/kernels/fp32/bn_grad.h"
#include "nn/layer_spec.h"
#include "nn/model.h"

struct dt_layer;

struct dt_layer_ops {
    /* Checks the spec against the input shape, sets l->out and the number of trainable and
     * buffer floats the layer needs (l->nparams, l->nbuffers) and the bytes of scratch init
     * will allocate (l->scratch_bytes); allocates nothing batch-sized. DT_EUSAGE with a
     * message naming what does not fit. */
    int (*setup)(struct dt_layer *l, const struct dt_layer_spec *spec, struct dt_shape in);
    /* Describes the layer's tensors (names relative to the layer, e.g. "weight") into the
     * model's tables and initialises parameters with PyTorch's default distribution. */
    int (*init)(struct dt_layer *l, uint64_t seed);
    void (*forward)(struct dt_layer *l, const float *x, float *y, int batch,
                    const struct dt_forward_ctx *ctx);
    /* dy: gradient w.r.t. y; writes dx (may be NULL for the first layer) and WRITES (does not
     * accumulate) every parameter gradient of the layer into l->grads, so the model never has
     * to clear the gradient arena on a normal step. Uses the mode (training or eval) of the
     * layer's last forward. batch >= 1. */
    void (*backward)(struct dt_layer *l, const float *x, const float *y, const float *dy, float *dx,
                     int batch);
    void (*destroy)(struct dt_layer *l);
};

struct dt_layer_kind {
    const char *name;
    const char *const *keys; /* config keys accepted besides "type", NULL-terminated */
    const struct dt_layer_ops *ops;
};

struct dt_layer {
    const struct dt_layer_kind *kind;
    struct dt_layer_spec spec;
    int index; /* position in model.layers, for names and messages */
    struct dt_shape in, out;
    float *params, *grads; /* this layer's slice of the model arenas */
    size_t nparams;
    float *buffers;
    size_t nbuffers;
    void *state;   /* kind-specific (scratch, cached masks, ...) */
    int max_batch; /* set by dt_model_build before setup: scratch is sized for it */
    /* Set by setup when forward can apply a ReLU to y at its store and backward never reads
     * y; the model then sets relu_fused when a relu layer follows, and runs that relu in
     * place on this layer's output (its backward still masks dy by y > 0). */
    bool can_fuse_relu;
    bool relu_fused;
    /* conv2d -> relu -> maxpool2d: set by setup when forward can also run the pool on
     * cache-sized chunks of samples (can_fuse_pool); the model then points pool_fused at the
     * maxpool layer, passes that layer's output as y to forward (this layer's own output is
     * never written), skips the pool's forward and the relu's backward, and sets relu_below
     * on the pool so its backward applies the relu's mask. */
    bool can_fuse_pool;
    struct dt_layer *pool_fused;
    bool relu_below;
    /* Set by setup when backward can run, as it stores dx, the backward of a relu whose
     * output is x (conv2d on the Winograd path): when a relu feeds this layer, the model
     * skips the relu's backward and sets relu_below, and points below_extra at what skip
     * connections sent back to the relu's output (NULL when nothing did); backward then
     * writes dx as (dx + below_extra), 0 where x is not > 0: the relu's gradient, same bits,
     * a pass over the activation less. */
    bool can_mask_relu_below;
    const float *below_extra;
    /* batchnorm2d -> add (identity shortcut): set by setup when forward can also compute the
     * add of the layer above, y + skip (and the relu fused into it), at its store and
     * backward never reads y. The model points add_fused at that add, skips its forward
     * (its backward still runs), and passes its output as this layer's y, with its skip_x
     * set: this layer's own output is never written. plain_add marks such an add. */
    bool can_fuse_add;
    struct dt_layer *add_fused;
    bool plain_add;
    /* batchnorm2d's input gradient in the layer below: set by setup when backward can read its
     * dy through the backward of a batchnorm2d whose input is this layer's output (conv2d on
     * the Winograd path). When such a batchnorm follows and nothing else reads this layer's
     * output, the model points bn_above at it and sets its grad_in_below: the batchnorm's
     * backward takes its sums and gamma's and beta's gradients but writes no dx, the model
     * hands its dy on, and this layer's backward computes the batchnorm's dx as it reads that
     * dy (dt_batchnorm2d_grad): the same bits, a write and a read of the activation less. */
    bool can_take_bn_grad;
    struct dt_layer *bn_above;
    bool grad_in_below;
    /* Set by setup when forward works on any chunk of the batch (ctx->first_sample says
     * which) and gives each sample the same bits whatever the chunk: the model then runs a
     * run of such layers chunk by chunk, so activations between them stay in cache. */
    bool chunkable;
    /* Set by setup when training forward/backward call model->allreduce: the model then runs
     * them even for an empty batch, so every process makes the same collective calls. */
    bool collective;
    struct dt_model *model; /* owner, for dt_layer_describe */
    /* Skip connections (add, concat): the layer `spec.from` back joins this layer's input.
     * skip_from is its absolute index (-1 = the model's input) and skip_shape its output
     * shape, both set before setup. Before each forward and backward the model points skip_x
     * at that output and skip_dx at the gradient it accumulates for it (NULL when no gradient
     * is needed there). skip_dx_fresh says nothing has reached that gradient yet in this
     * backward: the layer then STORES into skip_dx, else it ADDS to it (so the model never
     * clears the buffer). skip_in_dy (identity add): the model leaves that gradient in dy,
     * which it then points skip_dx at, so backward has nothing to store (nn/model.c). */
    int skip_from;
    struct dt_shape skip_shape;
    const float *skip_x;
    float *skip_dx;
    bool skip_dx_fresh;
    bool skip_in_dy;
    /* Set by setup when backward adds dy_extra to dy before using it (relu): the model then
     * hands it what skip connections sent back to this layer's output in dy_extra (NULL when
     * nothing did) instead of adding that to dy in a pass of its own. */
    bool takes_dy_extra;
    const float *dy_extra;
    /* Backward's dx is dy itself (add): the model passes dy on unchanged and calls backward
     * with dx = NULL, saving a copy of the activation. */
    bool dx_is_dy;
    /* Set by setup: bytes of scratch init will allocate for max_batch samples (im2col
     * columns, pooling indices, dropout masks). Setup allocates nothing batch-sized, so the
     * model counts this before any of it is touched (dt_model_estimate). */
    double scratch_bytes;
    /* Inside a layer that owns sub-layers (add's projection): prefix of their tensor names,
     * e.g. "proj.0.", so they read "layers.<index>.proj.0.weight". */
    char name_prefix[16];
};

/* Registers one tensor of layer l in the model's tables as "layers.<index>.<name>"; offset is
 * in floats from the start of the layer's params (trainable) or buffers slice. ndim <= 4;
 * ndim 0 is a scalar. Called from a kind's init. */
void dt_layer_describe(struct dt_layer *l, const char *name, bool trainable, size_t offset,
                       int ndim, const int *shape);

/* Each kind's ops, defined in nn/layer_<kind>.c and listed in nn/layer_table.c. */
extern const struct dt_layer_ops dt_conv2d_ops, dt_linear_ops, dt_maxpool2d_ops, dt_avgpool2d_ops,
    dt_relu_ops, dt_dropout_ops, dt_dropout2d_ops, dt_flatten_ops, dt_batchnorm2d_ops,
    dt_log_softmax_ops, dt_add_ops, dt_concat_ops, dt_global_avgpool_ops, dt_gelu_ops;

/* conv2d's algorithm (nn/layer_conv2d.c). AUTO: Winograd (nn/conv_winograd.h) where it is
 * supported and measured faster (dt_conv_winograd_preferred), else the direct kernels
 * (nn/conv_direct.h) where they support the shape and run AVX-512, else im2col + sgemm. */
enum dt_conv2d_algo { DT_CONV2D_AUTO, DT_CONV2D_GEMM, DT_CONV2D_DIRECT, DT_CONV2D_WINOGRAD };
/* Forces the algorithm of conv2d layers set up from now on, over the layer's own `algo` key
 * (WINOGRAD falls back to DIRECT, and DIRECT to GEMM, for shapes they do not support);
 * returns the previous setting. Process-wide, for tests and benchmarks that compare paths. */
enum dt_conv2d_algo dt_conv2d_force_algo(enum dt_conv2d_algo algo);
/* The algorithm layer l (a conv2d) runs; DT_CONV2D_AUTO for other kinds. */
enum dt_conv2d_algo dt_conv2d_algo_of(const struct dt_layer *l);

/* The input gradient of batchnorm2d layer l (grad_in_below) after its backward, for its input
 * x: pointers into l's state, valid until its next backward. */
void dt_batchnorm2d_grad(const struct dt_layer *l, const float *x, struct dt_bn_grad *out);

/* The kind named `name`, or NULL. */
const struct dt_layer_kind *dt_layer_kind_find(const char *name);
/* "conv2d, linear, ..." for error messages. */
const char *dt_layer_kind_names(void);

#endif
