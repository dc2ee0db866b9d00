/* The one threshold the plain (built-once) kernels and the layers share for going parallel. */
#ifndef DT_NN_KERNELS_PARALLEL_H
#define DT_NN_KERNELS_PARALLEL_H

/* Loops with less work than this many floats run on one thread: below it the OpenMP fork/join
 * costs more than it saves. */
#define DT_PARALLEL_MIN 32768

#endif
