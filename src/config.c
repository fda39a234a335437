/*
 * config.c - kubeconfig and in-cluster configuration (see kop/config.h).
 *
 * Loading happens in two phases, as in client-go's clientcmd:
 *
 *   1. parse: every file is read (capped) and handed to config_parse.c,
 *      which merges the documents into a kop__kc_set, the clusters, users
 *      and contexts with the file that defined each. Parsing reads nothing
 *      but the kubeconfig itself and runs nothing, so it is safe to fuzz.
 *   2. select: the chosen context, its cluster and its user are validated
 *      and copied into a kop_config; the set is thrown away. Files named
 *      by the selected entries (CA, client certificate and key, token file)
 *      are read here once, so a broken path fails at load time with the
 *      file and field named, not at the first request.
 *
 * After that the static part of a kop_config never changes; the files
 * that hold credentials are watched, and the credentials are read at
 * request time, by config_credentials.c. In-cluster configuration (the
 * pod's service account) makes the same kop_config without a kubeconfig.
 *
 * Invariants: a kop_config handed out has a server URL with a scheme and
 * no trailing slash, a context (possibly ""), a namespace, and, unless
 * parse_only, every file its user names read once successfully; a failed
 * load frees what it built and hands out NULL.
 */
#define _GNU_SOURCE /* asprintf */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "kop/buf.h"
#include "config_internal.h"
#include "kop/clock.h"
#include "kop_internal.h"

/* The module's error reporter (config_internal.h), by a short name. */
#define fail kop__config_fail

#define DEFAULT_SA_DIR "/var/run/secrets/kubernetes.io/serviceaccount"
#define MEMORY_ORIGIN  "<memory>"

/* ---- small helpers ------------------------------------------------------ */

kop_err kop__config_fail(kop_status *st, kop_err err, const char *fmt, ...)
{
    if (st) {
        va_list ap;
        st->code = 0;
        st->reason[0] = '\0';
        va_start(ap, fmt);
        vsnprintf(st->message, sizeof st->message, fmt, ap);
        va_end(ap);
    }
    return err;
}

/*
 * kop__config_read_file reads all of path into b (reset first), failing with KOP_ETOOBIG
 * past max bytes and KOP_EIO otherwise, *eno holding errno. Any file type
 * is accepted (a kubeconfig may come from a pipe, <(...)).
 */
kop_err kop__config_read_file(const char *path, size_t max, kop_buf *b, int *eno)
{
    kop_err err = KOP_OK;
    char chunk[8192];
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    *eno = 0;
    kop_buf_fini(b);
    kop_buf_init(b, max);
    if (fd < 0) {
        *eno = errno;
        return KOP_EIO;
    }
    for (;;) {
        ssize_t n = read(fd, chunk, sizeof chunk);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            *eno = errno;
            err = KOP_EIO;
            goto out;
        }
        if (n == 0)
            break;
        err = kop_buf_append(b, chunk, (size_t)n);
        if (err)
            goto out;
    }
    if (!b->data)
        err = kop_buf_append(b, "", 0); /* an empty file is "", never NULL */
out:
    close(fd);
    return err;
}

/* kop__config_file_fail explains a kop__config_read_file failure of path, prefixed by what. */
kop_err kop__config_file_fail(kop_status *st, kop_err err, int eno, const char *what,
                              const char *path, size_t max)
{
    if (err == KOP_ETOOBIG)
        return fail(st, err, "%s: %s: larger than the %zu KiB cap", what, path, max >> 10);
    if (err == KOP_EIO)
        return fail(st, err, "%s: %s: %s", what, path, strerror(eno));
    return fail(st, err, "%s: %s: %s", what, path, kop_strerror(err));
}

/* kop__config_trim_space removes leading and trailing ASCII whitespace of the len bytes
 * at s in place, NUL-terminates the rest and returns its length. */
size_t kop__config_trim_space(char *s, size_t len)
{
    size_t a = 0;
    while (len > 0 && kop__is_space(s[len - 1]))
        len--;
    while (a < len && kop__is_space(s[a]))
        a++;
    memmove(s, s + a, len - a);
    s[len - a] = '\0';
    return len - a;
}

/* kop__config_token_ok tells whether a bearer token can go into an HTTP header as is:
 * no control characters (a CR or LF would inject headers). */
