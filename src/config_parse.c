/*
 * config_parse.c - kubeconfig documents into a merged set of entries.
 *
 * kop__kc_parse turns one YAML document into clusters, users and contexts
 * and merges them into a kop__kc_set the way client-go merges the files of
 * $KUBECONFIG: the first document to define a name wins (the same name
 * twice in one document is an error), and so does the first
 * current-context. Relative paths become absolute against the document's
 * directory, *-data fields are base64-decoded, and every field is type
 * checked with an error naming the file and the entry. Nothing is read from
 * disk and nothing is run, which is what lets the fuzzer drive it.
 *
 * The input is checked for UTF-8 before libfyaml sees it, and libfyaml's
 * own depth limit bounds nesting. Aliases are followed where a field is
 * read, never expanded wholesale, and everything copied out of a document
 * is charged to a budget (KOP__KUBECONFIG_WORK), so a "billion laughs"
 * document fails with KOP_ETOOBIG instead of exhausting memory.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <libfyaml.h>
#include <openssl/evp.h>

#include "config_internal.h"
#include "kop_internal.h"

/* The module's error reporter (config_internal.h), by a short name. */
#define fail kop__config_fail

#define MEMORY_ORIGIN "<memory>"
#define MAX_ENTRIES   4096 /* clusters, users or contexts in one merged set */
#define COPY_OVERHEAD 32   /* what one small allocation costs beyond its bytes */

/* kc_parse is the state of parsing one document into a set. */
struct kc_parse {
    kop__kc_set *set;
    const char *origin; /* set->origins entry */
    char *dir;          /* absolute directory of origin, for relative paths */
    size_t work;        /* bytes copied so far, capped by KOP__KUBECONFIG_WORK */
    kop_status *st;
};

static void cluster_fini(kop__kc_cluster *c)
{
    free(c->name);
    free(c->server);
    free(c->ca_file);
    free(c->ca_data);
    free(c->tls_server_name);
}

static void user_fini(kop__kc_user *u)
{
    free(u->name);
    free(u->token);
    free(u->token_file);
    free(u->cert_file);
    free(u->cert_data);
    free(u->key_file);
    free(u->key_data);
    free(u->exec_interactive);
    kop__exec_spec_free(u->exec);
}

static void context_fini(kop__kc_context *c)
{
    free(c->name);
    free(c->cluster);
    free(c->user);
    free(c->ns);
}

void kop__kc_set_fini(kop__kc_set *s)
{
    for (size_t i = 0; i < s->nclusters; i++)
        cluster_fini(&s->clusters[i]);
    for (size_t i = 0; i < s->nusers; i++)
        user_fini(&s->users[i]);
    for (size_t i = 0; i < s->ncontexts; i++)
        context_fini(&s->contexts[i]);
    for (size_t i = 0; i < s->norigins; i++)
        free(s->origins[i]);
    free(s->clusters);
    free(s->users);
    free(s->contexts);
    free(s->origins);
    free(s->current);
    memset(s, 0, sizeof *s);
}

/* grow makes room for one more element (of elem bytes) after n in arr,
 * returning the array, moved perhaps, or NULL on ENOMEM (arr untouched). */
static void *grow(void *arr, size_t *cap, size_t n, size_t elem)
{
    if (n < *cap)
        return arr;
    size_t ncap = *cap ? *cap * 2 : 8;
    void *p = realloc(arr, ncap * elem);
    if (p)
        *cap = ncap;
    return p;
}

/* origin_dir returns the absolute directory of origin (NULL: the working
 * directory), newly allocated. */
static char *origin_dir(const char *origin)
{
    const char *slash = origin ? strrchr(origin, '/') : NULL;
    if (origin && origin[0] == '/')
        return kop__memdup0(origin, slash == origin ? 1 : (size_t)(slash - origin));
    char *cwd = getcwd(NULL, 0);
    if (!cwd)
        return strdup(".");
    if (!slash)
        return cwd;
    char *rel = kop__memdup0(origin, (size_t)(slash - origin));
    char *dir = rel ? kop__path_join(cwd, rel) : NULL;
    free(rel);
    free(cwd);
    return dir;
}

/* Where a field lives, for messages: "users[name=dev]" or "users[3]". */
static void entry_where(char *buf, size_t n, const char *kind, const char *name, size_t idx)
{
    if (name)
        snprintf(buf, n, "%s[name=%.200s]", kind, name);
    else
        snprintf(buf, n, "%s[%zu]", kind, idx);
}

