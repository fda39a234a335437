/*
 * fuzz_ctf_definition.c - libFuzzer target for the CTF operator's
 * definition checks and instance builder (operators/ctf/core/definition.h, instance.h, pool.h,
 * update.h).
 *
 * The input is a ChallengeDefinition's spec as JSON (at most MAX_INPUT
 * bytes). It is wrapped into a definition "d" in namespace "ctf" and
 * checked with ctf_validate_definition; a valid one is built with
 * ctf_build_children for a fixed Challenge (team "t", uid "u") and a fixed
 * flag, with or without an ingress domain (by the parity of the size), and
 * its endpoints are computed from an empty list of Services. Invariants,
 * abort() on violation:
 *  - validation answers OK or EINVAL, the latter explained in st;
 *  - a valid definition always builds: Namespace first, every object named
 *    and in the instance namespace, the Secret "flag" present exactly when
 *    a flag is given and holding its base64;
 *  - the flag, raw or base64, appears in no other object (unless the input
 *    itself carries it, which is the author's doing);
 *  - every Deployment's pods are hardened (no host namespaces, no service
 *    account token, no privilege, capabilities dropped, FLAG only from the
 *    Secret);
 *  - endpoints: one per HTTP exposure with an ingress domain, none without
 *    a nodePort, complete exactly when nothing is missing.
 *  - a warm pool: spec.pool reads back within bounds, its target within
 *    [min, max]; the warm instance and the same claimed differ only in the
 *    Namespace and the flag Secret, and a dynamic flag never reaches env.
 * Everything is freed: under ASan a leak fails.
 */
#include "fuzz_check.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/instance.h"
#include "core/pool.h"
#include "core/update.h"

#define MAX_INPUT (64 * 1024)
#define FLAG      "CTF{Fuzz_7Qx!}"
#define FLAG_B64  "Q1RGe0Z1enpfN1F4IX0=" /* base64 of FLAG */
#define DOMAIN    "ctf.example.com"


static const char *str_at(const json_t *obj, const char *a, const char *b)
{
    const json_t *v = json_object_get(obj, a);
    return json_string_value(b ? json_object_get(v, b) : v);
}

static bool str_is(const char *s, const char *want)
{
    return s && strcmp(s, want) == 0;
}

/* has_env_flag: some container of the Deployment d has an env FLAG. */
static bool has_env_flag(const json_t *d)
{
    const json_t *spec =
        json_object_get(json_object_get(json_object_get(d, "spec"), "template"), "spec");
    static const char *const lists[] = {"initContainers", "containers"};
    for (size_t l = 0; l < 2; l++) {
        size_t i, j;
        json_t *c, *e;
        json_array_foreach(json_object_get(spec, lists[l]), i, c)
        {
            json_array_foreach(json_object_get(c, "env"), j, e)
            {
                const char *name = json_string_value(json_object_get(e, "name"));
                if (name && strcmp(name, "FLAG") == 0)
                    return true;
            }
        }
    }
    return false;
}

/*
 * check_pool: a valid definition's pool reads back within bounds, its
 * target stays within [min, max], and its warm instance builds twice alike
 * (warm, and claimed by the fixed Challenge) but for the Namespace and the
 * flag Secret; a dynamic flag never reaches a warm instance's env.
 */
static void check_pool(const ctf_config *cfg, const json_t *def, const json_t *challenge,
                       const char *flag, size_t size)
{
    ctf_pool_spec p;
    kop_status st;
    json_t *warm = NULL, *claimed = NULL;
    FUZZ_CHECK(ctf_pool_parse(def, &p, &st) == KOP_OK);
    FUZZ_CHECK(p.min >= 0 && p.min <= p.max && p.max <= CTF_POOL_MAX);
    int t = ctf_pool_target(&p, (int)(size % 2000));
    FUZZ_CHECK(ctf_pool_enabled(&p) ? t >= p.min && t <= p.max : t == 0);
    bool dynamic = ctf_flag_secret_ref(def, NULL, NULL);
    const char *warm_flag = flag && dynamic ? "" : flag;
    FUZZ_CHECK(ctf_build_pooled_children(cfg, def, "0a1b2c3d4e", NULL, warm_flag, &warm, &st) ==
               KOP_OK);
    FUZZ_CHECK(ctf_build_pooled_children(cfg, def, "0a1b2c3d4e", challenge, flag, &claimed, &st) ==
               KOP_OK);
    FUZZ_CHECK(json_array_size(warm) == json_array_size(claimed));
    for (size_t i = 0; i < json_array_size(warm); i++) {
        const json_t *w = json_array_get(warm, i), *c = json_array_get(claimed, i);
        const char *kind = str_at(w, "kind", NULL);
        FUZZ_CHECK(kind);
        if (strcmp(kind, "Namespace") != 0 && strcmp(kind, "Secret") != 0)
            FUZZ_CHECK(json_equal(w, c));
        if (strcmp(kind, "Deployment") == 0 && dynamic)
            FUZZ_CHECK(!has_env_flag(w) && !has_env_flag(c));
    }
    json_decref(warm);
    json_decref(claimed);
}

