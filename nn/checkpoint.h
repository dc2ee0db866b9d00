/* Checkpoints in the safetensors format: an 8-byte little-endian header length, a JSON header
 * naming every tensor (dtype, shape, byte range), then the raw little-endian tensor bytes.
 *
 * Tensor names are the PyTorch state_dict keys of the equivalent model ("layers.0.weight",
 * "layers.1.running_mean", "layers.1.num_batches_tracked" as an int64 scalar), so
 * `safetensors.torch.load_file` or a 20-line numpy reader loads the weights into torch; the
 * optimizer state rides along as "optimizer.<state>.<parameter name>" tensors of the
 * parameter's shape plus the int64 scalar "optimizer.step", which torch ignores with
 * strict=False. Run metadata (config text, epoch, step, seed, ...) is string key/values in the
 * header's "__metadata__". Layout and a reader: docs/checkpoints.md.
 *
 * A save goes through util/fileio.h's atomic file (temp file, fsync, rename), so a crash or a
 * failure leaves the previous checkpoint intact. A load validates the whole file before it
 * changes anything: on error the model and optimizer are untouched and the status is DT_EDATA
 * with one line naming the file (and the tensor).
 */
#ifndef DT_NN_CHECKPOINT_H
#define DT_NN_CHECKPOINT_H

#include <stdbool.h>
#include <stddef.h>

#include "nn/model.h"
#include "nn/optim.h"

/* Headers longer than this are refused as corrupt (safetensors' own limit). */
#define DT_CHECKPOINT_MAX_HEADER (100u << 20)

/* A small ordered list of string key/values. Zero-initialise; free with
 * dt_checkpoint_meta_free. */
struct dt_checkpoint_meta_item {
    char *key, *value;
};
struct dt_checkpoint_meta {
    int n, cap;
    struct dt_checkpoint_meta_item *items;
};

/* Adds or replaces key (copies both strings). DT_ERUNTIME when out of memory. */
int dt_checkpoint_meta_set(struct dt_checkpoint_meta *meta, const char *key, const char *value);
int dt_checkpoint_meta_setf(struct dt_checkpoint_meta *meta, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The value for key, or NULL. */
const char *dt_checkpoint_meta_get(const struct dt_checkpoint_meta *meta, const char *key);
void dt_checkpoint_meta_free(struct dt_checkpoint_meta *meta);

/* Writes model parameters, buffers, the optimizer's state (when opt is not NULL) and meta to
 * path atomically. The writer adds the keys "format" ("pt"), "dtrain_version" and, with an
 * optimizer, "optimizer" (its type) and "optimizer_step"; these override same-named keys in
 * meta. DT_ERUNTIME naming the path when it cannot be written. */
int dt_checkpoint_save(const char *path, const struct dt_model *model, struct dt_optim *opt,
                       const struct dt_checkpoint_meta *meta);
/* The bytes dt_checkpoint_save would write to path, in one malloc'd buffer (*bytes, free()
 * it): a copy of the tensors, so training can go on while another thread writes the file
 * (train/ckpt_writer.h). path only names the file in errors. */
int dt_checkpoint_encode(const char *path, const struct dt_model *model, struct dt_optim *opt,
                         const struct dt_checkpoint_meta *meta, unsigned char **bytes, size_t *len);

/* Validates path and loads every model tensor and buffer into model; with opt (for resuming),
 * also the optimizer state and step count, which must be for the same optimizer type. meta
 * (may be NULL) receives the header's metadata; the caller frees it. DT_EDATA on any problem,
 * with model and opt unchanged. */
int dt_checkpoint_load(const char *path, struct dt_model *model, struct dt_optim *opt,
                       struct dt_checkpoint_meta *meta);

/* A validated safetensors file (dtrain's or any other writer's, e.g. PyTorch's
 * safetensors.torch.save_file), open for reading tensors one by one: fine-tuning's init_from
 * picks what it can use. Tensors of every safetensors dtype are listed; f32 and i64 say which
 * two dtrain reads. */
struct dt_checkpoint_file;
struct dt_checkpoint_tensor {
    const char *name;
    const char *dtype; /* "F32", "I64", "BF16", ... */
    bool f32, i64;
    int ndim;
    long long shape[8];
    const void *data; /* little-endian, inside the open file; valid until it is closed */
};
/* DT_EDATA naming the file when it cannot be read or is not a whole safetensors file. */
int dt_checkpoint_open(const char *path, struct dt_checkpoint_file **out);
int dt_checkpoint_file_count(const struct dt_checkpoint_file *f);
void dt_checkpoint_file_tensor(const struct dt_checkpoint_file *f, int i,
                               struct dt_checkpoint_tensor *out);
/* Tensor `name`: true and *out filled, or false when the file has none of that name. */
bool dt_checkpoint_file_find(const struct dt_checkpoint_file *f, const char *name,
                             struct dt_checkpoint_tensor *out);
void dt_checkpoint_close(struct dt_checkpoint_file *f);

/* A shape as the safetensors header and the error messages write it, "[3, 4]", into buf
 * (truncated to cap); returns buf. */
const char *dt_checkpoint_shape_text(char *buf, size_t cap, int ndim, const long long *shape);

/* Validates path and returns only its metadata (e.g. the config text needed to build the
 * model before loading its weights). */
int dt_checkpoint_read_meta(const char *path, struct dt_checkpoint_meta *meta);

#endif
