/* Per-channel statistics (see stats.h). One pass over the uint8 samples; the parent computes
 * them before it forks, so this starts no threads. */
#include "data/stats.h"

#include <math.h>

void dt_dataset_channel_stats(const struct dt_dataset *d, float *mean, float *std)
{
    size_t plane = (size_t)d->h * d->w, sample = plane * (size_t)d->c;
    for (int ch = 0; ch < d->c; ch++) {
        uint64_t sum = 0, squares = 0; /* below 2^64 for 2^47 bytes of one channel */
        for (size_t k = 0; k < d->n; k++) {
            const uint8_t *p = d->x + k * sample + (size_t)ch * plane;
            uint32_t s = 0, q = 0; /* a plane of up to 2^16 values cannot overflow these */
            for (size_t i = 0; i < plane; i++) {
                if (i && (i & 0xffff) == 0) {
                    sum += s;
                    squares += q;
                    s = q = 0;
                }
                s += p[i];
                q += (uint32_t)p[i] * p[i];
            }
            sum += s;
            squares += q;
        }
        double count = (double)d->n * (double)plane;
        double m = (double)sum / count;
        double var = (double)squares / count - m * m;
        mean[ch] = (float)(m / 255.0);
        std[ch] = (float)(sqrt(var > 0 ? var : 0) / 255.0);
    }
}
