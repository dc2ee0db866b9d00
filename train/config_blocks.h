/* Blocks in the config: named layer lists with parameters, defined once under model.blocks and
 * used in model.layers any number of times, expanded at load into the flat layer list that the
 * rest of the program sees.
 *
 *   model = {
 *     blocks = {
 *       basic = {
 *         params = [ "width", "stride", "shortcut" ];
 *         defaults = { stride = 1; shortcut = "identity"; };
 *         layers = (
 *           { type = "conv2d"; name = "conv1"; out_channels = "$width"; kernel = 3;
 *             padding = 1; stride = "$stride"; bias = false; },
 *           ...
 *           { type = "add"; name = "shortcut"; from = -6; shortcut = "$shortcut"; },
 *           { type = "relu"; }
 *         );
 *       };
 *     };
 *     layers = (
 *       { type = "conv2d"; name = "conv1"; out_channels = 16; kernel = 3; padding = 1; },
 *       { block = "basic"; name = "layer1"; repeat = 3; width = 16; },
 *       { block = "basic"; name = "layer2"; width = 32; stride = 2; shortcut = "projection"; },
 *       { block = "basic"; name = "layer2"; repeat = 2; width = 32; },
 *       ...
 *     );
 *   };
 *
 * A string value "$p" anywhere in a block's layers (or in a block use inside a block) is
 * replaced by parameter p's value. A use named N makes instances N.0, N.1, ... (counting on
 * across the uses of the same name in one list); a layer named L inside becomes N.i.L and an
 * unnamed one N.i.K, K its position in the block, so tensor names such as
 * "layer2.1.conv1.weight" do not move when layers are added elsewhere. A use without a name
 * gives its layers index names ("layers.17.weight"). `from` counts inside the block: it may
 * reach the block's input (the layer before it), not further.
 *
 * Errors name the file, line and key: unknown block, a missing or unknown parameter, a block
 * that uses itself, repeat out of range, a skip that leaves its block, bad or repeated names.
 */
#ifndef DT_TRAIN_CONFIG_BLOCKS_H
#define DT_TRAIN_CONFIG_BLOCKS_H

#include <libconfig.h>
#include <stdbool.h>

#include "nn/layer_spec.h"

/* Most block uses one may nest inside another. */
#define DT_BLOCK_MAX_DEPTH 8

/* True when `layers` needs expanding: `blocks` is given or an entry is a block use. */
bool dt_blocks_used(const config_setting_t *blocks, const config_setting_t *layers);

/* Expands `layers` with the definitions in `blocks` (NULL = none) into a new list `expanded`
 * under the root of `out` (a config_t the caller has initialised and destroys). Each expanded
 * layer group keeps the source line of the entry it came from and carries its full `name`
 * (or none: index naming). max_layers bounds the result. `file` NULL = a --set value.
 * DT_EUSAGE with "FILE:LINE: model.layers.I...: problem" on any error. */
int dt_blocks_expand(const config_setting_t *blocks, const config_setting_t *layers,
                     const char *file, int max_layers, config_t *out, config_setting_t **expanded);

/* model.blocks and model.layers as written, as libconfig text indented by `indent`
 * (the effective config keeps blocks unexpanded). malloc'd; NULL when out of memory. */
char *dt_blocks_source_text(const config_setting_t *blocks, const config_setting_t *layers,
                            const char *indent);

/* A setting's type as an error message names it ("an integer", "a list", ...); train/config.c
 * uses it too. */
const char *dt_config_kind_name(const config_setting_t *s);

/* A layer name: dot-separated parts of letters, digits and '_', shorter than
 * DT_LAYER_NAME_MAX. DT_EUSAGE "WHERE: ..." otherwise. */
int dt_layer_name_check(const char *name, const char *where);

/* No two layers share a tensor-name prefix, and none is a dotted prefix of another's
 * ("a" and "a.proj.0" would both name "a.proj.0.weight"). DT_EUSAGE naming both layers. */
int dt_layer_names_unique(const struct dt_layer_spec *specs, int n, const char *file);

#endif
