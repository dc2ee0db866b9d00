/* train/config: loading, defaults and derived values, every class of error (code, file:line and
 * key in the message), --set overrides, and the effective text reloading into an identical
 * struct. Configs are written inline; the shipped configs/ are loaded from the repository. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nn/layer_spec.h"
#include "config_text.h"
#include "train/config.h"
#include "train/setup.h"
#include "util/err.h"

static const char convnet[] =
    "# the book's ConvNet\n"                                         /* 1 */
    "data = {\n"                                                     /* 2 */
    "  dataset = \"fashion-mnist\";\n"                               /* 3 */
    "  mean = [ 0.1302 ];\n"                                         /* 4 */
    "  std = [ 0.3069 ];\n"                                          /* 5 */
    "};\n"                                                           /* 6 */
    "model = {\n"                                                    /* 7 */
    "  layers = (\n"                                                 /* 8 */
    "    { type = \"conv2d\"; out_channels = 16; kernel = 3; },\n"   /* 9 */
    "    { type = \"relu\"; },\n"                                    /* 10 */
    "    { type = \"maxpool2d\"; kernel = 2; },\n"                   /* 11 */
    "    { type = \"dropout2d\"; p = 0.1; },\n"                      /* 12 */
    "    { type = \"flatten\"; },\n"                                 /* 13 */
    "    { type = \"linear\"; out_features = 10; bias = false; },\n" /* 14 */
    "    { type = \"log_softmax\"; }\n"                              /* 15 */
    "  );\n"                                                         /* 16 */
    "};\n"                                                           /* 17 */
    "loss = { type = \"nll\"; };\n"                                  /* 18 */
    "optimizer = { type = \"adadelta\"; lr = 1; rho = 0.9; };\n"     /* 19 */
    "train = {\n"                                                    /* 20 */
    "  epochs = 2;\n"                                                /* 21 */
    "  batch_size = 128;\n"                                          /* 22 */
    "  seed = 5000000000L;\n"                                        /* 23 */
    "};\n";                                                          /* 24 */

static void expect_edit_error(const char *from, const char *to, const char *message)
{
    char *text = config_edit_text(convnet, from, to);
    config_expect_usage_error(text, NULL, 0, message);
    free(text);
}

static void test_good_config_loads_values_defaults_and_derived(void **state)
{
    (void)state;
    unsetenv("DTRAIN_DATA");
    struct dt_config cfg;
    assert_int_equal(config_load_text(&cfg, convnet, NULL, 0), 0);
    assert_string_equal(cfg.path, "t.cfg");
    assert_string_equal(cfg.data.dataset, "fashion-mnist");
    assert_int_equal(cfg.data.format, DT_DATA_IDX);
    assert_string_equal(cfg.data.dir, "data/fashion-mnist");
    assert_int_equal(cfg.data.nmean, 1);
    assert_true(cfg.data.mean[0] == 0.1302f && cfg.data.std[0] == 0.3069f);
    assert_int_equal(cfg.model.nlayers, 7);
    const struct dt_layer_spec *conv = &cfg.model.layers[0], *lin = &cfg.model.layers[5];
    assert_string_equal(conv->type, "conv2d");
    assert_int_equal(conv->out_channels, 16);
    assert_int_equal(conv->kernel, 3);
    assert_int_equal(conv->stride, 0); /* the kind's default */
    assert_true(conv->bias);
    assert_int_equal(conv->line, 9);
    assert_true(cfg.model.layers[3].p == 0.1f);
    assert_int_equal(lin->out_features, 10);
    assert_false(lin->bias);
    assert_int_equal(cfg.loss.type, DT_LOSS_NLL);
    assert_int_equal(cfg.optimizer.type, DT_OPTIM_ADADELTA);
    assert_true(cfg.optimizer.lr == 1.0f);   /* an integer is fine for a float key */
    assert_true(cfg.optimizer.eps == 1e-6f); /* adadelta's own default */
    assert_int_equal(cfg.train.epochs, 2);
    assert_int_equal(cfg.train.batch_size, 128);
    assert_true(cfg.train.seed == 5000000000LL);
    assert_false(cfg.train.batch_per_instance);
    assert_int_equal(cfg.dist.instances, 1);
    assert_int_equal(cfg.dist.backend, DT_BACKEND_REQUEST_AUTO);
    assert_true(cfg.dist.timeout == 300.0);
    assert_string_equal(cfg.checkpoint.dir, "runs/t");
    assert_int_equal(cfg.log.every, 100);
    assert_non_null(cfg.text);
    dt_config_free(&cfg);
    assert_null(cfg.text);

    setenv("DTRAIN_DATA", "/srv/datasets", 1);
    assert_int_equal(config_load_text(&cfg, convnet, NULL, 0), 0);
    assert_string_equal(cfg.data.dir, "/srv/datasets/fashion-mnist");
    dt_config_free(&cfg);
    unsetenv("DTRAIN_DATA");
}

static void test_optimizer_defaults_follow_the_type(void **state)
{
    (void)state;
    struct dt_config cfg;
    const char *adam[] = {"optimizer.type=adam", "optimizer.lr=0"};
    assert_int_equal(config_load_text(&cfg, convnet, adam, 2), 0);
    assert_true(cfg.optimizer.lr == 1e-3f && cfg.optimizer.eps == 1e-8f);
    assert_true(cfg.optimizer.weight_decay == 0.0f);
    dt_config_free(&cfg);
    /* AdamW's decay is nn/optim's default unless the key is given, even as 0. */
    const char *adamw[] = {"optimizer.type=adamw"};
    assert_int_equal(config_load_text(&cfg, convnet, adamw, 1), 0);
    assert_true(cfg.optimizer.weight_decay == 1e-2f);
    dt_config_free(&cfg);
    const char *adamw0[] = {"optimizer.type=adamw", "optimizer.weight_decay=0"};
    assert_int_equal(config_load_text(&cfg, convnet, adamw0, 2), 0);
    assert_true(cfg.optimizer.weight_decay == 0.0f);
    dt_config_free(&cfg);
}

