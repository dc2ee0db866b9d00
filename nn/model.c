/* The model: builds layers from specs, owns the three arenas (params, grads, buffers), the
 * activations and the gradient ping-pong buffers, and runs forward, loss and backward.
 *
 * Memory, all allocated by dt_model_build for max_batch samples and never during a step:
 *   act[i]          output of layer i (max_batch x its per-sample size); act[n-1] is m->output.
 *                   Every output is kept because backward needs x and y of each layer, but
 *                   that of a batchnorm that computes the add above it (NULL: never written).
 *   grad_a, grad_b  gradient w.r.t. the current layer's output and input, swapped per layer;
 *                   each holds the largest activation of the model.
 *   layer scratch   owned by each layer (im2col columns, pooling indices, dropout masks).
 * Parameters of layer i occupy one contiguous slice of params (and the same slice of grads),
 * in layer order, so the arena is exactly PyTorch's parameters() order.
 *
 * Layers overwrite their parameter gradients in backward (nn/layers.h), so grads is cleared
 * only for a step with no samples.
 *
 * Seven savings the layer list allows, decided once at build:
 *   - ReLU fusion: a layer that can apply ReLU at its store (l->can_fuse_relu: conv2d) and is
 *     followed by a relu layer does so; the relu's activation aliases the layer's output and
 *     its forward is skipped. Its backward still runs (dy masked by y > 0, the same values).
 *     When a maxpool2d follows the relu and the layer can also run it (l->can_fuse_pool:
 *     conv2d on the direct path), the layer's forward runs the relu and the pool chunk by
 *     chunk and writes the pool's output; the pool's backward applies the relu's mask, and
 *     the relu's backward is skipped (nn/layers.h). The layer's and the relu's activations
 *     are then not written.
 *   - Adds in the batchnorm below: an identity add (l->plain_add) whose input only it reads,
 *     computed by the batchnorm2d below it at its store (l->can_fuse_add), with the relu
 *     fused into the add: the add's forward is skipped and the batchnorm's own output is not
 *     written, a write and a read of the activation less (its backward still runs).
 *   - Relus in the conv above: a relu feeding a conv2d on the Winograd path
 *     (l->can_mask_relu_below; every relu inside a ResNet but the last) has its backward
 *     skipped, and the conv's backward writes dx as the relu's would: plus the gradient skip
 *     connections sent to the relu's output, masked by x > 0. A pass over the activation (two
 *     reads and a write, three with a skip gradient) less.
 *   - Batchnorm input gradients in the conv below: a batchnorm2d whose input is the output of
 *     a conv2d on the Winograd path (l->can_take_bn_grad) that nothing else reads takes only
 *     its sums; the model hands its dy to the conv, whose backward computes the batchnorm's
 *     dx as it reads dy. The batchnorm's dx is never written nor read back.
 *   - Skip gradients left in dy: an identity add whose skip gradient the conv above the skip's
 *     source reads (as relu_below's extra) before backward writes the add's dy buffer again
 *     (skip_stays_in_dy) leaves it there instead of copying it into pending; that pending
 *     buffer is not allocated (ResNet-20 at batch 128: 36 MB).
 *   - Chunked runs: consecutive layers whose forward works on any chunk of the batch
 *     (l->chunkable: conv2d on the direct path, with whatever is fused into it) run chunk by
 *     chunk, each chunk through all of them, so e.g. conv1's output is read by conv2 while it
 *     is still in L2 instead of coming back from memory (at one thread: see
 *     plan_chunked_run).
 * Fused, chunked and plain models compute the same bits.
 *   - No input gradient below the first layer with parameters: backward stops there and that
 *     layer gets dx = NULL (nobody needs the gradient of the model's input).
 */
#include "nn/model.h"

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nn/layer_common.h"
#include "nn/loss.h"
#include "util/alloc.h"
#include "util/clock.h"
#include "util/err.h"

/* weight, bias; add's projection: conv weight, bias, batchnorm weight, bias */
#define MAX_PARAM_TENSORS  4
#define MAX_BUFFER_TENSORS 3 /* running_mean, running_var, num_batches_tracked */

/* Process-wide switch for tests and benchmarks (dt_model_allow_fusion). */
static bool fusion_allowed = true;

bool dt_model_allow_fusion(bool allow)
{
    bool was = fusion_allowed;
    fusion_allowed = allow;
    return was;
}

