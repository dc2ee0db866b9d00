/* Distributed sampler: which training samples rank r of N uses in step s of epoch e.
 *
 * The epoch's permutation of 0..n-1 is a pure function of (seed, epoch): a Fisher-Yates
 * shuffle driven by dt_rng_key(seed, DT_RNG_SHUFFLE, epoch, 0). It never depends on rank or
 * size, so any instance count walks the same sequence of samples.
 *
 * Global-batch mode (default): step s covers permutation positions [s*B, s*B+B) and rank r
 * takes its contiguous share (the first B%size ranks get one more). The last step of an epoch
 * may be partial (unless drop_last); its samples are split the same way, so a rank may get 0
 * samples in a step. Every rank runs ceil(n/B) (or floor with drop_last) steps.
 *
 * Per-instance mode (PyTorch DistributedSampler + DataLoader): the permutation is padded by
 * wrapping around to a multiple of size (or truncated, with drop_last), rank r takes every
 * size-th position starting at r, and each step takes the next B of those. Global batch is
 * then size*B.
 *
 * In both modes `global_count` of a step is the number of samples all ranks together
 * process, the divisor that turns summed gradients into a mean.
 */
#ifndef DT_DATA_SAMPLER_H
#define DT_DATA_SAMPLER_H

#include <stddef.h>
#include <stdint.h>

struct dt_sampler_opts {
    size_t n;         /* samples in the dataset (< 2^32) */
    size_t batch;     /* global batch, or per-instance batch with per_instance */
    int rank, size;   /* this rank, number of ranks */
    uint64_t seed;    /* run seed */
    int drop_last;    /* drop the final partial batch (and, per-instance, the uneven tail) */
    int per_instance; /* PyTorch DDP semantics, see above */
    int sequential;   /* identity order instead of shuffling (evaluation) */
};

struct dt_sampler {
    struct dt_sampler_opts o;
    size_t steps;    /* per epoch, the same on every rank */
    size_t per_rank; /* per-instance mode: samples per rank per epoch */
    uint32_t *perm;  /* permutation of the cached epoch */
    uint64_t perm_epoch;
    int have_perm;
};

/* Validates the options (DT_EUSAGE naming the bad one) and allocates the permutation. */
int dt_sampler_init(struct dt_sampler *s, const struct dt_sampler_opts *opts);
void dt_sampler_free(struct dt_sampler *s);

size_t dt_sampler_steps(const struct dt_sampler *s);
/* The steps per epoch (and, per-instance, samples per rank) the options give, without
 * allocating: what dt_sampler_init validates and computes, for plans and dry runs. */
int dt_sampler_steps_for(const struct dt_sampler_opts *opts, size_t *steps, size_t *per_rank);
/* Most samples this rank can get in one step: the size of idx for dt_sampler_batch. */
int dt_sampler_max_count(const struct dt_sampler *s);

/* This rank's sample indices for (epoch, step) into idx (dt_sampler_max_count entries),
 * their number into *count (possibly 0), and the step's total over all ranks into
 * *global_count. Reshuffles only when the epoch changes. step < dt_sampler_steps(). */
int dt_sampler_batch(struct dt_sampler *s, uint64_t epoch, size_t step, uint32_t *idx, int *count,
                     int *global_count);

/* The epoch permutation itself: perm[0..n) from (seed, epoch). */
void dt_sampler_permutation(uint64_t seed, uint64_t epoch, size_t n, uint32_t *perm);

#endif
