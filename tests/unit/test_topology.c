/* dist/topology + dist/pin: fake sysfs trees (2 sockets x 4 cores x SMT2 with Linux numbering,
 * restricted masks, missing or odd files), every pin mode on them, oversubscription, the CPU
 * list syntax and its errors, and one plan applied for real in a forked child. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <ftw.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dist/pin.h"
#include "util/err.h"
#include "util/fileio.h"

/* ---- fake sysfs ---- */

static void write_text(const char *dir, const char *name, const char *text)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    assert_int_equal(dt_mkdir_p(dir), 0);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* CPU c: package pkg[c], core core[c]; pkg < 0 leaves the topology directory out. */
static void fake_cpu(const char *root, int c, int pkg, int core)
{
    char dir[512], num[32];
    snprintf(dir, sizeof dir, "%s/devices/system/cpu/cpu%d/topology", root, c);
    snprintf(num, sizeof num, "%d\n", pkg);
    write_text(dir, "physical_package_id", num);
    snprintf(num, sizeof num, "%d\n", core);
    write_text(dir, "core_id", num);
}

static void fake_online(const char *root, const char *list)
{
    char dir[512];
    snprintf(dir, sizeof dir, "%s/devices/system/cpu", root);
    write_text(dir, "online", list);
}

/* 2 sockets x 4 cores x SMT2, numbered the Linux way: cpu0-3 socket 0 first threads, 4-7
 * socket 1 first threads, 8-11 their siblings on socket 0, 12-15 on socket 1. core_id is
 * per socket and deliberately not 0..3 (real machines skip numbers). */
static void fake_2s4c2t(const char *root)
{
    fake_online(root, "0-15\n");
    for (int c = 0; c < 16; c++)
        fake_cpu(root, c, (c / 4) % 2, 2 * (c % 4));
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(path);
}

struct fixture {
    char root[64];
};

