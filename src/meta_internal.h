/*
 * meta_internal.h - what the metadata helpers' files share; not installed.
 *
 * kop/meta.h is one module written in four files, one concept each:
 * meta.c (accessors, labels, annotations, finalizers, object keys,
 * serializing), meta_owner.c (owner references), meta_conditions.c
 * (metav1.Condition rules) and meta_names.c (DNS-1123 names: making and
 * checking them). The syntax checks live with the names; conditions reuse
 * them for a condition type's prefix and name part.
 */
#ifndef KOP_META_INTERNAL_H
#define KOP_META_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "kop/meta.h"

/* kop__meta_of returns obj's metadata object (borrowed; NULL when absent). */
static inline json_t *kop__meta_of(const json_t *obj)
{
    return json_object_get(obj, "metadata");
}

/* kop__is_lower_alnum: [a-z0-9], the characters of a DNS-1123 label. */
static inline bool kop__is_lower_alnum(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

/* kop__is_alnum: [A-Za-z0-9], the ends of a qualified name's name part. */
static inline bool kop__is_alnum(char c)
{
    return kop__is_lower_alnum(c) || (c >= 'A' && c <= 'Z');
}

/*
 * kop__meta_child_object returns parent[key] as an object (borrowed),
 * creating it when absent. NULL when parent is not an object, parent[key]
 * is something else, or memory runs out. (meta.c)
 */
json_t *kop__meta_child_object(json_t *parent, const char *key);

/*
 * kop__meta_is_name_part matches a qualified name's name part on s[0..n),
 * without a length limit. (meta_names.c)
 */
bool kop__meta_is_name_part(const char *s, size_t n);

/*
 * kop__meta_is_subdomain matches DNS-1123 subdomain syntax on s[0..n),
 * without a length limit. (meta_names.c)
 */
bool kop__meta_is_subdomain(const char *s, size_t n);

#endif /* KOP_META_INTERNAL_H */
