/*
 * kop/config.h - where the apiserver is and how to authenticate to it:
 * kubeconfig files and in-cluster service-account configuration.
 *
 * A kop_config is one resolved context: a server URL, the TLS settings of
 * its cluster, a default namespace, and the credentials of its user. It
 * behaves like client-go's clientcmd, so an operator given the kubeconfig
 * that works for kubectl works the same way:
 *
 *   - $KUBECONFIG is a ':'-separated list of files merged in order. Missing
 *     files are skipped; for clusters, users and contexts the first file
 *     that defines a name wins, and current-context comes from the first
 *     file that sets it. Without $KUBECONFIG, ~/.kube/config is read.
 *   - Relative paths in a file (certificate-authority, client-certificate,
 *     client-key, tokenFile, and an exec command containing '/') are
 *     resolved against the directory of the file that defined them. '~' is
 *     not expanded anywhere, as in kubectl.
 *   - For the CA, the client certificate and the client key, the inline
 *     *-data form wins over the file form when both are given.
 *
 * The static part of a kop_config (server, CA, TLS settings, namespace) is
 * fixed when it is made and may be read from any thread without locking.
 * Credentials can change while the process runs (token files are rotated,
 * exec plugins hand out short-lived tokens), so they are fetched through
 * kop_config_credentials, which is thread-safe and caches what it can.
 *
 * Every fallible function returns a kop_err and explains a failure in the
 * caller's kop_status (st may be NULL), naming the file and the field at
 * fault; nothing is printed.
 */
#ifndef KOP_CONFIG_H
#define KOP_CONFIG_H

#include <stdbool.h>
#include <stddef.h>

#include "kop/common.h"
#include "kop/err.h"

KOP_BEGIN_DECLS

/* Opaque; the same typedef as in kop/client.h. */
typedef struct kop_config kop_config;

/*
 * kop_config_opts selects what to load. All fields are optional: a zeroed
 * struct (or a NULL pointer) means "what kubectl would use". Strings are
 * borrowed for the duration of the call.
 */
typedef struct kop_config_opts {
    /* An explicit kubeconfig path, which must exist. NULL or "": $KUBECONFIG,
     * else ~/.kube/config. */
    const char *kubeconfig;
    /* The context to use. NULL or "": the file's current-context. */
    const char *context;
    /* Directory holding the in-cluster files ca.crt, token and namespace.
     * NULL: /var/run/secrets/kubernetes.io/serviceaccount. */
    const char *service_account_dir;
    /* Parse and validate only: read no file the kubeconfig names and run no
     * exec plugin. kop_config_ca_pem then returns only inline data, and
     * kop_config_credentials fails with KOP_EINVAL for credentials that
     * need a file or a plugin. Meant for fuzzing and for linting. */
    bool parse_only;
} kop_config_opts;

/*
 * kop_config_load reads the kubeconfig named by opts->kubeconfig, else the
 * files listed in $KUBECONFIG (merged), else ~/.kube/config, and resolves
 * the selected context. On success *out is a new config the caller frees
 * with kop_config_free; on failure *out is NULL.
 */
KOP_API KOP_NODISCARD kop_err kop_config_load(const kop_config_opts *opts, kop_config **out,
                                              kop_status *st);

/*
 * kop_config_parse resolves one kubeconfig document held in memory (yaml,
 * len bytes, need not be NUL-terminated). origin names it in error messages
 * and its directory anchors relative paths; NULL means "<memory>" with
 * paths relative to the working directory. opts->kubeconfig is ignored.
 * On success *out is a new config the caller frees with kop_config_free.
 */
KOP_API KOP_NODISCARD kop_err kop_config_parse(const char *yaml, size_t len, const char *origin,
                                               const kop_config_opts *opts, kop_config **out,
                                               kop_status *st);

