/*
 * map.c - kop__map and kop__hash (see map_internal.h). FNV-1a hashes;
 * capacity doubles at 70% occupancy counting tombstones, halves when an
 * eighth full, and every rehash drops the tombstones, so a churning
 * informer store or work queue does not degrade.
 */
#include <stdlib.h>
#include <string.h>

#include "kop_internal.h"
#include "map_internal.h"

static char tombstone_mark;
#define TOMBSTONE (&tombstone_mark)

#define MIN_CAP 4 /* an informer keeps a map per index value; most hold a key or two */

uint64_t kop__hash(const char *s)
{
    uint64_t h = 1469598103934665603ULL;
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 1099511628211ULL;
    }
    return h;
}

void kop__map_init(kop__map *m)
{
    memset(m, 0, sizeof *m);
}

void kop__map_init_borrowing(kop__map *m)
{
    memset(m, 0, sizeof *m);
    m->borrow = true;
}

void kop__map_fini(kop__map *m, void (*free_value)(void *))
{
    if (!m)
        return;
    bool borrow = m->borrow;
    for (size_t i = 0; i < m->cap; i++) {
        char *k = m->slots[i].key;
        if (!k || k == TOMBSTONE)
            continue;
        if (free_value)
            free_value(m->slots[i].value);
        if (!borrow)
            free(k);
    }
    free(m->slots);
    memset(m, 0, sizeof *m);
    m->borrow = borrow;
}

/* find returns the slot holding key, or the slot where it would go. */
static size_t find(const kop__map *m, const char *key, uint64_t h, bool *found)
{
    size_t mask = m->cap - 1, i = (size_t)h & mask, first_free = SIZE_MAX;
    for (;;) {
        const kop__map_slot *s = &m->slots[i];
        if (!s->key) {
            *found = false;
            return first_free != SIZE_MAX ? first_free : i;
        }
        if (s->key == TOMBSTONE) {
            if (first_free == SIZE_MAX)
                first_free = i;
        } else if (s->hash == h && strcmp(s->key, key) == 0) {
            *found = true;
            return i;
        }
        i = (i + 1) & mask;
    }
}

/* rehash moves the live keys into a new table of cap slots (a power of two
 * with room for them), dropping the tombstones. */
static kop_err rehash(kop__map *m, size_t cap)
{
    KOP_ASSERT(cap >= MIN_CAP && (cap & (cap - 1)) == 0 && m->len < cap);
    kop__map_slot *slots = calloc(cap, sizeof *slots);
    if (!slots)
        return KOP_ENOMEM;
    kop__map old = *m;
    m->slots = slots;
    m->cap = cap;
    m->used = m->len;
    for (size_t i = 0; i < old.cap; i++) {
        kop__map_slot *s = &old.slots[i];
        if (!s->key || s->key == TOMBSTONE)
            continue;
        bool found;
        m->slots[find(m, s->key, s->hash, &found)] = *s;
    }
    free(old.slots);
    return KOP_OK;
}

/* grow makes room: live keys under half of the new table. */
static kop_err grow(kop__map *m)
{
    size_t cap = m->cap ? m->cap : MIN_CAP;
    while (m->len * 10 >= cap * 5)
        cap *= 2;
    return rehash(m, cap);
}

void *kop__map_get(const kop__map *m, const char *key)
{
    bool found = false;
    if (m->len == 0)
        return NULL;
    size_t i = find(m, key, kop__hash(key), &found);
    return found ? m->slots[i].value : NULL;
}

bool kop__map_has(const kop__map *m, const char *key)
{
    bool found = false;
    if (m->len > 0)
        find(m, key, kop__hash(key), &found);
    return found;
}

kop_err kop__map_put(kop__map *m, const char *key, void *value, void **old_out)
{
    bool found = false;
    uint64_t h = kop__hash(key);
    if (old_out)
        *old_out = NULL;
    if ((m->used + 1) * 10 > m->cap * 7) {
        kop_err err = grow(m);
        if (err)
            return err;
    }
    size_t i = find(m, key, h, &found);
    kop__map_slot *s = &m->slots[i];
    if (found) {
        if (old_out)
            *old_out = s->value;
        s->value = value;
        return KOP_OK;
    }
    char *copy = m->borrow ? (char *)key : strdup(key);
    if (!copy)
        return KOP_ENOMEM;
    if (s->key != TOMBSTONE)
        m->used++;
    *s = (kop__map_slot){.key = copy, .hash = h, .value = value};
    m->len++;
    return KOP_OK;
}

void *kop__map_remove(kop__map *m, const char *key)
{
    bool found = false;
    if (m->len == 0)
        return NULL;
    size_t i = find(m, key, kop__hash(key), &found);
    if (!found)
        return NULL;
    kop__map_slot *s = &m->slots[i];
    void *value = s->value;
    if (!m->borrow)
        free(s->key);
    s->key = TOMBSTONE;
    s->value = NULL;
    m->len--;
    return value;
}

void kop__map_shrink(kop__map *m)
{
    size_t cap = m->cap;
    while (cap > MIN_CAP && m->len * 8 < cap)
        cap /= 2;
    if (cap != m->cap)
        (void)rehash(m, cap); /* on failure the table just stays larger */
}

bool kop__map_next(const kop__map *m, size_t *pos, const char **key, void **value)
{
    for (; *pos < m->cap; (*pos)++) {
        const kop__map_slot *s = &m->slots[*pos];
        if (s->key && s->key != TOMBSTONE) {
            *key = s->key;
            *value = s->value;
            (*pos)++;
            return true;
        }
    }
    return false;
}
