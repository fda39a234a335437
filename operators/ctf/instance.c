/*
 * instance.c - the objects of one CTF instance, built from a
 * ChallengeDefinition and a Challenge (see instance.h and
 * docs/ctf-resources.md).
 *
 * Workload: one call per reconcile of a Challenge; a definition holds at
 * most 10 pods and 10 exposures, so everything is built directly as jansson
 * trees and linear scans are the right data structure.
 *
 * Invariants:
 *  - ctf_build_children only builds from a definition that passed
 *    ctf_validate_definition, so the builders below may rely on its shape
 *    (pods[] non-empty, every exposure names a pod, ports in range).
 *  - The flag string is read in exactly one place, secret_object; the pods
 *    reference the Secret by name.
 *  - Pod templates are deep copies: the definition passed in is never
 *    modified.
 */
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "instance.h"

#define KEY_DEFAULT    "key"
#define PREFIX_DEFAULT "flag{"
#define SUFFIX_DEFAULT "}"
#define FLAG_HEX_LEN   32 /* hex digits of the HMAC in a dynamic flag */
#define HOST_HASH_LEN  10

/* The volume sources restricted Pod Security allows. */
static const char *const VOLUME_SOURCES[] = {
    "configMap", "csi",       "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim",
    "projected", "secret",
};

/* Private and special ranges allow-internet never opens. */
static const char *const PRIVATE_V4[] = {"10.0.0.0/8",    "172.16.0.0/12",  "192.168.0.0/16",
                                         "100.64.0.0/10", "169.254.0.0/16", "127.0.0.0/8"};
static const char *const PRIVATE_V6[] = {"fc00::/7", "fe80::/10", "::1/128"};

#define LEN(a) (sizeof(a) / sizeof((a)[0]))

/* ---- small helpers ------------------------------------------------------ */

static bool str_eq(const char *a, const char *b)
{
    return a && b && strcmp(a, b) == 0;
}

static bool nonempty(const char *s)
{
    return s && *s;
}

/* invalid records a failure of the definition in st and returns KOP_EINVAL. */
static kop_err invalid(kop_status *st, const char *fmt, ...) KOP_PRINTF(2, 3);
static kop_err invalid(kop_status *st, const char *fmt, ...)
{
    if (st) {
        va_list ap;
        st->code = 0;
        snprintf(st->reason, sizeof st->reason, "%s", CTF_REASON_INVALID_DEFINITION);
        va_start(ap, fmt);
        vsnprintf(st->message, sizeof st->message, fmt, ap);
        va_end(ap);
    }
    return KOP_EINVAL;
}

/* put sets obj[key] = v, stealing v; false when v is NULL or memory ran out. */
static bool put(json_t *obj, const char *key, json_t *v)
{
    return v && json_object_set_new(obj, key, v) == 0;
}

/* push appends v to arr, stealing v; false when v is NULL or memory ran out. */
static bool push(json_t *arr, json_t *v)
{
    return v && json_array_append_new(arr, v) == 0;
}

/* child returns obj[key] as an object, replacing whatever else is there. */
static json_t *child(json_t *obj, const char *key)
{
    json_t *o = json_object_get(obj, key);
    if (json_is_object(o))
        return o;
    o = json_object();
    return put(obj, key, o) ? o : NULL;
}

/* child_array returns obj[key] as an array, replacing whatever else is there. */
static json_t *child_array(json_t *obj, const char *key)
{
    json_t *a = json_object_get(obj, key);
    if (json_is_array(a))
        return a;
    a = json_array();
    return put(obj, key, a) ? a : NULL;
}

/* remove_named removes the entries of arr whose "name" is name. */
static void remove_named(json_t *arr, const char *name)
{
    for (size_t i = json_array_size(arr); i-- > 0;)
        if (str_eq(json_string_value(json_object_get(json_array_get(arr, i), "name")), name))
            json_array_remove(arr, i);
}

/* get2 returns obj[a][b], borrowed, or NULL. */
static json_t *get2(const json_t *obj, const char *a, const char *b)
{
    return json_object_get(json_object_get(obj, a), b);
}

static const char *str2(const json_t *obj, const char *a, const char *b)
{
    return json_string_value(get2(obj, a, b));
}

/*
 * sha256_hex writes the first n (even, <= 64) hex digits of SHA-256 over the
 * parts, each followed by a NUL byte.
 */
static kop_err sha256_hex(char *hex, size_t n, const char *const *parts, size_t count)
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    int ok = ctx && EVP_DigestInit_ex(ctx, EVP_sha256(), NULL);
    for (size_t i = 0; ok && i < count; i++)
        ok = EVP_DigestUpdate(ctx, parts[i], strlen(parts[i]) + 1);
    ok = ok && EVP_DigestFinal_ex(ctx, md, &mdlen);
    EVP_MD_CTX_free(ctx);
    if (!ok)
        return KOP_ENOMEM;
    for (size_t i = 0; i < n / 2; i++)
        snprintf(hex + 2 * i, 3, "%02x", md[i]);
    hex[n] = '\0';
    return KOP_OK;
}

/* is_dns1035_label: a DNS-1123 label that starts with a letter (Service names). */
static bool is_dns1035_label(const char *s)
{
    return kop_meta_is_valid_dns1123_label(s) && s[0] >= 'a' && s[0] <= 'z';
}

/* is_svc_port_name: an IANA_SVC_NAME, at most 15 of [a-z0-9-] with a letter, no "--". */
static bool is_svc_port_name(const char *s)
{
    size_t n = strlen(s);
    bool letter = false;
    if (n == 0 || n > 15 || !kop_meta_is_valid_dns1123_label(s) || strstr(s, "--"))
        return false;
    for (size_t i = 0; i < n; i++)
        letter = letter || (s[i] >= 'a' && s[i] <= 'z');
    return letter;
}

/* ---- names -------------------------------------------------------------- */

kop_err ctf_instance_namespace(const char *challenge_ns, const char *definition, const char *team,
                               char *out, size_t size)
{
    char part[CTF_NAMESPACE_DEF_MAX + 1];
    char hex[CTF_NAMESPACE_HASH_LEN + 1];
    size_t n = 0;

    if (out && size)
        out[0] = '\0';
    if (!out || size < CTF_NAMESPACE_SIZE || !nonempty(challenge_ns) || !nonempty(definition) ||
        !nonempty(team))
        return KOP_EINVAL;

    /* The definition, lower-cased, runs of other characters as one '-', cut. */
    for (const char *p = definition; *p && n < CTF_NAMESPACE_DEF_MAX; p++) {
        char c = *p >= 'A' && *p <= 'Z' ? (char)(*p - 'A' + 'a') : *p;
        bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
        if (alnum)
            part[n++] = c;
        else if (n > 0 && part[n - 1] != '-')
            part[n++] = '-';
    }
    while (n > 0 && part[n - 1] == '-')
        n--;
    part[n] = '\0';

    const char *parts[] = {challenge_ns, definition, team};
    kop_err err = sha256_hex(hex, CTF_NAMESPACE_HASH_LEN, parts, LEN(parts));
    if (err)
        return err;
    snprintf(out, size, "ctf-%s%s%s", part, n ? "-" : "", hex);
    return KOP_OK;
}