/*
 * kop_config_in_cluster builds the configuration of a pod: the server from
 * KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT (an IPv6 host is
 * bracketed), the CA from ca.crt, the token from the token file (re-read
 * when it is rotated), and the namespace from $POD_NAMESPACE, else the
 * namespace file, else "default". Outside a cluster it fails with
 * KOP_ECONFIG. On success *out is a new config freed with kop_config_free.
 */
KOP_API KOP_NODISCARD kop_err kop_config_in_cluster(const kop_config_opts *opts,
                                                    kop_config **out, kop_status *st);

/*
 * kop_config_auto does what an operator's --kubeconfig flag does: the file
 * opts->kubeconfig if given, else $KUBECONFIG if set, else ~/.kube/config if
 * it exists, else the in-cluster configuration. On success *out is a new
 * config freed with kop_config_free.
 */
KOP_API KOP_NODISCARD kop_err kop_config_auto(const kop_config_opts *opts, kop_config **out,
                                              kop_status *st);

/* kop_config_free releases cfg and everything it owns. cfg may be NULL. */
KOP_API void kop_config_free(kop_config *cfg);

/* kop_config_server returns the server URL without a trailing '/', e.g.
 * "https://127.0.0.1:6443". Borrowed: valid until kop_config_free. */
KOP_API const char *kop_config_server(const kop_config *cfg);

/* kop_config_namespace returns the context's namespace, "default" when it
 * names none. Borrowed. */
KOP_API const char *kop_config_namespace(const kop_config *cfg);

/* kop_config_context returns the name of the context in use, "" for an
 * in-cluster configuration. Borrowed. */
KOP_API const char *kop_config_context(const kop_config *cfg);

/* kop_config_insecure returns true only when the cluster entry sets
 * insecure-skip-tls-verify: true. */
KOP_API bool kop_config_insecure(const kop_config *cfg);

/* kop_config_tls_server_name returns the cluster's tls-server-name, or NULL
 * when it sets none. Borrowed. */
KOP_API const char *kop_config_tls_server_name(const kop_config *cfg);

/*
 * kop_config_ca_pem returns the PEM bytes of the cluster's CA (from
 * certificate-authority-data or the certificate-authority file, or ca.crt in
 * a cluster) and stores their length in *len (len may be NULL). Returns NULL
 * when no CA is configured: verify against the system roots then. Borrowed;
 * the bytes are also NUL-terminated.
 */
KOP_API const char *kop_config_ca_pem(const kop_config *cfg, size_t *len);

/*
 * kop_credentials is caller storage for one snapshot of the credentials.
 * Every member is owned by the struct (released by kop_credentials_fini) and
 * any of them may be NULL. The PEM buffers are NUL-terminated as well.
 */
typedef struct kop_credentials {
    char *token;    /* bearer token */
    char *cert_pem; /* client certificate chain */
    char *key_pem;  /* client private key */
    size_t cert_len, key_len;
} kop_credentials;

/*
 * kop_config_credentials fills *out with copies of the current credentials:
 * the static token; a token file re-read when its identity (inode, size,
 * mtime) changed, looked at no more than once a second; the client
 * certificate and key; and an exec plugin's output, cached until 10 s before
 * its expirationTimestamp (for the process lifetime if it has none). A user
 * with no credentials gives an all-NULL *out. Thread-safe; while a plugin
 * runs (at most 30 s), other callers wait for its answer. On success the
 * caller owns *out and releases it with kop_credentials_fini; on failure
 * *out is left empty.
 */
KOP_API KOP_NODISCARD kop_err kop_config_credentials(kop_config *cfg, kop_credentials *out,
                                                     kop_status *st);

/* kop_credentials_fini frees the members of c and empties it. c may be NULL. */
KOP_API void kop_credentials_fini(kop_credentials *c);

/*
 * kop_config_invalidate_credentials drops what is cached, for use after the
 * server answered 401: the next kop_config_credentials re-reads token and
 * certificate files at once and re-runs the exec plugin. Thread-safe.
 */
KOP_API void kop_config_invalidate_credentials(kop_config *cfg);

KOP_END_DECLS

#endif /* KOP_CONFIG_H */
