/* nn/checkpoint.c: the input as a safetensors file loaded into a small model (conv, batchnorm,
 * linear) with an Adam optimizer, and its metadata read alone. */
#include <stdlib.h>

#include "fuzz_common.h"
#include "nn/checkpoint.h"
#include "nn/layer_spec.h"

static struct dt_model *model;
static struct dt_optim *optim;

static void build(void)
{
    struct dt_layer_spec s[4];
    for (int i = 0; i < 4; i++)
        dt_layer_spec_defaults(&s[i]);
    snprintf(s[0].type, sizeof s[0].type, "conv2d");
    s[0].out_channels = 2, s[0].kernel = 3;
    snprintf(s[1].type, sizeof s[1].type, "batchnorm2d");
    snprintf(s[2].type, sizeof s[2].type, "flatten");
    snprintf(s[3].type, sizeof s[3].type, "linear");
    s[3].out_features = 3;
    struct dt_shape in = {1, 5, 5};
    if (dt_model_build(&model, s, 4, in, 1, DT_LOSS_CROSS_ENTROPY, 1))
        abort();
    struct dt_optim_config oc;
    dt_optim_config_defaults(&oc, DT_OPTIM_ADAM);
    if (dt_optim_create(&optim, &oc, model->nparams))
        abort();
}

/* With FUZZ_SEED_DIR set, a valid checkpoint of the model to start the corpus from. */
int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    build();
    const char *dir = getenv("FUZZ_SEED_DIR");
    if (dir) {
        char path[4096];
        snprintf(path, sizeof path, "%s/valid.safetensors", dir);
        struct dt_checkpoint_meta meta = {0};
        dt_checkpoint_meta_set(&meta, "step", "12");
        dt_checkpoint_meta_set(&meta, "config", "train = { epochs = 1; };");
        dt_checkpoint_save(path, model, optim, &meta);
        dt_checkpoint_meta_free(&meta);
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[64];
    int fd = fuzz_file(data, size, path, sizeof path);
    if (fd < 0)
        return 0;
    struct dt_checkpoint_meta meta = {0};
    dt_checkpoint_load(path, model, optim, &meta);
    dt_checkpoint_meta_free(&meta);
    dt_checkpoint_read_meta(path, &meta);
    dt_checkpoint_meta_free(&meta);
    close(fd);
    return 0;
}