/* The layer-key defaults --config-reference prints are the ones nn/ applies
 * (dt_layer_spec_defaults): one is documentation, the other behaviour. */
static void test_reference_layer_defaults_match_nn(void **state)
{
    (void)state;
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    dt_config_print_reference(f);
    fclose(f);
    struct dt_layer_spec d;
    dt_layer_spec_defaults(&d);
    char expect_p[32], expect_eps[32], expect_momentum[32];
    snprintf(expect_p, sizeof expect_p, "%g", d.p);
    snprintf(expect_eps, sizeof expect_eps, "%g", d.eps);
    snprintf(expect_momentum, sizeof expect_momentum, "%g", d.momentum);
    char padding[16], algo[32];
    snprintf(padding, sizeof padding, "%d", d.padding);
    snprintf(algo, sizeof algo, "\"%s\"", dt_names_name(&dt_layer_algo_names, (int)d.algo));
    const struct {
        const char *key, *nn_value;
    } rows[] = {
        {"stride", d.stride == 0 ? "unset" : "?"},
        {"padding", padding},
        {"bias", d.bias ? "true" : "false"},
        {"algo", algo},
        {"p", expect_p},
        {"eps", expect_eps},
        {"momentum", expect_momentum},
        {"affine", d.affine ? "true" : "false"},
    };
    const char *layer_table = strstr(text, "| Layer key |");
    assert_non_null(layer_table);
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        char head[64];
        snprintf(head, sizeof head, "| `%s` | ", rows[i].key);
        const char *row = strstr(layer_table, head);
        if (!row)
            fail_msg("no reference row for layer key %s", rows[i].key);
        const char *def = strchr(row + strlen(head), '`'); /* the default column */
        assert_non_null(def);
        const char *end = strchr(def + 1, '`');
        char printed[64];
        snprintf(printed, sizeof printed, "%.*s", (int)(end - def - 1), def + 1);
        /* Floats compare as numbers ("1e-5" and "1e-05"). */
        char *stop;
        double a = strtod(printed, &stop), b = strtod(rows[i].nn_value, NULL);
        bool numeric = *stop == '\0' && stop != printed;
        if (numeric ? (float)a != (float)b : strcmp(printed, rows[i].nn_value) != 0)
            fail_msg("layer key %s: the reference says %s, nn/ applies %s", rows[i].key, printed,
                     rows[i].nn_value);
    }
    free(text);
}

/* Values are checked as they will be used: integers at their full width (libconfig 1.5 alone
 * wraps 32 bits), floats as the 32-bit float stored, doubles kept exactly. */
static void test_values_checked_as_stored(void **state)
{
    (void)state;
    expect_edit_error("epochs = 2;", "epochs = 4294967298;",
                      "t.cfg:21: train.epochs: must be between 1 and 100000, got 4294967298");
    expect_edit_error("batch_size = 128;", "batch_size = 0x100000080;",
                      "t.cfg:22: train.batch_size: must be between 1 and 1048576, got 4294967424");
    expect_edit_error("seed = 5000000000L;", "seed = 0xFFFFFFFFFFFFFFFFL;",
                      "t.cfg:23: train.seed: must be between 0 and 9.2e+18, got "
                      "9223372036854775807 (the 64-bit limit, or beyond)");
    expect_edit_error("std = [ 0.3069 ];", "std = [ 1e-320 ];",
                      "t.cfg:5: data.std: 1e-320 (element 0) is not representable as a 32-bit "
                      "float");
    expect_edit_error("lr = 1;", "lr = 1e-46;",
                      "t.cfg:19: optimizer.lr: 1e-46 is not representable as a 32-bit float");
    const char *wrap[] = {"train.epochs=0x100000002"};
    config_expect_usage_error(convnet, wrap, 1,
                              "--set train.epochs: must be between 1 and 100000, got 4294967298");
    const char *round[] = {"optimizer.beta1=0.99999999999"};
    config_expect_usage_error(convnet, round, 1,
                              "--set optimizer.beta1: 0.99999999999 rounds to 1 as a 32-bit float, "
                              "which is not in [0, 1)");

    const char *exact[] = {"train.max_steps=0x100000000", "train.batch_size=0x80",
                           "optimizer.schedule.div_factor=1e-50",
                           "optimizer.schedule.final_div_factor=123456789.123", "data.std=1.2e-38"};
    struct dt_config cfg;
    assert_int_equal(config_load_text(&cfg, convnet, exact, 5), 0);
    assert_true(cfg.train.max_steps == 4294967296LL);
    assert_int_equal(cfg.train.batch_size, 128);
    assert_true(cfg.train.seed == 5000000000LL);
    assert_true(cfg.optimizer.schedule.div_factor == 1e-50);
    assert_true(cfg.optimizer.schedule.final_div_factor == 123456789.123);
    assert_true(cfg.data.std[0] == 1.2e-38f);
    /* the effective text reloads into the same values */
    struct dt_config again;
    assert_int_equal(config_load_text(&again, cfg.text, NULL, 0), 0);
    assert_true(again.optimizer.schedule.div_factor == 1e-50);
    assert_true(again.train.max_steps == 4294967296LL);
    dt_config_free(&again);
    dt_config_free(&cfg);
}

