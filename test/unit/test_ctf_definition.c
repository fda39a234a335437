/*
 * test_ctf_definition.c - a ChallengeDefinition's checks (operators/ctf/
 * core/definition.c): the sample definitions and a minimal one pass; each of
 * a table of broken ones (one mutation of a valid definition a row) is
 * refused with InvalidDefinition and a one-sentence message naming the
 * field, and the instance builder refuses it the same way.
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
#include "core/definition.h"
#include "core/instance.h"

static void test_validate_samples(void **state)
{
    (void)state;
    const char *defs[] = {DEF_TCP, DEF_HTTP, DEF_TWO};
    for (size_t i = 0; i < LEN(defs); i++) {
        json_t *def = parse(defs[i]);
        kop_status st;
        kop_err err = ctf_validate_definition(def, &st);
        if (err)
            fail_msg("sample %zu refused: %s", i, st.message);
        assert_string_equal(st.message, "");
        json_decref(def);
    }
    /* Minimal: no expose, no flag, no lifetime; and containers that declare no ports. */
    json_t *def = parse("{'spec':{'pods':[{'name':'a','template':{'containers':[{'name':'a',"
                        "'image':'x'}]}}],'expose':[{'name':'a','pod':'a','port':9}]}}");
    assert_int_equal(ctf_validate_definition(def, NULL), KOP_OK);
    json_decref(def);
}

struct bad_case {
    const char *path;  /* in DEF_TWO */
    const char *value; /* JSON, NULL: remove */
    const char *msg;   /* must appear in st.message */
};

static const struct bad_case bad_cases[] = {
    {"spec", NULL, "no spec"},
    {"spec.pods", NULL, "spec.pods must list 1 to 10"},
    {"spec.pods", "[]", "spec.pods must list 1 to 10"},
    {"spec.pods.1.name", "'web'", "spec.pods[1].name \"web\" is used twice"},
    {"spec.pods.0.name", "'Web_1'", "spec.pods[0].name is missing or not a DNS label"},
    {"spec.pods.1.replicas", "9", "spec.pods[1].replicas must be 1 to 5"},
    {"spec.pods.1.template", NULL, "spec.pods[1].template is missing"},
    {"spec.pods.1.template.containers", "[]", "spec.pods[1].template.containers must list"},
    {"spec.pods.0.template.containers.1.image", NULL,
     "spec.pods[0].template.containers[1] (proxy) has no image"},
    {"spec.pods.0.template.containers.1.name", NULL,
     "spec.pods[0].template.containers[1].name is missing"},
    {"spec.pods.0.template.containers.1.name", "'init'", "used by two containers"},
    {"spec.pods.0.template.initContainers.0.image", "''",
     "spec.pods[0].template.initContainers[0] (init) has no image"},
    {"spec.pods.0.template.hostNetwork", "true", "sets hostNetwork"},
    {"spec.pods.1.template.hostPID", "true", "sets hostPID"},
    {"spec.pods.1.template.hostIPC", "true", "sets hostIPC"},
    {"spec.pods.0.template.volumes.0", "{'name':'host','hostPath':{'path':'/'}}",
     "volumes[0] uses hostPath"},
    {"spec.pods.0.template.volumes.0", "{'name':'flag','emptyDir':{}}",
     "is named \"flag\", which is reserved"},
    {"spec.pods.0.template.containers.1.volumeMounts.0.mountPath", "'/flag'",
     "mounts a volume at /flag"},
    {"spec.pods.0.template.containers.0.ports.0.hostPort", "80",
     "containers[0].ports[0] sets hostPort"},
    {"spec.pods.1.template.containers.0.securityContext.privileged", "true",
     "spec.pods[1].template.containers[0] asks to be privileged"},
    {"spec.pods.0.template.containers.0.securityContext.capabilities.add",
     "['NET_BIND_SERVICE','SYS_ADMIN']", "adds capability SYS_ADMIN"},
    {"spec.pods.1.template.securityContext.runAsUser", "0",
     "spec.pods[1].template sets runAsUser 0"},
    {"spec.pods.0.template.initContainers.0.securityContext.runAsUser", "0",
     "initContainers[0] sets runAsUser 0"},
    {"spec.expose.1.pod", "'nope'", "spec.expose[1] (admin) names pod \"nope\""},
    {"spec.expose.2.name", "'web'", "spec.expose[2].name \"web\" is used twice"},
    {"spec.expose.0.name", "'1web'", "spec.expose[0].name is missing or not a DNS label"},
    {"spec.expose.0.port", "0", "spec.expose[0].port must be 1 to 65535"},
    {"spec.expose.0.port", "70000", "spec.expose[0].port must be 1 to 65535"},
    {"spec.expose.0.port", "8081", "exposes port 8081, which no container of pod web declares"},
    {"spec.expose.0.type", "'UDP'", "spec.expose[0].type must be HTTP or TCP"},
    {"spec.flag", "{'static':'a','dynamic':{'secretRef':{'name':'k'}}}", "both static and dynamic"},
    {"spec.flag.static", "''", "spec.flag.static must be a non-empty string"},
    {"spec.flag", "{'dynamic':{}}", "spec.flag.dynamic.secretRef.name"},
    {"spec.flag", "{'dynamic':{'secretRef':{'name':'k'},'prefix':3}}", "prefix must be a string"},
    {"spec.lifetime", "{'default':'3h'}", "spec.lifetime.default is longer than"},
    {"spec.lifetime", "{'max':'forever'}", "spec.lifetime.max \"forever\" is not a duration"},
    {"spec.lifetime", "{'renewBy':'0s'}", "spec.lifetime.renewBy must be longer than zero"},
    {"spec.startTimeout", "'5'", "spec.startTimeout \"5\" is not a duration"},
    {"spec.network", "{'egress':'Everything'}", "spec.network.egress must be None or Internet"},
    {"spec.security", "{'readOnlyRootFilesystem':'yes'}", "readOnlyRootFilesystem must be"},
    {"spec.security", "{'runtimeClassName':'G Visor'}", "runtimeClassName must name"},
    {"spec.resources", "{'cpu':'lots'}", "spec.resources.cpu must be a positive quantity"},
    {"spec.resources", "{'memory':'0'}", "spec.resources.memory must be a positive quantity"},
};