struct model_impl {
    float **act;
    bool *in_place;  /* layer i is a relu fused into layer i-1: act[i] aliases act[i-1] */
    bool *skip_fwd;  /* layer i is run by a layer below (pool_fused, add_fused) */
    bool *skip_bwd;  /* layer i is a relu whose backward the layer above runs (relu_below) */
    int *seg_end;    /* > 0 at the first layer of a chunked run: 1 + its last layer */
    int *seg_chunk;  /* samples per chunk of that run */
    int first_param; /* lowest layer with parameters (nlayers when none): backward stops there */
    /* Skip connections: pending[i] (when layer i's output feeds an add or concat further up)
     * collects the gradient those layers send back to it, added to layer i's dy on the way
     * down; pending_live[i] says something reached it in this backward (the first layer to
     * send stores, later ones add); referenced[i] keeps layer i's output from being fused
     * away. */
    float **pending;
    bool *pending_live;
    /* in_dy[k]: pending[k] is not allocated; the one identity add that sends to it leaves its
     * gradient in its own dy buffer, which backward does not overwrite before the conv above k
     * has read it (skip_stays_in_dy) */
    bool *in_dy;
    bool *referenced;
    float *grad_a, *grad_b;
    const float *input; /* the last forward's x (not copied) */
    int last_batch;
    int tensor_cap, buffer_tensor_cap;
};

static size_t shape_size(struct dt_shape s)
{
    return (size_t)s.c * s.h * s.w;
}

void dt_layer_describe(struct dt_layer *l, const char *name, bool trainable, size_t offset,
                       int ndim, const int *shape)
{
    struct dt_model *m = l->model;
    struct model_impl *impl = m->impl;
    struct dt_tensor_info *t;
    if (trainable) {
        if (m->ntensors >= impl->tensor_cap)
            return;
        t = &m->tensors[m->ntensors++];
        t->offset = (size_t)(l->params - m->params) + offset;
    } else {
        if (m->nbuffer_tensors >= impl->buffer_tensor_cap)
            return;
        t = &m->buffer_tensors[m->nbuffer_tensors++];
        t->offset = (size_t)(l->buffers - m->buffers) + offset;
    }
    snprintf(t->index_name, sizeof t->index_name, "layers.%d.%s%s", l->index, l->name_prefix, name);
    if (l->spec.name[0])
        snprintf(t->name, sizeof t->name, "%s.%s%s", l->spec.name, l->name_prefix, name);
    else
        memcpy(t->name, t->index_name, sizeof t->name);
    t->ndim = ndim;
    t->count = 1;
    for (int d = 0; d < 4; d++) {
        t->shape[d] = d < ndim ? shape[d] : 0;
        if (d < ndim)
            t->count *= (size_t)shape[d];
    }
}

/* "layer 3 (linear, config line 12)" prefix for a layer's own message. */
static int layer_context(int rc, const struct dt_layer_spec *spec, int index)
{
    if (spec->line > 0)
        return dt_fail_context(rc, "layer %d (%s, config line %d)", index, spec->type, spec->line);
    return dt_fail_context(rc, "layer %d (%s)", index, spec->type);
}

static int setup_layer(struct dt_model *m, int i, const struct dt_layer_spec *spec,
                       struct dt_shape in)
{
    const struct dt_layer_kind *kind = dt_layer_kind_find(spec->type);
    if (!kind || !kind->ops)
        return layer_context(dt_fail(DT_EUSAGE, "unknown layer type '%s' (known: %s)", spec->type,
                                     dt_layer_kind_names()),
                             spec, i);
    struct dt_layer *l = calloc(1, sizeof *l);
    if (!l)
        return dt_fail(DT_ERUNTIME, "out of memory building layer %d", i);
    m->layers[i] = l;
    l->kind = kind;
    l->spec = *spec;
    l->index = i;
    l->in = in;
    l->max_batch = m->max_batch;
    l->model = m;
    l->skip_from = i - 1;
    if (spec->from != 0) {
        l->skip_from = i + spec->from;
        if (spec->from > -2 || l->skip_from < -1)
            return layer_context(
                dt_fail(DT_EUSAGE,
                        "from = %d: expected -2 (two layers back) to %d (the model's input)",
                        spec->from, -(i + 1)),
                spec, i);
        l->skip_shape = l->skip_from >= 0 ? m->layers[l->skip_from]->out : m->input;
    }
    int rc = kind->ops->setup(l, spec, in);
    if (rc < 0)
        return layer_context(rc, spec, i);
    if (l->out.c < 1 || l->out.h < 1 || l->out.w < 1)
        return layer_context(
            dt_fail(DT_EUSAGE, "output shape %dx%dx%d is empty", l->out.c, l->out.h, l->out.w),
            spec, i);
    return 0;
}

