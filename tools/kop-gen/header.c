/*
 * header.c - the C header kop-gen writes for a CRD: the kop_resource, and
 * typed accessors of spec and status built from the structural schema.
 *
 * For a kind Website (prefix "website") and a field spec.replicas:
 *
 *   json_int_t website_spec_replicas(const json_t *obj);     value, or default, or 0
 *   bool website_has_spec_replicas(const json_t *obj);       present and not null
 *   kop_err website_validate(const json_t *obj, kop_status *st);   all of spec
 *   kop_err website_set_status_phase(json_t *status, const char *v, kop_status *st);
 *
 * Getters take the whole object (as the cache hands it out) and never
 * fail: a missing field or one of the wrong type gives the schema's
 * default, else zero (NULL for strings and objects). Setters take the
 * status object a reconcile builds for kop_patch_status, check what the
 * schema says (enum, bounds, length, pattern where it is also a POSIX
 * regex) and refuse a bad value with KOP_EINVAL, explained in st, changing
 * nothing. website_validate checks the spec the same way plus required
 * fields and types: the apiserver validates already, so this is for
 * objects stored before a stricter schema, and for tests.
 *
 * Everything is static inline, so the header needs no .c beside it and
 * an unused accessor costs nothing. Every string from the CRD is written
 * through c_string (a C literal with every byte outside printable ASCII,
 * '"', '\\' and '?' escaped) or c_comment (no comment terminator, no
 * control characters); identifiers are the ones crd.c checked, and a
 * name two accessors would share is refused.
 */
#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <string.h>

#include "kopgen.h"

/* The writer: output, the CRD, and the names emitted so far (to refuse a clash). */
struct out {
    FILE *f;
    const kopgen_crd *crd;
    const char *p; /* prefix */
    json_t *names;
    kop_err err;
    kop_status *st;
};

/* name registers a function name; a second use of it is an error. */
static void name(struct out *o, const char *fmt, ...) KOP_PRINTF(2, 3);
static void name(struct out *o, const char *fmt, ...)
{
    char buf[KOPGEN_IDENT_MAX + 80];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (o->err)
        return;
    if (json_object_get(o->names, buf)) {
        kop_status_setf(o->st, 0, NULL,
                        "two fields make the same accessor %s: rename one of them", buf);
        o->err = KOP_EINVAL;
    } else if (json_object_set_new(o->names, buf, json_true())) {
        o->err = KOP_ENOMEM;
    }
}

/* c_string writes s as a C string literal. */
static void c_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\' || *p == '?')
            fprintf(f, "\\%c", *p);
        else if (*p >= 0x20 && *p < 0x7f)
            fputc(*p, f);
        else
            fprintf(f, "\\%03o", *p); /* three octal digits: never runs into the next char */
    }
    fputc('"', f);
}

/*
 * comment_break tells whether a space must go before text[n] in a comment:
 * between '*' and '/' (the comment would end), '/' and '*' (a nested
 * opener, which compilers warn about) and '?' and '?' (a trigraph).
 */
static bool comment_break(const char *text, size_t n)
{
    if (n == 0)
        return false;
    char a = text[n - 1], b = text[n];
    return (a == '*' && b == '/') || (a == '/' && b == '*') || (a == '?' && b == '?');
}

/*
 * c_comment writes text inside a block comment, each line prefixed by
 * lead, at most max bytes: no comment delimiter or trigraph forms
 * (comment_break), control characters become spaces.
 */
static void c_comment(FILE *f, const char *lead, const char *text, size_t max)
{
    size_t col = 0, n = 0;
    fputs(lead, f);
    for (const unsigned char *p = (const unsigned char *)text; *p && n < max; p++, n++) {
        if (*p == '\n' || (col > 80 && *p == ' ')) {
            fprintf(f, "\n%s", lead);
            col = 0;
            continue;
        }
        if (comment_break(text, n))
            fputc(' ', f);
        fputc(*p < 0x20 || *p == 0x7f ? ' ' : *p, f);
        col++;
    }
    if (text[n])
        fputs("...", f);
    fputc('\n', f);
}

