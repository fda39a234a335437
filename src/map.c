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

/*
 * A removed key leaves a tombstone, not an empty slot: with linear probing
 * an empty slot ends every search, so emptying one would hide the keys
 * that probed past it. The mark is an address no strdup can return.
 */
static char tombstone_mark;
#define TOMBSTONE (&tombstone_mark)

#define MIN_CAP 4 /* an informer keeps a map per index value; most hold a key or two */

/* FNV-1a, 64 bits, with FNV's published offset basis and prime: one xor and
 * one multiply a byte, well spread on short keys like "namespace/name". */
uint64_t kop__hash(const char *s)
{
    uint64_t h = 1469598103934665603ULL;
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 1099511628211ULL;
    }
    return h;
}

/* All zero is an empty map with no table: the first put allocates it, since
 * many maps (an index value's key set) never hold more than a key or two. */
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
    /* Empty again and of the same kind, so the owner may reuse it. */
    memset(m, 0, sizeof *m);
    m->borrow = borrow;
}

/*
 * find returns the slot holding key, or the slot where it would go: the
 * first tombstone passed, reused, else the empty slot that ended the
 * search. The search must still run on past a tombstone, as the key may
 * lie further on. It always ends: put keeps used slots, tombstones
 * included, under 70%, so an empty slot exists.
 */
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
        bool found; /* never: the new table has no duplicates, no tombstones */
        m->slots[find(m, s->key, s->hash, &found)] = *s;
    }
    free(old.slots);
    return KOP_OK;
}

/*
 * grow makes room: live keys under half of the new table. After many
 * removals the live keys may fit as they are, and the "growth" is a rehash
 * at the same size that only sweeps the tombstones out.
 */
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
        return NULL; /* maybe no table at all: find would index NULL */
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
    /* Grown before the lookup, so the slot find returns is in the table the
     * key goes in; counted with tombstones, so probes stay short. */
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
    /* A borrowed key is the caller's record's own: it lives as long as the entry. */
    char *copy = m->borrow ? (char *)key : strdup(key);
    if (!copy)
        return KOP_ENOMEM;
    if (s->key != TOMBSTONE)
        m->used++; /* a reused tombstone was counted when first filled */
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
    s->key = TOMBSTONE; /* used stays: the slot still lengthens probes */
    s->value = NULL;
    m->len--;
    return value;
}

/* Only on request, not inside remove: the owner knows when a removal may
 * have left the table mostly empty (the store, the queue), and the maps
 * that stay small (an index value's key set) never pay for the check. */
void kop__map_shrink(kop__map *m)
{
    size_t cap = m->cap;
    while (cap > MIN_CAP && m->len * 8 < cap)
        cap /= 2;
    if (cap != m->cap)
        (void)rehash(m, cap); /* on failure the table just stays larger */
}

/*
 * Iteration goes by slot position: the caller may remove the key it was
 * just given (the slot becomes a tombstone, nothing moves), but a put may
 * rehash and reorder every slot.
 */
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