static int allocate_arenas(struct dt_model *m)
{
    struct model_impl *impl = m->impl;
    m->params = dt_alloc(m->nparams ? m->nparams : 1, sizeof(float));
    m->grads = dt_alloc(m->nparams + DT_MODEL_GRAD_SPARE, sizeof(float));
    m->buffers = dt_alloc(m->nbuffers ? m->nbuffers : 1, sizeof(float));
    impl->tensor_cap = MAX_PARAM_TENSORS * m->nlayers;
    impl->buffer_tensor_cap = MAX_BUFFER_TENSORS * m->nlayers;
    m->tensors = calloc((size_t)impl->tensor_cap, sizeof *m->tensors);
    m->buffer_tensors = calloc((size_t)impl->buffer_tensor_cap, sizeof *m->buffer_tensors);
    impl->act = calloc((size_t)m->nlayers, sizeof *impl->act);
    if (!m->params || !m->grads || !m->buffers || !m->tensors || !m->buffer_tensors || !impl->act)
        return dt_fail(DT_ERUNTIME, "out of memory allocating the model's arenas");
    size_t largest = shape_size(m->input);
    for (int i = 0; i < m->nlayers; i++) {
        size_t n = shape_size(m->layers[i]->out);
        if (n > largest)
            largest = n;
        if (impl->in_place[i]) {
            impl->act[i] = impl->act[i - 1];
            continue;
        }
        if (m->layers[i]->add_fused) /* never written: the layer stores the add's output */
            continue;
        impl->act[i] = dt_alloc((size_t)m->max_batch * n, sizeof(float));
        if (!impl->act[i])
            return dt_fail_context(-DT_ERUNTIME, "activations of layer %d", i);
    }
    impl->pending = calloc((size_t)m->nlayers, sizeof *impl->pending);
    impl->pending_live = calloc((size_t)m->nlayers, sizeof *impl->pending_live);
    if (!impl->pending || !impl->pending_live)
        return dt_fail(DT_ERUNTIME, "out of memory allocating the model's arenas");
    for (int i = 0; i < m->nlayers; i++)
        if (impl->referenced[i] && !impl->in_dy[i] &&
            !(impl->pending[i] =
                  dt_alloc((size_t)m->max_batch * shape_size(m->layers[i]->out), sizeof(float))))
            return dt_fail_context(-DT_ERUNTIME, "skip-connection gradients of layer %d", i);
    impl->grad_a = dt_alloc((size_t)m->max_batch * largest, sizeof(float));
    impl->grad_b = dt_alloc((size_t)m->max_batch * largest, sizeof(float));
    if (!impl->grad_a || !impl->grad_b)
        return dt_fail_context(-DT_ERUNTIME, "activation gradients");
    return 0;
}

static int init_layers(struct dt_model *m, uint64_t seed)
{
    size_t p = 0, b = 0;
    for (int i = 0; i < m->nlayers; i++) {
        struct dt_layer *l = m->layers[i];
        l->params = m->params + p;
        l->grads = m->grads + p;
        l->buffers = m->buffers + b;
        p += l->nparams;
        b += l->nbuffers;
        if (l->kind->ops->init) {
            int rc = l->kind->ops->init(l, seed);
            if (rc < 0)
                return layer_context(rc, &l->spec, i);
        }
    }
    return 0;
}

/* Bytes of intermediate activation per sample a chunk of a run keeps in cache. */
#define RUN_CHUNK_BYTES (256 * 1024)

/* If layers from i on form a run of at least two chunkable layers (with only layers fused
 * into them in between), records it and returns the index after it; else returns i + 1. */
static int plan_chunked_run(struct dt_model *m, int i)
{
    struct model_impl *impl = m->impl;
    /* With more threads every chunk costs a fork/join per layer (a scheduler tick each on a
     * busy machine) and the gain was not measurable: one thread only. */
    if (!m->layers[i]->chunkable || omp_get_max_threads() > 1)
        return i + 1;
    int k = i + 1, count = 1;
    size_t widest = 1;
    for (; k < m->nlayers; k++) {
        if (impl->in_place[k] || impl->skip_fwd[k])
            continue;
        if (!m->layers[k]->chunkable)
            break;
        count++;
        size_t between = shape_size(m->layers[k]->in) * sizeof(float);
        widest = between > widest ? between : widest;
    }
    if (count < 2)
        return i + 1;
    size_t chunk = widest < RUN_CHUNK_BYTES ? RUN_CHUNK_BYTES / widest : 1;
    impl->seg_end[i] = k;
    impl->seg_chunk[i] = chunk < (size_t)m->max_batch ? (int)chunk : m->max_batch;
    return k;
}

