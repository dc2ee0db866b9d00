/* The run's configuration: one schema table, a libconfig reader, command-line overrides and
 * a writer for the effective configuration.
 *
 * Every key is one row of `keys[]` below: its path, type, default (written in libconfig
 * syntax and parsed by the same code as a --set value, so a default can never disagree with
 * the validator), range or allowed strings, help line and the field of struct dt_config it
 * fills. That single table drives loading, validation, --set, the effective-config text
 * (--print-config, checkpoints) and the Markdown reference in docs/config.md. Layer entries
 * of model.layers get the same treatment from `layer_keys[]`; which keys a layer kind takes
 * comes from nn/ (dt_layer_kind_find), so adding a kind needs no change here.
 *
 * Loading happens in four steps, each of which may fail with DT_EUSAGE and a message that
 * says where ("FILE:LINE: key", or "--set key" for an override), which key, and what is
 * wrong: (1) defaults, (2) the file, (3) overrides in order, (4) derived values (data.format,
 * data.dir, checkpoint.dir, optimizer defaults) and checks that involve several keys. Only
 * then is the effective text written, so the text always reloads into an identical struct.
 *
 * libconfig 1.5 quirk worth knowing: an integer literal that does not fit 32 bits silently
 * wraps unless written with the L suffix (5000000000L). widen_integers rewrites such literals
 * (in the file and in --set values) before libconfig reads them, so every integer key is
 * range-checked on the value as written (not in @include'd files, which libconfig reads
 * itself); the writer always adds L to 64-bit keys.
 *
 * Float keys are checked on the value as stored: a number that is not a normal 32-bit float
 * (1e-320, 1e39) or that rounds to outside the key's range is refused (check_float). Keys
 * used in double arithmetic at run time (the one_cycle factors, dist.timeout,
 * checkpoint.every_minutes) are stored as doubles.
 */
#include "train/config.h"

#include <ctype.h>
#include <float.h>
#include <libconfig.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "data/dataset.h"
#include "data/load.h"
#include "data/registry.h"
#include "nn/layers.h"
#include "nn/optim.h"
#include "train/config_blocks.h"
#include "nn/precision.h"
#include "util/err.h"
#include "util/fileio.h"
#include "util/names.h"

/* T_ENUM: a string in the file, one of `names`, stored as the value of the module's enum;
 * T_STRING with `names`: a string that must be one of them, stored as it is. */
enum key_type {
    T_INT,
    T_INT64,
    T_FLOAT,
    T_DOUBLE,
    T_BOOL,
    T_STRING,
    T_FLOATS,
    T_LAYERS,
    T_ENUM,
    T_BLOCKS,
    T_CUSTOM /* read and written by the row's codec (train/finetune_config.h) */
};

#define REQUIRED 1u  /* no default: the file or a --set must give it */
#define MIN_OPEN 2u  /* value must be strictly greater than min */
#define MAX_OPEN 4u  /* value must be strictly less than max */
#define FILLS    8u  /* T_FLOATS: one number, not a list, stands for every element ([S, S]) */
#define AUTO     16u /* T_FLOATS: the string "auto" is allowed (count DT_CONFIG_AUTO) */

struct key {
    const char *path;
    enum key_type type;
    unsigned flags;
    const char *def;              /* default in libconfig syntax; NULL when REQUIRED */
    double min, max;              /* numbers and list elements: allowed range */
    const struct dt_names *names; /* T_ENUM, and T_STRING's allowed values (NULL = free) */
    size_t offset, size;          /* the field (strings: buffer size, lists: capacity in bytes) */
    size_t count_offset;          /* T_FLOATS: the int that receives the element count */
    const char *help;
};

/* The codec of each T_CUSTOM key. */
static const struct {
    const char *path;
    const struct dt_config_codec *codec;
} custom_keys[] = {
    {"data.select_classes", &dt_class_select_codec},
    {"optimizer.param_groups", &dt_param_groups_codec},
    {"train.freeze", &dt_patterns_codec},
};

static const struct dt_config_codec *codec_of(const struct key *k)
{
    for (size_t i = 0; i < sizeof custom_keys / sizeof custom_keys[0]; i++)
        if (strcmp(custom_keys[i].path, k->path) == 0)
            return custom_keys[i].codec;
    return NULL; /* not reached: every T_CUSTOM row has one (test_config checks the table) */
}

#define FIELD(f) offsetof(struct dt_config, f), sizeof(((struct dt_config *)0)->f)
/* An enum field, stored as an int (what every enum of these tables is). */
#define ENUM(f)                                                                                    \
    offsetof(struct dt_config, f), sizeof(int) / (sizeof(((struct dt_config *)0)->f) == sizeof(int))
#define LIST(f, n)   FIELD(f), offsetof(struct dt_config, n)
#define INF          HUGE_VAL
#define MAX_BATCH    1048576
#define MAX_INSTANCE 1024

/* Keys of one group stay together, a nested group's keys after its parent's: the writer
 * relies on that order to open and close groups. */
