/* One model built from layer specs and run once on an input: forward in eval mode, forward in
 * training mode, cross-entropy loss and backward, every result copied out. Two builds of the
 * same specs (fused and not, a second run for determinism) are then compared bit for bit.
 * Labels are sample i % classes, sample ids 10 + i (dropout masks depend on them).
 *
 * Header-only (static inline), like nn_specs.h; include it after <cmocka.h>.
 */
#ifndef DT_TESTS_MODEL_RUN_H
#define DT_TESTS_MODEL_RUN_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nn/model.h"

#define MODEL_RUN_MAX_BATCH 64

/* The precision model_run builds with (a test of bf16 models sets DT_PRECISION_BF16 and puts
 * it back); one per test file, as this header is. */
static enum dt_precision model_run_precision = DT_PRECISION_FP32;

struct model_run {
    struct dt_model *m;
    float *out_eval, *out_train, *grads;
    float *input_grad; /* with input_grad only, else NULL */
    double loss;
};

/* specs built with the fusion mask `fusions` (enum dt_fusion), and with the input's gradient
 * when input_grad, run on x (batch x in). */
static inline struct model_run model_run(const struct dt_layer_spec *specs, int n,
                                         struct dt_shape in, int batch, unsigned fusions,
                                         bool input_grad, const float *x)
{
    struct model_run r = {0};
    struct dt_model_options opt = {
        .fusions = fusions, .input_grad = input_grad, .precision = model_run_precision};
    assert_true(batch <= MODEL_RUN_MAX_BATCH);
    assert_int_equal(dt_model_build_with(&r.m, specs, n, in, batch, DT_LOSS_CROSS_ENTROPY, 3, &opt),
                     0);
    size_t nout = (size_t)batch * r.m->classes, nin = (size_t)batch * in.c * in.h * in.w;
    uint8_t labels[MODEL_RUN_MAX_BATCH];
    uint64_t ids[MODEL_RUN_MAX_BATCH];
    for (int i = 0; i < batch; i++)
        labels[i] = (uint8_t)(i % r.m->classes), ids[i] = 10 + (uint64_t)i;
    r.out_eval = malloc(nout * sizeof(float));
    r.out_train = malloc(nout * sizeof(float));
    r.grads = malloc(r.m->nparams * sizeof(float));
    assert_int_equal(dt_model_forward(r.m, x, batch, NULL), 0);
    memcpy(r.out_eval, r.m->output, nout * sizeof(float));
    struct dt_forward_ctx ctx = {.training = true, .seed = 4, .epoch = 1, .sample_ids = ids};
    assert_int_equal(dt_model_forward(r.m, x, batch, &ctx), 0);
    memcpy(r.out_train, r.m->output, nout * sizeof(float));
    int correct;
    dt_model_loss(r.m, labels, batch, &r.loss, &correct);
    assert_int_equal(dt_model_backward(r.m, labels, batch, 1.0f / batch), 0);
    memcpy(r.grads, r.m->grads, r.m->nparams * sizeof(float));
    if (input_grad) {
        assert_non_null(r.m->input_grad);
        r.input_grad = malloc(nin * sizeof(float));
        memcpy(r.input_grad, r.m->input_grad, nin * sizeof(float));
    }
    return r;
}

/* a and b (runs of the same specs on the same input) gave the same bits: outputs, loss,
 * gradients, and the input's gradient when both have it. */
static inline void model_runs_expect_equal(const struct model_run *a, const struct model_run *b,
                                           int batch)
{
    size_t nout = (size_t)batch * a->m->classes;
    assert_memory_equal(a->out_eval, b->out_eval, nout * sizeof(float));
    assert_memory_equal(a->out_train, b->out_train, nout * sizeof(float));
    assert_true(a->loss == b->loss);
    assert_int_equal(a->m->nparams, b->m->nparams);
    assert_memory_equal(a->grads, b->grads, a->m->nparams * sizeof(float));
    if (a->input_grad && b->input_grad) {
        size_t nin = (size_t)batch * a->m->input.c * a->m->input.h * a->m->input.w;
        assert_memory_equal(a->input_grad, b->input_grad, nin * sizeof(float));
    }
}

static inline void model_run_free(struct model_run *r)
{
    free(r->out_eval);
    free(r->out_train);
    free(r->grads);
    free(r->input_grad);
    dt_model_free(r->m);
}

#endif