/* Whether identity add i's gradient for its skip source k can stay in the add's dy buffer
 * (call it A) instead of being copied into pending[k]. Backward passes A down as the main
 * branch's dy and alternates two buffers from there: A must not be written before the layer
 * just above k reads it, except by that layer itself as the conv that runs k's relu backward
 * with pending[k] as its extra gradient (its store reads each element of the extra gradient
 * before writing the same element). So: the add is pending[k]'s only sender, nothing between
 * reads a skip gradient or sends one, and the layers between write A, counted along the
 * alternation, only there. Needs first_param. */
static bool skip_stays_in_dy(const struct dt_model *m, int i)
{
    const struct model_impl *impl = m->impl;
    const struct dt_layer *l = m->layers[i];
    int k = l->skip_from;
    if (!l->plain_add || !l->dx_is_dy || k < impl->first_param || k + 1 >= i)
        return false;
    for (int j = 0; j < m->nlayers; j++)
        if (j != i && m->layers[j]->spec.from && m->layers[j]->skip_from == k)
            return false;
    const struct dt_layer *taker = m->layers[k + 1];
    if (!impl->skip_bwd[k] || !taker->relu_below || taker->kind->ops != &dt_conv2d_ops)
        return false;
    bool in_a = true; /* where the current dy is */
    for (int j = i - 1; j > k; j--) {
        const struct dt_layer *b = m->layers[j];
        if (impl->referenced[j] || b->spec.from)
            return false;
        if (impl->skip_bwd[j] || b->dx_is_dy || b->grad_in_below)
            continue; /* dy passes on in the same buffer */
        in_a = !in_a; /* j writes its dx into the other buffer */
        if (in_a && j != k + 1)
            return false;
    }
    return true;
}

/* ReLU fusion, fused adds, relu backwards in the conv above, chunked runs, skip gradients into
 * relu, skip gradients left in dy and the backward stop (see the top of this file). */
static void plan(struct dt_model *m)
{
    struct model_impl *impl = m->impl;
    for (int i = 0; i < m->nlayers; i++)
        if (m->layers[i]->spec.from != 0 && m->layers[i]->skip_from >= 0)
            impl->referenced[m->layers[i]->skip_from] = true;
    for (int i = 1; fusion_allowed && i < m->nlayers; i++) {
        struct dt_layer *prev = m->layers[i - 1];
        /* a fused relu overwrites prev's output, a fused pool skips both outputs */
        if (m->layers[i]->kind->ops != &dt_relu_ops || !prev->can_fuse_relu ||
            impl->referenced[i - 1])
            continue;
        prev->relu_fused = true;
        impl->in_place[i] = true;
        struct dt_layer *pool = i + 1 < m->nlayers ? m->layers[i + 1] : NULL;
        if (pool && pool->kind->ops == &dt_maxpool2d_ops && prev->can_fuse_pool &&
            !impl->referenced[i]) {
            prev->pool_fused = pool;
            pool->relu_below = true;
            impl->skip_fwd[i + 1] = true;
            impl->skip_bwd[i] = true;
        }
    }
    for (int i = 1; fusion_allowed && i < m->nlayers; i++) {
        struct dt_layer *below = m->layers[i - 1], *l = m->layers[i];
        /* an add nobody else reads the input of: the layer below computes it */
        if (l->plain_add && below->can_fuse_add && !impl->referenced[i - 1]) {
            below->add_fused = l;
            impl->skip_fwd[i] = true;
        }
        /* the relu's backward in this layer's (skip gradients to the relu included) */
        if (l->can_mask_relu_below && below->kind->ops == &dt_relu_ops) {
            l->relu_below = true;
            impl->skip_bwd[i - 1] = true;
        }
        /* this batchnorm's input gradient in the layer below's backward */
        if (l->kind->ops == &dt_batchnorm2d_ops && below->can_take_bn_grad &&
            !impl->referenced[i - 1]) {
            below->bn_above = l;
            l->grad_in_below = true;
        }
    }
    for (int i = 0; fusion_allowed && i < m->nlayers;)
        i = plan_chunked_run(m, i);
    for (int i = 0; !fusion_allowed && i < m->nlayers; i++)
        m->layers[i]->takes_dy_extra = false; /* skip gradients added in a pass of their own */
    impl->first_param = m->nlayers;
    for (int i = m->nlayers - 1; i >= 0; i--)
        if (m->layers[i]->nparams)
            impl->first_param = i;
    for (int i = 0; fusion_allowed && i < m->nlayers; i++)
        if (skip_stays_in_dy(m, i)) {
            m->layers[i]->skip_in_dy = true;
            impl->in_dy[m->layers[i]->skip_from] = true;
        }
}