kop_err ctf_ingress_host(const ctf_config *cfg, const char *expose, const char *ns, char *out,
                         size_t size)
{
    char full[2 * CTF_HOST_SIZE], hex[HOST_HASH_LEN + 1];
    int keep;

    if (out && size)
        out[0] = '\0';
    if (!cfg || !nonempty(cfg->ingress_domain) || !nonempty(expose) || !nonempty(ns) || !out ||
        strlen(expose) + strlen(ns) >= CTF_HOST_SIZE)
        return KOP_EINVAL;
    snprintf(full, sizeof full, "%s-%s", expose, ns);
    hex[0] = '\0';
    keep = (int)strlen(full);
    if (keep > KOP_META_DNS1123_LABEL_MAX) {
        /* Too long for one label: keep the start, then a hash of the whole. */
        const char *parts[] = {expose, ns};
        kop_err err = sha256_hex(hex, HOST_HASH_LEN, parts, LEN(parts));
        if (err)
            return err;
        keep = KOP_META_DNS1123_LABEL_MAX - HOST_HASH_LEN - 1;
        while (keep > 0 && full[keep - 1] == '-')
            keep--;
    }
    int w = snprintf(out, size, "%.*s%s%s.%s", keep, full, hex[0] ? "-" : "", hex,
                     cfg->ingress_domain);
    if (w < 0 || (size_t)w >= size || (size_t)w > KOP_META_DNS1123_SUBDOMAIN_MAX) {
        out[0] = '\0';
        return KOP_EINVAL;
    }
    return KOP_OK;
}

/* ---- validation --------------------------------------------------------- */

/*
 * is_positive_quantity accepts a Kubernetes quantity greater than zero:
 * [+]digits[.digits] with an optional SI or binary suffix or exponent.
 */
static bool is_positive_quantity(const char *s)
{
    static const char *const suffixes[] = {"",  "n", "u", "m",  "k",  "M",  "G",  "T",
                                           "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"};
    const char *p = s;
    bool digit = false, nonzero = false, dot = false;

    if (*p == '+')
        p++;
    for (; *p; p++) {
        if (*p >= '0' && *p <= '9') {
            digit = true;
            nonzero = nonzero || *p != '0';
        } else if (*p == '.' && !dot) {
            dot = true;
        } else {
            break;
        }
    }
    if (!digit || !nonzero)
        return false;
    for (size_t i = 0; i < LEN(suffixes); i++)
        if (strcmp(p, suffixes[i]) == 0)
            return true;
    if (*p != 'e' && *p != 'E')
        return false;
    p++;
    if (*p == '+' || *p == '-')
        p++;
    if (!(*p >= '0' && *p <= '9'))
        return false;
    while (*p >= '0' && *p <= '9')
        p++;
    return *p == '\0';
}

/* check_security_context refuses what restricted Pod Security refuses in sc. */
static kop_err check_security_context(const json_t *sc, const char *where, kop_status *st)
{
    const json_t *add = get2(sc, "capabilities", "add");
    size_t i;
    const json_t *cap;

    if (json_is_true(json_object_get(sc, "privileged")))
        return invalid(st, "%s asks to be privileged, which instances may not be.", where);
    const json_t *uid = json_object_get(sc, "runAsUser");
    if (json_is_integer(uid) && json_integer_value(uid) == 0)
        return invalid(st, "%s sets runAsUser 0; instances run as a non-root user.", where);
    json_array_foreach(add, i, cap)
    {
        if (!str_eq(json_string_value(cap), "NET_BIND_SERVICE"))
            return invalid(st, "%s adds capability %s; only NET_BIND_SERVICE is allowed.", where,
                           json_string_value(cap) ? json_string_value(cap) : "(not a string)");
    }
    return KOP_OK;
}

/*
 * check_container checks one container or initContainer; names collects the
 * names seen in the pod so far (a set, as a JSON object).
 */
static kop_err check_container(const json_t *c, const char *where, json_t *names, kop_status *st)
{
    size_t i;
    const json_t *v;

    if (!json_is_object(c))
        return invalid(st, "%s must be an object.", where);
    const char *name = json_string_value(json_object_get(c, "name"));
    if (!kop_meta_is_valid_dns1123_label(name))
        return invalid(st, "%s.name is missing or not a DNS label.", where);
    if (json_object_get(names, name))
        return invalid(st, "%s.name \"%s\" is used by two containers of the pod.", where, name);
    if (json_object_set_new(names, name, json_true()) != 0)
        return KOP_ENOMEM;
    if (!nonempty(json_string_value(json_object_get(c, "image"))))
        return invalid(st, "%s (%s) has no image.", where, name);
    json_array_foreach(json_object_get(c, "ports"), i, v)
    {
        const json_t *hp = json_object_get(v, "hostPort");
        if (json_is_integer(hp) && json_integer_value(hp) != 0)
            return invalid(st, "%s.ports[%zu] sets hostPort, which instances may not use.", where,
                           i);
    }
    json_array_foreach(json_object_get(c, "volumeMounts"), i, v)
    {
        const char *path = json_string_value(json_object_get(v, "mountPath"));
        if (path && strncmp(path, CTF_FLAG_MOUNT_PATH, strlen(CTF_FLAG_MOUNT_PATH)) == 0 &&
            (path[strlen(CTF_FLAG_MOUNT_PATH)] == '\0' ||
             path[strlen(CTF_FLAG_MOUNT_PATH)] == '/'))
            return invalid(st, "%s mounts a volume at %s, which is reserved for the flag.", where,
                           path);
    }
    return check_security_context(json_object_get(c, "securityContext"), where, st);
}

/* check_volumes refuses volume types restricted Pod Security refuses, and the name "flag". */
static kop_err check_volumes(const json_t *volumes, const char *where, kop_status *st)
{
    size_t i;
    const json_t *vol;

    json_array_foreach(volumes, i, vol)
    {
        const char *name = json_string_value(json_object_get(vol, "name"));
        const char *key;
        const json_t *src;
        if (str_eq(name, CTF_FLAG_SECRET))
            return invalid(st, "%s.volumes[%zu] is named \"flag\", which is reserved for the flag.",
                           where, i);
        json_object_foreach((json_t *)vol, key, src)
        {
            bool allowed = strcmp(key, "name") == 0;
            for (size_t k = 0; k < LEN(VOLUME_SOURCES) && !allowed; k++)
                allowed = strcmp(key, VOLUME_SOURCES[k]) == 0;
            if (!allowed)
                return invalid(st, "%s.volumes[%zu] uses %s, which instances may not use.", where,
                               i, key);
        }
    }
    return KOP_OK;
}

