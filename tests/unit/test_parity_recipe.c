/* The training-recipe options against PyTorch 1.13 (tests/parity/gen_recipe.py): one-cycle and
 * linear-warmup + cosine learning-rate sequences, cross-entropy with label smoothing (loss and
 * gradient), clip_grad_norm_, and SGD with Nesterov momentum whose bias group has no weight
 * decay (several updates, then the same updates cut into dt_optim_step_range slices).
 *
 * Tolerance: |c - t| <= 1e-5 * max(|t|, 1e-2) for float results; learning rates, computed in
 * double on both sides, within 1e-12 relative. Like the other parity tests it FAILS, never
 * skips, without /usr/bin/python3 and torch.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/loss.h"
#include "nn/optim.h"
#include "nn/schedule.h"
#include "parity_oracle.h"

#define TOLERANCE    1e-5
#define FLOOR        1e-2
#define LR_TOLERANCE 1e-12

static char outdir[] = "/tmp/dtrain-parity-recipe-XXXXXX";
static FILE *in;

static int generate_reference(void **state)
{
    (void)state;
    return parity_oracle_generate(outdir, "tests/parity/gen_recipe.py");
}

static int remove_reference(void **state)
{
    (void)state;
    return parity_oracle_remove(outdir);
}

static void open_ref(const char *name)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", outdir, name);
    in = fopen(path, "r");
    assert_non_null(in);
}

static double next(void)
{
    double v;
    assert_int_equal(fscanf(in, "%lf", &v), 1);
    return v;
}

static float *next_floats(size_t n)
{
    float *v = malloc(n * sizeof *v);
    assert_non_null(v);
    for (size_t i = 0; i < n; i++)
        v[i] = (float)next();
    return v;
}

static double scaled_error(double got, double want)
{
    return fabs(got - want) / fmax(fabs(want), FLOOR);
}

static double worst_error(const float *got, const float *want, size_t n)
{
    double worst = 0;
    for (size_t i = 0; i < n; i++)
        worst = fmax(worst, scaled_error(got[i], want[i]));
    return worst;
}

static void check_rates(const struct dt_schedule *s, long total)
{
    assert_int_equal(dt_schedule_validate(s), 0);
    for (long k = 0; k < total; k++) {
        double want = next(), got = dt_schedule_lr(s, k, 0, total);
        if (!(fabs(got - want) <= LR_TOLERANCE * want))
            fail_msg("step %ld: lr %.17g, torch %.17g", k, got, want);
    }
}

static void test_one_cycle(void **state)
{
    (void)state;
    open_ref("lr_one_cycle.txt");
    long total = (long)next();
    struct dt_schedule s = {.type = DT_SCHEDULE_ONE_CYCLE};
    s.lr = next();
    s.pct_start = next();
    s.div_factor = next();
    s.final_div_factor = next();
    check_rates(&s, total);
    fclose(in);
}

static void test_warmup_cosine(void **state)
{
    (void)state;
    open_ref("lr_warmup_cosine.txt");
    long total = (long)next();
    struct dt_schedule s = {.type = DT_SCHEDULE_COSINE};
    s.lr = next();
    s.warmup_steps = (long)next();
    s.min_lr = next();
    check_rates(&s, total);
    fclose(in);
}

static void test_label_smoothing(void **state)
{
    (void)state;
    open_ref("label_smoothing.txt");
    int batch = (int)next(), classes = (int)next();
    float eps = (float)next();
    float *logits = next_floats((size_t)batch * classes);
    uint8_t labels[64];
    assert_true(batch <= 64);
    for (int b = 0; b < batch; b++)
        labels[b] = (uint8_t)next();
    double want_loss = next();
    float *want_grad = next_floats((size_t)batch * classes);
    float *grad = malloc((size_t)batch * classes * sizeof *grad);
    assert_non_null(grad);
    double loss = dt_loss_sum(DT_LOSS_CROSS_ENTROPY, eps, logits, classes, labels, batch, NULL);
    assert_true(scaled_error(loss / batch, want_loss) <= TOLERANCE);
    assert_int_equal(dt_loss_grad(DT_LOSS_CROSS_ENTROPY, eps, logits, classes, labels, batch,
                                  1.0f / (float)batch, grad),
                     0);
    double err = worst_error(grad, want_grad, (size_t)batch * classes);
    printf("label smoothing: loss %.9g (torch %.9g), gradient max scaled error %.3g\n",
           loss / batch, want_loss, err);
    assert_true(err <= TOLERANCE);
    /* eps = 0 is the plain loss: the smoothing must not leak into it. */
    double plain = dt_loss_sum(DT_LOSS_CROSS_ENTROPY, 0.0f, logits, classes, labels, batch, NULL);
    assert_true(fabs(plain - loss) > 1e-3);
    free(logits);
    free(want_grad);
    free(grad);
    fclose(in);
}

