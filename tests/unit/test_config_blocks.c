/* train/config_blocks: block expansion at config load (the same layer list as written out
 * flat, names included), the effective text keeping blocks unexpanded and reloading to the
 * same layers, nesting, and every error a block can make (one line, file:line and key). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config_text.h"
#include "train/config.h"
#include "util/err.h"

#define HEAD                                                                                       \
    "data = { dataset = \"fashion-mnist\"; };\n" /* 1 */                                           \
    "train = { epochs = 1; batch_size = 8; };\n" /* 2 */                                           \
    "model = {\n"                                /* 3 */

static const char blocks[] =
    HEAD "  blocks = {\n"                              /* 4 */
         "    basic = {\n"                             /* 5 */
         "      params = [ \"width\", \"stride\" ];\n" /* 6 */
         "      defaults = { stride = 1; };\n"         /* 7 */
         "      layers = (\n"                          /* 8 */
         "        { type = \"conv2d\"; name = \"conv1\"; out_channels = \"$width\"; kernel = 3;"
         " padding = 1; stride = \"$stride\"; },\n" /* 9 */
         "        { type = \"relu\"; },\n"          /* 10 */
         "        { type = \"add\"; name = \"shortcut\"; from = -3; shortcut = \"projection\"; }\n"
         "      );\n"                                                                   /* 12 */
         "    };\n"                                                                     /* 13 */
         "  };\n"                                                                       /* 14 */
         "  layers = (\n"                                                               /* 15 */
         "    { type = \"conv2d\"; name = \"stem\"; out_channels = 4; kernel = 3; },\n" /* 16 */
         "    { block = \"basic\"; name = \"stage1\"; repeat = 2; width = 4; },\n"      /* 17 */
         "    { block = \"basic\"; name = \"stage1\"; width = 8; stride = 2; },\n"      /* 18 */
         "    { block = \"basic\"; width = 8; },\n"                                     /* 19 */
         "    { type = \"flatten\"; },\n"                                               /* 20 */
         "    { type = \"linear\"; out_features = 10; }\n"                              /* 21 */
         "  );\n"                                                                       /* 22 */
         "};\n";

/* The same model written out flat, with the names the blocks give. */
static const char flat[] = HEAD
    "  layers = (\n"
    "    { type = \"conv2d\"; name = \"stem\"; out_channels = 4; kernel = 3; },\n"
    "    { type = \"conv2d\"; name = \"stage1.0.conv1\"; out_channels = 4; kernel = 3; padding = 1;"
    " stride = 1; },\n"
    "    { type = \"relu\"; name = \"stage1.0.1\"; },\n"
    "    { type = \"add\"; name = \"stage1.0.shortcut\"; from = -3; shortcut = \"projection\"; },\n"
    "    { type = \"conv2d\"; name = \"stage1.1.conv1\"; out_channels = 4; kernel = 3; padding = 1;"
    " stride = 1; },\n"
    "    { type = \"relu\"; name = \"stage1.1.1\"; },\n"
    "    { type = \"add\"; name = \"stage1.1.shortcut\"; from = -3; shortcut = \"projection\"; },\n"
    "    { type = \"conv2d\"; name = \"stage1.2.conv1\"; out_channels = 8; kernel = 3; padding = 1;"
    " stride = 2; },\n"
    "    { type = \"relu\"; name = \"stage1.2.1\"; },\n"
    "    { type = \"add\"; name = \"stage1.2.shortcut\"; from = -3; shortcut = \"projection\"; },\n"
    "    { type = \"conv2d\"; out_channels = 8; kernel = 3; padding = 1; stride = 1; },\n"
    "    { type = \"relu\"; },\n"
    "    { type = \"add\"; from = -3; shortcut = \"projection\"; },\n"
    "    { type = \"flatten\"; },\n"
    "    { type = \"linear\"; out_features = 10; }\n"
    "  );\n"
    "};\n";

static void expect_edit_error(const char *from, const char *to, const char *message)
{
    char *text = config_edit_text(blocks, from, to);
    config_expect_usage_error(text, NULL, 0, message);
    free(text);
}

static void assert_same_layers(const struct dt_config *a, const struct dt_config *b)
{
    assert_int_equal(a->model.nlayers, b->model.nlayers);
    for (int i = 0; i < a->model.nlayers; i++) {
        struct dt_layer_spec x = a->model.layers[i], y = b->model.layers[i];
        x.line = y.line = 0;
        if (memcmp(&x, &y, sizeof x) != 0)
            fail_msg("layer %d differs: %s \"%s\" against %s \"%s\"", i, x.type, x.name, y.type,
                     y.name);
    }
}