/* keys writes the compound literal of the keys from the base to f: (const char *const[]){...}. */
static void keys(FILE *f, const char *const *k, size_t n)
{
    fputs("(const char *const[]){", f);
    for (size_t i = 0; i < n; i++) {
        c_string(f, k[i]);
        fputs(", ", f);
    }
    fputs("NULL}", f);
}

static const char *c_type(const kopgen_field *f)
{
    switch (f->type) {
    case KOPGEN_STRING:
        return "const char *";
    case KOPGEN_INTEGER:
        return "json_int_t ";
    case KOPGEN_NUMBER:
        return "double ";
    case KOPGEN_BOOLEAN:
        return "bool ";
    default:
        return "const json_t *";
    }
}

/* c_inline writes text inside a comment on one line, at most max bytes (see c_comment). */
static void c_inline(FILE *f, const char *text, size_t max)
{
    size_t n = 0;
    for (const unsigned char *p = (const unsigned char *)text; *p && n < max; p++, n++) {
        if (comment_break(text, n))
            fputc(' ', f);
        fputc(*p < 0x20 || *p == 0x7f ? ' ' : *p, f);
    }
    if (text[n])
        fputs("...", f);
}

/* summary writes the comment of a field: its type and checks, then its description. */
static void summary(FILE *f, const kopgen_field *x)
{
    static const char *const names[] = {"any JSON", "object", "map", "list",
                                        "string", "integer", "number", "boolean"};
    fprintf(f, "/*\n * %s: %s", x->path, names[x->type]);
    if (x->required)
        fputs(", required", f);
    if (x->has_min)
        fprintf(f, ", minimum %g%s", x->min, x->excl_min ? " (exclusive)" : "");
    if (x->has_max)
        fprintf(f, ", maximum %g%s", x->max, x->excl_max ? " (exclusive)" : "");
    if (x->min_len >= 0)
        fprintf(f, ", at least %lld characters", x->min_len);
    if (x->max_len >= 0)
        fprintf(f, ", at most %lld characters", x->max_len);
    if (x->min_items >= 0)
        fprintf(f, ", at least %lld items", x->min_items);
    if (x->max_items >= 0)
        fprintf(f, ", at most %lld items", x->max_items);
    if (x->def) {
        char *d = json_dumps(x->def, JSON_ENCODE_ANY | JSON_COMPACT);
        fputs(", default ", f);
        c_inline(f, d ? d : "?", 60);
        free(d);
    }
    if (x->enums) {
        char *d = json_dumps(x->enums, JSON_ENCODE_ANY | JSON_COMPACT);
        fputs(", one of ", f);
        c_inline(f, d ? d : "?", 200);
        free(d);
    }
    if (x->pattern) {
        fputs(x->pattern_checked ? ", pattern " : ", pattern (checked by the apiserver only) ", f);
        c_inline(f, x->pattern, 120);
    }
    fputs(".\n", f);
    if (x->description)
        c_comment(f, " * ", x->description, 600);
    fputs(" */\n", f);
}

/* scalar_default writes the C value a getter returns when the field is absent. */
static void scalar_default(FILE *f, const kopgen_field *x)
{
    const json_t *d = x->def && !json_is_null(x->def) ? x->def : NULL;
    switch (x->type) {
    case KOPGEN_STRING:
        if (d)
            c_string(f, json_string_value(d));
        else
            fputs("NULL", f);
        break;
    case KOPGEN_INTEGER:
        fprintf(f, "(json_int_t)%" JSON_INTEGER_FORMAT "LL", d ? json_integer_value(d) : 0);
        break;
    case KOPGEN_NUMBER:
        fprintf(f, "%.17g", d ? json_number_value(d) : 0.0);
        break;
    case KOPGEN_BOOLEAN:
        fputs(d && json_is_true(d) ? "true" : "false", f);
        break;
    default:
        fputs("NULL", f);
    }
}

