/* The PyTorch oracle of the parity tests (test_parity_*.c): tests/parity/gen_<what>.py writes
 * its reference tensors into a fresh temporary directory that the test group reads and then
 * removes. A missing torch FAILS the group, never skips it: parity is what these tests prove.
 *
 * Header-only (static inline), like fixtures.h, so each test binary includes it on its own.
 */
#ifndef DT_TESTS_PARITY_ORACLE_H
#define DT_TESTS_PARITY_ORACLE_H

#include <stdio.h>
#include <stdlib.h>

/* Makes the directory from the mkdtemp template dir (rewritten in place) and runs script
 * (relative to the repository root, where the tests run) on it: 0, or -1 with the reason on
 * stderr. */
static inline int parity_oracle_generate(char *dir, const char *script)
{
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return -1;
    }
    char cmd[8300];
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s '%s'", script, dir);
    int rc = system(cmd);
    if (rc != 0) {
        fprintf(stderr,
                "FAIL: PyTorch reference generation failed: '%s' exited with %d (needs "
                "/usr/bin/python3 with torch and numpy: Debian python3-torch python3-numpy; run "
                "from the repository root)\n",
                cmd, rc);
        return -1;
    }
    return 0;
}

/* Removes what parity_oracle_generate made: 0, or -1 (said on stderr). */
static inline int parity_oracle_remove(const char *dir)
{
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) {
        fprintf(stderr, "could not remove %s\n", dir);
        return -1;
    }
    return 0;
}

#endif