/* check_pod_spec checks spec.pods[index].template. */
static kop_err check_pod_spec(const json_t *tmpl, size_t index, kop_status *st)
{
    static const char *const host_fields[] = {"hostNetwork", "hostPID", "hostIPC"};
    static const char *const lists[] = {"initContainers", "containers"};
    char where[96];
    kop_err err = KOP_OK;

    snprintf(where, sizeof where, "spec.pods[%zu].template", index);
    if (!json_is_object(tmpl))
        return invalid(st, "%s is missing.", where);
    for (size_t i = 0; i < LEN(host_fields); i++)
        if (json_is_true(json_object_get(tmpl, host_fields[i])))
            return invalid(st, "%s sets %s, which instances may not use.", where, host_fields[i]);
    const json_t *containers = json_object_get(tmpl, "containers");
    if (json_array_size(containers) == 0)
        return invalid(st, "%s.containers must list at least one container.", where);
    err = check_volumes(json_object_get(tmpl, "volumes"), where, st);
    if (!err)
        err = check_security_context(json_object_get(tmpl, "securityContext"), where, st);

    json_t *names = json_object();
    if (!names)
        return KOP_ENOMEM;
    for (size_t l = 0; !err && l < LEN(lists); l++) {
        const json_t *list = json_object_get(tmpl, lists[l]);
        if (list && !json_is_array(list)) {
            err = invalid(st, "%s.%s must be a list.", where, lists[l]);
            break;
        }
        for (size_t i = 0; !err && i < json_array_size(list); i++) {
            char cw[128];
            snprintf(cw, sizeof cw, "%s.%s[%zu]", where, lists[l], i);
            err = check_container(json_array_get(list, i), cw, names, st);
        }
    }
    json_decref(names);
    return err;
}

/* find_pod returns the entry of spec.pods named name, borrowed, or NULL. */
static const json_t *find_pod(const json_t *spec, const char *name)
{
    size_t i;
    const json_t *pod;
    json_array_foreach(json_object_get(spec, "pods"), i, pod)
    {
        if (str_eq(json_string_value(json_object_get(pod, "name")), name))
            return pod;
    }
    return NULL;
}

static kop_err check_pods(const json_t *spec, kop_status *st)
{
    const json_t *pods = json_object_get(spec, "pods");
    size_t n = json_array_size(pods);

    if (!json_is_array(pods) || n < 1 || n > 10)
        return invalid(st, "spec.pods must list 1 to 10 pods.");
    for (size_t i = 0; i < n; i++) {
        const json_t *pod = json_array_get(pods, i);
        const char *name = json_string_value(json_object_get(pod, "name"));
        if (!kop_meta_is_valid_dns1123_label(name))
            return invalid(st, "spec.pods[%zu].name is missing or not a DNS label.", i);
        for (size_t j = 0; j < i; j++)
            if (str_eq(json_string_value(json_object_get(json_array_get(pods, j), "name")), name))
                return invalid(st, "spec.pods[%zu].name \"%s\" is used twice.", i, name);
        const json_t *replicas = json_object_get(pod, "replicas");
        if (replicas && (!json_is_integer(replicas) || json_integer_value(replicas) < 1 ||
                         json_integer_value(replicas) > 5))
            return invalid(st, "spec.pods[%zu].replicas must be 1 to 5.", i);
        kop_err err = check_pod_spec(json_object_get(pod, "template"), i, st);
        if (err)
            return err;
    }
    return KOP_OK;
}

/* pod_declares_port tells whether the pod's containers declare any port, and whether port. */
static bool pod_declares_port(const json_t *pod, json_int_t port, bool *any)
{
    size_t i, j;
    const json_t *c, *p;
    *any = false;
    json_array_foreach(get2(pod, "template", "containers"), i, c)
    {
        json_array_foreach(json_object_get(c, "ports"), j, p)
        {
            *any = true;
            if (json_integer_value(json_object_get(p, "containerPort")) == port)
                return true;
        }
    }
    return false;
}

static kop_err check_expose(const json_t *spec, kop_status *st)
{
    const json_t *expose = json_object_get(spec, "expose");
    size_t n = json_array_size(expose);

    if (expose && (!json_is_array(expose) || n > 10))
        return invalid(st, "spec.expose must list at most 10 exposures.");
    for (size_t i = 0; i < n; i++) {
        const json_t *e = json_array_get(expose, i);
        const char *name = json_string_value(json_object_get(e, "name"));
        const char *pod = json_string_value(json_object_get(e, "pod"));
        const json_t *port = json_object_get(e, "port");
        const json_t *type = json_object_get(e, "type");
        bool any = false;

        if (!is_dns1035_label(name))
            return invalid(st,
                           "spec.expose[%zu].name is missing or not a DNS label starting with a "
                           "letter.",
                           i);
        for (size_t j = 0; j < i; j++)
            if (str_eq(json_string_value(json_object_get(json_array_get(expose, j), "name")),
                       name))
                return invalid(st, "spec.expose[%zu].name \"%s\" is used twice.", i, name);
        const json_t *target = find_pod(spec, pod);
        if (!target)
            return invalid(st, "spec.expose[%zu] (%s) names pod \"%s\", which is not in spec.pods.",
                           i, name, pod ? pod : "");
        if (!json_is_integer(port) || json_integer_value(port) < 1 ||
            json_integer_value(port) > 65535)
            return invalid(st, "spec.expose[%zu].port must be 1 to 65535.", i);
        if (type && !str_eq(json_string_value(type), "HTTP") &&
            !str_eq(json_string_value(type), "TCP"))
            return invalid(st, "spec.expose[%zu].type must be HTTP or TCP.", i);
        if (!pod_declares_port(target, json_integer_value(port), &any) && any)
            return invalid(st,
                           "spec.expose[%zu] (%s) exposes port %" JSON_INTEGER_FORMAT
                           ", which no container of pod %s declares.",
                           i, name, json_integer_value(port), pod);
    }
    return KOP_OK;
}

static kop_err check_flag(const json_t *spec, kop_status *st)
{
    const json_t *flag = json_object_get(spec, "flag");
    const json_t *stat = json_object_get(flag, "static");
    const json_t *dyn = json_object_get(flag, "dynamic");

    if (!flag || json_is_null(flag))
        return KOP_OK;
    if (!json_is_object(flag))
        return invalid(st, "spec.flag must be an object.");
    if (stat && dyn)
        return invalid(st, "spec.flag sets both static and dynamic; choose one.");
    if (stat && !nonempty(json_string_value(stat)))
        return invalid(st, "spec.flag.static must be a non-empty string.");
    if (dyn) {
        const json_t *key = get2(dyn, "secretRef", "key");
        if (!kop_meta_is_valid_dns1123_subdomain(str2(dyn, "secretRef", "name")))
            return invalid(st, "spec.flag.dynamic.secretRef.name must name a Secret.");
        if (key && !nonempty(json_string_value(key)))
            return invalid(st, "spec.flag.dynamic.secretRef.key must be a non-empty string.");
        if (json_object_get(dyn, "prefix") && !json_is_string(json_object_get(dyn, "prefix")))
            return invalid(st, "spec.flag.dynamic.prefix must be a string.");
        if (json_object_get(dyn, "suffix") && !json_is_string(json_object_get(dyn, "suffix")))
            return invalid(st, "spec.flag.dynamic.suffix must be a string.");
    }
    return KOP_OK;
}