/* What the arenas, activations and layer scratch will take, worked out from the layers' setup
 * and the plan the way allocate_arenas and the layers' init will allocate them. */
static void count_memory(const struct dt_model *m, struct dt_model_memory *out)
{
    const struct model_impl *impl = m->impl;
    double batch = m->max_batch, act = 0, largest = (double)shape_size(m->input), scratch = 0;
    for (int i = 0; i < m->nlayers; i++) {
        const struct dt_layer *l = m->layers[i];
        double n = (double)shape_size(l->out);
        largest = n > largest ? n : largest;
        if (!impl->in_place[i] && !l->add_fused)
            act += n;
        if (impl->referenced[i] && !impl->in_dy[i])
            act += n; /* pending skip gradient */
        scratch += l->scratch_bytes;
    }
    *out = (struct dt_model_memory){
        .params = 4.0 * (double)m->nparams,
        .grads = 4.0 * ((double)m->nparams + DT_MODEL_GRAD_SPARE + (double)m->nbuffers),
        .activations = 4.0 * batch * (act + 2 * largest), /* + grad_a, grad_b */
        .scratch = scratch,
    };
}

double dt_model_memory_total(const struct dt_model_memory *mem)
{
    return mem->params + mem->grads + mem->activations + mem->scratch;
}

/* The estimate against the machine's physical memory, before any of it is allocated: a layer
 * list whose sizes multiply out to more than the machine holds is a config error with the
 * figures, not an out-of-memory failure half-way (or a dry run that swaps). `train` checks
 * the whole run against the memory available before it gets here (train/setup.c). */
static int check_size(const struct dt_model *m)
{
    double bytes = dt_model_memory_total(&m->memory);
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    double have = pages > 0 && page > 0 ? (double)pages * (double)page : 0;
    if (have > 0 && bytes > have)
        return dt_fail(DT_EUSAGE,
                       "model needs %.1f GiB at batch %d (%.3g parameters, %.1f GiB of "
                       "activations, %.1f GiB of layer scratch): more than this machine's %.1f "
                       "GiB",
                       bytes / (1 << 30), m->max_batch, (double)m->nparams,
                       m->memory.activations / (1 << 30), m->memory.scratch / (1 << 30),
                       have / (1 << 30));
    return 0;
}

/* The layers set up and the plan made, nothing batch-sized allocated yet: m->memory says
 * what the rest will take. */
static int setup_all(struct dt_model *m, const struct dt_layer_spec *specs)
{
    struct dt_shape shape = m->input;
    for (int i = 0; i < m->nlayers; i++) {
        int rc = setup_layer(m, i, &specs[i], shape);
        if (rc < 0)
            return rc;
        shape = m->layers[i]->out;
        m->nparams += m->layers[i]->nparams;
        m->nbuffers += m->layers[i]->nbuffers;
    }
    m->classes = (int)shape_size(shape);
    plan(m);
    count_memory(m, &m->memory);
    return 0;
}

static int build(struct dt_model *m, const struct dt_layer_spec *specs, uint64_t seed)
{
    int rc = setup_all(m, specs);
    if (rc < 0)
        return rc;
    rc = check_size(m);
    if (rc < 0)
        return rc;
    rc = allocate_arenas(m);
    if (rc < 0)
        return rc;
    rc = init_layers(m, seed);
    if (rc < 0)
        return rc;
    m->output = ((struct model_impl *)m->impl)->act[m->nlayers - 1];
    return 0;
}

