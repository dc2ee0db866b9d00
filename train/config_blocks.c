/* Block expansion for the config (the syntax and naming rules are in config_blocks.h).
 *
 * Works on libconfig settings, before any layer is validated: a block use becomes copies of
 * its block's layer groups, "$param" strings replaced by the use's values, appended to one new
 * flat list that train/config.c then loads exactly as it loads a list written out by hand. So
 * a layer key means the same in a block as outside, every layer check applies unchanged, and
 * the expanded list of a block config is the one its flat twin would give, index by index
 * (initial weights are keyed by that index: the same bits).
 *
 * Copies keep the source line of what they copy, so a bad key inside a block is reported at
 * its line in the block's definition.
 */
#include "train/config_blocks.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/err.h"

/* Most parameters one block takes. */
#define MAX_PARAMS 32

/* A block instance's parameter values, already resolved against the enclosing instance. */
struct binding {
    const char *block;
    int n;
    const char *name[MAX_PARAMS];
    const config_setting_t *value[MAX_PARAMS];
};

struct expand {
    const config_setting_t *blocks;
    const char *file;
    int max_layers;
    config_setting_t *out;                 /* the flat list being built */
    const char *stack[DT_BLOCK_MAX_DEPTH]; /* blocks being expanded, outermost first */
    int depth;
};

/* "FILE:LINE: PATH.I" or "--set PATH.I" (file NULL). */
static void where_of(char *out, size_t size, const struct expand *ex, const config_setting_t *s,
                     const char *path, int index)
{
    if (ex->file)
        snprintf(out, size, "%s:%d: %s.%d", ex->file, config_setting_source_line(s), path, index);
    else
        snprintf(out, size, "--set %s.%d", path, index);
}

const char *dt_config_kind_name(const config_setting_t *s)
{
    switch (config_setting_type(s)) {
    case CONFIG_TYPE_GROUP:
        return "a group";
    case CONFIG_TYPE_INT:
    case CONFIG_TYPE_INT64:
        return "an integer";
    case CONFIG_TYPE_FLOAT:
        return "a float";
    case CONFIG_TYPE_STRING:
        return "a string";
    case CONFIG_TYPE_BOOL:
        return "a boolean";
    case CONFIG_TYPE_ARRAY:
        return "an array";
    case CONFIG_TYPE_LIST:
        return "a list";
    default:
        return "nothing";
    }
}

int dt_layer_name_check(const char *name, const char *where)
{
    size_t len = strlen(name);
    if (len == 0 || len >= DT_LAYER_NAME_MAX)
        return dt_fail(DT_EUSAGE, "%s: a layer name has 1 to %d characters, got %zu", where,
                       DT_LAYER_NAME_MAX - 1, len);
    for (size_t i = 0; i < len; i++) {
        char c = name[i];
        bool dot_ok = i > 0 && i + 1 < len && name[i - 1] != '.';
        if (!(isalnum((unsigned char)c) || c == '_' || (c == '.' && dot_ok)))
            return dt_fail(DT_EUSAGE,
                           "%s: \"%s\" is not a layer name (parts of letters, digits and _ "
                           "joined by single dots, like \"layer2.0.conv1\")",
                           where, name);
    }
    return 0;
}

/* The value `s` stands for: a "$p" string is parameter p of the instance being expanded. */
static int resolve(const struct binding *b, const config_setting_t *s, const char *where,
                   const config_setting_t **out)
{
    *out = s;
    if (config_setting_type(s) != CONFIG_TYPE_STRING)
        return 0;
    const char *v = config_setting_get_string(s);
    if (v[0] != '$')
        return 0;
    if (!b)
        return dt_fail(DT_EUSAGE, "%s: \"%s\": parameters exist only inside model.blocks", where,
                       v);
    for (int i = 0; i < b->n; i++)
        if (strcmp(b->name[i], v + 1) == 0) {
            *out = b->value[i];
            return 0;
        }
    return dt_fail(DT_EUSAGE, "%s: \"%s\": block \"%s\" has no parameter \"%s\"", where, v,
                   b->block, v + 1);
}

