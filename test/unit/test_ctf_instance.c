/*
 * test_ctf_instance.c - the pure part of the CTF operator: namespace names,
 * definition validation, flags, every child object of an instance (kinds,
 * order, labels, hardening, NetworkPolicies, quota), endpoints, durations,
 * times and the lifetime rules.
 *
 * Fixtures are JSON written with single quotes (parse() turns them into
 * double quotes) so that the definitions read as they would in YAML. The
 * known values (hashes, HMACs, epochs) were computed independently of this
 * code; each says how.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ctf_fixture.h"
#include "core/duration.h"
#include "core/instance.h"

/* ---- fixtures ----------------------------------------------------------- */

static void assert_json_eq(const json_t *got, const char *want_text, const char *what)
{
    json_t *want = parse(want_text);
    if (!json_equal(got, want)) {
        char *g = json_dumps(got, JSON_SORT_KEYS | JSON_COMPACT);
        char *w = json_dumps(want, JSON_SORT_KEYS | JSON_COMPACT);
        fail_msg("%s:\n got %s\nwant %s", what, g, w);
    }
    json_decref(want);
}

/* One pod, one TCP exposure, a static flag: the classic pwn challenge. */
static const char DEF_TCP[] =
    "{'apiVersion':'ctf.kopc.io/v1alpha1','kind':'ChallengeDefinition',"
    "'metadata':{'name':'pwn','namespace':'ctf'},"
    "'spec':{'title':'Baby pwn','category':'pwn','points':100,"
    "'pods':[{'name':'app','template':{'containers':[{'name':'app',"
    "'image':'registry.example/pwn:1','ports':[{'containerPort':1337}]}]}}],"
    "'expose':[{'name':'pwn','pod':'app','port':1337,'type':'TCP'}],"
    "'flag':{'static':'flag{static_one}'}}}";

/* One pod over HTTP, a dynamic flag, internet egress, every security option. */
static const char DEF_HTTP[] =
    "{'apiVersion':'ctf.kopc.io/v1alpha1','kind':'ChallengeDefinition',"
    "'metadata':{'name':'web','namespace':'ctf'},"
    "'spec':{'title':'Web','pods':[{'name':'web','replicas':2,'template':{'containers':[{"
    "'name':'web','image':'registry.example/web:1','ports':[{'containerPort':8080}],"
    "'env':[{'name':'MODE','value':'ctf'},{'name':'FLAG','value':'not-the-flag'}]}]}}],"
    "'expose':[{'name':'web','pod':'web','port':8080,'type':'HTTP'}],"
    "'flag':{'dynamic':{'secretRef':{'name':'ctf-flag-key'}}},"
    "'lifetime':{'default':'30m','max':'2h','renewBy':'30m'},'startTimeout':'5m',"
    "'network':{'egress':'Internet'},"
    "'security':{'readOnlyRootFilesystem':true,'runtimeClassName':'gvisor'},"
    "'resources':{'cpu':'2','memory':'2Gi'}}}";

/*
 * Two pods: web (an initContainer and a sidecar, NET_BIND_SERVICE, exposed
 * twice) and db (its own uid, an Unconfined seccomp profile to replace).
 */
static const char DEF_TWO[] =
    "{'apiVersion':'ctf.kopc.io/v1alpha1','kind':'ChallengeDefinition',"
    "'metadata':{'name':'shop','namespace':'ctf'},"
    "'spec':{'title':'Shop','pods':["
    "{'name':'web','template':{"
    "'initContainers':[{'name':'init','image':'busybox:1',"
    "'securityContext':{'capabilities':{'add':['NET_BIND_SERVICE']}}}],"
    "'containers':[{'name':'web','image':'registry.example/shop:1',"
    "'ports':[{'containerPort':80},{'containerPort':2222}],"
    "'securityContext':{'capabilities':{'add':['NET_BIND_SERVICE'],'drop':['NET_RAW']}}},"
    "{'name':'proxy','image':'registry.example/proxy:1',"
    "'resources':{'limits':{'cpu':'100m','memory':'32Mi'}},"
    "'volumeMounts':[{'name':'cache','mountPath':'/cache'}]}],"
    "'volumes':[{'name':'cache','emptyDir':{}}]}},"
    "{'name':'db','replicas':1,'template':{"
    "'securityContext':{'runAsUser':999,'fsGroup':999},"
    "'containers':[{'name':'db','image':'postgres:16','ports':[{'containerPort':5432}],"
    "'securityContext':{'seccompProfile':{'type':'Unconfined'}}}]}}],"
    "'expose':[{'name':'web','pod':'web','port':80,'type':'HTTP'},"
    "{'name':'admin','pod':'db','port':5432},"
    "{'name':'ssh','pod':'web','port':2222,'type':'TCP'}],"
    "'flag':{'static':'flag{two_pods}'}}}";

static const char CHAL[] =
    "{'apiVersion':'ctf.kopc.io/v1alpha1','kind':'Challenge',"
    "'metadata':{'name':'shop-team1','namespace':'ctf','uid':'uid-123'},"
    "'spec':{'definition':'shop','team':'team1'}}";

static const ctf_config NODEPORT_CFG = {.node_address = "10.0.0.5"};
static const ctf_config INGRESS_CFG = {.ingress_domain = "ctf.example.com",
                                       .node_address = "10.0.0.5",
                                       .ingress_class = "nginx"};

/* challenge_for returns CHAL for another definition. */
static json_t *challenge_for(const char *definition)
{
    json_t *c = parse(CHAL);
    json_object_set_new(json_object_get(c, "spec"), "definition", json_string(definition));
    return c;
}

/* build builds the children of def_text for CHAL (definition renamed to match). */
static json_t *build(const ctf_config *cfg, const char *def_text, const char *flag)
{
    json_t *def = parse(def_text);
    json_t *chal = challenge_for(json_string_value(json_object_get(
        json_object_get(def, "metadata"), "name")));
    json_t *out = NULL;
    kop_status st;
    kop_err err = ctf_build_children(cfg, def, chal, flag, &out, &st);
    if (err)
        fail_msg("build: %s: %s", kop_strerror(err), st.message);
    json_decref(def);
    json_decref(chal);
    return out;
}

/* find returns the child of that kind and name, borrowed; absent fails the test. */
static json_t *find(const json_t *children, const char *kind, const char *name)
{
    json_t *o = child_of(children, kind, name);
    if (!o)
        fail_msg("no %s %s", kind, name);
    return o;
}

