/*
 * test_ctf_pod.c - what the operator does to every pod template (operators/
 * ctf/core/pod.c): the hardening of pods and containers, seen in built
 * instances and on ctf_harden_pod_spec alone (exact, idempotent, the flag
 * delivered once), and the default readiness probes on the exposed or first
 * declared port, a definition's own probe kept; and the flag delivered by
 * file only, as to a warm instance.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ctf_definitions.h"
#include "core/pod.h"

/* check_container_hardened: what every container and initContainer must carry. */
static void check_container_hardened(const json_t *c, bool read_only, bool net_bind)
{
    const char *name = json_string_value(json_object_get(c, "name"));
    json_t *sc = json_object_get(c, "securityContext");
    assert_true(json_is_false(json_object_get(sc, "allowPrivilegeEscalation")));
    assert_true(json_is_false(json_object_get(sc, "privileged")));
    assert_true(json_is_true(json_object_get(sc, "runAsNonRoot")));
    if (net_bind)
        assert_json_eq(json_object_get(sc, "capabilities"),
                       "{'drop':['ALL'],'add':['NET_BIND_SERVICE']}", name);
    else
        assert_json_eq(json_object_get(sc, "capabilities"), "{'drop':['ALL']}", name);
    assert_true(read_only ? json_is_true(json_object_get(sc, "readOnlyRootFilesystem"))
                          : json_object_get(sc, "readOnlyRootFilesystem") == NULL);
    const char *sp = json_string_value(at(sc, "seccompProfile.type"));
    assert_true(sp == NULL || strcmp(sp, "RuntimeDefault") == 0);

    /* FLAG first and once, from the Secret; no literal value. */
    json_t *env = json_object_get(c, "env");
    assert_json_eq(json_array_get(env, 0),
                   "{'name':'FLAG','valueFrom':{'secretKeyRef':{'name':'flag','key':'flag'}}}",
                   "env FLAG");
    size_t i, flags = 0;
    json_t *e;
    json_array_foreach(env, i, e)
    {
        flags += strcmp(json_string_value(json_object_get(e, "name")), "FLAG") == 0;
    }
    assert_int_equal(flags, 1);
    json_t *mounts = json_object_get(c, "volumeMounts");
    assert_json_eq(json_array_get(mounts, json_array_size(mounts) - 1),
                   "{'name':'flag','mountPath':'/flag','readOnly':true}", "flag mount");
    assert_non_null(at(c, "resources.limits"));
}

/* in_list tells whether name is in the NULL-terminated list. */
static bool in_list(const char *name, const char *const *list)
{
    for (size_t i = 0; list && list[i]; i++)
        if (strcmp(name, list[i]) == 0)
            return true;
    return false;
}

/* check_pod_hardened: the pod-level hardening, then every container; net_bind names the
 * containers whose template added NET_BIND_SERVICE. */
static void check_pod_hardened(const json_t *spec, bool read_only, const char *const *net_bind)
{
    static const char *const lists[] = {"initContainers", "containers"};
    assert_true(json_is_false(json_object_get(spec, "automountServiceAccountToken")));
    assert_true(json_is_false(json_object_get(spec, "enableServiceLinks")));
    assert_true(json_is_true(at(spec, "securityContext.runAsNonRoot")));
    assert_string_equal(json_string_value(at(spec, "securityContext.seccompProfile.type")),
                        "RuntimeDefault");
    assert_null(json_object_get(spec, "hostNetwork"));
    json_t *vols = json_object_get(spec, "volumes");
    assert_json_eq(json_array_get(vols, json_array_size(vols) - 1),
                   "{'name':'flag','secret':{'secretName':'flag','items':[{'key':'flag',"
                   "'path':'flag'}],'defaultMode':292}}",
                   "flag volume (0444 = 292)");
    for (size_t l = 0; l < LEN(lists); l++) {
        size_t i;
        json_t *c;
        json_array_foreach(json_object_get(spec, lists[l]), i, c)
        {
            check_container_hardened(
                c, read_only, in_list(json_string_value(json_object_get(c, "name")), net_bind));
        }
    }
}

