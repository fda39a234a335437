/*
 * crd.c - a CustomResourceDefinition taken apart for the generator: the
 * resource's names and scope, and the structural schema of one version as
 * a tree of kopgen_field.
 *
 * Supported is the subset of OpenAPI v3 that structural schemas (what the
 * apiserver requires of apiextensions.k8s.io/v1 CRDs) use: type object
 * (properties, required, additionalProperties), array (items), string,
 * integer, number, boolean; enum, default, nullable, minimum/maximum (and
 * exclusive), minLength/maxLength, minItems/maxItems, pattern, format,
 * description; x-kubernetes-int-or-string and
 * x-kubernetes-preserve-unknown-fields give an untyped json_t field.
 * Anything else a real CRD carries (x-kubernetes-validations, list types,
 * printer columns) is ignored; what contradicts the subset ($ref, a type
 * kop-gen does not know, a default of the wrong type) is refused with the
 * field's path, so the generated header never guesses.
 *
 * Names become C identifiers: each property name must match
 * [A-Za-z][A-Za-z0-9_.-]* (kopgen_snake), and two siblings must not make
 * the same identifier. Nothing else of the CRD is ever pasted into code.
 */
#include <ctype.h>
#include <regex.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "kopgen.h"

struct ctx {
    const char *origin;
    size_t nfields;
    kop_status *st;
};

/* fail records why the CRD is refused and returns KOP_EINVAL. */
static kop_err fail(struct ctx *c, const char *fmt, ...) KOP_PRINTF(2, 3);
static kop_err fail(struct ctx *c, const char *fmt, ...)
{
    char msg[KOP_STATUS_MESSAGE_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    kop_status_setf(c->st, 0, NULL, "%s: %s", c->origin, msg);
    return KOP_EINVAL;
}

bool kopgen_snake(const char *name, char *out, size_t size)
{
    size_t o = 0;
    if (!name || !isalpha((unsigned char)name[0]) || size == 0)
        return false;
    for (size_t i = 0; name[i]; i++) {
        unsigned char ch = (unsigned char)name[i];
        if (!isalnum(ch) && ch != '_' && ch != '-' && ch != '.')
            return false;
        char put = isalnum(ch) ? (char)tolower(ch) : '_';
        /* A capital starts a word when it follows a lower-case letter or
         * digit, or ends a run of capitals before a lower-case letter
         * ("podIPs" -> pod_ips, "HTTPServer" -> http_server). */
        bool word = i > 0 && isupper(ch) &&
                    (islower((unsigned char)name[i - 1]) || isdigit((unsigned char)name[i - 1]) ||
                     (isupper((unsigned char)name[i - 1]) && islower((unsigned char)name[i + 1]) &&
                      name[i + 1] != 's'));
        if (word && o > 0 && out[o - 1] != '_') {
            if (o + 1 >= size)
                return false;
            out[o++] = '_';
        }
        if (put == '_' && o > 0 && out[o - 1] == '_')
            continue; /* runs of separators collapse */
        if (o + 1 >= size)
            return false;
        out[o++] = put;
    }
    while (o > 0 && out[o - 1] == '_')
        o--;
    out[o] = '\0';
    return o > 0;
}

/* str_field returns obj[key] when it is a string, else NULL. */
static const char *str_field(const json_t *obj, const char *key)
{
    return json_string_value(json_object_get(obj, key));
}

/* dns_ok: [a-z0-9] with '-' (and '.' when dots) inside, 1..max bytes. */
static bool dns_ok(const char *s, size_t max, bool dots)
{
    size_t n = s ? strlen(s) : 0;
    if (n == 0 || n > max || !isalnum((unsigned char)s[0]) || !isalnum((unsigned char)s[n - 1]))
        return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (!(islower(ch) || isdigit(ch) || ch == '-' || (dots && ch == '.')))
            return false;
    }
    return true;
}

