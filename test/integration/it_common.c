/*
 * it_common.c - connection and namespace set-up shared by the integration
 * tests (see it_common.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "it_common.h"

static const kop_resource NAMESPACES = {"", "v1", "namespaces", "Namespace", false};

void it_path(const it_env *env, const char *file, char *out, size_t size)
{
    snprintf(out, size, "%s/%s", env->dir, file);
}

int it_setup(it_env *env, const char *prefix)
{
    char kubeconfig[1024];
    kop_status st;
    memset(env, 0, sizeof *env);
    env->dir = getenv("KOP_DEVCLUSTER_DIR");
    if (!env->dir) {
        fprintf(stderr, "KOP_DEVCLUSTER_DIR is not set: run through ctest\n");
        return -1;
    }
    it_path(env, "kubeconfig", kubeconfig, sizeof kubeconfig);
    kop_err err = kop_config_load(&(kop_config_opts){.kubeconfig = kubeconfig}, &env->cfg, &st);
    if (!err)
        err = kop_client_new(env->cfg, NULL, &env->client, &st);
    if (err) {
        fprintf(stderr, "client for %s: %s: %s\n", kubeconfig, kop_err_name(err), st.message);
        return -1;
    }
    snprintf(env->ns, sizeof env->ns, "%s-%ld-%d", prefix, (long)time(NULL) % 100000,
             (int)getpid());
    json_t *obj = json_pack("{s:s, s:s, s:{s:s}}", "apiVersion", "v1", "kind", "Namespace",
                            "metadata", "name", env->ns);
    err = kop_create_object(env->client,
                            &(kop_write_req){.target = {&NAMESPACES, NULL, NULL}, .object = obj},
                            NULL, &st);
    json_decref(obj);
    if (err) {
        fprintf(stderr, "create namespace %s: %s: %s\n", env->ns, kop_err_name(err), st.message);
        return -1;
    }
    return 0;
}

void it_teardown(it_env *env)
{
    kop_status st;
    if (env->client && env->ns[0] &&
        kop_delete_object(env->client, &(kop_delete_req){.target = {&NAMESPACES, NULL, env->ns}},
                          NULL, &st) != KOP_OK)
        fprintf(stderr, "delete namespace %s: %s\n", env->ns, st.message);
    kop_client_free(env->client);
    kop_config_free(env->cfg);
    memset(env, 0, sizeof *env);
}
