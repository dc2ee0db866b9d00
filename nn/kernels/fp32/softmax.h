/* log_softmax over the rows of a (rows, n) matrix, forward and backward: plain pointers and a
 * shape, tested alone (tests/unit/test_elementwise.c); nn/layer_log_softmax.c calls them. */
#ifndef DT_NN_KERNELS_FP32_SOFTMAX_H
#define DT_NN_KERNELS_FP32_SOFTMAX_H

/* y = x - logsumexp(x) per row (the sum of exponentials in double, the maximum factored out). */
void dt_log_softmax_forward(const float *x, float *y, int rows, int n);

/* dx = dy - softmax(x) * sum(dy) per row, softmax read back from the output as exp(y). */
void dt_log_softmax_backward(const float *y, const float *dy, float *dx, int rows, int n);

#endif