/* deref follows an alias to the node it names; NULL for a dangling one. */
static struct fy_node *deref(struct fy_node *n)
{
    return n && fy_node_is_alias(n) ? fy_node_resolve_alias(n) : n;
}

/* is_null tells whether n is absent or a YAML null (empty, ~, null). */
static bool is_null(struct fy_node *n)
{
    if (!n || fy_node_is_null(n))
        return true;
    if (!fy_node_is_scalar(n) || fy_node_get_style(n) != FYNS_PLAIN)
        return false;
    size_t len = 0;
    const char *s = fy_node_get_scalar(n, &len);
    if (!s || len == 0)
        return true;
    return (len == 1 && s[0] == '~') ||
           (len == 4 && (!memcmp(s, "null", 4) || !memcmp(s, "Null", 4) || !memcmp(s, "NULL", 4)));
}

/*
 * field looks up key in the mapping map and stores the (dereferenced) value
 * in *out, or NULL when absent or null.
 */
static kop_err field(struct kc_parse *p, struct fy_node *map, const char *key, const char *where,
                     struct fy_node **out)
{
    struct fy_node *raw = fy_node_mapping_lookup_value_by_simple_key(map, key, FY_NT);
    struct fy_node *n = deref(raw);
    *out = NULL;
    if (raw && !n)
        return fail(p->st, KOP_ECONFIG, "%s: %s%s%s: alias to an unknown anchor", p->origin,
                    where, where[0] ? "." : "", key);
    if (!is_null(n))
        *out = n;
    return KOP_OK;
}

/* charge counts n bytes (plus allocation overhead) against the document's
 * budget; KOP_ETOOBIG when it is spent. */
static kop_err charge(struct kc_parse *p, size_t n)
{
    if (n > KOP__KUBECONFIG_WORK - COPY_OVERHEAD ||
        p->work > KOP__KUBECONFIG_WORK - COPY_OVERHEAD - n)
        return fail(p->st, KOP_ETOOBIG, "%s: expands to more than %zu MiB (aliases?)", p->origin,
                    KOP__KUBECONFIG_WORK >> 20);
    p->work += n + COPY_OVERHEAD;
    return KOP_OK;
}

/* scalar_dup copies scalar node n, charging it to the parse budget. */
static kop_err scalar_dup(struct kc_parse *p, struct fy_node *n, const char *where, const char *key,
                          char **out)
{
    kop_err err;
    size_t len = 0;
    const char *s = fy_node_is_scalar(n) ? fy_node_get_scalar(n, &len) : NULL;
    *out = NULL;
    if (!s)
        return fail(p->st, KOP_ECONFIG, "%s: %s%s%s: expected a string", p->origin, where,
                    key && where[0] ? "." : "", key ? key : "");
    if (memchr(s, '\0', len))
        return fail(p->st, KOP_ECONFIG, "%s: %s%s%s: contains a NUL byte", p->origin, where,
                    key && where[0] ? "." : "", key ? key : "");
    if ((err = charge(p, len + 1)))
        return err;
    *out = kop__memdup0(s, len);
    return *out ? KOP_OK : KOP_ENOMEM;
}

/* get_str copies the string field key of map into *out (NULL if absent). */
static kop_err get_str(struct kc_parse *p, struct fy_node *map, const char *key, const char *where,
                       char **out)
{
    struct fy_node *n;
    kop_err err = field(p, map, key, where, &n);
    *out = NULL;
    if (err || !n)
        return err;
    return scalar_dup(p, n, where, key, out);
}

/* get_path is get_str for a file path: relative paths become absolute
 * against the directory of the defining file. "" counts as absent. */
static kop_err get_path(struct kc_parse *p, struct fy_node *map, const char *key, const char *where,
                        char **out)
{
    kop_err err = get_str(p, map, key, where, out);
    if (err || !*out)
        return err;
    if ((*out)[0] == '\0') {
        free(*out);
        *out = NULL;
    } else if ((*out)[0] != '/') {
        char *abs = kop__path_join(p->dir, *out);
        free(*out);
        *out = abs;
        if (!abs)
            return KOP_ENOMEM;
    }
    return KOP_OK;
}

