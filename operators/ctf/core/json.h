/*
 * core/json.h - small jansson helpers every layer of the CTF operator uses
 * (static inline, no state): set or append stealing the value, get or make
 * a child object or array, read obj[a][b]. No Kubernetes, no I/O.
 */
#ifndef CTF_CORE_JSON_H
#define CTF_CORE_JSON_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>
#include <kop/common.h>
#include <kop/meta.h>

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

/* ctf_json_same: a and b (either may be absent: NULL) hold the same value; json_equal
 * calls two absent values different. */
static inline bool ctf_json_same(const json_t *a, const json_t *b)
{
    return a == b || (a && b && json_equal(a, b));
}

#endif /* CTF_CORE_JSON_H */
