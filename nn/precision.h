/* train.precision: the arithmetic of the conv2d and linear layers.
 *
 * fp32: everything in float. bf16: mixed precision with PyTorch autocast's semantics
 * (torch.autocast('cpu', dtype=torch.bfloat16)) and oneDNN's bf16 training: the parameters,
 * their gradients and the optimizer state stay fp32 (the "master weights", which checkpoints
 * hold); conv2d and linear read their input, their weights and, in backward, their output
 * gradient rounded to bf16 (nearest even) and accumulate every product in fp32; batchnorm,
 * softmax, the loss and every reduction stay fp32. Activations are stored in fp32 in this
 * version (each bf16 layer rounds what it reads). docs/bf16.md says which kernels run it.
 * train.bf16_winograd (dt_model_options.bf16_winograd) departs from autocast on purpose: the
 * convs emulated on Winograd multiply in bf16 in its domain (nn/kernels/fp32/conv_winograd.h). */
#ifndef DT_NN_PRECISION_H
#define DT_NN_PRECISION_H

#include "util/names.h"

enum dt_precision { DT_PRECISION_FP32, DT_PRECISION_BF16 };
#define DT_PRECISION_COUNT (DT_PRECISION_BF16 + 1)

/* "fp32", "bf16" */
extern const struct dt_names dt_precision_names;

#endif
