/* nn/optim.c against torch.optim (PyTorch 1.13): tests/parity/gen_optim.py writes initial
 * parameters, a sequence of gradients and torch's parameters after 12 steps for each optimizer
 * and option combination; the C optimizer replays the same gradients and must land within
 * TOLERANCE of torch elementwise.
 *
 * Tolerance: |c - t| <= 1e-5 * max(|t|, 1e-2). ATen fuses some multiply-adds (AVX2 fmadd) where
 * dtrain rounds twice, so a few float ulps per step are expected, never more; the floor keeps
 * parameters that pass near zero from turning an absolute 1e-9 difference into a large ratio.
 * The reference needs /usr/bin/python3 with torch and numpy: without them the test FAILS (CI
 * installs them), it is never skipped.
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
#include <unistd.h>

#include "nn/optim.h"
#include "parity_oracle.h"
#include "util/err.h"

#define TOLERANCE 1e-5
#define FLOOR     1e-2
#define MAX_CASES 32

struct parity_case {
    char name[64], type[16];
    size_t n;
    int steps;
    double lr, lr_decay;
    struct dt_optim_config cfg;
};

static char outdir[] = "/tmp/dtrain-parity-optim-XXXXXX";
static struct parity_case cases[MAX_CASES];
static int ncases;

static int parse_manifest(void)
{
    char path[256];
    snprintf(path, sizeof path, "%s/manifest.txt", outdir);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    int nesterov, amsgrad;
    struct parity_case c;
    memset(&c, 0, sizeof c);
    while (ncases < MAX_CASES &&
           fscanf(f, "%63s %15s %zu %d %lf %lf %lf %lf %d %lf %lf %lf %d %lf %lf", c.name, c.type,
                  &c.n, &c.steps, &c.lr, &c.lr_decay, &c.cfg.momentum, &c.cfg.dampening, &nesterov,
                  &c.cfg.weight_decay, &c.cfg.beta1, &c.cfg.beta2, &amsgrad, &c.cfg.eps,
                  &c.cfg.rho) == 15) {
        c.cfg.nesterov = nesterov;
        c.cfg.amsgrad = amsgrad;
        c.cfg.lr = c.lr;
        if (dt_optim_type_parse(c.type, &c.cfg.type) != 0)
            break;
        cases[ncases++] = c;
    }
    fclose(f);
    return ncases > 0 ? 0 : -1;
}

static int generate_reference(void **state)
{
    (void)state;
    if (parity_oracle_generate(outdir, "tests/parity/gen_optim.py") != 0)
        return -1;
    if (parse_manifest() != 0) {
        fprintf(stderr, "FAIL: %s/manifest.txt: no optimizer case could be read\n", outdir);
        return -1;
    }
    return 0;
}

static int remove_reference(void **state)
{
    (void)state;
    return parity_oracle_remove(outdir);
}

static float *read_floats(const char *name, const char *ext, size_t count)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s.%s", outdir, name, ext);
    float *buf = malloc(count * sizeof *buf);
    FILE *f = fopen(path, "rb");
    assert_non_null(buf);
    assert_non_null(f);
    assert_int_equal(fread(buf, sizeof *buf, count, f), count);
    fclose(f);
    return buf;
}

/* Replays one case and returns the largest scaled error. */
static double run_case(const struct parity_case *c)
{
    float *params = read_floats(c->name, "init", c->n);
    float *grads = read_floats(c->name, "grads", c->n * (size_t)c->steps);
    float *want = read_floats(c->name, "final", c->n);
    struct dt_optim *o;
    assert_int_equal(dt_optim_create(&o, &c->cfg, c->n), 0);
    for (int k = 0; k < c->steps; k++) {
        double lr = c->lr * pow(c->lr_decay, k);
        assert_int_equal(dt_optim_step(o, params, grads + (size_t)k * c->n, c->n, lr), 0);
    }
    double worst = 0;
    for (size_t i = 0; i < c->n; i++) {
        double err = fabs((double)params[i] - want[i]) / fmax(fabs(want[i]), FLOOR);
        worst = err > worst ? err : worst;
    }
    dt_optim_free(o);
    free(params);
    free(grads);
    free(want);
    return worst;
}

static void test_matches_torch(void **state)
{
    (void)state;
    assert_true(ncases >= 15);
    int bad = 0;
    for (int i = 0; i < ncases; i++) {
        double err = run_case(&cases[i]);
        printf("%-18s %-9s max scaled error %.3g\n", cases[i].name, cases[i].type, err);
        bad += !(err <= TOLERANCE);
    }
    assert_int_equal(bad, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matches_torch),
    };
    return cmocka_run_group_tests(tests, generate_reference, remove_reference);
}