/* value_expr writes the typed read of json value v (a C expression) for a scalar field. */
static void value_expr(FILE *f, const kopgen_field *x, const char *v)
{
    switch (x->type) {
    case KOPGEN_STRING:
        fprintf(f, "json_is_string(%s) ? json_string_value(%s) : ", v, v);
        break;
    case KOPGEN_INTEGER:
        fprintf(f, "json_is_integer(%s) ? json_integer_value(%s) : ", v, v);
        break;
    case KOPGEN_NUMBER:
        fprintf(f, "json_is_number(%s) ? json_number_value(%s) : ", v, v);
        break;
    case KOPGEN_BOOLEAN:
        fprintf(f, "json_is_boolean(%s) ? json_is_true(%s) : ", v, v);
        break;
    case KOPGEN_OBJECT:
    case KOPGEN_MAP:
        fprintf(f, "json_is_object(%s) ? %s : ", v, v);
        break;
    case KOPGEN_ARRAY:
        fprintf(f, "json_is_array(%s) ? %s : ", v, v);
        break;
    case KOPGEN_ANY:
        fprintf(f, "%s ? %s : ", v, v);
        break;
    }
    scalar_default(f, x);
}

/* enum_name writes the name of a string field's enum table. */
static void enum_tables(struct out *o, const kopgen_field *x)
{
    if (x->type == KOPGEN_STRING && x->enums) {
        size_t i;
        const json_t *e;
        char up[KOPGEN_IDENT_MAX + 1], val[KOPGEN_NAME_MAX + 1];
        fprintf(o->f, "static const char *const %s__enum_%s[] = {", o->p, x->ident);
        json_array_foreach(x->enums, i, e)
        {
            if (json_is_string(e)) {
                c_string(o->f, json_string_value(e));
                fputs(", ", o->f);
            }
        }
        fputs("NULL};\n", o->f);
        /* A constant per value that makes an identifier: WEBSITE_STATUS_PHASE_READY. */
        snprintf(up, sizeof up, "%s_%s", o->crd->upper, x->ident);
        for (char *c = up; *c; c++)
            *c = (char)toupper((unsigned char)*c);
        json_array_foreach(x->enums, i, e)
        {
            const char *s = json_string_value(e);
            if (s && strlen(s) <= KOPGEN_NAME_MAX && kopgen_snake(s, val, sizeof val)) {
                for (char *c = val; *c; c++)
                    *c = (char)toupper((unsigned char)*c);
                name(o, "%s_%s", up, val);
                fprintf(o->f, "#define %s_%s ", up, val);
                c_string(o->f, s);
                fputc('\n', o->f);
            }
        }
    }
    if (x->items)
        enum_tables(o, x->items);
    for (size_t i = 0; i < x->nprops; i++)
        enum_tables(o, x->props[i]);
}

/*
 * getters writes the getters of x and of what it holds. base is the C
 * parameter they take ("obj", or "item" under a list), path the keys from
 * that base to x.
 */
static void getters(struct out *o, const kopgen_field *x, const char *base, const char **path,
                    size_t depth)
{
    FILE *f = o->f;
    const char *p = o->p;
    path[depth] = x->name;
    size_t n = depth + 1;

    summary(f, x);
    name(o, "%s_%s", p, x->ident);
    if (x->type == KOPGEN_ARRAY) {
        name(o, "%s_%s_len", p, x->ident);
        name(o, "%s_%s_at", p, x->ident);
        fprintf(f, "static inline size_t %s_%s_len(const json_t *%s)\n{\n    return json_array_size(%s__at(%s, ",
                p, x->ident, base, p, base);
        keys(f, path, n);
        fprintf(f, "));\n}\n");
        fprintf(f, "static inline %s%s_%s_at(const json_t *%s, size_t i)\n{\n"
                   "    const json_t *v = json_array_get(%s__at(%s, ",
                c_type(x->items), p, x->ident, base, p, base);
        keys(f, path, n);
        fprintf(f, "), i);\n    return ");
        value_expr(f, x->items, "v");
        fprintf(f, ";\n}\n");
    }
    fprintf(f, "static inline %s%s_%s(const json_t *%s)\n{\n    const json_t *v = %s__at(%s, ",
            x->type == KOPGEN_ARRAY ? "const json_t *" : c_type(x), p, x->ident, base, p, base);
    keys(f, path, n);
    fprintf(f, ");\n    return ");
    if (x->type == KOPGEN_ARRAY)
        fprintf(f, "json_is_array(v) ? v : NULL");
    else
        value_expr(f, x, "v");
    fprintf(f, ";\n}\n");
    name(o, "%s_has_%s", p, x->ident);
    fprintf(f, "static inline bool %s_has_%s(const json_t *%s)\n{\n    const json_t *v = %s__at(%s, ",
            p, x->ident, base, p, base);
    keys(f, path, n);
    fprintf(f, ");\n    return v && !json_is_null(v);\n}\n\n");

    if (x->type == KOPGEN_ARRAY && x->items && x->items->type == KOPGEN_OBJECT) {
        const char *ipath[KOPGEN_DEPTH_MAX + 2];
        for (size_t i = 0; i < x->items->nprops; i++)
            getters(o, x->items->props[i], "item", ipath, 0);
    }
    for (size_t i = 0; i < x->nprops; i++)
        getters(o, x->props[i], base, path, n);
}

