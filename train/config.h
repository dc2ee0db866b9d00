/* The run's configuration: a libconfig file validated against one schema table, with
 * command-line overrides (--set key.path=value, --instances, --threads) applied on top.
 *
 * Every key is listed once in train/config.c's schema (path, type, range, default, help), which
 * drives validation, defaults, --print-config and the README's reference. Unknown keys, wrong
 * types, out-of-range values and missing required keys fail with "FILE:LINE: key: problem"
 * and DT_EUSAGE.
 */
#ifndef DT_TRAIN_CONFIG_H
#define DT_TRAIN_CONFIG_H

#include <stdbool.h>
#include <stdio.h>

#include "data/augment.h"
#include "data/load.h"
#include "dist/backend.h"
#include "dist/pin.h"
#include "nn/layer_spec.h"
#include "nn/loss.h"
#include "nn/model.h"
#include "nn/optim.h"
#include "nn/precision.h"
#include "nn/schedule.h"
#include "train/early_stop.h"
#include "train/finetune_config.h"

/* checkpoint.on_usr1: what SIGUSR1 does after the checkpoint it asks for; train/loop.c acts
 * on it and holds the names ("stop", "continue"). */
enum dt_usr1_action { DT_USR1_STOP, DT_USR1_CONTINUE };
#define DT_USR1_ACTION_COUNT (DT_USR1_CONTINUE + 1)
extern const struct dt_names dt_usr1_action_names;

#define DT_MAX_LAYERS   512
#define DT_MAX_CHANNELS 4
/* data.nmean / data.nstd of data.mean = "auto" / data.std = "auto": computed from the training
 * images (train/norm_stats.h) before anything normalizes. */
#define DT_CONFIG_AUTO (-1)

struct dt_config {
    char path[1024]; /* the file it came from */
    char *text;      /* the effective config as libconfig text (what --print-config shows,
                        what checkpoints store); malloc'd */

    struct {
        char dataset[64]; /* registry name: mnist, fashion-mnist, kmnist, cifar10, cifar100 */
        /* the registry's format for data.dataset when the config gives none */
        enum dt_data_format format;
        char dir[1024];     /* where the archives are; default $DTRAIN_DATA/<dataset> */
        int classes;        /* 0 = format's own */
        bool coarse_labels; /* cifar100 */
        int nmean, nstd;
        float mean[DT_MAX_CHANNELS], std[DT_MAX_CHANNELS]; /* applied after x/255 */
        bool hflip;       /* augmentation: random horizontal flip */
        int crop_padding; /* augmentation: random crop after zero padding (0 = off) */
        int channels;     /* folder: 1 or 3 (derived from mean/std when 0) */
        int nsize;
        float size[2];        /* folder: [H, W] to fit every image to; [] = their own size */
        int size_h, size_w;   /* derived from size (0, 0 when []) */
        bool skip_bad;        /* folder: leave out undecodable images instead of failing */
        long long max_pixels; /* folder, predict: pixel budget of one image (h x w) */
        float val_fraction;   /* share of the training set held out for validation (0 = none) */
        struct dt_augment_opts augment;        /* data.augment.*: owned by data/augment.h */
        struct dt_class_select select_classes; /* n = 0: every class */
    } data;

    struct {
        char name[64];
        int nlayers;
        struct dt_layer_spec layers[DT_MAX_LAYERS];
    } model;

    struct {
        enum dt_loss_kind type; /* nll | cross_entropy */
        float label_smoothing;  /* cross_entropy: eps in [0, 1] */
    } loss;

    struct {
        enum dt_optim_type type; /* sgd | adam | adamw | adadelta */
        float lr, momentum, dampening, weight_decay;
        bool nesterov, amsgrad;
        float beta1, beta2, eps, rho;
        enum dt_decay_skip weight_decay_skip; /* none | bias_and_norm */
        float clip_grad_norm;                 /* global L2 norm limit; 0 = off */
        struct dt_param_groups param_groups;  /* lr scales by tensor name */
        struct {
            enum dt_schedule_type type; /* constant | step | cosine | one_cycle */
            int step_size;              /* step: epochs between decays */
            float gamma;                /* step: decay factor */
            float min_lr;               /* cosine: floor */
            int warmup_steps;           /* linear warmup from 0 in front of any schedule */
            int warmup_epochs;          /* the same in epochs */
            double pct_start, div_factor, final_div_factor; /* one_cycle (nn/schedule's doubles) */
        } schedule;
    } optimizer;