static kop_err check_settings(const json_t *spec, kop_status *st)
{
    const json_t *egress = get2(spec, "network", "egress");
    const json_t *sec = json_object_get(spec, "security");
    const json_t *ro = json_object_get(sec, "readOnlyRootFilesystem");
    const json_t *rc = json_object_get(sec, "runtimeClassName");
    static const char *const res[] = {"cpu", "memory"};

    if (egress && !str_eq(json_string_value(egress), "None") &&
        !str_eq(json_string_value(egress), "Internet"))
        return invalid(st, "spec.network.egress must be None or Internet.");
    if (ro && !json_is_boolean(ro))
        return invalid(st, "spec.security.readOnlyRootFilesystem must be true or false.");
    if (rc && !kop_meta_is_valid_dns1123_subdomain(json_string_value(rc)))
        return invalid(st, "spec.security.runtimeClassName must name a RuntimeClass.");
    for (size_t i = 0; i < LEN(res); i++) {
        const json_t *q = get2(spec, "resources", res[i]);
        if (q && !(json_is_integer(q) && json_integer_value(q) > 0) &&
            !(json_is_string(q) && is_positive_quantity(json_string_value(q))))
            return invalid(st, "spec.resources.%s must be a positive quantity such as 500m or 1Gi.",
                           res[i]);
    }
    return KOP_OK;
}

kop_err ctf_validate_definition(const json_t *def, kop_status *st)
{
    const json_t *spec = json_object_get(def, "spec");
    kop_err err;

    kop_status_clear(st);
    if (!json_is_object(spec))
        return invalid(st, "The definition has no spec.");
    err = check_pods(spec, st);
    if (!err)
        err = check_expose(spec, st);
    if (!err)
        err = check_flag(spec, st);
    if (!err)
        err = ctf_lifetime_parse(spec, NULL, st);
    if (!err)
        err = check_settings(spec, st);
    return err;
}

/* ---- the flag ----------------------------------------------------------- */

bool ctf_flag_secret_ref(const json_t *def, const char **name, const char **key)
{
    const json_t *dyn = get2(json_object_get(def, "spec"), "flag", "dynamic");
    if (!json_is_object(dyn))
        return false;
    const char *k = str2(dyn, "secretRef", "key");
    if (name)
        *name = str2(dyn, "secretRef", "name");
    if (key)
        *key = nonempty(k) ? k : KEY_DEFAULT;
    return true;
}

kop_err ctf_secret_value(const json_t *secret, const char *key, unsigned char **out,
                         size_t *len)
{
    const char *in = json_string_value(json_object_get(json_object_get(secret, "data"), key));
    *out = NULL;
    *len = 0;
    if (!in)
        return KOP_ENOTFOUND;
    size_t n = strlen(in);
    if (n > INT_MAX / 2)
        return KOP_EPARSE;
    unsigned char *buf = malloc(n / 4 * 3 + 4);
    if (!buf)
        return KOP_ENOMEM;
    int got = EVP_DecodeBlock(buf, (const unsigned char *)in, (int)n);
    if (got < 0) {
        free(buf);
        return KOP_EPARSE;
    }
    while (n > 0 && in[n - 1] == '=') { /* EVP_DecodeBlock counts padding as bytes */
        got--;
        n--;
    }
    buf[got] = '\0';
    *out = buf;
    *len = (size_t)got;
    return KOP_OK;
}

/* dynamic_flag computes prefix + hex(HMAC-SHA256(key, "def:team"))[0:32] + suffix. */
static kop_err dynamic_flag(const json_t *dyn, const char *definition, const char *team,
                            const unsigned char *key, size_t key_len, char **out, kop_status *st)
{
    const json_t *p = json_object_get(dyn, "prefix"), *s = json_object_get(dyn, "suffix");
    const char *prefix = json_is_string(p) ? json_string_value(p) : PREFIX_DEFAULT;
    const char *suffix = json_is_string(s) ? json_string_value(s) : SUFFIX_DEFAULT;
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    char *msg = NULL;
    kop_err err = KOP_ENOMEM;

    if (!nonempty(definition) || !nonempty(team)) {
        kop_status_setf(st, 0, NULL, "A dynamic flag needs the definition and the team.");
        return KOP_EINVAL;
    }
    if (!key || key_len == 0 || key_len > (size_t)INT32_MAX) {
        kop_status_setf(st, 0, NULL, "The HMAC key of the dynamic flag is empty.");
        return KOP_EINVAL;
    }
    size_t msg_len = strlen(definition) + 1 + strlen(team);
    msg = malloc(msg_len + 1);
    if (!msg)
        goto out;
    snprintf(msg, msg_len + 1, "%s:%s", definition, team);
    if (!HMAC(EVP_sha256(), key, (int)key_len, (const unsigned char *)msg, msg_len, md, &mdlen) ||
        mdlen < FLAG_HEX_LEN / 2)
        goto out;

    size_t size = strlen(prefix) + FLAG_HEX_LEN + strlen(suffix) + 1;
    char *flag = malloc(size);
    if (!flag)
        goto out;
    size_t n = (size_t)snprintf(flag, size, "%s", prefix);
    for (size_t i = 0; i < FLAG_HEX_LEN / 2; i++, n += 2)
        snprintf(flag + n, size - n, "%02x", md[i]);
    snprintf(flag + n, size - n, "%s", suffix);
    *out = flag;
    err = KOP_OK;
out:
    OPENSSL_cleanse(md, sizeof md);
    free(msg);
    if (err == KOP_ENOMEM)
        kop_status_setf(st, 0, NULL, "Computing the dynamic flag failed.");
    return err;
}

kop_err ctf_flag(const json_t *def, const char *definition_name, const char *team,
                 const unsigned char *key, size_t key_len, char **out, kop_status *st)
{
    const json_t *flag = json_object_get(json_object_get(def, "spec"), "flag");
    const json_t *stat = json_object_get(flag, "static");
    const json_t *dyn = json_object_get(flag, "dynamic");

    if (!out)
        return KOP_EINVAL;
    *out = NULL;
    if (!json_is_object(json_object_get(def, "spec")))
        return invalid(st, "The definition has no spec.");
    if (json_is_string(stat)) {
        *out = strdup(json_string_value(stat));
        return *out ? KOP_OK : KOP_ENOMEM;
    }
    if (json_is_object(dyn))
        return dynamic_flag(dyn, definition_name, team, key, key_len, out, st);
    return KOP_OK; /* no flag: the challenge prints its own */
}

/* ---- labels ------------------------------------------------------------- */

