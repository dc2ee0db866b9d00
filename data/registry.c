#include "data/registry.h"

#include <string.h>

#define IDX_FILES(ti, tl, vi, vl)                                                                  \
    {                                                                                              \
        {"train-images-idx3-ubyte.gz", 0, ti, NULL, NULL},                                         \
            {"train-labels-idx1-ubyte.gz", 0, tl, NULL, NULL},                                     \
            {"t10k-images-idx3-ubyte.gz", 0, vi, NULL, NULL},                                      \
        {                                                                                          \
            "t10k-labels-idx1-ubyte.gz", 0, vl, NULL, NULL                                         \
        }                                                                                          \
    }

static const char *const fashion_names[] = {"T-shirt/top", "Trouser",   "Pullover", "Dress",
                                            "Coat",        "Sandal",    "Shirt",    "Sneaker",
                                            "Bag",         "Ankle boot"};
static const char *const digit_names[] = {"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"};
static const char *const kmnist_names[] = {"o",  "ki", "su", "tsu", "na",
                                           "ha", "ma", "ya", "re",  "wo"};

static const struct dt_reg_dataset registry[] = {
    {
        .name = "mnist",
        .format = "idx",
        .description = "MNIST handwritten digits, 60k/10k 28x28 grey",
        .classes = 10,
        .class_names = digit_names,
        .mirrors = {"https://ossci-datasets.s3.amazonaws.com/mnist/",
                    "http://yann.lecun.com/exdb/mnist/"},
        .nfiles = 4,
        .files = IDX_FILES("f68b3c2dcbeaaa9fbdd348bbdeb94873", "d53e105ee54ea40749a09fcbcd1e9432",
                           "9fb629c4189551a2d022fa330f9573f3", "ec29112dd5afa0611ce80d1b7f02629c"),
    },
    {
        .name = "fashion-mnist",
        .format = "idx",
        .description = "Zalando Fashion-MNIST, 60k/10k 28x28 grey",
        .classes = 10,
        .class_names = fashion_names,
        .mirrors = {"http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/"},
        .nfiles = 4,
        .files = {{"train-images-idx3-ubyte.gz", 0, "8d4fb7e6c68d591d4c3dfef9ec88bf0d", NULL,
                   "c59f468a2f672dc815687fe0f83887768d799fd8a3f3276145d20f83aa44d888"},
                  {"train-labels-idx1-ubyte.gz", 0, "25c81989df183df01b3e8a0aad5dffbe", NULL,
                   "bad3541b69d912435c50bb6ba87bec294ff4f6a2e1246121d8633921760443d9"},
                  {"t10k-images-idx3-ubyte.gz", 0, "bef4ecab320f06d8554ea6380940ec79", NULL,
                   "5b4141f0afbad91edebe8549f8fcffe087ea10ca49f1dbef5c9a5cd8815ce37b"},
                  {"t10k-labels-idx1-ubyte.gz", 0, "bb300cfdad3c16e7a12a480ee83cd310", NULL,
                   "0402a96d92fd2663957122ceb108a494c5af83dab82d92729df917d7dec38c34"}},
        .system_dir = "/usr/share/datasets/fashion-mnist",
    },
    {
        .name = "kmnist",
        .format = "idx",
        .description = "Kuzushiji-MNIST, 60k/10k 28x28 grey",
        .classes = 10,
        .class_names = kmnist_names,
        .mirrors = {"http://codh.rois.ac.jp/kmnist/dataset/kmnist/"},
        .nfiles = 4,
        .files = IDX_FILES(NULL, NULL, NULL, NULL),
    },
    {
        .name = "cifar10",
        .format = "cifar10",
        .description = "CIFAR-10 binary version, 50k/10k 32x32 RGB",
        .classes = 10,
        .mirrors = {"https://www.cs.toronto.edu/~kriz/"},
        .nfiles = 1,
        .files = {{"cifar-10-binary.tar.gz", 170052171, "c32a1d4ab5d03f1284b67883e8d87530",
                   "c4a38c50a1bc5f3a1c5537f2155ab9d68f9f25eb1ed8d9ddda3db29a59bca1dd", NULL}},
    },
    {
        .name = "cifar100",
        .format = "cifar100",
        .description = "CIFAR-100 binary version, 50k/10k 32x32 RGB, 100 fine / 20 coarse",
        .classes = 100,
        .mirrors = {"https://www.cs.toronto.edu/~kriz/"},
        .nfiles = 1,
        .files = {{"cifar-100-binary.tar.gz", 0, NULL, NULL, NULL}},
    },
};

const struct dt_reg_dataset *dt_registry_find(const char *name)
{
    for (size_t i = 0; i < sizeof registry / sizeof registry[0]; i++)
        if (strcmp(registry[i].name, name) == 0)
            return &registry[i];
    return NULL;
}

const struct dt_reg_dataset *dt_registry_all(size_t *count)
{
    *count = sizeof registry / sizeof registry[0];
    return registry;
}

const char *dt_registry_names(void)
{
    return "mnist, fashion-mnist, kmnist, cifar10, cifar100";
}
