/* The fusion planner (nn/fusion.h): pairs neighbouring layers whose declared capabilities meet.
 *
 * The savings, each tested alone against the unfused graph (tests/unit/test_fusion.c):
 *   relu        a layer that can apply a ReLU at its store (conv2d, batchnorm2d, add) and is
 *               followed by a relu does so; the relu's output aliases the layer's and its
 *               forward is skipped. Its backward still runs (dy masked by y > 0).
 *   pool        when a maxpool2d follows that relu and the layer can run it (conv2d on the
 *               direct or Winograd path, or a bf16 conv2d on tiles), the layer's forward runs
 *               the relu and the pool chunk by chunk and writes the pool's output; the
 *               pool's backward applies the relu's mask and the relu's backward is skipped.
 *               Neither the layer's nor the relu's output is written.
 *   pool_grad   and when the layer can also run that pool's backward (a bf16 conv2d on tiles),
 *               the pool writes no dx: the model hands its dy to the layer, whose backward
 *               unpools each sample into a per-thread buffer as it reads it (the pool's dx,
 *               the size of the layer's output, is never written to memory and read back).
 *   dx_rounded  an emulated bf16 conv2d (the ConvNet's 9-deep first conv) -> relu -> a bf16
 *               conv2d running the relu's backward, nothing else sending a gradient to either
 *               output: the conv above rounds its dx to bf16 (every bf16 conv does, as
 *               autocast's returns its input gradient), so the emulated conv, which reads its
 *               dy only rounded, skips its own rounding pass over the whole batch's dy.
 *   add         an identity add whose input only it reads is computed by the batchnorm2d
 *               below at its store, with the relu fused into the add: the add's forward is
 *               skipped and the batchnorm's own output is not written (its backward runs).
 *   relu_below  a relu feeding a conv2d on the Winograd path or a bf16 one on tiles (every
 *               relu inside a ResNet but the last) has its backward skipped: the conv writes
 *               dx as the relu's backward would, the gradient skip connections sent to the
 *               relu's output included.
 *   bn_grad     a batchnorm2d whose input is the output of a conv2d on the Winograd path (or
 *               a bf16 one on tiles) that nothing else reads takes only its sums; the model
 *               hands its dy to the conv, whose backward computes the batchnorm's dx as it
 *               reads dy.
 *   dy_extra    a relu adds what skip connections sent back to its output in its own
 *               backward pass, instead of the model adding it to dy in a pass of its own.
 *   skip_in_dy  an identity add whose skip gradient the conv above the skip's source reads (as
 *               relu_below's extra) before backward writes the add's dy buffer again leaves it
 *               there instead of copying it; that skip gradient buffer is not allocated.
 *   bf16_store  in a bf16 model, activations that only bf16 readers read are stored as bf16,
 *               half the bytes written and read back: a tiles conv2d's output that only the
 *               batchnorm2d above reads (bn_grad fused: the conv computes that batchnorm's
 *               input gradient), read by the batchnorm's passes and the conv's backward; and
 *               a batchnorm2d -> relu's output (relu fused) that only a stride-1 tiles conv2d
 *               above reads (relu_below fused: the conv runs the relu's backward), read by
 *               the conv's input and weight-gradient layouts and the relu mask. The values
 *               are bf16 anyway (a bf16 conv's output, as autocast's; a conv's input, which
 *               it rounds), so no bit changes, but for one: the relu mask of an fp32 output
 *               under 2^-133 that rounds to zero (x > 0 on the fp32 value, not on the bf16).
 *               And a ResNet block's output (the relu after an identity add the batchnorm
 *               below computes, after a projection add its batchnorm computes, or after the
 *               stem's batchnorm), read by a tiles conv2d (stride 1 or 2) running the relu's
 *               backward, by identity adds that batchnorms compute and by projections on
 *               tiles: a bf16 model's identity add reads its skip as a bf16 value (as
 *               autocast's add of bf16 tensors), so those readers see the same values.
 *   bn_input    and where such a batchnorm2d -> relu's input is itself stored as bf16 (the conv
 *               below's), the batchnorm stores nothing: it keeps its statistics and the conv
 *               above applies the batchnorm and the relu to that input as it lays it out, in
 *               its forward's input layout, its weight gradient's position pairs and the relu
 *               mask, rounding as the batchnorm's store did (the same bits). One pass over
 *               the activation (a read and a write of half its bytes) and its memory saved.
 *   bn_sums     and that conv2d, as it stores dx (the relu's backward), takes the batchnorm's two
 *               backward sums over each sample (sum dy and sum dy (x - mean), dy being that
 *               dx): the batchnorm adds the samples' sums up instead of reading dy and x
 *               again. The order of the sums is bn_grad.h's whether the conv or the
 *               batchnorm takes them (a bf16 model's batchnorm sums each sample apart), so the
 *               bits are the same.
 *   proj_dx     a downsampling block's projection (a stride-2 1x1 tiles conv2d without
 *               padding) reaches only the even rows' even columns of its skip's gradient: it
 *               stores those alone, a quarter of the buffer, and the stride-2 conv above the
 *               skip's relu, which takes that gradient as relu_below's extra, reads them so
 *               (adding +0 between, as it added the stored zeros: the same bits), when the
 *               projection is the skip's only sender.
 *   view        a flatten's output is its input's storage (NCHW is already in flattened order):
 *               no copy in forward (its backward passes dy on already, DT_CAP_DX_IS_DY).
 *   chunks      consecutive chunkable layers (conv2d on the direct path, with what is fused
 *               into it) run chunk by chunk, each chunk through all of them, so activations
 *               between them are read back from L2 instead of memory (one thread only).
 */