/* get_bool reads a YAML boolean (1.2 core forms, and 1.1's yes/no/on/off
 * as sigs.k8s.io/yaml accepts them); absent is false. */
static kop_err get_bool(struct kc_parse *p, struct fy_node *map, const char *key, const char *where,
                        bool *out)
{
    static const char *const yes[] = {"true", "True", "TRUE", "yes", "Yes",
                                      "YES",  "on",   "On",   "ON"};
    static const char *const no[] = {"false", "False", "FALSE", "no", "No",
                                     "NO",    "off",   "Off",   "OFF"};
    struct fy_node *n;
    size_t len = 0;
    kop_err err = field(p, map, key, where, &n);
    *out = false;
    if (err || !n)
        return err;
    const char *s = fy_node_is_scalar(n) ? fy_node_get_scalar(n, &len) : NULL;
    for (size_t i = 0; s && i < KOP_ARRAY_LEN(yes); i++) {
        if (strlen(yes[i]) == len && !memcmp(s, yes[i], len)) {
            *out = true;
            return KOP_OK;
        }
        if (strlen(no[i]) == len && !memcmp(s, no[i], len))
            return KOP_OK;
    }
    return fail(p->st, KOP_ECONFIG, "%s: %s.%s: expected true or false", p->origin, where, key);
}

/* get_b64 decodes the base64 field key of map (whitespace ignored) into
 * *out and *len; absent or empty leaves *out NULL. */
static kop_err get_b64(struct kc_parse *p, struct fy_node *map, const char *key, const char *where,
                       char **out, size_t *len)
{
    char *txt = NULL, *bin = NULL;
    size_t n = 0;
    kop_err err = get_str(p, map, key, where, &txt);
    *out = NULL;
    *len = 0;
    if (err || !txt)
        goto out;
    for (const char *c = txt; *c; c++) { /* drop line breaks and blanks */
        if (!kop__is_space(*c))
            txt[n++] = *c;
    }
    if (n == 0)
        goto out;
    if (n % 4 != 0 || n > INT32_MAX) {
        err = fail(p->st, KOP_ECONFIG, "%s: %s.%s: invalid base64", p->origin, where, key);
        goto out;
    }
    bin = malloc(n / 4 * 3 + 1);
    if (!bin) {
        err = KOP_ENOMEM;
        goto out;
    }
    int got = EVP_DecodeBlock((unsigned char *)bin, (const unsigned char *)txt, (int)n);
    if (got < 0) {
        err = fail(p->st, KOP_ECONFIG, "%s: %s.%s: invalid base64", p->origin, where, key);
        goto out;
    }
    size_t blen = (size_t)got; /* EVP_DecodeBlock counts the padding as zero bytes */
    blen -= (txt[n - 1] == '=') + (txt[n - 2] == '=');
    bin[blen] = '\0';
    *out = bin;
    *len = blen;
    bin = NULL;
out:
    free(txt);
    free(bin);
    return err;
}

/* body returns the mapping under key (e.g. "cluster") of a list entry. */
static kop_err body(struct kc_parse *p, struct fy_node *item, const char *key, const char *where,
                    struct fy_node **out)
{
    kop_err err = field(p, item, key, where, out);
    if (!err && *out && !fy_node_is_mapping(*out))
        err = fail(p->st, KOP_ECONFIG, "%s: %s.%s: expected a mapping", p->origin, where, key);
    return err;
}

static kop_err parse_cluster(struct kc_parse *p, struct fy_node *n, const char *w,
                             kop__kc_cluster *c)
{
    kop_err err;
    if ((err = get_str(p, n, "server", w, &c->server)) ||
        (err = get_path(p, n, "certificate-authority", w, &c->ca_file)) ||
        (err = get_b64(p, n, "certificate-authority-data", w, &c->ca_data, &c->ca_len)) ||
        (err = get_str(p, n, "tls-server-name", w, &c->tls_server_name)) ||
        (err = get_bool(p, n, "insecure-skip-tls-verify", w, &c->insecure)))
        return err;
    return KOP_OK;
}