bool kop__config_token_ok(const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x20 || c == 0x7f)
            return false;
    }
    return true;
}

/* load_file reads and parses path into set. When missing_ok, a file that
 * does not exist is skipped and *found is false. */
static kop_err load_file(kop__kc_set *set, const char *path, bool missing_ok, bool *found,
                         kop_status *st)
{
    kop_buf b;
    int eno = 0;
    kop_buf_init(&b, KOP__KUBECONFIG_MAX);
    kop_err err = kop__config_read_file(path, KOP__KUBECONFIG_MAX, &b, &eno);
    if (found)
        *found = !(err == KOP_EIO && eno == ENOENT);
    if (err == KOP_EIO && eno == ENOENT && missing_ok) {
        err = KOP_OK;
        goto out;
    }
    if (err) {
        if (err == KOP_ETOOBIG)
            err = fail(st, err, "%s: larger than the %zu MiB cap", path, KOP__KUBECONFIG_MAX >> 20);
        else if (err == KOP_EIO)
            err = fail(st, err, "%s: %s", path, strerror(eno));
        goto out;
    }
    err = kop__kc_parse(set, b.data, b.len, path, st);
out:
    kop_buf_fini(&b);
    return err;
}

/* load_env_list loads the ':'-separated KUBECONFIG list, skipping empty
 * entries, repeats and missing files. */
static kop_err load_env_list(kop__kc_set *set, const char *list, kop_status *st)
{
    kop_err err = KOP_OK;
    size_t nfound = 0;
    char *copy = strdup(list), *save = NULL;
    if (!copy)
        return KOP_ENOMEM;
    for (char *f = strtok_r(copy, ":", &save); f; f = strtok_r(NULL, ":", &save)) {
        bool seen = false, found = false;
        for (size_t i = 0; i < set->norigins && !seen; i++)
            seen = strcmp(set->origins[i], f) == 0;
        if (seen)
            continue;
        if ((err = load_file(set, f, true, &found, st)))
            goto out;
        nfound += found;
    }
    if (nfound == 0)
        err = fail(st, KOP_ECONFIG, "KUBECONFIG=%s: none of the listed files exists", list);
out:
    free(copy);
    return err;
}

/* ---- the resolved configuration ----------------------------------------- */

static kop_config *config_new(void)
{
    kop_config *cfg = calloc(1, sizeof *cfg);
    if (!cfg)
        return NULL;
    if (pthread_mutex_init(&cfg->mu, NULL) != 0) {
        free(cfg);
        return NULL;
    }
    cfg->exec_timeout_ms = KOP__EXEC_TIMEOUT_MS;
    return cfg;
}

void kop_config_free(kop_config *cfg)
{
    if (!cfg)
        return;
    free(cfg->context);
    free(cfg->server);
    free(cfg->ns);
    free(cfg->tls_server_name);
    free(cfg->ca);
    free(cfg->user_where);
    free(cfg->token);
    free(cfg->cert_data);
    free(cfg->key_data);
    kop__wfile_fini(&cfg->token_file);
    kop__wfile_fini(&cfg->cert_file);
    kop__wfile_fini(&cfg->key_file);
    kop__exec_spec_free(cfg->exec);
    kop__exec_cred_fini(&cfg->exec_cred);
    pthread_mutex_destroy(&cfg->mu);
    free(cfg);
}

/* set_server normalises and stores a cluster's server URL. */
static kop_err set_server(kop_config *cfg, const char *server, const char *w, kop_status *st)
{
    size_t len = strlen(server);
    while (len > 0 && server[len - 1] == '/')
        len--;
    if (len == 0)
        return fail(st, KOP_ECONFIG, "%s: no server", w);
    if (!strstr(server, "://")) { /* "host:port" means https, as in client-go */
        cfg->server = malloc(len + 9);
        if (cfg->server)
            snprintf(cfg->server, len + 9, "https://%.*s", (int)len, server);
    } else if (!strncasecmp(server, "https://", 8) || !strncasecmp(server, "http://", 7)) {
        cfg->server = kop__memdup0(server, len);
    } else {
        return fail(st, KOP_ECONFIG, "%s.server: %s: only https:// and http:// are supported", w,
                    server);
    }
    return cfg->server ? KOP_OK : KOP_ENOMEM;
}

