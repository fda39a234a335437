/*
 * config_internal.h - what the config module's four files share.
 *
 *   config_parse.c  kubeconfig text -> kop__kc_set: the merged clusters,
 *                   users and contexts of one or more documents. Pure: it
 *                   reads no file and runs nothing.
 *   config.c        the public API: finds and reads the files, selects a
 *                   context into a kop_config, in-cluster configuration.
 *   config_credentials.c  the watched credential files and the
 *                   credential cache under cfg->mu, read per request.
 *   config_exec.c   runs an exec plugin once and reads its ExecCredential;
 *                   stateless, so the cache stays in one place.
 */
#ifndef KOP_CONFIG_INTERNAL_H
#define KOP_CONFIG_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>

#include "kop/buf.h"
#include "kop/config.h"
#include "kop/err.h"

/* Caps on everything that comes from outside. */
#define KOP__KUBECONFIG_MAX  ((size_t)4 << 20)  /* one kubeconfig file */
#define KOP__KUBECONFIG_WORK ((size_t)16 << 20) /* strings copied out of one, aliases included */
#define KOP__PEM_MAX         ((size_t)1 << 20)  /* CA, certificate or key file */
#define KOP__TOKEN_MAX       ((size_t)64 << 10) /* token file */
#define KOP__EXEC_STDOUT_MAX ((size_t)1 << 20)  /* plugin output */
#define KOP__EXEC_STDERR_MAX ((size_t)4 << 10)  /* plugin diagnostics kept for errors */
#define KOP__EXEC_TIMEOUT_MS 30000
#define KOP__EXEC_REFRESH_S  10 /* re-run this long before the credential expires */

#define KOP__EXEC_V1      "client.authentication.k8s.io/v1"
#define KOP__EXEC_V1BETA1 "client.authentication.k8s.io/v1beta1"

typedef struct kop__exec_spec kop__exec_spec;

/* ---- kubeconfig documents (config_parse.c) ---------------------------------- */

/*
 * The entries of a parsed kubeconfig, as written, except that relative
 * paths are already absolute and *-data is already decoded. Every entry
 * starts with its name and the file that defined it (owned by the set's
 * origins). All other strings are owned and may be NULL when absent.
 */
typedef struct kop__kc_cluster {
    char *name;
    const char *origin; /* file that defined it; owned by the set */
    char *server;
    char *ca_file; /* absolute */
    char *ca_data; /* decoded */
    size_t ca_len;
    char *tls_server_name;
    bool insecure;
} kop__kc_cluster;

typedef struct kop__kc_user {
    char *name;
    const char *origin;
    char *token;
    char *token_file;
    char *cert_file;
    char *cert_data;
    size_t cert_len;
    char *key_file;
    char *key_data;
    size_t key_len;
    kop__exec_spec *exec;
    char *exec_interactive; /* interactiveMode as written, validated at select */
    bool basic_auth, auth_provider, impersonate;
} kop__kc_user;

typedef struct kop__kc_context {
    char *name;
    const char *origin;
    char *cluster;
    char *user;
    char *ns;
} kop__kc_context;

typedef struct kop__kc_set {
    kop__kc_cluster *clusters;
    kop__kc_user *users;
    kop__kc_context *contexts;
    size_t nclusters, nusers, ncontexts;
    size_t capclusters, capusers, capcontexts;
    char *current; /* current-context of the first file that set one */
    char **origins; /* every file parsed, in order */
    size_t norigins;
} kop__kc_set;

typedef enum kop__kc_kind { KOP__KC_CLUSTER, KOP__KC_USER, KOP__KC_CONTEXT } kop__kc_kind;

/*
 * kop__kc_parse parses one document (len bytes of yaml) named origin (NULL:
 * "<memory>", paths relative to the working directory) and merges it into
 * set, which must be zeroed before the first call: for each name the first
 * document wins, and so does the first current-context. Errors name origin
 * and the field; KOP_EPARSE for bad YAML, KOP_ECONFIG for bad content,
 * KOP_ETOOBIG past the caps.
 */