/* parse_exec_env reads exec.env, a list of {name, value}. */
static kop_err parse_exec_env(struct kc_parse *p, struct fy_node *list, const char *w,
                              kop__exec_spec *e)
{
    char iw[320];
    int count = fy_node_sequence_item_count(list);
    void *it = NULL;
    struct fy_node *item;
    if (count < 0 || !fy_node_is_sequence(list))
        return fail(p->st, KOP_ECONFIG, "%s: %s.env: expected a list", p->origin, w);
    kop_err err = charge(p, ((size_t)count + 1) * sizeof *e->env);
    if (err)
        return err;
    e->env = calloc((size_t)count + 1, sizeof *e->env);
    if (!e->env)
        return KOP_ENOMEM;
    while ((item = fy_node_sequence_iterate(list, &it))) {
        snprintf(iw, sizeof iw, "%s.env[%zu]", w, e->nenv);
        item = deref(item);
        if (!item || !fy_node_is_mapping(item))
            return fail(p->st, KOP_ECONFIG, "%s: %s: expected a mapping", p->origin, iw);
        kop__exec_env *v = &e->env[e->nenv++];
        if ((err = get_str(p, item, "name", iw, &v->name)) ||
            (err = get_str(p, item, "value", iw, &v->value)))
            return err;
        if (!v->value && !(v->value = strdup("")))
            return KOP_ENOMEM;
    }
    return KOP_OK;
}

/* parse_exec reads a user's exec section into u->exec. */
static kop_err parse_exec(struct kc_parse *p, struct fy_node *n, const char *uw, kop__kc_user *u)
{
    char w[300], aw[320];
    struct fy_node *args, *env;
    kop_err err;
    snprintf(w, sizeof w, "%s.exec", uw);
    kop__exec_spec *e = u->exec = calloc(1, sizeof *e);
    if (!e)
        return KOP_ENOMEM;
    if ((err = get_str(p, n, "apiVersion", w, &e->api_version)) ||
        (err = get_str(p, n, "command", w, &e->command)) ||
        (err = get_str(p, n, "installHint", w, &e->install_hint)) ||
        (err = get_str(p, n, "interactiveMode", w, &u->exec_interactive)) ||
        (err = get_bool(p, n, "provideClusterInfo", w, &e->provide_cluster_info)) ||
        (err = field(p, n, "args", w, &args)) || (err = field(p, n, "env", w, &env)))
        return err;
    /* A command with a '/' is a path, relative to the kubeconfig's directory;
     * a bare name is looked up in $PATH when the plugin runs. */
    if (e->command && e->command[0] != '/' && strchr(e->command, '/')) {
        char *abs = kop__path_join(p->dir, e->command);
        if (!abs)
            return KOP_ENOMEM;
        free(e->command);
        e->command = abs;
    }
    if (args) {
        int count = fy_node_sequence_item_count(args);
        void *it = NULL;
        struct fy_node *item;
        if (count < 0 || !fy_node_is_sequence(args))
            return fail(p->st, KOP_ECONFIG, "%s: %s.args: expected a list", p->origin, w);
        if ((err = charge(p, ((size_t)count + 1) * sizeof *e->args)))
            return err;
        e->args = calloc((size_t)count + 1, sizeof *e->args);
        if (!e->args)
            return KOP_ENOMEM;
        while ((item = fy_node_sequence_iterate(args, &it))) {
            snprintf(aw, sizeof aw, "%s.args[%zu]", w, e->nargs);
            struct fy_node *a = deref(item);
            if (!a)
                return fail(p->st, KOP_ECONFIG, "%s: %s: alias to an unknown anchor", p->origin,
                            aw);
            if ((err = scalar_dup(p, a, aw, NULL, &e->args[e->nargs])))
                return err;
            e->nargs++;
        }
    }
    return env ? parse_exec_env(p, env, w, e) : KOP_OK;
}