/* Copies `src` (its "$p" strings resolved) into parent as `name` (NULL in a list or array). */
static int copy_value(config_setting_t *parent, const char *name, const config_setting_t *src,
                      const struct binding *b, const char *where)
{
    const config_setting_t *v;
    int rc = resolve(b, src, where, &v);
    if (rc)
        return rc;
    int type = config_setting_type(v);
    config_setting_t *s = config_setting_add(parent, name, type);
    if (!s)
        return dt_fail(DT_EUSAGE, "%s: %s cannot go here (a list or array holds one kind)", where,
                       dt_config_kind_name(v));
    s->line = v->line;
    switch (type) {
    case CONFIG_TYPE_INT:
        config_setting_set_int(s, config_setting_get_int(v));
        break;
    case CONFIG_TYPE_INT64:
        config_setting_set_int64(s, config_setting_get_int64(v));
        break;
    case CONFIG_TYPE_FLOAT:
        config_setting_set_float(s, config_setting_get_float(v));
        break;
    case CONFIG_TYPE_BOOL:
        config_setting_set_bool(s, config_setting_get_bool(v));
        break;
    case CONFIG_TYPE_STRING:
        config_setting_set_string(s, config_setting_get_string(v));
        break;
    default: /* group, list, array */
        for (int i = 0; i < config_setting_length(v); i++) {
            const config_setting_t *e = config_setting_get_elem(v, (unsigned)i);
            if ((rc = copy_value(s, config_setting_is_group(v) ? config_setting_name(e) : NULL, e,
                                 b, where)))
                return rc;
        }
    }
    return 0;
}

static int expand_list(struct expand *ex, const config_setting_t *list, const char *path,
                       const struct binding *b, const char *prefix, bool naming, int block_start);

/* "a, b, c": the names of the defined blocks. */
static void block_names(const config_setting_t *blocks, char *out, size_t size)
{
    size_t o = 0;
    out[0] = 0;
    for (int i = 0; blocks && i < config_setting_length(blocks) && o < size; i++)
        o += (size_t)snprintf(out + o, size - o, "%s%s", i ? ", " : "",
                              config_setting_name(config_setting_get_elem(blocks, (unsigned)i)));
}

/* Checks a block definition's shape: { params = [..]; defaults = {..}; layers = (..); }. */
static int check_definition(const struct expand *ex, const config_setting_t *def, const char *name)
{
    char where[1200];
    if (ex->file)
        snprintf(where, sizeof where, "%s:%d: model.blocks.%s", ex->file,
                 config_setting_source_line(def), name);
    else
        snprintf(where, sizeof where, "model.blocks.%s", name);
    if (!config_setting_is_group(def))
        return dt_fail(DT_EUSAGE,
                       "%s: expected a group { params = [...]; layers = (...); }, got %s", where,
                       dt_config_kind_name(def));
    for (int i = 0; i < config_setting_length(def); i++) {
        const char *key = config_setting_name(config_setting_get_elem(def, (unsigned)i));
        if (strcmp(key, "params") && strcmp(key, "defaults") && strcmp(key, "layers"))
            return dt_fail(DT_EUSAGE, "%s.%s: unknown key (a block has params, defaults, layers)",
                           where, key);
    }
    const config_setting_t *layers = config_setting_get_member(def, "layers");
    if (!layers || !config_setting_is_list(layers) || config_setting_length(layers) < 1)
        return dt_fail(DT_EUSAGE, "%s.layers: expected a list of layer groups ( {...}, ... )%s",
                       where, layers ? "" : ", missing");
    const config_setting_t *params = config_setting_get_member(def, "params");
    if (params && !config_setting_is_array(params) && !config_setting_is_list(params))
        return dt_fail(DT_EUSAGE, "%s.params: expected a list of names like [\"width\"], got %s",
                       where, dt_config_kind_name(params));
    int np = params ? config_setting_length(params) : 0;
    if (np > MAX_PARAMS)
        return dt_fail(DT_EUSAGE, "%s.params: at most %d parameters, got %d", where, MAX_PARAMS,
                       np);
    for (int i = 0; i < np; i++) {
        const config_setting_t *p = config_setting_get_elem(params, (unsigned)i);
        const char *pn = config_setting_get_string(p);
        if (!pn || !pn[0] ||
            strspn(pn, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                       "0123456789_") != strlen(pn))
            return dt_fail(DT_EUSAGE, "%s.params: element %d: expected a name like \"width\"",
                           where, i);
        if (!strcmp(pn, "block") || !strcmp(pn, "name") || !strcmp(pn, "repeat"))
            return dt_fail(DT_EUSAGE, "%s.params: \"%s\" is taken by the block use itself", where,
                           pn);
    }
    const config_setting_t *defaults = config_setting_get_member(def, "defaults");
    if (defaults && !config_setting_is_group(defaults))
        return dt_fail(DT_EUSAGE, "%s.defaults: expected a group { stride = 1; }, got %s", where,
                       dt_config_kind_name(defaults));
    for (int i = 0; defaults && i < config_setting_length(defaults); i++) {
        const char *dn = config_setting_name(config_setting_get_elem(defaults, (unsigned)i));
        bool known = false;
        for (int j = 0; j < np && !known; j++)
            known = !strcmp(config_setting_get_string(config_setting_get_elem(params, (unsigned)j)),
                            dn);
        if (!known)
            return dt_fail(DT_EUSAGE, "%s.defaults.%s: not one of the block's params", where, dn);
    }
    return 0;
}

