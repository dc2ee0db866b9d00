/* What every communicator shares: dist.grad_dtype's names and the call that picks the sum. */
#include "dist/comm.h"

static const char *const grad_dtype_names[] = {
    [DT_GRAD_FP32] = "fp32",
    [DT_GRAD_BF16] = "bf16",
};
_Static_assert(sizeof grad_dtype_names / sizeof grad_dtype_names[0] == DT_GRAD_DTYPE_COUNT,
               "one name per gradient dtype");
const struct dt_names dt_grad_dtype_names = DT_NAMES(grad_dtype_names);

int dt_comm_allreduce_sum(struct dt_comm *c, float *buf, size_t n, enum dt_grad_dtype dtype)
{
    return dtype == DT_GRAD_BF16 ? c->allreduce_sum_bf16(c, buf, n) : c->allreduce_sum(c, buf, n);
}
