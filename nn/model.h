/* A model: a list of layers built from the config's layer specs, with every trainable
 * parameter in one contiguous float arena and every gradient in a second arena of the same
 * layout. One all-reduce over `grads` and one optimizer loop over `params` cover the whole
 * model. Non-trainable state (batchnorm running statistics) lives in a third arena, `buffers`.
 *
 * All activation and scratch memory is allocated once by dt_model_build for `max_batch`
 * samples: a training step allocates nothing.
 *
 * Knows nothing of processes or sockets.
 */
#ifndef DT_NN_MODEL_H
#define DT_NN_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nn/call_scratch.h"
#include "nn/grad_tree.h"
#include "nn/layer_spec.h"
#include "nn/precision.h"
#include "util/names.h"

#define DT_MAX_PROFILE_LAYERS 512

/* Per-sample shape: channels x height x width (a flat vector is c x 1 x 1). */
struct dt_shape {
    int c, h, w;
};

#define DT_TENSOR_NAME_MAX 96

/* One named tensor inside an arena, named like the equivalent PyTorch model's state_dict:
 * "<layer>.<tensor>", the layer being its spec's name or "layers.<index>" ("layers.0.weight",
 * "stage2.1.bn1.running_mean"). index_name is always the "layers.<index>" form, which
 * checkpoints written before layers had names use. */
struct dt_tensor_info {
    char name[DT_TENSOR_NAME_MAX];
    char index_name[DT_TENSOR_NAME_MAX];
    int ndim;
    int shape[4];
    size_t offset; /* in floats, into params/grads (trainable) or buffers (not) */
    size_t count;
};

enum dt_loss_kind { DT_LOSS_NLL, DT_LOSS_CROSS_ENTROPY };
#define DT_LOSS_COUNT (DT_LOSS_CROSS_ENTROPY + 1)

/* What a forward pass needs to know besides the input. Randomness (dropout) is keyed by
 * (seed, epoch, global sample index), never by rank, so N instances compute the same math. */
struct dt_forward_ctx {
    bool training;
    uint64_t seed;
    uint64_t epoch;
    const uint64_t *sample_ids; /* batch global sample indices (may be NULL when !training) */
};

struct dt_layer;       /* nn/layers.h */
struct dt_weight_copy; /* nn/weight_copy.h */
struct dt_layer_plan;  /* nn/fusion.h */

/* m->grads holds this many floats after its nparams gradients that no layer reads or writes:
 * the training loop puts its per-step figures and flags there, so one all-reduce carries the
 * gradients and everything the ranks must agree on. */
#define DT_MODEL_GRAD_SPARE 8

/* Sums n floats elementwise, in place, across the processes training together, for layers
 * whose training maths spans the global batch (batchnorm2d's statistics, as SyncBatchNorm).
 * Set by the training code, which owns the communicator; sum NULL = each process alone. The
 * first failure is kept in rc: later calls are skipped and forward/backward return it. Every
 * process must run forward and backward for every step, an empty batch included. */
struct dt_model_allreduce {
    int (*sum)(void *ctx, float *data, size_t n);
    void *ctx;
    int rc;
    int rank, size; /* this process's rank among the `size` that sum (batchnorm's exact sums) */
};

/* dist.batchnorm: batchnorm2d's training statistics over the global batch (the allreduce
 * above, torch SyncBatchNorm) or over each process's own samples (DDP without it). */
enum dt_bn_stats { DT_BN_STATS_SYNC, DT_BN_STATS_PER_INSTANCE };
#define DT_BN_STATS_COUNT (DT_BN_STATS_PER_INSTANCE + 1)
/* "sync", "per_instance" */
extern const struct dt_names dt_bn_stats_names;

/* Bytes a model takes at its max_batch, worked out before any of it is allocated. */
struct dt_model_memory {
    double params;      /* the trainable parameters */
    double grads;       /* their gradients and the non-trainable buffers */
    double activations; /* every kept layer output, skip gradients, the two gradient buffers */
    double scratch;     /* the layers' own: im2col columns, pooling indices, dropout masks, and
                           the call scratch they share (the largest layer's need); with copies */
    double copies;      /* of scratch: a bf16 model's weight copies (nn/weight_copy.h), which the
                           ranks of one host share */
};
double dt_model_memory_total(const struct dt_model_memory *mem);

