/* Configs written inline in a test: loading one as "t.cfg", editing one line of it, expecting
 * a usage error. Shared by the config tests (test_config.c, test_config_blocks.c).
 *
 * Header-only (static inline), like fixtures.h; include it after <cmocka.h>.
 */
#ifndef DT_TESTS_CONFIG_TEXT_H
#define DT_TESTS_CONFIG_TEXT_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/config.h"
#include "util/err.h"

/* Loads text as "t.cfg" with the given --set overrides (the last error cleared first). */
static inline int config_load_text(struct dt_config *cfg, const char *text, const char *const *sets,
                                   int nsets)
{
    dt_clear_error();
    return dt_config_load_string(cfg, "t.cfg", text, sets, nsets);
}

/* text with the first occurrence of from (which must be there) replaced by to (malloc'd). */
static inline char *config_edit_text(const char *text, const char *from, const char *to)
{
    const char *at = strstr(text, from);
    assert_non_null(at);
    size_t head = (size_t)(at - text), len = strlen(text) - strlen(from) + strlen(to) + 1;
    char *out = malloc(len);
    assert_non_null(out);
    snprintf(out, len, "%.*s%s%s", (int)head, text, to, at + strlen(from));
    return out;
}

/* Loading text fails with DT_EUSAGE, a one-line message holding message, and nothing kept. */
static inline void config_expect_usage_error(const char *text, const char *const *sets, int nsets,
                                             const char *message)
{
    struct dt_config cfg;
    int rc = config_load_text(&cfg, text, sets, nsets);
    if (rc != -DT_EUSAGE || !strstr(dt_last_error(), message) || strchr(dt_last_error(), '\n'))
        fail_msg("rc %d, message \"%s\"; expected -2 and \"%s\" on one line", rc, dt_last_error(),
                 message);
    assert_null(cfg.text);
}

#endif
