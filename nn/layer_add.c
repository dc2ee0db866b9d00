/* add: a residual connection, y = x + shortcut(skip), skip being the output of the layer
 * `from` back (Darknet's [shortcut]). shortcut = "identity" needs equal shapes; "projection"
 * is He et al.'s option B, torchvision's downsample: a 1x1 conv2d (no bias) whose stride
 * brings skip to x's height and width and whose channels to x's, then a batchnorm2d (unless
 * batchnorm = false, when the conv has a bias). The projection's tensors are named
 * "layers.<i>.proj.0.*" (conv) and "layers.<i>.proj.1.*" (batchnorm), as a torch module
 * `proj = nn.Sequential(conv, bn)` names them (docs/resnet.md).
 *
 * The projection's sub-layers fuse among themselves as the model's plan fuses layers
 * (nn/fusion.h), as far as the model's fusions and their capabilities allow, with the same
 * bits: the batchnorm computes the add (and its relu) at its store (add: no batchnorm output,
 * no add pass; x + t2 and t2 + x are the same float); the conv's backward computes the
 * batchnorm's input gradient as it reads dy (bn_grad); and a bf16 conv on tiles then stores
 * its output as bf16 for the batchnorm (bf16_store). Downsampling blocks are two of ResNet-20's
 * nine, and their projection ran 8 % of a bf16 step unfused (--profile, 1 thread).
 *
 * Backward: dy goes to x unchanged (DT_CAP_DX_IS_DY: the model passes dy on with no copy, so
 * backward gets dx = NULL) and to skip through the shortcut, stored into or added to the gradient
 * of skip's layer (nn/model.c, pending; the projection's conv stores straight into it when fresh).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/kernels/fp32/elementwise.h"
#include "nn/layer_common.h"
#include "util/alloc.h"

struct add {
    bool projection, has_bn;
    /* the projection's own fusions (see the top) */
    bool bn_adds;         /* add: the batchnorm stores x + its output, then the relu */
    bool bn_grad;         /* bn_grad: the conv's backward computes the batchnorm's input gradient */
    bool t1_bf16;         /* bf16_store: t1 holds bf16 elements */
    char note[80];        /* the precision note: the conv's path, and the bf16 store */
    struct dt_shape skip; /* the skip connection's output shape */
    struct dt_layer conv, bn; /* the projection's sub-layers */
    float *t1, *t2;           /* conv output, batchnorm output (NULL with bn_adds) */
    float *d1;                /* gradient w.r.t. the conv output (NULL with bn_grad) */
    float *dskip;             /* gradient w.r.t. skip from the conv */
};

static bool same_shape(struct dt_shape a, struct dt_shape b)
{
    return a.c == b.c && a.h == b.h && a.w == b.w;
}

/* The 1x1 stride that takes s's height and width to in's, or 0. */
static int projection_stride(struct dt_shape s, struct dt_shape in)
{
    for (int st = 1; st <= s.h && st <= s.w; st++)
        if ((s.h - 1) / st + 1 == in.h && (s.w - 1) / st + 1 == in.w)
            return st;
    return 0;
}

/* Sets sub-layer sub of layer parent up as a layer of kind `type`; its collective and
 * scratch are added to *s, the parent's, and its precision note (the projection conv's bf16
 * path) becomes the parent's; *caps gets its capabilities, for the fusions add_setup picks. */
static int sub_setup(struct dt_layer *parent, struct dt_layer *sub, const char *type,
                     struct dt_layer_spec *spec, struct dt_shape in, struct dt_layer_setup *s,
                     unsigned *caps)
{
    snprintf(spec->type, sizeof spec->type, "%s", type);
    memcpy(spec->name, parent->spec.name, sizeof spec->name); /* "<add's name>.proj.0.weight" */
    sub->kind = dt_layer_kind_find(type);
    sub->spec = *spec;
    sub->index = parent->index;
    sub->in = in;
    sub->model = parent->model;
    struct dt_layer_setup own = {.skip_from = -1};
    int rc = sub->kind->ops->setup(sub, spec, in, &own);
    *caps = own.caps;
    s->caps |= own.caps & DT_CAP_COLLECTIVE;
    s->scratch_bytes += own.scratch_bytes;
    s->copy_bytes += own.copy_bytes;
    if (own.precision)
        s->precision = own.precision;
    if (own.call_scratch_bytes > s->call_scratch_bytes) /* shared, not added */
        s->call_scratch_bytes = own.call_scratch_bytes;
    return rc;
}

