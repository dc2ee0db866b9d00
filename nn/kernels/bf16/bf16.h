/* bfloat16 for the kernel room: the type and its conversions live in util/bf16.h, shared with
 * dist's bf16 all-reduce, so both round the same way. */
#ifndef DT_NN_KERNELS_BF16_H
#define DT_NN_KERNELS_BF16_H

#include "util/bf16.h"

#endif
