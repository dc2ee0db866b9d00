/* Compute threads of this process: OpenBLAS's pool (GEMMs) and OpenMP's (every other loop in
 * nn/). Debian's libopenblas-openmp builds OpenBLAS on the same OpenMP runtime, so both are set
 * together; a BLAS call made inside an OpenMP parallel region runs single-threaded. With
 * another BLAS build, nn/kernels/fp32/blas.c keeps BLAS to one thread and splits GEMMs itself. */
#include <omp.h>

#include "nn/kernels/fp32/blas.h"
#include "nn/model.h"

void dt_nn_set_threads(int threads)
{
    if (threads < 1)
        threads = 1;
    dt_blas_set_threads(threads);
    omp_set_num_threads(threads);
}