kop_err ctf_instance_labels(const json_t *challenge, json_t **out, kop_status *st)
{
    const json_t *spec = json_object_get(challenge, "spec");
    const char *fields[][2] = {
        {"metadata.name", kop_meta_name(challenge)},
        {"metadata.namespace", kop_meta_namespace(challenge)},
        {"spec.definition", json_string_value(json_object_get(spec, "definition"))},
        {"spec.team", json_string_value(json_object_get(spec, "team"))},
    };

    if (!out)
        return KOP_EINVAL;
    *out = NULL;
    for (size_t i = 0; i < LEN(fields); i++) {
        if (!nonempty(fields[i][1]) || !kop_meta_is_valid_label_value(fields[i][1])) {
            kop_status_setf(st, 0, "InvalidChallenge",
                            "The challenge's %s is missing or longer than 63 characters.",
                            fields[i][0]);
            return KOP_EINVAL;
        }
    }
    *out = json_pack("{s:s, s:s, s:s, s:s, s:s}", CTF_LABEL_MANAGED_BY, CTF_MANAGED_BY,
                     CTF_LABEL_TEAM, fields[3][1], CTF_LABEL_DEFINITION, fields[2][1],
                     CTF_LABEL_CHALLENGE, fields[0][1], CTF_LABEL_CHALLENGE_NS, fields[1][1]);
    return *out ? KOP_OK : KOP_ENOMEM;
}

/* ---- hardening ---------------------------------------------------------- */

/* ensure_seccomp makes sc's seccompProfile RuntimeDefault unless it is RuntimeDefault or
 * Localhost; when absent it is added only if required. */
static bool ensure_seccomp(json_t *sc, bool required)
{
    const json_t *prof = json_object_get(sc, "seccompProfile");
    const char *type = json_string_value(json_object_get(prof, "type"));
    if (str_eq(type, "RuntimeDefault") || str_eq(type, "Localhost"))
        return true;
    if (!prof && !required)
        return true;
    return put(sc, "seccompProfile", json_pack("{s:s}", "type", "RuntimeDefault"));
}

/* adds_net_bind tells whether sc.capabilities.add holds NET_BIND_SERVICE. */
static bool adds_net_bind(const json_t *sc)
{
    size_t i;
    const json_t *cap;
    json_array_foreach(get2(sc, "capabilities", "add"), i, cap)
    {
        if (str_eq(json_string_value(cap), "NET_BIND_SERVICE"))
            return true;
    }
    return false;
}

static bool has_entries(const json_t *obj)
{
    return json_is_object(obj) && json_object_size(obj) > 0;
}

static bool harden_container(json_t *c, bool read_only, bool with_flag)
{
    json_t *sc = child(c, "securityContext");
    if (!sc)
        return false;
    bool keep_bind = adds_net_bind(sc);
    json_t *caps = json_pack("{s:[s]}", "drop", "ALL");
    bool ok = caps && (!keep_bind || put(caps, "add", json_pack("[s]", "NET_BIND_SERVICE")));
    ok = put(sc, "capabilities", caps) && ok;
    ok = ok && put(sc, "allowPrivilegeEscalation", json_false()) &&
         put(sc, "privileged", json_false()) && put(sc, "runAsNonRoot", json_true()) &&
         ensure_seccomp(sc, false);
    if (ok && read_only)
        ok = put(sc, "readOnlyRootFilesystem", json_true());

    /* Default resources only when the template sets none at all. */
    json_t *res = json_object_get(c, "resources");
    if (ok && !has_entries(json_object_get(res, "requests")) &&
        !has_entries(json_object_get(res, "limits"))) {
        res = child(c, "resources");
        ok = res &&
             put(res, "requests", json_pack("{s:s, s:s}", "cpu", "50m", "memory", "64Mi")) &&
             put(res, "limits", json_pack("{s:s, s:s}", "cpu", "500m", "memory", "256Mi"));
    }

    if (ok && with_flag) {
        json_t *env = child_array(c, "env");
        json_t *mounts = child_array(c, "volumeMounts");
        ok = env && mounts;
        if (ok) {
            remove_named(env, CTF_FLAG_ENV);
            remove_named(mounts, CTF_FLAG_SECRET);
            ok = json_array_insert_new(env, 0,
                                       json_pack("{s:s, s:{s:{s:s, s:s}}}", "name", CTF_FLAG_ENV,
                                                 "valueFrom", "secretKeyRef", "name",
                                                 CTF_FLAG_SECRET, "key", CTF_FLAG_KEY)) == 0 &&
                 push(mounts, json_pack("{s:s, s:s, s:b}", "name", CTF_FLAG_SECRET, "mountPath",
                                        CTF_FLAG_MOUNT_PATH, "readOnly", 1));
        }
    }
    return ok;
}

kop_err ctf_harden_pod_spec(json_t *spec, const json_t *security, bool with_flag)
{
    static const char *const lists[] = {"initContainers", "containers"};
    const char *runtime_class = json_string_value(json_object_get(security, "runtimeClassName"));
    bool read_only = json_is_true(json_object_get(security, "readOnlyRootFilesystem"));

    if (!json_is_object(spec))
        return KOP_EINVAL;
    json_object_del(spec, "hostNetwork");
    json_object_del(spec, "hostPID");
    json_object_del(spec, "hostIPC");
    bool ok = put(spec, "automountServiceAccountToken", json_false()) &&
              put(spec, "enableServiceLinks", json_false());
    json_t *psc = ok ? child(spec, "securityContext") : NULL;
    ok = psc && put(psc, "runAsNonRoot", json_true()) && ensure_seccomp(psc, true);
    if (ok && nonempty(runtime_class))
        ok = put(spec, "runtimeClassName", json_string(runtime_class));

    for (size_t l = 0; ok && l < LEN(lists); l++) {
        size_t i;
        json_t *c;
        json_array_foreach(json_object_get(spec, lists[l]), i, c)
        {
            if (json_is_object(c))
                ok = ok && harden_container(c, read_only, with_flag);
        }
    }
    if (ok && with_flag) {
        json_t *volumes = child_array(spec, "volumes");
        ok = volumes != NULL;
        if (ok) {
            remove_named(volumes, CTF_FLAG_SECRET);
            ok = push(volumes, json_pack("{s:s, s:{s:s, s:[{s:s, s:s}], s:i}}", "name",
                                         CTF_FLAG_SECRET, "secret", "secretName", CTF_FLAG_SECRET,
                                         "items", "key", CTF_FLAG_KEY, "path", CTF_FLAG_KEY,
                                         "defaultMode", 0444));
        }
    }
    return ok ? KOP_OK : KOP_ENOMEM;
}

/* ---- the children ------------------------------------------------------- */

/* inst is what every builder needs: the definition, the names and the labels. */
struct inst {
    const ctf_config *cfg;
    const json_t *spec;       /* the definition's spec, validated */
    const json_t *challenge;  /* the Challenge */
    json_t *labels;           /* ctf_instance_labels, owned */
    char ns[CTF_NAMESPACE_SIZE];
};

/* labels_for returns a new copy of the instance labels, plus ctf.kopc.io/pod when pod is set. */
static json_t *labels_for(const struct inst *in, const char *pod)
{
    json_t *l = json_deep_copy(in->labels);
    if (l && pod && json_object_set_new(l, CTF_LABEL_POD, json_string(pod)) != 0) {
        json_decref(l);
        return NULL;
    }
    return l;
}