static kop_err parse_user(struct kc_parse *p, struct fy_node *n, const char *w, kop__kc_user *u)
{
    kop_err err;
    struct fy_node *x;
    if ((err = get_str(p, n, "token", w, &u->token)) ||
        (err = get_path(p, n, "tokenFile", w, &u->token_file)) ||
        (err = get_path(p, n, "client-certificate", w, &u->cert_file)) ||
        (err = get_b64(p, n, "client-certificate-data", w, &u->cert_data, &u->cert_len)) ||
        (err = get_path(p, n, "client-key", w, &u->key_file)) ||
        (err = get_b64(p, n, "client-key-data", w, &u->key_data, &u->key_len)))
        return err;
    /* Methods libkop does not implement are remembered so that selecting
     * this user fails clearly instead of connecting as someone else. */
    if ((err = field(p, n, "username", w, &x)))
        return err;
    u->basic_auth = x != NULL;
    if ((err = field(p, n, "password", w, &x)))
        return err;
    u->basic_auth |= x != NULL;
    if ((err = field(p, n, "auth-provider", w, &x)))
        return err;
    u->auth_provider = x != NULL;
    if ((err = field(p, n, "as", w, &x)))
        return err;
    u->impersonate = x != NULL;
    if ((err = field(p, n, "exec", w, &x)))
        return err;
    if (x && !fy_node_is_mapping(x))
        return fail(p->st, KOP_ECONFIG, "%s: %s.exec: expected a mapping", p->origin, w);
    return x ? parse_exec(p, x, w, u) : KOP_OK;
}

static kop_err parse_context(struct kc_parse *p, struct fy_node *n, const char *w,
                             kop__kc_context *c)
{
    kop_err err;
    if ((err = get_str(p, n, "cluster", w, &c->cluster)) ||
        (err = get_str(p, n, "user", w, &c->user)) ||
        (err = get_str(p, n, "namespace", w, &c->ns)))
        return err;
    return KOP_OK;
}

/* The three lists share one walk; kinds[] describes each. */
struct kc_kind_info {
    const char *list; /* "clusters" */
    const char *item; /* "cluster" */
};

static const struct kc_kind_info kinds[] = {
    [KOP__KC_CLUSTER] = {"clusters", "cluster"},
    [KOP__KC_USER] = {"users", "user"},
    [KOP__KC_CONTEXT] = {"contexts", "context"},
};

/* An entry of any kind while it is parsed. All kinds begin with name and
 * origin, which may be read through any member (a common initial sequence). */
union kc_entry {
    kop__kc_cluster cluster;
    kop__kc_user user;
    kop__kc_context context;
};

static void entry_fini(kop__kc_kind kind, union kc_entry *e)
{
    if (kind == KOP__KC_CLUSTER)
        cluster_fini(&e->cluster);
    else if (kind == KOP__KC_USER)
        user_fini(&e->user);
    else
        context_fini(&e->context);
}

static size_t count_of(const kop__kc_set *s, kop__kc_kind kind)
{
    return kind == KOP__KC_CLUSTER ? s->nclusters : kind == KOP__KC_USER ? s->nusers : s->ncontexts;
}

/* entry_head gives the name and origin of entry i of kind. */
static void entry_head(const kop__kc_set *s, kop__kc_kind kind, size_t i, const char **name,
                       const char **origin)
{
    if (kind == KOP__KC_CLUSTER) {
        *name = s->clusters[i].name;
        *origin = s->clusters[i].origin;
    } else if (kind == KOP__KC_USER) {
        *name = s->users[i].name;
        *origin = s->users[i].origin;
    } else {
        *name = s->contexts[i].name;
        *origin = s->contexts[i].origin;
    }
}

size_t kop__kc_find(const kop__kc_set *s, kop__kc_kind kind, const char *name)
{
    size_t n = count_of(s, kind);
    for (size_t i = 0; i < n; i++) {
        const char *nm, *origin;
        entry_head(s, kind, i, &nm, &origin);
        if (strcmp(nm, name) == 0)
            return i;
    }
    return n;
}

/* append moves e to the end of its kind's array. */
static kop_err append(kop__kc_set *s, kop__kc_kind kind, union kc_entry *e)
{
    void *arr;
    if (kind == KOP__KC_CLUSTER) {
        if (!(arr = grow(s->clusters, &s->capclusters, s->nclusters, sizeof *s->clusters)))
            return KOP_ENOMEM;
        s->clusters = arr;
        s->clusters[s->nclusters++] = e->cluster;
    } else if (kind == KOP__KC_USER) {
        if (!(arr = grow(s->users, &s->capusers, s->nusers, sizeof *s->users)))
            return KOP_ENOMEM;
        s->users = arr;
        s->users[s->nusers++] = e->user;
    } else {
        if (!(arr = grow(s->contexts, &s->capcontexts, s->ncontexts, sizeof *s->contexts)))
            return KOP_ENOMEM;
        s->contexts = arr;
        s->contexts[s->ncontexts++] = e->context;
    }
    return KOP_OK;
}