KOP_NODISCARD kop_err kop__kc_parse(kop__kc_set *set, const char *yaml, size_t len,
                                    const char *origin, kop_status *st);

/* kop__kc_find returns the index of the entry of kind named name in set, or
 * the number of such entries when there is none. */
size_t kop__kc_find(const kop__kc_set *set, kop__kc_kind kind, const char *name);

/* kop__kc_set_fini frees everything set holds and zeroes it. */
void kop__kc_set_fini(kop__kc_set *set);

/* ---- exec plugins (config_exec.c) -------------------------------------------- */

/* kop__exec_env is one name=value the plugin gets in its environment. */
typedef struct kop__exec_env {
    char *name;
    char *value;
} kop__exec_env;

/* kop__exec_spec is a user's exec section as parsed (config.c validates it
 * before use); all strings owned. */
struct kop__exec_spec {
    char *api_version;  /* KOP__EXEC_V1 or KOP__EXEC_V1BETA1 */
    char *command;      /* absolute if it contained a '/', else looked up in $PATH */
    char **args;        /* nargs entries */
    size_t nargs;
    kop__exec_env *env; /* nenv entries */
    size_t nenv;
    char *install_hint; /* shown when the command is not found; may be NULL */
    bool provide_cluster_info;
};

/* kop__exec_cluster is what a plugin is told about the cluster when the
 * spec asks for it (provideClusterInfo). All borrowed. */
typedef struct kop__exec_cluster {
    const char *server;
    const char *tls_server_name; /* may be NULL */
    bool insecure;
    const char *ca;              /* may be NULL */
    size_t ca_len;
} kop__exec_cluster;

/* kop__exec_cred is one plugin answer; all strings owned, any may be NULL. */
typedef struct kop__exec_cred {
    char *token;
    char *cert;
    size_t cert_len;
    char *key;
    size_t key_len;
    bool has_expiry;
    time_t expiry; /* UTC, valid when has_expiry */
} kop__exec_cred;

/* ---- the resolved configuration (config.c, config_credentials.c) ------------- */

/*
 * kop__wfile is a credential file watched for rotation. data is the last good
 * contents; the identity fields are the stat taken before that read, so a
 * change racing with the read is seen at the next check.
 */
struct kop__wfile {
    char *path;        /* NULL: not used */
    const char *field; /* "tokenFile", for messages */
    size_t max;
    bool is_token;     /* trim whitespace, refuse empty */
    char *data;
    size_t len;
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtime;
    int64_t checked_ns; /* monotonic time of the last stat */
};

/* kop_config: the resolved configuration (opaque in kop/config.h). */
struct kop_config {
    char *context;
    char *server;
    char *ns;
    char *tls_server_name;
    bool insecure;
    char *ca;
    size_t ca_len;
    bool parse_only;
    char *user_where; /* "FILE: users[name=x]", prefix of credential errors */

    pthread_mutex_t mu; /* guards everything below */
    char *token;
    char *cert_data, *key_data;
    size_t cert_len, key_len;
    struct kop__wfile token_file, cert_file, key_file;
    kop__exec_spec *exec;
    kop__exec_cred exec_cred;
    bool exec_cached;
    bool invalidated;
    int exec_timeout_ms;
};

/* kop__config_read_file reads all of path into b (reset first): KOP_ETOOBIG
 * past max bytes, KOP_EIO otherwise with *eno holding errno. */
kop_err kop__config_read_file(const char *path, size_t max, kop_buf *b, int *eno);

/* kop__config_file_fail explains a kop__config_read_file failure of path, prefixed by what. */
kop_err kop__config_file_fail(kop_status *st, kop_err err, int eno, const char *what,
                              const char *path, size_t max);

