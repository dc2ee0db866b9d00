/* The model's fusion plan: which savings the layer list allows, decided once at build and kept
 * as one record per layer in the model (m->plan), apart from the layers themselves.
 *
 * Each layer kind declares, from its setup, what it can do for a neighbour and what it is to
 * one (enum dt_layer_cap): "my forward can apply a following relu at its store", "I am a relu".
 * The planner (nn/fusion.c) pairs neighbours whose capabilities meet, subject to the graph (a
 * layer whose output a skip connection reads keeps that output) and to the fusions allowed
 * (enum dt_fusion: a build option, DTRAIN_FUSE for debugging). The model then hands each
 * layer's forward and backward what the plan decided for it in their call context
 * (struct dt_layer_fwd / dt_layer_bwd, nn/layers.h); a layer never sees another's record.
 *
 * Every fusion computes the same bits as the unfused graph (tests/unit/test_fusion.c proves
 * each one alone); they only save passes over activations and their memory.
 */
#ifndef DT_NN_FUSION_H
#define DT_NN_FUSION_H

#include <stdbool.h>

struct dt_layer;

/* What a layer declares at setup (struct dt_layer_setup's caps), for the given shapes and
 * path. The first group says what the layer can take over from a neighbour, the second what
 * it is to a neighbour, the last what the model must know about it. */
enum dt_layer_cap {
    /* forward can apply a following relu at its store, and backward never reads y */
    DT_CAP_RELU_AT_STORE = 1u << 0,
    /* forward can run a following relu + maxpool2d itself, on cache-sized chunks of samples
     * (writing the pool's output and indices, dt_maxpool2d_forward_samples) */
    DT_CAP_POOL_IN_FORWARD = 1u << 1,
    /* forward can compute a following identity add (and a relu fused into it) at its store,
     * and backward never reads y */
    DT_CAP_ADD_AT_STORE = 1u << 2,
    /* forward works on any chunk of the batch (first_sample says which) and gives each sample
     * the same bits whatever the chunk */
    DT_CAP_CHUNKS = 1u << 3,
    /* backward can run, as it stores dx, the backward of a relu whose output is x, plus what
     * skip connections sent to that output (struct dt_layer_bwd: relu_below, below_extra) */
    DT_CAP_RELU_BELOW_GRAD = 1u << 4,
    /* backward can compute the input gradient of a batchnorm2d whose input is this layer's
     * output while it reads that batchnorm's dy (dt_batchnorm2d_grad) */
    DT_CAP_BN_ABOVE_GRAD = 1u << 5,
    /* backward can add what skip connections sent to y into dy itself (dy_extra) */
    DT_CAP_DY_EXTRA = 1u << 6,
    /* forward can store y as bf16 (struct dt_layer_fwd's y_bf16) for a reader that reads it
     * so: a bf16 model's tiles conv2d (whose output is bf16 values anyway, as autocast's),
     * batchnorm2d (its output rounded, which the conv above rounds anyway) and an add with a
     * projection that its batchnorm computes */
    DT_CAP_BF16_STORE = 1u << 7,
    /* backward can run the backward of the maxpool2d its forward runs (runs_pool), sample by
     * sample as it reads dy: the pool's dy scattered to the winners, the relu mask applied
     * (struct dt_layer_bwd's pool_above) */
    DT_CAP_POOL_ABOVE_GRAD = 1u << 13,
    /* backward's dx is rounded to bf16 (fp32 values): a bf16 model's conv2d, which returns
     * its input gradient so (autocast's), for a layer below that reads its dy only so */
    DT_CAP_DX_ROUNDED = 1u << 14,
    /* forward and backward can read x as the input of a batchnorm2d -> relu below, applying
     * both as they read it (struct dt_layer_fwd's bn_below): a bf16 model's stride-1 tiles
     * conv2d */
    DT_CAP_BN_RELU_INPUT = 1u << 18,

    /* forward, computing the identity add above (DT_CAP_ADD_AT_STORE), can read its skip
     * stored as bf16 (struct dt_layer_fwd's skip_bf16): batchnorm2d */
    DT_CAP_BF16_SKIP = 1u << 20,
    /* backward's input gradient reaches only the even rows' even columns, and can be stored
     * there alone (struct dt_layer_bwd's dx_even): a bf16 model's stride-2 1x1 tiles conv2d
     * without padding, and an add whose projection is one (for its skip_dx) */
    DT_CAP_DX_EVEN = 1u << 21,
    /* backward, running the relu below's backward, can take its below_extra stored so
     * (extra_even): a bf16 model's stride-2 tiles conv2d */
    DT_CAP_EXTRA_EVEN = 1u << 22,