/*
 * add_entry moves a parsed entry into the set unless an earlier document
 * already defined its name (the first wins); the same name twice in one
 * document is an error. The set owns e afterwards, or e has been freed.
 */
static kop_err add_entry(struct kc_parse *p, kop__kc_kind kind, union kc_entry *e, const char *w)
{
    kop_err err = KOP_OK;
    size_t n = count_of(p->set, kind);
    size_t at = kop__kc_find(p->set, kind, e->cluster.name);
    if (at < n) {
        const char *name, *origin;
        entry_head(p->set, kind, at, &name, &origin);
        if (origin == p->origin)
            err = fail(p->st, KOP_ECONFIG, "%s: %s: defined twice", p->origin, w);
        goto out;
    }
    if (n >= MAX_ENTRIES) {
        err = fail(p->st, KOP_ETOOBIG, "%s: more than %d %s", p->origin, MAX_ENTRIES,
                   kinds[kind].list);
        goto out;
    }
    if (!(err = append(p->set, kind, e)))
        return KOP_OK;
out:
    entry_fini(kind, e);
    return err;
}

/* parse_list reads one of the top-level lists (clusters, users, contexts). */
static kop_err parse_list(struct kc_parse *p, struct fy_node *root, kop__kc_kind kind)
{
    const struct kc_kind_info *k = &kinds[kind];
    struct fy_node *list, *item, *inner;
    void *it = NULL;
    size_t idx = 0;
    char w[256];
    kop_err err = field(p, root, k->list, "", &list);
    if (err || !list)
        return err;
    if (!fy_node_is_sequence(list))
        return fail(p->st, KOP_ECONFIG, "%s: %s: expected a list", p->origin, k->list);
    for (; (item = fy_node_sequence_iterate(list, &it)); idx++) {
        union kc_entry e;
        memset(&e, 0, sizeof e);
        entry_where(w, sizeof w, k->list, NULL, idx);
        item = deref(item);
        if (!item || !fy_node_is_mapping(item))
            return fail(p->st, KOP_ECONFIG, "%s: %s: expected a mapping", p->origin, w);
        e.cluster.origin = p->origin;
        err = get_str(p, item, "name", w, &e.cluster.name);
        if (!err && (!e.cluster.name || !e.cluster.name[0]))
            err = fail(p->st, KOP_ECONFIG, "%s: %s: missing name", p->origin, w);
        if (!err) {
            entry_where(w, sizeof w, k->list, e.cluster.name, idx);
            err = body(p, item, k->item, w, &inner);
        }
        if (!err && inner) {
            if (kind == KOP__KC_CLUSTER)
                err = parse_cluster(p, inner, w, &e.cluster);
            else if (kind == KOP__KC_USER)
                err = parse_user(p, inner, w, &e.user);
            else
                err = parse_context(p, inner, w, &e.context);
        }
        if (err) {
            entry_fini(kind, &e);
            return err;
        }
        if ((err = add_entry(p, kind, &e, w)))
            return err;
    }
    return KOP_OK;
}

/* parse_root reads a document's top level into the set. */
static kop_err parse_root(struct kc_parse *p, struct fy_node *root)
{
    char *current = NULL;
    kop_err err;
    root = deref(root);
    if (is_null(root))
        return KOP_OK; /* an empty file is an empty config, as in client-go */
    if (!fy_node_is_mapping(root))
        return fail(p->st, KOP_ECONFIG, "%s: not a kubeconfig: the top level is not a mapping",
                    p->origin);
    if ((err = get_str(p, root, "current-context", "", &current)))
        return err;
    if (current && current[0] && !p->set->current) {
        p->set->current = current; /* the first file that sets it wins */
        current = NULL;
    }
    free(current);
    if ((err = parse_list(p, root, KOP__KC_CLUSTER)) || (err = parse_list(p, root, KOP__KC_USER)) ||
        (err = parse_list(p, root, KOP__KC_CONTEXT)))
        return err;
    return KOP_OK;
}

static void yaml_diag_discard(struct fy_diag *diag, void *user, const char *buf, size_t len)
{
}

/*
 * text_ok checks that s is UTF-8 without NUL bytes, as YAML text must be,
 * and returns the offset of the first bad byte, or len. Checked before
 * libfyaml sees the input: its 0.7 releases can loop forever on a directive
 * followed by malformed UTF-8.
 */