/* The values of block `name`'s parameters for this use (outer "$p" resolved through b). */
static int bind(const config_setting_t *def, const char *name, const config_setting_t *use,
                const struct binding *b, const char *where, struct binding *nb)
{
    const config_setting_t *params = config_setting_get_member(def, "params");
    const config_setting_t *defaults = config_setting_get_member(def, "defaults");
    int np = params ? config_setting_length(params) : 0;
    char taken[512];
    size_t o = 0;
    taken[0] = 0;
    for (int j = 0; j < np && o < sizeof taken; j++)
        o += (size_t)snprintf(
            taken + o, sizeof taken - o, "%s%s", j ? ", " : "",
            config_setting_get_string(config_setting_get_elem(params, (unsigned)j)));
    nb->block = name;
    nb->n = 0;
    for (int i = 0; i < config_setting_length(use); i++) {
        const char *key = config_setting_name(config_setting_get_elem(use, (unsigned)i));
        if (!strcmp(key, "block") || !strcmp(key, "name") || !strcmp(key, "repeat"))
            continue;
        bool known = false;
        for (int j = 0; j < np && !known; j++)
            known = !strcmp(config_setting_get_string(config_setting_get_elem(params, (unsigned)j)),
                            key);
        if (!known)
            return dt_fail(DT_EUSAGE, "%s.%s: block \"%s\" has no such parameter (it takes: %s)",
                           where, key, name, np ? taken : "none");
    }
    for (int j = 0; j < np; j++) {
        const char *pn = config_setting_get_string(config_setting_get_elem(params, (unsigned)j));
        const config_setting_t *v = config_setting_get_member(use, pn);
        char pwhere[1400];
        snprintf(pwhere, sizeof pwhere, "%s.%s", where, pn);
        if (v) {
            int rc = resolve(b, v, pwhere, &v);
            if (rc)
                return rc;
        } else if (defaults) {
            v = config_setting_get_member(defaults, pn);
        }
        if (!v)
            return dt_fail(DT_EUSAGE, "%s: block \"%s\" needs parameter \"%s\" (it takes: %s)",
                           where, name, pn, taken);
        nb->name[nb->n] = pn;
        nb->value[nb->n++] = v;
    }
    return 0;
}