static void test_shipped_configs_load(void **state)
{
    (void)state;
    const char *files[] = {"configs/mnist-convnet.cfg", "configs/fashion-convnet.cfg",
                           "configs/cifar10-cnn.cfg"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        struct dt_config cfg;
        dt_clear_error();
        if (dt_config_load(&cfg, files[i], NULL, 0))
            fail_msg("%s: %s", files[i], dt_last_error());
        dt_config_free(&cfg);
    }
    struct dt_config cfg;
    assert_int_equal(dt_config_load(&cfg, "configs/cifar10-cnn.cfg", NULL, 0), 0);
    assert_int_equal(cfg.data.format, DT_DATA_CIFAR10);
    assert_int_equal(cfg.loss.type, DT_LOSS_CROSS_ENTROPY);
    assert_true(cfg.train.batch_per_instance);
    assert_int_equal(cfg.model.layers[0].padding, 1);
    assert_int_equal(cfg.model.nlayers, 9);
    assert_string_equal(cfg.checkpoint.dir, "runs/cifar10-cnn");
    assert_int_equal(cfg.data.nmean, 0);
    dt_config_free(&cfg);
}

/* The config file is part of the command line: a missing one is a usage error (exit 2). */
static void test_missing_file_is_a_usage_error(void **state)
{
    (void)state;
    struct dt_config cfg;
    assert_int_equal(dt_config_load(&cfg, "/nonexistent/x.cfg", NULL, 0), -DT_EUSAGE);
    assert_non_null(strstr(dt_last_error(), "/nonexistent/x.cfg"));
}

/* libconfig 1.5 takes time quadratic in the settings of a group (100000 take over a minute):
 * a config with more than DT_CONFIG_MAX_SETTINGS, or more than DT_CONFIG_MAX_BYTES, is refused
 * before libconfig sees it. '=' in comments and strings is not a setting. */
static void test_oversized_config_is_refused_unparsed(void **state)
{
    (void)state;
    const size_t n = 100000;
    size_t cap = strlen(convnet) + n * 16 + 64, len = 0;
    char *text = malloc(cap);
    assert_non_null(text);
    len += (size_t)snprintf(text, cap, "%sextra = {", convnet);
    for (size_t i = 0; i < n; i++)
        len += (size_t)snprintf(text + len, cap - len, " a%zu=1;", i);
    snprintf(text + len, cap - len, " };\n");
    struct dt_config cfg;
    alarm(20); /* parsed, it would take over a minute: fail instead */
    config_expect_usage_error(text, NULL, 0,
                              "t.cfg: 100030 settings, more than the 5000 a config may have");
    alarm(0);

    /* the same count of '=' in a comment and a string is not settings */
    len = (size_t)snprintf(text, cap, "%s# ", convnet);
    memset(text + len, '=', n);
    len += n;
    len += (size_t)snprintf(text + len, cap - len, "\nlog = { every = 3; }; /* = = */ // = =\n");
    assert_int_equal(config_load_text(&cfg, text, NULL, 0), 0);
    assert_int_equal(cfg.log.every, 3);
    dt_config_free(&cfg);

    /* bytes: a comment that makes the text one byte over */
    len = (size_t)snprintf(text, cap, "%s#", convnet);
    char *big = malloc(DT_CONFIG_MAX_BYTES + 2);
    assert_non_null(big);
    memcpy(big, text, len);
    memset(big + len, ' ', DT_CONFIG_MAX_BYTES + 1 - len);
    big[DT_CONFIG_MAX_BYTES + 1] = 0;
    char want[64];
    snprintf(want, sizeof want, "t.cfg: larger than %zu bytes", DT_CONFIG_MAX_BYTES);
    config_expect_usage_error(big, NULL, 0, want);
    big[DT_CONFIG_MAX_BYTES - 1] = '\n'; /* exactly the limit loads */
    big[DT_CONFIG_MAX_BYTES] = 0;
    if (config_load_text(&cfg, big, NULL, 0) != 0)
        fail_msg("%s", dt_last_error());
    dt_config_free(&cfg);
    free(big);
    free(text);
}

/* A config path that is a FIFO is refused at once (its open would block forever). */
static void test_fifo_config_is_refused(void **state)
{
    (void)state;
    char dir[] = "/tmp/dtrain-test-config-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[64];
    snprintf(path, sizeof path, "%s/x.cfg", dir);
    assert_int_equal(mkfifo(path, 0600), 0);
    struct dt_config cfg;
    alarm(10);
    assert_int_equal(dt_config_load(&cfg, path, NULL, 0), -DT_EUSAGE);
    alarm(0);
    assert_non_null(strstr(dt_last_error(), "x.cfg: is a FIFO (named pipe), not a regular file"));

    /* libconfig reads an @include itself: the included file gets the same checks first */
    char *text = malloc(strlen(convnet) + 200);
    assert_non_null(text);
    sprintf(text, "@include \"%s\"\n%s", path, convnet);
    alarm(10);
    assert_int_equal(config_load_text(&cfg, text, NULL, 0), -DT_EDATA);
    alarm(0);
    char want[256];
    snprintf(want, sizeof want, "t.cfg: @include: %s: is a FIFO (named pipe), not a regular file",
             path);
    assert_string_equal(dt_last_error(), want);
    unlink(path);
    FILE *f = fopen(path, "w"); /* and its settings count toward the same total */
    assert_non_null(f);
    fputs("extra = {", f);
    for (int i = 0; i < 6000; i++)
        fprintf(f, " a%d = 1;", i);
    fputs(" };\n", f);
    fclose(f);
    config_expect_usage_error(text, NULL, 0, "t.cfg: 6030 settings, more than the 5000");
    free(text);
    unlink(path);
    rmdir(dir);
}