/* has_checks tells whether the schema bounds x's value beyond its type. */
static bool has_checks(const kopgen_field *x)
{
    switch (x->type) {
    case KOPGEN_STRING:
        return x->enums || x->min_len >= 0 || x->max_len >= 0 || (x->pattern && x->pattern_checked);
    case KOPGEN_INTEGER:
    case KOPGEN_NUMBER:
        return x->has_min || x->has_max;
    case KOPGEN_ARRAY:
        return x->min_items >= 0 || x->max_items >= 0;
    default:
        return false;
    }
}

/* check_call writes the validation of a present scalar v (C expression) of x; sets err. */
static void check_call(struct out *o, const kopgen_field *x, const char *v, const char *indent)
{
    FILE *f = o->f;
    if (x->type == KOPGEN_STRING) {
        fprintf(f, "%serr = %s__check_string(", indent, o->p);
        c_string(f, x->path);
        fprintf(f, ", %s, ", v);
        if (x->enums)
            fprintf(f, "%s__enum_%s", o->p, x->ident);
        else
            fputs("NULL", f);
        fprintf(f, ", %lld, %lld, ", x->min_len, x->max_len);
        if (x->pattern && x->pattern_checked)
            c_string(f, x->pattern);
        else
            fputs("NULL", f);
        fputs(", st);\n", f);
    } else if (x->type == KOPGEN_INTEGER || x->type == KOPGEN_NUMBER) {
        fprintf(f, "%serr = %s__check_number(", indent, o->p);
        c_string(f, x->path);
        fprintf(f, ", (double)%s, %s, %.17g, %s, %s, %.17g, %s, st);\n", v,
                x->has_min ? "true" : "false", x->has_min ? x->min : 0.0,
                x->excl_min ? "true" : "false", x->has_max ? "true" : "false",
                x->has_max ? x->max : 0.0, x->excl_max ? "true" : "false");
    } else if (x->type == KOPGEN_ARRAY) {
        fprintf(f, "%serr = %s__check_items(", indent, o->p);
        c_string(f, x->path);
        fprintf(f, ", json_array_size(%s), %lld, %lld, st);\n", v, x->min_items, x->max_items);
    } else {
        fprintf(f, "%serr = KOP_OK;\n", indent);
    }
}

/* json_test returns the jansson test of x's type. */
static const char *json_test(const kopgen_field *x)
{
    static const char *const t[] = {NULL,           "json_is_object", "json_is_object",
                                    "json_is_array", "json_is_string", "json_is_integer",
                                    "json_is_number", "json_is_boolean"};
    return t[x->type];
}

static const char *const type_words[] = {"", "an object", "an object", "a list",
                                         "a string", "an integer", "a number", "a boolean"};

/*
 * checks writes the validation of field x whose JSON value is the C
 * expression get; depth numbers the variables of nested blocks.
 */