/* The model with its flag arrays, nothing set up. */
static int model_new(struct dt_model **out, int nspecs, struct dt_shape input, int max_batch,
                     enum dt_loss_kind loss)
{
    *out = NULL;
    if (nspecs < 1 || nspecs > DT_MAX_PROFILE_LAYERS)
        return dt_fail(DT_EUSAGE, "model has %d layers, expected 1 to %d", nspecs,
                       DT_MAX_PROFILE_LAYERS);
    if (input.c < 1 || input.h < 1 || input.w < 1)
        return dt_fail(DT_EUSAGE, "input shape %dx%dx%d is empty", input.c, input.h, input.w);
    if (max_batch < 1)
        return dt_fail(DT_EUSAGE, "batch size %d, expected at least 1", max_batch);
    if (loss != DT_LOSS_NLL && loss != DT_LOSS_CROSS_ENTROPY)
        return dt_fail(DT_EUSAGE, "unknown loss kind %d", (int)loss);
    struct dt_model *m = calloc(1, sizeof *m);
    struct model_impl *impl = calloc(1, sizeof *impl);
    struct dt_layer **layers = calloc((size_t)nspecs, sizeof *layers);
    bool *in_place = calloc(5 * (size_t)nspecs, sizeof *in_place);
    int *seg = calloc(2 * (size_t)nspecs, sizeof *seg);
    if (!m || !impl || !layers || !in_place || !seg) {
        free(m);
        free(impl);
        free(layers);
        free(in_place);
        free(seg);
        return dt_fail(DT_ERUNTIME, "out of memory building the model");
    }
    impl->in_place = in_place; /* one allocation for the five flag arrays */
    impl->skip_fwd = in_place + nspecs;
    impl->skip_bwd = in_place + 2 * nspecs;
    impl->referenced = in_place + 3 * nspecs;
    impl->in_dy = in_place + 4 * nspecs;
    impl->seg_end = seg;
    impl->seg_chunk = seg + nspecs;
    m->impl = impl;
    m->layers = layers;
    m->nlayers = nspecs;
    m->input = input;
    m->max_batch = max_batch;
    m->loss = loss;
    *out = m;
    return 0;
}

int dt_model_build(struct dt_model **out, const struct dt_layer_spec *specs, int nspecs,
                   struct dt_shape input, int max_batch, enum dt_loss_kind loss, uint64_t seed)
{
    struct dt_model *m;
    *out = NULL;
    int rc = model_new(&m, nspecs, input, max_batch, loss);
    if (rc < 0)
        return rc;
    rc = build(m, specs, seed);
    if (rc < 0) {
        dt_model_free(m);
        return rc;
    }
    *out = m;
    return 0;
}

int dt_model_estimate(const struct dt_layer_spec *specs, int nspecs, struct dt_shape input,
                      int max_batch, enum dt_loss_kind loss, struct dt_model_memory *out)
{
    struct dt_model *m;
    int rc = model_new(&m, nspecs, input, max_batch, loss);
    if (rc == 0)
        rc = setup_all(m, specs);
    if (rc == 0)
        *out = m->memory;
    dt_model_free(m);
    return rc;
}

int dt_model_set_grad_slice(struct dt_model *m, int slice)
{
    m->grad_slice = 0;
    if (slice < 1 || slice >= m->max_batch)
        return 0; /* every backward fits one slice: nothing to split */
    size_t most = 0;
    for (int i = 0; i < m->nlayers; i++)
        most = m->layers[i]->nparams > most ? m->layers[i]->nparams : most;
    int rc = dt_grad_tree_reserve(&m->grad_tree, most, (m->max_batch + slice - 1) / slice);
    if (!rc)
        m->grad_slice = slice;
    return rc;
}

void dt_model_free(struct dt_model *m)
{
    if (!m)
        return;
    struct model_impl *impl = m->impl;
    for (int i = 0; i < m->nlayers; i++) {
        struct dt_layer *l = m->layers[i];
        if (!l)
            continue;
        if (l->kind->ops->destroy)
            l->kind->ops->destroy(l);
        free(l);
        if (impl->act && !impl->in_place[i])
            dt_free(impl->act[i]);
    }
    free(impl->act);
    for (int i = 0; impl->pending && i < m->nlayers; i++)
        if (!impl->in_dy[i]) /* else a gradient buffer, or NULL */
            dt_free(impl->pending[i]);
    free(impl->pending);
    free(impl->pending_live);
    free(impl->in_place);
    free(impl->seg_end);
    dt_free(impl->grad_a);
    dt_free(impl->grad_b);
    dt_grad_tree_release(&m->grad_tree);
    free(impl);
    free(m->layers);
    free(m->tensors);
    free(m->buffer_tensors);
    if (!m->params_external)
        dt_free(m->params);
    dt_free(m->grads);
    dt_free(m->buffers);
    free(m);
}