static size_t text_ok(const char *text, size_t len)
{
    const unsigned char *s = (const unsigned char *)text;
    size_t i = 0;
    while (i < len) {
        unsigned c = s[i];
        size_t n = c < 0x80                ? 0 /* continuation bytes that follow */
                   : c >= 0xc2 && c <= 0xdf ? 1
                   : c >= 0xe0 && c <= 0xef ? 2
                   : c >= 0xf0 && c <= 0xf4 ? 3
                                            : 9;
        if (c == 0 || n == 9 || n >= len - i) /* NUL, bad lead byte, or cut short */
            return i;
        /* The second byte's range excludes overlongs, surrogates and
         * code points past U+10FFFF. */
        unsigned lo = 0x80, hi = 0xbf;
        if (c == 0xe0)
            lo = 0xa0;
        else if (c == 0xed)
            hi = 0x9f;
        else if (c == 0xf0)
            lo = 0x90;
        else if (c == 0xf4)
            hi = 0x8f;
        for (size_t k = 1; k <= n; k++) {
            if (s[i + k] < (k == 1 ? lo : 0x80) || s[i + k] > (k == 1 ? hi : 0xbf))
                return i;
        }
        i += n + 1;
    }
    return len;
}

/* blank_yaml tells whether text holds no node: only blank lines, comments
 * and document markers. libfyaml refuses such input without saying why. */
static bool blank_yaml(const char *text, size_t len)
{
    size_t i = 0;
    while (i < len) {
        size_t end = i;
        while (end < len && text[end] != '\n')
            end++;
        while (i < end && kop__is_space(text[i]))
            i++;
        bool marker = end - i >= 3 && (!memcmp(text + i, "---", 3) || !memcmp(text + i, "...", 3));
        if (marker)
            i += 3;
        while (i < end && kop__is_space(text[i]))
            i++;
        if (i < end && text[i] != '#')
            return false;
        i = end + 1;
    }
    return true;
}

kop_err kop__kc_parse(kop__kc_set *set, const char *yaml, size_t len, const char *origin,
                      kop_status *st)
{
    struct kc_parse p = {.set = set, .st = st};
    struct fy_diag *diag = NULL;
    struct fy_document *doc = NULL;
    struct fy_diag_cfg dcfg;
    kop_err err = KOP_OK;
    void *it = NULL;

    char **o = realloc(set->origins, (set->norigins + 1) * sizeof *o);
    if (!o)
        return KOP_ENOMEM;
    set->origins = o;
    if (!(o[set->norigins] = strdup(origin ? origin : MEMORY_ORIGIN)))
        return KOP_ENOMEM;
    p.origin = o[set->norigins++];
    if (!(p.dir = origin_dir(origin)))
        return KOP_ENOMEM;

    size_t bad = text_ok(yaml, len);
    if (bad < len) {
        err = fail(st, KOP_EPARSE, "%s: invalid YAML: %s at byte %zu", p.origin,
                   yaml[bad] ? "malformed UTF-8" : "NUL", bad);
        goto out;
    }
    /* Diagnostics are collected, never printed. */
    fy_diag_cfg_default(&dcfg);
    dcfg.fp = NULL;
    dcfg.output_fn = yaml_diag_discard;
    dcfg.colorize = false;
    if (!(diag = fy_diag_create(&dcfg))) {
        err = KOP_ENOMEM;
        goto out;
    }
    fy_diag_set_collect_errors(diag, true);
    struct fy_parse_cfg pcfg = {.flags = FYPCF_QUIET | FYPCF_DISABLE_RECYCLING, .diag = diag};
    doc = fy_document_build_from_string(&pcfg, yaml, len);
    if (!doc) {
        struct fy_diag_error *de = fy_diag_errors_iterate(diag, &it);
        if (de)
            err = fail(st, KOP_EPARSE, "%s:%d:%d: invalid YAML: %s", p.origin, de->line,
                       de->column, de->msg ? de->msg : "syntax error");
        else if (!blank_yaml(yaml, len)) /* blank input is an empty config */
            err = fail(st, KOP_EPARSE, "%s: invalid YAML", p.origin);
        goto out;
    }
    err = parse_root(&p, fy_document_root(doc));
out:
    fy_document_destroy(doc);
    fy_diag_destroy(diag);
    free(p.dir);
    return err;
}