static void checks(struct out *o, const kopgen_field *x, const char *get, int depth)
{
    FILE *f = o->f;
    char v[16], in[80];
    snprintf(v, sizeof v, "v%d", depth);
    snprintf(in, sizeof in, "%*s", 4 + 8 * depth, "");
    fprintf(f, "%s{\n%s    const json_t *%s = %s;\n", in, in, v, get);
    fprintf(f, "%s    if (!%s || json_is_null(%s)) {\n", in, v, v);
    if (x->required && !x->def) {
        fprintf(f, "%s        err = %s__invalid(st, ", in, o->p);
        c_string(f, x->path);
        fprintf(f, ", \"is required\");\n%s        goto out;\n", in);
    }
    fprintf(f, "%s    }", in);
    if (json_test(x)) {
        fprintf(f, " else if (!%s(%s)) {\n%s        err = %s__invalid(st, ", json_test(x), v, in,
                o->p);
        c_string(f, x->path);
        fprintf(f, ", \"is not %s\");\n%s        goto out;\n%s    }", type_words[x->type], in, in);
    }
    fprintf(f, " else {\n");
    char val[64];
    if (x->type == KOPGEN_STRING)
        snprintf(val, sizeof val, "json_string_value(%s)", v);
    else if (x->type == KOPGEN_INTEGER || x->type == KOPGEN_NUMBER)
        snprintf(val, sizeof val, "json_number_value(%s)", v);
    else
        snprintf(val, sizeof val, "%s", v);
    char in2[88];
    snprintf(in2, sizeof in2, "%s        ", in);
    if (has_checks(x)) {
        check_call(o, x, val, in2);
        fprintf(f, "%s        if (err)\n%s            goto out;\n", in, in);
    }
    for (size_t i = 0; i < x->nprops; i++) {
        /* The child's value is json_object_get(v, "key"), the key escaped. */
        size_t len = 0;
        char *get_child = NULL;
        FILE *m = open_memstream(&get_child, &len);
        if (!m) {
            o->err = KOP_ENOMEM;
            return;
        }
        fprintf(m, "json_object_get(%s, ", v);
        c_string(m, x->props[i]->name);
        fputc(')', m);
        fclose(m);
        if (get_child)
            checks(o, x->props[i], get_child, depth + 1);
        free(get_child);
    }
    if (x->type == KOPGEN_ARRAY && x->items && x->items->type != KOPGEN_ANY) {
        fprintf(f, "%s        size_t i%d;\n%s        const json_t *e%d;\n", in, depth, in, depth);
        fprintf(f, "%s        json_array_foreach(%s, i%d, e%d)\n%s        {\n", in, v, depth, depth, in);
        char e[16];
        snprintf(e, sizeof e, "e%d", depth);
        checks(o, x->items, e, depth + 1);
        fprintf(f, "%s        }\n", in);
    }
    fprintf(f, "%s    }\n%s}\n", in, in);
}

