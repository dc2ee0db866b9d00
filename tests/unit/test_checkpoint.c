/* nn/checkpoint.c: a save/load round trip restores weights, buffers, optimizer state and
 * metadata bit for bit; every truncation and every corrupted header byte is refused with
 * DT_EDATA (or, where the byte only changes a metadata string, loads the same weights), and a
 * refused file never leaves half-applied weights behind. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nn/checkpoint.h"
#include "nn/model.h"
#include "nn/optim.h"
#include "nn_specs.h"
#include "util/err.h"
#include "util/fileio.h"

struct fixture {
    struct dt_model *model;
    struct dt_optim *optim;
    char dir[64], path[128], bad[128];
    char *bytes; /* the saved file */
    size_t len;
};

static struct dt_model *small_model(uint64_t seed)
{
    struct dt_layer_spec s[5] = {conv_spec(3, 3, 1, 1), spec_of("batchnorm2d"), spec_of("relu"),
                                 spec_of("flatten"), linear_spec(4)};
    struct dt_model *m = NULL;
    struct dt_shape in = {2, 5, 5};
    assert_int_equal(dt_model_build(&m, s, 5, in, 2, DT_LOSS_CROSS_ENTROPY, seed), 0);
    return m;
}

static struct dt_optim *adam_for(const struct dt_model *m)
{
    struct dt_optim_config oc;
    dt_optim_config_defaults(&oc, DT_OPTIM_ADAM);
    struct dt_optim *o = NULL;
    assert_int_equal(dt_optim_create(&o, &oc, m->nparams), 0);
    return o;
}

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    snprintf(f->dir, sizeof f->dir, "/tmp/dtrain-ckpt-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->path, sizeof f->path, "%s/a.safetensors", f->dir);
    snprintf(f->bad, sizeof f->bad, "%s/bad.safetensors", f->dir);
    f->model = small_model(7);
    f->optim = adam_for(f->model);
    /* Two steps with made-up gradients: the optimizer state is not zero. */
    for (int s = 0; s < 2; s++) {
        for (size_t i = 0; i < f->model->nparams; i++)
            f->model->grads[i] = 0.01f * (float)((int)(i % 7) - 3 + s);
        assert_int_equal(
            dt_optim_step(f->optim, f->model->params, f->model->grads, f->model->nparams, 1e-3), 0);
    }
    for (size_t i = 0; i < f->model->nbuffers; i++)
        f->model->buffers[i] = 1.0f + (float)i; /* integers: num_batches_tracked is int64 */
    struct dt_checkpoint_meta meta = {0};
    assert_int_equal(dt_checkpoint_meta_set(&meta, "step", "42"), 0);
    assert_int_equal(dt_checkpoint_meta_set(&meta, "config", "train = { epochs = 3; };"), 0);
    assert_int_equal(dt_checkpoint_save(f->path, f->model, f->optim, &meta), 0);
    dt_checkpoint_meta_free(&meta);
    assert_int_equal(dt_read_file(f->path, &f->bytes, &f->len), 0);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    unlink(f->path);
    unlink(f->bad);
    rmdir(f->dir);
    free(f->bytes);
    dt_optim_free(f->optim);
    dt_model_free(f->model);
    free(f);
    return 0;
}

static void write_bad(const struct fixture *f, const void *bytes, size_t len)
{
    FILE *out = fopen(f->bad, "wb");
    assert_non_null(out);
    assert_int_equal(fwrite(bytes, 1, len, out), len);
    fclose(out);
}

static bool same_floats(const float *a, const float *b, size_t n)
{
    return n == 0 || memcmp(a, b, n * sizeof *a) == 0;
}