static void test_hardening(void **state)
{
    (void)state;
    json_t *kids = build(&NODEPORT_CFG, DEF_TWO, "f");
    json_t *web = at(find(kids, "Deployment", "web"), "spec.template.spec");
    json_t *db = at(find(kids, "Deployment", "db"), "spec.template.spec");
    static const char *const web_bind[] = {"init", "web", NULL};
    check_pod_hardened(web, false, web_bind);
    check_pod_hardened(db, false, NULL);
    assert_int_equal(json_array_size(json_object_get(web, "initContainers")), 1);

    /* The template's own settings survive where they are allowed. */
    assert_int_equal(json_integer_value(at(db, "securityContext.runAsUser")), 999);
    assert_int_equal(json_integer_value(at(db, "securityContext.fsGroup")), 999);
    assert_string_equal(
        json_string_value(at(db, "containers.0.securityContext.seccompProfile.type")),
        "RuntimeDefault"); /* was Unconfined */
    assert_json_eq(at(web, "containers.1.resources"),
                   "{'limits':{'cpu':'100m','memory':'32Mi'}}", "proxy resources kept");
    assert_json_eq(at(web, "containers.0.resources"),
                   "{'requests':{'cpu':'50m','memory':'64Mi'},"
                   "'limits':{'cpu':'500m','memory':'256Mi'}}",
                   "default resources");
    assert_json_eq(at(web, "containers.1.volumeMounts"),
                   "[{'name':'cache','mountPath':'/cache'},"
                   "{'name':'flag','mountPath':'/flag','readOnly':true}]",
                   "proxy mounts");
    assert_string_equal(json_string_value(at(web, "volumes.0.name")), "cache");
    assert_null(json_object_get(web, "runtimeClassName"));
    json_decref(kids);

    /* DEF_HTTP: read-only root, runtime class, the template's FLAG replaced, MODE kept. */
    kids = build(&INGRESS_CFG, DEF_HTTP, "f");
    json_t *spec = at(find(kids, "Deployment", "web"), "spec.template.spec");
    check_pod_hardened(spec, true, NULL);
    assert_string_equal(json_string_value(json_object_get(spec, "runtimeClassName")), "gvisor");
    assert_json_eq(at(spec, "containers.0.env"),
                   "[{'name':'FLAG','valueFrom':{'secretKeyRef':{'name':'flag','key':'flag'}}},"
                   "{'name':'MODE','value':'ctf'}]",
                   "env");
    json_decref(kids);
}

/* ctf_harden_pod_spec on its own: the whole result, exactly. */
static void test_harden_exact(void **state)
{
    (void)state;
    json_t *spec = parse("{'hostNetwork':false,'containers':[{'name':'a','image':'x',"
                         "'securityContext':{'allowPrivilegeEscalation':true,"
                         "'capabilities':{'add':['NET_BIND_SERVICE','NET_ADMIN']}}}]}");
    json_t *sec = parse("{'runtimeClassName':'kata'}");
    assert_int_equal(ctf_harden_pod_spec(spec, sec, false), KOP_OK);
    assert_json_eq(spec,
                   "{'automountServiceAccountToken':false,'enableServiceLinks':false,"
                   "'runtimeClassName':'kata',"
                   "'securityContext':{'runAsNonRoot':true,'seccompProfile':{'type':"
                   "'RuntimeDefault'}},"
                   "'containers':[{'name':'a','image':'x','securityContext':{"
                   "'allowPrivilegeEscalation':false,'privileged':false,'runAsNonRoot':true,"
                   "'capabilities':{'drop':['ALL'],'add':['NET_BIND_SERVICE']}},"
                   "'resources':{'requests':{'cpu':'50m','memory':'64Mi'},"
                   "'limits':{'cpu':'500m','memory':'256Mi'}}}]}",
                   "hardened without flag");
    /* Idempotent. */
    json_t *again = json_deep_copy(spec);
    assert_int_equal(ctf_harden_pod_spec(again, sec, false), KOP_OK);
    assert_true(json_equal(again, spec));
    json_decref(again);

    /* With the flag, twice: still one FLAG, one mount, one volume. */
    assert_int_equal(ctf_harden_pod_spec(spec, sec, true), KOP_OK);
    assert_int_equal(ctf_harden_pod_spec(spec, sec, true), KOP_OK);
    assert_int_equal(json_array_size(at(spec, "containers.0.env")), 1);
    assert_int_equal(json_array_size(at(spec, "containers.0.volumeMounts")), 1);
    assert_int_equal(json_array_size(at(spec, "volumes")), 1);
    assert_int_equal(ctf_harden_pod_spec(NULL, sec, true), KOP_EINVAL);
    json_decref(sec);
    json_decref(spec);
}