static void test_file_errors_name_file_line_and_key(void **state)
{
    (void)state;
    /* unknown key, with a suggestion */
    expect_edit_error("batch_size = 128;", "bach_size = 128;",
                      "t.cfg:22: train.bach_size: unknown key (did you mean train.batch_size?)");
    expect_edit_error("# the book's ConvNet", "epochs = 3;",
                      "t.cfg:1: epochs: unknown key (did you mean train.epochs?)");
    expect_edit_error("loss = {", "los = {", "t.cfg:18: los: unknown key");
    /* wrong types */
    expect_edit_error("batch_size = 128;", "batch_size = \"x\";",
                      "t.cfg:22: train.batch_size: expected an integer, got a string");
    expect_edit_error("epochs = 2;", "epochs = 2.0;",
                      "t.cfg:21: train.epochs: expected an integer, got a float");
    expect_edit_error("lr = 1;", "lr = true;", "t.cfg:19: optimizer.lr: expected a number");
    expect_edit_error("dataset = \"fashion-mnist\";", "dataset = 3;",
                      "t.cfg:3: data.dataset: expected a string, got an integer");
    expect_edit_error("train = {\n  epochs", "train = 3;\nx = {\n  epochs",
                      "t.cfg:20: train: expected a group");
    expect_edit_error("mean = [ 0.1302 ];", "mean = \"a\";", "t.cfg:4: data.mean: expected a list");
    /* out of range */
    expect_edit_error("batch_size = 128;", "batch_size = 0;",
                      "t.cfg:22: train.batch_size: must be between 1 and 1048576, got 0");
    expect_edit_error("std = [ 0.3069 ];", "std = [ 0.0 ];",
                      "t.cfg:5: data.std: must be greater than 0, got 0");
    expect_edit_error("type = \"nll\";", "type = \"mse\";",
                      "t.cfg:18: loss.type: must be one of nll, cross_entropy, got \"mse\"");
    /* missing required keys: the group's line, or the file when there is no group */
    expect_edit_error("  epochs = 2;\n", "", "t.cfg:20: train.epochs: missing required key");
    expect_edit_error("dataset = \"fashion-mnist\";", "",
                      "t.cfg:2: data.dataset: missing required key");
    char *no_model = config_edit_text(convnet, "model = {", "modell = {");
    char *no_model2 = config_edit_text(no_model, "modell", "x");
    free(no_model);
    config_expect_usage_error(no_model2, NULL, 0, "t.cfg:7: x: unknown key");
    free(no_model2);
    /* syntax errors come with libconfig's line and text */
    expect_edit_error("epochs = 2;", "epochs = ;", "t.cfg:21: syntax error");
    expect_edit_error("batch_size = 128;", "batch_size = 128; batch_size = 1;",
                      "t.cfg:22: duplicate setting name");
    /* dataset and derived checks */
    expect_edit_error("\"fashion-mnist\"", "\"fashion\"",
                      "t.cfg:3: data.dataset: unknown dataset \"fashion\" (known: mnist, "
                      "fashion-mnist");
    expect_edit_error("std = [ 0.3069 ];", "std = [ 0.3, 0.3 ];",
                      "t.cfg:5: data.std: expected 1 value for idx (one channel), got 2");
    expect_edit_error("std = [ 0.3069 ];", "format = \"cifar10\";",
                      "t.cfg:5: data.format: \"cifar10\" does not match data.dataset");
}