/* A string member of `g` ("$p" resolved), NULL when absent. */
static int string_member(const config_setting_t *g, const char *key, const struct binding *b,
                         const char *where, const char **out)
{
    *out = NULL;
    const config_setting_t *s = config_setting_get_member(g, key);
    if (!s)
        return 0;
    char kwhere[1400];
    snprintf(kwhere, sizeof kwhere, "%s.%s", where, key);
    int rc = resolve(b, s, kwhere, &s);
    if (rc)
        return rc;
    if (config_setting_type(s) != CONFIG_TYPE_STRING)
        return dt_fail(DT_EUSAGE, "%s: expected a string, got %s", kwhere, dt_config_kind_name(s));
    *out = config_setting_get_string(s);
    return 0;
}

/* How many instances of each use name a list has made so far: N.0, N.1, ... go on counting
 * across the uses of one name. */
struct counter {
    const char *name;
    int next;
};

static int expand_use(struct expand *ex, const config_setting_t *use, const char *where,
                      const struct binding *b, const char *prefix, bool naming,
                      struct counter *counters, int *ncounters)
{
    const char *name, *inst;
    int rc = string_member(use, "block", b, where, &name);
    if (!rc)
        rc = string_member(use, "name", b, where, &inst);
    if (rc)
        return rc;
    char kwhere[1400], names[512];
    snprintf(kwhere, sizeof kwhere, "%s.block", where);
    const config_setting_t *def = ex->blocks ? config_setting_get_member(ex->blocks, name) : NULL;
    block_names(ex->blocks, names, sizeof names);
    if (!def)
        return dt_fail(DT_EUSAGE, "%s: unknown block \"%s\" (%s%s)", kwhere, name,
                       ex->blocks ? "defined: " : "there is no model.blocks",
                       ex->blocks ? names : "");
    for (int d = 0; d < ex->depth; d++)
        if (!strcmp(ex->stack[d], name)) {
            char chain[512];
            size_t o = 0;
            for (int k = d; k < ex->depth && o < sizeof chain; k++)
                o += (size_t)snprintf(chain + o, sizeof chain - o, "%s -> ", ex->stack[k]);
            return dt_fail(DT_EUSAGE, "%s: block \"%s\" uses itself (%s%s)", kwhere, name, chain,
                           name);
        }
    if (ex->depth >= DT_BLOCK_MAX_DEPTH)
        return dt_fail(DT_EUSAGE, "%s: blocks nest at most %d deep", kwhere, DT_BLOCK_MAX_DEPTH);
    if ((rc = check_definition(ex, def, name)))
        return rc;
    long long repeat = 1;
    const config_setting_t *r = config_setting_get_member(use, "repeat");
    if (r) {
        snprintf(kwhere, sizeof kwhere, "%s.repeat", where);
        if ((rc = resolve(b, r, kwhere, &r)))
            return rc;
        int t = config_setting_type(r);
        if (t != CONFIG_TYPE_INT && t != CONFIG_TYPE_INT64)
            return dt_fail(DT_EUSAGE, "%s: expected an integer, got %s", kwhere,
                           dt_config_kind_name(r));
        repeat = config_setting_get_int64(r);
        if (repeat < 1 || repeat > ex->max_layers)
            return dt_fail(DT_EUSAGE, "%s: must be between 1 and %d, got %lld", kwhere,
                           ex->max_layers, repeat);
    }
    if (inst) {
        snprintf(kwhere, sizeof kwhere, "%s.name", where);
        if ((rc = dt_layer_name_check(inst, kwhere)))
            return rc;
    }
    struct binding nb;
    if ((rc = bind(def, name, use, b, where, &nb)))
        return rc;
    struct counter *c = NULL;
    for (int i = 0; inst && i < *ncounters && !c; i++)
        if (!strcmp(counters[i].name, inst))
            c = &counters[i];
    if (inst && !c) {
        c = &counters[(*ncounters)++];
        c->name = inst;
        c->next = 0;
    }
    char path[256];
    snprintf(path, sizeof path, "model.blocks.%s.layers", name);
    ex->stack[ex->depth++] = name;
    for (long long k = 0; k < repeat && !rc; k++) {
        char instance[DT_LAYER_NAME_MAX + 32] = "";
        bool named = naming && inst;
        if (named) {
            snprintf(instance, sizeof instance, "%s%s%s.%d", prefix, prefix[0] ? "." : "", inst,
                     c->next);
            if (strlen(instance) >= DT_LAYER_NAME_MAX)
                return dt_fail(DT_EUSAGE, "%s.name: \"%s\" is longer than %d characters", where,
                               instance, DT_LAYER_NAME_MAX - 1);
        }
        if (c)
            c->next++;
        rc = expand_list(ex, config_setting_get_member(def, "layers"), path, &nb, instance, named,
                         config_setting_length(ex->out));
    }
    ex->depth--;
    return rc;
}

