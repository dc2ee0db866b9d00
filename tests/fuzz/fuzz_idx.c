/* data/idx.c: an images file and a labels file cut from the input (the first byte says where),
 * each gzip-compressed here so the parser itself sees the fuzzer's bytes. */
#include <stdlib.h>

#include "data/idx.h"
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    size_t cut = size > 1 ? 1 + (size_t)data[0] * (size - 1) / 255 : 1;
    uint8_t *a = NULL, *b = NULL;
    size_t na = fuzz_gzip(data + 1, cut - 1, &a), nb = fuzz_gzip(data + cut, size - cut, &b);
    char pa[64], pb[64];
    int fa = fuzz_file(a, na, pa, sizeof pa), fb = fuzz_file(b, nb, pb, sizeof pb);
    struct dt_dataset d = {0};
    if (fa >= 0 && fb >= 0)
        dt_idx_load_split(&d, pa, pb, 0);
    dt_dataset_free(&d);
    if (fa >= 0)
        close(fa);
    if (fb >= 0)
        close(fb);
    free(a);
    free(b);
    return 0;
}