/* at returns the value at a dotted path ("spec.template.spec.containers.0"), borrowed. */
static json_t *at(const json_t *v, const char *path)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *save = NULL, *tok = strtok_r(buf, ".", &save); tok && v;
         tok = strtok_r(NULL, ".", &save)) {
        if (json_is_array(v))
            v = json_array_get(v, strtoul(tok, NULL, 10));
        else
            v = json_object_get(v, tok);
    }
    return (json_t *)v;
}

/*
 * mutate sets the value at path (creating objects on the way) to the JSON
 * value_text, or removes it when value_text is NULL.
 */
static void mutate(json_t *doc, const char *path, const char *value_text)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s", path);
    char *last = strrchr(buf, '.');
    json_t *parent = doc;
    if (last) {
        *last++ = '\0';
        for (char *save = NULL, *tok = strtok_r(buf, ".", &save); tok;
             tok = strtok_r(NULL, ".", &save)) {
            json_t *next = json_is_array(parent) ? json_array_get(parent, strtoul(tok, NULL, 10))
                                                 : json_object_get(parent, tok);
            if (!next) {
                next = json_object();
                json_object_set_new(parent, tok, next);
            }
            parent = next;
        }
    } else {
        last = buf;
    }
    if (json_is_array(parent)) {
        size_t i = strtoul(last, NULL, 10);
        if (value_text)
            json_array_set_new(parent, i, parse(value_text));
        else
            json_array_remove(parent, i);
    } else if (value_text) {
        json_object_set_new(parent, last, parse(value_text));
    } else {
        json_object_del(parent, last);
    }
}

/* ---- namespace and host names ------------------------------------------ */

struct ns_case {
    const char *challenge_ns, *definition, *team, *want;
};

/*
 * Expected hashes: python3 -c 'import hashlib; print(hashlib.sha256(
 * "ctf\0web\0team1\0".encode()).hexdigest()[:12])' and likewise.
 */
static const struct ns_case ns_cases[] = {
    {"ctf", "web", "team1", "ctf-web-755e0b8a3c59"},
    {"ctf", "Web.Challenge_2", "Team-1", "ctf-web-challenge-2-c362fb04298b"},
    {"default", "pwn-baby", "t", "ctf-pwn-baby-40472fa383d9"},
    {"ctf", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "team1",
     "ctf-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa-e3fd9fd1e3d8"},
    {"ctf", "...", "x", "ctf-deac753aff62"},
};

static void test_namespace_fixed(void **state)
{
    (void)state;
    for (size_t i = 0; i < LEN(ns_cases); i++) {
        const struct ns_case *c = &ns_cases[i];
        char out[CTF_NAMESPACE_SIZE];
        assert_int_equal(ctf_instance_namespace(c->challenge_ns, c->definition, c->team, out,
                                                sizeof out),
                         KOP_OK);
        if (strcmp(out, c->want) != 0)
            fail_msg("case %zu: got %s, want %s", i, out, c->want);
        assert_true(kop_meta_is_valid_dns1123_label(out));
    }
}

/* Many inputs, including ones that sanitize or truncate alike: all valid, distinct, stable. */
static void test_namespace_distinct(void **state)
{
    (void)state;
    static const char *const nss[] = {"ctf", "ctf-2", "CTF", "default"};
    static const char *const stems[] = {"web", "web.1", "web-1", "web_1", "Web-1", "w",
                                        "a-very-long-definition-name-that-is-cut-here-x",
                                        "a-very-long-definition-name-that-is-cut-here-y"};
    json_t *seen = json_object();
    char def[64], team[64], out[CTF_NAMESPACE_SIZE], again[CTF_NAMESPACE_SIZE];
    size_t count = 0;

    for (size_t n = 0; n < LEN(nss); n++) {
        for (size_t s = 0; s < LEN(stems); s++) {
            for (int d = 0; d < 6; d++) {
                snprintf(def, sizeof def, d ? "%s%d" : "%s", stems[s], d);
                for (int t = 0; t < 25; t++) {
                    snprintf(team, sizeof team, "team%d", t);
                    assert_int_equal(ctf_instance_namespace(nss[n], def, team, out, sizeof out),
                                     KOP_OK);
                    assert_int_equal(ctf_instance_namespace(nss[n], def, team, again,
                                                            sizeof again),
                                     KOP_OK);
                    assert_string_equal(out, again);
                    assert_true(strlen(out) <= 47);
                    if (!kop_meta_is_valid_dns1123_label(out))
                        fail_msg("invalid label %s", out);
                    if (json_object_get(seen, out))
                        fail_msg("collision: %s for %s/%s/%s", out, nss[n], def, team);
                    json_object_set_new(seen, out, json_true());
                    count++;
                }
            }
        }
    }
    assert_int_equal(json_object_size(seen), count);
    json_decref(seen);
}

static void test_namespace_invalid(void **state)
{
    (void)state;
    char out[CTF_NAMESPACE_SIZE], small[20];
    assert_int_equal(ctf_instance_namespace(NULL, "web", "t", out, sizeof out), KOP_EINVAL);
    assert_int_equal(ctf_instance_namespace("ctf", "", "t", out, sizeof out), KOP_EINVAL);
    assert_int_equal(ctf_instance_namespace("ctf", "web", NULL, out, sizeof out), KOP_EINVAL);
    assert_string_equal(out, "");
    assert_int_equal(ctf_instance_namespace("ctf", "web", "t", small, sizeof small), KOP_EINVAL);
}

static void test_ingress_host(void **state)
{
    (void)state;
    char host[CTF_HOST_SIZE];
    assert_int_equal(ctf_ingress_host(&INGRESS_CFG, "web", "ctf-web-755e0b8a3c59", host,
                                      sizeof host),
                     KOP_OK);
    assert_string_equal(host, "web-ctf-web-755e0b8a3c59.ctf.example.com");

    /* Too long for a label: cut, then 10 hex digits of SHA-256("<expose>\0<ns>\0") (python3). */
    assert_int_equal(ctf_ingress_host(&INGRESS_CFG, "exposure-with-a-long-name-too",
                                      "ctf-some-long-definition-name-abcdef0123456789", host,
                                      sizeof host),
                     KOP_OK);
    assert_string_equal(host,
                        "exposure-with-a-long-name-too-ctf-some-long-definiti-4ecd129782"
                        ".ctf.example.com");
    assert_true(kop_meta_is_valid_dns1123_subdomain(host));
    assert_int_equal(strchr(host, '.') - host, 63);

    assert_int_equal(ctf_ingress_host(&NODEPORT_CFG, "web", "ns", host, sizeof host),
                     KOP_EINVAL);
}

/* ---- validation --------------------------------------------------------- */

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

/* ---- flags -------------------------------------------------------------- */

