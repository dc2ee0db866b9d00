/* train/trace and train/timing: a rank's part holds track names and complete events, the merge
 * keeps whole lines only (a torn last line of a killed rank is dropped) and yields JSON the
 * parser reads; the timing gather of one rank reports it as the slowest, and the JSON and the
 * epoch line's text carry every kind. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "dist/comm.h"
#include "train/timing.h"
#include "train/trace.h"
#include "util/fileio.h"
#include "util/json.h"

static void test_parts_merge(void **state)
{
    (void)state;
    char dir[] = "/tmp/dtrain-trace-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char file[256], part[300];
    snprintf(file, sizeof file, "%s/t.json", dir);
    dt_trace_prepare(file, 0, 2);
    static struct dt_trace t0, t1;
    assert_int_equal(dt_trace_open(&t0, file, 0, 100.0), 0);
    assert_int_equal(dt_trace_open(&t1, file, 1, 100.0), 0);
    for (int i = 0; i < DT_TRACE_BUFFER + 10; i++) /* past one buffer: a flush on the way */
        dt_trace_span(&t0, DT_TRACE_MAIN, "step", "step", 100.0 + i, 100.5 + i, i);
    dt_trace_span(&t1, DT_TRACE_WRITER, "checkpoint", "checkpoint write", 101.0, 101.25, -1);
    assert_int_equal(dt_trace_close(&t0), 0);
    assert_int_equal(dt_trace_close(&t1), 0);
    /* rank 1 killed mid-line */
    dt_trace_part_path(file, 1, part, sizeof part);
    FILE *f = fopen(part, "a");
    fputs("{\"name\":\"forw", f);
    fclose(f);
    long n = dt_trace_merge(file, file, 0, 2);
    assert_int_equal(n, 4 + DT_TRACE_BUFFER + 10 + 4 + 1);
    assert_int_not_equal(access(part, F_OK), 0); /* parts removed */
    char *text;
    size_t len;
    assert_int_equal(dt_read_file(file, &text, &len), 0);
    struct dt_json *j = dt_json_parse(text, len);
    assert_non_null(j);
    const struct dt_json *ev = dt_json_get(j, "traceEvents");
    assert_non_null(ev);
    assert_int_equal(ev->count, (size_t)n);
    const struct dt_json *last = ev->child;
    while (last->next)
        last = last->next;
    assert_string_equal(dt_json_get(last, "name")->str, "checkpoint write");
    assert_true(dt_json_get(last, "pid")->num == 1 && dt_json_get(last, "tid")->num == 1);
    assert_true(dt_json_get(last, "ts")->num == 1e6 && dt_json_get(last, "dur")->num == 250000);
    dt_json_free(j);
    free(text);
    unlink(file);
    rmdir(dir);
}

static void test_timing_one_rank(void **state)
{
    (void)state;
    struct dt_comm *c = dt_comm_single();
    struct dt_timing t = {0};
    dt_timing_add(&t, DT_TIME_FORWARD, 1.5);
    dt_timing_add(&t, DT_TIME_ALLREDUCE, 0.25);
    struct dt_timing_report r;
    assert_int_equal(dt_timing_gather(&t, c, false, &r), 0);
    assert_int_equal(r.slowest, 0);
    assert_true(r.rank0[DT_TIME_FORWARD] == 1.5 && r.slowest_s[DT_TIME_ALLREDUCE] == 0.25);
    assert_true(t.epoch[DT_TIME_FORWARD] == 0); /* the epoch's figures start over */
    assert_true(t.run[DT_TIME_FORWARD] == 1.5); /* the run's go on */
    char line[200];
    dt_timing_format(&r, 1, line, sizeof line);
    assert_string_equal(line, " | data 0.00 fwd 1.50 bwd 0.00 wait 0.25 opt 0.00 ckpt 0.00 s");
    char *json = dt_timing_json(r.slowest_s, 0);
    struct dt_json *j = dt_json_parse(json, strlen(json));
    assert_non_null(j);
    assert_int_equal(dt_json_get(j, "rank")->num, 0);
    for (int k = 0; k < DT_TIME_KINDS; k++) {
        char key[40];
        snprintf(key, sizeof key, "%s_s", dt_time_kind_name(k));
        assert_non_null(dt_json_get(j, key));
    }
    dt_json_free(j);
    free(json);
    c->close(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parts_merge),
        cmocka_unit_test(test_timing_one_rank),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