/* The recipe keys of issue 17: values land in the config, bad ones name file, line and key. */
static void test_recipe_keys(void **state)
{
    (void)state;
    const char *sets[] = {"loss.type=\"cross_entropy\"",
                          "loss.label_smoothing=0.1",
                          "optimizer.type=\"sgd\"",
                          "optimizer.weight_decay_skip=\"bias_and_norm\"",
                          "optimizer.clip_grad_norm=2.5",
                          "optimizer.schedule.type=\"one_cycle\"",
                          "optimizer.schedule.pct_start=0.25",
                          "optimizer.schedule.div_factor=10.0",
                          "optimizer.schedule.final_div_factor=100.0"};
    struct dt_config cfg;
    assert_int_equal(config_load_text(&cfg, convnet, sets, 9), 0);
    assert_true(cfg.loss.label_smoothing == 0.1f);
    assert_int_equal(cfg.optimizer.weight_decay_skip, DT_DECAY_SKIP_BIAS_AND_NORM);
    assert_true(cfg.optimizer.clip_grad_norm == 2.5f);
    assert_int_equal(cfg.optimizer.schedule.type, DT_SCHEDULE_ONE_CYCLE);
    assert_true(cfg.optimizer.schedule.pct_start == 0.25f);
    assert_true(cfg.optimizer.schedule.div_factor == 10.0f);
    assert_true(cfg.optimizer.schedule.final_div_factor == 100.0f);
    dt_config_free(&cfg);
    /* defaults: everything off, torch's OneCycleLR defaults */
    assert_int_equal(config_load_text(&cfg, convnet, NULL, 0), 0);
    assert_true(cfg.loss.label_smoothing == 0.0f && cfg.optimizer.clip_grad_norm == 0.0f);
    assert_int_equal(cfg.optimizer.weight_decay_skip, DT_DECAY_SKIP_NONE);
    assert_true(cfg.optimizer.schedule.pct_start == 0.3);
    assert_true(cfg.optimizer.schedule.div_factor == 25.0f);
    assert_true(cfg.optimizer.schedule.final_div_factor == 1e4f);
    dt_config_free(&cfg);
    /* one_cycle through the run's rate: starts at lr / div_factor, ends at lr / 1000 */
    assert_int_equal(config_load_text(&cfg, convnet, sets, 9), 0);
    struct dt_schedule sched, sched_steps;
    assert_int_equal(dt_run_schedule(&cfg, 10, &sched), 0);
    assert_true(fabs(dt_run_lr(&sched, 0, 10, 100) - cfg.optimizer.lr / 10) < 1e-7);
    assert_true(fabs(dt_run_lr(&sched, 99, 10, 100) - cfg.optimizer.lr / 1000) < 1e-9);
    dt_config_free(&cfg);
    /* warmup_epochs = the same warmup in steps, at the run's steps per epoch */
    const char *epochs[] = {"optimizer.schedule.type=\"cosine\"",
                            "optimizer.schedule.warmup_epochs=2"};
    const char *steps[] = {"optimizer.schedule.type=\"cosine\"",
                           "optimizer.schedule.warmup_steps=10"};
    struct dt_config by_steps;
    assert_int_equal(config_load_text(&cfg, convnet, epochs, 2), 0);
    assert_int_equal(config_load_text(&by_steps, convnet, steps, 2), 0);
    assert_int_equal(dt_run_schedule(&cfg, 5, &sched), 0);
    assert_int_equal(dt_run_schedule(&by_steps, 5, &sched_steps), 0);
    for (long long k = 0; k < 40; k++)
        assert_true(dt_run_lr(&sched, k, 5, 40) == dt_run_lr(&sched_steps, k, 5, 40));
    assert_true(dt_run_lr(&sched, 0, 5, 40) == cfg.optimizer.lr / 10);
    dt_config_free(&cfg);
    dt_config_free(&by_steps);

    expect_edit_error("type = \"nll\";", "type = \"cross_entropy\"; label_smoothing = 1.5;",
                      "t.cfg:18: loss.label_smoothing: must be between 0 and 1, got 1.5");
    expect_edit_error("type = \"nll\";", "type = \"nll\"; label_smoothing = 0.1;",
                      "t.cfg:18: loss.label_smoothing: 0.1 needs loss.type \"cross_entropy\" "
                      "(found \"nll\")");
    expect_edit_error("rho = 0.9;", "weight_decay_skip = \"biases\";",
                      "t.cfg:19: optimizer.weight_decay_skip: must be one of none, bias_and_norm, "
                      "got \"biases\"");
    expect_edit_error("rho = 0.9;", "clip_grad_norm = -1.0;",
                      "t.cfg:19: optimizer.clip_grad_norm: must be between 0 and 1000000, got -1");
    expect_edit_error("rho = 0.9;", "schedule = { type = \"onecycle\"; };",
                      "t.cfg:19: optimizer.schedule.type: must be one of constant, step, cosine, "
                      "one_cycle, got \"onecycle\"");
    expect_edit_error("rho = 0.9;", "schedule = { type = \"one_cycle\"; pct_start = 1.0; };",
                      "t.cfg:19: optimizer.schedule.pct_start: must be");
    expect_edit_error("rho = 0.9;", "schedule = { type = \"one_cycle\"; div_factor = 0.0; };",
                      "t.cfg:19: optimizer.schedule.div_factor: must be in (0, 1e+09], got 0");
    expect_edit_error("rho = 0.9;", "schedule = { type = \"one_cycle\"; warmup_steps = 10; };",
                      "t.cfg:19: optimizer.schedule.warmup_steps: one_cycle has its own warmup");
    expect_edit_error("rho = 0.9;",
                      "schedule = { type = \"cosine\"; warmup_steps = 10; warmup_epochs = 1; };",
                      "t.cfg:19: optimizer.schedule.warmup_epochs: give warmup_epochs or "
                      "warmup_steps, not both");
}

static void test_layer_errors(void **state)
{
    (void)state;
    expect_edit_error("\"relu\"", "\"rel\"",
                      "t.cfg:10: model.layers.1.type: unknown layer type \"rel\" (known: conv2d, "
                      "linear");
    expect_edit_error("{ type = \"relu\"; }", "{ kernel = 2; }",
                      "t.cfg:10: model.layers.1: missing required key 'type'");
    expect_edit_error("{ type = \"relu\"; }", "{ type = \"relu\"; p = 0.5; }",
                      "t.cfg:10: model.layers.1.p: relu does not take this key");
    expect_edit_error("out_channels = 16; kernel = 3;", "out_channels = 16; kernal = 3;",
                      "t.cfg:9: model.layers.0.kernal: conv2d does not take this key (it takes: "
                      "out_channels, kernel, stride, padding, bias, algo)");
    expect_edit_error("out_channels = 16; kernel = 3;", "out_channels = 16;",
                      "t.cfg:9: model.layers.0: conv2d needs kernel");
    expect_edit_error("kernel = 3;", "kernel = 65;",
                      "t.cfg:9: model.layers.0.kernel: must be between 1 and 64, got 65");
    expect_edit_error("out_channels = 16;", "out_channels = 0;",
                      "t.cfg:9: model.layers.0.out_channels: must be between 1 and 65536, got 0");
    expect_edit_error("p = 0.1;", "p = 1.0;",
                      "t.cfg:12: model.layers.3.p: must be in [0, 1), got 1");
    expect_edit_error("p = 0.1;", "p = \"x\";",
                      "t.cfg:12: model.layers.3.p: expected a number, got a string");
    expect_edit_error("{ type = \"relu\"; },", "3,",
                      "t.cfg:10: model.layers.1: expected a group like");
    expect_edit_error("layers = (", "layers = 4; x = (",
                      "t.cfg:8: model.layers: expected a list of layer groups");
}

