/* data/cifar.c: the input as the tar inside a CIFAR archive (gzip-compressed here), read as
 * CIFAR-10 or CIFAR-100 by the input's first byte. */
#include <stdlib.h>

#include "data/cifar.h"
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    uint8_t *gz = NULL;
    size_t n = fuzz_gzip(data + 1, size - 1, &gz);
    char path[64];
    int fd = fuzz_file(gz, n, path, sizeof path);
    struct dt_data out = {0};
    if (fd >= 0) {
        dt_cifar_load(&out, path, data[0] & 1, 0, (data[0] >> 1) & 1);
        close(fd);
    }
    dt_data_free(&out);
    free(gz);
    return 0;
}