/* kind_ok: an UpperCamelCase kind, [A-Z][A-Za-z0-9]*, at most 63. */
static bool kind_ok(const char *s)
{
    size_t n = s ? strlen(s) : 0;
    if (n == 0 || n > KOPGEN_NAME_MAX || !isupper((unsigned char)s[0]))
        return false;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)s[i]))
            return false;
    return true;
}

/*
 * posix_pattern tells whether an ECMA-262 pattern (what the apiserver
 * checks) means the same as a POSIX extended regex, in the easy cases: no
 * escapes of letters or digits (\d, \w, \b and friends differ), no groups
 * with '(?', no lazy quantifiers, and it compiles.
 */
static bool posix_pattern(const char *p)
{
    for (size_t i = 0; p[i]; i++) {
        if (p[i] == '\\') {
            if (!p[i + 1] || isalnum((unsigned char)p[i + 1]))
                return false;
            i++;
        } else if (p[i] == '(' && p[i + 1] == '?') {
            return false;
        } else if ((p[i] == '*' || p[i] == '+' || p[i] == '?' || p[i] == '}') && p[i + 1] == '?') {
            return false;
        }
    }
    regex_t re;
    if (regcomp(&re, p, REG_EXTENDED | REG_NOSUB) != 0)
        return false;
    regfree(&re);
    return true;
}

/* value_fits tells whether a default or enum value v has the field's type. */
static bool value_fits(const kopgen_field *f, const json_t *v)
{
    if (json_is_null(v))
        return f->nullable;
    switch (f->type) {
    case KOPGEN_STRING:
        return json_is_string(v);
    case KOPGEN_INTEGER:
        return json_is_integer(v);
    case KOPGEN_NUMBER:
        return json_is_number(v);
    case KOPGEN_BOOLEAN:
        return json_is_boolean(v);
    case KOPGEN_OBJECT:
    case KOPGEN_MAP:
        return json_is_object(v);
    case KOPGEN_ARRAY:
        return json_is_array(v);
    case KOPGEN_ANY:
        return true;
    }
    return false;
}

static const char *type_name(kopgen_type t)
{
    static const char *const names[] = {"any", "object", "object", "array",
                                        "string", "integer", "number", "boolean"};
    return names[t];
}

static void field_free(kopgen_field *f)
{
    if (!f)
        return;
    free(f->name);
    free(f->path);
    free(f->ident);
    free(f->description);
    free(f->format);
    free(f->pattern);
    json_decref(f->def);
    json_decref(f->enums);
    field_free(f->items);
    for (size_t i = 0; i < f->nprops; i++)
        field_free(f->props[i]);
    free(f->props);
    free(f);
}

size_t kopgen_count_fields(const kopgen_field *f)
{
    size_t n = 1;
    if (!f)
        return 0;
    n += kopgen_count_fields(f->items);
    for (size_t i = 0; i < f->nprops; i++)
        n += kopgen_count_fields(f->props[i]);
    return n;
}

/* bound reads an optional non-negative integer keyword into *out (-1 when absent). */
static kop_err bound(struct ctx *c, const json_t *s, const char *key, const char *path,
                     long long *out)
{
    const json_t *v = json_object_get(s, key);
    *out = -1;
    if (!v)
        return KOP_OK;
    if (!json_is_integer(v) || json_integer_value(v) < 0)
        return fail(c, "%s: %s must be a non-negative integer", path, key);
    *out = json_integer_value(v);
    return KOP_OK;
}

/* number reads an optional numeric keyword. */
static kop_err number(struct ctx *c, const json_t *s, const char *key, const char *path, bool *has,
                      double *out)
{
    const json_t *v = json_object_get(s, key);
    *has = v != NULL;
    if (v && !json_is_number(v))
        return fail(c, "%s: %s must be a number", path, key);
    *out = v ? json_number_value(v) : 0;
    return KOP_OK;
}