#include "nn/fusion.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "nn/layers.h"
#include "util/err.h"

static bool has(const struct dt_layer_plan *p, unsigned cap)
{
    return (p->caps & cap) != 0;
}

/* Bytes of intermediate activation per sample a chunk of a run keeps in cache. */
#define RUN_CHUNK_BYTES (256 * 1024)

/* If layers from i on form a run of at least two chunkable layers (with only layers fused
 * into them in between), records it and returns the index after it; else returns i + 1. */
static int plan_chunked_run(struct dt_layer_plan *plan, struct dt_layer *const *layers, int n,
                            int max_batch, int i)
{
    if (!has(&plan[i], DT_CAP_CHUNKS))
        return i + 1;
    int k = i + 1, count = 1;
    size_t widest = 1;
    for (; k < n; k++) {
        if (plan[k].in_place || plan[k].forward_below)
            continue;
        if (!has(&plan[k], DT_CAP_CHUNKS))
            break;
        count++;
        struct dt_shape in = layers[k]->in;
        size_t between = (size_t)in.c * in.h * in.w * sizeof(float);
        widest = between > widest ? between : widest;
    }
    if (count < 2)
        return i + 1;
    size_t chunk = widest < RUN_CHUNK_BYTES ? RUN_CHUNK_BYTES / widest : 1;
    plan[i].run_end = k;
    plan[i].run_chunk = chunk < (size_t)max_batch ? (int)chunk : max_batch;
    return k;
}

/* Whether identity add i's gradient for its skip source k can stay in the add's dy buffer
 * (call it A) instead of being copied into the model's pending buffer for k. Backward passes A
 * down as the main branch's dy and alternates two buffers from there: A must not be written
 * before the layer just above k reads it, except by that layer itself as the conv that runs
 * k's relu backward with k's pending gradient as its extra (its store reads each element of
 * the extra gradient before writing the same element). So: the add is k's only sender,
 * nothing between reads a skip gradient or sends one, and the layers between write A,
 * counted along the alternation, only there. */
static bool skip_stays_in_dy(const struct dt_layer_plan *plan, struct dt_layer *const *layers,
                             int n, int first_param, int i)
{
    const struct dt_layer_plan *p = &plan[i];
    int k = p->skip_from;
    if (!has(p, DT_CAP_IS_IDENTITY_ADD) || !has(p, DT_CAP_DX_IS_DY) || k < first_param ||
        k + 1 >= i)
        return false;
    for (int j = 0; j < n; j++)
        if (j != i && layers[j]->spec.from && plan[j].skip_from == k)
            return false;
    const struct dt_layer_plan *taker = &plan[k + 1];
    if (!plan[k].backward_above || !taker->relu_below || !has(taker, DT_CAP_RELU_BELOW_GRAD))
        return false;
    bool in_a = true; /* where the current dy is */
    for (int j = i - 1; j > k; j--) {
        if (plan[j].referenced || layers[j]->spec.from)
            return false;
        if (plan[j].backward_above || has(&plan[j], DT_CAP_DX_IS_DY) || plan[j].grad_in_below)
            continue; /* dy passes on in the same buffer */
        in_a = !in_a; /* j writes its dx into the other buffer */
        if (in_a && j != k + 1)
            return false;
    }
    return true;
}