static void test_flag_static_and_none(void **state)
{
    (void)state;
    json_t *def = parse(DEF_TCP);
    char *flag = NULL;
    kop_status st;
    assert_int_equal(ctf_flag(def, "pwn", "team1", NULL, 0, &flag, &st), KOP_OK);
    assert_string_equal(flag, "flag{static_one}");
    free(flag);
    assert_false(ctf_flag_secret_ref(def, NULL, NULL));

    json_object_del(json_object_get(def, "spec"), "flag");
    flag = (char *)"sentinel";
    assert_int_equal(ctf_flag(def, "pwn", "team1", NULL, 0, &flag, &st), KOP_OK);
    assert_null(flag);
    json_decref(def);
}

static void test_flag_dynamic(void **state)
{
    (void)state;
    json_t *def = parse(DEF_HTTP);
    const unsigned char key[] = "s3cret-key";
    const char *name = NULL, *k = NULL;
    char *flag = NULL;
    kop_status st;

    assert_true(ctf_flag_secret_ref(def, &name, &k));
    assert_string_equal(name, "ctf-flag-key");
    assert_string_equal(k, "key");

    /* printf 'web:team1' | openssl dgst -sha256 -hmac 's3cret-key' gives
     * 30f24671fb6e529656e5371dfefa10178b34b8a5b14d3d92b0e1449ca9991ecf. */
    assert_int_equal(ctf_flag(def, "web", "team1", key, sizeof key - 1, &flag, &st), KOP_OK);
    assert_string_equal(flag, "flag{30f24671fb6e529656e5371dfefa1017}");
    free(flag);

    /* printf 'web:team2' | openssl dgst -sha256 -hmac 's3cret-key' gives
     * 389307e3fee8e55477d19ae4b6f21f8198cc84a1276b8b6355b7e315191cb641. */
    mutate(def, "spec.flag.dynamic.prefix", "'CTF['");
    mutate(def, "spec.flag.dynamic.suffix", "']'");
    mutate(def, "spec.flag.dynamic.secretRef.key", "'hmac'");
    assert_int_equal(ctf_flag(def, "web", "team2", key, sizeof key - 1, &flag, &st), KOP_OK);
    assert_string_equal(flag, "CTF[389307e3fee8e55477d19ae4b6f21f81]");
    free(flag);
    assert_true(ctf_flag_secret_ref(def, &name, &k));
    assert_string_equal(k, "hmac");

    /* No key, no team: refused, nothing returned. */
    flag = (char *)"sentinel";
    assert_int_equal(ctf_flag(def, "web", "team1", key, 0, &flag, &st), KOP_EINVAL);
    assert_null(flag);
    assert_non_null(strstr(st.message, "key"));
    assert_int_equal(ctf_flag(def, "web", "", key, sizeof key - 1, &flag, &st), KOP_EINVAL);
    assert_int_equal(ctf_flag(def, "web", "t", key, 3, NULL, &st), KOP_EINVAL);
    json_decref(def);
}