static void test_clip_grad_norm(void **state)
{
    (void)state;
    open_ref("clip.txt");
    for (int c = 0; c < 2; c++) {
        size_t n = (size_t)next();
        double max_norm = next();
        float *grads = next_floats(n);
        double want_norm = next();
        float *want = next_floats(n);
        double norm = dt_clip_grad_norm(grads, n, max_norm);
        assert_true(scaled_error(norm, want_norm) <= TOLERANCE);
        double err = worst_error(grads, want, n);
        printf("clip case %d: norm %.9g (torch %.9g, max %g), max scaled error %.3g\n", c, norm,
               want_norm, max_norm, err);
        assert_true(err <= TOLERANCE);
        free(grads);
        free(want);
    }
    fclose(in);
}

/* Runs `steps` updates of the arena [weight, bias] with the bias out of decay; `cut` > 0
 * replaces every full step by two dt_optim_step_range slices meeting at `cut`. */
static float *run_wd_skip(const struct dt_optim_config *cfg, const float *init, const float *grads,
                          size_t nw, size_t nb, int steps, size_t cut)
{
    size_t n = nw + nb;
    float *p = malloc(n * sizeof *p);
    assert_non_null(p);
    memcpy(p, init, n * sizeof *p);
    struct dt_optim *o;
    assert_int_equal(dt_optim_create(&o, cfg, n), 0);
    assert_int_equal(dt_optim_skip_decay(o, nw, n), 0);
    for (int k = 0; k < steps; k++) {
        const float *g = grads + (size_t)k * n;
        if (cut == 0) {
            assert_int_equal(dt_optim_step(o, p, g, n, cfg->lr), 0);
        } else {
            assert_int_equal(dt_optim_step_range(o, p, g, 0, cut, cfg->lr), 0);
            dt_optim_set_steps(o, dt_optim_steps(o) - 1); /* both halves are one step */
            assert_int_equal(dt_optim_step_range(o, p, g, cut, n, cfg->lr), 0);
        }
    }
    dt_optim_free(o);
    return p;
}

static void check_weight_decay_skip(const char *file, enum dt_optim_type type)
{
    open_ref(file);
    size_t nw = (size_t)next(), nb = (size_t)next(), n = nw + nb;
    struct dt_optim_config cfg;
    dt_optim_config_defaults(&cfg, type);
    cfg.lr = next();
    double momentum = next();
    cfg.weight_decay = next();
    if (type == DT_OPTIM_SGD) {
        cfg.momentum = momentum;
        cfg.nesterov = true;
    }
    int steps = (int)next();
    float *init = next_floats(n), *grads = next_floats(n * (size_t)steps);
    float *want = next_floats(n);
    float *p = run_wd_skip(&cfg, init, grads, nw, nb, steps, 0);
    double err = worst_error(p, want, n);
    printf("%s, bias without decay: max scaled error %.3g\n", dt_optim_type_name(type), err);
    assert_true(err <= TOLERANCE);
    /* Slices cut inside the weights and inside the biases give the same bits. */
    size_t cuts[] = {nw / 2, nw, nw + nb / 3};
    for (size_t c = 0; c < sizeof cuts / sizeof cuts[0]; c++) {
        float *q = run_wd_skip(&cfg, init, grads, nw, nb, steps, cuts[c]);
        assert_memory_equal(p, q, n * sizeof *p);
        free(q);
    }
    /* Decaying the bias too must differ: the reference really tests the skip. */
    struct dt_optim *o;
    float *all = malloc(n * sizeof *all);
    assert_non_null(all);
    memcpy(all, init, n * sizeof *all);
    assert_int_equal(dt_optim_create(&o, &cfg, n), 0);
    for (int k = 0; k < steps; k++)
        assert_int_equal(dt_optim_step(o, all, grads + (size_t)k * n, n, cfg.lr), 0);
    assert_true(worst_error(all + nw, want + nw, nb) > 1e-4);
    dt_optim_free(o);
    free(all);
    free(p);
    free(init);
    free(grads);
    free(want);
    fclose(in);
}

static void test_weight_decay_skip(void **state)
{
    (void)state;
    check_weight_decay_skip("wd_skip.txt", DT_OPTIM_SGD);
    check_weight_decay_skip("wd_skip_adamw.txt", DT_OPTIM_ADAMW);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_cycle),         cmocka_unit_test(test_warmup_cosine),
        cmocka_unit_test(test_label_smoothing),   cmocka_unit_test(test_clip_grad_norm),
        cmocka_unit_test(test_weight_decay_skip),
    };
    return cmocka_run_group_tests(tests, generate_reference, remove_reference);
}