/*
 * check_update: a valid definition's spec.update parses; a Rolling budget
 * is at least 1 and never above the instances (a percentage) or the count;
 * its version is CTF_VERSION_LEN hex digits that a change of the title
 * does not move.
 */
static void check_update(const json_t *def, size_t size)
{
    ctf_update_spec u;
    kop_status st;
    char v[CTF_VERSION_LEN + 1], w[CTF_VERSION_LEN + 1];
    int total = (int)(size % 3000);
    FUZZ_CHECK(ctf_update_parse(def, &u, &st) == KOP_OK);
    int b = ctf_update_budget(&u, total);
    if (u.strategy == CTF_UPDATE_ROLLING)
        FUZZ_CHECK(b >= 1 && b <= (u.percent ? (total > 1 ? total : 1) : u.max_unavailable));
    else
        FUZZ_CHECK(u.strategy == CTF_UPDATE_RECREATE ? b >= 1 : b == 0);
    FUZZ_CHECK(ctf_update_pool_budget(&u, total) >= 1);
    FUZZ_CHECK(ctf_update_version(def, v) == KOP_OK && strlen(v) == CTF_VERSION_LEN &&
               strspn(v, "0123456789abcdef") == CTF_VERSION_LEN);
    json_t *other = json_deep_copy(def);
    if (!other)
        return;
    json_object_set_new(json_object_get(other, "spec"), "title", json_string("another title"));
    FUZZ_CHECK(ctf_update_version(other, w) == KOP_OK && strcmp(v, w) == 0);
    json_decref(other);
}

/* check_container checks one hardened container of a Deployment's pod template. */
static void check_container(const json_t *c, bool with_flag)
{
    const json_t *sc = json_object_get(c, "securityContext");
    const json_t *drop = json_object_get(json_object_get(sc, "capabilities"), "drop");
    const json_t *env = json_object_get(c, "env");
    size_t i;
    const json_t *e;

    FUZZ_CHECK(json_is_false(json_object_get(sc, "allowPrivilegeEscalation")));
    FUZZ_CHECK(json_is_false(json_object_get(sc, "privileged")));
    FUZZ_CHECK(json_is_true(json_object_get(sc, "runAsNonRoot")));
    FUZZ_CHECK(json_array_size(drop) == 1 && str_is(json_string_value(json_array_get(drop, 0)), "ALL"));
    if (!with_flag)
        return; /* a FLAG of the template's own is the author's business */
    json_array_foreach(env, i, e)
    {
        if (str_is(str_at(e, "name", NULL), CTF_FLAG_ENV)) {
            FUZZ_CHECK(i == 0 && !json_object_get(e, "value"));
            FUZZ_CHECK(str_is(str_at(json_object_get(e, "valueFrom"), "secretKeyRef", "name"),
                         CTF_FLAG_SECRET));
        }
    }
    FUZZ_CHECK(str_is(str_at(json_array_get(env, 0), "name", NULL), CTF_FLAG_ENV));
}

/* check_deployment checks the pod template of a Deployment is hardened. */
static void check_deployment(const json_t *d, bool with_flag)
{
    const json_t *pod = json_object_get(json_object_get(json_object_get(d, "spec"), "template"),
                                        "spec");
    static const char *const lists[] = {"initContainers", "containers"};
    size_t i;
    const json_t *c;

    FUZZ_CHECK(json_is_object(pod));
    FUZZ_CHECK(!json_object_get(pod, "hostNetwork") && !json_object_get(pod, "hostPID") &&
          !json_object_get(pod, "hostIPC"));
    FUZZ_CHECK(json_is_false(json_object_get(pod, "automountServiceAccountToken")));
    FUZZ_CHECK(json_is_true(json_object_get(json_object_get(pod, "securityContext"), "runAsNonRoot")));
    for (size_t l = 0; l < 2; l++) {
        json_array_foreach(json_object_get(pod, lists[l]), i, c)
        {
            check_container(c, with_flag);
        }
    }
}

/* check_children checks the built objects; skip_flag when the input itself carries the flag. */
static void check_children(const json_t *children, const char *flag, bool skip_flag)
{
    const char *ns = NULL;
    size_t i, secrets = 0;
    const json_t *o;

    FUZZ_CHECK(json_array_size(children) >= 1);
    json_array_foreach(children, i, o)
    {
        const char *kind = str_at(o, "kind", NULL);
        const char *name = str_at(o, "metadata", "name");
        char *text = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
        bool is_secret = str_is(kind, "Secret") && str_is(name, CTF_FLAG_SECRET);

        FUZZ_CHECK(text && kind && str_at(o, "apiVersion", NULL) && name && *name);
        FUZZ_CHECK(str_is(str_at(json_object_get(o, "metadata"), "labels", CTF_LABEL_MANAGED_BY),
                     CTF_MANAGED_BY));
        if (i == 0) {
            FUZZ_CHECK(str_is(kind, "Namespace"));
            ns = name;
        } else {
            FUZZ_CHECK(!str_is(kind, "Namespace"));
            FUZZ_CHECK(str_is(str_at(o, "metadata", "namespace"), ns));
        }
        if (is_secret) {
            secrets++;
            FUZZ_CHECK(flag && str_is(str_at(o, "data", CTF_FLAG_KEY), FLAG_B64));
        }
        if (!skip_flag) {
            FUZZ_CHECK(!strstr(text, FLAG));
            FUZZ_CHECK(is_secret || !strstr(text, FLAG_B64));
        }
        if (str_is(kind, "Deployment"))
            check_deployment(o, flag != NULL);
        free(text);
    }
    FUZZ_CHECK(secrets == (flag ? 1u : 0u));
}

