/* Reading and writing train.freeze, optimizer.param_groups and data.select_classes (the
 * syntax is in finetune_config.h). train/config.c calls these codecs from its key table, for
 * the file, --set values and defaults alike, and puts what `write` returns in the effective
 * text, which loads back to the same values. */
#include "train/finetune_config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/config_blocks.h"
#include "util/err.h"

bool dt_pattern_matches(const char *pattern, const char *name)
{
    size_t n = strlen(pattern);
    return strncmp(pattern, name, n) == 0 && (name[n] == 0 || name[n] == '.');
}

static bool is_list(const config_setting_t *s)
{
    return config_setting_is_array(s) || config_setting_is_list(s);
}

static int load_patterns(void *field, const config_setting_t *s, const char *where)
{
    struct dt_name_patterns *p = field;
    if (!is_list(s))
        return dt_fail(DT_EUSAGE, "%s: expected a list of names like [\"conv1\", \"layer1\"]",
                       where);
    int n = config_setting_length(s);
    if (n > DT_MAX_PATTERNS)
        return dt_fail(DT_EUSAGE, "%s: at most %d names, got %d", where, DT_MAX_PATTERNS, n);
    memset(p, 0, sizeof *p);
    for (int i = 0; i < n; i++) {
        const char *v = config_setting_get_string(config_setting_get_elem(s, (unsigned)i));
        char ewhere[1500];
        snprintf(ewhere, sizeof ewhere, "%s: element %d", where, i);
        if (!v)
            return dt_fail(DT_EUSAGE, "%s: expected a string", ewhere);
        int rc = dt_layer_name_check(v, ewhere);
        if (rc)
            return rc;
        snprintf(p->p[i], sizeof p->p[i], "%s", v);
    }
    p->n = n;
    return 0;
}

/* What print writes of field, as a malloc'd string (NULL when out of memory): the codecs'
 * write. */
static char *text_of(void (*print)(FILE *, const void *), const void *field)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return NULL;
    print(f, field);
    return fclose(f) == 0 ? buf : (free(buf), NULL);
}

static void print_names(FILE *f, const void *field)
{
    const struct dt_name_patterns *p = field;
    fputc('[', f);
    for (int i = 0; i < p->n; i++)
        fprintf(f, "%s\"%s\"", i ? ", " : " ", p->p[i]); /* names need no escapes */
    fputs(p->n ? " ]" : "]", f);
}

static char *write_patterns(const void *field)
{
    return text_of(print_names, field);
}

static int load_group(struct dt_param_group_spec *g, const config_setting_t *s, const char *where)
{
    if (!config_setting_is_group(s))
        return dt_fail(DT_EUSAGE,
                       "%s: expected a group like { match = [\"fc\"]; lr_scale = 10.0; }", where);
    for (int i = 0; i < config_setting_length(s); i++) {
        const char *key = config_setting_name(config_setting_get_elem(s, (unsigned)i));
        if (strcmp(key, "match") && strcmp(key, "lr_scale"))
            return dt_fail(DT_EUSAGE, "%s.%s: unknown key (a parameter group has match, lr_scale)",
                           where, key);
    }
    char kwhere[1700];
    const config_setting_t *m = config_setting_get_member(s, "match");
    snprintf(kwhere, sizeof kwhere, "%s.match", where);
    if (!m)
        return dt_fail(DT_EUSAGE, "%s: missing (the names the group applies to)", kwhere);
    int rc = load_patterns(&g->match, m, kwhere);
    if (rc)
        return rc;
    if (g->match.n == 0)
        return dt_fail(DT_EUSAGE, "%s: names no parameter (an empty list)", kwhere);
    const config_setting_t *l = config_setting_get_member(s, "lr_scale");
    snprintf(kwhere, sizeof kwhere, "%s.lr_scale", where);
    if (!l)
        return dt_fail(DT_EUSAGE, "%s: missing (the group's lr is optimizer.lr x lr_scale)",
                       kwhere);
    int t = config_setting_type(l);
    if (t != CONFIG_TYPE_FLOAT && t != CONFIG_TYPE_INT && t != CONFIG_TYPE_INT64)
        return dt_fail(DT_EUSAGE, "%s: expected a number", kwhere);
    double v =
        t == CONFIG_TYPE_FLOAT ? config_setting_get_float(l) : (double)config_setting_get_int64(l);
    if (!(v > 0 && v <= 1e4))
        return dt_fail(DT_EUSAGE,
                       "%s: must be in (0, 10000], got %g (train.freeze stops a parameter)", kwhere,
                       v);
    g->lr_scale = (float)v;
    return 0;
}