/* meta returns {name, namespace, labels} for an object of the instance. */
static json_t *meta(const struct inst *in, const char *name, const char *pod)
{
    return json_pack("{s:s, s:s, s:o}", "name", name, "namespace", in->ns, "labels",
                     labels_for(in, pod));
}

/* object returns {apiVersion, kind, metadata, <key>: body}, stealing metadata and body. */
static json_t *object(const char *api_version, const char *kind, json_t *metadata,
                      const char *key, json_t *body)
{
    return json_pack("{s:s, s:s, s:o, s:o}", "apiVersion", api_version, "kind", kind, "metadata",
                     metadata, key, body);
}

static bool is_http(const json_t *expose)
{
    return str_eq(json_string_value(json_object_get(expose, "type")), "HTTP");
}

static bool use_ingress(const struct inst *in, const json_t *expose)
{
    return is_http(expose) && nonempty(in->cfg->ingress_domain);
}

static json_t *namespace_object(const struct inst *in)
{
    const char *uid = kop_meta_uid(in->challenge);
    json_t *labels = labels_for(in, NULL);
    if (!labels || json_object_set_new(labels, "pod-security.kubernetes.io/enforce",
                                       json_string("restricted")) != 0 ||
        json_object_set_new(labels, "pod-security.kubernetes.io/enforce-version",
                            json_string("latest")) != 0) {
        json_decref(labels);
        return NULL;
    }
    json_t *annotations = uid ? json_pack("{s:s}", CTF_ANNOTATION_CHALLENGE_UID, uid) : NULL;
    return json_pack("{s:s, s:s, s:{s:s, s:o, s:o*}}", "apiVersion", "v1", "kind", "Namespace",
                     "metadata", "name", in->ns, "labels", labels, "annotations", annotations);
}

/* secret_object is the only place the flag goes: base64 in data.flag. */
static json_t *secret_object(const struct inst *in, const char *flag)
{
    size_t n = strlen(flag);
    char *b64 = malloc(4 * ((n + 2) / 3) + 1);
    if (!b64)
        return NULL;
    EVP_EncodeBlock((unsigned char *)b64, (const unsigned char *)flag, (int)n);
    json_t *secret = json_pack("{s:s, s:s, s:o, s:s, s:{s:s}}", "apiVersion", "v1", "kind",
                               "Secret", "metadata", meta(in, CTF_FLAG_SECRET, NULL), "type",
                               "Opaque", "data", CTF_FLAG_KEY, b64);
    OPENSSL_cleanse(b64, strlen(b64));
    free(b64);
    return secret;
}

/* quantity returns spec.resources[key] as a string (integers converted), or dflt. */
static json_t *quantity(const struct inst *in, const char *key, const char *dflt)
{
    const json_t *q = get2(in->spec, "resources", key);
    if (json_is_integer(q))
        return json_sprintf("%" JSON_INTEGER_FORMAT, json_integer_value(q));
    return json_string(json_is_string(q) ? json_string_value(q) : dflt);
}

static json_t *quota_object(const struct inst *in)
{
    json_t *hard = json_pack("{s:o, s:o, s:o, s:o, s:s, s:s, s:s, s:s, s:s, s:s}", "limits.cpu",
                             quantity(in, "cpu", "1"), "limits.memory",
                             quantity(in, "memory", "1Gi"), "requests.cpu",
                             quantity(in, "cpu", "1"), "requests.memory",
                             quantity(in, "memory", "1Gi"), "pods", "20", "services", "20",
                             "services.nodeports", "10", "secrets", "10", "configmaps", "10",
                             "persistentvolumeclaims", "0");
    return object("v1", "ResourceQuota", meta(in, "instance", NULL), "spec",
                  json_pack("{s:o}", "hard", hard));
}

static json_t *limit_range_object(const struct inst *in)
{
    return object("v1", "LimitRange", meta(in, "defaults", NULL), "spec",
                  json_pack("{s:[{s:s, s:{s:s, s:s}, s:{s:s, s:s}}]}", "limits", "type",
                            "Container", "default", "cpu", "500m", "memory", "256Mi",
                            "defaultRequest", "cpu", "50m", "memory", "64Mi"));
}

static json_t *policy(const struct inst *in, const char *name, json_t *spec)
{
    return object("networking.k8s.io/v1", "NetworkPolicy", meta(in, name, NULL), "spec", spec);
}

/* exposed_policy opens the ports exposed on pod (from anywhere) to that pod only. */
static json_t *exposed_policy(const struct inst *in, const char *pod)
{
    char name[KOP_META_DNS1123_SUBDOMAIN_MAX + 1];
    json_t *ports = json_array();
    size_t i;
    const json_t *e;

    json_array_foreach(json_object_get(in->spec, "expose"), i, e)
    {
        if (!str_eq(json_string_value(json_object_get(e, "pod")), pod))
            continue;
        json_int_t port = json_integer_value(json_object_get(e, "port"));
        bool seen = false;
        for (size_t j = 0; j < json_array_size(ports) && !seen; j++)
            seen = json_integer_value(json_object_get(json_array_get(ports, j), "port")) == port;
        if (!seen && !push(ports, json_pack("{s:s, s:I}", "protocol", "TCP", "port", port))) {
            json_decref(ports);
            return NULL;
        }
    }
    snprintf(name, sizeof name, "allow-exposed-%s", pod);
    /* No "from": any source, since NodePort and Ingress traffic arrive from outside. */
    return policy(in, name,
                  json_pack("{s:{s:{s:s}}, s:[s], s:[{s:o}]}", "podSelector", "matchLabels",
                            CTF_LABEL_POD, pod, "policyTypes", "Ingress", "ingress", "ports",
                            ports));
}

/* ip_block returns {ipBlock: {cidr, except}}. */
static json_t *ip_block(const char *cidr, const char *const *except, size_t n)
{
    json_t *ex = json_array();
    for (size_t i = 0; ex && i < n; i++) {
        if (!push(ex, json_string(except[i]))) {
            json_decref(ex);
            return NULL;
        }
    }
    return json_pack("{s:{s:s, s:o}}", "ipBlock", "cidr", cidr, "except", ex);
}

