/* train/tfevents, util/crc32c and train/metrics_csv: the CRC-32C check value, records that
 * read back as written, a torn last record tolerated and a damaged one refused, and
 * metrics.csv rows with resume rows superseding what an earlier attempt logged. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <dirent.h>
#include <string.h>
#include <time.h>

#include "tests/unit/fixtures.h"
#include "train/metrics_csv.h"
#include "train/tfevents.h"
#include "util/crc32c.h"
#include "util/err.h"

static void test_crc32c_check_value(void **state)
{
    (void)state;
    /* The CRC-32C check value (RFC 3720, iSCSI). */
    assert_int_equal(dt_crc32c("123456789", 9), 0xe3069283u);
    assert_int_equal(dt_crc32c("", 0), 0);
    uint32_t c = dt_crc32c("123456789", 9);
    assert_int_equal(dt_crc32c_masked("123456789", 9), ((c >> 15) | (c << 17)) + 0xa282ead8u);
}

struct seen {
    int events, scalars, file_versions, starts;
    long long steps[16];
    float loss[16];
};

static int collect(void *ctx, const struct dt_tf_event *e)
{
    struct seen *s = ctx;
    if (s->events < 16)
        s->steps[s->events] = e->step;
    s->file_versions += e->file_version;
    s->starts += e->session_start;
    for (int i = 0; i < e->nscalars; i++) {
        s->scalars++;
        if (e->scalars[i].tag_len == 10 && !memcmp(e->scalars[i].tag, "train/loss", 10) &&
            s->events < 16)
            s->loss[s->events] = e->scalars[i].value;
    }
    s->events++;
    return 0;
}

/* The one events.out.tfevents.* file in dir. */
static void event_file(const char *dir, char *path, size_t size)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    path[0] = '\0';
    for (struct dirent *e; (e = readdir(d));)
        if (!strncmp(e->d_name, "events.out.tfevents.", 20))
            snprintf(path, size, "%s/%s", dir, e->d_name);
    closedir(d);
    assert_true(path[0] != '\0');
}

static void write_run(const char *dir, char *path, size_t size)
{
    struct dt_tfevents t;
    assert_int_equal(dt_tfevents_open(&t, dir, (double)time(NULL)), 0);
    for (int step = 1; step <= 3; step++) {
        struct dt_tf_scalar s[2] = {{"train/loss", 0, 1.0f / (float)step}, {"lr", 0, 0.1f}};
        assert_int_equal(dt_tfevents_scalars(&t, 1e9 + step, step, s, 2), 0);
    }
    assert_int_equal(dt_tfevents_session_start(&t, 1e9 + 4, 2), 0);
    dt_tfevents_close(&t);
    event_file(dir, path, size);
}

static void test_round_trip(void **state)
{
    (void)state;
    char dir[64], path[1400];
    fx_mkdtemp(dir, sizeof dir);
    write_run(dir, path, sizeof path);
    struct seen s = {0};
    bool torn = true;
    assert_int_equal(dt_tfevents_read(path, collect, &s, &torn), 0);
    assert_false(torn);
    assert_int_equal(s.events, 5); /* file_version, 3 steps, the session start */
    assert_int_equal(s.file_versions, 1);
    assert_int_equal(s.starts, 1);
    assert_int_equal(s.scalars, 6);
    assert_int_equal(s.steps[1], 1);
    assert_int_equal(s.steps[3], 3);
    assert_int_equal(s.steps[4], 2);
    assert_true(s.loss[2] == 0.5f);
    fx_rmtree(dir);
}

/* Every cut inside the last record (a crash mid-write) reads as a torn tail; the records
 * before it are all there. */
static void test_torn_tail_tolerated(void **state)
{
    (void)state;
    char dir[64], path[1400];
    fx_mkdtemp(dir, sizeof dir);
    write_run(dir, path, sizeof path);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    unsigned char buf[4096];
    size_t len = fread(buf, 1, sizeof buf, f);
    fclose(f);
    /* the session start record is the last: find its start by walking the lengths */
    size_t at = 0, start = 0;
    while (at < len) {
        start = at;
        at += 16 + (size_t)buf[at] + ((size_t)buf[at + 1] << 8);
    }
    for (size_t cut = start + 1; cut < len; cut++) {
        fx_write(path, buf, cut);
        struct seen s = {0};
        bool torn = false;
        assert_int_equal(dt_tfevents_read(path, collect, &s, &torn), 0);
        assert_true(torn);
        assert_int_equal(s.events, 4);
    }
    fx_rmtree(dir);
}