static int copy_layer(struct expand *ex, const config_setting_t *entry, const char *where,
                      const struct binding *b, const char *prefix, bool naming, int block_start)
{
    int index = config_setting_length(ex->out);
    if (index >= ex->max_layers)
        return dt_fail(DT_EUSAGE, "%s: more than %d layers once blocks are expanded", where,
                       ex->max_layers);
    const char *own;
    int rc = string_member(entry, "name", b, where, &own);
    if (rc)
        return rc;
    char kwhere[1400], full[DT_LAYER_NAME_MAX + 80] = "";
    snprintf(kwhere, sizeof kwhere, "%s.name", where);
    if (own && (rc = dt_layer_name_check(own, kwhere)))
        return rc;
    if (block_start < 0 && own) /* a layer of the top-level list keeps its own name */
        snprintf(full, sizeof full, "%s", own);
    else if (naming && own)
        snprintf(full, sizeof full, "%s.%s", prefix, own);
    else if (naming && block_start >= 0)
        snprintf(full, sizeof full, "%s.%d", prefix, index - block_start);
    if (strlen(full) >= DT_LAYER_NAME_MAX)
        return dt_fail(DT_EUSAGE, "%s: the layer's name \"%s\" is longer than %d characters",
                       kwhere, full, DT_LAYER_NAME_MAX - 1);
    const config_setting_t *from = config_setting_get_member(entry, "from");
    if (from && block_start >= 0) {
        snprintf(kwhere, sizeof kwhere, "%s.from", where);
        if ((rc = resolve(b, from, kwhere, &from)))
            return rc;
        int t = config_setting_type(from);
        long long f =
            t == CONFIG_TYPE_INT || t == CONFIG_TYPE_INT64 ? config_setting_get_int64(from) : 0;
        int pos = index - block_start;
        if (f < 0 && pos + f < -1)
            return dt_fail(DT_EUSAGE,
                           "%s: %lld leaves its block (this is the block's layer %d: -%d reaches "
                           "the block's input, the furthest a skip inside a block may go)",
                           kwhere, f, pos, pos + 1);
    }
    config_setting_t *g = config_setting_add(ex->out, NULL, CONFIG_TYPE_GROUP);
    if (!g)
        return dt_fail(DT_ERUNTIME, "%s: out of memory expanding blocks", where);
    g->line = entry->line;
    for (int i = 0; i < config_setting_length(entry); i++) {
        const config_setting_t *m = config_setting_get_elem(entry, (unsigned)i);
        const char *key = config_setting_name(m);
        if (!strcmp(key, "name"))
            continue;
        snprintf(kwhere, sizeof kwhere, "%s.%s", where, key);
        if ((rc = copy_value(g, key, m, b, kwhere)))
            return rc;
    }
    if (full[0]) {
        config_setting_t *n = config_setting_add(g, "name", CONFIG_TYPE_STRING);
        if (!n || !config_setting_set_string(n, full))
            return dt_fail(DT_ERUNTIME, "%s: out of memory expanding blocks", where);
        n->line = entry->line;
    }
    return 0;
}