/* b64 returns base64 of s (malloc'ed): the Secret's encoding. */
static char *b64(const char *s)
{
    static const char tbl[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t n = strlen(s), o = 0;
    char *out = malloc(4 * ((n + 2) / 3) + 1);
    for (size_t i = 0; i < n; i += 3) {
        unsigned v = (unsigned)(unsigned char)s[i] << 16;
        if (i + 1 < n)
            v |= (unsigned)(unsigned char)s[i + 1] << 8;
        if (i + 2 < n)
            v |= (unsigned char)s[i + 2];
        out[o++] = tbl[(v >> 18) & 63];
        out[o++] = tbl[(v >> 12) & 63];
        out[o++] = i + 1 < n ? tbl[(v >> 6) & 63] : '=';
        out[o++] = i + 2 < n ? tbl[v & 63] : '=';
    }
    out[o] = '\0';
    return out;
}

/* The flag (plain or base64) appears in the Secret's data.flag and nowhere else. */
static void test_flag_only_in_secret(void **state)
{
    (void)state;
    static const struct {
        const char *def;
        const ctf_config *cfg;
        const char *flag;
    } cases[] = {
        {DEF_TCP, &NODEPORT_CFG, "flag{static_one}"},
        {DEF_HTTP, &INGRESS_CFG, "flag{30f24671fb6e529656e5371dfefa1017}"},
        {DEF_TWO, &INGRESS_CFG, "flag{two_pods}"},
    };
    char *known = b64("flag{static_one}");
    assert_string_equal(known, "ZmxhZ3tzdGF0aWNfb25lfQ=="); /* printf ... | base64 */
    free(known);
    for (size_t c = 0; c < LEN(cases); c++) {
        json_t *kids = build(cases[c].cfg, cases[c].def, cases[c].flag);
        char *enc = b64(cases[c].flag);
        size_t i, secrets = 0;
        json_t *o;
        json_array_foreach(kids, i, o)
        {
            char *text = json_dumps(o, JSON_COMPACT);
            bool secret = strcmp(json_string_value(json_object_get(o, "kind")), "Secret") == 0;
            if (secret) {
                secrets++;
                assert_string_equal(kop_meta_name(o), "flag");
                assert_string_equal(json_string_value(at(o, "data.flag")), enc);
                assert_null(json_object_get(o, "stringData"));
                /* Only in data: not in labels or annotations of the Secret either. */
                char *m = json_dumps(json_object_get(o, "metadata"), JSON_COMPACT);
                assert_null(strstr(m, cases[c].flag));
                assert_null(strstr(m, enc));
                free(m);
            } else if (strstr(text, cases[c].flag) || strstr(text, enc) ||
                       strstr(text, "static_one") || strstr(text, "two_pods")) {
                fail_msg("case %zu: the flag leaks into %s", c, text);
            }
            free(text);
        }
        assert_int_equal(secrets, 1);
        free(enc);
        json_decref(kids);
    }
    free(b64("")); /* the empty case of the helper */
}

/* ---- children ----------------------------------------------------------- */

struct kinds_case {
    const char *def;
    const ctf_config *cfg;
    const char *flag;
    const char *want; /* "Kind/name" joined with spaces, in order */
};

#define HEAD_WITH_SECRET "Namespace/ns Secret/flag ResourceQuota/instance LimitRange/defaults "

static const struct kinds_case kinds_cases[] = {
    {DEF_TCP, &NODEPORT_CFG, "f",
     HEAD_WITH_SECRET "NetworkPolicy/default-deny NetworkPolicy/allow-exposed-app "
                      "NetworkPolicy/allow-same-instance NetworkPolicy/allow-dns "
                      "Deployment/app Service/pwn Service/app"},
    /* Without a flag: no Secret. */
    {DEF_TCP, &INGRESS_CFG, NULL,
     "Namespace/ns ResourceQuota/instance LimitRange/defaults "
     "NetworkPolicy/default-deny NetworkPolicy/allow-exposed-app "
     "NetworkPolicy/allow-same-instance NetworkPolicy/allow-dns Deployment/app Service/pwn "
     "Service/app"},
    {DEF_HTTP, &INGRESS_CFG, "f",
     HEAD_WITH_SECRET "NetworkPolicy/default-deny NetworkPolicy/allow-exposed-web "
                      "NetworkPolicy/allow-same-instance NetworkPolicy/allow-dns "
                      "NetworkPolicy/allow-internet Deployment/web Service/web Ingress/web"},
    {DEF_HTTP, &NODEPORT_CFG, "f",
     HEAD_WITH_SECRET "NetworkPolicy/default-deny NetworkPolicy/allow-exposed-web "
                      "NetworkPolicy/allow-same-instance NetworkPolicy/allow-dns "
                      "NetworkPolicy/allow-internet Deployment/web Service/web"},
    {DEF_TWO, &NODEPORT_CFG, "f",
     HEAD_WITH_SECRET "NetworkPolicy/default-deny NetworkPolicy/allow-exposed-web "
                      "NetworkPolicy/allow-exposed-db NetworkPolicy/allow-same-instance "
                      "NetworkPolicy/allow-dns Deployment/web Deployment/db Service/web "
                      "Service/admin Service/ssh Service/db"},
    {DEF_TWO, &INGRESS_CFG, "f",
     HEAD_WITH_SECRET "NetworkPolicy/default-deny NetworkPolicy/allow-exposed-web "
                      "NetworkPolicy/allow-exposed-db NetworkPolicy/allow-same-instance "
                      "NetworkPolicy/allow-dns Deployment/web Deployment/db Service/web "
                      "Service/admin Service/ssh Service/db Ingress/web"},
};

static void test_children_kinds(void **state)
{
    (void)state;
    for (size_t c = 0; c < LEN(kinds_cases); c++) {
        json_t *kids = build(kinds_cases[c].cfg, kinds_cases[c].def, kinds_cases[c].flag);
        char got[1024] = "";
        size_t i;
        json_t *o;
        json_array_foreach(kids, i, o)
        {
            const char *kind = json_string_value(json_object_get(o, "kind"));
            size_t n = strlen(got);
            snprintf(got + n, sizeof got - n, "%s%s/%s", i ? " " : "", kind,
                     strcmp(kind, "Namespace") == 0 ? "ns" : kop_meta_name(o));
        }
        if (strcmp(got, kinds_cases[c].want) != 0)
            fail_msg("case %zu:\n got %s\nwant %s", c, got, kinds_cases[c].want);
        json_decref(kids);
    }
}

/* Every object is complete and labelled; the Namespace carries Pod Security and the uid. */
static void test_children_metadata(void **state)
{
    (void)state;
    json_t *kids = build(&INGRESS_CFG, DEF_TWO, "f");
    char ns[CTF_NAMESPACE_SIZE];
    assert_int_equal(ctf_instance_namespace("ctf", "shop", "team1", ns, sizeof ns), KOP_OK);
    size_t i;
    json_t *o;
    static const char *const api[][2] = {
        {"Namespace", "v1"},      {"Secret", "v1"},       {"ResourceQuota", "v1"},
        {"LimitRange", "v1"},     {"Service", "v1"},      {"Deployment", "apps/v1"},
        {"NetworkPolicy", "networking.k8s.io/v1"},        {"Ingress", "networking.k8s.io/v1"},
    };
    json_array_foreach(kids, i, o)
    {
        const char *kind = json_string_value(json_object_get(o, "kind"));
        bool known = false;
        for (size_t k = 0; k < LEN(api); k++) {
            if (strcmp(kind, api[k][0]) == 0) {
                assert_string_equal(json_string_value(json_object_get(o, "apiVersion")),
                                    api[k][1]);
                known = true;
            }
        }
        assert_true(known);
        assert_non_null(kop_meta_name(o));
        assert_true(kop_meta_is_valid_dns1123_subdomain(kop_meta_name(o)));
        if (strcmp(kind, "Namespace") == 0) {
            assert_string_equal(kop_meta_name(o), ns);
            assert_null(kop_meta_namespace(o));
            assert_string_equal(kop_meta_label(o, "pod-security.kubernetes.io/enforce"),
                                "restricted");
            assert_string_equal(kop_meta_label(o, "pod-security.kubernetes.io/enforce-version"),
                                "latest");
            assert_string_equal(kop_meta_annotation(o, CTF_ANNOTATION_CHALLENGE_UID), "uid-123");
        } else {
            assert_string_equal(kop_meta_namespace(o), ns);
            assert_null(json_object_get(json_object_get(o, "metadata"), "annotations"));
        }
        assert_string_equal(kop_meta_label(o, CTF_LABEL_MANAGED_BY), "kopc-ctf");
        assert_string_equal(kop_meta_label(o, CTF_LABEL_TEAM), "team1");
        assert_string_equal(kop_meta_label(o, CTF_LABEL_DEFINITION), "shop");
        assert_string_equal(kop_meta_label(o, CTF_LABEL_CHALLENGE), "shop-team1");
        assert_string_equal(kop_meta_label(o, CTF_LABEL_CHALLENGE_NS), "ctf");
        assert_null(json_object_get(o, "status"));
        if (strcmp(kind, "Deployment") == 0) {
            const char *pod = kop_meta_name(o);
            assert_string_equal(kop_meta_label(o, CTF_LABEL_POD), pod);
            json_t *tmpl = at(o, "spec.template");
            assert_string_equal(kop_meta_label(tmpl, CTF_LABEL_POD), pod);
            assert_string_equal(kop_meta_label(tmpl, CTF_LABEL_TEAM), "team1");
            assert_string_equal(kop_meta_label(tmpl, CTF_LABEL_CHALLENGE), "shop-team1");
            char sel[128];
            snprintf(sel, sizeof sel, "{'matchLabels':{'ctf.kopc.io/pod':'%s'}}", pod);
            assert_json_eq(at(o, "spec.selector"), sel, "selector");
            assert_int_equal(json_integer_value(at(o, "spec.replicas")), 1);
        }
    }
    json_decref(kids);

    /* Replicas are taken over. */
    kids = build(&INGRESS_CFG, DEF_HTTP, "f");
    assert_int_equal(json_integer_value(at(find(kids, "Deployment", "web"), "spec.replicas")), 2);
    json_decref(kids);

    /* No uid: no annotation. */
    json_t *def = parse(DEF_TCP), *chal = challenge_for("pwn"), *out = NULL;
    json_object_del(json_object_get(chal, "metadata"), "uid");
    assert_int_equal(ctf_build_children(&NODEPORT_CFG, def, chal, "f", &out, NULL), KOP_OK);
    assert_null(at(json_array_get(out, 0), "metadata.annotations"));
    json_decref(out);
    json_decref(chal);
    json_decref(def);
}

/* The definition passed in is never modified. */
static void test_definition_untouched(void **state)
{
    (void)state;
    json_t *def = parse(DEF_TWO), *copy = parse(DEF_TWO), *chal = challenge_for("shop");
    json_t *out = NULL;
    assert_int_equal(ctf_build_children(&INGRESS_CFG, def, chal, "f", &out, NULL), KOP_OK);
    assert_true(json_equal(def, copy));
    json_decref(out);
    json_decref(chal);
    json_decref(copy);
    json_decref(def);
}

struct chal_case {
    const char *path, *value, *msg;
};

static void test_challenge_refused(void **state)
{
    (void)state;
    static const struct chal_case cases[] = {
        {"spec.team", NULL, "spec.team"},
        {"spec.team", "''", "spec.team"},
        {"metadata.namespace", NULL, "metadata.namespace"},
        {"metadata.name",
         "'a-challenge-name-that-is-much-longer-than-a-label-value-may-be-0123456789'",
         "metadata.name is missing or longer than 63"},
        {"spec.definition", NULL, "spec.definition"},
    };
    json_t *def = parse(DEF_TWO);
    for (size_t i = 0; i < LEN(cases); i++) {
        json_t *chal = challenge_for("shop"), *out = NULL;
        kop_status st;
        mutate(chal, cases[i].path, cases[i].value);
        assert_int_equal(ctf_build_children(&NODEPORT_CFG, def, chal, "f", &out, &st),
                         KOP_EINVAL);
        assert_null(out);
        if (!strstr(st.message, cases[i].msg))
            fail_msg("case %zu: \"%s\" lacks \"%s\"", i, st.message, cases[i].msg);
        json_decref(chal);
    }
    json_decref(def);
}

/* ---- hardening ---------------------------------------------------------- */

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

/* ---- policies, quota, services, ingress -------------------------------- */

static void test_network_policies(void **state)
{
    (void)state;
    json_t *def = parse(DEF_TWO);
    mutate(def, "spec.network", "{'egress':'Internet'}");
    char *text = json_dumps(def, JSON_COMPACT);
    json_t *kids = build(&NODEPORT_CFG, text, "f");
    free(text);

    assert_json_eq(json_object_get(find(kids, "NetworkPolicy", "default-deny"), "spec"),
                   "{'podSelector':{},'policyTypes':['Ingress','Egress']}", "default-deny");
    assert_json_eq(json_object_get(find(kids, "NetworkPolicy", "allow-exposed-web"), "spec"),
                   "{'podSelector':{'matchLabels':{'ctf.kopc.io/pod':'web'}},"
                   "'policyTypes':['Ingress'],"
                   "'ingress':[{'ports':[{'protocol':'TCP','port':80},"
                   "{'protocol':'TCP','port':2222}]}]}",
                   "allow-exposed-web");
    assert_json_eq(json_object_get(find(kids, "NetworkPolicy", "allow-exposed-db"), "spec"),
                   "{'podSelector':{'matchLabels':{'ctf.kopc.io/pod':'db'}},"
                   "'policyTypes':['Ingress'],"
                   "'ingress':[{'ports':[{'protocol':'TCP','port':5432}]}]}",
                   "allow-exposed-db");
    assert_json_eq(json_object_get(find(kids, "NetworkPolicy", "allow-same-instance"), "spec"),
                   "{'podSelector':{},'policyTypes':['Ingress','Egress'],"
                   "'ingress':[{'from':[{'podSelector':{}}]}],"
                   "'egress':[{'to':[{'podSelector':{}}]}]}",
                   "allow-same-instance");
    assert_json_eq(json_object_get(find(kids, "NetworkPolicy", "allow-dns"), "spec"),
                   "{'podSelector':{},'policyTypes':['Egress'],"
                   "'egress':[{'to':[{'namespaceSelector':{'matchLabels':"
                   "{'kubernetes.io/metadata.name':'kube-system'}}}],"
                   "'ports':[{'protocol':'UDP','port':53},{'protocol':'TCP','port':53}]}]}",
                   "allow-dns");
    assert_json_eq(json_object_get(find(kids, "NetworkPolicy", "allow-internet"), "spec"),
                   "{'podSelector':{},'policyTypes':['Egress'],'egress':[{'to':["
                   "{'ipBlock':{'cidr':'0.0.0.0/0','except':['10.0.0.0/8','172.16.0.0/12',"
                   "'192.168.0.0/16','100.64.0.0/10','169.254.0.0/16','127.0.0.0/8']}},"
                   "{'ipBlock':{'cidr':'::/0','except':['fc00::/7','fe80::/10','::1/128']}}"
                   "]}]}",
                   "allow-internet");
    json_decref(kids);
    json_decref(def);
}

static void test_quota_and_limits(void **state)
{
    (void)state;
    json_t *kids = build(&NODEPORT_CFG, DEF_TCP, "f");
    assert_json_eq(json_object_get(find(kids, "ResourceQuota", "instance"), "spec"),
                   "{'hard':{'limits.cpu':'1','limits.memory':'1Gi','requests.cpu':'1',"
                   "'requests.memory':'1Gi','pods':'20','services':'20',"
                   "'services.nodeports':'10','secrets':'10','configmaps':'10',"
                   "'persistentvolumeclaims':'0'}}",
                   "default quota");
    assert_json_eq(json_object_get(find(kids, "LimitRange", "defaults"), "spec"),
                   "{'limits':[{'type':'Container',"
                   "'default':{'cpu':'500m','memory':'256Mi'},"
                   "'defaultRequest':{'cpu':'50m','memory':'64Mi'}}]}",
                   "limit range");
    json_decref(kids);

    json_t *def = parse(DEF_HTTP);
    mutate(def, "spec.resources.cpu", "3");
    char *text = json_dumps(def, JSON_COMPACT);
    kids = build(&NODEPORT_CFG, text, "f");
    json_t *hard = at(find(kids, "ResourceQuota", "instance"), "spec.hard");
    assert_string_equal(json_string_value(json_object_get(hard, "limits.cpu")), "3");
    assert_string_equal(json_string_value(json_object_get(hard, "requests.cpu")), "3");
    assert_string_equal(json_string_value(json_object_get(hard, "limits.memory")), "2Gi");
    assert_string_equal(json_string_value(json_object_get(hard, "requests.memory")), "2Gi");
    free(text);
    json_decref(kids);
    json_decref(def);
}

static void test_services_and_ingress(void **state)
{
    (void)state;
    char ns[CTF_NAMESPACE_SIZE], want[512];
    assert_int_equal(ctf_instance_namespace("ctf", "shop", "team1", ns, sizeof ns), KOP_OK);

    json_t *kids = build(&NODEPORT_CFG, DEF_TWO, "f");
    assert_json_eq(json_object_get(find(kids, "Service", "web"), "spec"),
                   "{'type':'NodePort','selector':{'ctf.kopc.io/pod':'web'},"
                   "'ports':[{'name':'web','protocol':'TCP','port':80,'targetPort':80}]}",
                   "web NodePort");
    assert_json_eq(json_object_get(find(kids, "Service", "admin"), "spec"),
                   "{'type':'NodePort','selector':{'ctf.kopc.io/pod':'db'},"
                   "'ports':[{'name':'admin','protocol':'TCP','port':5432,'targetPort':5432}]}",
                   "admin");
    json_decref(kids);

    kids = build(&INGRESS_CFG, DEF_TWO, "f");
    assert_string_equal(json_string_value(at(find(kids, "Service", "web"), "spec.type")),
                        "ClusterIP");
    assert_string_equal(json_string_value(at(find(kids, "Service", "ssh"), "spec.type")),
                        "NodePort");
    snprintf(want, sizeof want,
             "{'ingressClassName':'nginx','rules':[{'host':'web-%s.ctf.example.com',"
             "'http':{'paths':[{'path':'/','pathType':'Prefix','backend':{'service':"
             "{'name':'web','port':{'number':80}}}}]}}]}",
             ns);
    assert_json_eq(json_object_get(find(kids, "Ingress", "web"), "spec"), want, "ingress");
    json_decref(kids);

    /* No class configured: the field is left out. A long exposure name gets another port name. */
    json_t *def = parse(DEF_TWO);
    mutate(def, "spec.expose.0.name", "'storefront-frontend'");
    char *text = json_dumps(def, JSON_COMPACT);
    ctf_config cfg = {.ingress_domain = "ctf.example.com"};
    kids = build(&cfg, text, "f");
    assert_null(at(find(kids, "Ingress", "storefront-frontend"), "spec.ingressClassName"));
    assert_string_equal(json_string_value(at(find(kids, "Service", "storefront-frontend"),
                                             "spec.ports.0.name")),
                        "http");
    free(text);
    json_decref(kids);
    json_decref(def);
}

/* has reports whether children holds an object of kind and name. */
static bool has(const json_t *children, const char *kind, const char *name)
{
    size_t i;
    const json_t *o;
    json_array_foreach(children, i, o)
    {
        if (strcmp(json_string_value(json_object_get(o, "kind")), kind) == 0 &&
            strcmp(json_string_value(at(o, "metadata.name")), name) == 0)
            return true;
    }
    return false;
}

/*
 * The pods of an instance reach each other by name: a ClusterIP Service per
 * pod with every declared port, except where an exposure already has the
 * pod's name or the pod declares no port.
 */
static void test_pod_services(void **state)
{
    (void)state;
    json_t *kids = build(&NODEPORT_CFG, DEF_TWO, "f");
    assert_json_eq(json_object_get(find(kids, "Service", "db"), "spec"),
                   "{'type':'ClusterIP','selector':{'ctf.kopc.io/pod':'db'},"
                   "'ports':[{'name':'tcp-5432','protocol':'TCP','port':5432,'targetPort':5432}]}",
                   "db by name");
    /* "web" is an exposure's name too: that Service (NodePort, port 80) keeps it. */
    assert_string_equal(json_string_value(at(find(kids, "Service", "web"), "spec.type")),
                        "NodePort");
    json_decref(kids);

    /* Every port once, UDP too; a pod that declares none gets no Service. */
    json_t *def = parse(DEF_TWO);
    json_object_set_new(json_object_get(def, "spec"), "expose",
                        parse("[{'name':'shop','pod':'web','port':80,'type':'HTTP'}]"));
    json_array_append_new(at(def, "spec.pods.1.template.containers.0.ports"),
                          parse("{'containerPort':5432,'protocol':'UDP'}"));
    json_array_append_new(at(def, "spec.pods.1.template.containers.0.ports"),
                          parse("{'containerPort':5432}"));
    json_object_del(at(def, "spec.pods.0.template.containers.0"), "ports");
    char *text = json_dumps(def, JSON_COMPACT);
    kids = build(&NODEPORT_CFG, text, "f");
    assert_json_eq(at(find(kids, "Service", "db"), "spec.ports"),
                   "[{'name':'tcp-5432','protocol':'TCP','port':5432,'targetPort':5432},"
                   "{'name':'udp-5432','protocol':'UDP','port':5432,'targetPort':5432}]",
                   "db ports");
    assert_false(has(kids, "Service", "web"));
    assert_true(has(kids, "Service", "shop"));
    free(text);
    json_decref(kids);
    json_decref(def);
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

/* ---- endpoints ---------------------------------------------------------- */

/* service returns a stored Service with one port and, when node_port > 0, its nodePort. */
static json_t *service(const char *name, int port, int node_port)
{
    json_t *s = json_pack("{s:s, s:{s:s}, s:{s:[{s:i, s:i}]}}", "kind", "Service", "metadata",
                          "name", name, "spec", "ports", "port", port, "targetPort", port);
    if (node_port > 0)
        json_object_set_new(at(s, "spec.ports.0"), "nodePort", json_integer(node_port));
    return s;
}

static void test_endpoints(void **state)
{
    (void)state;
    json_t *def = parse(DEF_TWO);
    json_t *svcs = json_array(), *out = NULL;
    bool complete = true;
    const char *ns = "ctf-shop-x";

    json_array_append_new(svcs, service("web", 80, 30080));
    json_array_append_new(svcs, service("admin", 5432, 31432));
    json_array_append_new(svcs, service("ssh", 2222, 0)); /* not allocated yet */
    assert_int_equal(ctf_endpoints(&NODEPORT_CFG, def, ns, svcs, &out, &complete), KOP_OK);
    assert_false(complete);
    assert_json_eq(out,
                   "[{'name':'web','type':'HTTP','address':'http://10.0.0.5:30080'},"
                   "{'name':'admin','type':'TCP','address':'10.0.0.5:31432'}]",
                   "partial");
    json_decref(out);

    json_array_set_new(svcs, 2, service("ssh", 2222, 32222));
    assert_int_equal(ctf_endpoints(&NODEPORT_CFG, def, ns, svcs, &out, &complete), KOP_OK);
    assert_true(complete);
    assert_int_equal(json_array_size(out), 3);
    assert_string_equal(json_string_value(at(out, "2.address")), "10.0.0.5:32222");
    json_decref(out);

    /* With an ingress domain, HTTP needs no nodePort. */
    assert_int_equal(ctf_endpoints(&INGRESS_CFG, def, ns, svcs, &out, &complete), KOP_OK);
    assert_true(complete);
    assert_json_eq(at(out, "0"),
                   "{'name':'web','type':'HTTP','address':'http://web-ctf-shop-x.ctf.example.com'}",
                   "ingress endpoint");
    json_decref(out);

    /* Nothing stored yet; default and IPv6 node addresses. */
    assert_int_equal(ctf_endpoints(&INGRESS_CFG, def, ns, NULL, &out, &complete), KOP_OK);
    assert_false(complete);
    assert_int_equal(json_array_size(out), 1);
    json_decref(out);
    ctf_config dflt = {0}, v6 = {.node_address = "fd00::1"};
    assert_int_equal(ctf_endpoints(&dflt, def, ns, svcs, &out, &complete), KOP_OK);
    assert_string_equal(json_string_value(at(out, "1.address")), "127.0.0.1:31432");
    json_decref(out);
    assert_int_equal(ctf_endpoints(&v6, def, ns, svcs, &out, &complete), KOP_OK);
    assert_string_equal(json_string_value(at(out, "1.address")), "[fd00::1]:31432");
    json_decref(out);

    /* A Service whose port differs from the exposure's does not count. */
    json_array_set_new(svcs, 1, service("admin", 5433, 31433));
    assert_int_equal(ctf_endpoints(&NODEPORT_CFG, def, ns, svcs, &out, &complete), KOP_OK);
    assert_false(complete);
    json_decref(out);

    assert_int_equal(ctf_endpoints(&NODEPORT_CFG, def, NULL, svcs, &out, &complete), KOP_EINVAL);
    assert_null(out);
    json_decref(svcs);
    json_decref(def);
}

/* ---- durations, times, lifetimes --------------------------------------- */

struct dur_case {
    const char *s;
    kop_err err;
    int64_t ms;
};

static const struct dur_case dur_cases[] = {
    {"30m", KOP_OK, 1800000},
    {"1h30m", KOP_OK, 5400000},
    {"1.5h", KOP_OK, 5400000},
    {"250ms", KOP_OK, 250},
    {"1h0m0s", KOP_OK, 3600000},
    {"2h45m30.5s", KOP_OK, 9930500},
    {"1m1ms", KOP_OK, 60001},
    {"0", KOP_OK, 0},
    {"0s", KOP_OK, 0},
    {".5s", KOP_OK, 500},
    {"1.s", KOP_OK, 1000},
    {"1.0000000001h", KOP_OK, 3600000}, /* beyond nine fraction digits: ignored */
    {"0.0001s", KOP_OK, 0},             /* below a millisecond: truncated */
    {"9223372036854775807ms", KOP_OK, INT64_MAX},
    {"2562047788015h", KOP_OK, 2562047788015LL * 3600000},
    {"9223372036854775808ms", KOP_EINVAL, 0},
    {"2562047788016h", KOP_EINVAL, 0},
    {"2562047788015h1h", KOP_EINVAL, 0},
    {"2562047788015.999h", KOP_EINVAL, 0}, /* found by fuzzing: the fraction overflowed */
    {"99999999999999999999999h", KOP_EINVAL, 0},
    {"", KOP_EINVAL, 0},
    {"30", KOP_EINVAL, 0},
    {"m", KOP_EINVAL, 0},
    {".", KOP_EINVAL, 0},
    {".s", KOP_EINVAL, 0},
    {"1x", KOP_EINVAL, 0},
    {"1d", KOP_EINVAL, 0},
    {"-1h", KOP_EINVAL, 0},
    {"+1h", KOP_EINVAL, 0},
    {"1h ", KOP_EINVAL, 0},
    {" 1h", KOP_EINVAL, 0},
    {"1hh", KOP_EINVAL, 0},
    {"h1", KOP_EINVAL, 0},
    {"1e3s", KOP_EINVAL, 0},
    {"1.5.5h", KOP_EINVAL, 0},
    {"1h30", KOP_EINVAL, 0},
};

static void test_durations(void **state)
{
    (void)state;
    for (size_t i = 0; i < LEN(dur_cases); i++) {
        int64_t ms = -1;
        kop_err err = ctf_parse_duration(dur_cases[i].s, &ms);
        if (err != dur_cases[i].err)
            fail_msg("\"%s\": %s, want %s", dur_cases[i].s, kop_err_name(err),
                     kop_err_name(dur_cases[i].err));
        if (!err && ms != dur_cases[i].ms)
            fail_msg("\"%s\": %lld ms, want %lld", dur_cases[i].s, (long long)ms,
                     (long long)dur_cases[i].ms);
    }
    int64_t ms;
    assert_int_equal(ctf_parse_duration(NULL, &ms), KOP_EINVAL);
}

struct time_case {
    const char *s;
    kop_err err;
    time_t t;
};

/* Epochs: python3 -c "import calendar; print(calendar.timegm((2024,2,29,0,0,0)))" etc. */
static const struct time_case time_cases[] = {
    {"2026-11-21T10:00:00Z", KOP_OK, T0},
    {"2026-11-21T10:00:00.123456Z", KOP_OK, T0},
    {"2026-11-21t10:00:00z", KOP_OK, T0},
    {"2026-11-21 10:00:00Z", KOP_OK, T0},
    {"2026-11-21T12:00:00+02:00", KOP_OK, T0},
    {"2026-11-21T05:30:00-04:30", KOP_OK, T0},
    {"2026-11-21T09:59:60Z", KOP_OK, T0},
    {"2024-02-29T00:00:00Z", KOP_OK, 1709164800},
    {"1970-01-01T00:00:00Z", KOP_OK, 0},
    {"2026-02-29T00:00:00Z", KOP_EINVAL, 0},
    {"2026-13-01T00:00:00Z", KOP_EINVAL, 0},
    {"2026-11-31T00:00:00Z", KOP_EINVAL, 0},
    {"2026-11-21T24:00:00Z", KOP_EINVAL, 0},
    {"2026-11-21T10:60:00Z", KOP_EINVAL, 0},
    {"2026-11-21T10:00:00", KOP_EINVAL, 0},
    {"2026-11-21T10:00:00.Z", KOP_EINVAL, 0},
    {"2026-11-21T10:00:00Zjunk", KOP_EINVAL, 0},
    {"2026-11-21T10:00:00+0200", KOP_EINVAL, 0},
    {"2026-1-21T10:00:00Z", KOP_EINVAL, 0},
    {"2026-11-21", KOP_EINVAL, 0},
    {"", KOP_EINVAL, 0},
};

static void test_times(void **state)
{
    (void)state;
    for (size_t i = 0; i < LEN(time_cases); i++) {
        time_t t = -1;
        kop_err err = ctf_parse_time(time_cases[i].s, &t);
        if (err != time_cases[i].err)
            fail_msg("\"%s\": %s", time_cases[i].s, kop_err_name(err));
        if (!err && t != time_cases[i].t)
            fail_msg("\"%s\": %lld, want %lld", time_cases[i].s, (long long)t,
                     (long long)time_cases[i].t);
    }
    char out[CTF_TIME_SIZE];
    assert_int_equal(ctf_format_time(T0, out), KOP_OK);
    assert_string_equal(out, "2026-11-21T10:00:00Z");
    assert_int_equal(ctf_format_time(0, out), KOP_OK);
    assert_string_equal(out, "1970-01-01T00:00:00Z");
    /* Found by fuzzing: years are always four digits, and beyond 9999 refused
     * (RFC 3339 and the CRD's date-time format have no other). */
    assert_int_equal(ctf_format_time((time_t)-43499289600LL, out), KOP_OK); /* 0591-07-... */
    assert_int_equal(strlen(out), 20);
    assert_int_equal(out[0], '0');
    assert_int_equal(ctf_format_time((time_t)253402300800LL, out), KOP_EINVAL); /* 10000-01-01 */
    assert_string_equal(out, "");
    /* Round trip. */
    for (time_t t = T0 - 86400 * 400; t < T0 + 86400 * 400; t += 86400 * 7 + 3599) {
        time_t back;
        assert_int_equal(ctf_format_time(t, out), KOP_OK);
        assert_int_equal(ctf_parse_time(out, &back), KOP_OK);
        assert_int_equal(back, t);
    }
}

struct life_case {
    const char *lifetime; /* spec.lifetime JSON, NULL: absent */
    char op;              /* 'e' expiry, 'r' renew */
    const char *requested;
    time_t expiry; /* current expiry for 'r' (offset from T0) */
    kop_err err;
    time_t want; /* offset from T0 */
};

static const struct life_case life_cases[] = {
    /* Expiry: default, requested, clamped to max and to creation. */
    {NULL, 'e', NULL, 0, KOP_OK, 1800},
    {"{'default':'1h','max':'2h'}", 'e', NULL, 0, KOP_OK, 3600},
    {NULL, 'e', "2026-11-21T11:30:00Z", 0, KOP_OK, 5400},
    {NULL, 'e', "2026-11-21T20:00:00Z", 0, KOP_OK, 7200},
    {"{'max':'3h'}", 'e', "2026-11-21T20:00:00+08:00", 0, KOP_OK, 7200},
    {NULL, 'e', "2026-11-21T09:00:00Z", 0, KOP_OK, 0},
    {NULL, 'e', "tomorrow", 0, KOP_EINVAL, 0},
    {"{'default':'3h'}", 'e', NULL, 0, KOP_EINVAL, 0},
    /* Renewal: extends by renewBy, clamps at max, refuses at max. */
    {NULL, 'r', NULL, 1800, KOP_OK, 3600},
    {NULL, 'r', NULL, 6000, KOP_OK, 7200},
    {NULL, 'r', NULL, 7200, KOP_ECONFLICT, 0},
    {NULL, 'r', NULL, 8000, KOP_ECONFLICT, 0},
    {"{'default':'10m','max':'1h','renewBy':'45m'}", 'r', NULL, 600, KOP_OK, 3300},
    {"{'default':'10m','max':'1h','renewBy':'45m'}", 'r', NULL, 3300, KOP_OK, 3600},
    {"{'renewBy':'soon'}", 'r', NULL, 600, KOP_EINVAL, 0},
};

static void test_lifetimes(void **state)
{
    (void)state;
    for (size_t i = 0; i < LEN(life_cases); i++) {
        const struct life_case *c = &life_cases[i];
        json_t *spec = parse("{}");
        if (c->lifetime)
            json_object_set_new(spec, "lifetime", parse(c->lifetime));
        time_t got = 0;
        kop_status st;
        kop_err err = c->op == 'e' ? ctf_expiry(T0, spec, c->requested, &got, &st)
                                   : ctf_renew(T0, T0 + c->expiry, spec, &got, &st);
        if (err != c->err)
            fail_msg("case %zu: %s, want %s (%s)", i, kop_err_name(err), kop_err_name(c->err),
                     st.message);
        if (!err && got != T0 + c->want)
            fail_msg("case %zu: T0%+lld, want T0%+lld", i, (long long)(got - T0),
                     (long long)c->want);
        if (err == KOP_ECONFLICT)
            assert_int_equal(st.code, 409);
        json_decref(spec);
    }

    ctf_lifetime lt;
    json_t *spec = parse("{'lifetime':{'max':'90m'},'startTimeout':'2m30s'}");
    assert_int_equal(ctf_lifetime_parse(spec, &lt, NULL), KOP_OK);
    assert_int_equal(lt.default_ms, CTF_LIFETIME_DEFAULT_MS);
    assert_int_equal(lt.max_ms, 90 * 60 * 1000);
    assert_int_equal(lt.renew_ms, CTF_LIFETIME_RENEW_MS);
    assert_int_equal(lt.start_timeout_ms, 150000);
    json_decref(spec);
    assert_int_equal(ctf_lifetime_parse(NULL, &lt, NULL), KOP_OK);
    assert_int_equal(lt.start_timeout_ms, CTF_START_TIMEOUT_MS);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_namespace_fixed),
        cmocka_unit_test(test_namespace_distinct),
        cmocka_unit_test(test_namespace_invalid),
        cmocka_unit_test(test_ingress_host),
        cmocka_unit_test(test_validate_samples),
        cmocka_unit_test(test_validate_refuses),
        cmocka_unit_test(test_flag_static_and_none),
        cmocka_unit_test(test_flag_dynamic),
        cmocka_unit_test(test_flag_only_in_secret),
        cmocka_unit_test(test_children_kinds),
        cmocka_unit_test(test_children_metadata),
        cmocka_unit_test(test_definition_untouched),
        cmocka_unit_test(test_challenge_refused),
        cmocka_unit_test(test_hardening),
        cmocka_unit_test(test_harden_exact),
        cmocka_unit_test(test_network_policies),
        cmocka_unit_test(test_quota_and_limits),
        cmocka_unit_test(test_services_and_ingress),
        cmocka_unit_test(test_pod_services),
        cmocka_unit_test(test_default_probes),
        cmocka_unit_test(test_endpoints),
        cmocka_unit_test(test_durations),
        cmocka_unit_test(test_times),
        cmocka_unit_test(test_lifetimes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
