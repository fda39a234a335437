/*
 * map_internal.h - kop__map, libkop's one hash table: string keys, open
 * addressing with linear probing and tombstones, FNV-1a (kop__hash, the one
 * hash function). Values are opaque pointers the caller owns (kop__map_fini
 * can free them). Keys are either copied and owned by the map
 * (kop__map_init) or borrowed (kop__map_init_borrowing): then the caller
 * keeps each key's storage alive, unchanged, until the entry is removed;
 * this is for records that carry their own key (a work-queue item, a
 * metric series), so a key is stored once.
 *
 * Built for the informer's store and indexes (up to a few hundred thousand
 * keys like "namespace/name", lookups on every event and reconcile), the
 * work queue's records and the metric families' series. It grows at 70%
 * occupancy counting tombstones and shrinks on request (kop__map_shrink)
 * when an eighth full, dropping the tombstones either way, so churn does not
 * degrade it. Not thread-safe: the owner locks.
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
    bool borrow; /* keys are the caller's (kop__map_init_borrowing) */
} kop__map;

/* kop__hash returns the FNV-1a hash of the NUL-terminated s. */
uint64_t kop__hash(const char *s);

/* kop__map_init prepares an empty map that copies its keys (no allocation
 * until the first put). */
void kop__map_init(kop__map *m);

/* kop__map_init_borrowing prepares an empty map that stores the caller's key
 * pointers: each must stay valid and unchanged until its entry is removed. */
void kop__map_init_borrowing(kop__map *m);

/* kop__map_fini frees the keys it owns, calls free_value on each value if not NULL. */
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

/* kop__map_shrink halves the table while it is less than an eighth full (if
 * memory allows; else it stays as it is). Not during an iteration. */
void kop__map_shrink(kop__map *m);

/*
 * kop__map_next iterates: start with *pos = 0; returns false at the end.
 * The map must not be modified during an iteration, except by removing the
 * entry just returned.
 */
bool kop__map_next(const kop__map *m, size_t *pos, const char **key, void **value);

#endif /* KOP_MAP_INTERNAL_H */
