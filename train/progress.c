#include "train/progress.h"

#include <stdio.h>
#include <unistd.h>

#include "util/clock.h"
#include "util/log.h"

void dt_progress_init(struct dt_progress *p, bool quiet, int log_every, int epochs,
                      long steps_per_epoch)
{
    p->quiet = quiet;
    p->live = !quiet && isatty(STDERR_FILENO);
    p->log_every = log_every;
    p->epochs = epochs;
    p->steps_per_epoch = steps_per_epoch;
    p->epoch_start = p->last_draw = dt_now();
    p->line_len = 0;
}

void dt_progress_epoch_start(struct dt_progress *p)
{
    p->epoch_start = p->last_draw = dt_now();
}

static void format_eta(char *buf, size_t n, double seconds)
{
    int s = seconds > 0 && seconds < 1e7 ? (int)(seconds + 0.5) : 0;
    if (s >= 3600)
        snprintf(buf, n, "%dh%02dm", s / 3600, s / 60 % 60);
    else
        snprintf(buf, n, "%dm%02ds", s / 60, s % 60);
}

void dt_progress_step(struct dt_progress *p, int epoch, long step, double loss, double acc,
                      double samples_per_s)
{
    if (p->quiet)
        return;
    double now = dt_now();
    long done = step + 1;
    if (p->live) {
        /* Redraw at most 10 times a second: terminals are slow and steps are fast. */
        if (now - p->last_draw < 0.1 && done != p->steps_per_epoch)
            return;
        p->last_draw = now;
        double per_step = (now - p->epoch_start) / (double)done;
        char eta[32];
        format_eta(eta, sizeof eta, per_step * (double)(p->steps_per_epoch - done));
        int pct = (int)(100 * done / (p->steps_per_epoch ? p->steps_per_epoch : 1));
        int len = fprintf(
            stderr,
            "\repoch %d/%d  %ld/%ld (%3d%%)  loss %.4f  acc %5.2f%%  %.0f samples/s  ETA %s",
            epoch + 1, p->epochs, done, p->steps_per_epoch, pct, loss, 100 * acc, samples_per_s,
            eta);
        for (int i = len; i < p->line_len; i++)
            fputc(' ', stderr);
        p->line_len = len;
        fflush(stderr);
    } else if (p->log_every > 0 && done % p->log_every == 0) {
        dt_log_info("epoch %d/%d step %ld/%ld loss %.4f acc %.2f%% %.0f samples/s", epoch + 1,
                    p->epochs, done, p->steps_per_epoch, loss, 100 * acc, samples_per_s);
    }
}

void dt_progress_clear(struct dt_progress *p)
{
    if (p->live && p->line_len) {
        fprintf(stderr, "\r%*s\r", p->line_len, "");
        fflush(stderr);
        p->line_len = 0;
    }
}