static void test_blocks_expand_to_the_flat_list(void **state)
{
    (void)state;
    struct dt_config b, f;
    assert_int_equal(config_load_text(&b, blocks, NULL, 0), 0);
    assert_int_equal(config_load_text(&f, flat, NULL, 0), 0);
    assert_same_layers(&b, &f);
    /* an unnamed use gives index names; a skip keeps the line of its block's definition */
    assert_string_equal(b.model.layers[10].name, "");
    assert_int_equal(b.model.layers[3].line, 11);
    dt_config_free(&b);
    dt_config_free(&f);
}

static void test_effective_text_keeps_blocks_and_reloads(void **state)
{
    (void)state;
    struct dt_config a, b;
    assert_int_equal(config_load_text(&a, blocks, NULL, 0), 0);
    assert_non_null(strstr(a.text, "blocks = {"));
    assert_non_null(
        strstr(a.text, "{ block = \"basic\"; name = \"stage1\"; repeat = 2; width = 4; }"));
    assert_non_null(strstr(a.text, "out_channels = \"$width\""));
    assert_int_equal(config_load_text(&b, a.text, NULL, 0), 0);
    assert_same_layers(&a, &b);
    assert_string_equal(a.text, b.text);
    dt_config_free(&a);
    dt_config_free(&b);

    /* a --set on the expanded list: the text holds the list as it now is */
    const char *sets[] = {"model.layers.1.out_channels=6", "model.layers.4.name=renamed"};
    assert_int_equal(config_load_text(&a, blocks, sets, 2), 0);
    assert_null(strstr(a.text, "blocks = {"));
    assert_non_null(strstr(a.text, "name = \"renamed\""));
    assert_int_equal(config_load_text(&b, a.text, NULL, 0), 0);
    assert_same_layers(&a, &b);
    assert_int_equal(b.model.layers[1].out_channels, 6);
    dt_config_free(&a);
    dt_config_free(&b);
}

static void test_nested_blocks_name_and_count_inside(void **state)
{
    (void)state;
    char *text = config_edit_text(
        blocks, "  };\n  layers = (\n",
        "    stage = {\n"
        "      params = [ \"w\" ];\n"
        "      layers = ( { type = \"relu\"; name = \"pre\"; },\n"
        "                 { block = \"basic\"; name = \"b\"; repeat = 2; width = \"$w\"; },\n"
        "                 { type = \"add\"; from = -8; } );\n"
        "    };\n"
        "  };\n  layers = (\n");
    char *text2 =
        config_edit_text(text, "    { block = \"basic\"; width = 8; },\n",
                         "    { block = \"stage\"; name = \"s\"; repeat = 2; w = 8; },\n");
    struct dt_config cfg;
    if (config_load_text(&cfg, text2, NULL, 0))
        fail_msg("%s", dt_last_error());
    /* stem, 3 basic (9), then 2 x (pre + 2 basic + add = 8), flatten, linear */
    assert_int_equal(cfg.model.nlayers, 1 + 9 + 16 + 2);
    assert_string_equal(cfg.model.layers[10].name, "s.0.pre");
    assert_string_equal(cfg.model.layers[11].name, "s.0.b.0.conv1");
    assert_string_equal(cfg.model.layers[16].name, "s.0.b.1.shortcut");
    assert_string_equal(cfg.model.layers[17].name, "s.0.7");
    assert_string_equal(cfg.model.layers[25].name, "s.1.7");
    assert_int_equal(cfg.model.layers[11].out_channels, 8);
    dt_config_free(&cfg);
    free(text);
    free(text2);

    /* a skip inside the nested block reaching past the stage's input */
    text = config_edit_text(
        blocks, "  };\n  layers = (\n",
        "    stage = { layers = ( { type = \"relu\"; }, { type = \"add\"; from = -3; } ); };\n"
        "  };\n  layers = (\n");
    text2 = config_edit_text(text, "    { block = \"basic\"; width = 8; },\n",
                             "    { block = \"stage\"; },\n");
    config_expect_usage_error(
        text2, NULL, 0,
        "t.cfg:14: model.blocks.stage.layers.1.from: -3 leaves its block (this is the "
        "block's layer 1: -2 reaches the block's input");
    free(text);
    free(text2);
}