static const struct key keys[] = {
    {"data.dataset", T_STRING, REQUIRED, NULL, 0, 0, NULL, FIELD(data.dataset), 0,
     "registry name (mnist, fashion-mnist, kmnist, cifar10, cifar100) or any name for "
     "your own files when data.format is given"},
    {"data.format", T_ENUM, 0, "\"\"", 0, 0, &dt_data_format_names, ENUM(data.format), 0,
     "file format; empty = the registry's format for data.dataset; folder = "
     "DIR/train/<class>/*.png|jpg and DIR/test/<class>/* (see docs/data.md)"},
    {"data.dir", T_STRING, 0, "\"\"", 0, 0, NULL, FIELD(data.dir), 0,
     "directory holding the archives; empty = $DTRAIN_DATA/DATASET (DTRAIN_DATA defaults "
     "to \"data\", relative to the current directory)"},
    {"data.classes", T_INT, 0, "0", 0, DT_MAX_CLASSES, NULL, FIELD(data.classes), 0,
     "expected number of classes; 0 = the format's own"},
    {"data.coarse_labels", T_BOOL, 0, "false", 0, 0, NULL, FIELD(data.coarse_labels), 0,
     "cifar100 only: use the 20 coarse labels instead of the 100 fine ones"},
    {"data.mean", T_FLOATS, AUTO, "[]", -INF, INF, NULL, LIST(data.mean, data.nmean),
     "per-channel mean subtracted after x/255: 1 value or one per channel; [] = 0; \"auto\" = "
     "computed over the training images and stored in the checkpoint"},
    {"data.std", T_FLOATS, MIN_OPEN | AUTO, "[]", 0, INF, NULL, LIST(data.std, data.nstd),
     "per-channel standard deviation divided by after the mean: 1 value or one per channel; "
     "[] = 1; \"auto\" = computed over the training images (population std)"},
    {"data.hflip", T_BOOL, 0, "false", 0, 0, NULL, FIELD(data.hflip), 0,
     "augmentation: flip training images horizontally with probability 1/2"},
    {"data.crop_padding", T_INT, 0, "0", 0, 64, NULL, FIELD(data.crop_padding), 0,
     "augmentation: zero-pad by this many pixels, then crop randomly back to size; 0 = off"},
    {"data.channels", T_INT, 0, "0", 0, 3, NULL, FIELD(data.channels), 0,
     "folder: 1 (gray) or 3 (RGB) to convert every image to; 0 = 3 when data.mean or "
     "data.std has 3 values, else 1"},
    {"data.size", T_FLOATS, FILLS, "[]", 1, 65535, NULL, LIST(data.size, data.nsize),
     "folder: [H, W] every image is fitted to at load (shorter side scaled to the target, "
     "bilinear with antialias, centre crop); S alone = [S, S]; [] = the images' own size, "
     "which must agree"},
    {"data.skip_bad", T_BOOL, 0, "false", 0, 0, NULL, FIELD(data.skip_bad), 0,
     "folder: leave out (and count) images that cannot be decoded instead of failing"},
    {"data.max_pixels", T_INT64, 0, "67108864L", 1, 4294836225.0, NULL, FIELD(data.max_pixels), 0,
     "folder and predict: an image whose header declares more pixels (height x width) is bad, "
     "refused before it is decoded; 2^26 = 8192 x 8192 (see docs/data.md)"},
    {"data.select_classes", T_CUSTOM, 0, "[]", 0, 0, NULL, FIELD(data.select_classes), 0,
     "keep only these classes (of train, validation and test), relabelled 0, 1, ... in the "
     "order given; [] = all"},
    {"data.val_fraction", T_FLOAT, MAX_OPEN, "0.0", 0, 1, NULL, FIELD(data.val_fraction), 0,
     "share of the training set held out (stratified, by train.seed) to choose "
     "best.safetensors on; 0 = none (a folder's val/ is used when present)"},
    {"data.augment.resized_crop", T_BOOL, 0, "false", 0, 0, NULL, FIELD(data.augment.resized_crop),
     0, "augmentation: torchvision RandomResizedCrop to the image size (crop_scale, crop_ratio)"},
    {"data.augment.crop_scale", T_FLOATS, MIN_OPEN, "[0.08, 1.0]", 0, 1, NULL,
     LIST(data.augment.crop_scale, data.augment.ncrop_scale),
     "resized_crop: [min, max] share of the image's area the crop box covers"},
    {"data.augment.crop_ratio", T_FLOATS, MIN_OPEN, "[0.75, 1.3333334]", 0, 100, NULL,
     LIST(data.augment.crop_ratio, data.augment.ncrop_ratio),
     "resized_crop: [min, max] width / height of the crop box (drawn log-uniformly)"},
    {"data.augment.rotate", T_FLOAT, 0, "0.0", 0, 180, NULL, FIELD(data.augment.rotate), 0,
     "augmentation: rotate by an angle uniform in [-rotate, rotate] degrees (bilinear); 0 = off"},
    {"data.augment.rotate_fill", T_INT, 0, "0", 0, 255, NULL, FIELD(data.augment.rotate_fill), 0,
     "rotate: pixel value (0..255, before normalization) of the corners brought in"},
    {"data.augment.brightness", T_FLOAT, 0, "0.0", 0, 100, NULL, FIELD(data.augment.brightness), 0,
     "augmentation: multiply pixels by a factor uniform in [max(0, 1-v), 1+v]; 0 = off"},
    {"data.augment.contrast", T_FLOAT, 0, "0.0", 0, 100, NULL, FIELD(data.augment.contrast), 0,
     "augmentation: blend with the image's mean grey by a factor uniform in [max(0, 1-v), 1+v]"},
    {"data.augment.saturation", T_FLOAT, 0, "0.0", 0, 100, NULL, FIELD(data.augment.saturation), 0,
     "augmentation, RGB only: blend with each pixel's grey by a factor uniform in "
     "[max(0, 1-v), 1+v]"},
    {"data.augment.erase", T_FLOAT, 0, "0.0", 0, 1, NULL, FIELD(data.augment.erase), 0,
     "augmentation: probability of torchvision RandomErasing (erase_scale, erase_ratio, "
     "erase_value); 0 = off"},
    {"data.augment.erase_scale", T_FLOATS, MIN_OPEN, "[0.02, 0.33]", 0, 1, NULL,
     LIST(data.augment.erase_scale, data.augment.nerase_scale),
     "erase: [min, max] share of the image's area erased"},
    {"data.augment.erase_ratio", T_FLOATS, MIN_OPEN, "[0.3, 3.3]", 0, 100, NULL,
     LIST(data.augment.erase_ratio, data.augment.nerase_ratio),
     "erase: [min, max] height / width of the rectangle (drawn log-uniformly)"},
    {"data.augment.erase_value", T_FLOAT, 0, "0.0", -INF, INF, NULL,
     FIELD(data.augment.erase_value), 0,
     "erase: the value written, in normalized units (0 = the mean)"},

    {"model.name", T_STRING, 0, "\"\"", 0, 0, NULL, FIELD(model.name), 0,
     "free text shown in logs"},
    {"model.blocks", T_BLOCKS, 0, "{}", 0, 0, NULL, 0, 0, 0,
     "named layer lists with parameters, used in model.layers as { block = \"NAME\"; "
     "name = \"stage1\"; repeat = 3; PARAM = VALUE; } and expanded at load (docs/config.md, "
     "\"Blocks\")"},
    {"model.layers", T_LAYERS, REQUIRED, NULL, 0, 0, NULL, FIELD(model.layers), 0,
     "list of layer groups, input to output: ( { type = \"conv2d\"; out_channels = 16; "
     "kernel = 3; }, ... ); see the layer table below"},

    {"loss.type", T_ENUM, 0, "\"cross_entropy\"", 0, 0, &dt_loss_kind_names, ENUM(loss.type), 0,
     "nll expects log-probabilities (end the model with log_softmax); cross_entropy takes "
     "raw scores"},
    {"loss.label_smoothing", T_FLOAT, 0, "0.0", 0, 1, NULL, FIELD(loss.label_smoothing), 0,
     "cross_entropy only: target (1 - eps) on the label + eps / classes on every class, as "
     "torch.nn.CrossEntropyLoss(label_smoothing=eps)"},

    {"optimizer.type", T_ENUM, 0, "\"sgd\"", 0, 0, &dt_optim_type_names, ENUM(optimizer.type), 0,
     "update rule, as in torch.optim"},
    {"optimizer.lr", T_FLOAT, 0, "0.0", 0, 10, NULL, FIELD(optimizer.lr), 0,
     "learning rate; 0 = PyTorch's default for the type (sgd 0.01, adam/adamw 0.001, "
     "adadelta 1.0)"},
    {"optimizer.momentum", T_FLOAT, 0, "0.0", 0, 1, NULL, FIELD(optimizer.momentum), 0,
     "sgd momentum"},
    {"optimizer.dampening", T_FLOAT, 0, "0.0", 0, 1, NULL, FIELD(optimizer.dampening), 0,
     "sgd momentum dampening"},
    {"optimizer.weight_decay", T_FLOAT, 0, "0.0", 0, 10, NULL, FIELD(optimizer.weight_decay), 0,
     "L2 penalty (sgd, adam, adadelta) or decoupled decay (adamw); not given = the type's "
     "default (adamw 0.01, the others 0)"},
    {"optimizer.nesterov", T_BOOL, 0, "false", 0, 0, NULL, FIELD(optimizer.nesterov), 0,
     "sgd: Nesterov momentum"},
    {"optimizer.weight_decay_skip", T_ENUM, 0, "\"none\"", 0, 0, &dt_decay_skip_names,
     ENUM(optimizer.weight_decay_skip), 0,
     "none = decay every parameter (torch's single group); bias_and_norm = no decay for "
     "one-dimensional parameters (biases, batchnorm weight and bias), as a second torch "
     "parameter group with weight_decay 0"},
    {"optimizer.clip_grad_norm", T_FLOAT, 0, "0.0", 0, 1e6, NULL, FIELD(optimizer.clip_grad_norm),
     0,
     "clip the global L2 norm of all gradients (after the all-reduce) to this value, as "
     "torch.nn.utils.clip_grad_norm_; 0 = off"},
    {"optimizer.amsgrad", T_BOOL, 0, "false", 0, 0, NULL, FIELD(optimizer.amsgrad), 0,
     "adam/adamw: AMSGrad variant"},
    {"optimizer.beta1", T_FLOAT, MAX_OPEN, "0.9", 0, 1, NULL, FIELD(optimizer.beta1), 0,
     "adam/adamw: first-moment decay"},
    {"optimizer.beta2", T_FLOAT, MAX_OPEN, "0.999", 0, 1, NULL, FIELD(optimizer.beta2), 0,
     "adam/adamw: second-moment decay"},
    {"optimizer.eps", T_FLOAT, 0, "0.0", 0, 1, NULL, FIELD(optimizer.eps), 0,
     "denominator guard; 0 = PyTorch's default for the type (1e-8 adam/adamw, 1e-6 "
     "adadelta)"},
    {"optimizer.rho", T_FLOAT, 0, "0.9", 0, 1, NULL, FIELD(optimizer.rho), 0,
     "adadelta: running-average decay"},
    {"optimizer.param_groups", T_CUSTOM, 0, "()", 0, 0, NULL, FIELD(optimizer.param_groups), 0,
     "parameter groups with their own rate, as torch's param_groups: ( { match = [\"fc\"]; "
     "lr_scale = 10.0; } ) trains the tensors named fc... at optimizer.lr x 10 (names or "
     "dotted prefixes; a later group wins)"},
    {"optimizer.schedule.type", T_ENUM, 0, "\"constant\"", 0, 0, &dt_schedule_type_names,
     ENUM(optimizer.schedule.type), 0,
     "learning-rate schedule over epochs: constant, step (x gamma every step_size epochs) "
     "or cosine (to min_lr at the last step), each per step; one_cycle = torch OneCycleLR "
     "(cos, no momentum cycling) with optimizer.lr as max_lr"},
    {"optimizer.schedule.step_size", T_INT, 0, "1", 1, 1000000, NULL,
     FIELD(optimizer.schedule.step_size), 0, "step: epochs between decays"},
    {"optimizer.schedule.gamma", T_FLOAT, MIN_OPEN, "0.1", 0, 1, NULL,
     FIELD(optimizer.schedule.gamma), 0, "step: decay factor"},
    {"optimizer.schedule.min_lr", T_FLOAT, 0, "0.0", 0, 10, NULL, FIELD(optimizer.schedule.min_lr),
     0, "cosine: final learning rate"},
    {"optimizer.schedule.warmup_steps", T_INT, 0, "0", 0, 1000000000, NULL,
     FIELD(optimizer.schedule.warmup_steps), 0,
     "linear warmup from 0 over this many steps, in front of any schedule but one_cycle"},
    {"optimizer.schedule.warmup_epochs", T_INT, 0, "0", 0, 1000000, NULL,
     FIELD(optimizer.schedule.warmup_epochs), 0,
     "the same warmup given in epochs (x steps per epoch); not with warmup_steps"},
    {"optimizer.schedule.pct_start", T_DOUBLE, MIN_OPEN | MAX_OPEN, "0.3", 0, 1, NULL,
     FIELD(optimizer.schedule.pct_start), 0,
     "one_cycle: fraction of the steps spent rising to optimizer.lr"},
    {"optimizer.schedule.div_factor", T_DOUBLE, MIN_OPEN, "25.0", 0, 1e9, NULL,
     FIELD(optimizer.schedule.div_factor), 0, "one_cycle: the first rate is lr / div_factor"},
    {"optimizer.schedule.final_div_factor", T_DOUBLE, MIN_OPEN, "10000.0", 0, 1e12, NULL,
     FIELD(optimizer.schedule.final_div_factor), 0,
     "one_cycle: the last rate is lr / (div_factor x final_div_factor)"},

    {"train.epochs", T_INT, REQUIRED, NULL, 1, 100000, NULL, FIELD(train.epochs), 0,
     "passes over the training set"},
    {"train.batch_size", T_INT, REQUIRED, NULL, 1, MAX_BATCH, NULL, FIELD(train.batch_size), 0,
     "global batch, split across instances (see batch_per_instance)"},
    {"train.batch_per_instance", T_BOOL, 0, "false", 0, 0, NULL, FIELD(train.batch_per_instance), 0,
     "true = PyTorch DDP semantics: every instance takes batch_size samples, so the global "
     "batch grows with the instance count"},
    {"train.seed", T_INT64, 0, "1L", 0, 9.2e18, NULL, FIELD(train.seed), 0,
     "seed for initial weights, shuffling, dropout and augmentation"},
    {"train.max_steps", T_INT64, 0, "0L", 0, 1e15, NULL, FIELD(train.max_steps), 0,
     "stop after this many optimizer steps in total; 0 = no limit"},
    {"train.drop_last", T_BOOL, 0, "false", 0, 0, NULL, FIELD(train.drop_last), 0,
     "drop the final partial batch of each epoch"},
    {"train.init_from", T_STRING, 0, "\"\"", 0, 0, NULL, FIELD(train.init_from), 0,
     "fine-tuning: a checkpoint (dtrain's or a PyTorch safetensors file with the same names) "
     "whose tensors of matching name and shape replace the initial weights; \"\" = none"},
    {"train.freeze", T_CUSTOM, 0, "[]", 0, 0, NULL, FIELD(train.freeze), 0,
     "tensor names or dotted prefixes (\"conv1\", \"layer1\") whose parameters are not "
     "trained: no update, no weight decay"},
    {"train.eval_batch_size", T_INT, 0, "0", 0, MAX_BATCH, NULL, FIELD(train.eval_batch_size), 0,
     "batch used for evaluation; 0 = as in training"},
    {"train.precision", T_ENUM, 0, "\"fp32\"", 0, 0, &dt_precision_names, ENUM(train.precision), 0,
     "conv2d and linear arithmetic: bf16 reads bf16-rounded inputs and weights and accumulates "
     "in fp32 (PyTorch autocast); weights, optimizer and checkpoints stay fp32 (docs/bf16.md)"},
    {"train.bf16_winograd", T_BOOL, 0, "false", 0, 0, NULL, FIELD(train.bf16_winograd), 0,
     "with precision bf16: the convs that run emulated on Winograd (stride 1 on the "
     "avx512bf16 path) multiply in bf16 in its domain, V, U and dM rounded, not with "
     "autocast's numerics: about 1.2x faster on Zen 4, slower where VDPBF16PS is slower "
     "than an FMA (docs/bf16.md)"},
    {"train.early_stop.metric", T_STRING, 0, "\"none\"", 0, 0, NULL,
     FIELD(train.early_stop.metric_name), 0,
     "stop training when this stops improving: val_accuracy, val_loss (both need a validation "
     "split), train_loss, train_accuracy; none = off (train/early_stop.h)"},
    {"train.early_stop.patience", T_INT, 0, "5", 1, 1000000, NULL, FIELD(train.early_stop.patience),
     0, "epochs in a row without improvement before training stops"},
    {"train.early_stop.min_delta", T_DOUBLE, 0, "0.0", 0, 1e9, NULL,
     FIELD(train.early_stop.min_delta), 0,
     "an epoch improves when it beats the best by more than this (higher accuracy, lower "
     "loss)"},

    {"dist.instances", T_INT, 0, "1", 1, MAX_INSTANCE, NULL, FIELD(dist.instances), 0,
     "processes (ranks) training together; --instances overrides"},
    {"dist.threads", T_INT, 0, "0", 0, 1024, NULL, FIELD(dist.threads), 0,
     "compute threads per instance; 0 = the available cores divided among the instances; "
     "--threads overrides"},
    {"dist.batchnorm", T_ENUM, 0, "\"sync\"", 0, 0, &dt_bn_stats_names, ENUM(dist.batchnorm), 0,
     "batchnorm2d training statistics: sync = over the global batch of all instances "
     "(torch SyncBatchNorm; the instance count does not change the maths), per_instance = "
     "each instance's own batch (DDP without SyncBatchNorm)"},
    {"dist.split_invariant", T_BOOL, 0, "false", 0, 0, NULL, FIELD(dist.split_invariant), 0,
     "sum weight gradients over eighths of the global batch in a fixed tree, so that 1, 2, 4 or "
     "8 instances on one host compute the same bits (costs speed, most with large linear "
     "layers)"},
    {"dist.grad_dtype", T_ENUM, 0, "\"fp32\"", 0, 0, &dt_grad_dtype_names, ENUM(dist.grad_dtype), 0,
     "what the gradient all-reduce sends: bf16 rounds each instance's gradients to bf16 "
     "(nearest even, 8 significant bits), half the bytes on every link, and sums in fp32; "
     "partial sums passed between ranks are rounded again (independent of train.precision; "
     "not with split_invariant; docs/distributed.md)"},
    {"dist.backend", T_ENUM, 0, "\"auto\"", 0, 0, &dt_backend_request_names, ENUM(dist.backend), 0,
     "gradient all-reduce: shared memory on one host, tcp across hosts, hier = both, mpi "
     "(when built with MPI=1); auto picks"},
    {"dist.pin", T_ENUM, 0, "\"cores\"", 0, 0, &dt_pin_mode_names, ENUM(dist.pin), 0,
     "pin each instance to its own range of cores, to a socket, or not at all"},
    {"dist.cpu_list", T_STRING, 0, "\"\"", 0, 0, NULL, FIELD(dist.cpu_list), 0,
     "explicit cores to use, like \"0-7,16-23\" (overrides pin)"},
    {"dist.timeout", T_DOUBLE, MIN_OPEN, "300.0", 0, 86400, NULL, FIELD(dist.timeout), 0,
     "seconds a collective waits for a peer before failing"},

    {"checkpoint.dir", T_STRING, 0, "\"\"", 0, 0, NULL, FIELD(checkpoint.dir), 0,
     "where checkpoints go; empty = runs/NAME, NAME being the config file's name without its "
     "extension"},
    {"checkpoint.every", T_INT, 0, "1", 0, 1000000, NULL, FIELD(checkpoint.every), 0,
     "epochs between checkpoints; 0 = only at the end"},
    {"checkpoint.every_steps", T_INT, 0, "0", 0, 1000000000, NULL, FIELD(checkpoint.every_steps), 0,
     "also write last.safetensors every N optimizer steps, mid-epoch (resumes exactly); "
     "0 = off"},
    {"checkpoint.every_minutes", T_DOUBLE, 0, "0.0", 0, 1e6, NULL, FIELD(checkpoint.every_minutes),
     0, "also write last.safetensors every M minutes of training (rank 0's clock); 0 = off"},
    {"checkpoint.best", T_BOOL, 0, "true", 0, 0, NULL, FIELD(checkpoint.best), 0,
     "also keep best.safetensors: the epoch with the best validation accuracy, else the "
     "lowest training loss"},
    {"checkpoint.on_usr1", T_ENUM, 0, "\"stop\"", 0, 0, &dt_usr1_action_names,
     ENUM(checkpoint.on_usr1), 0,
     "SIGUSR1 (e.g. Slurm's --signal=B:USR1@90): every rank stops at one step, rank 0 writes "
     "last.safetensors, then stop (exit 143) or continue training"},

    {"log.every", T_INT, 0, "100", 0, 1000000000, NULL, FIELD(log.every), 0,
     "steps between progress lines when stderr is not a terminal; 0 = once per epoch; "
     "--log-every overrides"},
    {"log.json", T_BOOL, 0, "false", 0, 0, NULL, FIELD(log.json), 0,
     "one JSON object per event on stdout; --json sets it"},
    {"log.quiet", T_BOOL, 0, "false", 0, 0, NULL, FIELD(log.quiet), 0,
     "print nothing but errors; --quiet sets it"},
    {"log.profile", T_BOOL, 0, "false", 0, 0, NULL, FIELD(log.profile), 0,
     "per-layer forward/backward times at the end; --profile sets it"},
};
#define NKEYS (sizeof keys / sizeof keys[0])