static kop_err parse_field(struct ctx *c, const json_t *s, const char *name, const char *path,
                           const char *ident, int depth, kopgen_field **out);

/* parse_props parses an object's properties and required list into f. */
static kop_err parse_props(struct ctx *c, const json_t *s, kopgen_field *f, int depth)
{
    const json_t *props = json_object_get(s, "properties");
    const json_t *req = json_object_get(s, "required");
    const char *key;
    const json_t *sub;
    kop_err err = KOP_OK;

    if (props && !json_is_object(props))
        return fail(c, "%s: properties must be a mapping", f->path[0] ? f->path : "<root>");
    if (props && json_object_size(props) > 0) {
        f->props = calloc(json_object_size(props), sizeof *f->props);
        if (!f->props)
            return KOP_ENOMEM;
    }
    json_object_foreach((json_t *)props, key, sub)
    {
        char snake[KOPGEN_NAME_MAX + 1], path[1024], ident[KOPGEN_IDENT_MAX + 1];
        if (strlen(key) > KOPGEN_NAME_MAX || !kopgen_snake(key, snake, sizeof snake))
            return fail(c, "%s%s%.80s: the property name cannot be a C identifier (want "
                           "[A-Za-z][A-Za-z0-9_.-]*, at most %d)",
                        f->path, f->path[0] ? "." : "", key, KOPGEN_NAME_MAX);
        int pn = snprintf(path, sizeof path, "%s%s%s", f->path, f->path[0] ? "." : "", key);
        int in = snprintf(ident, sizeof ident, "%s%s%s", f->ident, f->ident[0] ? "_" : "", snake);
        if (pn < 0 || (size_t)pn >= sizeof path || in < 0 || (size_t)in >= sizeof ident)
            return fail(c, "%s: the path is too long for a C identifier", path);
        for (size_t i = 0; i < f->nprops; i++)
            if (strcmp(f->props[i]->ident, ident) == 0)
                return fail(c, "%s and %s make the same C name %s", f->props[i]->path, path,
                            ident);
        if ((err = parse_field(c, sub, key, path, ident, depth + 1, &f->props[f->nprops])))
            return err;
        f->nprops++;
    }
    if (req && !json_is_array(req))
        return fail(c, "%s: required must be a list", f->path[0] ? f->path : "<root>");
    size_t i;
    const json_t *r;
    json_array_foreach(req, i, r)
    {
        const char *rn = json_string_value(r);
        size_t k = 0;
        while (rn && k < f->nprops && strcmp(f->props[k]->name, rn) != 0)
            k++;
        if (!rn || k == f->nprops)
            return fail(c, "%s: required names %s%.80s%s, which is not among its properties",
                        f->path[0] ? f->path : "<root>", rn ? "\"" : "", rn ? rn : "a non-string",
                        rn ? "\"" : "");
        f->props[k]->required = true;
    }
    return KOP_OK;
}