/* use_cluster copies the selected cluster into cfg, reading its CA file. */
static kop_err use_cluster(kop_config *cfg, kop__kc_cluster *c, kop_status *st)
{
    char w[512];
    kop_err err;
    snprintf(w, sizeof w, "%s: clusters[name=%.200s]", c->origin, c->name);
    if (!c->server)
        return fail(st, KOP_ECONFIG, "%s: no server", w);
    if ((err = set_server(cfg, c->server, w, st)))
        return err;
    if (c->insecure && (c->ca_data || c->ca_file))
        return fail(st, KOP_ECONFIG,
                    "%s: insecure-skip-tls-verify together with a certificate authority is not "
                    "allowed",
                    w);
    cfg->insecure = c->insecure;
    cfg->tls_server_name = c->tls_server_name;
    c->tls_server_name = NULL;
    if (c->ca_data) { /* inline data wins over the file, as in client-go */
        cfg->ca = c->ca_data;
        cfg->ca_len = c->ca_len;
        c->ca_data = NULL;
    } else if (c->ca_file && !cfg->parse_only) {
        kop_buf b;
        int eno = 0;
        kop_buf_init(&b, KOP__PEM_MAX);
        err = kop__config_read_file(c->ca_file, KOP__PEM_MAX, &b, &eno);
        if (err) {
            kop_buf_fini(&b);
            snprintf(w + strlen(w), sizeof w - strlen(w), ".certificate-authority");
            return kop__config_file_fail(st, err, eno, w, c->ca_file, KOP__PEM_MAX);
        }
        cfg->ca = kop_buf_take(&b, &cfg->ca_len);
        if (!cfg->ca)
            return KOP_ENOMEM;
    }
    return KOP_OK;
}

/* check_exec validates an exec section the way client-go does. */
static kop_err check_exec(const kop__kc_user *u, const char *w, kop_status *st)
{
    const kop__exec_spec *e = u->exec;
    const char *mode = u->exec_interactive;
    if (!e->command || !e->command[0])
        return fail(st, KOP_ECONFIG, "%s.exec: command is required", w);
    if (!e->api_version || !e->api_version[0])
        return fail(st, KOP_ECONFIG, "%s.exec: apiVersion is required", w);
    if (strcmp(e->api_version, KOP__EXEC_V1) && strcmp(e->api_version, KOP__EXEC_V1BETA1))
        return fail(st, KOP_ECONFIG, "%s.exec.apiVersion: %s is not supported (use %s or %s)", w,
                    e->api_version, KOP__EXEC_V1, KOP__EXEC_V1BETA1);
    for (size_t i = 0; i < e->nenv; i++) {
        if (!e->env[i].name || !e->env[i].name[0] || strchr(e->env[i].name, '='))
            return fail(st, KOP_ECONFIG, "%s.exec.env[%zu]: invalid name", w, i);
    }
    /* v1 has no default; v1beta1 defaults to IfAvailable. */
    if ((!mode || !mode[0]) && !strcmp(e->api_version, KOP__EXEC_V1))
        return fail(st, KOP_ECONFIG, "%s.exec: interactiveMode must be set for %s", w,
                    KOP__EXEC_V1);
    if (mode && mode[0] && strcmp(mode, "Never") && strcmp(mode, "IfAvailable")) {
        if (!strcmp(mode, "Always"))
            return fail(st, KOP_ECONFIG,
                        "%s.exec.interactiveMode: Always needs a terminal, and libkop never runs "
                        "plugins interactively",
                        w);
        return fail(st, KOP_ECONFIG, "%s.exec.interactiveMode: invalid value %s", w, mode);
    }
    return KOP_OK;
}