/* Called after a layer's forward (or backward) with its start and end times (dt_now seconds),
 * on the thread that runs the model; a chunked forward calls it once per chunk. */
struct dt_model_layer_hook {
    void (*fn)(void *ctx, int layer, bool backward, double t0, double t1);
    void *ctx;
};

struct dt_model {
    int nlayers;
    struct dt_layer **layers;
    /* the fusion plan, one record per layer: what each layer runs for a neighbour and what
     * it leaves to one (nn/fusion.h), decided once at build */
    struct dt_layer_plan *plan;
    struct dt_shape input;
    int max_batch;
    int classes; /* output width of the last layer */

    float *params, *grads; /* trainable arena and its gradient, nparams floats each */
    bool params_external;  /* params is caller-owned storage (dt_model_build_in) */
    size_t nparams;
    float *buffers; /* non-trainable state, nbuffers floats */
    size_t nbuffers;
    int ntensors, nbuffer_tensors;
    struct dt_tensor_info *tensors;        /* into params */
    struct dt_tensor_info *buffer_tensors; /* into buffers */

    float *output; /* last forward's output, max_batch x classes */
    /* With dt_model_options.input_grad: the last backward's gradient w.r.t. the model's input
     * (batch x input), valid until the next backward; NULL otherwise. */
    const float *input_grad;
    enum dt_loss_kind loss;
    float label_smoothing; /* cross_entropy's eps in [0, 1]; 0 after build, set by the caller */
    struct dt_model_allreduce allreduce;
    /* Weight gradients summed over slices of this many samples in a fixed tree (nn/grad_tree.h);
     * 0 = over the whole batch at once. Set with dt_model_set_grad_slice. */
    int grad_slice;
    struct dt_grad_tree grad_tree;
    /* what a layer uses only inside one forward or backward call, shared by all the layers,
     * sized by the largest need their setups stated (nn/call_scratch.h) */
    struct dt_call_scratch call_scratch;
    double profile_fwd[DT_MAX_PROFILE_LAYERS], profile_bwd[DT_MAX_PROFILE_LAYERS];
    bool profile;                          /* accumulate per-layer seconds into profile_* */
    struct dt_model_layer_hook layer_hook; /* told each layer's span when fn is set (a trace) */
    struct dt_model_memory memory;         /* what the build allocated, as counted before it did */
    enum dt_precision precision;           /* dt_model_options.precision; layers read it at setup */
    bool bf16_winograd;                    /* dt_model_options.bf16_winograd, likewise */
    /* dt_model_options.fusions: a layer that runs sub-layers of its own (add's projection)
     * fuses them as far as these allow, read at setup */
    unsigned fusions;
    /* bf16 model: how the optimizer step cuts the arena to make the layers' bf16 weight
     * copies (nn/weight_copy.h; NULL when no layer keeps one), and whether the copies are
     * current: set by that step, consumed by the next forward; with copies_external (the
     * copies in the caller's storage, which the ranks of one host share) kept until the
     * weights change */
    struct dt_weight_copy *weight_copy;
    bool weights_copied;
    unsigned char *copies; /* the copy arena: copies_bytes, copies_used taken by the layers */
    size_t copies_bytes, copies_used;
    bool copies_external;
    void *impl;
};

/* How a model is built beyond its layers: the fusions it may make (enum dt_fusion,
 * nn/fusion.h; fused and unfused models compute the same bits) and whether backward also
 * computes the gradient w.r.t. the model's input (m->input_grad), which nothing needs for
 * training. */
struct dt_model_options {
    unsigned fusions;
    bool input_grad;
    enum dt_precision precision; /* conv2d and linear arithmetic (nn/precision.h) */
    /* bf16: the convs emulated on Winograd multiply in bf16 in its domain (train.bf16_winograd,
     * dt_conv_winograd_filter_bf16) */
    bool bf16_winograd;
    /* the bf16 weight copies in the caller's storage of copy_capacity bytes, 64-byte aligned
     * (the ranks of one host share one, train/loop.c); NULL = the model's own */
    void *copy_storage;
    size_t copy_capacity;
};

/* The options dt_model_build uses: every fusion, or those DTRAIN_FUSE names (nn/fusion.h:
 * "none", "all,-pool", "relu,chunks", ...; for debugging and benchmarks); no input gradient.
 * DT_EUSAGE naming DTRAIN_FUSE and the word it does not know. */