#define LFIELD(f) offsetof(struct dt_layer_spec, f), sizeof(((struct dt_layer_spec *)0)->f)
/* A layer's enum field, stored as an int (ENUM's check). */
#define LENUM(f)                                                                                   \
    offsetof(struct dt_layer_spec, f),                                                             \
        sizeof(int) / (sizeof(((struct dt_layer_spec *)0)->f) == sizeof(int))

/* Keys a layer entry may carry besides `type`. REQUIRED here means "required by every kind
 * that accepts the key": their default (0) is outside the range. */
static const struct key layer_keys[] = {
    {"out_channels", T_INT, REQUIRED, NULL, 1, 65536, NULL, LFIELD(out_channels), 0,
     "output channels (input channels come from the previous layer)"},
    {"out_features", T_INT, REQUIRED, NULL, 1, 65536, NULL, LFIELD(out_features), 0,
     "output features (input features come from the previous layer)"},
    {"kernel", T_INT, REQUIRED, NULL, 1, 64, NULL, LFIELD(kernel), 0, "square kernel size"},
    {"stride", T_INT, 0, "unset", 1, 64, NULL, LFIELD(stride), 0,
     "step; unset = 1 for conv2d, the kernel size for pools"},
    {"padding", T_INT, 0, "0", 0, 64, NULL, LFIELD(padding), 0, "zero padding on each side"},
    {"bias", T_BOOL, 0, "true", 0, 0, NULL, LFIELD(bias), 0, "learn an additive bias"},
    {"algo", T_ENUM, 0, "\"auto\"", 0, 0, &dt_layer_algo_names, LENUM(algo), 0,
     "convolution algorithm; auto = the fastest for the shape (docs/kernels.md); an algorithm "
     "that cannot run the shape falls back to direct, then gemm"},
    {"p", T_FLOAT, MAX_OPEN, "0.5", 0, 1, NULL, LFIELD(p), 0, "drop probability"},
    {"eps", T_FLOAT, MIN_OPEN, "1e-5", 0, 1, NULL, LFIELD(eps), 0, "variance guard"},
    {"momentum", T_FLOAT, 0, "0.1", 0, 1, NULL, LFIELD(momentum), 0,
     "running-statistics update rate"},
    {"affine", T_BOOL, 0, "true", 0, 0, NULL, LFIELD(affine), 0, "learn scale and shift"},
    {"from", T_INT, REQUIRED, NULL, -64, -2, NULL, LFIELD(from), 0,
     "add, concat: the layer whose output joins this layer's input, counted back from this "
     "layer (-2 = two layers back; Darknet's [shortcut] from)"},
    {"shortcut", T_ENUM, 0, "\"identity\"", 0, 0, &dt_layer_shortcut_names, LENUM(shortcut), 0,
     "add: identity (shapes equal) or projection (1x1 conv with the stride that fits, then "
     "batchnorm2d)"},
    {"batchnorm", T_BOOL, 0, "true", 0, 0, NULL, LFIELD(batchnorm), 0,
     "add with projection: batchnorm2d after the 1x1 conv (without it the conv has a bias)"},
};
#define NLAYER_KEYS (sizeof layer_keys / sizeof layer_keys[0])

/* State of one load: where each key came from, for messages about it later. */
struct load {
    struct dt_config *cfg;
    const char *file;
    config_t lc;
    int line[NKEYS];                         /* line in the file, 0 = not in the file */
    bool by_set[NKEYS];                      /* last given by --set */
    const config_setting_t *blocks, *layers; /* model.blocks and model.layers in the file */
    char *layers_source;                     /* both as written, when blocks are used (malloc'd) */
    bool layers_edited; /* a --set changed the layer list: the text shows it expanded */
};

/* ---- small helpers ---- */

static void set_string(char *dst, size_t size, const char *src)
{
    /* Zero the whole buffer so equal configs compare equal byte for byte. */
    memset(dst, 0, size);
    strncpy(dst, src, size - 1);
}

static const struct key *find_key(const struct key *table, size_t n, const char *path)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(table[i].path, path) == 0)
            return &table[i];
    return NULL;
}

static bool is_group_path(const char *path)
{
    size_t len = strlen(path);
    for (size_t i = 0; i < NKEYS; i++)
        if (strncmp(keys[i].path, path, len) == 0 && keys[i].path[len] == '.')
            return true;
    return false;
}

static const char *last_component(const char *path)
{
    const char *dot = strrchr(path, '.');
    return dot ? dot + 1 : path;
}

/* The schema key a mistyped path most likely meant: same last component in another group
 * ("train.lr" -> optimizer.lr), else the closest spelling within two edits. */
static const char *suggest_key(const char *path)
{
    const char *best = NULL;
    int best_d = 3;
    size_t len = strlen(path);
    for (size_t i = 0; i < NKEYS; i++) {
        if (strcmp(last_component(keys[i].path), last_component(path)) == 0 ||
            (len >= 4 && strncmp(keys[i].path, path, len) == 0))
            return keys[i].path;
        int d = dt_edit_distance(path, keys[i].path);
        if (d < best_d) {
            best_d = d;
            best = keys[i].path;
        }
    }
    return best;
}

static int unknown_key(const char *where, const char *path)
{
    const char *s = suggest_key(path);
    if (s)
        return dt_fail(DT_EUSAGE, "%s: unknown key (did you mean %s?)", where, s);
    return dt_fail(DT_EUSAGE, "%s: unknown key (see docs/config.md for the keys)", where);
}

static void describe_range(char *out, size_t size, const struct key *k)
{
    bool lo = k->min > -INF, hi = k->max < INF;
    if (lo && hi && !(k->flags & (MIN_OPEN | MAX_OPEN)))
        snprintf(out, size, "between %.10g and %.10g", k->min, k->max);
    else if (lo && hi)
        snprintf(out, size, "in %c%g, %g%c", k->flags & MIN_OPEN ? '(' : '[', k->min, k->max,
                 k->flags & MAX_OPEN ? ')' : ']');
    else if (lo)
        snprintf(out, size, "%s %g", k->flags & MIN_OPEN ? "greater than" : "at least", k->min);
    else
        snprintf(out, size, "a finite number");
}