/* block_start: index in the output where the enclosing block instance begins; -1 at the top. */
static int expand_list(struct expand *ex, const config_setting_t *list, const char *path,
                       const struct binding *b, const char *prefix, bool naming, int block_start)
{
    int n = config_setting_length(list);
    struct counter *counters = calloc((size_t)n + 1, sizeof *counters);
    if (!counters)
        return dt_fail(DT_ERUNTIME, "out of memory expanding blocks");
    int ncounters = 0, rc = 0;
    for (int i = 0; i < n && !rc; i++) {
        const config_setting_t *e = config_setting_get_elem(list, (unsigned)i);
        char where[1200];
        where_of(where, sizeof where, ex, e, path, i);
        if (!config_setting_is_group(e))
            rc = dt_fail(DT_EUSAGE,
                         "%s: expected a group like { type = \"relu\"; } or { block = \"NAME\"; }, "
                         "got %s",
                         where, dt_config_kind_name(e));
        else if (config_setting_get_member(e, "block") && config_setting_get_member(e, "type"))
            rc = dt_fail(DT_EUSAGE, "%s: give type (a layer) or block (a block use), not both",
                         where);
        else if (config_setting_get_member(e, "block"))
            rc = expand_use(ex, e, where, b, prefix, naming, counters, &ncounters);
        else
            rc = copy_layer(ex, e, where, b, prefix, naming, block_start);
    }
    free(counters);
    return rc;
}

bool dt_blocks_used(const config_setting_t *blocks, const config_setting_t *layers)
{
    if (blocks)
        return true;
    for (int i = 0; layers && config_setting_is_list(layers) && i < config_setting_length(layers);
         i++) {
        const config_setting_t *e = config_setting_get_elem(layers, (unsigned)i);
        if (config_setting_is_group(e) && config_setting_get_member(e, "block"))
            return true;
    }
    return false;
}

int dt_blocks_expand(const config_setting_t *blocks, const config_setting_t *layers,
                     const char *file, int max_layers, config_t *out, config_setting_t **expanded)
{
    char where[1100];
    if (file)
        snprintf(where, sizeof where, "%s:%d: model.blocks", file,
                 blocks ? config_setting_source_line(blocks) : 0);
    else
        snprintf(where, sizeof where, "model.blocks");
    if (blocks && !config_setting_is_group(blocks))
        return dt_fail(DT_EUSAGE, "%s: expected a group of named blocks { NAME = {...}; }, got %s",
                       where, dt_config_kind_name(blocks));
    if (!config_setting_is_list(layers))
        return dt_fail(DT_EUSAGE, "%s%s%d: model.layers: expected a list of layer groups, got %s",
                       file ? file : "--set", file ? ":" : " ",
                       file ? config_setting_source_line(layers) : 0, dt_config_kind_name(layers));
    struct expand ex = {.blocks = blocks, .file = file, .max_layers = max_layers};
    ex.out = config_setting_add(config_root_setting(out), "layers", CONFIG_TYPE_LIST);
    if (!ex.out)
        return dt_fail(DT_ERUNTIME, "out of memory expanding blocks");
    ex.out->line = layers->line;
    int rc = expand_list(&ex, layers, "model.layers", NULL, "", true, -1);
    *expanded = ex.out;
    return rc;
}

/* ---- the source text ---- */

static void write_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            fprintf(f, "\\%c", *s);
        else if ((unsigned char)*s < 0x20)
            fprintf(f, "\\x%02x", (unsigned char)*s);
        else
            fputc(*s, f);
    }
    fputc('"', f);
}

/* The shortest literal that reads back as the same double, always with a '.', 'e' or 'n'. */
static void write_real(FILE *f, double v)
{
    char s[40];
    for (int digits = 1; digits <= 17; digits++) {
        snprintf(s, sizeof s, "%.*g", digits, v);
        if (strtod(s, NULL) == v)
            break;
    }
    fprintf(f, "%s%s", s, strpbrk(s, ".en") ? "" : ".0");
}

static bool is_flat(const config_setting_t *s)
{
    for (int i = 0; i < config_setting_length(s); i++) {
        int t = config_setting_type(config_setting_get_elem(s, (unsigned)i));
        if (t == CONFIG_TYPE_GROUP || t == CONFIG_TYPE_LIST)
            return false;
    }
    return true;
}

