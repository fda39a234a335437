/*
 * definition.c - ctf_validate_definition: what a ChallengeDefinition must be
 * before any instance is built from it (see definition.h). The CRD's schema
 * and CEL rules refuse most mistakes at the apiserver; this is the second
 * line, for what they cannot express (every exposure names a pod that
 * declares its port, restricted Pod Security for every template, ...), and
 * for a definition written before the CRD tightened. Every refusal says
 * which field is wrong, in status.message of the Challenges that use it.
 */
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/definition.h"
#include "core/duration.h"
#include "core/flag.h"
#include "core/json.h"
#include "core/names.h"
#include "core/pool.h"
#include "core/update.h"

/* The volume sources restricted Pod Security allows. */
static const char *const VOLUME_SOURCES[] = {
    "configMap", "csi",    "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim",
    "projected", "secret",
};

kop_err ctf_invalid(kop_status *st, const char *fmt, ...)
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

/* ---- validation --------------------------------------------------------- */

/*
 * is_positive_quantity accepts a Kubernetes quantity greater than zero:
 * [+]digits[.digits] with an optional SI or binary suffix or exponent.
 */
static bool is_positive_quantity(const char *s)
{
    static const char *const suffixes[] = {"",  "n", "u",  "m",  "k",  "M",  "G",  "T",
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
    for (size_t i = 0; i < CTF_LEN(suffixes); i++)
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
    const json_t *add = ctf_get2(sc, "capabilities", "add");
    size_t i;
    const json_t *cap;

    if (json_is_true(json_object_get(sc, "privileged")))
        return ctf_invalid(st, "%s asks to be privileged, which instances may not be.", where);
    const json_t *uid = json_object_get(sc, "runAsUser");
    if (json_is_integer(uid) && json_integer_value(uid) == 0)
        return ctf_invalid(st, "%s sets runAsUser 0; instances run as a non-root user.", where);
    json_array_foreach(add, i, cap)
    {
        if (!kop_streq(json_string_value(cap), "NET_BIND_SERVICE"))
            return ctf_invalid(st, "%s adds capability %s; only NET_BIND_SERVICE is allowed.",
                               where,
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
        return ctf_invalid(st, "%s must be an object.", where);
    const char *name = json_string_value(json_object_get(c, "name"));
    if (!kop_meta_is_valid_dns1123_label(name))
        return ctf_invalid(st, "%s.name is missing or not a DNS label.", where);
    if (json_object_get(names, name))
        return ctf_invalid(st, "%s.name \"%s\" is used by two containers of the pod.", where, name);
    if (json_object_set_new(names, name, json_true()) != 0)
        return KOP_ENOMEM;
    if (!ctf_nonempty(json_string_value(json_object_get(c, "image"))))
        return ctf_invalid(st, "%s (%s) has no image.", where, name);
    json_array_foreach(json_object_get(c, "ports"), i, v)
    {
        const json_t *hp = json_object_get(v, "hostPort");
        if (json_is_integer(hp) && json_integer_value(hp) != 0)
            return ctf_invalid(st, "%s.ports[%zu] sets hostPort, which instances may not use.",
                               where, i);
    }
    json_array_foreach(json_object_get(c, "volumeMounts"), i, v)
    {
        const char *path = json_string_value(json_object_get(v, "mountPath"));
        if (path && strncmp(path, CTF_FLAG_MOUNT_PATH, strlen(CTF_FLAG_MOUNT_PATH)) == 0 &&
            (path[strlen(CTF_FLAG_MOUNT_PATH)] == '\0' || path[strlen(CTF_FLAG_MOUNT_PATH)] == '/'))
            return ctf_invalid(st, "%s mounts a volume at %s, which is reserved for the flag.",
                               where, path);
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
        if (kop_streq(name, CTF_FLAG_SECRET))
            return ctf_invalid(
                st, "%s.volumes[%zu] is named \"flag\", which is reserved for the flag.", where, i);
        json_object_foreach((json_t *)vol, key, src)
        {
            bool allowed = strcmp(key, "name") == 0;
            for (size_t k = 0; k < CTF_LEN(VOLUME_SOURCES) && !allowed; k++)
                allowed = strcmp(key, VOLUME_SOURCES[k]) == 0;
            if (!allowed)
                return ctf_invalid(st, "%s.volumes[%zu] uses %s, which instances may not use.",
                                   where, i, key);
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
        return ctf_invalid(st, "%s is missing.", where);
    for (size_t i = 0; i < CTF_LEN(host_fields); i++)
        if (json_is_true(json_object_get(tmpl, host_fields[i])))
            return ctf_invalid(st, "%s sets %s, which instances may not use.", where,
                               host_fields[i]);
    const json_t *containers = json_object_get(tmpl, "containers");
    if (json_array_size(containers) == 0)
        return ctf_invalid(st, "%s.containers must list at least one container.", where);
    err = check_volumes(json_object_get(tmpl, "volumes"), where, st);
    if (!err)
        err = check_security_context(json_object_get(tmpl, "securityContext"), where, st);

    json_t *names = json_object();
    if (!names)
        return KOP_ENOMEM;
    for (size_t l = 0; !err && l < CTF_LEN(lists); l++) {
        const json_t *list = json_object_get(tmpl, lists[l]);
        if (list && !json_is_array(list)) {
            err = ctf_invalid(st, "%s.%s must be a list.", where, lists[l]);
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
        if (kop_streq(json_string_value(json_object_get(pod, "name")), name))
            return pod;
    }
    return NULL;
}

static kop_err check_pods(const json_t *spec, kop_status *st)
{
    const json_t *pods = json_object_get(spec, "pods");
    size_t n = json_array_size(pods);

    if (!json_is_array(pods) || n < 1 || n > 10)
        return ctf_invalid(st, "spec.pods must list 1 to 10 pods.");
    for (size_t i = 0; i < n; i++) {
        const json_t *pod = json_array_get(pods, i);
        const char *name = json_string_value(json_object_get(pod, "name"));
        if (!kop_meta_is_valid_dns1123_label(name))
            return ctf_invalid(st, "spec.pods[%zu].name is missing or not a DNS label.", i);
        for (size_t j = 0; j < i; j++)
            if (kop_streq(json_string_value(json_object_get(json_array_get(pods, j), "name")),
                          name))
                return ctf_invalid(st, "spec.pods[%zu].name \"%s\" is used twice.", i, name);
        const json_t *replicas = json_object_get(pod, "replicas");
        if (replicas && (!json_is_integer(replicas) || json_integer_value(replicas) < 1 ||
                         json_integer_value(replicas) > 5))
            return ctf_invalid(st, "spec.pods[%zu].replicas must be 1 to 5.", i);
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
    json_array_foreach(ctf_get2(pod, "template", "containers"), i, c)
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
        return ctf_invalid(st, "spec.expose must list at most 10 exposures.");
    for (size_t i = 0; i < n; i++) {
        const json_t *e = json_array_get(expose, i);
        const char *name = json_string_value(json_object_get(e, "name"));
        const char *pod = json_string_value(json_object_get(e, "pod"));
        const json_t *port = json_object_get(e, "port");
        const json_t *type = json_object_get(e, "type");
        bool any = false;

        if (!ctf_is_dns1035_label(name))
            return ctf_invalid(
                st,
                "spec.expose[%zu].name is missing or not a DNS label starting with a "
                "letter.",
                i);
        for (size_t j = 0; j < i; j++)
            if (kop_streq(json_string_value(json_object_get(json_array_get(expose, j), "name")),
                          name))
                return ctf_invalid(st, "spec.expose[%zu].name \"%s\" is used twice.", i, name);
        const json_t *target = find_pod(spec, pod);
        if (!target)
            return ctf_invalid(st,
                               "spec.expose[%zu] (%s) names pod \"%s\", which is not in spec.pods.",
                               i, name, pod ? pod : "");
        if (!json_is_integer(port) || json_integer_value(port) < 1 ||
            json_integer_value(port) > 65535)
            return ctf_invalid(st, "spec.expose[%zu].port must be 1 to 65535.", i);
        if (type && !kop_streq(json_string_value(type), "HTTP") &&
            !kop_streq(json_string_value(type), "TCP"))
            return ctf_invalid(st, "spec.expose[%zu].type must be HTTP or TCP.", i);
        if (!pod_declares_port(target, json_integer_value(port), &any) && any)
            return ctf_invalid(st,
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
        return ctf_invalid(st, "spec.flag must be an object.");
    if (stat && dyn)
        return ctf_invalid(st, "spec.flag sets both static and dynamic; choose one.");
    if (stat && !ctf_nonempty(json_string_value(stat)))
        return ctf_invalid(st, "spec.flag.static must be a non-empty string.");
    if (dyn) {
        const json_t *key = ctf_get2(dyn, "secretRef", "key");
        if (!kop_meta_is_valid_dns1123_subdomain(ctf_str2(dyn, "secretRef", "name")))
            return ctf_invalid(st, "spec.flag.dynamic.secretRef.name must name a Secret.");
        if (key && !ctf_nonempty(json_string_value(key)))
            return ctf_invalid(st, "spec.flag.dynamic.secretRef.key must be a non-empty string.");
        if (json_object_get(dyn, "prefix") && !json_is_string(json_object_get(dyn, "prefix")))
            return ctf_invalid(st, "spec.flag.dynamic.prefix must be a string.");
        if (json_object_get(dyn, "suffix") && !json_is_string(json_object_get(dyn, "suffix")))
            return ctf_invalid(st, "spec.flag.dynamic.suffix must be a string.");
    }
    return KOP_OK;
}

static kop_err check_settings(const json_t *spec, kop_status *st)
{
    const json_t *egress = ctf_get2(spec, "network", "egress");
    const json_t *sec = json_object_get(spec, "security");
    const json_t *ro = json_object_get(sec, "readOnlyRootFilesystem");
    const json_t *rc = json_object_get(sec, "runtimeClassName");
    static const char *const res[] = {"cpu", "memory"};

    if (egress && !kop_streq(json_string_value(egress), "None") &&
        !kop_streq(json_string_value(egress), "Internet"))
        return ctf_invalid(st, "spec.network.egress must be None or Internet.");
    if (ro && !json_is_boolean(ro))
        return ctf_invalid(st, "spec.security.readOnlyRootFilesystem must be true or false.");
    if (rc && !kop_meta_is_valid_dns1123_subdomain(json_string_value(rc)))
        return ctf_invalid(st, "spec.security.runtimeClassName must name a RuntimeClass.");
    for (size_t i = 0; i < CTF_LEN(res); i++) {
        const json_t *q = ctf_get2(spec, "resources", res[i]);
        if (q && !(json_is_integer(q) && json_integer_value(q) > 0) &&
            !(json_is_string(q) && is_positive_quantity(json_string_value(q))))
            return ctf_invalid(
                st, "spec.resources.%s must be a positive quantity such as 500m or 1Gi.", res[i]);
    }
    return KOP_OK;
}

kop_err ctf_validate_definition(const json_t *def, kop_status *st)
{
    const json_t *spec = json_object_get(def, "spec");
    kop_err err;

    kop_status_clear(st);
    if (!json_is_object(spec))
        return ctf_invalid(st, "The definition has no spec.");
    err = check_pods(spec, st);
    if (!err)
        err = check_expose(spec, st);
    if (!err)
        err = check_flag(spec, st);
    if (!err)
        err = ctf_lifetime_parse(spec, NULL, st);
    if (!err)
        err = check_settings(spec, st);
    if (!err)
        err = ctf_pool_parse(def, NULL, st);
    if (!err)
        err = ctf_update_parse(def, NULL, st);
    return err;
}