static void test_validate_refuses(void **state)
{
    (void)state;
    for (size_t i = 0; i < LEN(bad_cases); i++) {
        const struct bad_case *c = &bad_cases[i];
        json_t *def = parse(DEF_TWO);
        kop_status st;
        mutate(def, c->path, c->value);
        kop_err err = ctf_validate_definition(def, &st);
        if (err != KOP_EINVAL)
            fail_msg("case %zu (%s): %s, want KOP_EINVAL", i, c->path, kop_err_name(err));
        if (!strstr(st.message, c->msg))
            fail_msg("case %zu (%s): message \"%s\" lacks \"%s\"", i, c->path, st.message, c->msg);
        assert_string_equal(st.reason, CTF_REASON_INVALID_DEFINITION);
        /* One sentence. */
        assert_int_equal(st.message[strlen(st.message) - 1], '.');
        /* The builder refuses it the same way. */
        json_t *chal = challenge_for("shop"), *out = NULL;
        assert_int_equal(ctf_build_children(&NODEPORT_CFG, def, chal, "f", &out, &st),
                         KOP_EINVAL);
        assert_null(out);
        json_decref(chal);
        json_decref(def);
    }
    /* Good quantities pass. */
    static const char *const quantities[] = {"'500m'", "'1.5Gi'", "'2'", "3", "'1e3'", "'128M'"};
    for (size_t i = 0; i < LEN(quantities); i++) {
        json_t *def = parse(DEF_TWO);
        mutate(def, "spec.resources.cpu", quantities[i]);
        assert_int_equal(ctf_validate_definition(def, NULL), KOP_OK);
        json_decref(def);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_validate_samples),
        cmocka_unit_test(test_validate_refuses),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