void dt_model_move_params(struct dt_model *m, float *storage, bool copy)
{
    if (copy)
        memcpy(storage, m->params, m->nparams * sizeof *storage);
    for (int i = 0; i < m->nlayers; i++)
        m->layers[i]->params = storage + (m->layers[i]->params - m->params);
    if (!m->params_external)
        dt_free(m->params);
    m->params = storage;
    m->params_external = true;
}

static const struct dt_forward_ctx eval_ctx = {.training = false};

/* Points skip layer l's skip_x at the output its connection reads. */
static void point_skip(struct dt_model *m, struct dt_layer *l)
{
    struct model_impl *impl = m->impl;
    l->skip_x = l->skip_from >= 0 ? impl->act[l->skip_from] : impl->input;
}

/* Layer i's forward on samples [first, first + count) of the batch; x is the layer's input
 * for the whole batch. */
static void forward_layer(struct dt_model *m, int i, const float *x, int first, int count,
                          const struct dt_forward_ctx *ctx)
{
    struct model_impl *impl = m->impl;
    struct dt_layer *l = m->layers[i];
    double t0 = m->profile ? dt_now() : 0;
    /* a conv with a fused pool writes the pool's output, a batchnorm with a fused add the
     * add's (nn/layers.h) */
    struct dt_layer *out = l->pool_fused ? l->pool_fused : l->add_fused ? l->add_fused : l;
    if (l->spec.from)
        point_skip(m, l);
    if (l->add_fused)
        point_skip(m, l->add_fused);
    float *y = impl->act[l->pool_fused ? i + 2 : l->add_fused ? i + 1 : i];
    l->kind->ops->forward(l, x + (size_t)first * shape_size(l->in),
                          y + (size_t)first * shape_size(out->out), count, ctx);
    if (m->profile)
        m->profile_fwd[i] += dt_now() - t0;
}

/* A chunked run from layer i (plan_chunked_run): every layer on one chunk of samples, then
 * the next chunk, so the activations in between are still in cache when read. */
static void forward_run(struct dt_model *m, int i, const float *x, int batch,
                        const struct dt_forward_ctx *ctx)
{
    struct model_impl *impl = m->impl;
    int chunk = impl->seg_chunk[i];
    for (int s0 = 0; s0 < batch; s0 += chunk) {
        struct dt_forward_ctx c = *ctx;
        c.first_sample = s0;
        int count = batch - s0 < chunk ? batch - s0 : chunk;
        for (int k = i; k < impl->seg_end[i]; k++)
            if (!impl->in_place[k] && !impl->skip_fwd[k])
                forward_layer(m, k, k == i ? x : impl->act[k - 1], s0, count, &c);
    }
}

int dt_model_forward(struct dt_model *m, const float *x, int batch,
                     const struct dt_forward_ctx *ctx)
{
    struct model_impl *impl = m->impl;
    if (batch < 0 || batch > m->max_batch)
        return dt_fail(DT_EUSAGE, "forward of %d samples, the model was built for at most %d",
                       batch, m->max_batch);
    if (!ctx)
        ctx = &eval_ctx;
    impl->input = x;
    impl->last_batch = batch;
    if (batch == 0) {
        if (m->allreduce.sum && ctx->training)
            for (int i = 0; i < m->nlayers; i++)
                if (m->layers[i]->collective && !impl->in_place[i] && !impl->skip_fwd[i])
                    m->layers[i]->kind->ops->forward(m->layers[i], NULL, NULL, 0, ctx);
        return m->allreduce.rc;
    }
    const float *in = x;
    for (int i = 0; i < m->nlayers; i++) {
        if (impl->seg_end[i]) {
            forward_run(m, i, in, batch, ctx);
            i = impl->seg_end[i] - 1;
        } else if (!impl->in_place[i] && !impl->skip_fwd[i]) { /* else done by a layer below */
            forward_layer(m, i, in, 0, batch, ctx);
        }
        in = impl->act[i];
    }
    return m->allreduce.rc;
}

void dt_model_loss(struct dt_model *m, const uint8_t *labels, int batch, double *loss_sum,
                   int *correct)
{
    *loss_sum =
        dt_loss_sum(m->loss, m->label_smoothing, m->output, m->classes, labels, batch, correct);
}