static void test_damage_refused(void **state)
{
    (void)state;
    char dir[64], path[1400];
    fx_mkdtemp(dir, sizeof dir);
    write_run(dir, path, sizeof path);
    FILE *f = fopen(path, "rb");
    unsigned char buf[4096];
    size_t len = fread(buf, 1, sizeof buf, f);
    fclose(f);
    size_t second = 16 + buf[0]; /* the first step record */
    unsigned char bad[4096];
    memcpy(bad, buf, len);
    bad[second + 14] ^= 1; /* a data byte: the data CRC no longer matches */
    fx_write(path, bad, len);
    struct seen s = {0};
    bool torn;
    assert_int_equal(dt_tfevents_read(path, collect, &s, &torn), -DT_EDATA);
    assert_non_null(strstr(dt_last_error(), "data CRC mismatch"));
    memcpy(bad, buf, len);
    bad[second + 1] ^= 1; /* the length: its CRC catches it */
    fx_write(path, bad, len);
    assert_int_equal(dt_tfevents_read(path, collect, &s, &torn), -DT_EDATA);
    assert_non_null(strstr(dt_last_error(), "length CRC mismatch"));
    dt_clear_error();
    fx_rmtree(dir);
}

static void test_metrics_csv_rows(void **state)
{
    (void)state;
    char dir[64], path[128];
    fx_mkdtemp(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/metrics.csv", dir);
    FILE *f = fopen(path, "w");
    fputs(dt_metrics_csv_header(), f);
    char line[512];
    for (int step = 1; step <= 4; step++) { /* an attempt that logged steps 1-4 */
        struct dt_metrics_row r = {.kind = DT_ROW_STEP};
        r.v[DT_M_STEP] = step;
        r.v[DT_M_TRAIN_LOSS] = 2.0 / step;
        r.has[DT_M_STEP] = r.has[DT_M_TRAIN_LOSS] = true;
        assert_true(dt_metrics_csv_format(&r, line, sizeof line) > 0);
        fputs(line, f);
    }
    struct dt_metrics_row resume = {.kind = DT_ROW_RESUME};
    resume.v[DT_M_STEP] = 2; /* its checkpoint was at step 2 */
    resume.has[DT_M_STEP] = true;
    dt_metrics_csv_format(&resume, line, sizeof line);
    fputs(line, f);
    fputs("step,3,,,9.5,,,,,,,,,,\n", f); /* the resumed run's step 3 */
    fputs("step,4,,,9.", f);              /* a torn last line */
    fclose(f);
    struct dt_metrics m;
    assert_int_equal(dt_metrics_csv_read(path, &m), 0);
    assert_true(m.torn);
    assert_int_equal(m.n, 4); /* steps 1, 2, the resume, the new step 3 */
    assert_true(m.rows[1].v[DT_M_STEP] == 2 && m.rows[1].v[DT_M_TRAIN_LOSS] == 1.0);
    assert_int_equal(m.rows[2].kind, DT_ROW_RESUME);
    assert_true(m.rows[3].v[DT_M_TRAIN_LOSS] == 9.5);
    assert_false(m.rows[3].has[DT_M_LR]);
    dt_metrics_free(&m);

    fx_write(path, "kind,step\nepoch,x\n", 18);
    assert_int_equal(dt_metrics_csv_read(path, &m), -DT_EDATA);
    assert_non_null(strstr(dt_last_error(), "line 2: step \"x\" is not a number"));
    fx_write(path, "a,b\n", 4);
    assert_int_equal(dt_metrics_csv_read(path, &m), -DT_EDATA);
    assert_non_null(strstr(dt_last_error(), "not a metrics.csv header"));
    fx_write(path, "", 0);
    assert_int_equal(dt_metrics_csv_read(path, &m), -DT_EDATA);
    assert_non_null(strstr(dt_last_error(), "empty"));
    dt_clear_error();
    fx_rmtree(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_crc32c_check_value),  cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_torn_tail_tolerated), cmocka_unit_test(test_damage_refused),
        cmocka_unit_test(test_metrics_csv_rows),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