static bool in_range(const struct key *k, double v)
{
    if (!isfinite(v))
        return false;
    if (k->flags & MIN_OPEN ? v <= k->min : v < k->min)
        return false;
    return k->flags & MAX_OPEN ? v < k->max : v <= k->max;
}

static int range_error(const char *where, const struct key *k, const char *got)
{
    char range[96];
    describe_range(range, sizeof range, k);
    return dt_fail(DT_EUSAGE, "%s: must be %s, got %s", where, range, got);
}

/* ---- integers wider than libconfig 1.5 reads them ---- */

/* The value of an integer literal (decimal or 0x hex, optional sign, optional L), saturated at
 * the 64-bit limits; false when `tok` is not one. */
static bool integer_literal(const char *tok, size_t len, long long *out, bool *has_l)
{
    size_t i = 0;
    bool neg = false;
    if (i < len && (tok[i] == '-' || tok[i] == '+'))
        neg = tok[i++] == '-';
    *has_l = len > i && tok[len - 1] == 'L';
    size_t end = len - *has_l;
    bool hex = end - i > 2 && tok[i] == '0' && (tok[i + 1] == 'x' || tok[i + 1] == 'X');
    if (hex)
        i += 2;
    if (i >= end)
        return false;
    unsigned long long mag = 0, limit = neg ? (unsigned long long)INT64_MAX + 1 : INT64_MAX;
    for (; i < end; i++) {
        int d = isdigit((unsigned char)tok[i])           ? tok[i] - '0'
                : hex && isxdigit((unsigned char)tok[i]) ? tolower((unsigned char)tok[i]) - 'a' + 10
                                                         : -1;
        if (d < 0)
            return false;
        unsigned base = hex ? 16 : 10;
        mag = mag > (limit - (unsigned)d) / base ? limit : mag * base + (unsigned)d;
    }
    *out = neg ? (mag > INT64_MAX ? INT64_MIN : -(long long)mag) : (long long)mag;
    return true;
}

/* libconfig 1.5 keeps an integer literal without the L suffix in 32 bits, silently wrapped
 * (epochs = 4294967297 reads as 1, batch_size = 0x100000020 as 32), and reads a hex literal
 * with L modulo 2^64. So every integer literal that does not fit 32 bits, or has an L, is
 * rewritten as its exact decimal value with L (saturated at the 64-bit limits, which no key
 * accepts) before libconfig sees the text: keys are then range-checked on the value written.
 * Comments and strings are left alone; no line changes, so messages keep their line numbers.
 * malloc'd; NULL when out of memory. */
static char *widen_integers(const char *text)
{
    size_t n = strlen(text), o = 0;
    char *out = malloc(n * 2 + 32); /* a token grows to at most 21 characters + L */
    if (!out)
        return NULL;
    for (size_t i = 0; i < n;) {
        const char *p = text + i;
        size_t len = 1;
        if (*p == '"') { /* a string, with backslash escapes */
            while (i + len < n && p[len] != '"')
                len += p[len] == '\\' && i + len + 1 < n ? 2 : 1;
            len += i + len < n;
        } else if (*p == '#' || (p[0] == '/' && p[1] == '/')) {
            while (i + len < n && p[len] != '\n')
                len++;
        } else if (p[0] == '/' && p[1] == '*') {
            const char *close = strstr(p + 2, "*/");
            len = close ? (size_t)(close - p) + 2 : n - i;
        } else if (isalnum((unsigned char)*p) || *p == '_' || *p == '*' || *p == '.' ||
                   ((*p == '-' || *p == '+') && (isdigit((unsigned char)p[1]) || p[1] == '.'))) {
            /* a name or a number: letters, digits, '_', '*', '.', '-' inside names, and a
             * sign only after the exponent's e of a decimal number */
            bool name = isalpha((unsigned char)*p) || *p == '*';
            while (i + len < n) {
                char c = p[len];
                if (isalnum((unsigned char)c) || c == '_' || c == '.' || c == '*' ||
                    (name && c == '-') ||
                    (!name && (c == '-' || c == '+') && (p[len - 1] == 'e' || p[len - 1] == 'E') &&
                     !memchr(p, 'x', len) && !memchr(p, 'X', len)))
                    len++;
                else
                    break;
            }
            long long v;
            bool has_l;
            if (!name && integer_literal(p, len, &v, &has_l) &&
                (has_l || v > INT32_MAX || v < INT32_MIN)) {
                o += (size_t)sprintf(out + o, "%lldL", v);
                i += len;
                continue;
            }
        }
        memcpy(out + o, p, len);
        o += len;
        i += len;
    }
    out[o] = 0;
    return out;
}

/* ---- storing one value ---- */

/* `v` in the fewest digits that read back as exactly v (0.1, 0.9999999999, 1e-320). */
static void shortest(char *out, size_t size, double v)
{
    for (int digits = 1; digits <= 17; digits++) {
        snprintf(out, size, "%.*g", digits, v);
        if (strtod(out, NULL) == v)
            return;
    }
}

static bool is_number(const config_setting_t *s)
{
    int t = config_setting_type(s);
    return t == CONFIG_TYPE_INT || t == CONFIG_TYPE_INT64 || t == CONFIG_TYPE_FLOAT;
}

static bool is_integer(const config_setting_t *s)
{
    int t = config_setting_type(s);
    return t == CONFIG_TYPE_INT || t == CONFIG_TYPE_INT64;
}

static double number_of(const config_setting_t *s)
{
    return config_setting_type(s) == CONFIG_TYPE_FLOAT ? config_setting_get_float(s)
                                                       : (double)config_setting_get_int64(s);
}

/* A number given for a float key, as it will be stored: refused when the float is not the
 * number any more in a way that matters. A nonzero value that becomes 0, a subnormal or
 * infinity (1e-320, 1e39) is not representable; one that rounds to outside the key's range
 * (p = 0.999999999 becomes 1, which is excluded) fails the range check on the stored value. */
static int check_float(const struct key *k, double dv, float *out, const char *where,
                       const char *got)
{
    float fv = (float)dv;
    if (!in_range(k, dv))
        return range_error(where, k, got);
    if (dv != 0 && !isnormal(fv))
        return dt_fail(DT_EUSAGE,
                       "%s: %s is not representable as a 32-bit float (magnitudes from %g to "
                       "%g, or 0)",
                       where, got, (double)FLT_MIN, (double)FLT_MAX);
    if (!in_range(k, (double)fv)) {
        char range[96];
        describe_range(range, sizeof range, k);
        return dt_fail(DT_EUSAGE, "%s: %s rounds to %.9g as a 32-bit float, which is not %s", where,
                       got, (double)fv, range);
    }
    *out = fv;
    return 0;
}

static int store_floats(void *base, const struct key *k, const config_setting_t *s,
                        const char *where)
{
    int cap = (int)(k->size / sizeof(float)), n = 1;
    float *dst = (float *)((char *)base + k->offset);
    float vals[DT_MAX_CHANNELS];
    if (cap > DT_MAX_CHANNELS) /* vals bounds every list key, whatever its field holds */
        cap = DT_MAX_CHANNELS;
    if ((k->flags & AUTO) && config_setting_type(s) == CONFIG_TYPE_STRING &&
        !strcmp(config_setting_get_string(s), "auto")) {
        memset(dst, 0, k->size);
        *(int *)((char *)base + k->count_offset) = DT_CONFIG_AUTO;
        return 0;
    }
    if (config_setting_is_array(s) || config_setting_is_list(s)) {
        n = config_setting_length(s);
        if (n > cap)
            return dt_fail(DT_EUSAGE, "%s: at most %d values (one per channel), got %d", where, cap,
                           n);
        for (int i = 0; i < n; i++) {
            const config_setting_t *e = config_setting_get_elem(s, (unsigned)i);
            if (!is_number(e))
                return dt_fail(DT_EUSAGE, "%s: element %d: expected a number, got %s", where, i,
                               dt_config_kind_name(e));
            char got[64];
            shortest(got, 32, number_of(e));
            snprintf(got + strlen(got), sizeof got - strlen(got), " (element %d)", i);
            int rc = check_float(k, number_of(e), &vals[i], where, got);
            if (rc)
                return rc;
        }
    } else if (is_number(s)) {
        char got[32];
        shortest(got, sizeof got, number_of(s));
        int rc = check_float(k, number_of(s), &vals[0], where, got);
        if (rc)
            return rc;
        n = k->flags & FILLS ? cap : 1; /* a scalar fills the list: size = 28 is [28, 28] */
        for (int i = 1; i < n; i++)
            vals[i] = vals[0];
    } else {
        return dt_fail(DT_EUSAGE, "%s: expected a list of numbers like [0.5]%s, got %s", where,
                       k->flags & AUTO ? " or \"auto\"" : "", dt_config_kind_name(s));
    }
    memset(dst, 0, k->size);
    memcpy(dst, vals, (size_t)n * sizeof(float));
    *(int *)((char *)base + k->count_offset) = n;
    return 0;
}

/* "must be one of a, b, c, got "x"", with the likely meant one when x is a typo of it. */
static int not_a_choice(const struct key *k, const char *v, const char *where)
{
    char allowed[160], hint[96] = "";
    dt_names_join(k->names, allowed, sizeof allowed);
    const char *meant = dt_names_suggest(k->names, v);
    if (meant)
        snprintf(hint, sizeof hint, " (did you mean %s?)", meant);
    return dt_fail(DT_EUSAGE, "%s: must be one of %s, got \"%s\"%s", where, allowed, v, hint);
}

/* T_STRING and T_ENUM: the text checked (length, names) and stored as text or as the value. */
static int store_string(void *base, const struct key *k, const config_setting_t *s,
                        const char *where)
{
    if (config_setting_type(s) != CONFIG_TYPE_STRING)
        return dt_fail(DT_EUSAGE, "%s: expected a string, got %s", where, dt_config_kind_name(s));
    const char *v = config_setting_get_string(s);
    if (k->type == T_STRING && strlen(v) >= k->size)
        return dt_fail(DT_EUSAGE, "%s: at most %zu characters, got %zu", where, k->size - 1,
                       strlen(v));
    int value = k->names ? dt_names_find(k->names, v) : 0;
    if (value < 0)
        return not_a_choice(k, v, where);
    if (k->type == T_ENUM)
        *(int *)((char *)base + k->offset) = value;
    else
        set_string((char *)base + k->offset, k->size, v);
    return 0;
}