/* parse_type sets f->type from the schema's type and extensions. */
static kop_err parse_type(struct ctx *c, const json_t *s, kopgen_field *f)
{
    const char *type = str_field(s, "type");
    const json_t *ap = json_object_get(s, "additionalProperties");
    if (json_object_get(s, "$ref"))
        return fail(c, "%s: $ref is not allowed in a CRD schema", f->path);
    if (json_is_true(json_object_get(s, "x-kubernetes-int-or-string"))) {
        f->type = KOPGEN_ANY;
        return KOP_OK;
    }
    if (json_object_get(s, "type") && !type)
        return fail(c, "%s: type must be a string", f->path);
    if (!type) {
        if (json_is_true(json_object_get(s, "x-kubernetes-preserve-unknown-fields")))
            f->type = KOPGEN_ANY;
        else if (json_object_get(s, "properties"))
            f->type = KOPGEN_OBJECT;
        else
            return fail(c, "%s: no type (a structural schema gives every field one)", f->path);
        return KOP_OK;
    }
    if (strcmp(type, "object") == 0) {
        if (ap && (json_is_object(ap) || json_is_true(ap)) && !json_object_get(s, "properties"))
            f->type = KOPGEN_MAP;
        else if (json_is_true(json_object_get(s, "x-kubernetes-preserve-unknown-fields")) &&
                 !json_object_get(s, "properties"))
            f->type = KOPGEN_ANY;
        else
            f->type = KOPGEN_OBJECT;
    } else if (strcmp(type, "array") == 0) {
        f->type = KOPGEN_ARRAY;
    } else if (strcmp(type, "string") == 0) {
        f->type = KOPGEN_STRING;
    } else if (strcmp(type, "integer") == 0) {
        f->type = KOPGEN_INTEGER;
    } else if (strcmp(type, "number") == 0) {
        f->type = KOPGEN_NUMBER;
    } else if (strcmp(type, "boolean") == 0) {
        f->type = KOPGEN_BOOLEAN;
    } else {
        return fail(c, "%s: unknown type \"%.40s\" (want object, array, string, integer, "
                       "number or boolean)",
                    f->path, type);
    }
    return KOP_OK;
}

/* parse_checks reads the validation keywords and checks default and enum against the type. */
static kop_err parse_checks(struct ctx *c, const json_t *s, kopgen_field *f)
{
    kop_err err;
    const json_t *v;
    if ((err = number(c, s, "minimum", f->path, &f->has_min, &f->min)) ||
        (err = number(c, s, "maximum", f->path, &f->has_max, &f->max)) ||
        (err = bound(c, s, "minLength", f->path, &f->min_len)) ||
        (err = bound(c, s, "maxLength", f->path, &f->max_len)) ||
        (err = bound(c, s, "minItems", f->path, &f->min_items)) ||
        (err = bound(c, s, "maxItems", f->path, &f->max_items)))
        return err;
    f->excl_min = json_is_true(json_object_get(s, "exclusiveMinimum"));
    f->excl_max = json_is_true(json_object_get(s, "exclusiveMaximum"));
    f->nullable = json_is_true(json_object_get(s, "nullable"));
    if (f->has_min && f->has_max && f->min > f->max)
        return fail(c, "%s: minimum %g is above maximum %g", f->path, f->min, f->max);
    if ((v = json_object_get(s, "pattern"))) {
        if (!json_is_string(v))
            return fail(c, "%s: pattern must be a string", f->path);
        if (!(f->pattern = strdup(json_string_value(v))))
            return KOP_ENOMEM;
        f->pattern_checked = posix_pattern(f->pattern);
    }
    if ((v = json_object_get(s, "format")) && json_is_string(v) &&
        !(f->format = strdup(json_string_value(v))))
        return KOP_ENOMEM;
    if ((v = json_object_get(s, "description")) && json_is_string(v) &&
        !(f->description = strdup(json_string_value(v))))
        return KOP_ENOMEM;
    if ((v = json_object_get(s, "enum"))) {
        size_t i;
        const json_t *e;
        if (!json_is_array(v) || json_array_size(v) == 0)
            return fail(c, "%s: enum must be a non-empty list", f->path);
        json_array_foreach(v, i, e)
        {
            if (!value_fits(f, e))
                return fail(c, "%s: enum value %zu is not of type %s", f->path, i + 1,
                            type_name(f->type));
        }
        f->enums = json_deep_copy(v);
    }
    if ((v = json_object_get(s, "default"))) {
        if (!value_fits(f, v))
            return fail(c, "%s: the default is not of type %s", f->path, type_name(f->type));
        f->def = json_deep_copy(v);
    }
    return KOP_OK;
}

/*
 * parse_field makes *out from schema s, the field named name at path with
 * C name ident. depth counts objects and arrays from the root.
 */
