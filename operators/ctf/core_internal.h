/*
 * core_internal.h - what the files of the CTF operator's pure core share
 * (ctf_core: definition.c, flag.c, names.c, pod.c, instance.c, api_core.c);
 * not an interface of the operator. Small jansson helpers, the names
 * helpers of names.c, and the pod helpers of pod.c the builder uses.
 */
#ifndef CTF_CORE_INTERNAL_H
#define CTF_CORE_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>
#include <kop/kop.h>

#define CTF_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* ctf_nonempty: a string with something in it. */
static inline bool ctf_nonempty(const char *s)
{
    return s && *s;
}

/* ctf_put sets obj[key] = v, stealing v; false when v is NULL or memory ran out. */
static inline bool ctf_put(json_t *obj, const char *key, json_t *v)
{
    return v && json_object_set_new(obj, key, v) == 0;
}

/* ctf_push appends v to arr, stealing v; false when v is NULL or memory ran out. */
static inline bool ctf_push(json_t *arr, json_t *v)
{
    return v && json_array_append_new(arr, v) == 0;
}

/* ctf_child returns obj[key] as an object, replacing whatever else is there. */
static inline json_t *ctf_child(json_t *obj, const char *key)
{
    json_t *o = json_object_get(obj, key);
    if (json_is_object(o))
        return o;
    o = json_object();
    return ctf_put(obj, key, o) ? o : NULL;
}

/* ctf_child_array returns obj[key] as an array, replacing whatever else is there. */
static inline json_t *ctf_child_array(json_t *obj, const char *key)
{
    json_t *a = json_object_get(obj, key);
    if (json_is_array(a))
        return a;
    a = json_array();
    return ctf_put(obj, key, a) ? a : NULL;
}

/* ctf_remove_named removes the entries of arr whose "name" is name. */
static inline void ctf_remove_named(json_t *arr, const char *name)
{
    for (size_t i = json_array_size(arr); i-- > 0;)
        if (kop_streq(json_string_value(json_object_get(json_array_get(arr, i), "name")), name))
            json_array_remove(arr, i);
}

/* ctf_get2 returns obj[a][b], borrowed, or NULL. */
static inline json_t *ctf_get2(const json_t *obj, const char *a, const char *b)
{
    return json_object_get(json_object_get(obj, a), b);
}

/* ctf_str2 returns obj[a][b] as a string (borrowed), or NULL. */
static inline const char *ctf_str2(const json_t *obj, const char *a, const char *b)
{
    return json_string_value(ctf_get2(obj, a, b));
}

/* ---- definition.c ---- */

/*
 * ctf_invalid records a failure of the definition in st (reason
 * CTF_REASON_INVALID_DEFINITION, the message formatted; st may be NULL) and
 * returns KOP_EINVAL.
 */
kop_err ctf_invalid(kop_status *st, const char *fmt, ...) KOP_PRINTF(2, 3);

/* ---- names.c ---- */

/*
 * ctf_sha256_hex writes the first n (even, <= 64) hex digits of SHA-256 over
 * the parts, each followed by a NUL byte, and a NUL; hex holds n + 1 bytes.
 */
KOP_NODISCARD kop_err ctf_sha256_hex(char *hex, size_t n, const char *const *parts, size_t count);

/* ctf_is_dns1035_label: a DNS-1123 label that starts with a letter (Service names). */
bool ctf_is_dns1035_label(const char *s);

/* ctf_is_svc_port_name: an IANA_SVC_NAME, at most 15 of [a-z0-9-] with a letter, no "--". */
bool ctf_is_svc_port_name(const char *s);

/* ---- pod.c ---- */

/*
 * ctf_default_probes gives every container of the definition's pod named pod
 * (its template spec, a copy the builder owns) that has no readinessProbe a
 * TCP one: on the port the pod is exposed on in def_spec, else on the
 * container's first declared TCP port. False when memory ran out.
 */
bool ctf_default_probes(const json_t *def_spec, const char *pod, json_t *tmpl);

#endif /* CTF_CORE_INTERNAL_H */