static int setup(void **state)
{
    struct fixture *fx = calloc(1, sizeof *fx);
    strcpy(fx->root, "/tmp/dt_topo_XXXXXX");
    if (!mkdtemp(fx->root))
        return -1;
    *state = fx;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *fx = *state;
    nftw(fx->root, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    free(fx);
    return 0;
}

/* ---- helpers ---- */

static struct dt_topology read_ok(const char *root, const char *affinity)
{
    struct dt_topology t;
    if (dt_topology_read(&t, root, affinity) < 0)
        fail_msg("topology read failed: %s", dt_last_error());
    return t;
}

static void assert_describe(const struct dt_topology *t, const char *want)
{
    char buf[160];
    dt_topology_describe(t, buf, sizeof buf);
    assert_string_equal(buf, want);
}

/* The plan as "ranks' lists joined by |", e.g. "0-3,8-11|4-7,12-15". */
static const char *plan_str(const struct dt_pin_plan *p)
{
    static char out[1024];
    out[0] = '\0';
    for (int r = 0; r < p->instances; r++) {
        char one[256];
        dt_cpu_list_format(p->cpus + r * p->stride, p->ncpus[r], one, sizeof one);
        if (r)
            strcat(out, "|");
        strcat(out, one);
    }
    return out;
}

static void expect_plan(const struct dt_topology *t, enum dt_pin_mode mode, const char *list, int n,
                        int threads, const char *want, bool oversubscribed)
{
    struct dt_pin_plan p;
    if (dt_pin_plan_make(&p, t, mode, list, n, threads) < 0)
        fail_msg("%dx%d: %s", n, threads, dt_last_error());
    if (strcmp(plan_str(&p), want) != 0)
        fail_msg("%s %dx%d: got %s, want %s", dt_pin_mode_name(mode), n, threads, plan_str(&p),
                 want);
    assert_int_equal(p.oversubscribed, oversubscribed);
    dt_pin_plan_free(&p);
}

static void expect_plan_error(const struct dt_topology *t, enum dt_pin_mode mode, const char *list,
                              int n, int threads, int code, const char *msg)
{
    struct dt_pin_plan p;
    assert_int_equal(dt_pin_plan_make(&p, t, mode, list, n, threads), -code);
    assert_string_equal(dt_last_error(), msg);
    assert_null(p.cpus);
}

/* ---- (a) the full fake machine ---- */

static void test_reads_fake_tree(void **state)
{
    struct fixture *fx = *state;
    fake_2s4c2t(fx->root);
    struct dt_topology t = read_ok(fx->root, "0-15");
    assert_int_equal(t.ncpus, 16);
    assert_describe(&t, "2 sockets, 8 cores, 16 CPUs usable (SMT 2)");
    assert_false(t.guessed);
    /* cpu 9: socket 0, second core, its second thread; cpu 13 the same on socket 1. */
    assert_int_equal(t.cpus[9].socket, 0);
    assert_int_equal(t.cpus[9].core, 1);
    assert_int_equal(t.cpus[9].smt, 1);
    assert_int_equal(t.cpus[13].socket, 1);
    assert_int_equal(t.cpus[13].core, 5);
    assert_int_equal(t.cpus[5].core, 5);
    assert_int_equal(t.cpus[5].smt, 0);
    dt_topology_free(&t);
}

static void test_cores_mode(void **state)
{
    struct fixture *fx = *state;
    fake_2s4c2t(fx->root);
    struct dt_topology t = read_ok(fx->root, "0-15");
    expect_plan(&t, DT_PIN_CORES, NULL, 1, 8, "0-7", false);
    expect_plan(&t, DT_PIN_CORES, NULL, 2, 4, "0-3|4-7", false);
    expect_plan(&t, DT_PIN_CORES, NULL, 4, 2, "0-1|2-3|4-5|6-7", false);
    expect_plan(&t, DT_PIN_CORES, NULL, 8, 1, "0|1|2|3|4|5|6|7", false);
    /* 16 threads need every sibling; each rank keeps its socket, pairs with itself. */
    expect_plan(&t, DT_PIN_CORES, NULL, 2, 8, "0-3,8-11|4-7,12-15", false);
    /* Rank 2 fits in neither socket's leftovers: it spans, takes the two idle cores first
     * and then one sibling, of its own core. */
    expect_plan(&t, DT_PIN_CORES, NULL, 3, 3, "0-2|4-6|3,7,11", false);
    /* Siblings are needed: each rank gets whole cores rather than sharing with another. */
    expect_plan(&t, DT_PIN_CORES, NULL, 3, 4, "0-1,8-9|4-7|2-3,10-11", false);
    expect_plan(&t, DT_PIN_CORES, NULL, 4, 4, "0-1,8-9|4-5,12-13|2-3,10-11|6-7,14-15", false);
    expect_plan(&t, DT_PIN_CORES, NULL, 2, 6, "0-3,8-9|4-7,12-13", false);
    /* One thread per rank: sharing cannot be avoided, the plain order stays. */
    expect_plan(&t, DT_PIN_CORES, NULL, 16, 1, "0|1|2|3|4|5|6|7|8|9|10|11|12|13|14|15", false);
    expect_plan(&t, DT_PIN_CORES, NULL, 1, 16, "0-15", false);
    expect_plan(&t, DT_PIN_CORES, NULL, 2, 2, "0-1|2-3", false); /* compact */
    expect_plan(&t, DT_PIN_CORES, NULL, 1, 1, "0", false);
    dt_topology_free(&t);
}

/* Siblings numbered next to each other (cpu 2k and 2k+1 share a core, as on many AMD
 * machines and VMs): the rules follow the topology, not the numbering. */
static void test_adjacent_sibling_numbering(void **state)
{
    struct fixture *fx = *state;
    fake_online(fx->root, "0-7\n");
    for (int c = 0; c < 8; c++)
        fake_cpu(fx->root, c, 0, c / 2);
    struct dt_topology t = read_ok(fx->root, "0-7");
    assert_describe(&t, "1 socket, 4 cores, 8 CPUs usable (SMT 2)");
    expect_plan(&t, DT_PIN_CORES, NULL, 1, 4, "0,2,4,6", false);
    expect_plan(&t, DT_PIN_CORES, NULL, 2, 2, "0,2|4,6", false);
    expect_plan(&t, DT_PIN_CORES, NULL, 2, 4, "0-3|4-7", false);
    expect_plan(&t, DT_PIN_CORES, NULL, 4, 2, "0-1|2-3|4-5|6-7", false);
    expect_plan(&t, DT_PIN_CORES, NULL, 1, 5, "0-2,4,6", false);
    dt_topology_free(&t);
}

/* For every job that fits: ranks get `threads` distinct CPUs, no CPU twice, and SMT siblings
 * are used only for the threads beyond the 8 physical cores. */
static void test_cores_mode_invariants(void **state)
{
    struct fixture *fx = *state;
    fake_2s4c2t(fx->root);
    struct dt_topology t = read_ok(fx->root, "0-15");
    for (int n = 1; n <= 16; n++)
        for (int threads = 1; n * threads <= 16; threads++) {
            struct dt_pin_plan p;
            assert_int_equal(dt_pin_plan_make(&p, &t, DT_PIN_CORES, NULL, n, threads), 0);
            int seen[16] = {0}, siblings = 0;
            for (int r = 0; r < n; r++) {
                assert_int_equal(p.ncpus[r], threads);
                for (int j = 0; j < threads; j++) {
                    int c = p.cpus[r * p.stride + j];
                    assert_true(c >= 0 && c < 16);
                    seen[c]++;
                    siblings += c >= 8;
                }
            }
            for (int c = 0; c < 16; c++)
                assert_true(seen[c] <= 1);
            int want = n * threads > 8 ? n * threads - 8 : 0;
            if (siblings != want)
                fail_msg("%dx%d uses %d siblings, want %d", n, threads, siblings, want);
            assert_false(p.oversubscribed);
            dt_pin_plan_free(&p);
        }
    dt_topology_free(&t);
}

/* The same rules under 300 pseudo-random affinity masks (uneven sockets, lone siblings) and
 * every job size up to twice the mask: usable CPUs only, disjoint ranks of `threads` CPUs
 * while the job fits, siblings only beyond the physical cores, a flag exactly when it does
 * not fit. */
static void test_cores_mode_random_masks(void **state)
{
    struct fixture *fx = *state;
    fake_2s4c2t(fx->root);
    unsigned x = 12345;
    for (int trial = 0; trial < 300; trial++) {
        int ids[16], n = 0;
        while (n == 0)
            for (int c = 0; c < 16; c++) {
                x = x * 1103515245u + 12345u;
                if ((x >> 16) & 1)
                    ids[n++] = c;
            }
        char mask[64];
        dt_cpu_list_format(ids, n, mask, sizeof mask);
        struct dt_topology t = read_ok(fx->root, mask);
        assert_int_equal(t.ncpus, n);
        int smt_of[16];
        bool usable[16] = {false};
        for (int i = 0; i < n; i++)
            smt_of[t.cpus[i].id] = t.cpus[i].smt, usable[t.cpus[i].id] = true;
        for (int ranks = 1; ranks <= 2 * n; ranks++)
            for (int threads = 1; ranks * threads <= 2 * n; threads++) {
                struct dt_pin_plan p;
                assert_int_equal(dt_pin_plan_make(&p, &t, DT_PIN_CORES, NULL, ranks, threads), 0);
                bool fits = ranks * threads <= n;
                int seen[16] = {0}, siblings = 0;
                for (int r = 0; r < ranks; r++) {
                    assert_true(p.ncpus[r] >= 1 && p.ncpus[r] <= threads);
                    for (int j = 0; j < p.ncpus[r]; j++) {
                        int c = p.cpus[r * p.stride + j];
                        if (c < 0 || c >= 16 || !usable[c])
                            fail_msg("mask %s, %dx%d: CPU %d", mask, ranks, threads, c);
                        seen[c]++;
                        siblings += smt_of[c] > 0;
                    }
                    if (fits)
                        assert_int_equal(p.ncpus[r], threads);
                }
                assert_int_equal(p.oversubscribed, !fits);
                if (fits) {
                    int want = ranks * threads - t.cores;
                    for (int c = 0; c < 16; c++)
                        assert_true(seen[c] <= 1);
                    if (siblings != (want > 0 ? want : 0))
                        fail_msg("mask %s, %dx%d: %d siblings, want %d", mask, ranks, threads,
                                 siblings, want > 0 ? want : 0);
                }
                dt_pin_plan_free(&p);
            }
        dt_topology_free(&t);
    }
}

static void test_sockets_none_list_modes(void **state)
{
    struct fixture *fx = *state;
    fake_2s4c2t(fx->root);
    struct dt_topology t = read_ok(fx->root, "0-15");
    expect_plan(&t, DT_PIN_SOCKETS, NULL, 2, 8, "0-3,8-11|4-7,12-15", false);
    expect_plan(&t, DT_PIN_SOCKETS, NULL, 1, 4, "0-3,8-11", false);
    expect_plan(&t, DT_PIN_SOCKETS, NULL, 3, 4, "0-3,8-11|4-7,12-15|0-3,8-11", true);
    expect_plan(&t, DT_PIN_SOCKETS, NULL, 2, 9, "0-3,8-11|4-7,12-15", true);

    struct dt_pin_plan p;
    assert_int_equal(dt_pin_plan_make(&p, &t, DT_PIN_NONE, NULL, 2, 8), 0);
    assert_null(p.cpus);
    assert_false(p.oversubscribed);
    assert_int_equal(dt_pin_apply(&p, 1), 0); /* no-op */
    dt_pin_plan_free(&p);
    assert_int_equal(dt_pin_plan_make(&p, &t, DT_PIN_NONE, NULL, 4, 8), 0);
    assert_true(p.oversubscribed);
    dt_pin_plan_free(&p);

    /* Ranks take consecutive ranges in the order written, wrapping at the end. */
    expect_plan(&t, DT_PIN_LIST, "8-15,0-7", 2, 4, "8-11|12-15", false);
    expect_plan(&t, DT_PIN_LIST, "0,8,1,9", 2, 2, "0,8|1,9", false);
    expect_plan(&t, DT_PIN_LIST, "0-7", 3, 3, "0-2|3-5|0,6-7", true);
    expect_plan(&t, DT_PIN_LIST, "0-3", 1, 8, "0-3", true);
    expect_plan_error(&t, DT_PIN_LIST, "0-16", 1, 1, DT_EUSAGE,
                      "pin list: CPU 16 is not usable by this process (usable: 0-15)");
    expect_plan_error(&t, DT_PIN_LIST, "0-3,x", 1, 1, DT_EUSAGE,
                      "pin list: 'x' is not a CPU number or range like 0-7");
    expect_plan_error(&t, DT_PIN_LIST, NULL, 1, 1, DT_EUSAGE, "pin list: empty CPU list");
    expect_plan_error(
        &t, DT_PIN_CORES, NULL, 0, 4, DT_EUSAGE,
        "pinning 0 instances x 4 threads: need at least 1 of each and at most 4194304 "
        "CPU slots in all");
    expect_plan_error(
        &t, DT_PIN_CORES, NULL, 2, 0, DT_EUSAGE,
        "pinning 2 instances x 0 threads: need at least 1 of each and at most 4194304 "
        "CPU slots in all");
    expect_plan_error(&t, DT_PIN_SOCKETS, NULL, 1 << 20, 1, DT_EUSAGE,
                      "pinning 1048576 instances x 1 threads: need at least 1 of each and at "
                      "most 4194304 CPU slots in all");
    dt_topology_free(&t);
}

/* ---- (b) a restricted affinity mask ---- */

static void test_restricted_mask(void **state)
{
    struct fixture *fx = *state;
    fake_2s4c2t(fx->root);
    struct dt_topology t = read_ok(fx->root, "0-1,4-5,8");
    assert_describe(&t, "2 sockets, 4 cores, 5 CPUs usable (SMT 2)");
    assert_int_equal(t.cpus[4].id, 8);
    assert_int_equal(t.cpus[4].smt, 1);
    expect_plan(&t, DT_PIN_CORES, NULL, 2, 2, "0-1|4-5", false);
    expect_plan(&t, DT_PIN_CORES, NULL, 1, 4, "0-1,4-5", false);
    expect_plan(&t, DT_PIN_CORES, NULL, 1, 5, "0-1,4-5,8", false);
    expect_plan(&t, DT_PIN_CORES, NULL, 5, 1, "0|1|4|5|8", false);
    expect_plan(&t, DT_PIN_CORES, NULL, 4, 1, "0|1|4|5", false);
    expect_plan(&t, DT_PIN_SOCKETS, NULL, 2, 2, "0-1,8|4-5", false);
    expect_plan(&t, DT_PIN_LIST, "8,0,1,4", 2, 2, "0,8|1,4", false);
    expect_plan_error(&t, DT_PIN_LIST, "0-3", 1, 4, DT_EUSAGE,
                      "pin list: CPU 2 is not usable by this process (usable: 0-1,4-5,8)");
    dt_topology_free(&t);

    /* A socket with no usable CPU is not counted. */
    t = read_ok(fx->root, "4-7,12-15");
    assert_describe(&t, "1 socket, 4 cores, 8 CPUs usable (SMT 2)");
    expect_plan(&t, DT_PIN_SOCKETS, NULL, 2, 2, "4-7,12-15|4-7,12-15", true);
    expect_plan(&t, DT_PIN_CORES, NULL, 2, 2, "4-5|6-7", false);
    dt_topology_free(&t);
}

/* ---- (c) oversubscription ---- */

static void test_oversubscription(void **state)
{
    struct fixture *fx = *state;
    fake_2s4c2t(fx->root);
    struct dt_topology t = read_ok(fx->root, "0-1");
    expect_plan(&t, DT_PIN_CORES, NULL, 4, 4, "0-1|0-1|0-1|0-1", true);
    expect_plan(&t, DT_PIN_CORES, NULL, 3, 1, "0|1|0", true);
    expect_plan(&t, DT_PIN_CORES, NULL, 2, 1, "0|1", false);
    dt_topology_free(&t);

    /* Ranks past the R = 16/8 that fit repeat rank r % R, sockets kept. */
    t = read_ok(fx->root, "0-15");
    expect_plan(&t, DT_PIN_CORES, NULL, 3, 8, "0-3,8-11|4-7,12-15|0-3,8-11", true);
    expect_plan(&t, DT_PIN_CORES, NULL, 5, 4, "0-1,8-9|4-5,12-13|2-3,10-11|6-7,14-15|0-1,8-9",
                true);
    expect_plan(&t, DT_PIN_CORES, NULL, 1, 17, "0-15", true);
    dt_topology_free(&t);
}

/* ---- (d) CPU lists ---- */

static void round_trip(const char *in, const char *want)
{
    int ids[64];
    char buf[128];
    int n = dt_cpu_list_parse(in, ids, 64, "cpus");
    if (n < 0)
        fail_msg("'%s': %s", in, dt_last_error());
    dt_cpu_list_format(ids, n, buf, sizeof buf);
    assert_string_equal(buf, want);
}

static void parse_bad(const char *in, int cap, const char *msg)
{
    int ids[64];
    assert_int_equal(dt_cpu_list_parse(in, ids, cap, "cpus"), -DT_EUSAGE);
    assert_string_equal(dt_last_error(), msg);
}

static void test_cpu_lists(void **state)
{
    (void)state;
    round_trip("0-3,8", "0-3,8");
    round_trip("0-7,16-23", "0-7,16-23");
    round_trip("8,0-3", "8,0-3"); /* order is kept: it matters to list mode */
    round_trip("5", "5");
    round_trip("0,1,2,5,7", "0-2,5,7");
    round_trip("3-3", "3");
    round_trip(" 0-3\n", "0-3"); /* sysfs files end in a newline */
    round_trip("4095", "4095");
    round_trip("0-3,0-3", "0-3,0-3");

    int ids[4] = {0, 2, 4, 6};
    char buf[16];
    dt_cpu_list_format(ids, 4, buf, 8);
    assert_string_equal(buf, "0,2,4,6");
    dt_cpu_list_format(ids, 4, buf, 7);
    assert_string_equal(buf, "0,2...");
    dt_cpu_list_format(ids, 4, buf, 3);
    assert_string_equal(buf, "0");
    dt_cpu_list_format(ids, 0, buf, sizeof buf);
    assert_string_equal(buf, "");

    parse_bad("", 64, "cpus: empty CPU list");
    parse_bad(" \n", 64, "cpus: empty CPU list");
    parse_bad("0-", 64, "cpus: '0-' is not a CPU number or range like 0-7");
    parse_bad("-3", 64, "cpus: '-3' is not a CPU number or range like 0-7");
    parse_bad("x", 64, "cpus: 'x' is not a CPU number or range like 0-7");
    parse_bad("0-3,x", 64, "cpus: 'x' is not a CPU number or range like 0-7");
    parse_bad("1-2-3", 64, "cpus: '1-2-3' is not a CPU number or range like 0-7");
    parse_bad("1 ,2", 64, "cpus: '1 ' is not a CPU number or range like 0-7");
    parse_bad("+1", 64, "cpus: '+1' is not a CPU number or range like 0-7");
    parse_bad("3-1", 64, "cpus: range '3-1' runs backwards");
    parse_bad("0,3-1,5", 64, "cpus: range '3-1' runs backwards");
    parse_bad("1,,2", 64, "cpus: empty entry in '1,,2'");
    parse_bad("1,", 64, "cpus: empty entry in '1,'");
    parse_bad(",1", 64, "cpus: empty entry in ',1'");
    parse_bad("4096", 64, "cpus: '4096' names CPUs beyond the supported 4096");
    parse_bad("0-99999999999999999999", 64,
              "cpus: '0-99999999999999999999' names CPUs beyond the supported 4096");
    parse_bad("0-9", 4, "cpus: more than 4 CPUs listed");

    enum dt_pin_mode m;
    assert_int_equal(dt_pin_mode_parse("cores", &m, "--pin"), 0);
    assert_int_equal(m, DT_PIN_CORES);
    assert_int_equal(dt_pin_mode_parse("sockets", &m, "--pin"), 0);
    assert_int_equal(m, DT_PIN_SOCKETS);
    assert_int_equal(dt_pin_mode_parse("none", &m, "--pin"), 0);
    assert_int_equal(m, DT_PIN_NONE);
    assert_int_equal(dt_pin_mode_parse("0-7,16-23", &m, "--pin"), 0);
    assert_int_equal(m, DT_PIN_LIST);
    assert_string_equal(dt_pin_mode_name(DT_PIN_SOCKETS), "sockets");
    assert_int_equal(dt_pin_mode_parse("core", &m, "--pin"), -DT_EUSAGE);
    assert_string_equal(dt_last_error(),
                        "--pin: 'core' is not cores, sockets, none or a CPU list like 0-7,16-23");

    struct dt_topology t;
    assert_int_equal(dt_topology_read(&t, "/nonexistent", "0-"), -DT_EUSAGE);
    assert_string_equal(dt_last_error(),
                        "affinity mask: '0-' is not a CPU number or range like 0-7");
}

/* ---- (e) missing or odd sysfs ---- */

static void test_missing_topology(void **state)
{
    struct fixture *fx = *state;
    /* Nothing at all under the root: the mask alone, each CPU its own core. */
    struct dt_topology t = read_ok(fx->root, "0-3");
    assert_true(t.guessed);
    assert_describe(&t, "1 socket, 4 cores, 4 CPUs usable (no topology in sysfs: each CPU counted "
                        "as a core)");
    expect_plan(&t, DT_PIN_CORES, NULL, 2, 2, "0-1|2-3", false);
    expect_plan(&t, DT_PIN_SOCKETS, NULL, 2, 2, "0-3|0-3", true);
    dt_topology_free(&t);

    /* online present, topology directories missing. */
    fake_online(fx->root, "0-3\n");
    t = read_ok(fx->root, "0-7");
    assert_true(t.guessed);
    assert_int_equal(t.ncpus, 4); /* offline 4-7 dropped */
    assert_int_equal(t.cores, 4);
    dt_topology_free(&t);

    /* One CPU lacks its files: a half-known topology is not trusted. */
    for (int c = 0; c < 3; c++)
        fake_cpu(fx->root, c, 0, c / 2);
    t = read_ok(fx->root, "0-3");
    assert_true(t.guessed);
    assert_int_equal(t.smt, 1);
    dt_topology_free(&t);
    fake_cpu(fx->root, 3, 0, 1);
    t = read_ok(fx->root, "0-3");
    assert_false(t.guessed);
    assert_describe(&t, "1 socket, 2 cores, 4 CPUs usable (SMT 2)");
    dt_topology_free(&t);

    /* Garbage in a file, and an unparsable online list (ignored). */
    char dir[512];
    snprintf(dir, sizeof dir, "%s/devices/system/cpu/cpu2/topology", fx->root);
    write_text(dir, "core_id", "abc\n");
    fake_online(fx->root, "what\n");
    t = read_ok(fx->root, "0-5");
    assert_true(t.guessed);
    assert_int_equal(t.ncpus, 6);
    dt_topology_free(&t);

    /* An online list that leaves nothing of the mask is ignored too. */
    fake_online(fx->root, "8-9\n");
    t = read_ok(fx->root, "0-1");
    assert_int_equal(t.ncpus, 2);
    dt_topology_free(&t);
}

/* ---- the real machine ---- */

static void test_real_machine_pin(void **state)
{
    (void)state;
    struct dt_topology t = read_ok(NULL, NULL);
    assert_true(t.ncpus >= 1);
    char buf[160];
    dt_topology_describe(&t, buf, sizeof buf);
    print_message("this machine: %s\n", buf);

    struct dt_pin_plan p;
    assert_int_equal(dt_pin_plan_make(&p, &t, DT_PIN_CORES, NULL, 1, 1), 0);
    assert_int_equal(p.ncpus[0], 1);
    int cpu = p.cpus[0];
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        if (dt_pin_apply(&p, 0) < 0)
            _exit(2);
        cpu_set_t set;
        CPU_ZERO(&set);
        if (sched_getaffinity(0, sizeof set, &set) != 0)
            _exit(3);
        _exit(CPU_COUNT(&set) == 1 && CPU_ISSET(cpu, &set) ? 0 : 4);
    }
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    assert_int_equal(dt_pin_apply(&p, 1), -DT_ERUNTIME);
    assert_string_equal(dt_last_error(), "pinning rank 1 of a plan for 1 instances");
    dt_pin_plan_free(&p);
    dt_topology_free(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_reads_fake_tree, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cores_mode, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cores_mode_invariants, setup, teardown),
        cmocka_unit_test_setup_teardown(test_adjacent_sibling_numbering, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cores_mode_random_masks, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sockets_none_list_modes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_restricted_mask, setup, teardown),
        cmocka_unit_test_setup_teardown(test_oversubscription, setup, teardown),
        cmocka_unit_test(test_cpu_lists),
        cmocka_unit_test_setup_teardown(test_missing_topology, setup, teardown),
        cmocka_unit_test(test_real_machine_pin),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