    /* y = max(x, 0), backward masked by y > 0 */
    DT_CAP_IS_RELU = 1u << 8,
    /* a maxpool2d: a layer below may run its forward (its backward then applies the relu
     * mask of the relu between them, relu_below) */
    DT_CAP_IS_MAXPOOL = 1u << 9,
    /* a batchnorm2d: the layer below may compute its input gradient (grad_in_below) */
    DT_CAP_IS_BATCHNORM = 1u << 10,
    /* an identity add (y = x + skip): the layer below may compute it at its store */
    DT_CAP_IS_IDENTITY_ADD = 1u << 11,
    /* reads x stored as bf16 in forward and backward: a batchnorm2d (its input gradient then
     * computed by the layer below: grad_in_below), a bf16 model's stride-1 tiles conv2d (its
     * relu below's mask then read from it: relu_below) */
    DT_CAP_BF16_INPUT = 1u << 12,
    /* backward reads dy only rounded to bf16 and, told that it comes rounded (dy_rounded),
     * skips its own rounding pass: a bf16 model's emulated conv2d */
    DT_CAP_READS_DY_ROUNDED = 1u << 15,

    /* backward's dx is dy itself: the model passes dy on and calls backward with dx = NULL */
    DT_CAP_DX_IS_DY = 1u << 16,
    /* forward's y is x itself, the same elements in the same order (flatten): the model may
     * alias the output to the input and skip the forward (view) */
    DT_CAP_Y_IS_X = 1u << 19,
    /* training forward/backward call model->allreduce: run even for an empty batch */
    DT_CAP_COLLECTIVE = 1u << 17,
};

/* The fusions, each of which can be turned off (struct dt_model_options, DTRAIN_FUSE). Some
 * need another: pool needs relu, pool_grad needs pool, skip_in_dy needs relu_below, dx_rounded
 * needs relu and relu_below, bn_input needs bf16_store, bn_sums needs bn_input, add_sums needs
 * relu_below and bf16_store, proj_dx needs relu_below. */
enum dt_fusion {
    DT_FUSE_RELU = 1u << 0,        /* relu at the store of the layer below, run in place */
    DT_FUSE_POOL = 1u << 1,        /* conv2d -> relu -> maxpool2d in one chunked forward */
    DT_FUSE_ADD = 1u << 2,         /* identity add at the store of the batchnorm2d below */
    DT_FUSE_RELU_BELOW = 1u << 3,  /* a relu's backward in the conv2d above it */
    DT_FUSE_BN_GRAD = 1u << 4,     /* batchnorm2d's input gradient in the conv2d below it */
    DT_FUSE_DY_EXTRA = 1u << 5,    /* skip gradients added in relu's backward pass */
    DT_FUSE_SKIP_IN_DY = 1u << 6,  /* an identity add's skip gradient left in its dy buffer */
    DT_FUSE_CHUNKS = 1u << 7,      /* runs of chunkable layers, chunk by chunk (one thread) */
    DT_FUSE_BF16_STORE = 1u << 8,  /* activations stored as bf16 between a bf16 conv2d and a
                                      batchnorm2d (needs bn_grad; relu, relu_below) */
    DT_FUSE_POOL_GRAD = 1u << 9,   /* a fused maxpool2d's backward in the conv2d's (needs pool) */
    DT_FUSE_DX_ROUNDED = 1u << 10, /* an emulated bf16 conv2d's dy taken as rounded, which the
                                      bf16 conv2d above stores so (needs relu, relu_below) */
    DT_FUSE_BN_INPUT = 1u << 11,   /* a batchnorm2d -> relu's output never stored: the conv2d
                                      above applies both as it reads their input (needs
                                      bf16_store) */
    DT_FUSE_VIEW = 1u << 12,       /* a flatten's output is its input's storage, not a copy */
    DT_FUSE_BN_SUMS = 1u << 13,    /* the two backward sums of that batchnorm2d (bn_input)
                                      taken by the conv2d above as it stores dx (needs
                                      bn_input) */
    DT_FUSE_ADD_SUMS = 1u << 14,   /* the two backward sums of a batchnorm2d -> relu, or of a
                                      batchnorm2d computing an identity add -> relu, taken by
                                      the conv2d above the relu as it stores dx (needs
                                      relu_below, bf16_store) */
    DT_FUSE_PROJ_DX = 1u << 15,    /* a stride-2 projection's input gradient kept at the
                                      positions it reaches, a quarter of the skip's, for the
                                      conv2d above the skip's relu (needs relu_below) */
    DT_FUSE_ALL = (1u << 16) - 1,
    DT_FUSE_NONE = 0,
};