/* relu, then pool on top of it: a fused relu overwrites the layer's output, a fused pool
 * skips both outputs. */
static void plan_relu_and_pool(struct dt_layer_plan *plan, int n, unsigned fusions)
{
    for (int i = 1; (fusions & DT_FUSE_RELU) && i < n; i++) {
        struct dt_layer_plan *prev = &plan[i - 1];
        if (!has(&plan[i], DT_CAP_IS_RELU) || !has(prev, DT_CAP_RELU_AT_STORE) || prev->referenced)
            continue;
        prev->relu_at_store = true;
        plan[i].in_place = true;
        if ((fusions & DT_FUSE_POOL) && i + 1 < n && has(&plan[i + 1], DT_CAP_IS_MAXPOOL) &&
            has(prev, DT_CAP_POOL_IN_FORWARD) && !plan[i].referenced) {
            prev->runs_pool = true;
            plan[i + 1].relu_below = true;
            plan[i + 1].forward_below = true;
            plan[i].backward_above = true;
            if ((fusions & DT_FUSE_POOL_GRAD) && has(prev, DT_CAP_POOL_ABOVE_GRAD)) {
                prev->pool_above = true;
                plan[i + 1].grad_in_below = true;
            }
        }
    }
}

/* add, relu_below and bn_grad: each a pair of a layer and the one below it. */
static void plan_pairs(struct dt_layer_plan *plan, int n, unsigned fusions)
{
    for (int i = 1; i < n; i++) {
        struct dt_layer_plan *below = &plan[i - 1], *p = &plan[i];
        /* an add nobody else reads the input of: the layer below computes it */
        if ((fusions & DT_FUSE_ADD) && has(p, DT_CAP_IS_IDENTITY_ADD) &&
            has(below, DT_CAP_ADD_AT_STORE) && !below->referenced) {
            below->runs_add = true;
            p->forward_below = true;
        }
        /* the relu's backward in this layer's (skip gradients to the relu included) */
        if ((fusions & DT_FUSE_RELU_BELOW) && has(p, DT_CAP_RELU_BELOW_GRAD) &&
            has(below, DT_CAP_IS_RELU)) {
            p->relu_below = true;
            below->backward_above = true;
        }
        /* this batchnorm's input gradient in the layer below's backward */
        if ((fusions & DT_FUSE_BN_GRAD) && has(p, DT_CAP_IS_BATCHNORM) &&
            has(below, DT_CAP_BN_ABOVE_GRAD) && !below->referenced) {
            below->bn_above = true;
            p->grad_in_below = true;
        }
    }
}

/* dx_rounded: an emulated bf16 conv2d -> relu -> a bf16 conv2d running the relu's backward,
 * nothing else sending a gradient to either output: the conv above rounds its dx (every bf16
 * conv does), so the relu's is rounded too. */
static void plan_dx_rounded(struct dt_layer_plan *plan, int n)
{
    for (int i = 0; i + 2 < n; i++) {
        struct dt_layer_plan *p = &plan[i], *relu = &plan[i + 1], *above = &plan[i + 2];
        if (has(p, DT_CAP_READS_DY_ROUNDED) && relu->in_place && relu->backward_above &&
            !p->referenced && !relu->referenced && above->relu_below &&
            has(above, DT_CAP_DX_ROUNDED)) {
            p->dy_rounded = true;
        }
    }
}

/* Whether every layer whose skip connection reads layer i's output reads it stored as bf16
 * (DT_CAP_BF16_SKIP): an identity add that the batchnorm below computes at its store, or an
 * add whose projection conv reads bf16. */