static void test_overrides_apply_in_order(void **state)
{
    (void)state;
    struct dt_config cfg;
    const char *sets[] = {
        "train.epochs=7",        "train.epochs=5",
        "data.dir=/tmp/my data", "model.name=\"quoted \\\"name\\\"\"",
        "data.mean=[0.5]",       "optimizer.lr=2",
        "train.seed=6000000000", "train.batch_per_instance=true",
        "model.layers.3.p=0",    "model.layers.0.stride=2",
        "dist.timeout=1e-3",
    };
    assert_int_equal(config_load_text(&cfg, convnet, sets, sizeof sets / sizeof sets[0]), 0);
    assert_int_equal(cfg.train.epochs, 5);
    assert_string_equal(cfg.data.dir, "/tmp/my data");
    assert_string_equal(cfg.model.name, "quoted \"name\"");
    assert_true(cfg.data.mean[0] == 0.5f);
    assert_true(cfg.optimizer.lr == 2.0f);
    assert_true(cfg.train.seed == 6000000000LL);
    assert_true(cfg.train.batch_per_instance);
    assert_true(cfg.model.layers[3].p == 0.0f);
    assert_int_equal(cfg.model.layers[0].stride, 2);
    assert_true(cfg.dist.timeout == 1e-3);
    assert_non_null(strstr(cfg.text, "epochs = 5;"));
    assert_non_null(strstr(cfg.text, "{ type = \"dropout2d\"; p = 0.0; }"));
    dt_config_free(&cfg);

    /* a new layer type keeps the keys the new kind also takes */
    const char *retype[] = {"model.layers.3.type=dropout", "model.layers.1.type=dropout"};
    assert_int_equal(config_load_text(&cfg, convnet, retype, 2), 0);
    assert_string_equal(cfg.model.layers[3].type, "dropout");
    assert_true(cfg.model.layers[3].p == 0.1f);
    assert_true(cfg.model.layers[1].p == 0.5f);
    dt_config_free(&cfg);

    /* the whole layer list in libconfig syntax */
    const char *layers[] = {"model.layers=({type=\"flatten\";},{type=\"linear\";out_features=3;})"};
    assert_int_equal(config_load_text(&cfg, convnet, layers, 1), 0);
    assert_int_equal(cfg.model.nlayers, 2);
    assert_int_equal(cfg.model.layers[1].out_features, 3);
    assert_int_equal(cfg.model.layers[1].line, 0);
    dt_config_free(&cfg);

    /* required keys may come from overrides */
    char *text = config_edit_text(convnet, "  epochs = 2;\n", "");
    const char *epochs[] = {"train.epochs=3"};
    assert_int_equal(config_load_text(&cfg, text, epochs, 1), 0);
    assert_int_equal(cfg.train.epochs, 3);
    dt_config_free(&cfg);
    free(text);
}

static void expect_set_error(const char *set, const char *message)
{
    const char *sets[] = {set};
    config_expect_usage_error(convnet, sets, 1, message);
}

static void test_override_errors(void **state)
{
    (void)state;
    expect_set_error("train.bach_size=3",
                     "--set train.bach_size: unknown key (did you mean train.batch_size?)");
    expect_set_error("train=3", "--set train: unknown key");
    expect_set_error("epochs", "--set 'epochs': expected KEY=VALUE");
    expect_set_error("=3", "--set '=3': expected KEY=VALUE");
    expect_set_error("train.batch_size=x", "--set train.batch_size: expected an integer, got 'x'");
    expect_set_error("train.batch_size=1.5",
                     "--set train.batch_size: expected an integer, got a float");
    expect_set_error("train.batch_size=0",
                     "--set train.batch_size: must be between 1 and 1048576, got 0");
    expect_set_error("train.epochs=5000000000",
                     "--set train.epochs: must be between 1 and 100000, got 5000000000");
    expect_set_error("train.epochs=1; train.seed=2",
                     "--set train.epochs: expected an integer, got '1; train.seed=2'");
    expect_set_error("train.drop_last=1", "--set train.drop_last: expected true or false");
    expect_set_error("loss.type=mse", "--set loss.type: must be one of nll, cross_entropy");
    expect_set_error("data.std=[0.5, -1.0]", "--set data.std: must be greater than 0, got -1");
    expect_set_error("data.mean=[1,2,3,4,5]", "--set data.mean: at most 4 values");
    expect_set_error("data.dataset=nope", "--set data.dataset: unknown dataset \"nope\"");
    expect_set_error("data.coarse_labels=true", "--set data.coarse_labels: only cifar100");
    expect_set_error("dist.cpu_list=a-b", "--set dist.cpu_list: expected a list like");
    expect_set_error("model.layers.9.p=0",
                     "--set model.layers.9.p: there is no layer 9 (model.layers has 7: 0..6)");
    expect_set_error("model.layers.x.p=0", "--set model.layers.x.p: expected model.layers.INDEX");
    expect_set_error("model.layers.1.p=0", "--set model.layers.1.p: relu does not take this key");
    expect_set_error("model.layers.3.p=1", "--set model.layers.3.p: must be in [0, 1), got 1");
    expect_set_error("model.layers.3.p=x", "--set model.layers.3.p: expected a number, got 'x'");
    expect_set_error("model.layers.1.type=conv2d", "--set model.layers.1.type: conv2d needs");
    expect_set_error("model.layers.1.type=nope",
                     "--set model.layers.1.type: unknown layer type \"nope\"");
    expect_set_error("model.layers=({type=\"x\";})",
                     "--set model.layers.0.type: unknown layer type \"x\"");
    expect_set_error("model.layers=()", "--set model.layers: must have between 1 and 512 layers");
}

static void assert_same_config(const struct dt_config *a, const struct dt_config *b)
{
    struct dt_config x = *a, y = *b;
    x.text = y.text = NULL;
    /* Where the directory came from, not what it is: the text names it explicitly. */
    x.checkpoint.dir_default = y.checkpoint.dir_default = false;
    for (int i = 0; i < x.model.nlayers; i++)
        x.model.layers[i].line = y.model.layers[i].line = 0; /* where, not what */
    assert_memory_equal(&x, &y, sizeof x);
}