int dt_model_default_options(struct dt_model_options *out);

/* Builds the model for inputs of shape `input`, initialising parameters from `seed` with
 * PyTorch's default distributions, with the default options. Fails with DT_EUSAGE naming the
 * layer (index, type and config line) when shapes do not fit. */
int dt_model_build(struct dt_model **out, const struct dt_layer_spec *specs, int nspecs,
                   struct dt_shape input, int max_batch, enum dt_loss_kind loss, uint64_t seed);
/* The same with the parameter arena in caller-owned storage of `capacity` floats (the ranks
 * of one host build their models straight into one shared copy; every rank writes the same
 * initial values, so the caller orders the builds before anything else writes there). The
 * model does not free params. DT_ERUNTIME when the parameters do not fit. params NULL =
 * dt_model_build. opt NULL: the default options (dt_model_build always takes those). */
int dt_model_build_in(struct dt_model **out, const struct dt_layer_spec *specs, int nspecs,
                      struct dt_shape input, int max_batch, enum dt_loss_kind loss, uint64_t seed,
                      float *params, size_t capacity, const struct dt_model_options *opt);
/* The same with options of the caller's (tests comparing fused and unfused models) and the
 * model's own parameter arena. */
int dt_model_build_with(struct dt_model **out, const struct dt_layer_spec *specs, int nspecs,
                        struct dt_shape input, int max_batch, enum dt_loss_kind loss, uint64_t seed,
                        const struct dt_model_options *opt);
void dt_model_free(struct dt_model *m);

/* What dt_model_build would allocate for these layers at max_batch, without allocating any of
 * it: the layers are set up (shapes checked, the same errors as the build) and freed. */
int dt_model_estimate(const struct dt_layer_spec *specs, int nspecs, struct dt_shape input,
                      int max_batch, enum dt_loss_kind loss, struct dt_model_memory *out);
/* The same for a model built with these options (a bf16 model's layers take other buffers
 * than an fp32 one's). */
int dt_model_estimate_with(const struct dt_layer_spec *specs, int nspecs, struct dt_shape input,
                           int max_batch, enum dt_loss_kind loss,
                           const struct dt_model_options *opt, struct dt_model_memory *out);

/* Forward pass on `batch` samples (x: batch x c x h x w floats). Result in m->output. */
int dt_model_forward(struct dt_model *m, const float *x, int batch,
                     const struct dt_forward_ctx *ctx);

/* Loss of the last forward against `labels`: returns the SUM over the batch of per-sample
 * losses in *loss_sum and the number of correct argmax predictions in *correct. */
void dt_model_loss(struct dt_model *m, const uint8_t *labels, int batch, double *loss_sum,
                   int *correct);

/* Backward pass after a training forward of the same batch: every layer with parameters
 * overwrites its slice of m->grads with the gradient of (sum of per-sample losses) x
 * grad_scale; nothing accumulates from one call to the next (a zero-sample batch zeroes the
 * arena). With grad_scale = 1 / (global samples in the step) a sum all-reduce of grads yields
 * exactly the mean-loss gradient. */
int dt_model_backward(struct dt_model *m, const uint8_t *labels, int batch, float grad_scale);

/* Sums every later backward's weight gradients over slices of `slice` samples in a fixed
 * binary tree (nn/grad_tree.h), so that they do not depend on how the global batch is split
 * across processes; 0 turns it off. 0 or DT_ERUNTIME (no memory for the tree's buffers). */
int dt_model_set_grad_slice(struct dt_model *m, int slice);

/* One layer as a summary shows it (dry run, profile): kind, what its spec says in a few
 * characters ("16 3x3/1", "p=0.25"), per-sample output shape and trainable parameters. */
struct dt_layer_summary {
    const char *type;
    char detail[48];
    /* bf16 models, conv2d and linear: the path the layer's products take ("amx", "reference
     * (emulated)", "... fallback: <why>"), then ", output stored as bf16" where the plan's
     * bf16_store says so (alone for a batchnorm2d); "" otherwise */
    char precision[112];
    struct dt_shape out;
    size_t nparams;
};
void dt_model_layer_summary(const struct dt_model *m, int i, struct dt_layer_summary *out);

/* Sets the process's compute threads (OpenBLAS and OpenMP) for this model's kernels. */
void dt_nn_set_threads(int threads);

#endif