/* kop__config_trim_space trims ASCII whitespace of s (len bytes) in place; returns the length. */
size_t kop__config_trim_space(char *s, size_t len);

/* kop__config_token_ok tells whether a bearer token has no control characters. */
bool kop__config_token_ok(const char *s, size_t len);

/*
 * kop__wfile_set starts watching path (taken over by f) as cfg's fieldname
 * and reads it once, unless parse_only (config_credentials.c).
 */
kop_err kop__wfile_set(kop_config *cfg, struct kop__wfile *f, char **path, const char *fieldname,
                       size_t max, bool is_token, kop_status *st);

/* kop__wfile_fini frees what f holds. */
void kop__wfile_fini(struct kop__wfile *f);

/* ---- helpers -------------------------------------------------------------- */

/* kop__is_space tells whether c is ASCII whitespace (locale-independent). */
static inline bool kop__is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f';
}

/* kop__memdup0 copies n bytes and adds a NUL. Newly allocated; NULL on ENOMEM. */
static inline char *kop__memdup0(const void *p, size_t n)
{
    char *s = malloc(n + 1);
    if (s) {
        if (n)
            memcpy(s, p, n);
        s[n] = '\0';
    }
    return s;
}

/* kop__path_join returns "dir/rel". Newly allocated; NULL on ENOMEM. */
static inline char *kop__path_join(const char *dir, const char *rel)
{
    size_t dl = strlen(dir), rl = strlen(rel);
    bool slash = dl > 0 && dir[dl - 1] == '/';
    char *s = malloc(dl + rl + 2);
    if (s)
        snprintf(s, dl + rl + 2, "%s%s%s", dir, slash ? "" : "/", rel);
    return s;
}

/* kop__config_fail records a local error (no HTTP code, no reason) with a
 * printf-style message in st (may be NULL) and returns err. */
kop_err kop__config_fail(kop_status *st, kop_err err, const char *fmt, ...) KOP_PRINTF(3, 4);

/* kop__exec_spec_free releases spec and its strings. spec may be NULL. */
void kop__exec_spec_free(kop__exec_spec *spec);

/* kop__exec_cred_fini frees the members of c and empties it. */
void kop__exec_cred_fini(kop__exec_cred *c);

/*
 * kop__exec_run runs the plugin once: stdin from /dev/null, stdout and
 * stderr captured with caps, killed (with its process group) after
 * timeout_ms. where names the kubeconfig entry in error messages. On success
 * *out holds the parsed ExecCredential (caller owns it: kop__exec_cred_fini).
 * Errors: KOP_ETIMEOUT, KOP_ETOOBIG, KOP_ECREDENTIALS (spawn failure,
 * non-zero exit, bad output), KOP_ENOMEM.
 */
KOP_NODISCARD kop_err kop__exec_run(const kop__exec_spec *spec, const kop__exec_cluster *cluster,
                                    int timeout_ms, const char *where, kop__exec_cred *out,
                                    kop_status *st);

/*
 * kop__exec_parse_output checks and decodes a plugin's stdout (len bytes):
 * an ExecCredential of api_version with a token and/or a certificate and
 * key. On success *out is filled (caller owns it). KOP_ECREDENTIALS else.
 */
KOP_NODISCARD kop_err kop__exec_parse_output(const char *json, size_t len, const char *api_version,
                                             const char *where, kop__exec_cred *out,
                                             kop_status *st);

/* kop__parse_rfc3339 parses "2024-05-01T12:00:00Z" (fraction and numeric
 * offset allowed) into UTC seconds. Returns false if s is not RFC 3339. */
bool kop__parse_rfc3339(const char *s, time_t *out);

/* kop__config_set_exec_timeout_ms is a test hook: the plugin timeout of cfg. */
void kop__config_set_exec_timeout_ms(kop_config *cfg, int timeout_ms);

#endif /* KOP_CONFIG_INTERNAL_H */