static void test_round_trip(void **state)
{
    struct fixture *f = *state;
    struct dt_model *m = small_model(99); /* other weights until loaded */
    struct dt_optim *o = adam_for(m);
    struct dt_checkpoint_meta meta = {0};
    assert_false(same_floats(m->params, f->model->params, m->nparams));
    assert_int_equal(dt_checkpoint_load(f->path, m, o, &meta), 0);
    assert_true(same_floats(m->params, f->model->params, m->nparams));
    assert_true(same_floats(m->buffers, f->model->buffers, m->nbuffers));
    assert_int_equal(dt_optim_steps(o), dt_optim_steps(f->optim));
    struct dt_optim_state a[DT_OPTIM_MAX_STATES], b[DT_OPTIM_MAX_STATES];
    int na = dt_optim_states(o, a), nb = dt_optim_states(f->optim, b);
    assert_int_equal(na, nb);
    for (int i = 0; i < na; i++)
        assert_true(same_floats(a[i].data, b[i].data, m->nparams));
    assert_string_equal(dt_checkpoint_meta_get(&meta, "step"), "42");
    assert_string_equal(dt_checkpoint_meta_get(&meta, "config"), "train = { epochs = 3; };");
    dt_checkpoint_meta_free(&meta);
    dt_optim_free(o);
    dt_model_free(m);
}

/* Every prefix of the file, from 0 bytes to one short of whole, is refused and leaves the
 * model's weights as they were. */
static void test_every_truncation_refused(void **state)
{
    struct fixture *f = *state;
    struct dt_model *m = small_model(99);
    float *before = malloc(m->nparams * sizeof *before);
    memcpy(before, m->params, m->nparams * sizeof *before);
    for (size_t len = 0; len < f->len; len++) {
        write_bad(f, f->bytes, len);
        struct dt_checkpoint_meta meta = {0};
        int rc = dt_checkpoint_load(f->bad, m, NULL, &meta);
        dt_checkpoint_meta_free(&meta);
        if (rc != -DT_EDATA)
            fail_msg("a %zu-byte prefix of %zu: rc %d (%s)", len, f->len, rc, dt_last_error());
        assert_non_null(strstr(dt_last_error(), f->bad));
        assert_true(same_floats(m->params, before, m->nparams));
    }
    free(before);
    dt_model_free(m);
}

/* Each byte of the length field and of the JSON header replaced in turn: the load either
 * fails with DT_EDATA and touches nothing, or (a byte inside a metadata string) succeeds with
 * exactly the saved weights. Never another error code, never other weights. */
static void test_every_header_byte_corrupted(void **state)
{
    struct fixture *f = *state;
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--)
        hlen = hlen << 8 | (uint8_t)f->bytes[i];
    assert_true(8 + hlen <= f->len);
    char *copy = malloc(f->len);
    struct dt_model *m = small_model(99);
    float *before = malloc(m->nparams * sizeof *before);
    memcpy(before, m->params, m->nparams * sizeof *before);
    int refused = 0, accepted = 0;
    const char replacements[] = {'\x01', '9', '"'};
    for (size_t at = 0; at < 8 + hlen; at++) {
        for (size_t r = 0; r < sizeof replacements; r++) {
            if (f->bytes[at] == replacements[r])
                continue;
            memcpy(copy, f->bytes, f->len);
            copy[at] = replacements[r];
            write_bad(f, copy, f->len);
            memcpy(m->params, before, m->nparams * sizeof *before);
            struct dt_checkpoint_meta meta = {0};
            int rc = dt_checkpoint_load(f->bad, m, NULL, &meta);
            dt_checkpoint_meta_free(&meta);
            if (rc == 0) {
                accepted++;
                if (!same_floats(m->params, f->model->params, m->nparams))
                    fail_msg("byte %zu -> 0x%02x loaded other weights", at,
                             (unsigned)(uint8_t)replacements[r]);
            } else {
                refused++;
                if (rc != -DT_EDATA)
                    fail_msg("byte %zu -> 0x%02x: rc %d (%s)", at,
                             (unsigned)(uint8_t)replacements[r], rc, dt_last_error());
                assert_true(same_floats(m->params, before, m->nparams));
            }
        }
    }
    assert_true(refused > 0);
    assert_true(accepted > 0); /* the metadata strings are free text */
    free(before);
    free(copy);
    dt_model_free(m);
}