/* Checks `s` against key `k` and writes it into the field at base + k->offset. */
static int store_value(void *base, const struct key *k, const config_setting_t *s,
                       const char *where)
{
    void *field = (char *)base + k->offset;
    char got[80];
    switch (k->type) {
    case T_INT:
    case T_INT64:
        if (!is_integer(s))
            return dt_fail(DT_EUSAGE, "%s: expected an integer, got %s", where,
                           dt_config_kind_name(s));
        long long iv = config_setting_get_int64(s);
        /* widen_integers saturated a literal beyond 64 bits; no key's range reaches there */
        snprintf(got, sizeof got, "%lld%s", iv,
                 iv == INT64_MAX || iv == INT64_MIN ? " (the 64-bit limit, or beyond)" : "");
        if (!in_range(k, (double)iv))
            return range_error(where, k, got);
        if (k->type == T_INT)
            *(int *)field = (int)iv;
        else
            *(long long *)field = iv;
        return 0;
    case T_FLOAT:
    case T_DOUBLE:
        if (!is_number(s))
            return dt_fail(DT_EUSAGE, "%s: expected a number, got %s", where,
                           dt_config_kind_name(s));
        double dv = number_of(s);
        shortest(got, sizeof got, dv);
        if (k->type == T_FLOAT)
            return check_float(k, dv, (float *)field, where, got);
        if (!in_range(k, dv))
            return range_error(where, k, got);
        *(double *)field = dv;
        return 0;
    case T_BOOL:
        if (config_setting_type(s) != CONFIG_TYPE_BOOL)
            return dt_fail(DT_EUSAGE, "%s: expected true or false, got %s", where,
                           dt_config_kind_name(s));
        *(bool *)field = config_setting_get_bool(s) != 0;
        return 0;
    case T_STRING:
    case T_ENUM:
        return store_string(base, k, s, where);
    case T_FLOATS:
        return store_floats(base, k, s, where);
    case T_CUSTOM:
        return codec_of(k)->load(field, s, where);
    case T_LAYERS:
    case T_BLOCKS:
        break;
    }
    return dt_fail(DT_EUSAGE, "%s: internal error: unexpected key type", where);
}

/* ---- layers ---- */

/* "FILE:LINE: model.layers.I" (or "--set model.layers.I") plus an optional ".key". */
static void layer_where(char *out, size_t size, const char *file, const config_setting_t *s,
                        int index, const char *key)
{
    if (file)
        snprintf(out, size, "%s:%d: model.layers.%d%s%s", file, config_setting_source_line(s),
                 index, key ? "." : "", key ? key : "");
    else
        snprintf(out, size, "--set model.layers.%d%s%s", index, key ? "." : "", key ? key : "");
}

static void join_keys(char *out, size_t size, const char *const *names)
{
    size_t o = 0;
    out[0] = 0;
    for (int i = 0; names[i] && o < size; i++)
        o += (size_t)snprintf(out + o, size - o, "%s%s", i ? ", " : "", names[i]);
    if (!names[0])
        snprintf(out, size, "no keys besides type");
}

static int layer_kind_of(const config_setting_t *g, const char *where,
                         const struct dt_layer_kind **kind)
{
    const config_setting_t *t = config_setting_get_member(g, "type");
    if (!t)
        return dt_fail(DT_EUSAGE, "%s: missing required key 'type' (one of: %s)", where,
                       dt_layer_kind_names());
    if (config_setting_type(t) != CONFIG_TYPE_STRING)
        return dt_fail(DT_EUSAGE, "%s.type: expected a string, got %s", where,
                       dt_config_kind_name(t));
    *kind = dt_layer_kind_find(config_setting_get_string(t));
    if (!*kind)
        return dt_fail(DT_EUSAGE, "%s.type: unknown layer type \"%s\" (known: %s)", where,
                       config_setting_get_string(t), dt_layer_kind_names());
    return 0;
}

/* Keys whose default is out of range must be given for the kinds that take them. */
static int check_layer_required(const struct dt_layer_spec *spec, const struct dt_layer_kind *kind,
                                const char *where)
{
    for (int i = 0; kind->keys[i]; i++) {
        const struct key *k = find_key(layer_keys, NLAYER_KEYS, kind->keys[i]);
        if (k && (k->flags & REQUIRED) && *(const int *)((const char *)spec + k->offset) < k->min)
            return dt_fail(DT_EUSAGE, "%s: %s needs %s", where, kind->name, k->path);
    }
    return 0;
}

static int set_layer_key(struct dt_layer_spec *spec, const struct dt_layer_kind *kind,
                         const char *name, const config_setting_t *v, const char *where)
{
    const struct key *k = find_key(layer_keys, NLAYER_KEYS, name);
    if (!dt_layer_kind_takes(kind, name) || !k) {
        char accepted[256];
        join_keys(accepted, sizeof accepted, kind->keys);
        return dt_fail(DT_EUSAGE, "%s: %s does not take this key (it takes: %s)", where, kind->name,
                       accepted);
    }
    return store_value(spec, k, v, where);
}

static int load_layer(const config_setting_t *g, int index, const char *file,
                      struct dt_layer_spec *spec)
{
    char where[1200], kwhere[1300];
    layer_where(where, sizeof where, file, g, index, NULL);
    if (!config_setting_is_group(g))
        return dt_fail(DT_EUSAGE, "%s: expected a group like { type = \"relu\"; }, got %s", where,
                       dt_config_kind_name(g));
    const struct dt_layer_kind *kind;
    int rc = layer_kind_of(g, where, &kind);
    if (rc)
        return rc;
    dt_layer_spec_defaults(spec);
    set_string(spec->type, sizeof spec->type, kind->name);
    spec->line = file ? config_setting_source_line(g) : 0;
    for (int i = 0; i < config_setting_length(g); i++) {
        const config_setting_t *m = config_setting_get_elem(g, (unsigned)i);
        const char *name = config_setting_name(m);
        if (strcmp(name, "type") == 0)
            continue;
        layer_where(kwhere, sizeof kwhere, file, m, index, name);
        if (strcmp(name, "name") == 0) { /* every kind takes a name (its tensors' prefix) */
            if (config_setting_type(m) != CONFIG_TYPE_STRING)
                return dt_fail(DT_EUSAGE, "%s: expected a string, got %s", kwhere,
                               dt_config_kind_name(m));
            if ((rc = dt_layer_name_check(config_setting_get_string(m), kwhere)))
                return rc;
            set_string(spec->name, sizeof spec->name, config_setting_get_string(m));
            continue;
        }
        if ((rc = set_layer_key(spec, kind, name, m, kwhere)))
            return rc;
    }
    return check_layer_required(spec, kind, where);
}

static int load_layers(struct dt_config *cfg, const config_setting_t *s, const char *where,
                       const char *file)
{
    if (!config_setting_is_list(s))
        return dt_fail(DT_EUSAGE,
                       "%s: expected a list of layer groups ( { type = ...; }, ... ), got %s",
                       where, dt_config_kind_name(s));
    int n = config_setting_length(s);
    if (n < 1 || n > DT_MAX_LAYERS)
        return dt_fail(DT_EUSAGE, "%s: must have between 1 and %d layers, got %d", where,
                       DT_MAX_LAYERS, n);
    memset(cfg->model.layers, 0, sizeof cfg->model.layers);
    for (int i = 0; i < n; i++) {
        int rc =
            load_layer(config_setting_get_elem(s, (unsigned)i), i, file, &cfg->model.layers[i]);
        if (rc)
            return rc;
    }
    cfg->model.nlayers = n;
    return 0;
}

/* model.layers, its block uses expanded with model.blocks (train/config_blocks.h); the
 * names checked once the list is loaded. */
static int load_model_layers(struct load *ld, const config_setting_t *s, const char *where,
                             const char *file)
{
    int rc;
    if (!dt_blocks_used(ld->blocks, s)) {
        rc = load_layers(ld->cfg, s, where, file);
    } else {
        config_t out;
        config_init(&out);
        config_setting_t *flat;
        rc = dt_blocks_expand(ld->blocks, s, file, DT_MAX_LAYERS, &out, &flat);
        if (!rc)
            rc = load_layers(ld->cfg, flat, where, file);
        config_destroy(&out);
        if (!rc && file) {
            free(ld->layers_source);
            ld->layers_source = dt_blocks_source_text(ld->blocks, s, "");
            if (!ld->layers_source)
                rc = dt_fail(DT_ERUNTIME, "%s: out of memory", ld->file);
        }
    }
    if (!rc)
        rc = dt_layer_names_unique(ld->cfg->model.layers, ld->cfg->model.nlayers, ld->file);
    return rc;
}

/* ---- the file ---- */

static int apply_setting(struct load *ld, const struct key *k, const config_setting_t *s,
                         const char *file)
{
    char where[1200];
    if (file)
        snprintf(where, sizeof where, "%s:%d: %s", file, config_setting_source_line(s), k->path);
    else
        snprintf(where, sizeof where, "--set %s", k->path);
    size_t i = (size_t)(k - keys);
    ld->line[i] = file ? config_setting_source_line(s) : 0;
    ld->by_set[i] = file == NULL;
    if (k->type == T_BLOCKS) {
        if (!file)
            return dt_fail(DT_EUSAGE, "%s: blocks are defined in the config file", where);
        ld->blocks = s;
        return 0;
    }
    if (k->type == T_LAYERS && file && !config_setting_is_list(s))
        return load_layers(ld->cfg, s, where, file); /* fails: says what a layer list is */
    if (k->type == T_LAYERS && file) { /* loaded once the whole file is read (blocks may follow) */
        ld->layers = s;
        return 0;
    }
    if (k->type == T_LAYERS) {
        ld->layers_edited = true;
        return load_model_layers(ld, s, where, NULL);
    }
    return store_value(ld->cfg, k, s, where);
}

static int walk_group(struct load *ld, const config_setting_t *group, const char *prefix)
{
    for (int i = 0; i < config_setting_length(group); i++) {
        const config_setting_t *s = config_setting_get_elem(group, (unsigned)i);
        char path[256], where[1400];
        snprintf(path, sizeof path, "%s%s%s", prefix, *prefix ? "." : "", config_setting_name(s));
        snprintf(where, sizeof where, "%s:%d: %s", ld->file, config_setting_source_line(s), path);
        const struct key *k = find_key(keys, NKEYS, path);
        int rc;
        if (k)
            rc = apply_setting(ld, k, s, ld->file);
        else if (is_group_path(path) && config_setting_is_group(s))
            rc = walk_group(ld, s, path);
        else if (is_group_path(path))
            rc = dt_fail(DT_EUSAGE, "%s: expected a group { ... }, got %s", where,
                         dt_config_kind_name(s));
        else
            rc = unknown_key(where, path);
        if (rc)
            return rc;
    }
    return 0;
}

/* ---- overrides ---- */

static const char *expected(const struct key *k)
{
    switch (k->type) {
    case T_INT:
    case T_INT64:
        return "an integer";
    case T_FLOAT:
    case T_DOUBLE:
        return "a number";
    case T_BOOL:
        return "true or false";
    case T_STRING:
    case T_ENUM:
        return "a string";
    case T_FLOATS:
        return "a list of numbers like [0.5]";
    case T_LAYERS:
        return "a list of layer groups like ( { type = \"relu\"; } )";
    case T_BLOCKS:
        return "a group of blocks";
    case T_CUSTOM:
        return codec_of(k)->expected;
    }
    return "a value";
}

/* Parses VALUE as the libconfig value of `k` into ld's scratch config. Strings may be given
 * bare (--set data.dir=/tmp/x); 64-bit integers get the L suffix libconfig needs. */
