/*
 * test_ctf_instance_warm.c - the instance builder for a warm pool (operators/
 * ctf/core/instance.c, ctf_build_pooled_children): the objects of a warm
 * instance before and after a team claims it (nothing but the Namespace and
 * the flag changes, and a warm instance never holds a team's flag), a static
 * flag, and what it refuses.
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
#include "core/instance.h"

static json_t *pooled(const char *def_text, const char *chal_text, const char *flag)
{
    json_t *def = parse(def_text), *chal = chal_text ? parse(chal_text) : NULL, *out = NULL;
    kop_status st;
    kop_err err = ctf_build_pooled_children(&NODEPORT_CFG, def, ID, chal, flag, &out, &st);
    if (err)
        fail_msg("build: %s: %s", kop_strerror(err), st.message);
    json_decref(def);
    json_decref(chal);
    return out;
}

/* env_has_flag: some container of the Deployment has an env FLAG. */
static bool env_has_flag(const json_t *deploy)
{
    const json_t *containers = json_object_get(
        json_object_get(json_object_get(json_object_get(deploy, "spec"), "template"), "spec"),
        "containers");
    size_t i, j;
    json_t *c, *e;
    json_array_foreach(containers, i, c)
    {
        json_array_foreach(json_object_get(c, "env"), j, e)
        {
            if (kop_streq(json_string_value(json_object_get(e, "name")), "FLAG"))
                return true;
        }
    }
    return false;
}

static void test_warm_children(void **state)
{
    (void)state;
    json_t *warm = pooled(DEF_WEB, NULL, "");
    json_t *o;
    size_t i;
    json_t *want =
        parse("{'app.kubernetes.io/managed-by':'kopc-ctf','ctf.kopc.io/definition':'web',"
              "'ctf.kopc.io/pool':'0123456789','ctf.kopc.io/pool-namespace':'ctf'}");
    json_array_foreach(warm, i, o)
    {
        json_t *labels = json_deep_copy(json_object_get(json_object_get(o, "metadata"), "labels"));
        json_object_del(labels, "pod-security.kubernetes.io/enforce");
        json_object_del(labels, "pod-security.kubernetes.io/enforce-version");
        json_object_del(labels, CTF_LABEL_POD);
        if (!json_equal(labels, want))
            fail_msg("%s %s: labels not the pool's", json_string_value(json_object_get(o, "kind")),
                     kop_meta_name(o));
        json_decref(labels);
        if (strcmp(json_string_value(json_object_get(o, "kind")), "Namespace") != 0)
            assert_string_equal(kop_meta_namespace(o), "ctf-web-28de6c9ef70b");
    }
    json_t *ns = child_of(warm, "Namespace", "ctf-web-28de6c9ef70b");
    assert_non_null(ns);
    assert_null(kop_meta_annotation(ns, CTF_ANNOTATION_CHALLENGE_UID));
    /* The flag by file only, empty: no env FLAG at all, the template's own removed too. */
    json_t *deploy = child_of(warm, "Deployment", "web");
    assert_non_null(deploy);
    assert_false(env_has_flag(deploy));
    json_t *c = json_array_get(
        json_object_get(
            json_object_get(json_object_get(json_object_get(deploy, "spec"), "template"), "spec"),
            "containers"),
        0);
    json_t *mount = json_array_get(json_object_get(c, "volumeMounts"), 0);
    assert_string_equal(json_string_value(json_object_get(mount, "mountPath")),
                        CTF_FLAG_MOUNT_PATH);
    json_t *secret = child_of(warm, "Secret", "flag");
    assert_string_equal(json_string_value(json_object_get(json_object_get(secret, "data"), "flag")),
                        "");
    json_decref(want);
    json_decref(warm);
}

static void test_claimed_children(void **state)
{
    (void)state;
    json_t *warm = pooled(DEF_WEB, NULL, "");
    json_t *claimed = pooled(DEF_WEB, CHAL_WEB, "flag{team1}");
    json_t *o;
    size_t i;
    assert_int_equal(json_array_size(warm), json_array_size(claimed));
    json_array_foreach(claimed, i, o)
    {
        const char *kind = json_string_value(json_object_get(o, "kind"));
        json_t *before = child_of(warm, kind, kop_meta_name(o));
        assert_non_null(before);
        if (strcmp(kind, "Namespace") == 0 || strcmp(kind, "Secret") == 0)
            continue;
        /* Everything else the same: claiming restarts nothing. */
        if (!json_equal(o, before))
            fail_msg("%s %s changes when claimed", kind, kop_meta_name(o));
    }
    json_t *ns = child_of(claimed, "Namespace", "ctf-web-28de6c9ef70b");
    assert_string_equal(kop_meta_label(ns, CTF_LABEL_TEAM), "team1");
    assert_string_equal(kop_meta_label(ns, CTF_LABEL_CHALLENGE), "web-team1");
    assert_string_equal(kop_meta_label(ns, CTF_LABEL_CHALLENGE_NS), "ctf");
    assert_string_equal(kop_meta_label(ns, CTF_LABEL_POOL), ID);
    assert_string_equal(kop_meta_label(ns, "pod-security.kubernetes.io/enforce"), "restricted");
    assert_string_equal(kop_meta_annotation(ns, CTF_ANNOTATION_CHALLENGE_UID), "uid-1");
    /* base64("flag{team1}") = ZmxhZ3t0ZWFtMX0= */
    json_t *secret = child_of(claimed, "Secret", "flag");
    assert_string_equal(json_string_value(json_object_get(json_object_get(secret, "data"), "flag")),
                        "ZmxhZ3t0ZWFtMX0=");
    json_decref(warm);
    json_decref(claimed);
}

static void test_static_flag(void **state)
{
    (void)state;
    json_t *warm = pooled(DEF_NC, NULL, "flag{same_for_all}");
    assert_true(env_has_flag(child_of(warm, "Deployment", "app"))); /* static: env and file */
    json_decref(warm);
    json_t *none = pooled(DEF_NC, NULL, NULL);
    assert_false(env_has_flag(child_of(none, "Deployment", "app")));
    assert_null(child_of(none, "Secret", "flag"));
    json_decref(none);
}

static void test_refused(void **state)
{
    (void)state;
    json_t *def = parse(DEF_WEB), *out = NULL;
    kop_status st;
    assert_int_equal(
        ctf_build_pooled_children(&NODEPORT_CFG, def, "nothex!!!!", NULL, "", &out, &st),
        KOP_EINVAL);
    assert_null(out);
    json_t *bad_chal = parse("{'metadata':{'name':'x','namespace':'ctf'},'spec':{}}");
    assert_int_equal(ctf_build_pooled_children(&NODEPORT_CFG, def, ID, bad_chal, "", &out, &st),
                     KOP_EINVAL);
    assert_null(out);
    assert_int_equal(ctf_build_pooled_children(NULL, def, ID, NULL, "", &out, &st), KOP_EINVAL);
    json_decref(bad_chal);
    json_decref(def);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_warm_children),
        cmocka_unit_test(test_claimed_children),
        cmocka_unit_test(test_static_flag),
        cmocka_unit_test(test_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
