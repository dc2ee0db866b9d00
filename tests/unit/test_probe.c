/* train/probe.c: the shape probe of `--instances auto` runs the run's own ranks on the data the
 * parent already loaded (the data directory is gone before it starts), forks even a one-rank
 * shape (the parent is left without threads, at 2 x 2 too), picks its timed steps by time
 * within [min_steps, max_steps], runs before data.mean/std = "auto" are resolved, and reports a
 * shape that cannot run in its row. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "fixtures.h"
#include "train/config.h"
#include "train/plan.h"
#include "train/probe.h"
#include "train/setup.h"
#include "dist/launcher.h"
#include "util/err.h"

/* A small model: a probe step takes milliseconds. */
static const char *const config_text =
    "data = { dataset = \"fashion-mnist\"; mean = [0.5]; std = [0.25]; };\n"
    "model = { layers = (\n"
    "  { type = \"conv2d\"; out_channels = 4; kernel = 3; }, { type = \"relu\"; },\n"
    "  { type = \"flatten\"; }, { type = \"linear\"; out_features = 10; },\n"
    "  { type = \"log_softmax\"; } ); };\n"
    "loss = { type = \"nll\"; };\n"
    "optimizer = { type = \"sgd\"; lr = 0.01; };\n"
    "train = { epochs = 1; batch_size = 16; seed = 1L; };\n";

struct fixture {
    struct dt_config cfg;
    struct dt_data data;
    struct dt_job_opts job;
};

/* Loads the config and an IDX data set, then removes the data directory: whatever the probe
 * does, it can only use what is in memory. */
static int setup(void **state)
{
    static struct fixture f;
    memset(&f, 0, sizeof f);
    char dir[256], set[300];
    fx_mkdtemp(dir, sizeof dir);
    fx_idx_dir(dir, 128, 16, 10);
    snprintf(set, sizeof set, "data.dir=%s", dir);
    const char *sets[] = {set, "checkpoint.dir=/nonexistent/probe-test"};
    if (dt_config_load_string(&f.cfg, "t.cfg", config_text, sets, 2) ||
        dt_run_load_data(&f.cfg, &f.data))
        fx_die(dt_last_error());
    fx_rmtree(dir);
    dt_job_opts_init(&f.job);
    *state = &f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    dt_data_free(&f->data);
    dt_config_free(&f->cfg);
    return 0;
}

static void set_shapes(struct dt_probe_row *rows, const int (*shapes)[2], int n)
{
    memset(rows, 0, (size_t)n * sizeof *rows);
    for (int i = 0; i < n; i++)
        rows[i].instances = shapes[i][0], rows[i].threads = shapes[i][1];
}

/* 1 x 1 (forked, though it is one rank), 2 x 1, 1 x 2 and 2 x 2 all measure, from data that
 * is no longer on disk, and leave this process without a thread: it could fork the run's
 * ranks next. */
static void test_probe_shapes_on_loaded_data(void **state)
{
    struct fixture *f = *state;
    const int shapes[][2] = {{1, 1}, {2, 1}, {1, 2}, {2, 2}};
    struct dt_probe_row rows[4];
    set_shapes(rows, shapes, 4);
    const struct dt_probe_opts o = {.warmup = 2, .seconds = 0.02, .min_steps = 3, .max_steps = 50};
    int done = -1;
    assert_int_equal(dt_probe_shapes(&f->cfg, &f->job, &f->data, &o, rows, 4, &done), 0);
    assert_int_equal(done, 4);
    for (int i = 0; i < 4; i++) {
        assert_true(rows[i].ok);
        assert_string_equal(rows[i].error, "");
        assert_true(rows[i].samples_s > 0);
        assert_true(rows[i].step_s > 0);
        assert_in_range(rows[i].steps, 3, 50);
        /* every timed step is one whole global batch (128 samples: 8 steps an epoch) */
        assert_float_equal(rows[i].samples_s * rows[i].step_s, 16.0, 1e-6);
    }
    assert_int_equal(dt_launch_check_no_threads(), 0);
}

