/*
 * it_common.h - what every integration test needs: a client for the
 * devcluster the ctest fixture started (KOP_DEVCLUSTER_DIR), and a
 * namespace of its own so that tests never see each other's objects.
 */
#ifndef KOP_IT_COMMON_H
#define KOP_IT_COMMON_H

#include <stddef.h>

#include "kop/kop.h"

typedef struct it_env {
    const char *dir;    /* the cluster's directory (kubeconfig, ca.crt, admin.token) */
    kop_config *cfg;    /* its admin kubeconfig */
    kop_client *client;
    char ns[64];        /* this run's namespace */
} it_env;

/*
 * it_setup connects to the fixture's cluster and creates a namespace named
 * prefix-<time>-<pid>. Returns 0, or -1 after saying why on stderr: a
 * missing cluster fails the test, it never skips it.
 */
int it_setup(it_env *env, const char *prefix);

/* it_teardown deletes the namespace and frees the client and config. */
void it_teardown(it_env *env);

/* it_path writes DIR/file into out. */
void it_path(const it_env *env, const char *file, char *out, size_t size);

#endif /* KOP_IT_COMMON_H */
