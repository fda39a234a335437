/*
 * pod.c - what the operator does to every pod template of a definition:
 * harden it (ctf_harden_pod_spec) and make its readiness mean that the
 * program answers (ctf_default_probes); see pod.h.
 * Templates are deep copies the builder owns; the definition is never
 * modified.
 */
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"
#include "core/pod.h"

/* ---- hardening ---------------------------------------------------------- */

/* ensure_seccomp makes sc's seccompProfile RuntimeDefault unless it is RuntimeDefault or
 * Localhost; when absent it is added only if required. */
static bool ensure_seccomp(json_t *sc, bool required)
{
    const json_t *prof = json_object_get(sc, "seccompProfile");
    const char *type = json_string_value(json_object_get(prof, "type"));
    if (kop_streq(type, "RuntimeDefault") || kop_streq(type, "Localhost"))
        return true;
    if (!prof && !required)
        return true;
    return ctf_put(sc, "seccompProfile", json_pack("{s:s}", "type", "RuntimeDefault"));
}

/* adds_net_bind tells whether sc.capabilities.add holds NET_BIND_SERVICE. */
static bool adds_net_bind(const json_t *sc)
{
    size_t i;
    const json_t *cap;
    json_array_foreach(ctf_get2(sc, "capabilities", "add"), i, cap)
    {
        if (kop_streq(json_string_value(cap), "NET_BIND_SERVICE"))
            return true;
    }
    return false;
}

static bool has_entries(const json_t *obj)
{
    return json_is_object(obj) && json_object_size(obj) > 0;
}

static bool harden_container(json_t *c, bool read_only, ctf_flag_delivery flag)
{
    json_t *sc = ctf_child(c, "securityContext");
    if (!sc)
        return false;
    bool keep_bind = adds_net_bind(sc);
    json_t *caps = json_pack("{s:[s]}", "drop", "ALL");
    bool ok = caps && (!keep_bind || ctf_put(caps, "add", json_pack("[s]", "NET_BIND_SERVICE")));
    ok = ctf_put(sc, "capabilities", caps) && ok;
    ok = ok && ctf_put(sc, "allowPrivilegeEscalation", json_false()) &&
         ctf_put(sc, "privileged", json_false()) && ctf_put(sc, "runAsNonRoot", json_true()) &&
         ensure_seccomp(sc, false);
    if (ok && read_only)
        ok = ctf_put(sc, "readOnlyRootFilesystem", json_true());

    /* Default resources only when the template sets none at all. */
    json_t *res = json_object_get(c, "resources");
    if (ok && !has_entries(json_object_get(res, "requests")) &&
        !has_entries(json_object_get(res, "limits"))) {
        res = ctf_child(c, "resources");
        ok = res &&
             ctf_put(res, "requests", json_pack("{s:s, s:s}", "cpu", "50m", "memory", "64Mi")) &&
             ctf_put(res, "limits", json_pack("{s:s, s:s}", "cpu", "500m", "memory", "256Mi"));
    }

    if (ok && flag != CTF_FLAG_NONE) {
        json_t *env = ctf_child_array(c, "env");
        json_t *mounts = ctf_child_array(c, "volumeMounts");
        ok = env && mounts;
        if (ok) {
            /* A template's own FLAG never stands in for the flag: with
             * delivery by file only (a warm pool's), env has none at all. */
            ctf_remove_named(env, CTF_FLAG_ENV);
            ctf_remove_named(mounts, CTF_FLAG_SECRET);
            if (flag == CTF_FLAG_ENV_AND_FILE)
                ok =
                    json_array_insert_new(env, 0,
                                          json_pack("{s:s, s:{s:{s:s, s:s}}}", "name", CTF_FLAG_ENV,
                                                    "valueFrom", "secretKeyRef", "name",
                                                    CTF_FLAG_SECRET, "key", CTF_FLAG_KEY)) == 0;
            ok = ok && ctf_push(mounts, json_pack("{s:s, s:s, s:b}", "name", CTF_FLAG_SECRET,
                                                  "mountPath", CTF_FLAG_MOUNT_PATH, "readOnly", 1));
        }
    }
    return ok;
}

kop_err ctf_harden_pod_spec(json_t *spec, const json_t *security, ctf_flag_delivery flag)
{
    static const char *const lists[] = {"initContainers", "containers"};
    const char *runtime_class = json_string_value(json_object_get(security, "runtimeClassName"));
    bool read_only = json_is_true(json_object_get(security, "readOnlyRootFilesystem"));

    if (!json_is_object(spec))
        return KOP_EINVAL;
    json_object_del(spec, "hostNetwork");
    json_object_del(spec, "hostPID");
    json_object_del(spec, "hostIPC");
    bool ok = ctf_put(spec, "automountServiceAccountToken", json_false()) &&
              ctf_put(spec, "enableServiceLinks", json_false());
    json_t *psc = ok ? ctf_child(spec, "securityContext") : NULL;
    ok = psc && ctf_put(psc, "runAsNonRoot", json_true()) && ensure_seccomp(psc, true);
    if (ok && ctf_nonempty(runtime_class))
        ok = ctf_put(spec, "runtimeClassName", json_string(runtime_class));

    for (size_t l = 0; ok && l < CTF_LEN(lists); l++) {
        size_t i;
        json_t *c;
        json_array_foreach(json_object_get(spec, lists[l]), i, c)
        {
            if (json_is_object(c))
                ok = ok && harden_container(c, read_only, flag);
        }
    }
    if (ok && flag != CTF_FLAG_NONE) {
        json_t *volumes = ctf_child_array(spec, "volumes");
        ok = volumes != NULL;
        if (ok) {
            ctf_remove_named(volumes, CTF_FLAG_SECRET);
            ok = ctf_push(volumes,
                          json_pack("{s:s, s:{s:s, s:[{s:s, s:s}], s:i}}", "name", CTF_FLAG_SECRET,
                                    "secret", "secretName", CTF_FLAG_SECRET, "items", "key",
                                    CTF_FLAG_KEY, "path", CTF_FLAG_KEY, "defaultMode", 0444));
        }
    }
    return ok ? KOP_OK : KOP_ENOMEM;
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
static json_int_t probe_port(const json_t *def_spec, const char *pod, const json_t *c)
{
    const json_t *e, *p;
    size_t i;
    json_array_foreach(json_object_get(def_spec, "expose"), i, e)
    {
        json_int_t port = json_integer_value(json_object_get(e, "port"));
        if (kop_streq(json_string_value(json_object_get(e, "pod")), pod) && declares_port(c, port))
            return port;
    }
    json_array_foreach(json_object_get(c, "ports"), i, p)
    {
        const char *proto = json_string_value(json_object_get(p, "protocol"));
        if (!proto || kop_streq(proto, "TCP"))
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
bool ctf_default_probes(const json_t *def_spec, const char *pod, json_t *tmpl)
{
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(tmpl, "containers"), i, c)
    {
        json_int_t port = probe_port(def_spec, pod, c);
        if (!json_is_object(c) || json_object_get(c, "readinessProbe") || port <= 0)
            continue;
        if (!ctf_put(c, "readinessProbe",
                     json_pack("{s:{s:I}, s:i, s:i, s:i}", "tcpSocket", "port", port,
                               "periodSeconds", CTF_PROBE_PERIOD_S, "timeoutSeconds", 1,
                               "failureThreshold", 3)))
            return false;
    }
    return true;
}