static void test_effective_text_round_trips(void **state)
{
    (void)state;
    const char *sets[] = {"model.name=\"tab\\there \\\"q\\\" back\\\\slash\"",
                          "optimizer.schedule.type=cosine",
                          "data.mean=[0.1302]",
                          "optimizer.lr=0.123456789",
                          "dist.timeout=0.1",
                          "dist.cpu_list=0-3,8"};
    struct dt_config a, b, c;
    assert_int_equal(config_load_text(&a, convnet, sets, sizeof sets / sizeof sets[0]), 0);
    assert_int_equal(dt_config_load_string(&b, "t.cfg", a.text, NULL, 0), 0);
    assert_same_config(&a, &b);
    assert_string_equal(a.text, b.text);
    /* under another name too: derived values are explicit in the text */
    setenv("DTRAIN_DATA", "elsewhere", 1);
    assert_int_equal(dt_config_load_string(&c, "checkpoint", a.text, NULL, 0), 0);
    unsetenv("DTRAIN_DATA");
    assert_string_equal(c.data.dir, a.data.dir);
    assert_string_equal(c.checkpoint.dir, a.checkpoint.dir);
    dt_config_free(&a);
    dt_config_free(&b);
    dt_config_free(&c);

    const char *files[] = {"configs/mnist-convnet.cfg", "configs/cifar10-cnn.cfg"};
    for (size_t i = 0; i < 2; i++) {
        assert_int_equal(dt_config_load(&a, files[i], NULL, 0), 0);
        assert_int_equal(dt_config_load_string(&b, files[i], a.text, NULL, 0), 0);
        assert_same_config(&a, &b);
        dt_config_free(&a);
        dt_config_free(&b);
    }
}

static void test_file_load_and_overrides(void **state)
{
    (void)state;
    char path[] = "/tmp/dtrain-test-config-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, convnet, strlen(convnet)), (ssize_t)strlen(convnet));
    close(fd);
    struct dt_config cfg;
    const char *sets[] = {"dist.instances=4", "dist.threads=2"};
    assert_int_equal(dt_config_load(&cfg, path, sets, 2), 0);
    assert_string_equal(cfg.path, path);
    assert_int_equal(cfg.dist.instances, 4);
    assert_int_equal(cfg.dist.threads, 2);
    char expect[64];
    snprintf(expect, sizeof expect, "runs/%s", strrchr(path, '/') + 1);
    assert_string_equal(cfg.checkpoint.dir, expect);
    dt_config_free(&cfg);
    unlink(path);
}

static void test_reference_lists_every_key(void **state)
{
    (void)state;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    dt_config_print_reference(f);
    fclose(f);
    const char *must[] = {"| `train.batch_size` | int | **required** | between 1 and 1048576",
                          "| `data.std` |",
                          "| `optimizer.schedule.type` |",
                          "| `conv2d` | out_channels, kernel, stride, padding, bias, algo |",
                          "| `p` | float |",
                          "| `relu` | no keys besides type |"};
    for (size_t i = 0; i < sizeof must / sizeof must[0]; i++)
        if (!strstr(buf, must[i]))
            fail_msg("reference lacks \"%s\"", must[i]);
    free(buf);
}

/* /proc/self/cgroup lines: the memory check must find a v2 limit (once it never did: the
 * "0::" test compared "0:" with "0") and a v1 memory controller among others. */
static void test_cgroup_lines(void **state)
{
    (void)state;
    char path[64];
    assert_true(dt_cgroup_memory_path("0::/kubepods/pod1/c2\n", true, path, sizeof path));
    assert_string_equal(path, "/kubepods/pod1/c2");
    assert_true(dt_cgroup_memory_path("0::/\n", true, path, sizeof path));
    assert_string_equal(path, "");
    assert_false(dt_cgroup_memory_path("4:memory:/slurm/job1\n", true, path, sizeof path));
    assert_false(dt_cgroup_memory_path("1:name=systemd:/x\n", true, path, sizeof path));
    assert_true(dt_cgroup_memory_path("4:memory:/slurm/job1\n", false, path, sizeof path));
    assert_string_equal(path, "/slurm/job1");
    assert_true(dt_cgroup_memory_path("7:cpu,memory:/a\n", false, path, sizeof path));
    assert_string_equal(path, "/a");
    assert_false(dt_cgroup_memory_path("3:memory_other:/a\n", false, path, sizeof path));
    assert_false(dt_cgroup_memory_path("0::/x\n", false, path, sizeof path));
    assert_false(dt_cgroup_memory_path("garbage", true, path, sizeof path));
}

/* Every enum key: each name its module's table gives loads as that value and is written back
 * as the same name (the effective text reloads into the same struct); a typo is refused with
 * the table's names and the one it most likely meant. */
struct enum_key {
    const char *path;
    const struct dt_names *names;
    size_t offset;
};

static void test_enum_keys_from_tables(void **state)
{
    (void)state;
    const struct enum_key keys[] = {
        {"loss.type", &dt_loss_kind_names, offsetof(struct dt_config, loss.type)},
        {"optimizer.type", &dt_optim_type_names, offsetof(struct dt_config, optimizer.type)},
        {"optimizer.weight_decay_skip", &dt_decay_skip_names,
         offsetof(struct dt_config, optimizer.weight_decay_skip)},
        {"optimizer.schedule.type", &dt_schedule_type_names,
         offsetof(struct dt_config, optimizer.schedule.type)},
        {"dist.backend", &dt_backend_request_names, offsetof(struct dt_config, dist.backend)},
        {"dist.batchnorm", &dt_bn_stats_names, offsetof(struct dt_config, dist.batchnorm)},
        {"dist.pin", &dt_pin_mode_names, offsetof(struct dt_config, dist.pin)},
        {"checkpoint.on_usr1", &dt_usr1_action_names,
         offsetof(struct dt_config, checkpoint.on_usr1)},
    };
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
        int named = 0;
        for (int v = 0; v < keys[k].names->count; v++) {
            const char *name = keys[k].names->names[v];
            if (!name)
                continue; /* not selectable by name (dist.pin's list) */
            named++;
            char set[128];
            snprintf(set, sizeof set, "%s=%s", keys[k].path, name);
            const char *sets[] = {set, "loss.label_smoothing=0"};
            struct dt_config cfg, again;
            if (config_load_text(&cfg, convnet, sets, 2) != 0)
                fail_msg("%s: %s", set, dt_last_error());
            assert_int_equal(*(const int *)((const char *)&cfg + keys[k].offset), v);
            assert_int_equal(dt_config_load_string(&again, "t.cfg", cfg.text, NULL, 0), 0);
            assert_int_equal(*(const int *)((const char *)&again + keys[k].offset), v);
            assert_string_equal(again.text, cfg.text);
            dt_config_free(&again);
            dt_config_free(&cfg);
        }
        assert_true(named >= 2);
    }
    expect_set_error("optimizer.type=adamm", "--set optimizer.type: must be one of sgd, adam, "
                                             "adamw, adadelta, got \"adamm\" (did you mean adam?)");
    expect_set_error("dist.backend=shmm", "(did you mean shm?)");
    expect_set_error("dist.backend=single", "must be one of auto, shm, tcp, hier, mpi, got");
    expect_set_error("dist.pin=list", "must be one of cores, sockets, none, got \"list\"");
}