static int parse_override_value(config_t *tmp, const struct key *k, const char *value,
                                const char *where, config_setting_t **out)
{
    bool bare_auto = (k->flags & AUTO) && !strcmp(value, "auto");
    if ((k->type == T_STRING || k->type == T_ENUM || bare_auto) && value[0] != '"') {
        config_setting_t *s = config_setting_add(config_root_setting(tmp), "v", CONFIG_TYPE_STRING);
        if (!s || !config_setting_set_string(s, value))
            return dt_fail(DT_EUSAGE, "%s: cannot store \"%s\"", where, value);
        *out = s;
        return 0;
    }
    size_t len = strlen(value);
    char *text = malloc(len + 16);
    if (!text)
        return dt_fail(DT_ERUNTIME, "%s: out of memory", where);
    snprintf(text, len + 16, "v = %s;", value);
    char *wide = widen_integers(text);
    free(text);
    if (!wide)
        return dt_fail(DT_ERUNTIME, "%s: out of memory", where);
    int ok = config_read_string(tmp, wide);
    free(wide);
    config_setting_t *root = config_root_setting(tmp);
    if (!ok || config_setting_length(root) != 1)
        return dt_fail(DT_EUSAGE, "%s: expected %s, got '%s'", where, expected(k), value);
    *out = config_setting_get_elem(root, 0);
    return 0;
}

/* --set model.layers.I[.key]=VALUE */
static int apply_layer_override(struct dt_config *cfg, const char *path, const char *value,
                                config_t *tmp)
{
    char where[400];
    snprintf(where, sizeof where, "--set %s", path);
    char *end;
    const char *p = path + strlen("model.layers.");
    long index = strtol(p, &end, 10);
    if (end == p || (*end && *end != '.'))
        return dt_fail(DT_EUSAGE, "%s: expected model.layers.INDEX.KEY", where);
    if (index < 0 || index >= cfg->model.nlayers)
        return dt_fail(DT_EUSAGE, "%s: there is no layer %ld (model.layers has %d: 0..%d)", where,
                       index, cfg->model.nlayers, cfg->model.nlayers - 1);
    if (!*end)
        return dt_fail(DT_EUSAGE, "%s: give a key: model.layers.%ld.KEY=VALUE", where, index);
    const char *name = end + 1;
    struct dt_layer_spec *spec = &cfg->model.layers[index];
    const struct dt_layer_kind *kind = dt_layer_kind_find(spec->type);
    static const struct key type_key = {"type", T_STRING, 0, NULL, 0, 0, NULL, 0, 32, 0, ""};
    const struct key *k =
        strcmp(name, "type") == 0 ? &type_key : find_key(layer_keys, NLAYER_KEYS, name);
    if (!kind)
        return dt_fail(DT_EUSAGE, "%s: internal error: layer type \"%s\"", where, spec->type);
    if (strcmp(name, "name") == 0) {
        int rc = dt_layer_name_check(value, where);
        if (!rc)
            set_string(spec->name, sizeof spec->name, value);
        return rc;
    }
    if (k != &type_key && (!k || !dt_layer_kind_takes(kind, name)))
        return set_layer_key(spec, kind, name, NULL, where); /* fails: names what it takes */
    config_setting_t *v;
    int rc = parse_override_value(tmp, k, value, where, &v);
    if (rc)
        return rc;
    if (k != &type_key)
        return set_layer_key(spec, kind, name, v, where);

    /* A new type keeps the values of the keys the new kind also takes. */
    const struct dt_layer_kind *nk = dt_layer_kind_find(config_setting_get_string(v));
    if (!nk)
        return dt_fail(DT_EUSAGE, "%s: unknown layer type \"%s\" (known: %s)", where,
                       config_setting_get_string(v), dt_layer_kind_names());
    struct dt_layer_spec old = *spec;
    dt_layer_spec_defaults(spec);
    set_string(spec->type, sizeof spec->type, nk->name);
    memcpy(spec->name, old.name, sizeof spec->name);
    spec->line = old.line;
    for (int i = 0; nk->keys[i]; i++) {
        const struct key *lk = find_key(layer_keys, NLAYER_KEYS, nk->keys[i]);
        if (lk)
            memcpy((char *)spec + lk->offset, (char *)&old + lk->offset, lk->size);
    }
    return check_layer_required(spec, nk, where);
}

static int apply_override(struct load *ld, const char *assignment)
{
    const char *eq = strchr(assignment, '=');
    if (!eq || eq == assignment)
        return dt_fail(DT_EUSAGE, "--set '%s': expected KEY=VALUE, like train.epochs=5",
                       assignment);
    char path[256], where[300];
    size_t n = (size_t)(eq - assignment);
    if (n >= sizeof path)
        return dt_fail(DT_EUSAGE, "--set: key too long");
    memcpy(path, assignment, n);
    path[n] = 0;
    snprintf(where, sizeof where, "--set %s", path);

    config_t tmp;
    config_init(&tmp);
    int rc;
    const struct key *k = find_key(keys, NKEYS, path);
    if (strncmp(path, "model.layers.", 13) == 0) {
        ld->layers_edited = true;
        rc = apply_layer_override(ld->cfg, path, eq + 1, &tmp);
    } else if (!k) {
        rc = unknown_key(where, path);
    } else {
        config_setting_t *v;
        rc = parse_override_value(&tmp, k, eq + 1, where, &v);
        if (!rc)
            rc = apply_setting(ld, k, v, NULL);
    }
    config_destroy(&tmp);
    return rc;
}

/* ---- defaults, derived values, cross-key checks ---- */

static int apply_defaults(struct dt_config *cfg)
{
    for (size_t i = 0; i < NKEYS; i++) {
        if (!keys[i].def || keys[i].type == T_BLOCKS)
            continue;
        config_t tmp;
        config_init(&tmp);
        config_setting_t *v;
        char where[128];
        snprintf(where, sizeof where, "default of %s", keys[i].path);
        int rc = parse_override_value(&tmp, &keys[i], keys[i].def, where, &v);
        if (!rc)
            rc = store_value(cfg, &keys[i], v, where);
        config_destroy(&tmp);
        if (rc)
            return rc;
    }
    return 0;
}

/* "FILE:LINE: key", "--set key" or "FILE: key": where the value in use came from. */
static void key_where(const struct load *ld, const char *path, char *out, size_t size)
{
    const struct key *k = find_key(keys, NKEYS, path);
    size_t i = (size_t)(k - keys);
    if (ld->by_set[i])
        snprintf(out, size, "--set %s", path);
    else if (ld->line[i])
        snprintf(out, size, "%s:%d: %s", ld->file, ld->line[i], path);
    else
        snprintf(out, size, "%s: %s", ld->file, path);
}

static int check_required(struct load *ld)
{
    for (size_t i = 0; i < NKEYS; i++) {
        if (!(keys[i].flags & REQUIRED) || ld->line[i] || ld->by_set[i])
            continue;
        char group[64];
        set_string(group, sizeof group, keys[i].path);
        *strchr(group, '.') = 0;
        const config_setting_t *g = config_lookup(&ld->lc, group);
        if (g)
            return dt_fail(DT_EUSAGE, "%s:%d: %s: missing required key", ld->file,
                           config_setting_source_line(g), keys[i].path);
        return dt_fail(DT_EUSAGE, "%s: %s: missing required key (there is no '%s' group)", ld->file,
                       keys[i].path, group);
    }
    return 0;
}

/* The folder-only keys: refused for the archive formats, sizes made whole. */
static int derive_folder(struct load *ld)
{
    struct dt_config *cfg = ld->cfg;
    char where[1400];
    bool folder = cfg->data.format == DT_DATA_FOLDER;
    const char *format = dt_names_name(&dt_data_format_names, (int)cfg->data.format);
    const char *only[] = {"data.size", "data.skip_bad", "data.channels"};
    bool set[] = {cfg->data.nsize > 0, cfg->data.skip_bad, cfg->data.channels != 0};
    for (int i = 0; i < 3 && !folder; i++)
        if (set[i]) {
            key_where(ld, only[i], where, sizeof where);
            return dt_fail(DT_EUSAGE, "%s: only data.format = \"folder\" uses it, this is %s",
                           where, format);
        }
    if (!folder)
        return 0;
    if (cfg->data.channels == 2) {
        key_where(ld, "data.channels", where, sizeof where);
        return dt_fail(DT_EUSAGE, "%s: expected 1 (gray) or 3 (RGB), got 2", where);
    }
    if (cfg->data.channels == 0)
        cfg->data.channels = cfg->data.nmean == 3 || cfg->data.nstd == 3 ? 3 : 1;
    key_where(ld, "data.size", where, sizeof where);
    if (cfg->data.nsize != 0 && cfg->data.nsize != 2)
        return dt_fail(DT_EUSAGE, "%s: expected [H, W], S for [S, S], or [], got %d values", where,
                       cfg->data.nsize);
    for (int i = 0; i < cfg->data.nsize; i++)
        if (cfg->data.size[i] != floorf(cfg->data.size[i]))
            return dt_fail(DT_EUSAGE, "%s: %g is not a whole number of pixels", where,
                           (double)cfg->data.size[i]);
    cfg->data.size_h = cfg->data.nsize ? (int)cfg->data.size[0] : 0;
    cfg->data.size_w = cfg->data.nsize ? (int)cfg->data.size[1] : 0;
    return 0;
}

static int derive_data(struct load *ld)
{
    struct dt_config *cfg = ld->cfg;
    char where[1400];
    const struct dt_reg_dataset *reg = dt_registry_find(cfg->data.dataset);
    key_where(ld, "data.dataset", where, sizeof where);
    if (!cfg->data.dataset[0])
        return dt_fail(DT_EUSAGE, "%s: must not be empty", where);
    enum dt_data_format *format = &cfg->data.format;
    if (!reg && *format == DT_DATA_FORMAT_UNSET)
        return dt_fail(DT_EUSAGE,
                       "%s: unknown dataset \"%s\" (known: %s; for your own files set "
                       "data.format = \"idx\", \"cifar10\", \"cifar100\" or \"folder\")",
                       where, cfg->data.dataset, dt_registry_names());
    if (reg && *format != DT_DATA_FORMAT_UNSET && reg->format != *format) {
        key_where(ld, "data.format", where, sizeof where);
        return dt_fail(DT_EUSAGE, "%s: \"%s\" does not match data.dataset \"%s\", which is %s",
                       where, dt_names_name(&dt_data_format_names, (int)*format), cfg->data.dataset,
                       dt_names_name(&dt_data_format_names, (int)reg->format));
    }
    if (*format == DT_DATA_FORMAT_UNSET)
        *format = reg->format;
    const char *format_name = dt_names_name(&dt_data_format_names, (int)*format);
    if (!cfg->data.dir[0]) {
        if ((size_t)snprintf(cfg->data.dir, sizeof cfg->data.dir, "%s/%s", dt_data_root(),
                             cfg->data.dataset) >= sizeof cfg->data.dir)
            return dt_fail(DT_EUSAGE, "%s: data.dir: $DTRAIN_DATA is too long", ld->file);
    }
    if (cfg->data.coarse_labels && *format != DT_DATA_CIFAR100) {
        key_where(ld, "data.coarse_labels", where, sizeof where);
        return dt_fail(DT_EUSAGE, "%s: only cifar100 has coarse labels, this is %s", where,
                       format_name);
    }
    int rc = derive_folder(ld);
    if (rc)
        return rc;
    int channels = *format == DT_DATA_IDX ? 1 : *format == DT_DATA_FOLDER ? cfg->data.channels : 3;
    const char *lists[] = {"data.mean", "data.std"};
    int counts[] = {cfg->data.nmean, cfg->data.nstd};
    for (int i = 0; i < 2; i++)
        if (counts[i] > 1 && counts[i] != channels) {
            key_where(ld, lists[i], where, sizeof where);
            if (channels == 1)
                return dt_fail(DT_EUSAGE, "%s: expected 1 value for %s (one channel), got %d",
                               where, format_name, counts[i]);
            return dt_fail(DT_EUSAGE,
                           "%s: expected 1 or %d values for %s (one per channel), "
                           "got %d",
                           where, channels, format_name, counts[i]);
        }
    return 0;
}