/* use_user copies the selected user's credentials into cfg. */
static kop_err use_user(kop_config *cfg, kop__kc_user *u, kop_status *st)
{
    kop_err err;
    const char *w;
    if (asprintf(&cfg->user_where, "%s: users[name=%.200s]", u->origin, u->name) < 0) {
        cfg->user_where = NULL;
        return KOP_ENOMEM;
    }
    w = cfg->user_where;
    if (u->basic_auth)
        return fail(st, KOP_ECONFIG, "%s: username/password (basic auth) is not supported", w);
    if (u->auth_provider)
        return fail(st, KOP_ECONFIG, "%s.auth-provider: not supported; use an exec plugin", w);
    if (u->impersonate)
        return fail(st, KOP_ECONFIG, "%s.as: impersonation is not supported", w);
    if ((u->cert_data || u->cert_file) != (u->key_data || u->key_file))
        return fail(st, KOP_ECONFIG, "%s: client-certificate and client-key must be given together",
                    w);
    if (u->exec && (err = check_exec(u, w, st)))
        return err;
    cfg->exec = u->exec;
    u->exec = NULL;
    if (u->token && !kop__config_token_ok(u->token, strlen(u->token)))
        return fail(st, KOP_ECONFIG, "%s.token: contains control characters", w);
    if (u->token && u->token[0]) {
        cfg->token = u->token; /* a tokenFile, when also given, wins (see credentials) */
        u->token = NULL;
    }
    if (u->token_file && (err = kop__wfile_set(cfg, &cfg->token_file, &u->token_file, "tokenFile",
                                          KOP__TOKEN_MAX, true, st)))
        return err;
    if (u->cert_data) {
        cfg->cert_data = u->cert_data;
        cfg->cert_len = u->cert_len;
        u->cert_data = NULL;
    } else if (u->cert_file && (err = kop__wfile_set(cfg, &cfg->cert_file, &u->cert_file,
                                                "client-certificate", KOP__PEM_MAX, false, st))) {
        return err;
    }
    if (u->key_data) {
        cfg->key_data = u->key_data;
        cfg->key_len = u->key_len;
        u->key_data = NULL;
    } else if (u->key_file && (err = kop__wfile_set(cfg, &cfg->key_file, &u->key_file, "client-key",
                                               KOP__PEM_MAX, false, st))) {
        return err;
    }
    return KOP_OK;
}

/* dns_label tells whether s is a DNS-1123 label, as namespaces must be. */
static bool dns_label(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 63 || s[0] == '-' || s[n - 1] == '-')
        return false;
    for (size_t i = 0; i < n; i++) {
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '-'))
            return false;
    }
    return true;
}

/* files_desc names the parsed files for messages: "a" or "a:b:c". */
static void files_desc(const kop__kc_set *s, char *buf, size_t n)
{
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < s->norigins && used < n; i++) {
        int w = snprintf(buf + used, n - used, "%s%s", i ? ":" : "", s->origins[i]);
        if (w < 0)
            break;
        used += (size_t)w;
    }
}

/*
 * select_context resolves the chosen context of set into a new kop_config.
 * Entries used are moved out of set.
 */
static kop_err select_context(kop__kc_set *set, const kop_config_opts *opts, kop_config **out,
                              kop_status *st)
{
    char files[512], w[512];
    kop_err err = KOP_OK;
    kop_config *cfg = NULL;
    const char *name = opts && opts->context && opts->context[0] ? opts->context : set->current;
    files_desc(set, files, sizeof files);
    if (!name) {
        err = fail(st, KOP_ECONFIG, "%s: no context: current-context is not set", files);
        goto out;
    }
    size_t ci = kop__kc_find(set, KOP__KC_CONTEXT, name);
    if (ci == set->ncontexts) {
        err = fail(st, KOP_ECONFIG, "%s: context \"%.200s\" not found", files, name);
        goto out;
    }
    kop__kc_context *ctx = &set->contexts[ci];
    snprintf(w, sizeof w, "%s: contexts[name=%.200s]", ctx->origin, ctx->name);
    if (!ctx->cluster || !ctx->cluster[0]) {
        err = fail(st, KOP_ECONFIG, "%s: no cluster", w);
        goto out;
    }
    size_t cli = kop__kc_find(set, KOP__KC_CLUSTER, ctx->cluster);
    if (cli == set->nclusters) {
        err = fail(st, KOP_ECONFIG, "%s: cluster \"%.200s\" not found", w, ctx->cluster);
        goto out;
    }
    size_t ui = set->nusers;
    if (ctx->user && ctx->user[0]) { /* no user: anonymous */
        ui = kop__kc_find(set, KOP__KC_USER, ctx->user);
        if (ui == set->nusers) {
            err = fail(st, KOP_ECONFIG, "%s: user \"%.200s\" not found", w, ctx->user);
            goto out;
        }
    }
    if (ctx->ns && ctx->ns[0] && !dns_label(ctx->ns)) {
        err = fail(st, KOP_ECONFIG, "%s.namespace: \"%.200s\" is not a valid namespace name", w,
                   ctx->ns);
        goto out;
    }
    if (!(cfg = config_new())) {
        err = KOP_ENOMEM;
        goto out;
    }
    cfg->parse_only = opts && opts->parse_only;
    cfg->context = strdup(ctx->name);
    cfg->ns = strdup(ctx->ns && ctx->ns[0] ? ctx->ns : "default");
    if (!cfg->context || !cfg->ns) {
        err = KOP_ENOMEM;
        goto out;
    }
    if ((err = use_cluster(cfg, &set->clusters[cli], st)))
        goto out;
    if (ui < set->nusers)
        err = use_user(cfg, &set->users[ui], st);
    else if (!(cfg->user_where = strdup(w)))
        err = KOP_ENOMEM;
out:
    if (err) {
        kop_config_free(cfg);
        cfg = NULL;
    }
    *out = cfg;
    return err;
}