static bool skip_readers_take_bf16(const struct dt_layer_plan *plan, struct dt_layer *const *layers,
                                   int n, int i)
{
    for (int j = i + 1; j < n; j++) {
        if (!layers[j]->spec.from || plan[j].skip_from != i)
            continue;
        bool by_bn = has(&plan[j], DT_CAP_IS_IDENTITY_ADD) && plan[j].forward_below &&
                     plan[j - 1].runs_add && has(&plan[j - 1], DT_CAP_BF16_SKIP);
        bool projection = !has(&plan[j], DT_CAP_IS_IDENTITY_ADD) && has(&plan[j], DT_CAP_BF16_SKIP);
        if (!by_bn && !projection)
            return false;
    }
    return true;
}

/* A relu's output that skip connections read too (a ResNet block's output: the relu after an
 * identity add the batchnorm below computes, or after the stem's batchnorm), stored as bf16
 * (at the add's or the batchnorm's store) when the layer above reads x so running the relu's
 * backward, and every skip reader reads a bf16 skip. The values are bf16 ones for every
 * reader already: a conv (the projection's too) rounds its input and a bf16 model's identity
 * add its skip. */
static void plan_bf16_block_outputs(struct dt_layer_plan *plan, struct dt_layer *const *layers,
                                    int n)
{
    for (int i = 1; i + 1 < n; i++) {
        struct dt_layer_plan *r = &plan[i], *w = &plan[i - 1], *above = &plan[i + 1];
        if (!has(r, DT_CAP_IS_RELU) || !r->in_place || !r->referenced || !above->relu_below ||
            !has(above, DT_CAP_BF16_INPUT) || !skip_readers_take_bf16(plan, layers, n, i))
            continue;
        bool add_by_bn = has(w, DT_CAP_IS_IDENTITY_ADD) && w->forward_below && i >= 2 &&
                         plan[i - 2].runs_add && has(&plan[i - 2], DT_CAP_BF16_STORE);
        bool bn = has(w, DT_CAP_IS_BATCHNORM) && has(w, DT_CAP_BF16_STORE) && !w->runs_add;
        /* an add with a projection, which its batchnorm computes (nn/layer_add.c) */
        bool projection = layers[i - 1]->spec.from && !has(w, DT_CAP_IS_IDENTITY_ADD) &&
                          has(w, DT_CAP_BF16_STORE);
        if (add_by_bn || bn || projection)
            w->bf16_store = r->bf16_store = true;
    }
}

/* bf16_store: the outputs stored as bf16, each read only by layers that read bf16. */
static void plan_bf16_store(struct dt_layer_plan *plan, int n)
{
    for (int i = 1; i < n; i++) {
        struct dt_layer_plan *below = &plan[i - 1], *p = &plan[i];
        /* conv2d -> batchnorm2d, the batchnorm's input gradient in the conv (bn_above: the
         * batchnorm is its only reader) */
        if (below->bn_above && has(below, DT_CAP_BF16_STORE) && has(p, DT_CAP_BF16_INPUT))
            below->bf16_store = true;
        /* batchnorm2d -> relu (in place: the batchnorm's output is not referenced) -> conv2d
         * running the relu's backward, nothing else reading the relu's output */
        if (i + 1 < n && has(below, DT_CAP_IS_BATCHNORM) && has(below, DT_CAP_BF16_STORE) &&
            has(p, DT_CAP_IS_RELU) && p->in_place && !below->runs_add && !p->referenced &&
            plan[i + 1].relu_below && has(&plan[i + 1], DT_CAP_BF16_INPUT))
            below->bf16_store = p->bf16_store = true;
    }
}

/* bn_input: a conv2d whose input is a batchnorm2d -> relu's stored as bf16 (bf16_store), the
 * batchnorm's input stored so too, reads that input and applies the two itself. */
static void plan_bn_input(struct dt_layer_plan *plan, int n, unsigned fusions)
{
    for (int i = 3; i < n; i++) {
        struct dt_layer_plan *bn = &plan[i - 2], *relu = &plan[i - 1], *p = &plan[i];
        if (has(p, DT_CAP_BN_RELU_INPUT) && p->relu_below && has(relu, DT_CAP_IS_RELU) &&
            relu->bf16_store && relu->in_place && !relu->referenced &&
            has(bn, DT_CAP_IS_BATCHNORM) && bn->bf16_store && plan[i - 3].bf16_store) {
            bn->affine_above = relu->affine_above = true;
            p->bn_below = true;
            p->sums_below = bn->sums_above = fusions & DT_FUSE_BN_SUMS;
            p->sums_of = i - 2;
        }
    }
}