    struct {
        int epochs;
        int batch_size;          /* global batch (split across instances) */
        bool batch_per_instance; /* PyTorch DDP semantics: each instance takes batch_size */
        long long seed;
        long long max_steps; /* stop after this many steps in total (0 = no limit) */
        bool drop_last;      /* drop the final partial batch of an epoch */
        int eval_batch_size;
        enum dt_precision precision; /* fp32 | bf16 (nn/precision.h) */
        bool bf16_winograd;          /* bf16: Winograd convs multiply in bf16 (nn/model.h) */
        struct dt_early_stop_config early_stop; /* train/early_stop.h */
        char init_from[1024];           /* fine-tuning: checkpoint to start from ("" = none) */
        struct dt_name_patterns freeze; /* tensors not trained */
    } train;

    struct {
        int instances;
        int threads;
        enum dt_backend_request backend; /* auto | shm | tcp | hier | mpi */
        enum dt_bn_stats batchnorm;      /* sync | per_instance */
        bool split_invariant;            /* weight gradients in a fixed tree of batch slices */
        enum dt_grad_dtype grad_dtype;   /* what the gradient all-reduce sends: fp32 | bf16 */
        enum dt_pin_mode pin;            /* cores | sockets | none (list: cpu_list) */
        char cpu_list[256];              /* explicit list like "0-7,16-23" (overrides pin) */
        double timeout;                  /* seconds a collective may wait for a peer */
    } dist;

    struct {
        char dir[1024];
        bool dir_default;            /* dir was derived (runs/NAME), not given: a fresh runs/NAME-N
                                        may replace it rather than overwrite another run */
        int every;                   /* epochs between checkpoints (0 = only at the end) */
        int every_steps;             /* also every N optimizer steps, mid-epoch (0 = off) */
        double every_minutes;        /* also every M minutes of training, mid-epoch (0 = off) */
        bool best;                   /* also keep best.safetensors by test accuracy */
        enum dt_usr1_action on_usr1; /* SIGUSR1: stop (checkpoint, exit 143) or continue */
    } checkpoint;

    struct {
        int every; /* steps between progress lines when not a terminal (0 = per epoch) */
        bool json;
        bool quiet;
        bool profile;
    } log;
};

/* Bounds on a config's text, checked before libconfig parses it (its parse time grows with
 * the square of the number of settings in a group). Real configs are a few KiB and a few
 * hundred settings; a 128-layer model stays well under both. */
#define DT_CONFIG_MAX_BYTES    ((size_t)1 << 20)
#define DT_CONFIG_MAX_SETTINGS 5000

/* Loads and validates `path`, then applies the overrides ("a.b=v", in order). On error returns
 * -DT_EUSAGE with a "FILE:LINE: key: problem" message, also when the file cannot be read, is
 * not a regular file or is larger than DT_CONFIG_MAX_BYTES (the file is part of the command
 * line); an @include'd file that cannot be read is -DT_EDATA. */
int dt_config_load(struct dt_config *cfg, const char *path, const char *const *overrides,
                   int noverrides);
/* Same from text already in memory (`name` is used in messages): for checkpoints' metadata.
 * Text over the bounds above fails with -DT_EUSAGE before it is parsed. */
int dt_config_load_string(struct dt_config *cfg, const char *name, const char *text,
                          const char *const *overrides, int noverrides);
void dt_config_free(struct dt_config *cfg);
/* The bounds above for `text` named `name` in the message, the files it @includes (which must
 * be regular files, each at most DT_CONFIG_MAX_BYTES) counted in: 0, or -code; an @include'd
 * file that cannot be read is -DT_EDATA whatever `code` is. */
int dt_config_check_size(const char *name, const char *text, int code);

/* Writes the README's config reference (every key, type, default, range, help) as Markdown. */
void dt_config_print_reference(FILE *out);

#endif
