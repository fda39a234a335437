/*
 * map_internal.h - kop__map, a string-keyed hash map (open addressing,
 * linear probing, tombstones). Keys are copied and owned by the map; values
 * are opaque pointers the caller owns (kop__map_fini can free them).
 *
 * Built for the informer's store and indexes: up to a few hundred thousand
 * keys like "namespace/name", lookups on every event and reconcile. Not
 * thread-safe: the owner locks.
 */
#ifndef KOP_MAP_INTERNAL_H
#define KOP_MAP_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kop/err.h"

typedef struct kop__map_slot {
    char *key; /* NULL: empty; KOP__MAP_TOMBSTONE: deleted */
    uint64_t hash;
    void *value;
} kop__map_slot;

typedef struct kop__map {
    kop__map_slot *slots;
    size_t cap;  /* power of two, or 0 */
    size_t len;  /* live keys */
    size_t used; /* live keys + tombstones */
} kop__map;

/* kop__map_init prepares an empty map (no allocation until the first put). */
void kop__map_init(kop__map *m);

/* kop__map_fini frees the keys, calls free_value on each value if not NULL. */
void kop__map_fini(kop__map *m, void (*free_value)(void *));

/* kop__map_get returns the value stored under key, or NULL. */
void *kop__map_get(const kop__map *m, const char *key);

/* kop__map_has tells whether key is present (its value may be NULL). */
bool kop__map_has(const kop__map *m, const char *key);

/*
 * kop__map_put stores value under key; *old_out (if not NULL) receives the
 * value it replaced, or NULL. Returns KOP_ENOMEM and changes nothing on
 * allocation failure.
 */
KOP_NODISCARD kop_err kop__map_put(kop__map *m, const char *key, void *value, void **old_out);

/* kop__map_remove deletes key and returns its value (NULL if absent). */
void *kop__map_remove(kop__map *m, const char *key);

/*
 * kop__map_next iterates: start with *pos = 0; returns false at the end.
 * The map must not be modified during an iteration, except by removing the
 * entry just returned.
 */
bool kop__map_next(const kop__map *m, size_t *pos, const char **key, void **value);

#endif /* KOP_MAP_INTERNAL_H */