/* The projection's own fusions: the model's planner (nn/fusion.c) run on conv -> batchnorm ->
 * an identity add, with the model's fusions (not chunks: nothing here runs in chunks), so its
 * rules are the ones every other pair follows; the precision note says when the conv's output
 * is stored as bf16. */
static void plan_projection(struct dt_layer *l, struct add *a, unsigned conv_caps, unsigned bn_caps,
                            struct dt_layer_setup *setup)
{
    if (!a->has_bn)
        return;
    struct dt_layer *const sub[3] = {&a->conv, &a->bn, l};
    struct dt_layer_plan plan[3] = {{.caps = conv_caps, .skip_from = -1},
                                    {.caps = bn_caps, .skip_from = 0},
                                    {.caps = DT_CAP_IS_IDENTITY_ADD, .skip_from = -1}};
    dt_fusion_plan(plan, sub, 3, l->model->fusions & ~DT_FUSE_CHUNKS, l->model->max_batch, 1, 0);
    a->bn_adds = plan[1].runs_add;
    a->bn_grad = plan[0].bn_above;
    a->t1_bf16 = plan[0].bf16_store;
    if (a->t1_bf16) {
        snprintf(a->note, sizeof a->note, "%s, projection stored as bf16",
                 setup->precision ? setup->precision : "bf16");
        setup->precision = a->note;
    }
}

static int add_setup(struct dt_layer *l, const struct dt_layer_spec *spec, struct dt_shape in,
                     struct dt_layer_setup *setup)
{
    struct dt_shape s = setup->skip;
    struct add *a = calloc(1, sizeof *a);
    if (!a)
        return dt_fail(DT_ERUNTIME, "out of memory");
    l->state = a;
    l->out = in;
    a->skip = s;
    /* x's gradient is dy whatever the shortcut */
    setup->caps = DT_CAP_RELU_AT_STORE | DT_CAP_DX_IS_DY;
    a->projection = spec->shortcut == DT_SHORTCUT_PROJECTION;
    if (!a->projection) {
        if (!same_shape(s, in))
            return dt_fail(DT_EUSAGE,
                           "shortcut from layer %d: its output is %dx%dx%d but this layer's "
                           "input is %dx%dx%d; an identity shortcut needs equal shapes "
                           "(shortcut = \"projection\" adapts channels and stride)",
                           setup->skip_from, s.c, s.h, s.w, in.c, in.h, in.w);
        setup->caps |= DT_CAP_IS_IDENTITY_ADD; /* a batchnorm below may compute it */
        return 0;
    }
    int stride = projection_stride(s, in);
    if (!stride)
        return dt_fail(DT_EUSAGE,
                       "shortcut from layer %d: no 1x1 stride takes its %dx%dx%d output to this "
                       "layer's input %dx%dx%d",
                       setup->skip_from, s.c, s.h, s.w, in.c, in.h, in.w);
    struct dt_layer_spec cs;
    dt_layer_spec_defaults(&cs);
    cs.out_channels = in.c, cs.kernel = 1, cs.stride = stride, cs.bias = !spec->batchnorm;
    cs.line = spec->line;
    unsigned conv_caps, bn_caps = 0;
    int rc = sub_setup(l, &a->conv, "conv2d", &cs, s, setup, &conv_caps);
    a->has_bn = spec->batchnorm;
    if (rc == 0 && a->has_bn) {
        struct dt_layer_spec bs;
        dt_layer_spec_defaults(&bs);
        bs.line = spec->line;
        rc = sub_setup(l, &a->bn, "batchnorm2d", &bs, a->conv.out, setup, &bn_caps);
    }
    if (rc)
        return rc;
    plan_projection(l, a, conv_caps, bn_caps, setup);
    if (conv_caps & DT_CAP_BF16_INPUT) /* the projection conv reads the skip stored as bf16 */
        setup->caps |= DT_CAP_BF16_SKIP;
    if (conv_caps & DT_CAP_DX_EVEN) /* its gradient of skip: proj_dx */
        setup->caps |= DT_CAP_DX_EVEN;
    if (a->bn_adds && (bn_caps & DT_CAP_BF16_STORE)) /* its batchnorm stores y as bf16 */
        setup->caps |= DT_CAP_BF16_STORE;
    l->nparams = a->conv.nparams + a->bn.nparams;
    l->nbuffers = a->bn.nbuffers;
    /* t1, t2 and d1 where unfused (the input's size) and dskip (the skip's), besides the
     * sub-layers' own */
    double floats = (1.0 + (a->has_bn && !a->bn_adds) + (a->has_bn && !a->bn_grad)) *
                        (double)dt_shape_size(in) +
                    (double)dt_shape_size(s);
    setup->scratch_bytes += (double)l->model->max_batch * sizeof(float) * floats;
    return 0; /* scratch at init, once the model's size has been checked */
}