/* check_endpoints runs ctf_endpoints with no Services: only ingress hosts can be known. */
static void check_endpoints(const ctf_config *cfg, const json_t *def, const char *ns)
{
    const json_t *expose = json_object_get(json_object_get(def, "spec"), "expose");
    json_t *services = json_array(), *eps = NULL;
    bool complete = true;
    size_t http = 0, i;
    const json_t *e;

    FUZZ_CHECK(services);
    FUZZ_CHECK(ctf_endpoints(cfg, def, ns, services, &eps, &complete) == KOP_OK);
    json_array_foreach(expose, i, e)
    {
        http += str_is(str_at(e, "type", NULL), "HTTP");
    }
    size_t want = cfg->ingress_domain ? http : 0;
    FUZZ_CHECK(json_array_size(eps) == want);
    FUZZ_CHECK(complete == (want == json_array_size(expose)));
    json_array_foreach(eps, i, e)
    {
        const char *addr = str_at(e, "address", NULL);
        FUZZ_CHECK(addr && strncmp(addr, "http://", 7) == 0 && strstr(addr, "." DOMAIN));
    }
    json_decref(eps);
    json_decref(services);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_error_t jerr;
    kop_status st;

    if (size > MAX_INPUT)
        return 0;
    json_t *spec = json_loadb((const char *)data, size, 0, &jerr);
    if (!json_is_object(spec)) {
        json_decref(spec);
        return 0;
    }
    json_t *def = json_pack("{s:s, s:s, s:{s:s, s:s}, s:O}", "apiVersion", "ctf.kopc.io/v1alpha1",
                            "kind", "ChallengeDefinition", "metadata", "name", "d", "namespace",
                            "ctf", "spec", spec);
    json_t *challenge = json_pack("{s:s, s:s, s:{s:s, s:s, s:s}, s:{s:s, s:s}}", "apiVersion",
                                  "ctf.kopc.io/v1alpha1", "kind", "Challenge", "metadata", "name",
                                  "d-t", "namespace", "ctf", "uid", "u", "spec", "definition", "d",
                                  "team", "t");
    FUZZ_CHECK(def && challenge);
    ctf_config cfg = {.ingress_domain = size % 2 ? DOMAIN : NULL,
                      .ingress_class = size % 4 == 1 ? "nginx" : NULL};

    kop_err err = ctf_validate_definition(def, &st);
    FUZZ_CHECK(err == KOP_OK || err == KOP_EINVAL);
    if (err) {
        FUZZ_CHECK(str_is(st.reason, CTF_REASON_INVALID_DEFINITION) && st.message[0]);
        /* The builder refuses it too, and endpoints of a bad definition do not crash. */
        json_t *out = NULL, *eps = NULL;
        bool complete;
        FUZZ_CHECK(ctf_build_children(&cfg, def, challenge, FLAG, &out, &st) == KOP_EINVAL && !out);
        if (ctf_endpoints(&cfg, def, "ns", NULL, &eps, &complete) == KOP_OK)
            json_decref(eps);
        goto out;
    }

    /*
     * The definition's own flag (a fixed key for a dynamic one); the fixed
     * FLAG goes in exactly when there is one, as the operator does.
     */
    char *own = NULL;
    static const unsigned char key[] = "k";
    FUZZ_CHECK(ctf_flag(def, "d", "t", key, sizeof key - 1, &own, &st) == KOP_OK);
    const char *flag = own ? FLAG : NULL;
    free(own);
    char *spec_text = json_dumps(spec, JSON_COMPACT);
    FUZZ_CHECK(spec_text);
    bool skip_flag = strstr(spec_text, FLAG) || strstr(spec_text, FLAG_B64);
    free(spec_text);

    json_t *children = NULL;
    err = ctf_build_children(&cfg, def, challenge, flag, &children, &st);
    if (err)
        fprintf(stderr, "ctf_build_children: %s: %s\n", kop_err_name(err), st.message);
    FUZZ_CHECK(err == KOP_OK && children);
    check_children(children, flag, skip_flag);
    check_endpoints(&cfg, def, str_at(json_array_get(children, 0), "metadata", "name"));
    json_decref(children);
    (void)ctf_flag_secret_ref(def, NULL, NULL);
    check_pool(&cfg, def, challenge, flag, size);
    check_update(def, size);

out:
    json_decref(challenge);
    json_decref(def);
    json_decref(spec);
    return 0;
}
