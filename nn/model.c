/* The model: builds layers from specs, owns the three arenas (params, grads, buffers), the
 * activations and the gradient ping-pong buffers, and runs forward, loss and backward.
 *
 * Memory, all allocated by dt_model_build for max_batch samples and never during a step:
 *   act[i]          output of layer i (max_batch x its per-sample size; bf16 elements where
 *                   the plan's bf16_store says so); act[n-1] is m->output.
 *                   Every output is kept because backward needs x and y of each layer, but
 *                   that of a batchnorm that computes the add above it (NULL: never written).
 *   grad_a, grad_b  gradient w.r.t. the current layer's output and input, swapped per layer;
 *                   each holds the largest activation of the model.
 *   layer scratch   owned by each layer (im2col columns, pooling indices, dropout masks).
 *   call scratch    one buffer all layers share for what they use only inside one forward or
 *                   backward call (the bf16 convs' operand layouts and rounded copies), sized
 *                   by the largest layer's need: a model runs one layer at a time.
 * Parameters of layer i occupy one contiguous slice of params (and the same slice of grads),
 * in layer order, so the arena is exactly PyTorch's parameters() order.
 *
 * Layers overwrite their parameter gradients in backward (nn/layers.h), so grads is cleared
 * only for a step with no samples.
 *
 * The fusion plan (nn/fusion.h, nn/fusion.c) decides once at build what each layer runs for a
 * neighbour (a relu at a conv's store, a pool in its forward, an add at a batchnorm's store, a
 * relu's or a batchnorm's input gradient in the conv above or below) and keeps it in m->plan,
 * one record per layer; this file follows it: which forwards and backwards to skip, which
 * activations alias or are never written, which skip gradients need no buffer of their own,
 * and what each call's context (struct dt_layer_fwd / dt_layer_bwd) carries. Fused, chunked
 * and plain models compute the same bits.
 *
 * No input gradient below the first layer with parameters: backward stops there and that
 * layer gets dx = NULL (nobody needs the gradient of the model's input), unless the options
 * ask for it (dt_model_options.input_grad).
 */
#include "nn/model.h"

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nn/fusion.h"
#include "nn/kernels/fp32/elementwise.h"
#include "nn/layer_common.h"
#include "nn/loss.h"
#include "nn/weight_copy.h"
#include "util/alloc.h"
#include "util/clock.h"
#include "util/err.h"

/* weight, bias; add's projection: conv weight, bias, batchnorm weight, bias */
#define MAX_PARAM_TENSORS  4
#define MAX_BUFFER_TENSORS 3 /* running_mean, running_var, num_batches_tracked */