/* The sub-layers' slices of this layer's, set at init: the model's arenas (its own or the
 * shared copy it was built in, dt_model_build_in) do not move afterwards. */
static void wire(struct dt_layer *l, struct add *a)
{
    a->conv.params = l->params, a->conv.grads = l->grads;
    a->bn.params = l->params + a->conv.nparams, a->bn.grads = l->grads + a->conv.nparams;
    a->bn.buffers = l->buffers;
}

static int add_init(struct dt_layer *l, uint64_t seed)
{
    struct add *a = l->state;
    if (!a->projection)
        return 0;
    size_t max_batch = (size_t)l->model->max_batch, n = max_batch * dt_shape_size(l->in);
    a->t1 = dt_alloc(n, sizeof(float));
    a->t2 = a->has_bn && !a->bn_adds ? dt_alloc(n, sizeof(float)) : NULL;
    a->d1 = a->has_bn && !a->bn_grad ? dt_alloc(n, sizeof(float)) : NULL;
    a->dskip = dt_alloc(max_batch * dt_shape_size(a->skip), sizeof(float));
    if (!a->t1 || (a->has_bn && !a->bn_adds && !a->t2) || (a->has_bn && !a->bn_grad && !a->d1) ||
        !a->dskip)
        return dt_fail(DT_ERUNTIME, "out of memory");
    wire(l, a);
    int rc = dt_layer_init_sub(&a->conv, "proj.0.", seed);
    if (rc == 0 && a->has_bn)
        rc = dt_layer_init_sub(&a->bn, "proj.1.", seed);
    return rc;
}

static void add_forward(struct dt_layer *l, const float *x, float *y, int batch,
                        const struct dt_layer_fwd *c)
{
    struct add *a = l->state;
    /* the sub-layers run alone, on the same samples */
    struct dt_layer_fwd sub = {
        .run = c->run, .first_sample = c->first_sample, .weights_copied = c->weights_copied};
    if (batch == 0) { /* an empty share of a batch: only the batchnorm's collectives */
        if (a->has_bn)
            a->bn.kind->ops->forward(&a->bn, NULL, NULL, 0, &sub);
        return;
    }
    const float *sc = c->skip_x;
    if (a->projection) {
        struct dt_layer_fwd conv = sub;
        conv.y_bf16 = a->t1_bf16;
        conv.x_bf16 = c->skip_bf16;
        a->conv.kind->ops->forward(&a->conv, c->skip_x, a->t1, batch, &conv);
        struct dt_layer_fwd bn = sub;
        bn.x_bf16 = a->t1_bf16;
        if (a->bn_adds) { /* y = t2 + x, the relu too, at the batchnorm's store */
            bn.skip_x = x, bn.relu = c->relu, bn.y_bf16 = c->y_bf16;
            a->bn.kind->ops->forward(&a->bn, a->t1, y, batch, &bn);
            return;
        }
        if (a->has_bn)
            a->bn.kind->ops->forward(&a->bn, a->t1, a->t2, batch, &bn);
        sc = a->has_bn ? a->t2 : a->t1;
    }
    /* c->relu: the following relu, at the store (backward never reads y); c->round_skip: the
     * identity add's skip as a bf16 value */
    dt_add_forward(x, sc, y, (long)(batch * dt_shape_size(l->in)), c->relu, c->round_skip);
}