static kop_err parse_field(struct ctx *c, const json_t *s, const char *name, const char *path,
                           const char *ident, int depth, kopgen_field **out)
{
    kopgen_field *f = calloc(1, sizeof *f);
    kop_err err = KOP_OK;
    *out = NULL;
    if (!f)
        return KOP_ENOMEM;
    if (!(f->name = strdup(name)) || !(f->path = strdup(path)) || !(f->ident = strdup(ident))) {
        err = KOP_ENOMEM;
        goto out;
    }
    if (++c->nfields > KOPGEN_FIELDS_MAX) {
        err = fail(c, "more than %d fields in the schema", KOPGEN_FIELDS_MAX);
        goto out;
    }
    if (depth > KOPGEN_DEPTH_MAX) {
        err = fail(c, "%s: nested deeper than %d", path, KOPGEN_DEPTH_MAX);
        goto out;
    }
    if (!json_is_object(s)) {
        err = fail(c, "%s: the schema is not a mapping", path[0] ? path : "<root>");
        goto out;
    }
    if ((err = parse_type(c, s, f)) || (err = parse_checks(c, s, f)))
        goto out;
    if (f->type == KOPGEN_OBJECT) {
        err = parse_props(c, s, f, depth);
    } else if (f->type == KOPGEN_ARRAY) {
        char ipath[1024], iident[KOPGEN_IDENT_MAX + 1];
        const json_t *items = json_object_get(s, "items");
        int pn = snprintf(ipath, sizeof ipath, "%s[]", path);
        int in = snprintf(iident, sizeof iident, "%s_item", ident);
        if (!items)
            err = fail(c, "%s: an array without items", path);
        else if (pn < 0 || (size_t)pn >= sizeof ipath || in < 0 || (size_t)in >= sizeof iident)
            err = fail(c, "%s: the path is too long for a C identifier", path);
        else
            err = parse_field(c, items, "", ipath, iident, depth + 1, &f->items);
    }
out:
    if (err)
        field_free(f);
    else
        *out = f;
    return err;
}

/* pick_version returns the entry of spec.versions to read: version, or the storage one. */
static kop_err pick_version(struct ctx *c, const json_t *versions, const char *version,
                            const json_t **out)
{
    size_t i;
    const json_t *v;
    *out = NULL;
    if (!json_is_array(versions) || json_array_size(versions) == 0)
        return fail(c, "spec.versions must be a non-empty list");
    json_array_foreach(versions, i, v)
    {
        const char *name = str_field(v, "name");
        if (!dns_ok(name, 63, false))
            return fail(c, "spec.versions[%zu].name is not a valid version name", i);
        if (version ? strcmp(name, version) == 0 : json_is_true(json_object_get(v, "storage")))
            *out = v;
    }
    if (!*out && version)
        return fail(c, "no version %.63s in spec.versions", version);
    if (!*out)
        *out = json_array_get(versions, 0);
    return KOP_OK;
}

void kopgen_crd_free(kopgen_crd *crd)
{
    if (!crd)
        return;
    free(crd->group);
    free(crd->version);
    free(crd->plural);
    free(crd->singular);
    free(crd->kind);
    free(crd->prefix);
    free(crd->upper);
    field_free(crd->root);
    json_decref(crd->doc);
    free(crd);
}

