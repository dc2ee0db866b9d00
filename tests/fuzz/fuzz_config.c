/* train/config.c: libconfig text through dtrain's schema (types, ranges, layer lists,
 * derived values), as a stored checkpoint config or a hostile file would reach it. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "train/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    struct dt_config cfg;
    dt_config_load_string(&cfg, "fuzz", text, NULL, 0);
    dt_config_free(&cfg);
    free(text);
    return 0;
}
