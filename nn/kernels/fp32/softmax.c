/* log_softmax's row loops (nn/kernels/fp32/softmax.h), as they were in the layer. One thread:
 * a row is a classifier's few classes, a batch of them far below the OpenMP threshold. */
#include "nn/kernels/fp32/softmax.h"

#include <math.h>
#include <stddef.h>

void dt_log_softmax_forward(const float *x, float *y, int rows, int n)
{
    for (int b = 0; b < rows; b++) {
        const float *xr = x + (size_t)b * n;
        float *yr = y + (size_t)b * n;
        float max = xr[0];
        for (int k = 1; k < n; k++)
            max = xr[k] > max ? xr[k] : max;
        double s = 0;
        for (int k = 0; k < n; k++)
            s += exp((double)xr[k] - max);
        float lse = max + (float)log(s);
        for (int k = 0; k < n; k++)
            yr[k] = xr[k] - lse;
    }
}

void dt_log_softmax_backward(const float *y, const float *dy, float *dx, int rows, int n)
{
    for (int b = 0; b < rows; b++) {
        const float *yr = y + (size_t)b * n, *dyr = dy + (size_t)b * n;
        float *dxr = dx + (size_t)b * n;
        double s = 0;
        for (int k = 0; k < n; k++)
            s += dyr[k];
        for (int k = 0; k < n; k++)
            dxr[k] = dyr[k] - expf(yr[k]) * (float)s;
    }
}