/* The timed steps follow the time asked for, within the bounds: a vanishing budget gives
 * min_steps, a huge one max_steps. */
static void test_probe_steps_by_time(void **state)
{
    struct fixture *f = *state;
    const int shapes[][2] = {{1, 1}};
    struct dt_probe_row row;
    int done = 0;
    set_shapes(&row, shapes, 1);
    struct dt_probe_opts o = {.warmup = 1, .seconds = 1e-9, .min_steps = 2, .max_steps = 40};
    assert_int_equal(dt_probe_shapes(&f->cfg, &f->job, &f->data, &o, &row, 1, &done), 0);
    assert_true(row.ok);
    assert_int_equal(row.steps, 2);
    set_shapes(&row, shapes, 1);
    o.seconds = 1e6;
    o.max_steps = 11; /* more than an epoch: the probe goes on into the next */
    assert_int_equal(dt_probe_shapes(&f->cfg, &f->job, &f->data, &o, &row, 1, &done), 0);
    assert_true(row.ok);
    assert_int_equal(row.steps, 11);
}

/* data.mean/std = "auto" are resolved by the run after the probe: the probe runs without them
 * (the batcher's table does not change the speed). */
static void test_probe_with_auto_stats(void **state)
{
    struct fixture *f = *state;
    struct dt_config c = f->cfg; /* shallow: only read */
    c.data.nmean = c.data.nstd = DT_CONFIG_AUTO;
    const int shapes[][2] = {{2, 1}};
    struct dt_probe_row row;
    set_shapes(&row, shapes, 1);
    const struct dt_probe_opts o = {.warmup = 1, .seconds = 0.01, .min_steps = 2, .max_steps = 5};
    int done = 0;
    assert_int_equal(dt_probe_shapes(&c, &f->job, &f->data, &o, &row, 1, &done), 0);
    if (!row.ok)
        fail_msg("%s", row.error);
}

/* A shape that cannot run is its row's error (the rank's own message), and the probe goes on
 * to the next shape. Here the batcher, which only a rank sets up, refuses the crop padding at
 * 1 x 1; a pin list naming a CPU that is not there fails the parent's set-up of 2 x 1. */
static void test_probe_failed_shape_is_a_row(void **state)
{
    struct fixture *f = *state;
    struct dt_config bad = f->cfg; /* shallow: only read */
    bad.data.crop_padding = 28;
    const int shapes[][2] = {{1, 1}, {2, 1}};
    struct dt_probe_row rows[2];
    set_shapes(rows, shapes, 2);
    const struct dt_probe_opts o = {.warmup = 1, .seconds = 0.01, .min_steps = 2, .max_steps = 5};
    int done = 0;
    assert_int_equal(dt_probe_shapes(&bad, &f->job, &f->data, &o, rows, 2, &done), 0);
    assert_int_equal(done, 2);
    for (int i = 0; i < 2; i++) {
        assert_false(rows[i].ok);
        /* whichever rank failed first: at 2 x 1 both do */
        if (strncmp(rows[i].error, "rank ", 5) ||
            !strstr(rows[i].error, ": t.cfg: data: data.crop_padding: 28 must be"))
            fail_msg("row %d: %s", i, rows[i].error);
    }
    struct dt_config unpinnable = f->cfg;
    snprintf(unpinnable.dist.cpu_list, sizeof unpinnable.dist.cpu_list, "4095");
    set_shapes(rows, shapes, 2);
    assert_int_equal(dt_probe_shapes(&unpinnable, &f->job, &f->data, &o, rows, 2, &done), 0);
    assert_false(rows[0].ok);
    assert_non_null(strstr(rows[0].error, "pin list: CPU 4095 is not usable"));
    assert_int_equal(dt_launch_check_no_threads(), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_probe_shapes_on_loaded_data),
        cmocka_unit_test(test_probe_steps_by_time),
        cmocka_unit_test(test_probe_with_auto_stats),
        cmocka_unit_test(test_probe_failed_shape_is_a_row),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