/* ---- loading ------------------------------------------------------------ */

/* home_config returns "$HOME/.kube/config", newly allocated. */
static kop_err home_config(char **path, kop_status *st)
{
    const char *home = getenv("HOME");
    *path = NULL;
    if (!home || !home[0])
        return fail(st, KOP_ECONFIG, "no kubeconfig: KUBECONFIG and HOME are not set");
    *path = kop__path_join(home, ".kube/config");
    return *path ? KOP_OK : KOP_ENOMEM;
}

kop_err kop_config_load(const kop_config_opts *opts, kop_config **out, kop_status *st)
{
    kop__kc_set set;
    char *home = NULL;
    const char *env = getenv("KUBECONFIG");
    kop_err err;
    memset(&set, 0, sizeof set);
    kop_status_clear(st);
    if (!out)
        return fail(st, KOP_EINVAL, "kop_config_load: out is NULL");
    *out = NULL;
    if (opts && opts->kubeconfig && opts->kubeconfig[0])
        err = load_file(&set, opts->kubeconfig, false, NULL, st);
    else if (env && env[0])
        err = load_env_list(&set, env, st);
    else if (!(err = home_config(&home, st)))
        err = load_file(&set, home, false, NULL, st);
    if (!err)
        err = select_context(&set, opts, out, st);
    kop__kc_set_fini(&set);
    free(home);
    return err;
}

kop_err kop_config_parse(const char *yaml, size_t len, const char *origin,
                         const kop_config_opts *opts, kop_config **out, kop_status *st)
{
    kop__kc_set set;
    kop_err err;
    memset(&set, 0, sizeof set);
    kop_status_clear(st);
    if (!out || (!yaml && len))
        return fail(st, KOP_EINVAL, "kop_config_parse: invalid arguments");
    *out = NULL;
    if (len > KOP__KUBECONFIG_MAX)
        return fail(st, KOP_ETOOBIG, "%s: larger than the %zu MiB cap",
                    origin ? origin : MEMORY_ORIGIN, KOP__KUBECONFIG_MAX >> 20);
    err = kop__kc_parse(&set, yaml ? yaml : "", len, origin, st);
    if (!err)
        err = select_context(&set, opts, out, st);
    kop__kc_set_fini(&set);
    return err;
}

/* in_cluster_path returns DIR/name, newly allocated. */
static char *in_cluster_path(const char *dir, const char *name)
{
    return kop__path_join(dir, name);
}

/* in_cluster_ns finds a pod's namespace: $POD_NAMESPACE (set through the
 * downward API), else the service account's namespace file, else
 * "default", as client-go's in-cluster loader does. Newly allocated. */
static char *in_cluster_ns(const char *dir)
{
    const char *env = getenv("POD_NAMESPACE");
    char *path = NULL, *ns = NULL;
    kop_buf b;
    int eno = 0;
    kop_buf_init(&b, 256);
    if (env && env[0])
        return strdup(env);
    if ((path = in_cluster_path(dir, "namespace")) && !kop__config_read_file(path, 256, &b, &eno) &&
        kop__config_trim_space(b.data, b.len) > 0)
        ns = strdup(b.data);
    else
        ns = strdup("default");
    kop_buf_fini(&b);
    free(path);
    return ns;
}