int dt_model_backward(struct dt_model *m, const uint8_t *labels, int batch, float grad_scale)
{
    struct model_impl *impl = m->impl;
    if (batch != impl->last_batch)
        return dt_fail(DT_EUSAGE, "backward of %d samples after a forward of %d", batch,
                       impl->last_batch);
    if (batch == 0) {
        memset(m->grads, 0, m->nparams * sizeof *m->grads);
        for (int i = m->nlayers - 1; m->allreduce.sum && i >= impl->first_param; i--)
            if (m->layers[i]->collective && !impl->skip_bwd[i])
                m->layers[i]->kind->ops->backward(m->layers[i], NULL, NULL, NULL, NULL, 0);
        return m->allreduce.rc;
    }
    float *dy = impl->grad_a, *dx = impl->grad_b;
    int rc = dt_loss_grad(m->loss, m->label_smoothing, m->output, m->classes, labels, batch,
                          grad_scale, dy);
    if (rc < 0)
        return rc;
    memset(impl->pending_live, 0, (size_t)m->nlayers * sizeof *impl->pending_live);
    for (int i = m->nlayers - 1; i >= impl->first_param; i--) {
        struct dt_layer *l = m->layers[i];
        /* what the skip connections above sent back here: the layer adds it, or it is added
         * to dy now (same bits: one float addition either way) */
        bool extra = impl->pending_live[i] && l->takes_dy_extra && !impl->skip_bwd[i];
        l->dy_extra = extra ? impl->pending[i] : NULL;
        if (impl->pending_live[i] && !l->dy_extra) {
            long n = (long)batch * (long)shape_size(l->out);
            const float *p = impl->pending[i];
#pragma omp parallel for simd if (n > DT_PARALLEL_MIN)
            for (long k = 0; k < n; k++)
                dy[k] += p[k];
        }
        if (l->spec.from) {
            point_skip(m, l);
            if (l->skip_in_dy)
                impl->pending[l->skip_from] = dy;
            l->skip_dx = l->skip_from >= impl->first_param ? impl->pending[l->skip_from] : NULL;
            l->skip_dx_fresh = l->skip_dx && !impl->pending_live[l->skip_from];
        }
        if (impl->skip_bwd[i]) /* dy passes through unchanged */
            continue;
        const float *x = i > 0 ? impl->act[i - 1] : impl->input;
        double t0 = m->profile ? dt_now() : 0;
        bool pass = l->dx_is_dy || l->grad_in_below, give_dx = i > impl->first_param && !pass;
        /* the relu below runs in this backward: what its output received goes in with it */
        l->below_extra =
            l->relu_below && give_dx && impl->pending_live[i - 1] ? impl->pending[i - 1] : NULL;
        l->kind->ops->backward(l, x, impl->act[i], dy, give_dx ? dx : NULL, batch);
        if (l->below_extra)
            impl->pending_live[i - 1] = false; /* taken: the relu's step must not add it */
        if (m->profile)
            m->profile_bwd[i] += dt_now() - t0;
        if (l->skip_dx)
            impl->pending_live[l->skip_from] = true;
        if (pass)
            continue;
        float *t = dy;
        dy = dx;
        dx = t;
    }
    return m->allreduce.rc;
}

void dt_model_layer_summary(const struct dt_model *m, int i, struct dt_layer_summary *out)
{
    const struct dt_layer *l = m->layers[i];
    const struct dt_layer_spec *s = &l->spec;
    memset(out, 0, sizeof *out);
    out->type = l->kind->name;
    out->out = l->out;
    out->nparams = l->nparams;
    if (s->out_channels > 0)
        snprintf(out->detail, sizeof out->detail, "%d %dx%d/%d", s->out_channels, s->kernel,
                 s->kernel, s->stride > 0 ? s->stride : 1);
    else if (s->out_features > 0)
        snprintf(out->detail, sizeof out->detail, "%d", s->out_features);
    else if (s->kernel > 0)
        snprintf(out->detail, sizeof out->detail, "%dx%d/%d", s->kernel, s->kernel,
                 s->stride > 0 ? s->stride : s->kernel);
    else if (!strncmp(s->type, "dropout", 7))
        snprintf(out->detail, sizeof out->detail, "p=%.2f", s->p);
    else if (s->from)
        snprintf(out->detail, sizeof out->detail, "from %d (layer %d)%s", s->from, l->skip_from,
                 !strcmp(s->type, "add") && !strcmp(s->shortcut, "projection") ? " proj" : "");
    if (s->padding > 0) {
        size_t n = strlen(out->detail);
        snprintf(out->detail + n, sizeof out->detail - n, " pad %d", s->padding);
    }
}