/*
 * Running means answering: a container without a readinessProbe gets a TCP
 * one on its exposed port, else on its first declared port; one the
 * definition sets is kept as it is.
 */
static void test_default_probes(void **state)
{
    (void)state;
    json_t *kids = build(&NODEPORT_CFG, DEF_TWO, "f");
    json_t *web = at(find(kids, "Deployment", "web"), "spec.template.spec.containers");
    json_t *db = at(find(kids, "Deployment", "db"), "spec.template.spec.containers");
    assert_json_eq(json_object_get(json_array_get(web, 0), "readinessProbe"),
                   "{'tcpSocket':{'port':80},'periodSeconds':1,'timeoutSeconds':1,"
                   "'failureThreshold':3}",
                   "web probe on its first exposed port");
    /* The sidecar declares no port and the exposed ones are the web container's. */
    assert_null(json_object_get(json_array_get(web, 1), "readinessProbe"));
    /* db is exposed as "admin" on 5432. */
    assert_int_equal(json_integer_value(at(json_array_get(db, 0), "readinessProbe.tcpSocket.port")),
                     5432);
    assert_null(at(find(kids, "Deployment", "web"), "spec.template.spec.initContainers.0.readinessProbe"));
    json_decref(kids);

    /* An unexposed pod is probed on its first declared port, an exposed one on
     * its exposed port even when it declares others first; a probe of the
     * definition is kept. */
    json_t *def = parse(DEF_TWO);
    json_object_set_new(json_object_get(def, "spec"), "expose",
                        parse("[{'name':'shop','pod':'web','port':2222,'type':'TCP'}]"));
    json_object_set_new(at(def, "spec.pods.0.template.containers.1"), "readinessProbe",
                        parse("{'httpGet':{'path':'/ready','port':9000}}"));
    char *text = json_dumps(def, JSON_COMPACT);
    kids = build(&NODEPORT_CFG, text, "f");
    web = at(find(kids, "Deployment", "web"), "spec.template.spec.containers");
    db = at(find(kids, "Deployment", "db"), "spec.template.spec.containers");
    assert_int_equal(json_integer_value(at(json_array_get(web, 0), "readinessProbe.tcpSocket.port")),
                     2222);
    assert_json_eq(json_object_get(json_array_get(web, 1), "readinessProbe"),
                   "{'httpGet':{'path':'/ready','port':9000}}", "the definition's own probe");
    assert_int_equal(json_integer_value(at(json_array_get(db, 0), "readinessProbe.tcpSocket.port")),
                     5432);
    free(text);
    json_decref(kids);
    json_decref(def);
}

/* ctf_harden_pod_spec with the flag by file only. */
static void test_harden_file_only(void **state)
{
    (void)state;
    json_t *spec = parse("{'containers':[{'name':'a','image':'x',"
                         "'env':[{'name':'FLAG','value':'mine'},{'name':'K','value':'v'}]}]}");
    assert_int_equal(ctf_harden_pod_spec(spec, NULL, CTF_FLAG_FILE), KOP_OK);
    json_t *c = json_array_get(json_object_get(spec, "containers"), 0);
    assert_int_equal(json_array_size(json_object_get(c, "env")), 1);
    assert_string_equal(
        json_string_value(json_object_get(json_array_get(json_object_get(c, "env"), 0), "name")),
        "K");
    json_t *m = json_array_get(json_object_get(c, "volumeMounts"), 0);
    assert_string_equal(json_string_value(json_object_get(m, "mountPath")), CTF_FLAG_MOUNT_PATH);
    assert_int_equal(json_array_size(json_object_get(spec, "volumes")), 1);
    json_decref(spec);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hardening),
        cmocka_unit_test(test_harden_exact),
        cmocka_unit_test(test_default_probes),
        cmocka_unit_test(test_harden_file_only),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