/* Named fields, each with the message a user would see. */
static void test_field_corruptions_named(void **state)
{
    struct fixture *f = *state;
    static const struct {
        const char *from, *to, *message;
    } cases[] = {
        {"\"dtype\":\"F32\"", "\"dtype\":\"F16\"", "dtype"},
        {"\"dtype\":\"F32\"", "\"dtypo\":\"F32\"", "dtype"},
        {"\"shape\":[", "\"shape\":[7,", "shape"},
        {"\"data_offsets\":[0,", "\"data_offsets\":[4,", ""},
        {"layers.0.weight", "layers.9.weight", "layers.9.weight"},
        {"\"__metadata__\":{", "\"__metadata__\":{\"n\":1,", "__metadata__"},
    };
    struct dt_model *m = small_model(99);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        char *hit = memmem(f->bytes, f->len, cases[c].from, strlen(cases[c].from));
        if (!hit)
            fail_msg("fixture has no %s", cases[c].from);
        /* Same length keeps the data where it was; else shift it and fix the length field. */
        size_t from = strlen(cases[c].from), to = strlen(cases[c].to);
        size_t at = (size_t)(hit - f->bytes), len = f->len - from + to;
        char *copy = malloc(len);
        memcpy(copy, f->bytes, at);
        memcpy(copy + at, cases[c].to, to);
        memcpy(copy + at + to, hit + from, f->len - at - from);
        uint64_t hlen = 0;
        for (int i = 7; i >= 0; i--)
            hlen = hlen << 8 | (uint8_t)f->bytes[i];
        hlen = hlen - from + to;
        for (int i = 0; i < 8; i++)
            copy[i] = (char)(hlen >> (8 * i));
        write_bad(f, copy, len);
        free(copy);
        struct dt_checkpoint_meta meta = {0};
        int rc = dt_checkpoint_load(f->bad, m, NULL, &meta);
        dt_checkpoint_meta_free(&meta);
        if (rc != -DT_EDATA || !strstr(dt_last_error(), cases[c].message))
            fail_msg("%s -> %s: rc %d (%s)", cases[c].from, cases[c].to, rc, dt_last_error());
    }
    dt_model_free(m);
}

static void test_trailing_bytes_and_missing_file(void **state)
{
    struct fixture *f = *state;
    char *longer = malloc(f->len + 3);
    memcpy(longer, f->bytes, f->len);
    memcpy(longer + f->len, "xyz", 3);
    write_bad(f, longer, f->len + 3);
    free(longer);
    struct dt_model *m = small_model(99);
    struct dt_checkpoint_meta meta = {0};
    assert_int_equal(dt_checkpoint_load(f->bad, m, NULL, &meta), -DT_EDATA);
    assert_non_null(strstr(dt_last_error(), "3 bytes after the last tensor"));
    dt_checkpoint_meta_free(&meta);
    char missing[160];
    snprintf(missing, sizeof missing, "%s/none.safetensors", f->dir);
    assert_int_equal(dt_checkpoint_load(missing, m, NULL, &meta), -DT_EDATA);
    assert_non_null(strstr(dt_last_error(), missing));
    dt_checkpoint_meta_free(&meta);
    dt_model_free(m);
}

/* Not regular files, and a huge file behind a small valid header: refused from the header
 * alone, without blocking on the FIFO or reading the gigabytes. */
static void test_fifo_directory_and_huge_file(void **state)
{
    struct fixture *f = *state;
    struct dt_model *m = small_model(99);
    struct dt_checkpoint_meta meta = {0};
    char fifo[160];
    snprintf(fifo, sizeof fifo, "%s/fifo.safetensors", f->dir);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    assert_int_equal(dt_checkpoint_load(fifo, m, NULL, &meta), -DT_EDATA);
    assert_non_null(strstr(dt_last_error(), "not a regular file"));
    unlink(fifo);
    assert_int_equal(dt_checkpoint_load(f->dir, m, NULL, &meta), -DT_EDATA);
    write_bad(f, f->bytes, f->len);
    assert_int_equal(truncate(f->bad, (off_t)8 << 30), 0); /* sparse: no disk used */
    assert_int_equal(dt_checkpoint_load(f->bad, m, NULL, &meta), -DT_EDATA);
    assert_non_null(strstr(dt_last_error(), "after the last tensor belong to no tensor"));
    dt_checkpoint_meta_free(&meta);
    dt_model_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_every_truncation_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_every_header_byte_corrupted, setup, teardown),
        cmocka_unit_test_setup_teardown(test_field_corruptions_named, setup, teardown),
        cmocka_unit_test_setup_teardown(test_trailing_bytes_and_missing_file, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fifo_directory_and_huge_file, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