/* conv2d's algo, add's shortcut and data.format are enums read through their modules' tables at
 * load: every name lands as its value and survives the effective text, a typo is refused with
 * the choices (and the likely one), from the file and from --set alike. */
static void test_layer_and_data_enums(void **state)
{
    (void)state;
    for (int v = 0; v < dt_layer_algo_names.count; v++) {
        char set[64];
        snprintf(set, sizeof set, "model.layers.0.algo=%s", dt_layer_algo_names.names[v]);
        const char *sets[] = {set};
        struct dt_config cfg, again;
        if (config_load_text(&cfg, convnet, sets, 1) != 0)
            fail_msg("%s: %s", set, dt_last_error());
        assert_int_equal(cfg.model.layers[0].algo, v);
        assert_int_equal(dt_config_load_string(&again, "t.cfg", cfg.text, NULL, 0), 0);
        assert_int_equal(again.model.layers[0].algo, v);
        dt_config_free(&again);
        dt_config_free(&cfg);
    }
    const char *wingrad[] = {"model.layers.0.algo=wingrad"};
    config_expect_usage_error(
        convnet, wingrad, 1,
        "--set model.layers.0.algo: must be one of auto, gemm, direct, winograd, "
        "got \"wingrad\" (did you mean winograd?)");
    expect_edit_error("kernel = 3;", "kernel = 3; algo = \"fast\";",
                      "t.cfg:9: model.layers.0.algo: must be one of auto, gemm, direct, winograd, "
                      "got \"fast\"");

    /* an add after the relu, its skip from the conv */
    const char *relu = "{ type = \"relu\"; },";
    char *text = config_edit_text(convnet, relu,
                                  "{ type = \"relu\"; }, { type = \"add\"; from = -2; "
                                  "shortcut = \"projection\"; },");
    struct dt_config cfg, again;
    assert_int_equal(config_load_text(&cfg, text, NULL, 0), 0);
    assert_int_equal(cfg.model.layers[2].shortcut, DT_SHORTCUT_PROJECTION);
    assert_int_equal(cfg.model.layers[0].shortcut, DT_SHORTCUT_IDENTITY); /* the default */
    assert_int_equal(dt_config_load_string(&again, "t.cfg", cfg.text, NULL, 0), 0);
    assert_int_equal(again.model.layers[2].shortcut, DT_SHORTCUT_PROJECTION);
    dt_config_free(&again);
    dt_config_free(&cfg);
    const char *identity[] = {"model.layers.2.shortcut=identity"};
    assert_int_equal(config_load_text(&cfg, text, identity, 1), 0);
    assert_int_equal(cfg.model.layers[2].shortcut, DT_SHORTCUT_IDENTITY);
    dt_config_free(&cfg);
    free(text);
    text = config_edit_text(convnet, relu,
                            "{ type = \"relu\"; }, { type = \"add\"; from = -2; "
                            "shortcut = \"projektion\"; },");
    config_expect_usage_error(
        text, NULL, 0,
        "t.cfg:10: model.layers.2.shortcut: must be one of identity, projection, "
        "got \"projektion\" (did you mean projection?)");
    free(text);

    const char *given[] = {"data.format=idx"};
    assert_int_equal(config_load_text(&cfg, convnet, given, 1), 0);
    assert_int_equal(cfg.data.format, DT_DATA_IDX);
    dt_config_free(&cfg);
    const char *csv[] = {"data.format=csv"};
    config_expect_usage_error(
        convnet, csv, 1,
        "--set data.format: must be one of \"\", idx, cifar10, cifar100, folder, "
        "got \"csv\"");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_good_config_loads_values_defaults_and_derived),
        cmocka_unit_test(test_optimizer_defaults_follow_the_type),
        cmocka_unit_test(test_shipped_configs_load),
        cmocka_unit_test(test_missing_file_is_a_usage_error),
        cmocka_unit_test(test_oversized_config_is_refused_unparsed),
        cmocka_unit_test(test_fifo_config_is_refused),
        cmocka_unit_test(test_file_errors_name_file_line_and_key),
        cmocka_unit_test(test_recipe_keys),
        cmocka_unit_test(test_layer_errors),
        cmocka_unit_test(test_overrides_apply_in_order),
        cmocka_unit_test(test_override_errors),
        cmocka_unit_test(test_effective_text_round_trips),
        cmocka_unit_test(test_file_load_and_overrides),
        cmocka_unit_test(test_reference_lists_every_key),
        cmocka_unit_test(test_values_checked_as_stored),
        cmocka_unit_test(test_cgroup_lines),
        cmocka_unit_test(test_reference_layer_defaults_match_nn),
        cmocka_unit_test(test_enum_keys_from_tables),
        cmocka_unit_test(test_layer_and_data_enums),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