/* The batchnorm2d whose dy is the dx that layer i, running the backward of the relu below,
 * stores: the batchnorm -> relu below it (the relu at its store) or the batchnorm computing
 * the identity add -> relu below it; -1 for none. */
static int bn_under_relu(const struct dt_layer_plan *plan, int i)
{
    const struct dt_layer_plan *relu = &plan[i - 1], *w = &plan[i - 2];
    if (!has(relu, DT_CAP_IS_RELU) || !relu->in_place)
        return -1;
    if (has(w, DT_CAP_IS_IDENTITY_ADD) && w->forward_below && i >= 3 && plan[i - 3].runs_add)
        return i - 3;
    return has(w, DT_CAP_IS_BATCHNORM) && w->relu_at_store && !w->runs_add ? i - 2 : -1;
}

/* add_sums: a stride-1 tiles conv2d running the relu below's backward takes, as it stores dx,
 * the two backward sums of the batchnorm2d whose dy that dx is (bn_under_relu), the
 * batchnorm's input stored as bf16 (bf16_store), as bn_sums does for a batchnorm -> relu it
 * applies itself. What skip connections sent to the relu's output is in that dx (the relu
 * below's backward adds it), so it is the batchnorm's whole dy. */
static void plan_add_sums(struct dt_layer_plan *plan, int n)
{
    for (int i = 3; i < n; i++) {
        struct dt_layer_plan *p = &plan[i];
        if (!has(p, DT_CAP_BN_RELU_INPUT) || !has(p, DT_CAP_RELU_BELOW_GRAD) || !p->relu_below ||
            p->sums_below)
            continue;
        int b = bn_under_relu(plan, i);
        if (b < 1 || plan[b].affine_above || plan[b].sums_above || !plan[b - 1].bf16_store)
            continue;
        p->sums_below = plan[b].sums_above = true;
        p->sums_of = b;
    }
}

/* proj_dx: an add whose stride-2 projection's input gradient reaches only the even rows' even
 * columns of its skip (a 1x1 conv without padding) stores only those, a quarter of the skip's
 * gradient, when it is the only layer sending one to the skip's source, a relu whose backward
 * the conv2d above runs (relu_below) and takes that gradient as its below_extra so. The
 * positions between are zero, which that conv adds as the whole buffer's zeros were: the
 * same bits, three quarters of the buffer neither written nor read. */
static void plan_proj_dx(struct dt_layer_plan *plan, struct dt_layer *const *layers, int n,
                         int first_param)
{
    for (int i = 0; i < n; i++) {
        int k = plan[i].skip_from;
        if (!layers[i]->spec.from || !has(&plan[i], DT_CAP_DX_EVEN) || k < first_param ||
            k + 1 >= i)
            continue;
        bool alone = true;
        for (int j = 0; j < n; j++)
            if (j != i && layers[j]->spec.from && plan[j].skip_from == k)
                alone = false;
        struct dt_layer_plan *taker = &plan[k + 1];
        if (alone && plan[k].backward_above && taker->relu_below && has(taker, DT_CAP_EXTRA_EVEN))
            plan[i].dx_even = taker->extra_even = true;
    }
}