static void write_value(FILE *f, const config_setting_t *s, const char *indent, int level)
{
    int n = config_setting_length(s);
    switch (config_setting_type(s)) {
    case CONFIG_TYPE_INT:
        fprintf(f, "%d", config_setting_get_int(s));
        break;
    case CONFIG_TYPE_INT64:
        fprintf(f, "%lldL", config_setting_get_int64(s));
        break;
    case CONFIG_TYPE_FLOAT:
        write_real(f, config_setting_get_float(s));
        break;
    case CONFIG_TYPE_BOOL:
        fputs(config_setting_get_bool(s) ? "true" : "false", f);
        break;
    case CONFIG_TYPE_STRING:
        write_string(f, config_setting_get_string(s));
        break;
    case CONFIG_TYPE_ARRAY:
        fputc('[', f);
        for (int i = 0; i < n; i++) {
            fputs(i ? ", " : " ", f);
            write_value(f, config_setting_get_elem(s, (unsigned)i), indent, level);
        }
        fputs(" ]", f);
        break;
    case CONFIG_TYPE_GROUP:
        if (is_flat(s)) { /* a layer entry: one line */
            fputs("{", f);
            for (int i = 0; i < n; i++) {
                const config_setting_t *m = config_setting_get_elem(s, (unsigned)i);
                fprintf(f, " %s = ", config_setting_name(m));
                write_value(f, m, indent, level + 1);
                fputc(';', f);
            }
            fputs(" }", f);
            break;
        }
        fputs("{\n", f);
        for (int i = 0; i < n; i++) {
            const config_setting_t *m = config_setting_get_elem(s, (unsigned)i);
            fprintf(f, "%s%*s%s = ", indent, 2 * (level + 1), "", config_setting_name(m));
            write_value(f, m, indent, level + 1);
            fputs(";\n", f);
        }
        fprintf(f, "%s%*s}", indent, 2 * level, "");
        break;
    case CONFIG_TYPE_LIST:
        fputs("(\n", f);
        for (int i = 0; i < n; i++) {
            fprintf(f, "%s%*s", indent, 2 * (level + 1), "");
            write_value(f, config_setting_get_elem(s, (unsigned)i), indent, level + 1);
            fputs(i + 1 < n ? ",\n" : "\n", f);
        }
        fprintf(f, "%s%*s)", indent, 2 * level, "");
        break;
    }
}

char *dt_blocks_source_text(const config_setting_t *blocks, const config_setting_t *layers,
                            const char *indent)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return NULL;
    if (blocks) {
        fprintf(f, "%sblocks = ", indent);
        write_value(f, blocks, indent, 0);
        fputs(";\n", f);
    }
    fprintf(f, "%slayers = ", indent);
    write_value(f, layers, indent, 0);
    fputs(";\n", f);
    if (fclose(f) != 0) {
        free(buf);
        return NULL;
    }
    return buf;
}

/* ---- names ---- */

/* The prefix of layer i's tensor names. */
static const char *prefix_of(const struct dt_layer_spec *s, int i, char *buf, size_t size)
{
    if (s->name[0])
        return s->name;
    snprintf(buf, size, "layers.%d", i);
    return buf;
}

/* a == b, or a is b's dotted prefix ("a" of "a.b"), or the other way round. */
static bool clash(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b), n = la < lb ? la : lb;
    if (strncmp(a, b, n) != 0)
        return false;
    return la == lb || (la < lb ? b[la] == '.' : a[lb] == '.');
}

int dt_layer_names_unique(const struct dt_layer_spec *specs, int n, const char *file)
{
    for (int j = 0; j < n; j++) {
        if (!specs[j].name[0])
            continue;
        for (int i = 0; i < n; i++) {
            char bi[32], bj[32];
            const char *pi = prefix_of(&specs[i], i, bi, sizeof bi);
            const char *pj = prefix_of(&specs[j], j, bj, sizeof bj);
            if (i == j || !clash(pi, pj))
                continue;
            return dt_fail(DT_EUSAGE,
                           "%s:%d: model.layers.%d.name: \"%s\" clashes with layer %d's \"%s\" "
                           "(their tensor names could collide)",
                           file, specs[j].line, j, pj, i, pi);
        }
    }
    return 0;
}