kop_err kop_config_in_cluster(const kop_config_opts *opts, kop_config **out, kop_status *st)
{
    const char *host = getenv("KUBERNETES_SERVICE_HOST");
    const char *port = getenv("KUBERNETES_SERVICE_PORT");
    const char *dir =
        opts && opts->service_account_dir ? opts->service_account_dir : DEFAULT_SA_DIR;
    kop_config *cfg = NULL;
    char *ca_path = NULL, *token_path = NULL;
    kop_buf b;
    int eno = 0;
    kop_err err = KOP_OK;
    kop_buf_init(&b, KOP__PEM_MAX);
    kop_status_clear(st);
    if (!out)
        return fail(st, KOP_EINVAL, "kop_config_in_cluster: out is NULL");
    *out = NULL;
    if (!host || !host[0] || !port || !port[0])
        return fail(st, KOP_ECONFIG,
                    "not running in a cluster: KUBERNETES_SERVICE_HOST and "
                    "KUBERNETES_SERVICE_PORT must be set");
    if (strspn(port, "0123456789") != strlen(port) || strlen(port) > 5 ||
        strpbrk(host, "/[]@ \t\r\n"))
        return fail(st, KOP_ECONFIG,
                    "KUBERNETES_SERVICE_HOST=%.100s KUBERNETES_SERVICE_PORT=%.20s: not a host and "
                    "port",
                    host, port);
    if (!(cfg = config_new())) {
        err = KOP_ENOMEM;
        goto out;
    }
    bool v6 = strchr(host, ':') != NULL; /* an IPv6 address goes in brackets */
    if (asprintf(&cfg->server, "https://%s%s%s:%s", v6 ? "[" : "", host, v6 ? "]" : "", port) < 0)
        cfg->server = NULL;
    if (asprintf(&cfg->user_where, "in-cluster service account %s", dir) < 0)
        cfg->user_where = NULL;
    cfg->context = strdup("");
    cfg->ns = in_cluster_ns(dir);
    ca_path = in_cluster_path(dir, "ca.crt");
    token_path = in_cluster_path(dir, "token");
    if (!cfg->server || !cfg->user_where || !cfg->context || !cfg->ns || !ca_path ||
        !token_path) {
        err = KOP_ENOMEM;
        goto out;
    }
    /* A missing CA is an error rather than a silent fall back to the system
     * roots, which would never verify the apiserver's certificate. */
    if ((err = kop__config_read_file(ca_path, KOP__PEM_MAX, &b, &eno))) {
        err = kop__config_file_fail(st, err, eno, "in-cluster CA", ca_path, KOP__PEM_MAX);
        goto out;
    }
    if (!(cfg->ca = kop_buf_take(&b, &cfg->ca_len))) {
        err = KOP_ENOMEM;
        goto out;
    }
    err = kop__wfile_set(cfg, &cfg->token_file, &token_path, "token", KOP__TOKEN_MAX, true, st);
out:
    free(ca_path);
    free(token_path);
    kop_buf_fini(&b);
    if (err) {
        kop_config_free(cfg);
        cfg = NULL;
    }
    *out = cfg;
    return err;
}

kop_err kop_config_auto(const kop_config_opts *opts, kop_config **out, kop_status *st)
{
    const char *env = getenv("KUBECONFIG");
    char *home = NULL;
    struct stat sb;
    kop_err err;
    if ((opts && opts->kubeconfig && opts->kubeconfig[0]) || (env && env[0]))
        return kop_config_load(opts, out, st);
    kop_status_clear(st);
    /* ~/.kube/config if it is there (an unreadable one is reported by
     * kop_config_load), else the pod's service account. */
    if (home_config(&home, NULL) == KOP_OK && (stat(home, &sb) == 0 || errno != ENOENT))
        err = kop_config_load(opts, out, st);
    else
        err = kop_config_in_cluster(opts, out, st);
    free(home);
    return err;
}

/* ---- accessors ---------------------------------------------------------- */

const char *kop_config_server(const kop_config *cfg)
{
    return cfg->server;
}

const char *kop_config_namespace(const kop_config *cfg)
{
    return cfg->ns;
}

const char *kop_config_context(const kop_config *cfg)
{
    return cfg->context;
}

bool kop_config_insecure(const kop_config *cfg)
{
    return cfg->insecure;
}

const char *kop_config_tls_server_name(const kop_config *cfg)
{
    return cfg->tls_server_name;
}

const char *kop_config_ca_pem(const kop_config *cfg, size_t *len)
{
    if (len)
        *len = cfg->ca ? cfg->ca_len : 0;
    return cfg->ca;
}
