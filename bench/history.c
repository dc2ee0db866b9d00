/* What the run history costs per logged step (issue 31's target: under 0.5 % of a step at
 * `--log-every 1`): the `step` event train/loop.c emits, through dt_history_emit into
 * events.jsonl, metrics.csv and the TensorBoard file of a scratch run directory, timed alone.
 * A whole-run comparison of --log-every 0 and 1 cannot resolve 0.5 % on a VM whose runs
 * spread by a few per cent; this times the part that differs.
 *
 *   make build/bench/history
 *   ./build/bench/history [config] [events per repeat] [repeats]
 *
 * Prints the median microseconds per event; divide by the step time of the same config
 * (`dtrain bench CONFIG --grid 1x1`: 1 / (samples/s / batch)) for the share of a step. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "cmd/bench/bench.h"
#include "train/config.h"
#include "train/history.h"
#include "util/clock.h"
#include "util/err.h"
#include "util/json.h"

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : "configs/fashion-convnet.cfg";
    int events = argc > 2 ? atoi(argv[2]) : 2000, repeats = argc > 3 ? atoi(argv[3]) : 7;
    if (events < 1 || repeats < 1 || repeats > 99) {
        fprintf(stderr, "usage: history [config] [events >= 1] [repeats 1-99]\n");
        return 2;
    }
    struct dt_config cfg;
    if (dt_config_load(&cfg, path, NULL, 0)) {
        fprintf(stderr, "history: %s\n", dt_last_error());
        return 2;
    }
    char dir[] = "/tmp/dtrain-history-bench-XXXXXX";
    if (!mkdtemp(dir)) {
        perror("history: mkdtemp");
        return 1;
    }
    double us[99];
    long long step = 0;
    for (int r = 0; r < repeats; r++) {
        struct dt_history h;
        dt_history_init(&h, false);
        char *args[] = {"train", (char *)path};
        if (dt_history_open(&h, dir, &cfg, 2, args, r > 0)) {
            fprintf(stderr, "history: %s\n", dt_last_error());
            return 1;
        }
        double t0 = dt_now();
        for (int i = 0; i < events; i++, step++) {
            /* the fields of train/loop.c's emit_step_json */
            struct dt_json_writer w;
            dt_jw_begin(&w, "step");
            dt_jw_int(&w, "epoch", 1 + (int)(step / 468));
            dt_jw_int(&w, "step", step + 1);
            dt_jw_num(&w, "loss", 0.5 + 1.0 / (double)(step + 2));
            dt_jw_num(&w, "accuracy", 0.8 + 0.1 / (double)(step + 2));
            dt_jw_num(&w, "lr", 0.01);
            dt_jw_num(&w, "samples_per_s", 8400.0 + (double)(step % 97));
            dt_jw_num(&w, "elapsed_s", 0.015 * (double)(step + 1));
            dt_history_emit(&h, &w);
        }
        us[r] = (dt_now() - t0) * 1e6 / events;
        dt_history_close(&h, 0);
    }
    double min = us[0];
    for (int r = 1; r < repeats; r++)
        min = us[r] < min ? us[r] : min;
    printf("history: %s, %d step events x %d repeats: median %.2f us per event (min %.2f)\n", path,
           events, repeats, dt_bench_median(us, repeats), min);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "history: could not remove %s\n", dir);
    dt_config_free(&cfg);
    return 0;
}