void dt_fusion_plan(struct dt_layer_plan *plan, struct dt_layer *const *layers, int n,
                    unsigned fusions, int max_batch, int threads, int first_param)
{
    for (int i = 0; i < n; i++)
        if (layers[i]->spec.from != 0 && plan[i].skip_from >= 0)
            plan[plan[i].skip_from].referenced = true;
    plan_relu_and_pool(plan, n, fusions);
    /* view: not at layer 0, whose input is the caller's */
    for (int i = 1; (fusions & DT_FUSE_VIEW) && i < n; i++)
        if (has(&plan[i], DT_CAP_Y_IS_X))
            plan[i].in_place = true;
    plan_pairs(plan, n, fusions);
    if (fusions & DT_FUSE_BF16_STORE) {
        plan_bf16_store(plan, n);
        plan_bf16_block_outputs(plan, layers, n);
    }
    if ((fusions & DT_FUSE_BF16_STORE) && (fusions & DT_FUSE_BN_INPUT))
        plan_bn_input(plan, n, fusions);
    if ((fusions & DT_FUSE_BF16_STORE) && (fusions & DT_FUSE_ADD_SUMS))
        plan_add_sums(plan, n);
    if (fusions & DT_FUSE_DX_ROUNDED)
        plan_dx_rounded(plan, n);
    /* With more threads every chunk costs a fork/join per layer (a scheduler tick each on a
     * busy machine) and the gain was not measurable: one thread only. */
    for (int i = 0; (fusions & DT_FUSE_CHUNKS) && threads <= 1 && i < n;)
        i = plan_chunked_run(plan, layers, n, max_batch, i);
    for (int i = 0; i < n; i++)
        plan[i].dy_extra = (fusions & DT_FUSE_DY_EXTRA) && has(&plan[i], DT_CAP_DY_EXTRA);
    for (int i = 0; (fusions & DT_FUSE_SKIP_IN_DY) && i < n; i++)
        if (skip_stays_in_dy(plan, layers, n, first_param, i)) {
            plan[i].skip_in_dy = true;
            plan[plan[i].skip_from].pending_in_dy = true;
        }
    if (fusions & DT_FUSE_PROJ_DX)
        plan_proj_dx(plan, layers, n, first_param);
}

static const struct {
    const char *name;
    unsigned fusion;
} fusion_table[] = {
    {"relu", DT_FUSE_RELU},
    {"pool", DT_FUSE_POOL},
    {"add", DT_FUSE_ADD},
    {"relu_below", DT_FUSE_RELU_BELOW},
    {"bn_grad", DT_FUSE_BN_GRAD},
    {"dy_extra", DT_FUSE_DY_EXTRA},
    {"skip_in_dy", DT_FUSE_SKIP_IN_DY},
    {"chunks", DT_FUSE_CHUNKS},
    {"bf16_store", DT_FUSE_BF16_STORE},
    {"pool_grad", DT_FUSE_POOL_GRAD},
    {"dx_rounded", DT_FUSE_DX_ROUNDED},
    {"bn_input", DT_FUSE_BN_INPUT},
    {"view", DT_FUSE_VIEW},
    {"bn_sums", DT_FUSE_BN_SUMS},
    {"add_sums", DT_FUSE_ADD_SUMS},
    {"proj_dx", DT_FUSE_PROJ_DX},
};
_Static_assert(sizeof fusion_table / sizeof fusion_table[0] == 16 && DT_FUSE_ALL == 0xffff,
               "one name per fusion");

const char *dt_fusion_names(void)
{
    return "relu, pool, add, relu_below, bn_grad, dy_extra, skip_in_dy, chunks, bf16_store, "
           "pool_grad, dx_rounded, bn_input, view, bn_sums, add_sums, proj_dx";
}

/* The fusion named by word[0..len), or 0. */
static unsigned fusion_of(const char *word, size_t len)
{
    if (len == 3 && !strncmp(word, "all", 3))
        return DT_FUSE_ALL;
    for (size_t i = 0; i < sizeof fusion_table / sizeof fusion_table[0]; i++)
        if (strlen(fusion_table[i].name) == len && !strncmp(word, fusion_table[i].name, len))
            return fusion_table[i].fusion;
    return 0;
}

int dt_fusion_parse(const char *text, unsigned *out)
{
    unsigned set = DT_FUSE_NONE;
    if (!strcmp(text, "none")) {
        *out = set;
        return 0;
    }
    for (const char *p = text;;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        bool remove = len > 0 && *p == '-';
        unsigned f = fusion_of(p + remove, len - remove);
        if (!f)
            return dt_fail(DT_EUSAGE,
                           "'%.*s' is not a fusion (expected none, all or a list of: %s)", (int)len,
                           p, dt_fusion_names());
        set = remove ? set & ~f : set | f;
        if (!end)
            break;
        p = end + 1;
    }
    *out = set;
    return 0;
}
