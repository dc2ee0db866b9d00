/* The fine-tuning keys' values and how the config reads and writes them:
 *
 *   train.freeze = [ "conv1", "layer1" ];          # tensor names or dotted prefixes of them
 *   optimizer.param_groups = (
 *     { match = [ "fc" ]; lr_scale = 10.0; }        # later groups win over earlier ones
 *   );
 *   data.select_classes = [ 5, 6, 7, 8, 9 ];       # keep these classes, relabelled 0..k-1
 *
 * Each is parsed once at load into the structs below (train/config.c calls the codecs through
 * its key table), so nothing compares strings against the config after loading but the name
 * matching itself. A pattern matches a tensor whose name (or layers.N name) is the pattern or
 * starts with the pattern and a dot: "layer1" matches "layer1.0.conv1.weight", not
 * "layer10.0.conv1.weight". Whether patterns match anything is checked against the model
 * (train/param_groups.c), which the config does not know.
 */
#ifndef DT_TRAIN_FINETUNE_CONFIG_H
#define DT_TRAIN_FINETUNE_CONFIG_H

#include <libconfig.h>
#include <stdbool.h>

#include "nn/layer_spec.h"

#define DT_MAX_PATTERNS     16
#define DT_MAX_PARAM_GROUPS 8
#define DT_PATTERN_MAX      DT_LAYER_NAME_MAX
#define DT_MAX_SELECT       256

struct dt_name_patterns {
    int n;
    char p[DT_MAX_PATTERNS][DT_PATTERN_MAX];
};

struct dt_param_group_spec {
    struct dt_name_patterns match;
    float lr_scale; /* (0, 1e4] */
};

struct dt_param_groups {
    int n;
    struct dt_param_group_spec g[DT_MAX_PARAM_GROUPS];
};

struct dt_class_select {
    int n;
    int classes[DT_MAX_SELECT]; /* original labels, in the order that numbers them 0..n-1 */
};

/* A config value codec: load checks a libconfig value into the field (DT_EUSAGE "WHERE: ...");
 * write returns the field as libconfig value text (malloc'd; NULL when out of memory). */
struct dt_config_codec {
    const char *label;    /* type column of the reference: "string list" */
    const char *expected; /* "a list of names like [\"conv1\"]" */
    int (*load)(void *field, const config_setting_t *s, const char *where);
    char *(*write)(const void *field);
};

extern const struct dt_config_codec dt_patterns_codec, dt_param_groups_codec, dt_class_select_codec;

/* `name` (a tensor's name) matches `pattern`: equal, or pattern followed by a dot. */
bool dt_pattern_matches(const char *pattern, const char *name);

#endif