/* setters writes the setters of the status fields under x (keys from status). */
static void setters(struct out *o, const kopgen_field *x, const char **path, size_t depth)
{
    FILE *f = o->f;
    const char *p = o->p;
    path[depth] = x->name;
    size_t n = depth + 1;
    bool scalar = x->type >= KOPGEN_STRING;

    name(o, "%s_set_%s", p, x->ident);
    fprintf(f, "/*\n * %s_set_%s sets %s in status (%s).\n"
               " * KOP_EINVAL, explained in st, when the value breaks the schema: status is\n"
               " * then unchanged.\n */\n",
            p, x->ident, x->path, scalar ? "a copy" : "value borrowed, a reference taken");
    fprintf(f, "static inline kop_err %s_set_%s(json_t *status, %svalue, kop_status *st)\n{\n",
            p, x->ident, scalar ? c_type(x) : "json_t *");
    /* st is used only by the rules a field has: a plain integer has none,
     * and -Wextra -Werror builds of the user's code must stay clean. */
    fprintf(f, "    (void)st;\n    kop_err err = KOP_OK;\n    json_t *v = ");
    switch (x->type) {
    case KOPGEN_STRING:
        fprintf(f, "value ? json_string(value) : NULL;\n");
        fprintf(f, "    if (!v) {\n        err = %s__invalid(st, ", p);
        c_string(f, x->path);
        fprintf(f, ", \"is not UTF-8 text\");\n        goto out;\n    }\n");
        break; /* json_string fails on bad UTF-8 (or no memory: then too, nothing changes) */
    case KOPGEN_INTEGER:
        fprintf(f, "json_integer(value);\n");
        break;
    case KOPGEN_NUMBER:
        fprintf(f, "isfinite(value) ? json_real(value) : NULL;\n");
        fprintf(f, "    if (!isfinite(value)) {\n        err = %s__invalid(st, ", p);
        c_string(f, x->path);
        fprintf(f, ", \"is not a finite number\");\n        goto out;\n    }\n");
        break;
    case KOPGEN_BOOLEAN:
        fprintf(f, "json_boolean(value);\n");
        break;
    default:
        fprintf(f, "json_incref(value);\n");
        if (json_test(x)) {
            fprintf(f, "    if (!%s(value)) {\n        err = %s__invalid(st, ", json_test(x), p);
            c_string(f, x->path);
            fprintf(f, ", \"is not %s\");\n        goto out;\n    }\n", type_words[x->type]);
        }
    }
    if (x->type != KOPGEN_STRING)
        fprintf(f, "    if (!v) {\n        err = KOP_ENOMEM;\n        goto out;\n    }\n");
    if (has_checks(x)) {
        char val[40];
        snprintf(val, sizeof val, "%s", x->type == KOPGEN_STRING ? "value"
                                        : x->type == KOPGEN_ARRAY ? "v"
                                                                  : "json_number_value(v)");
        check_call(o, x, val, "    ");
        fprintf(f, "    if (err)\n        goto out;\n");
    }
    fprintf(f, "    err = %s__put(status, ", p);
    keys(f, path, n);
    fprintf(f, ", v);\n    v = NULL;\nout:\n    json_decref(v);\n    return err;\n}\n\n");
    if (x->type == KOPGEN_OBJECT)
        for (size_t i = 0; i < x->nprops; i++)
            setters(o, x->props[i], path, n);
}