static bool given(const struct load *ld, const char *path)
{
    size_t i = (size_t)(find_key(keys, NKEYS, path) - keys);
    return ld->line[i] || ld->by_set[i];
}

/* Values left to the optimizer type take nn/optim's defaults (PyTorch's), the one copy. */
static void derive_optimizer(struct load *ld)
{
    struct dt_config *cfg = ld->cfg;
    struct dt_optim_config d;
    dt_optim_config_defaults(&d, cfg->optimizer.type);
    if (cfg->optimizer.lr == 0)
        cfg->optimizer.lr = (float)d.lr;
    if (cfg->optimizer.eps == 0)
        cfg->optimizer.eps = (float)d.eps;
    if (!given(ld, "optimizer.weight_decay"))
        cfg->optimizer.weight_decay = (float)d.weight_decay;
}

static int check_cross_keys(struct load *ld)
{
    struct dt_config *cfg = ld->cfg;
    char where[1400];
    if (cfg->optimizer.schedule.type == DT_SCHEDULE_COSINE &&
        cfg->optimizer.schedule.min_lr > cfg->optimizer.lr) {
        key_where(ld, "optimizer.schedule.min_lr", where, sizeof where);
        return dt_fail(DT_EUSAGE, "%s: %g is above optimizer.lr %g", where,
                       cfg->optimizer.schedule.min_lr, cfg->optimizer.lr);
    }
    if (cfg->loss.label_smoothing != 0 && cfg->loss.type != DT_LOSS_CROSS_ENTROPY) {
        key_where(ld, "loss.label_smoothing", where, sizeof where);
        return dt_fail(DT_EUSAGE, "%s: %g needs loss.type \"cross_entropy\" (found \"%s\")", where,
                       cfg->loss.label_smoothing,
                       dt_names_name(&dt_loss_kind_names, cfg->loss.type));
    }
    if (cfg->optimizer.schedule.warmup_epochs > 0 && cfg->optimizer.schedule.warmup_steps > 0) {
        key_where(ld, "optimizer.schedule.warmup_epochs", where, sizeof where);
        return dt_fail(DT_EUSAGE, "%s: give warmup_epochs or warmup_steps, not both", where);
    }
    if (cfg->optimizer.schedule.type == DT_SCHEDULE_ONE_CYCLE &&
        (cfg->optimizer.schedule.warmup_epochs > 0 || cfg->optimizer.schedule.warmup_steps > 0)) {
        key_where(ld,
                  cfg->optimizer.schedule.warmup_steps > 0 ? "optimizer.schedule.warmup_steps"
                                                           : "optimizer.schedule.warmup_epochs",
                  where, sizeof where);
        return dt_fail(DT_EUSAGE,
                       "%s: one_cycle has its own warmup (pct_start); remove the linear warmup",
                       where);
    }
    if (cfg->dist.split_invariant && cfg->dist.grad_dtype == DT_GRAD_BF16) {
        key_where(ld, "dist.grad_dtype", where, sizeof where);
        return dt_fail(DT_EUSAGE,
                       "%s: \"bf16\" cannot be combined with dist.split_invariant = true: each "
                       "instance's gradient sum is rounded to bf16, and which part of the batch "
                       "that sum covers depends on the instance count, so the bits would too",
                       where);
    }
    /* a folder may bring its own val/ split: the run checks that once the data is read */
    char problem[300];
    const char *es_key = dt_early_stop_resolve(
        &cfg->train.early_stop, cfg->data.val_fraction > 0 || cfg->data.format == DT_DATA_FOLDER,
        problem, sizeof problem);
    if (es_key) {
        key_where(ld, es_key, where, sizeof where);
        return dt_fail(DT_EUSAGE, "%s: %s", where, problem);
    }
    const char *bad;
    char why[200];
    if (dt_augment_check(&cfg->data.augment, &bad, why, sizeof why)) {
        key_where(ld, bad, where, sizeof where);
        return dt_fail(DT_EUSAGE, "%s: %s", where, why);
    }
    const char *cpus = cfg->dist.cpu_list;
    if (strspn(cpus, "0123456789,-") != strlen(cpus)) {
        key_where(ld, "dist.cpu_list", where, sizeof where);
        return dt_fail(DT_EUSAGE, "%s: expected a list like \"0-7,16-23\", got \"%s\"", where,
                       cpus);
    }
    return 0;
}

static void derive_checkpoint_dir(struct dt_config *cfg, const char *name)
{
    if (cfg->checkpoint.dir[0])
        return;
    const char *base = strrchr(name, '/');
    base = base ? base + 1 : name;
    char stem[256];
    set_string(stem, sizeof stem, base);
    char *dot = strrchr(stem, '.');
    if (dot && dot != stem)
        *dot = 0;
    snprintf(cfg->checkpoint.dir, sizeof cfg->checkpoint.dir, "runs/%s", stem[0] ? stem : "run");
    cfg->checkpoint.dir_default = true;
}

/* ---- the effective text ---- */

struct text {
    char *buf;
    size_t len, cap;
    bool failed;
};

static void put(struct text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(struct text *t, const char *fmt, ...)
{
    va_list ap;
    for (int attempt = 0; attempt < 2 && !t->failed; attempt++) {
        va_start(ap, fmt);
        int n = vsnprintf(t->buf ? t->buf + t->len : NULL, t->buf ? t->cap - t->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0) {
            t->failed = true;
            return;
        }
        if (t->buf && t->len + (size_t)n < t->cap) {
            t->len += (size_t)n;
            return;
        }
        size_t cap = (t->cap + (size_t)n + 1) * 2;
        char *nb = realloc(t->buf, cap);
        if (!nb) {
            t->failed = true;
            return;
        }
        t->buf = nb;
        t->cap = cap;
    }
}

/* The shortest literal that reads back as exactly the same value, written so that
 * libconfig sees a float (0.5, 1e-06, 300.0), never an integer. */
static void put_real(struct text *t, double v, bool single)
{
    char s[40];
    for (int digits = 1; digits <= 17; digits++) {
        snprintf(s, sizeof s, "%.*g", digits, v);
        double back = strtod(s, NULL);
        if (single ? (float)back == (float)v : back == v)
            break;
    }
    put(t, "%s%s", s, strpbrk(s, ".en") ? "" : ".0");
}

static void put_string(struct text *t, const char *s)
{
    put(t, "\"");
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            put(t, "\\%c", *s);
        else if ((unsigned char)*s < 0x20)
            put(t, "\\x%02x", (unsigned char)*s);
        else
            put(t, "%c", *s);
    }
    put(t, "\"");
}

static void put_value(struct text *t, const void *base, const struct key *k)
{
    const char *field = (const char *)base + k->offset;
    switch (k->type) {
    case T_INT:
        put(t, "%d", *(const int *)field);
        break;
    case T_INT64:
        put(t, "%lldL", *(const long long *)field);
        break;
    case T_FLOAT:
        put_real(t, *(const float *)field, true);
        break;
    case T_DOUBLE:
        put_real(t, *(const double *)field, false);
        break;
    case T_BOOL:
        put(t, "%s", *(const bool *)field ? "true" : "false");
        break;
    case T_STRING:
        put_string(t, field);
        break;
    case T_ENUM:
        put_string(t, dt_names_name(k->names, *(const int *)field));
        break;
    case T_FLOATS: {
        int n = *(const int *)((const char *)base + k->count_offset);
        if (n == DT_CONFIG_AUTO) {
            put(t, "\"auto\"");
            break;
        }
        put(t, "[");
        for (int i = 0; i < n; i++) {
            put(t, "%s", i ? ", " : " ");
            put_real(t, ((const float *)field)[i], true);
        }
        put(t, " ]");
        break;
    }
    case T_CUSTOM: {
        char *v = codec_of(k)->write(field);
        put(t, "%s", v ? v : "");
        t->failed |= v == NULL;
        free(v);
        break;
    }
    case T_LAYERS:
    case T_BLOCKS:
        break;
    }
}

static void put_layers(struct text *t, const struct dt_config *cfg, const char *indent)
{
    struct dt_layer_spec def;
    dt_layer_spec_defaults(&def);
    put(t, "%slayers = (\n", indent);
    for (int i = 0; i < cfg->model.nlayers; i++) {
        const struct dt_layer_spec *s = &cfg->model.layers[i];
        const struct dt_layer_kind *kind = dt_layer_kind_find(s->type);
        put(t, "%s  { type = ", indent);
        put_string(t, s->type);
        put(t, ";");
        if (s->name[0]) {
            put(t, " name = ");
            put_string(t, s->name);
            put(t, ";");
        }
        for (int j = 0; kind && kind->keys[j]; j++) {
            const struct key *k = find_key(layer_keys, NLAYER_KEYS, kind->keys[j]);
            /* Only what differs from the defaults: "stride = 0" (kind default) is not
             * valid input, and short entries read like the config that was written. */
            if (!k ||
                memcmp((const char *)s + k->offset, (const char *)&def + k->offset, k->size) == 0)
                continue;
            put(t, " %s = ", k->path);
            put_value(t, s, k);
            put(t, ";");
        }
        put(t, " }%s\n", i + 1 < cfg->model.nlayers ? "," : "");
    }
    put(t, "%s);\n", indent);
}

/* Length of the group part of a path ("optimizer.schedule" of "optimizer.schedule.type"). */
static size_t group_len(const char *path)
{
    return (size_t)(strrchr(path, '.') - path);
}

static int depth_of(const char *group, size_t len)
{
    int d = len > 0;
    for (size_t i = 0; i < len; i++)
        d += group[i] == '.';
    return d;
}

/* model_source: model.blocks and model.layers as written (blocks unexpanded), or NULL for
 * the loaded layer list. */