static int load_groups(void *field, const config_setting_t *s, const char *where)
{
    struct dt_param_groups *gs = field;
    if (!config_setting_is_list(s))
        return dt_fail(DT_EUSAGE,
                       "%s: expected a list of groups ( { match = [\"fc\"]; lr_scale = 10.0; } )",
                       where);
    int n = config_setting_length(s);
    if (n > DT_MAX_PARAM_GROUPS)
        return dt_fail(DT_EUSAGE, "%s: at most %d groups, got %d", where, DT_MAX_PARAM_GROUPS, n);
    memset(gs, 0, sizeof *gs);
    for (int i = 0; i < n; i++) {
        char gwhere[1500];
        const config_setting_t *e = config_setting_get_elem(s, (unsigned)i);
        snprintf(gwhere, sizeof gwhere, "%s.%d", where, i);
        int rc = load_group(&gs->g[i], e, gwhere);
        if (rc)
            return rc;
    }
    gs->n = n;
    return 0;
}

/* The shortest literal that reads back as the same float. */
static void write_float(FILE *f, float v)
{
    char s[40];
    for (int digits = 1; digits <= 9; digits++) {
        snprintf(s, sizeof s, "%.*g", digits, (double)v);
        if ((float)strtod(s, NULL) == v)
            break;
    }
    fprintf(f, "%s%s", s, strpbrk(s, ".en") ? "" : ".0");
}

static void print_groups(FILE *f, const void *field)
{
    const struct dt_param_groups *gs = field;
    fputc('(', f);
    for (int i = 0; i < gs->n; i++) {
        fprintf(f, "%s{ match = ", i ? ", " : " ");
        print_names(f, &gs->g[i].match);
        fputs("; lr_scale = ", f);
        write_float(f, gs->g[i].lr_scale);
        fputs("; }", f);
    }
    fputs(gs->n ? " )" : ")", f);
}

static char *write_groups(const void *field)
{
    return text_of(print_groups, field);
}

static int load_select(void *field, const config_setting_t *s, const char *where)
{
    struct dt_class_select *c = field;
    if (!is_list(s))
        return dt_fail(DT_EUSAGE, "%s: expected a list of class numbers like [5, 6, 7]", where);
    int n = config_setting_length(s);
    if (n > DT_MAX_SELECT)
        return dt_fail(DT_EUSAGE, "%s: at most %d classes, got %d", where, DT_MAX_SELECT, n);
    memset(c, 0, sizeof *c);
    for (int i = 0; i < n; i++) {
        const config_setting_t *e = config_setting_get_elem(s, (unsigned)i);
        int t = config_setting_type(e);
        if (t != CONFIG_TYPE_INT && t != CONFIG_TYPE_INT64)
            return dt_fail(DT_EUSAGE, "%s: element %d: expected a class number", where, i);
        long long v = config_setting_get_int64(e);
        if (v < 0 || v >= DT_MAX_SELECT)
            return dt_fail(DT_EUSAGE, "%s: element %d: class %lld is not between 0 and %d", where,
                           i, v, DT_MAX_SELECT - 1);
        for (int j = 0; j < i; j++)
            if (c->classes[j] == v)
                return dt_fail(DT_EUSAGE, "%s: class %lld is listed twice", where, v);
        c->classes[i] = (int)v;
    }
    c->n = n;
    return 0;
}

static void print_select(FILE *f, const void *field)
{
    const struct dt_class_select *c = field;
    fputc('[', f);
    for (int i = 0; i < c->n; i++)
        fprintf(f, "%s%d", i ? ", " : " ", c->classes[i]);
    fputs(c->n ? " ]" : "]", f);
}

static char *write_select(const void *field)
{
    return text_of(print_select, field);
}

const struct dt_config_codec dt_patterns_codec = {"name list", "a list of names like [\"conv1\"]",
                                                  load_patterns, write_patterns};
const struct dt_config_codec dt_param_groups_codec = {
    "group list", "a list of groups like ( { match = [\"fc\"]; lr_scale = 10.0; } )", load_groups,
    write_groups};
const struct dt_config_codec dt_class_select_codec = {
    "int list", "a list of class numbers like [5, 6]", load_select, write_select};
