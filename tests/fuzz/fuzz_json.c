/* util/json.c's parser on arbitrary bytes (checkpoint headers, registries and HTTP bodies go
 * through it). */
#include <stdint.h>
#include <stdlib.h>

#include "util/json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct dt_json *v = dt_json_parse((const char *)data, size);
    dt_json_free(v);
    return 0;
}