static char *write_text(const struct dt_config *cfg, const char *model_source)
{
    struct text t = {0};
    static const char indent[] = "                ";
    const char *open = "";
    size_t open_len = 0;
    put(&t, "# Effective dtrain configuration: defaults filled in, overrides applied.\n");
    for (size_t i = 0; i < NKEYS; i++) {
        const struct key *k = &keys[i];
        size_t glen = group_len(k->path);
        if (glen != open_len || strncmp(open, k->path, glen) != 0) {
            /* Close groups until the open one is a prefix of the new key's group. */
            while (open_len > 0 && !(open_len <= glen && strncmp(open, k->path, open_len) == 0 &&
                                     k->path[open_len] == '.')) {
                int d = depth_of(open, open_len);
                put(&t, "%.*s};\n", 2 * (d - 1), indent);
                const char *dot = memrchr(open, '.', open_len);
                open_len = dot ? (size_t)(dot - open) : 0;
            }
            /* Open each missing level of the new group. */
            while (open_len < glen) {
                const char *next = memchr(k->path + open_len + 1, '.', glen - open_len - 1);
                size_t end = next ? (size_t)(next - k->path) : glen;
                size_t start = open_len ? open_len + 1 : 0;
                int d = depth_of(k->path, end);
                if (d == 1)
                    put(&t, "\n");
                put(&t, "%.*s%.*s = {\n", 2 * (d - 1), indent, (int)(end - start), k->path + start);
                open = k->path;
                open_len = end;
            }
        }
        int d = depth_of(k->path, glen);
        if (k->type == T_BLOCKS)
            continue;
        if (k->type == T_LAYERS && model_source) {
            const char *pad = indent + sizeof indent - 1 - 2 * d;
            for (const char *line = model_source; *line;) {
                const char *nl = strchr(line, '\n');
                size_t len = nl ? (size_t)(nl - line) : strlen(line);
                put(&t, "%s%.*s\n", pad, (int)len, line);
                line += len + (nl != NULL);
            }
            continue;
        }
        if (k->type == T_LAYERS) {
            put_layers(&t, cfg, indent + sizeof indent - 1 - 2 * d);
            continue;
        }
        put(&t, "%.*s%s = ", 2 * d, indent, last_component(k->path));
        put_value(&t, cfg, k);
        put(&t, ";\n");
    }
    while (open_len > 0) {
        int d = depth_of(open, open_len);
        put(&t, "%.*s};\n", 2 * (d - 1), indent);
        const char *dot = memrchr(open, '.', open_len);
        open_len = dot ? (size_t)(dot - open) : 0;
    }
    if (t.failed) {
        free(t.buf);
        return NULL;
    }
    return t.buf;
}

/* ---- public ---- */

static int load_all(struct load *ld, const char *text, const char *const *overrides, int noverrides)
{
    struct dt_config *cfg = ld->cfg;
    int rc = apply_defaults(cfg);
    if (rc)
        return rc;
    char *wide = widen_integers(text);
    if (!wide)
        return dt_fail(DT_ERUNTIME, "%s: out of memory", ld->file);
    int ok = config_read_string(&ld->lc, wide);
    free(wide);
    if (!ok)
        return dt_fail(DT_EUSAGE, "%s:%d: %s", ld->file, config_error_line(&ld->lc),
                       config_error_text(&ld->lc));
    if ((rc = walk_group(ld, config_root_setting(&ld->lc), "")))
        return rc;
    if (ld->layers) {
        char where[1200];
        snprintf(where, sizeof where, "%s:%d: model.layers", ld->file,
                 config_setting_source_line(ld->layers));
        if ((rc = load_model_layers(ld, ld->layers, where, ld->file)))
            return rc;
    } else if (ld->blocks) {
        return dt_fail(DT_EUSAGE, "%s:%d: model.blocks: there is no model.layers to use them",
                       ld->file, config_setting_source_line(ld->blocks));
    }
    for (int i = 0; i < noverrides; i++)
        if ((rc = apply_override(ld, overrides[i])))
            return rc;
    if ((rc = check_required(ld)) || (rc = derive_data(ld)))
        return rc;
    derive_optimizer(ld);
    derive_checkpoint_dir(cfg, ld->file);
    if ((rc = check_cross_keys(ld)))
        return rc;
    cfg->text = write_text(cfg, ld->layers_edited ? NULL : ld->layers_source);
    if (!cfg->text)
        return dt_fail(DT_ERUNTIME, "%s: out of memory writing the effective config", ld->file);
    return 0;
}

/* Named settings ("key = value" or "key : value") in libconfig text, strings and comments
 * skipped: a cheap count made before libconfig sees the text, because libconfig 1.5 checks
 * each new setting against its group's earlier ones (20000 settings take seconds, 100000
 * over a minute) and a real config has a few hundred at most. */
static size_t count_settings(const char *p)
{
    size_t n = 0;
    while (*p) {
        if (*p == '"') {
            for (p++; *p && *p != '"'; p++)
                if (*p == '\\' && p[1])
                    p++;
        } else if (*p == '#' || (p[0] == '/' && p[1] == '/')) {
            while (*p && *p != '\n')
                p++;
            continue;
        } else if (p[0] == '/' && p[1] == '*') {
            const char *end = strstr(p + 2, "*/");
            p = end ? end + 1 : p + strlen(p) - 1;
        } else if (*p == '=' || *p == ':') {
            n++;
        }
        if (*p)
            p++;
    }
    return n;
}

/* Adds the settings of `text` and of the files it @includes (libconfig reads those itself,
 * unbounded: they get the same checks first, and count toward the same total). */
static int count_with_includes(const char *name, const char *text, int code, int depth, size_t *n)
{
    if (strlen(text) > DT_CONFIG_MAX_BYTES)
        return dt_fail(code, "%s: larger than %zu bytes", name, DT_CONFIG_MAX_BYTES);
    *n += count_settings(text);
    for (const char *line = text; line && depth < 10; line = strchr(line, '\n')) {
        line += *line == '\n';
        line += strspn(line, " \t");
        const char *q = strncmp(line, "@include", 8) ? NULL : strchr(line, '"');
        const char *end = q ? strchr(q + 1, '"') : NULL;
        if (!end || memchr(q, '\n', (size_t)(end - q)))
            continue;
        char path[4096], *inc;
        size_t len;
        snprintf(path, sizeof path, "%.*s", (int)(end - q - 1), q + 1);
        int rc = dt_read_file_max(path, DT_CONFIG_MAX_BYTES, &inc, &len);
        if (rc)
            return dt_fail_context(rc, "%s: @include", name);
        rc = count_with_includes(path, inc, code, depth + 1, n);
        free(inc);
        if (rc)
            return rc;
    }
    return 0;
}

int dt_config_check_size(const char *name, const char *text, int code)
{
    size_t n = 0;
    int rc = count_with_includes(name, text, code, 0, &n);
    if (rc)
        return rc;
    if (n > DT_CONFIG_MAX_SETTINGS)
        return dt_fail(code, "%s: %zu settings, more than the %d a config may have", name, n,
                       DT_CONFIG_MAX_SETTINGS);
    return 0;
}

int dt_config_load_string(struct dt_config *cfg, const char *name, const char *text,
                          const char *const *overrides, int noverrides)
{
    memset(cfg, 0, sizeof *cfg);
    int rc = dt_config_check_size(name, text, DT_EUSAGE);
    if (rc)
        return rc;
    set_string(cfg->path, sizeof cfg->path, name);
    struct load *ld = calloc(1, sizeof *ld);
    if (!ld)
        return dt_fail(DT_ERUNTIME, "%s: out of memory", name);
    ld->cfg = cfg;
    ld->file = cfg->path;
    config_init(&ld->lc);
    rc = load_all(ld, text, overrides, noverrides);
    free(ld->layers_source);
    config_destroy(&ld->lc);
    free(ld);
    if (rc)
        dt_config_free(cfg);
    return rc;
}

int dt_config_load(struct dt_config *cfg, const char *path, const char *const *overrides,
                   int noverrides)
{
    char *text;
    size_t len;
    memset(cfg, 0, sizeof *cfg);
    int rc = dt_read_file_max(path, DT_CONFIG_MAX_BYTES, &text, &len);
    if (rc) { /* the file is part of the command line: a usage error, not a data one */
        char why[600];
        snprintf(why, sizeof why, "%s", dt_last_error());
        return dt_fail(DT_EUSAGE, "%s", why);
    }
    if (strlen(text) != len) {
        free(text);
        return dt_fail(DT_EUSAGE, "%s: not a text file (it contains a NUL byte)", path);
    }
    rc = dt_config_load_string(cfg, path, text, overrides, noverrides);
    free(text);
    return rc;
}

void dt_config_free(struct dt_config *cfg)
{
    free(cfg->text);
    cfg->text = NULL;
}

/* ---- reference ---- */

static const char *type_label(const struct key *k)
{
    static const char *const names[] = {"int",    "int64",      "float",      "double", "bool",
                                        "string", "float list", "layer list", "string", "group"};
    _Static_assert(sizeof names / sizeof names[0] == T_CUSTOM, "one label per key type");
    return k->type == T_CUSTOM ? codec_of(k)->label : names[k->type];
}

static void print_allowed(FILE *out, const struct key *k)
{
    char buf[160];
    if (k->names) {
        dt_names_join(k->names, buf, sizeof buf);
        fputs(buf, out);
    } else if (k->type == T_INT || k->type == T_INT64 || k->type == T_FLOAT ||
               k->type == T_DOUBLE || (k->type == T_FLOATS && k->min > -INF)) {
        describe_range(buf, sizeof buf, k);
        fputs(buf, out);
    } else if (k->type == T_FLOATS) {
        fputs("1 value or one per channel", out);
    }
    if (k->flags & AUTO)
        fputs(", or \"auto\"", out);
}

static void print_row(FILE *out, const struct key *k, bool layer_key)
{
    fprintf(out, "| `%s` | %s | ", k->path, type_label(k));
    if (k->flags & REQUIRED)
        fputs(layer_key ? "required by the kinds that take it" : "**required**", out);
    else
        fprintf(out, "`%s`", k->def);
    fputs(" | ", out);
    print_allowed(out, k);
    fprintf(out, " | %s |\n", k->help);
}

void dt_config_print_reference(FILE *out)
{
    fputs("| Key | Type | Default | Allowed | Meaning |\n|---|---|---|---|---|\n", out);
    for (size_t i = 0; i < NKEYS; i++)
        print_row(out, &keys[i], false);
    fputs("\nLayer entries of `model.layers` (each a group with `type` and only the keys its "
          "kind takes):\n\n| Kind | Keys |\n|---|---|\n",
          out);
    char names[512], accepted[256];
    set_string(names, sizeof names, dt_layer_kind_names());
    for (char *save, *kind = strtok_r(names, ", ", &save); kind;
         kind = strtok_r(NULL, ", ", &save)) {
        const struct dt_layer_kind *k = dt_layer_kind_find(kind);
        if (!k)
            continue;
        join_keys(accepted, sizeof accepted, k->keys);
        fprintf(out, "| `%s` | %s |\n", kind, accepted);
    }
    fputs("\n| Layer key | Type | Default | Allowed | Meaning |\n|---|---|---|---|---|\n", out);
    for (size_t i = 0; i < NLAYER_KEYS; i++)
        print_row(out, &layer_keys[i], true);
    fputs(
        "| `name` | string | `\"\"` | parts of letters, digits and _ joined by dots | every kind: "
        "the prefix of the layer's tensor names in checkpoints (`conv1.weight`); \"\" = "
        "`layers.<index>` (docs/checkpoints.md) |\n",
        out);
}