/* The plan's record of one layer. All false / 0 = the layer runs alone. */
struct dt_layer_plan {
    unsigned caps; /* what the layer's setup declared (enum dt_layer_cap) */
    /* add, concat: the layer whose output joins this one's input (-1 = the model's input);
     * other layers: index - 1 */
    int skip_from;
    bool referenced; /* a skip connection reads this layer's output: it is kept as it is */
    /* forward */
    bool relu_at_store; /* forward applies the next layer's relu at its store (relu fusion) */
    bool in_place;      /* a relu run by the layer below, or a flatten (view): its output
                           aliases that layer's and its forward is skipped */
    bool runs_pool;     /* forward also runs the relu and the maxpool2d two layers up; y is the
                           pool's output, this layer's own is never written (pool fusion) */
    bool runs_add;      /* batchnorm2d: forward computes the identity add above (and its relu)
                           at its store; y is the add's output (add fusion) */
    bool forward_below; /* this layer's forward is run by the layer below (runs_pool, runs_add) */
    bool bf16_store;    /* y is stored as bf16 (bf16_store); a relu run in place on it (in_place)
                           has this set too, its output being the same storage */
    bool affine_above;  /* batchnorm2d: y is never written, the layer above applies the
                           batchnorm and the relu between them as it reads x (bn_input); the
                           relu in place on it has this set too */
    bool bn_below;      /* forward and backward read x through the batchnorm2d -> relu below:
                           x is the batchnorm's input, layer index - 3's output (bn_input) */
    bool sums_below;    /* and backward takes that batchnorm's two sums as it stores dx; the
                           batchnorm's sums_above (bn_sums); or those of the batchnorm2d below
                           the relu below, through an identity add it computes or not
                           (add_sums) */
    int sums_of;        /* with sums_below: that batchnorm's index */
    bool sums_above;
    int run_end;   /* > 0 at the first layer of a chunked run: 1 + its last layer */
    int run_chunk; /* samples per chunk of that run */
    /* backward */
    bool relu_below;     /* backward runs the backward of the relu below (relu_below fusion,
                            or a maxpool2d that a conv2d -> relu runs) */
    bool backward_above; /* a relu whose backward the layer above runs */
    bool bn_above;       /* backward computes the input gradient of the batchnorm2d above */
    bool pool_above;     /* backward runs the backward of the maxpool2d it runs (runs_pool) */
    bool dy_rounded;     /* backward's dy comes rounded to bf16: no rounding pass (dx_rounded) */
    bool grad_in_below;  /* batchnorm2d, or maxpool2d under pool_grad: writes no dx, the layer
                            below computes it from this layer's dy */
    bool dy_extra;       /* backward adds skip gradients to dy itself (dy_extra fusion) */
    bool skip_in_dy;     /* identity add: its skip gradient stays in its dy buffer */
    bool pending_in_dy;  /* the skip gradient sent to this layer's output is that buffer */
    bool dx_even;        /* add with a projection: its skip gradient is stored at the even
                            positions alone (proj_dx) */
    bool extra_even;     /* backward's below_extra comes so (proj_dx) */
};

/* Fills plan[0..n) for layers[0..n) (set up: caps in plan[i].caps, skip_from set) with the
 * fusions in `fusions` (enum dt_fusion) that the layers allow. max_batch bounds the chunk of
 * a run; threads is the compute thread count (chunked runs only at one). first_param is the
 * lowest layer whose backward runs (skip gradients below it are never kept). */
void dt_fusion_plan(struct dt_layer_plan *plan, struct dt_layer *const *layers, int n,
                    unsigned fusions, int max_batch, int threads, int first_param);

/* The fusions named by `text`, DTRAIN_FUSE's syntax: "all", "none", or a comma-separated list
 * of names (relu, pool, add, relu_below, bn_grad, dy_extra, skip_in_dy, chunks, bf16_store,
 * pool_grad, dx_rounded, bn_input, view, bn_sums, add_sums, proj_dx), each
 * adding that fusion, or removing it with a leading '-' ("all,-pool"), from none. 0 or DT_EUSAGE
 * naming the word that is not a fusion. */
int dt_fusion_parse(const char *text, unsigned *out);

/* "relu, pool, ..." for messages and docs. */
const char *dt_fusion_names(void);

#endif