static void add_backward(struct dt_layer *l, const float *x, const float *y, const float *dy,
                         float *dx, int batch, const struct dt_layer_bwd *c)
{
    (void)x, (void)y, (void)dx; /* DT_CAP_DX_IS_DY: the model passes dy on as x's gradient */
    struct add *a = l->state;
    const struct dt_layer_bwd alone = {0}, empty = {.grad_in_below = a->bn_grad};
    if (batch == 0) {
        if (a->has_bn)
            a->bn.kind->ops->backward(&a->bn, NULL, NULL, NULL, NULL, 0, &empty);
        return;
    }
    long n = (long)(batch * dt_shape_size(l->in));
    if (!a->projection) {
        float *sdx = c->skip_dx;
        if (c->skip_in_dy) /* skip_dx is dy itself */
            return;
        if (sdx && c->skip_dx_fresh)
            dt_copy(sdx, dy, n);
        else if (sdx)
            dt_add_into(sdx, dy, n);
        return;
    }
    const float *dconv = dy;
    struct dt_layer_bwd conv = alone;
    conv.x_bf16 = c->skip_bf16;
    conv.dx_even = c->dx_even; /* proj_dx: skip_dx (and dskip) hold the even positions */
    if (a->has_bn) { /* with bn_grad only its sums: the conv reads its dy (= dy) through it */
        struct dt_layer_bwd bn = {.grad_in_below = a->bn_grad, .x_bf16 = a->t1_bf16};
        a->bn.kind->ops->backward(&a->bn, a->t1, a->t2, dy, a->bn_grad ? NULL : a->d1, batch, &bn);
        dconv = a->bn_grad ? dy : a->d1;
        conv.bn_above = a->bn_grad ? &a->bn : NULL;
    }
    float *dskip = !c->skip_dx ? NULL : c->skip_dx_fresh ? c->skip_dx : a->dskip;
    a->conv.kind->ops->backward(&a->conv, c->skip_x, a->t1, dconv, dskip, batch, &conv);
    if (c->skip_dx && !c->skip_dx_fresh) {
        struct dt_shape s = a->skip;
        if (c->dx_even)
            s.h = (s.h + 1) / 2, s.w = (s.w + 1) / 2;
        dt_add_into(c->skip_dx, a->dskip, (long)(batch * dt_shape_size(s)));
    }
}

extern const struct dt_layer_ops dt_add_ops; /* at the end of this file */

unsigned dt_add_projection_fusions(const struct dt_layer *l)
{
    const struct add *a = l->kind->ops == &dt_add_ops ? l->state : NULL;
    if (!a || !a->projection)
        return 0;
    return (a->bn_adds ? DT_FUSE_ADD : 0u) | (a->bn_grad ? DT_FUSE_BN_GRAD : 0u) |
           (a->t1_bf16 ? DT_FUSE_BF16_STORE : 0u);
}

static void add_destroy(struct dt_layer *l)
{
    struct add *a = l->state;
    if (!a)
        return;
    if (a->conv.kind && a->conv.kind->ops->destroy)
        a->conv.kind->ops->destroy(&a->conv);
    if (a->bn.kind && a->bn.kind->ops->destroy)
        a->bn.kind->ops->destroy(&a->bn);
    dt_free(a->t1);
    dt_free(a->t2);
    dt_free(a->d1);
    dt_free(a->dskip);
    free(a);
    l->state = NULL;
}

/* The projection conv's bf16 weight copy: its weights are the first of the add's params. */
static size_t add_copy_piece(const struct dt_layer *l, size_t *count)
{
    const struct add *a = l->state;
    if (!a->projection || !a->conv.kind->ops->copy_piece)
        return 0;
    return a->conv.kind->ops->copy_piece(&a->conv, count);
}

static void add_copy_weights(struct dt_layer *l, size_t lo, size_t hi)
{
    struct add *a = l->state;
    a->conv.kind->ops->copy_weights(&a->conv, lo, hi);
}

const struct dt_layer_ops dt_add_ops = {.setup = add_setup,
                                        .init = add_init,
                                        .forward = add_forward,
                                        .backward = add_backward,
                                        .destroy = add_destroy,
                                        .copy_piece = add_copy_piece,
                                        .copy_weights = add_copy_weights};