/* read_names checks and copies group, names and scope. */
static kop_err read_names(struct ctx *c, kopgen_crd *crd)
{
    const json_t *spec = json_object_get(crd->doc, "spec");
    const json_t *names = json_object_get(spec, "names");
    const char *group = str_field(spec, "group"), *plural = str_field(names, "plural");
    const char *singular = str_field(names, "singular"), *kind = str_field(names, "kind");
    const char *scope = str_field(spec, "scope");
    char prefix[KOPGEN_NAME_MAX + 1];

    if (!dns_ok(group, 253, true) || !strchr(group, '.'))
        return fail(c, "spec.group must be a DNS subdomain with a dot (\"demo.example.com\")");
    if (!dns_ok(plural, 63, false))
        return fail(c, "spec.names.plural must be a lower-case DNS label");
    if (singular && !dns_ok(singular, 63, false))
        return fail(c, "spec.names.singular must be a lower-case DNS label");
    if (!kind_ok(kind) || !kopgen_snake(kind, prefix, sizeof prefix))
        return fail(c, "spec.names.kind must be UpperCamelCase letters and digits");
    if (!scope || (strcmp(scope, "Namespaced") != 0 && strcmp(scope, "Cluster") != 0))
        return fail(c, "spec.scope must be Namespaced or Cluster");
    crd->namespaced = strcmp(scope, "Namespaced") == 0;
    crd->group = strdup(group);
    crd->plural = strdup(plural);
    crd->kind = strdup(kind);
    crd->prefix = strdup(prefix);
    crd->upper = strdup(prefix);
    if (singular)
        crd->singular = strdup(singular);
    else if ((crd->singular = strdup(kind)))
        for (char *p = crd->singular; *p; p++)
            *p = (char)tolower((unsigned char)*p);
    if (!crd->group || !crd->plural || !crd->kind || !crd->prefix || !crd->upper ||
        !crd->singular)
        return KOP_ENOMEM;
    for (char *p = crd->upper; *p; p++)
        *p = (char)toupper((unsigned char)*p);
    return KOP_OK;
}

kop_err kopgen_crd_parse(const char *text, size_t len, const char *origin, const char *version,
                         kopgen_crd **out, kop_status *st)
{
    struct ctx c = {.origin = origin ? origin : "<crd>", .st = st};
    kopgen_crd *crd = calloc(1, sizeof *crd);
    const json_t *ver = NULL, *schema;
    kop_err err = KOP_OK;

    *out = NULL;
    if (!crd)
        return KOP_ENOMEM;
    if ((err = kopgen_yaml_to_json(text, len, c.origin, &crd->doc, st)))
        goto out;
    if (!json_is_object(crd->doc) ||
        !kop_streq(str_field(crd->doc, "kind"), "CustomResourceDefinition")) {
        err = fail(&c, "not a CustomResourceDefinition (kind)");
        goto out;
    }
    if (!kop_streq(str_field(crd->doc, "apiVersion"), "apiextensions.k8s.io/v1")) {
        err = fail(&c, "apiVersion must be apiextensions.k8s.io/v1 (v1beta1 CRDs are gone "
                       "since Kubernetes 1.22)");
        goto out;
    }
    if ((err = read_names(&c, crd)))
        goto out;
    if ((err = pick_version(&c, json_object_get(json_object_get(crd->doc, "spec"), "versions"),
                            version, &ver)))
        goto out;
    if (!(crd->version = strdup(str_field(ver, "name")))) {
        err = KOP_ENOMEM;
        goto out;
    }
    crd->status_subresource =
        json_object_get(json_object_get(ver, "subresources"), "status") != NULL;
    schema = json_object_get(json_object_get(ver, "schema"), "openAPIV3Schema");
    if (!json_is_object(schema)) {
        err = fail(&c, "version %s has no schema.openAPIV3Schema", crd->version);
        goto out;
    }
    if ((err = parse_field(&c, schema, "", "", "", 0, &crd->root)))
        goto out;
    for (size_t i = 0; i < crd->root->nprops; i++) {
        const kopgen_field *f = crd->root->props[i];
        if (strcmp(f->name, "spec") == 0)
            crd->spec = f;
        else if (strcmp(f->name, "status") == 0)
            crd->status = f;
    }
    if (crd->status && crd->status->type != KOPGEN_OBJECT && crd->status->type != KOPGEN_ANY) {
        err = fail(&c, "status must be an object");
        goto out;
    }
out:
    if (err == KOP_ENOMEM)
        kop_status_setf(st, 0, NULL, "%s: out of memory", c.origin);
    if (err)
        kopgen_crd_free(crd);
    else
        *out = crd;
    return err;
}