static void test_block_errors(void **state)
{
    (void)state;
    expect_edit_error("block = \"basic\"; width = 8;", "block = \"basik\"; width = 8;",
                      "t.cfg:19: model.layers.3.block: unknown block \"basik\" (defined: basic)");
    expect_edit_error("block = \"basic\"; width = 8;", "block = \"basic\";",
                      "t.cfg:19: model.layers.3: block \"basic\" needs parameter \"width\" (it "
                      "takes: width, stride)");
    expect_edit_error("block = \"basic\"; width = 8;", "block = \"basic\"; width = 8; depth = 2;",
                      "t.cfg:19: model.layers.3.depth: block \"basic\" has no such parameter (it "
                      "takes: width, stride)");
    expect_edit_error("repeat = 2;", "repeat = 0;",
                      "t.cfg:17: model.layers.1.repeat: must be between 1 and 512, got 0");
    expect_edit_error("repeat = 2;", "repeat = 1000;",
                      "t.cfg:17: model.layers.1.repeat: must be between 1 and 512, got 1000");
    expect_edit_error("repeat = 2;", "repeat = 200;",
                      "more than 512 layers once blocks are expanded");
    expect_edit_error("repeat = 2;", "repeat = \"2\";",
                      "t.cfg:17: model.layers.1.repeat: expected an integer, got a string");
    expect_edit_error("from = -3;", "from = -4;",
                      "t.cfg:11: model.blocks.basic.layers.2.from: -4 leaves its block");
    expect_edit_error("stride = \"$stride\"", "stride = \"$strid\"",
                      "t.cfg:9: model.blocks.basic.layers.0.stride: \"$strid\": block \"basic\" "
                      "has no parameter \"strid\"");
    expect_edit_error("out_channels = 4; kernel = 3; }", "out_channels = \"$width\"; kernel = 3; }",
                      "t.cfg:16: model.layers.0.out_channels: \"$width\": parameters exist only "
                      "inside model.blocks");
    expect_edit_error("{ type = \"flatten\"; }", "{ type = \"flatten\"; block = \"basic\"; }",
                      "t.cfg:20: model.layers.4: give type (a layer) or block (a block use), not "
                      "both");
    expect_edit_error("defaults = { stride = 1; };", "defaults = { stride = 1; }; width = 3;",
                      "t.cfg:5: model.blocks.basic.width: unknown key (a block has params, "
                      "defaults, layers)");
    expect_edit_error(
        "defaults = { stride = 1; };", "defaults = { strides = 1; };",
        "t.cfg:5: model.blocks.basic.defaults.strides: not one of the block's params");
    expect_edit_error("params = [ \"width\", \"stride\" ];", "params = [ \"width\", \"repeat\" ];",
                      "model.blocks.basic.params: \"repeat\" is taken by the block use itself");
    /* recursion, direct and through another block */
    expect_edit_error("{ type = \"relu\"; },\n        { type = \"add\"",
                      "{ block = \"basic\"; width = 2; },\n        { type = \"add\"",
                      "t.cfg:10: model.blocks.basic.layers.1.block: block \"basic\" uses itself "
                      "(basic -> basic)");
    char *text =
        config_edit_text(blocks, "    basic = {",
                         "    outer = { layers = ( { block = \"basic\"; width = 2; } ); };\n"
                         "    basic = {");
    char *text2 = config_edit_text(text, "{ type = \"relu\"; },\n        { type = \"add\"",
                                   "{ block = \"outer\"; },\n        { type = \"add\"");
    config_expect_usage_error(
        text2, NULL, 0,
        "model.blocks.outer.layers.0.block: block \"basic\" uses itself (basic -> outer -> basic)");
    free(text);
    free(text2);
    /* names */
    expect_edit_error("name = \"stem\"", "name = \"st em\"",
                      "t.cfg:16: model.layers.0.name: \"st em\" is not a layer name");
    expect_edit_error(
        "name = \"stem\"", "name = \"stage1\"",
        "t.cfg:16: model.layers.0.name: \"stage1\" clashes with layer 1's \"stage1.0.conv1\"");
    expect_edit_error("name = \"stem\"", "name = \"layers.10\"",
                      "model.layers.0.name: \"layers.10\" clashes with layer 10's \"layers.10\"");
    expect_edit_error("name = \"stage1\"; width = 8;", "name = \"stage1.\"; width = 8;",
                      "t.cfg:18: model.layers.2.name: \"stage1.\" is not a layer name");
    /* blocks without layers; blocks from --set */
    const char *set_blocks[] = {"model.blocks={}"};
    config_expect_usage_error(blocks, set_blocks, 1,
                              "--set model.blocks: blocks are defined in the config file");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_blocks_expand_to_the_flat_list),
        cmocka_unit_test(test_effective_text_keeps_blocks_and_reloads),
        cmocka_unit_test(test_nested_blocks_name_and_count_inside),
        cmocka_unit_test(test_block_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