/* network_policies appends the instance's NetworkPolicies to out, in apply order. */
static bool network_policies(const struct inst *in, json_t *out)
{
    const json_t *expose = json_object_get(in->spec, "expose");
    bool ok = push(out, policy(in, "default-deny",
                               json_pack("{s:{}, s:[s, s]}", "podSelector", "policyTypes",
                                         "Ingress", "Egress")));

    /* One allow-exposed per exposed pod, in the order the pods are first exposed. */
    for (size_t i = 0; ok && i < json_array_size(expose); i++) {
        const char *pod = json_string_value(json_object_get(json_array_get(expose, i), "pod"));
        bool first = true;
        for (size_t j = 0; j < i && first; j++)
            first = !str_eq(json_string_value(json_object_get(json_array_get(expose, j), "pod")),
                            pod);
        if (first)
            ok = push(out, exposed_policy(in, pod));
    }

    ok = ok && push(out, policy(in, "allow-same-instance",
                                json_pack("{s:{}, s:[s, s], s:[{s:[{s:{}}]}], s:[{s:[{s:{}}]}]}",
                                          "podSelector", "policyTypes", "Ingress", "Egress",
                                          "ingress", "from", "podSelector", "egress", "to",
                                          "podSelector")));
    ok = ok && push(out, policy(in, "allow-dns",
                                json_pack("{s:{}, s:[s], s:[{s:[{s:{s:{s:s}}}], s:[{s:s, s:i}, "
                                          "{s:s, s:i}]}]}",
                                          "podSelector", "policyTypes", "Egress", "egress", "to",
                                          "namespaceSelector", "matchLabels",
                                          "kubernetes.io/metadata.name", "kube-system", "ports",
                                          "protocol", "UDP", "port", 53, "protocol", "TCP", "port",
                                          53)));
    if (ok && str_eq(str2(in->spec, "network", "egress"), "Internet"))
        ok = push(out, policy(in, "allow-internet",
                              json_pack("{s:{}, s:[s], s:[{s:[o, o]}]}", "podSelector",
                                        "policyTypes", "Egress", "egress", "to",
                                        ip_block("0.0.0.0/0", PRIVATE_V4, LEN(PRIVATE_V4)),
                                        ip_block("::/0", PRIVATE_V6, LEN(PRIVATE_V6)))));
    return ok;
}

/* ---- readiness: Running means the instance answers ---------------------- */

/* declares_port reports whether container lists port among its containerPorts. */
static bool declares_port(const json_t *container, json_int_t port)
{
    size_t i;
    const json_t *p;
    json_array_foreach(json_object_get(container, "ports"), i, p)
    {
        if (json_integer_value(json_object_get(p, "containerPort")) == port)
            return true;
    }
    return false;
}

/*
 * probe_port returns the port the default readiness probe of container c of
 * pod checks, or 0 for none: the first exposure of the pod on a port the
 * container declares (validation makes every exposed port declared), else
 * the first TCP port the container declares, so that an unexposed pod (a
 * database) is Ready only once it listens too.
 */
static json_int_t probe_port(const struct inst *in, const char *pod, const json_t *c)
{
    const json_t *e, *p;
    size_t i;
    json_array_foreach(json_object_get(in->spec, "expose"), i, e)
    {
        json_int_t port = json_integer_value(json_object_get(e, "port"));
        if (str_eq(json_string_value(json_object_get(e, "pod")), pod) && declares_port(c, port))
            return port;
    }
    json_array_foreach(json_object_get(c, "ports"), i, p)
    {
        const char *proto = json_string_value(json_object_get(p, "protocol"));
        if (!proto || str_eq(proto, "TCP"))
            return json_integer_value(json_object_get(p, "containerPort"));
    }
    return 0;
}

/*
 * default_probes gives every container of pod that has no readinessProbe a
 * TCP one on probe_port: the pod is Ready, and its Service's endpoint ready,
 * only once the program accepts connections. A TCP check rather than an
 * HTTP one even for HTTP exposures, since "/" of a web challenge may well
 * answer 404 or 401; a definition that wants more sets its own probe.
 */
static bool default_probes(const struct inst *in, const char *pod, json_t *tmpl)
{
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(tmpl, "containers"), i, c)
    {
        json_int_t port = probe_port(in, pod, c);
        if (!json_is_object(c) || json_object_get(c, "readinessProbe") || port <= 0)
            continue;
        if (!put(c, "readinessProbe",
                 json_pack("{s:{s:I}, s:i, s:i, s:i}", "tcpSocket", "port", port, "periodSeconds",
                           CTF_PROBE_PERIOD_S, "timeoutSeconds", 1, "failureThreshold", 3)))
            return false;
    }
    return true;
}

static json_t *deployment_object(const struct inst *in, const json_t *pod, bool with_flag)
{
    const char *name = json_string_value(json_object_get(pod, "name"));
    const json_t *replicas = json_object_get(pod, "replicas");
    json_t *tmpl = json_deep_copy(json_object_get(pod, "template"));

    if (!tmpl || ctf_harden_pod_spec(tmpl, json_object_get(in->spec, "security"), with_flag) ||
        !default_probes(in, name, tmpl)) {
        json_decref(tmpl);
        return NULL;
    }
    json_t *spec = json_pack("{s:I, s:{s:{s:s}}, s:{s:{s:o}, s:o}}", "replicas",
                             replicas ? json_integer_value(replicas) : (json_int_t)1, "selector",
                             "matchLabels", CTF_LABEL_POD, name, "template", "metadata", "labels",
                             labels_for(in, name), "spec", tmpl);
    return object("apps/v1", "Deployment", meta(in, name, name), "spec", spec);
}

static json_t *service_object(const struct inst *in, const json_t *expose)
{
    const char *name = json_string_value(json_object_get(expose, "name"));
    json_int_t port = json_integer_value(json_object_get(expose, "port"));
    /* A Service port name must be an IANA service name; the expose name usually is one. */
    const char *port_name = is_svc_port_name(name) ? name : is_http(expose) ? "http" : "tcp";
    json_t *spec = json_pack(
        "{s:s, s:{s:s}, s:[{s:s, s:s, s:I, s:I}]}", "type",
        use_ingress(in, expose) ? "ClusterIP" : "NodePort", "selector", CTF_LABEL_POD,
        json_string_value(json_object_get(expose, "pod")), "ports", "name", port_name, "protocol",
        "TCP", "port", port, "targetPort", port);
    return object("v1", "Service", meta(in, name, NULL), "spec", spec);
}

/* exposure_named reports whether an exposure of the definition is called name. */
static bool exposure_named(const struct inst *in, const char *name)
{
    size_t i;
    const json_t *e;
    json_array_foreach(json_object_get(in->spec, "expose"), i, e)
    {
        if (str_eq(json_string_value(json_object_get(e, "name")), name))
            return true;
    }
    return false;
}

/*
 * pod_service_object returns the ClusterIP Service named after pod, with
 * every port its containers declare, so the pods of an instance reach each
 * other by name (an app's DB_HOST=db). *none is set (and NULL returned) when
 * the pod declares no port, or when an exposure already has the pod's name:
 * that exposure's Service then answers to it.
 */