/* preamble writes the includes, the resource and the helpers every accessor uses. */
static void preamble(struct out *o, const char *source)
{
    FILE *f = o->f;
    const kopgen_crd *c = o->crd;
    const char *p = o->p, *u = c->upper;

    fprintf(f, "/* %s_types.h - generated by kop-gen %s from ", p, KOP_VERSION_STRING);
    c_inline(f, source, 200);
    fprintf(f, ", do not edit.\n *\n * %s (%s/%s, resource %s, %s): the resource, and typed\n"
               " * accessors of its spec and status from the CRD's schema. Run kop-gen again\n"
               " * after the CRD changes (docs/your-first-operator.md).\n"
               " *\n"
               " * Getters take the whole object and return the value, else the schema's\n"
               " * default, else zero or NULL; %s_has_* tells whether a field is set.\n"
               " * %s_set_* write status fields into the status object given to\n"
               " * kop_patch_status, refusing values the schema refuses.\n"
               " * %s_validate checks the whole spec against the schema.\n */\n",
            c->kind, c->group, c->version, c->plural, c->namespaced ? "namespaced" : "cluster",
            p, p, p);
    fprintf(f, "#ifndef %s_TYPES_H\n#define %s_TYPES_H\n\n", u, u);
    fputs("#include <math.h>\n#include <regex.h>\n#include <stdarg.h>\n#include <stdbool.h>\n"
          "#include <stddef.h>\n#include <string.h>\n\n#include <jansson.h>\n#include <kop/kop.h>\n\n",
          f);
    fprintf(f, "#define %s_GROUP ", u);
    c_string(f, c->group);
    fprintf(f, "\n#define %s_VERSION ", u);
    c_string(f, c->version);
    fprintf(f, "\n#define %s_API_VERSION ", u);
    char av[400];
    snprintf(av, sizeof av, "%s/%s", c->group, c->version);
    c_string(f, av);
    fprintf(f, "\n#define %s_KIND ", u);
    c_string(f, c->kind);
    fprintf(f, "\n#define %s_PLURAL ", u);
    c_string(f, c->plural);
    fprintf(f, "\n#define %s_HAS_STATUS_SUBRESOURCE %d\n\n", u, c->status_subresource ? 1 : 0);
    fprintf(f, "/* %s_RESOURCE: the resource, for kop_controller_opts.for_resource and the client. */\n"
               "static const kop_resource %s_RESOURCE = {\n    %s_GROUP, %s_VERSION, %s_PLURAL, %s_KIND, %s};\n\n",
            u, u, u, u, u, u, c->namespaced ? "true" : "false");

    fprintf(f,
            "/* %s__at follows keys from base; NULL when one is missing (borrowed). */\n"
            "static inline const json_t *%s__at(const json_t *base, const char *const *keys)\n"
            "{\n"
            "    for (; base && *keys; keys++)\n"
            "        base = json_object_get(base, *keys);\n"
            "    return base;\n"
            "}\n\n",
            p, p);
    fprintf(f,
            "/* %s__invalid records why a value breaks the schema. */\n"
            "static inline kop_err %s__invalid(kop_status *st, const char *path, const char *why, ...)\n"
            "    KOP_PRINTF(3, 4);\n"
            "static inline kop_err %s__invalid(kop_status *st, const char *path, const char *why, ...)\n"
            "{\n"
            "    char msg[256];\n"
            "    va_list ap;\n"
            "    va_start(ap, why);\n"
            "    vsnprintf(msg, sizeof msg, why, ap);\n"
            "    va_end(ap);\n"
            "    kop_status_setf(st, 0, \"Invalid\", \"%%s: %%s\", path, msg);\n"
            "    return KOP_EINVAL;\n"
            "}\n\n",
            p, p, p);
    fprintf(f,
            "/* %s__check_string: enum (NULL-terminated, or NULL), length in characters (-1: no\n"
            " * bound), pattern (a POSIX ERE, or NULL). */\n"
            "static inline kop_err %s__check_string(const char *path, const char *s,\n"
            "                                       const char *const *enums, long long min_len,\n"
            "                                       long long max_len, const char *pattern,\n"
            "                                       kop_status *st)\n"
            "{\n"
            "    long long n = 0;\n"
            "    for (const char *c = s; *c; c++)\n"
            "        n += ((unsigned char)*c & 0xc0) != 0x80; /* code points, as the apiserver counts */\n"
            "    if (enums) {\n"
            "        const char *const *e = enums;\n"
            "        while (*e && strcmp(*e, s) != 0)\n"
            "            e++;\n"
            "        if (!*e)\n"
            "            return %s__invalid(st, path, \"\\\"%%.80s\\\" is not an allowed value\", s);\n"
            "    }\n"
            "    if (min_len >= 0 && n < min_len)\n"
            "        return %s__invalid(st, path, \"shorter than %%lld characters\", min_len);\n"
            "    if (max_len >= 0 && n > max_len)\n"
            "        return %s__invalid(st, path, \"longer than %%lld characters\", max_len);\n"
            "    if (pattern) {\n"
            "        regex_t re;\n"
            "        int rc = regcomp(&re, pattern, REG_EXTENDED | REG_NOSUB);\n"
            "        if (rc == 0) {\n"
            "            rc = regexec(&re, s, 0, NULL, 0);\n"
            "            regfree(&re);\n"
            "            if (rc != 0)\n"
            "                return %s__invalid(st, path, \"\\\"%%.80s\\\" does not match %%s\", s, pattern);\n"
            "        }\n"
            "    }\n"
            "    return KOP_OK;\n"
            "}\n\n",
            p, p, p, p, p, p);
    fprintf(f,
            "/* %s__check_number: bounds, each optional and maybe exclusive. */\n"
            "static inline kop_err %s__check_number(const char *path, double v, bool has_min, double min,\n"
            "                                       bool excl_min, bool has_max, double max,\n"
            "                                       bool excl_max, kop_status *st)\n"
            "{\n"
            "    if (has_min && (v < min || (excl_min && v == min)))\n"
            "        return %s__invalid(st, path, \"%%g is below the minimum %%g\", v, min);\n"
            "    if (has_max && (v > max || (excl_max && v == max)))\n"
            "        return %s__invalid(st, path, \"%%g is above the maximum %%g\", v, max);\n"
            "    return KOP_OK;\n"
            "}\n\n",
            p, p, p, p);
    fprintf(f,
            "/* %s__check_items: a list's length (-1: no bound). */\n"
            "static inline kop_err %s__check_items(const char *path, size_t n, long long min,\n"
            "                                      long long max, kop_status *st)\n"
            "{\n"
            "    if (min >= 0 && (long long)n < min)\n"
            "        return %s__invalid(st, path, \"fewer than %%lld items\", min);\n"
            "    if (max >= 0 && (long long)n > max)\n"
            "        return %s__invalid(st, path, \"more than %%lld items\", max);\n"
            "    return KOP_OK;\n"
            "}\n\n",
            p, p, p, p);
    fprintf(f,
            "/* %s__put sets the last key to v (stolen) under base, making the objects on the way. */\n"
            "static inline kop_err %s__put(json_t *base, const char *const *keys, json_t *v)\n"
            "{\n"
            "    kop_err err = base && json_is_object(base) ? KOP_OK : KOP_EINVAL;\n"
            "    for (; !err && keys[1]; keys++) {\n"
            "        json_t *next = json_object_get(base, *keys);\n"
            "        if (!json_is_object(next)) {\n"
            "            next = json_object();\n"
            "            if (!next || json_object_set_new(base, *keys, next))\n"
            "                err = KOP_ENOMEM;\n"
            "        }\n"
            "        base = next;\n"
            "    }\n"
            "    if (!err && json_object_set(base, *keys, v))\n"
            "        err = KOP_ENOMEM;\n"
            "    json_decref(v);\n"
            "    return err;\n"
            "}\n\n",
            p, p);
}