struct model_impl {
    float **act;
    int first_param; /* lowest layer whose backward runs (nlayers when none) */
    bool input_grad; /* backward goes on to the model's input (dt_model_options) */
    /* Skip connections: pending[i] (when layer i's output feeds an add or concat further up)
     * collects the gradient those layers send back to it, added to layer i's dy on the way
     * down; pending_live[i] says something reached it in this backward (the first layer to
     * send stores, later ones add). pending_input and input_live: the same for the model's
     * input, with input_grad only. A layer whose plan says pending_in_dy has no buffer: the
     * identity add that sends to it leaves its gradient in its own dy buffer (nn/fusion.c,
     * skip_in_dy). */
    float **pending;
    bool *pending_live;
    float *pending_input;
    bool input_live;
    float *grad_a, *grad_b;
    const float *input; /* the last forward's x (not copied) */
    int last_batch;
    double scratch_bytes; /* the layers' own, as their setups reported */
    size_t copy_bytes;    /* their bf16 weight copies (dt_model_copy_take's rounding) */
    void *copy_storage;   /* dt_model_options' */
    size_t copy_capacity;
    double call_scratch;    /* the largest call scratch a layer's setup asked for */
    const char **precision; /* per layer: its setup's precision note (NULL = none) */
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
    snprintf(t->index_name, sizeof t->index_name, "layers.%d.%s", l->index, name);
    if (l->spec.name[0])
        snprintf(t->name, sizeof t->name, "%s.%s", l->spec.name, name);
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

/* Inserts prefix after the first `head` characters of name (a buffer of `size`; a name too long
 * for it is cut short, as snprintf cuts any other). */
static void insert_prefix(char *name, size_t size, size_t head, const char *prefix)
{
    size_t len = strlen(name);
    if (head > len)
        return;
    size_t room = size - 1 - head, plen = strlen(prefix);
    plen = plen < room ? plen : room;
    size_t rest = len - head, keep = rest < room - plen ? rest : room - plen;
    memmove(name + head + plen, name + head, keep);
    memcpy(name + head, prefix, plen);
    name[head + plen + keep] = '\0';
}

/* Inserts prefix after the layer part ("<spec name>." or "layers.<index>.") of the names of
 * tensors [from, to) of table t, in both the name and the index name. */
static void prefix_names(struct dt_tensor_info *t, int from, int to, const struct dt_layer *l,
                         const char *prefix)
{
    size_t index_head = (size_t)snprintf(NULL, 0, "layers.%d.", l->index);
    size_t head = l->spec.name[0] ? strlen(l->spec.name) + 1 : index_head;
    for (int i = from; i < to; i++) {
        insert_prefix(t[i].index_name, sizeof t[i].index_name, index_head, prefix);
        insert_prefix(t[i].name, sizeof t[i].name, head, prefix);
    }
}

int dt_layer_init_sub(struct dt_layer *sub, const char *prefix, uint64_t seed)
{
    struct dt_model *m = sub->model;
    int tensors = m->ntensors, buffers = m->nbuffer_tensors;
    int rc = sub->kind->ops->init(sub, seed);
    prefix_names(m->tensors, tensors, m->ntensors, sub, prefix);
    prefix_names(m->buffer_tensors, buffers, m->nbuffer_tensors, sub, prefix);
    return rc;
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
    struct model_impl *impl = m->impl;
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
    l->model = m;
    struct dt_layer_setup s = {.skip_from = i - 1};
    if (spec->from != 0) {
        s.skip_from = i + spec->from;
        if (spec->from > -2 || s.skip_from < -1)
            return layer_context(
                dt_fail(DT_EUSAGE,
                        "from = %d: expected -2 (two layers back) to %d (the model's input)",
                        spec->from, -(i + 1)),
                spec, i);
        s.skip = s.skip_from >= 0 ? m->layers[s.skip_from]->out : m->input;
    }
    int rc = kind->ops->setup(l, spec, in, &s);
    if (rc < 0)
        return layer_context(rc, spec, i);
    if (l->out.c < 1 || l->out.h < 1 || l->out.w < 1)
        return layer_context(
            dt_fail(DT_EUSAGE, "output shape %dx%dx%d is empty", l->out.c, l->out.h, l->out.w),
            spec, i);
    m->plan[i].caps = s.caps;
    impl->precision[i] = s.precision;
    m->plan[i].skip_from = s.skip_from;
    impl->scratch_bytes += s.scratch_bytes;
    impl->copy_bytes += dt_weight_copy_round((size_t)s.copy_bytes);
    if (s.call_scratch_bytes > impl->call_scratch)
        impl->call_scratch = s.call_scratch_bytes;
    return 0;
}

/* Whether anything reads the model's input through a skip connection. */
static bool input_referenced(const struct dt_model *m)
{
    for (int i = 0; i < m->nlayers; i++)
        if (m->layers[i]->spec.from && m->plan[i].skip_from < 0)
            return true;
    return false;
}

static int allocate_arenas(struct dt_model *m, float *params)
{
    struct model_impl *impl = m->impl;
    m->params_external = params != NULL;
    m->params = params ? params : dt_alloc(m->nparams ? m->nparams : 1, sizeof(float));
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
        if (m->plan[i].in_place) {
            impl->act[i] = impl->act[i - 1];
            continue;
        }
        if (m->plan[i].runs_add) /* never written: the layer stores the add's output */
            continue;
        if (m->plan[i].affine_above) /* never written: the layer above applies this one */
            continue;
        /* bf16_store: the layer writes bf16 elements, half the bytes, and a 64-byte tail that
         * the bf16 layout passes' 32-bit gathers may read past the last element */
        impl->act[i] = m->plan[i].bf16_store
                           ? dt_alloc((size_t)m->max_batch * n + 32, sizeof(dt_bf16))
                           : dt_alloc((size_t)m->max_batch * n, sizeof(float));
        if (!impl->act[i])
            return dt_fail_context(-DT_ERUNTIME, "activations of layer %d", i);
    }
    impl->pending = calloc((size_t)m->nlayers, sizeof *impl->pending);
    impl->pending_live = calloc((size_t)m->nlayers, sizeof *impl->pending_live);
    if (!impl->pending || !impl->pending_live)
        return dt_fail(DT_ERUNTIME, "out of memory allocating the model's arenas");
    for (int i = 0; i < m->nlayers; i++)
        if (m->plan[i].referenced && !m->plan[i].pending_in_dy &&
            !(impl->pending[i] =
                  dt_alloc((size_t)m->max_batch * shape_size(m->layers[i]->out), sizeof(float))))
            return dt_fail_context(-DT_ERUNTIME, "skip-connection gradients of layer %d", i);
    if (impl->input_grad && input_referenced(m) &&
        !(impl->pending_input =
              dt_alloc((size_t)m->max_batch * shape_size(m->input), sizeof(float))))
        return dt_fail_context(-DT_ERUNTIME, "skip-connection gradients of the input");
    impl->grad_a = dt_alloc((size_t)m->max_batch * largest, sizeof(float));
    impl->grad_b = dt_alloc((size_t)m->max_batch * largest, sizeof(float));
    if (!impl->grad_a || !impl->grad_b)
        return dt_fail_context(-DT_ERUNTIME, "activation gradients");
    return dt_call_scratch_alloc(&m->call_scratch, (size_t)impl->call_scratch);
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

/* The lowest layer whose backward runs, then the fusion plan (nn/fusion.c). */
static void plan(struct dt_model *m)
{
    struct model_impl *impl = m->impl;
    impl->first_param = m->nlayers;
    for (int i = m->nlayers - 1; i >= 0; i--)
        if (m->layers[i]->nparams || impl->input_grad)
            impl->first_param = i;
    dt_fusion_plan(m->plan, m->layers, m->nlayers, m->fusions, m->max_batch, omp_get_max_threads(),
                   impl->first_param);
}

/* What the arenas, activations and layer scratch will take, worked out from the layers' setup
 * and the plan the way allocate_arenas and the layers' init will allocate them. */
static void count_memory(const struct dt_model *m, struct dt_model_memory *out)
{
    const struct model_impl *impl = m->impl;
    double batch = m->max_batch, act = 0, largest = (double)shape_size(m->input);
    for (int i = 0; i < m->nlayers; i++) {
        const struct dt_layer_plan *p = &m->plan[i];
        double n = (double)shape_size(m->layers[i]->out);
        largest = n > largest ? n : largest;
        if (!p->in_place && !p->runs_add && !p->affine_above)
            act += p->bf16_store ? n / 2 : n;
        if (p->referenced && !p->pending_in_dy)
            act += n; /* pending skip gradient */
    }
    if (impl->input_grad && input_referenced(m))
        act += (double)shape_size(m->input);
    *out = (struct dt_model_memory){
        .params = 4.0 * (double)m->nparams,
        .grads = 4.0 * ((double)m->nparams + DT_MODEL_GRAD_SPARE + (double)m->nbuffers),
        .activations = 4.0 * batch * (act + 2 * largest), /* + grad_a, grad_b */
        .scratch = impl->scratch_bytes + impl->call_scratch + (double)impl->copy_bytes,
        .copies = (double)impl->copy_bytes,
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

static int build(struct dt_model *m, const struct dt_layer_spec *specs, uint64_t seed,
                 float *params, size_t capacity)
{
    struct model_impl *impl = m->impl;
    int rc = setup_all(m, specs);
    if (rc < 0)
        return rc;
    if (params && m->nparams > capacity)
        return dt_fail(DT_ERUNTIME, "model has %zu parameters, its storage holds %zu", m->nparams,
                       capacity);
    rc = check_size(m);
    if (rc < 0)
        return rc;
    rc = allocate_arenas(m, params);
    if (rc == 0)
        rc = dt_weight_copy_arena(m, impl->copy_bytes, impl->copy_storage, impl->copy_capacity);
    if (rc < 0)
        return rc;
    rc = init_layers(m, seed);
    if (rc == 0)
        rc = dt_weight_copy_plan(m);
    if (rc < 0)
        return rc;
    m->output = ((struct model_impl *)m->impl)->act[m->nlayers - 1];
    return 0;
}

/* The model with its plan records, nothing set up. */
static int model_new(struct dt_model **out, int nspecs, struct dt_shape input, int max_batch,
                     enum dt_loss_kind loss, const struct dt_model_options *opt)
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
    struct dt_layer_plan *plan = calloc((size_t)nspecs, sizeof *plan);
    const char **notes = calloc((size_t)nspecs, sizeof *notes);
    if (!m || !impl || !layers || !plan || !notes) {
        free(notes);
        free(m);
        free(impl);
        free(layers);
        free(plan);
        return dt_fail(DT_ERUNTIME, "out of memory building the model");
    }
    impl->input_grad = opt->input_grad;
    impl->copy_storage = opt->copy_storage;
    impl->copy_capacity = opt->copy_capacity;
    impl->precision = notes;
    m->precision = opt->precision;
    m->bf16_winograd = opt->bf16_winograd;
    m->fusions = opt->fusions;
    m->impl = impl;
    m->layers = layers;
    m->plan = plan;
    m->nlayers = nspecs;
    m->input = input;
    m->max_batch = max_batch;
    m->loss = loss;
    *out = m;
    return 0;
}

int dt_model_default_options(struct dt_model_options *out)
{
    *out = (struct dt_model_options){.fusions = DT_FUSE_ALL};
    const char *env = getenv("DTRAIN_FUSE");
    if (!env || !*env)
        return 0;
    int rc = dt_fusion_parse(env, &out->fusions);
    return rc < 0 ? dt_fail_context(rc, "DTRAIN_FUSE") : 0;
}

/* The one builder behind dt_model_build, _in and _with: options, and the parameter arena in
 * the caller's storage when params is not NULL. */
static int build_model(struct dt_model **out, const struct dt_layer_spec *specs, int nspecs,
                       struct dt_shape input, int max_batch, enum dt_loss_kind loss, uint64_t seed,
                       const struct dt_model_options *opt, float *params, size_t capacity)
{
    struct dt_model *m;
    *out = NULL;
    int rc = model_new(&m, nspecs, input, max_batch, loss, opt);
    if (rc < 0)
        return rc;
    rc = build(m, specs, seed, params, capacity);
    if (rc < 0) {
        dt_model_free(m);
        return rc;
    }
    *out = m;
    return 0;
}

int dt_model_build_with(struct dt_model **out, const struct dt_layer_spec *specs, int nspecs,
                        struct dt_shape input, int max_batch, enum dt_loss_kind loss, uint64_t seed,
                        const struct dt_model_options *opt)
{
    return build_model(out, specs, nspecs, input, max_batch, loss, seed, opt, NULL, 0);
}

int dt_model_build_in(struct dt_model **out, const struct dt_layer_spec *specs, int nspecs,
                      struct dt_shape input, int max_batch, enum dt_loss_kind loss, uint64_t seed,
                      float *params, size_t capacity, const struct dt_model_options *given)
{
    struct dt_model_options opt;
    *out = NULL;
    if (given)
        return build_model(out, specs, nspecs, input, max_batch, loss, seed, given, params,
                           capacity);
    int rc = dt_model_default_options(&opt);
    return rc < 0 ? rc
                  : build_model(out, specs, nspecs, input, max_batch, loss, seed, &opt, params,
                                capacity);
}

int dt_model_build(struct dt_model **out, const struct dt_layer_spec *specs, int nspecs,
                   struct dt_shape input, int max_batch, enum dt_loss_kind loss, uint64_t seed)
{
    return dt_model_build_in(out, specs, nspecs, input, max_batch, loss, seed, NULL, 0, NULL);
}

int dt_model_estimate_with(const struct dt_layer_spec *specs, int nspecs, struct dt_shape input,
                           int max_batch, enum dt_loss_kind loss,
                           const struct dt_model_options *opt, struct dt_model_memory *out)
{
    struct dt_model *m;
    int rc = model_new(&m, nspecs, input, max_batch, loss, opt);
    if (rc == 0)
        rc = setup_all(m, specs);
    if (rc == 0)
        *out = m->memory;
    dt_model_free(m);
    return rc;
}

int dt_model_estimate(const struct dt_layer_spec *specs, int nspecs, struct dt_shape input,
                      int max_batch, enum dt_loss_kind loss, struct dt_model_memory *out)
{
    struct dt_model_options opt;
    int rc = dt_model_default_options(&opt);
    return rc < 0 ? rc : dt_model_estimate_with(specs, nspecs, input, max_batch, loss, &opt, out);
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
    dt_weight_copy_free(m); /* its plan and, unless external, the copy arena */
    for (int i = 0; i < m->nlayers; i++) {
        struct dt_layer *l = m->layers[i];
        if (!l)
            continue;
        if (l->kind->ops->destroy)
            l->kind->ops->destroy(l);
        free(l);
        if (impl->act && !m->plan[i].in_place)
            dt_free(impl->act[i]);
    }
    free(impl->act);
    for (int i = 0; impl->pending && i < m->nlayers; i++)
        if (!m->plan[i].pending_in_dy) /* else a gradient buffer, or NULL */
            dt_free(impl->pending[i]);
    free(impl->pending);
    free(impl->pending_live);
    dt_free(impl->pending_input);
    dt_free(impl->grad_a);
    dt_free(impl->grad_b);
    free(impl->precision);
    dt_grad_tree_release(&m->grad_tree);
    dt_call_scratch_free(&m->call_scratch);
    free(impl);
    free(m->layers);
    free(m->plan);
    free(m->tensors);
    free(m->buffer_tensors);
    if (!m->params_external)
        dt_free(m->params);
    dt_free(m->grads);
    dt_free(m->buffers);
    free(m);
}

static const struct dt_forward_ctx eval_ctx = {.training = false};

/* The output the skip connection of layer i reads. */
static const float *skip_output(const struct dt_model *m, int i)
{
    const struct model_impl *impl = m->impl;
    int from = m->plan[i].skip_from;
    return from >= 0 ? impl->act[from] : impl->input;
}

/* The buffer collecting the gradient skip connections send to layer k's output (k = -1: the
 * model's input), and whether anything reached it in this backward. */
static float **pending_of(struct model_impl *impl, int k)
{
    return k >= 0 ? &impl->pending[k] : &impl->pending_input;
}

static bool *live_of(struct model_impl *impl, int k)
{
    return k >= 0 ? &impl->pending_live[k] : &impl->input_live;
}

/* Layer i's span since t0: into --profile's sums and to the layer hook (a trace). */
static void layer_timed(struct dt_model *m, int i, bool backward, double t0)
{
    double t1 = dt_now();
    if (m->profile)
        (backward ? m->profile_bwd : m->profile_fwd)[i] += t1 - t0;
    if (m->layer_hook.fn)
        m->layer_hook.fn(m->layer_hook.ctx, i, backward, t0, t1);
}

/* The layer whose output layer i reads as x (-1: the model's input): the one below, or with
 * bn_below the batchnorm2d's input, the relu's and the batchnorm's being never written. */
static int input_of(const struct dt_model *m, int i)
{
    return m->plan[i].bn_below ? i - 3 : i - 1;
}

/* Layer i's input for the whole batch, and whether it is stored as bf16. */
static const float *layer_input(const struct dt_model *m, int i, bool *x_bf16)
{
    const struct model_impl *impl = m->impl;
    int k = input_of(m, i);
    *x_bf16 = k >= 0 && m->plan[k].bf16_store;
    return k >= 0 ? impl->act[k] : impl->input;
}

/* The skip connection's input of layer `add` (an add or a concat), for the forward that
 * computes it: where it is, whether it is stored as bf16, and whether the add reads it as a
 * bf16 value (a bf16 model's identity add, as autocast's add of bf16 tensors). */
static void skip_input(const struct dt_model *m, int add, struct dt_layer_fwd *c)
{
    int from = m->plan[add].skip_from;
    c->skip_x = skip_output(m, add);
    c->skip_bf16 = from >= 0 && m->plan[from].bf16_store;
    c->round_skip =
        m->precision == DT_PRECISION_BF16 && (m->plan[add].caps & DT_CAP_IS_IDENTITY_ADD);
}

/* Layer i's forward on samples [first, first + count) of the batch. */
static void forward_layer(struct dt_model *m, int i, int first, int count,
                          const struct dt_forward_ctx *ctx)
{
    struct model_impl *impl = m->impl;
    struct dt_layer *l = m->layers[i];
    const struct dt_layer_plan *p = &m->plan[i];
    bool timed = m->profile || m->layer_hook.fn;
    double t0 = timed ? dt_now() : 0;
    struct dt_layer_fwd c = {.run = *ctx,
                             .first_sample = first,
                             .relu = p->relu_at_store,
                             .y_bf16 = p->bf16_store,
                             .bn_below = p->bn_below ? m->layers[i - 2] : NULL,
                             .affine_above = p->affine_above,
                             .weights_copied = m->weights_copied};
    const float *x = layer_input(m, i, &c.x_bf16);
    if (l->spec.from)
        skip_input(m, i, &c);
    /* a conv with a fused pool writes the pool's output, a batchnorm with a fused add the
     * add's (stored as the add's plan says), with the relu fused into that add */
    int out = i;
    if (p->runs_pool) {
        out = i + 2;
        c.pool = m->layers[out];
    } else if (p->runs_add) {
        out = i + 1;
        skip_input(m, out, &c);
        c.relu = m->plan[out].relu_at_store;
        c.y_bf16 = m->plan[out].bf16_store;
    }
    size_t in_at = (size_t)first * shape_size(l->in);
    size_t out_at = (size_t)first * shape_size(m->layers[out]->out);
    float *y = impl->act[out]; /* NULL: never written (affine_above) */
    if (y && m->plan[out].bf16_store)
        y = (float *)((dt_bf16 *)y + out_at);
    else if (y)
        y += out_at;
    l->kind->ops->forward(l, dt_act_from(x, c.x_bf16, in_at), y, count, &c);
    if (timed)
        layer_timed(m, i, false, t0);
}

/* Whether layer i's forward runs on its own (not inside the layer below's). */
static bool runs_forward(const struct dt_model *m, int i)
{
    return !m->plan[i].in_place && !m->plan[i].forward_below;
}

/* A chunked run from layer i (the plan's run_end): every layer on one chunk of samples, then
 * the next chunk, so the activations in between are still in cache when read. */
static void forward_run(struct dt_model *m, int i, int batch, const struct dt_forward_ctx *ctx)
{
    int chunk = m->plan[i].run_chunk;
    for (int s0 = 0; s0 < batch; s0 += chunk) {
        int count = batch - s0 < chunk ? batch - s0 : chunk;
        for (int k = i; k < m->plan[i].run_end; k++)
            if (runs_forward(m, k))
                forward_layer(m, k, s0, count, ctx);
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
        struct dt_layer_fwd c = {.run = *ctx};
        if (m->allreduce.sum && ctx->training)
            for (int i = 0; i < m->nlayers; i++)
                if ((m->plan[i].caps & DT_CAP_COLLECTIVE) && runs_forward(m, i))
                    m->layers[i]->kind->ops->forward(m->layers[i], NULL, NULL, 0, &c);
    } else {
        for (int i = 0; i < m->nlayers; i++) {
            if (m->plan[i].run_end) {
                forward_run(m, i, batch, ctx);
                i = m->plan[i].run_end - 1;
            } else if (runs_forward(m, i)) { /* else done by a layer below */
                forward_layer(m, i, 0, batch, ctx);
            }
        }
    }
    /* The layers' bf16 weight copies stay what this forward used, and its backward reads, but
     * they are current for this forward only: whatever writes the weights next (an optimizer
     * step not cut in pieces, a load) leaves the next forward to copy them, unless
     * dt_model_optim_step made the copies. Copies the ranks of a host share stay current
     * until the ranks' next step makes them again (nn/weight_copy.h). */
    if (!m->copies_external)
        m->weights_copied = false;
    return m->allreduce.rc;
}

void dt_model_loss(struct dt_model *m, const uint8_t *labels, int batch, double *loss_sum,
                   int *correct)
{
    *loss_sum =
        dt_loss_sum(m->loss, m->label_smoothing, m->output, m->classes, labels, batch, correct);
}

/* What the skip connections above sent back to layer i's output: the layer adds it to dy
 * itself (c->dy_extra), or it is added to dy now (same bits: one float addition either way). */
static void take_pending(struct dt_model *m, int i, float *dy, int batch, struct dt_layer_bwd *c)
{
    struct model_impl *impl = m->impl;
    const struct dt_layer_plan *p = &m->plan[i];
    if (!impl->pending_live[i])
        return;
    if (p->dy_extra && !p->backward_above) {
        c->dy_extra = impl->pending[i];
        return;
    }
    dt_add_into(dy, impl->pending[i], (long)batch * (long)shape_size(m->layers[i]->out));
}

/* Skip layer i's connection: its input and the gradient collected for it (dy itself when
 * the plan leaves it there, skip_in_dy). */
static void point_skip_grad(struct dt_model *m, int i, float *dy, struct dt_layer_bwd *c)
{
    struct model_impl *impl = m->impl;
    const struct dt_layer_plan *p = &m->plan[i];
    int k = p->skip_from;
    c->skip_x = skip_output(m, i);
    if (p->skip_in_dy)
        impl->pending[k] = dy;
    c->skip_dx =
        k >= impl->first_param || (k < 0 && impl->input_grad) ? *pending_of(impl, k) : NULL;
    c->skip_dx_fresh = c->skip_dx && !*live_of(impl, k);
    c->skip_in_dy = p->skip_in_dy;
    c->skip_bf16 = k >= 0 && m->plan[k].bf16_store;
}

/* With input_grad, what skip connections sent to the model's input joins the gradient that
 * came down through layer 0 (in dy). */
static void finish_input_grad(struct dt_model *m, float *dy, int batch)
{
    struct model_impl *impl = m->impl;
    if (impl->input_live)
        dt_add_into(dy, impl->pending_input, (long)batch * (long)shape_size(m->input));
    m->input_grad = dy;
}

/* Where the layer above batchnorm layer b takes its two backward sums (bn_sums, add_sums):
 * its per-sample sums, its input (stored as bf16: the plan's bf16_store) and its mean. */
static struct dt_dx_sums bn_sums_of(struct dt_model *m, int b)
{
    bool x_bf16;
    const float *x = layer_input(m, b, &x_bf16);
    return (struct dt_dx_sums){dt_batchnorm2d_sample_sums(m->layers[b]), (const dt_bf16 *)x,
                               dt_batchnorm2d_relu(m->layers[b])->mean};
}

int dt_model_backward(struct dt_model *m, const uint8_t *labels, int batch, float grad_scale)
{
    struct model_impl *impl = m->impl;
    if (batch != impl->last_batch)
        return dt_fail(DT_EUSAGE, "backward of %d samples after a forward of %d", batch,
                       impl->last_batch);
    if (batch == 0) {
        memset(m->grads, 0, m->nparams * sizeof *m->grads);
        for (int i = m->nlayers - 1; m->allreduce.sum && i >= impl->first_param; i--) {
            struct dt_layer_bwd c = {.grad_in_below = m->plan[i].grad_in_below};
            if ((m->plan[i].caps & DT_CAP_COLLECTIVE) && !m->plan[i].backward_above)
                m->layers[i]->kind->ops->backward(m->layers[i], NULL, NULL, NULL, NULL, 0, &c);
        }
        return m->allreduce.rc;
    }
    float *dy = impl->grad_a, *dx = impl->grad_b;
    int rc = dt_loss_grad(m->loss, m->label_smoothing, m->output, m->classes, labels, batch,
                          grad_scale, dy);
    if (rc < 0)
        return rc;
    memset(impl->pending_live, 0, (size_t)m->nlayers * sizeof *impl->pending_live);
    impl->input_live = false;
    for (int i = m->nlayers - 1; i >= impl->first_param; i--) {
        struct dt_layer *l = m->layers[i];
        const struct dt_layer_plan *p = &m->plan[i];
        struct dt_layer_bwd c = {0};
        take_pending(m, i, dy, batch, &c);
        if (l->spec.from)
            point_skip_grad(m, i, dy, &c);
        if (p->backward_above) /* dy passes through unchanged */
            continue;
        const float *x = layer_input(m, i, &c.x_bf16);
        c.bn_below = p->bn_below ? m->layers[i - 2] : NULL;
        /* bn_sums, add_sums: this conv's dx is given (a batchnorm's params lie below it) */
        if (p->sums_below)
            c.sums = bn_sums_of(m, p->sums_of);
        c.sums_given = p->sums_above;
        bool timed = m->profile || m->layer_hook.fn;
        double t0 = timed ? dt_now() : 0;
        bool pass = (p->caps & DT_CAP_DX_IS_DY) || p->grad_in_below;
        bool give_dx = (i > impl->first_param || impl->input_grad) && !pass;
        /* the relu below runs in this backward: what its output received goes in with it */
        c.relu_below = p->relu_below;
        c.below_extra =
            p->relu_below && give_dx && impl->pending_live[i - 1] ? impl->pending[i - 1] : NULL;
        c.bn_above = p->bn_above ? m->layers[i + 1] : NULL;
        c.pool_above = p->pool_above ? m->layers[i + 2] : NULL;
        c.pool_y = p->pool_above ? impl->act[i + 2] : NULL;
        c.dy_rounded = p->dy_rounded;
        c.dx_even = p->dx_even;
        c.extra_even = p->extra_even;
        c.grad_in_below = p->grad_in_below;
        l->kind->ops->backward(l, x, impl->act[i], dy, give_dx ? dx : NULL, batch, &c);
        if (c.below_extra)
            impl->pending_live[i - 1] = false; /* taken: the relu's step must not add it */
        if (timed)
            layer_timed(m, i, true, t0);
        if (c.skip_dx)
            *live_of(impl, p->skip_from) = true;
        if (pass)
            continue;
        float *t = dy;
        dy = dx;
        dx = t;
    }
    if (impl->input_grad)
        finish_input_grad(m, dy, batch);
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
    const char *note = ((const struct model_impl *)m->impl)->precision[i];
    const struct dt_layer_plan *p = &m->plan[i];
    /* a relu in place: its storage is the layer below's */
    const char *stored = p->in_place || !p->bf16_store ? NULL
                         : p->affine_above ? "output not stored, applied by the conv2d above"
                                           : "output stored as bf16";
    if (note || stored)
        snprintf(out->precision, sizeof out->precision, "%s%s%s", note ? note : "",
                 note && stored ? ", " : "", stored ? stored : "");
    if (s->out_channels > 0)
        snprintf(out->detail, sizeof out->detail, "%d %dx%d/%d", s->out_channels, s->kernel,
                 s->kernel, s->stride > 0 ? s->stride : 1);
    else if (s->out_features > 0)
        snprintf(out->detail, sizeof out->detail, "%d", s->out_features);
    else if (s->kernel > 0)
        snprintf(out->detail, sizeof out->detail, "%dx%d/%d", s->kernel, s->kernel,
                 s->stride > 0 ? s->stride : s->kernel);
    else if (dt_layer_kind_takes(l->kind, "p")) /* dropout, dropout2d */
        snprintf(out->detail, sizeof out->detail, "p=%.2f", s->p);
    else if (s->from)
        snprintf(out->detail, sizeof out->detail, "from %d (layer %d)%s", s->from,
                 m->plan[i].skip_from, s->shortcut == DT_SHORTCUT_PROJECTION ? " proj" : "");
    if (s->padding > 0) {
        size_t n = strlen(out->detail);
        snprintf(out->detail + n, sizeof out->detail - n, " pad %d", s->padding);
    }
}

static const char *const bn_stats_names[] = {
    [DT_BN_STATS_SYNC] = "sync",
    [DT_BN_STATS_PER_INSTANCE] = "per_instance",
};
_Static_assert(sizeof bn_stats_names / sizeof bn_stats_names[0] == DT_BN_STATS_COUNT,
               "one name per batchnorm statistics mode");
const struct dt_names dt_bn_stats_names = DT_NAMES(bn_stats_names);