static json_t *pod_service_object(const struct inst *in, const json_t *pod, bool *none)
{
    const char *name = json_string_value(json_object_get(pod, "name"));
    json_t *ports = json_array(), *c, *p;
    size_t i, j;

    *none = false;
    json_array_foreach(get2(pod, "template", "containers"), i, c)
    {
        json_array_foreach(json_object_get(c, "ports"), j, p)
        {
            json_int_t port = json_integer_value(json_object_get(p, "containerPort"));
            const char *proto = json_string_value(json_object_get(p, "protocol"));
            char port_name[32];
            bool seen = false;
            proto = proto ? proto : "TCP";
            for (size_t k = 0; k < json_array_size(ports) && !seen; k++) {
                json_t *q = json_array_get(ports, k);
                seen = json_integer_value(json_object_get(q, "port")) == port &&
                       str_eq(json_string_value(json_object_get(q, "protocol")), proto);
            }
            if (seen || port <= 0 || port > 65535)
                continue;
            /* "tcp-5432": an IANA service name, unique per port and protocol. */
            snprintf(port_name, sizeof port_name, "%s-%d",
                     str_eq(proto, "UDP") ? "udp" : str_eq(proto, "SCTP") ? "sctp" : "tcp",
                     (int)port);
            if (!ports || !push(ports, json_pack("{s:s, s:s, s:I, s:I}", "name", port_name,
                                                 "protocol", proto, "port", port, "targetPort",
                                                 port))) {
                json_decref(ports);
                return NULL;
            }
        }
    }
    if (!ports || json_array_size(ports) == 0 || exposure_named(in, name)) {
        json_decref(ports);
        *none = ports != NULL;
        return NULL;
    }
    json_t *spec = json_pack("{s:s, s:{s:s}, s:o}", "type", "ClusterIP", "selector", CTF_LABEL_POD,
                             name, "ports", ports);
    return object("v1", "Service", meta(in, name, NULL), "spec", spec);
}

static json_t *ingress_object(const struct inst *in, const json_t *expose)
{
    const char *name = json_string_value(json_object_get(expose, "name"));
    const char *cls = in->cfg->ingress_class;
    char host[CTF_HOST_SIZE];

    if (ctf_ingress_host(in->cfg, name, in->ns, host, sizeof host) != KOP_OK)
        return NULL;
    json_t *spec = json_pack(
        "{s:s*, s:[{s:s, s:{s:[{s:s, s:s, s:{s:{s:s, s:{s:I}}}}]}}]}", "ingressClassName",
        nonempty(cls) ? cls : NULL, "rules", "host", host, "http", "paths", "path", "/",
        "pathType", "Prefix", "backend", "service", "name", name, "port", "number",
        json_integer_value(json_object_get(expose, "port")));
    return object("networking.k8s.io/v1", "Ingress", meta(in, name, NULL), "spec", spec);
}

/* children appends every object to out, in apply order; false when memory ran out. */
static bool children(const struct inst *in, const char *flag, json_t *out)
{
    const json_t *pods = json_object_get(in->spec, "pods");
    const json_t *expose = json_object_get(in->spec, "expose");
    size_t i;
    const json_t *v;

    bool ok = push(out, namespace_object(in));
    if (ok && flag)
        ok = push(out, secret_object(in, flag));
    ok = ok && push(out, quota_object(in)) && push(out, limit_range_object(in)) &&
         network_policies(in, out);
    json_array_foreach(pods, i, v)
    {
        ok = ok && push(out, deployment_object(in, v, flag != NULL));
    }
    json_array_foreach(expose, i, v)
    {
        ok = ok && push(out, service_object(in, v));
    }
    json_array_foreach(pods, i, v)
    {
        bool none = false;
        json_t *svc = ok ? pod_service_object(in, v, &none) : NULL;
        ok = ok && (none || push(out, svc));
    }
    json_array_foreach(expose, i, v)
    {
        if (use_ingress(in, v))
            ok = ok && push(out, ingress_object(in, v));
    }
    return ok;
}

kop_err ctf_build_children(const ctf_config *cfg, const json_t *def, const json_t *challenge,
                           const char *flag, json_t **out, kop_status *st)
{
    struct inst in = {.cfg = cfg, .spec = json_object_get(def, "spec"), .challenge = challenge};
    json_t *list = NULL;
    kop_err err;

    if (!out)
        return KOP_EINVAL;
    *out = NULL;
    if (!cfg)
        return KOP_EINVAL;
    err = ctf_validate_definition(def, st);
    if (!err)
        err = ctf_instance_labels(challenge, &in.labels, st);
    if (!err)
        err = ctf_instance_namespace(kop_meta_namespace(challenge),
                                     str2(challenge, "spec", "definition"),
                                     str2(challenge, "spec", "team"), in.ns, sizeof in.ns);
    if (err)
        goto out;
    list = json_array();
    if (!list || !children(&in, flag, list)) {
        kop_status_setf(st, 0, NULL, "Out of memory building the instance.");
        err = KOP_ENOMEM;
        goto out;
    }
    *out = list;
    list = NULL;
out:
    json_decref(list);
    json_decref(in.labels);
    return err;
}

/* ---- endpoints ---------------------------------------------------------- */

/* node_port returns the nodePort of service name's port port among services, or 0. */
static json_int_t node_port(const json_t *services, const char *name, json_int_t port)
{
    size_t i, j;
    const json_t *svc, *p;
    json_array_foreach(services, i, svc)
    {
        if (!str_eq(kop_meta_name(svc), name))
            continue;
        json_array_foreach(get2(svc, "spec", "ports"), j, p)
        {
            if (json_integer_value(json_object_get(p, "port")) == port)
                return json_integer_value(json_object_get(p, "nodePort"));
        }
    }
    return 0;
}

kop_err ctf_endpoints(const ctf_config *cfg, const json_t *def, const char *ns,
                      const json_t *services, json_t **out, bool *complete)
{
    const json_t *expose = json_object_get(json_object_get(def, "spec"), "expose");
    const char *node = cfg && nonempty(cfg->node_address) ? cfg->node_address : "127.0.0.1";
    /* An IPv6 address goes in brackets before ":port". */
    bool bracket = strchr(node, ':') && node[0] != '[';
    size_t i;
    const json_t *e;

    if (!out || !complete)
        return KOP_EINVAL;
    *out = NULL;
    *complete = false;
    if (!cfg || !nonempty(ns))
        return KOP_EINVAL;
    json_t *list = json_array();
    bool ok = list != NULL, all = true;
    json_array_foreach(expose, i, e)
    {
        const char *name = json_string_value(json_object_get(e, "name"));
        const char *type = is_http(e) ? "HTTP" : "TCP";
        char address[CTF_HOST_SIZE + 64];
        if (!ok || !name)
            break;
        if (is_http(e) && nonempty(cfg->ingress_domain)) {
            char host[CTF_HOST_SIZE];
            if (ctf_ingress_host(cfg, name, ns, host, sizeof host) != KOP_OK) {
                all = false;
                continue;
            }
            snprintf(address, sizeof address, "http://%s", host);
        } else {
            json_int_t np = node_port(services, name,
                                      json_integer_value(json_object_get(e, "port")));
            if (np <= 0) {
                all = false; /* the Service has no nodePort yet */
                continue;
            }
            snprintf(address, sizeof address, "%s%s%s%s:%" JSON_INTEGER_FORMAT,
                     is_http(e) ? "http://" : "", bracket ? "[" : "", node, bracket ? "]" : "",
                     np);
        }
        ok = push(list, json_pack("{s:s, s:s, s:s}", "name", name, "type", type, "address",
                                  address));
    }
    if (!ok) {
        json_decref(list);
        return KOP_ENOMEM;
    }
    *out = list;
    *complete = all;
    return KOP_OK;
}