kop_err kopgen_write_header(FILE *f, const kopgen_crd *crd, const char *source, kop_status *st)
{
    struct out o = {.f = f, .crd = crd, .p = crd->prefix, .names = json_object(), .st = st};
    const char *path[KOPGEN_DEPTH_MAX + 2];

    if (!o.names)
        return KOP_ENOMEM;
    if (strcmp(crd->prefix, "kop") == 0 || strcmp(crd->prefix, "json") == 0 ||
        strncmp(crd->prefix, "kop_", 4) == 0) {
        kop_status_setf(st, 0, NULL, "kind %s would make names that clash with libkop or "
                                     "jansson: choose another kind",
                        crd->kind);
        json_decref(o.names);
        return KOP_EINVAL;
    }
    name(&o, "%s_validate", o.p);
    preamble(&o, source ? source : "a CRD");
    const kopgen_field *parts[2] = {crd->spec, crd->status};
    fputs("/* ---- enums ---------------------------------------------------------- */\n\n", f);
    for (int i = 0; i < 2; i++)
        if (parts[i])
            enum_tables(&o, parts[i]);
    fputs("\n/* ---- getters -------------------------------------------------------- */\n\n", f);
    for (int i = 0; i < 2; i++)
        if (parts[i])
            getters(&o, parts[i], "obj", path, 0);
    fprintf(f, "/* ---- validation ----------------------------------------------------- */\n\n"
               "/* %s_validate checks obj's spec against the schema: KOP_OK, or KOP_EINVAL with\n"
               " * the first field at fault and why in st. */\n"
               "static inline kop_err %s_validate(const json_t *obj, kop_status *st)\n{\n"
               "    kop_err err = KOP_OK;\n",
            o.p, o.p);
    if (crd->spec)
        checks(&o, crd->spec, "json_object_get(obj, \"spec\")", 0);
    fprintf(f, "    goto out; /* every check passed */\nout:\n    return err;\n}\n\n");
    if (crd->status && crd->status->type == KOPGEN_OBJECT) {
        fputs("/* ---- status setters ------------------------------------------------- */\n\n", f);
        for (size_t i = 0; i < crd->status->nprops; i++)
            setters(&o, crd->status->props[i], path, 0);
    }
    fprintf(f, "#endif /* %s_TYPES_H */\n", crd->upper);
    json_decref(o.names);
    if (!o.err && (ferror(f) || fflush(f))) {
        kop_status_setf(st, 0, NULL, "writing the header failed");
        o.err = KOP_EIO;
    }
    return o.err;
}
