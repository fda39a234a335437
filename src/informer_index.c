/*
 * informer_index.c - the informer's indexers (see kop/informer.h): the
 * built-in namespace and controller-owner indexes, the filing of each
 * cached key under its index values, and lookups by value.
 *
 * An index maps a value to the set of store keys filed under it; each
 * entry records the values it was filed with (kop__informer_entry.vals),
 * so a replace or a delete unfiles exactly what was filed, without calling
 * the indexer again on an object that may have changed since.
 *
 * Invariants: a key is in an index's set for value v if and only if its
 * entry is in the store and lists v (nvals counts what was really filed,
 * so an out-of-memory half-way unfiles cleanly); an empty set is removed
 * at once. Both hold under the store's write lock; readers hold the read
 * lock. Lookups return parsed copies or keys, never the cached text.
 */
#include <stdlib.h>
#include <string.h>

#include "informer_internal.h"
#include "kop/meta.h"

/* ---- the built-in indexers ------------------------------------------------ */

static const json_t *meta_of(const json_t *obj)
{
    return json_object_get(obj, "metadata");
}

static size_t index_namespace(const json_t *obj, const char **values, size_t max, void *user)
{
    (void)user;
    const char *ns = kop_meta_namespace(obj);
    if (!ns || max == 0)
        return 0;
    values[0] = ns;
    return 1;
}

static size_t index_owner(const json_t *obj, const char **values, size_t max, void *user)
{
    (void)user;
    json_t *ref;
    size_t i;
    json_array_foreach(json_object_get(meta_of(obj), "ownerReferences"), i, ref)
    {
        const char *uid = json_string_value(json_object_get(ref, "uid"));
        if (json_is_true(json_object_get(ref, "controller")) && uid && max > 0) {
            values[0] = uid;
            return 1;
        }
    }
    return 0;
}

/* ---- registration ------------------------------------------------------- */

kop_err kop__informer_add_index(kop_informer *inf, const char *name, kop_index_fn fn, void *user)
{
    if (inf->nindexes >= KOP_INFORMER_MAX_INDEXES)
        return KOP_ETOOBIG;
    for (int i = 0; i < inf->nindexes; i++)
        if (strcmp(inf->indexes[i].name, name) == 0)
            return KOP_EALREADYEXISTS;
    struct kop__informer_index *ix = &inf->indexes[inf->nindexes];
    ix->name = strdup(name);
    if (!ix->name)
        return KOP_ENOMEM;
    ix->fn = fn;
    ix->user = user;
    kop__map_init(&ix->by_value);
    inf->nindexes++;
    return KOP_OK;
}

kop_err kop__informer_indexes_init(kop_informer *inf)
{
    kop_err err = kop__informer_add_index(inf, KOP_INDEX_NAMESPACE, index_namespace, NULL);
    if (!err)
        err = kop__informer_add_index(inf, KOP_INDEX_OWNER, index_owner, NULL);
    return err;
}

static void free_key_set(void *set)
{
    kop__map_fini(set, NULL);
    free(set);
}

void kop__informer_indexes_fini(kop_informer *inf)
{
    for (int i = 0; i < inf->nindexes; i++) {
        kop__map_fini(&inf->indexes[i].by_value, free_key_set);
        free(inf->indexes[i].name);
    }
}

/* ---- filing keys -------------------------------------------------------- */

/* kop__informer_index_remove takes key out of every index under the values e was filed with. */
void kop__informer_index_remove(kop_informer *inf, const char *key, struct kop__informer_entry *e)
{
    char **v = e->vals;
    for (int i = 0; i < inf->nindexes; i++) {
        for (size_t j = 0; j < e->nvals[i]; j++, v++) {
            kop__map *set = kop__map_get(&inf->indexes[i].by_value, *v);
            if (!set)
                continue;
            kop__map_remove(set, key);
            if (set->len == 0)
                free_key_set(kop__map_remove(&inf->indexes[i].by_value, *v));
        }
    }
}

/* kop__informer_index_add files key under obj's values in every index, recording them in e. */
kop_err kop__informer_index_add(kop_informer *inf, const char *key, const json_t *obj,
                                struct kop__informer_entry *e)
{
    /* First every value (borrowed from obj), to size the one allocation. */
    const char *vals[KOP_INFORMER_MAX_INDEXES * KOP_INDEX_MAX_VALUES];
    size_t counts[KOP_INFORMER_MAX_INDEXES], total = 0, bytes = 0;
    for (int i = 0; i < inf->nindexes; i++) {
        size_t n =
            inf->indexes[i].fn(obj, vals + total, KOP_INDEX_MAX_VALUES, inf->indexes[i].user);
        counts[i] = n > KOP_INDEX_MAX_VALUES ? KOP_INDEX_MAX_VALUES : n;
        for (size_t j = 0; j < counts[i]; j++)
            bytes += strlen(vals[total + j]) + 1;
        total += counts[i];
    }
    if (total == 0)
        return KOP_OK;
    e->vals = malloc(total * sizeof(char *) + bytes);
    if (!e->vals)
        return KOP_ENOMEM;
    char *text = (char *)(e->vals + total);
    for (size_t k = 0; k < total; k++) {
        size_t len = strlen(vals[k]) + 1;
        e->vals[k] = memcpy(text, vals[k], len);
        text += len;
    }
    /* Then file the key under each; nvals counts what is filed, for kop__informer_index_remove. */
    char **v = e->vals;
    for (int i = 0; i < inf->nindexes; i++) {
        for (size_t j = 0; j < counts[i]; j++, v++) {
            kop__map *set = kop__map_get(&inf->indexes[i].by_value, *v);
            if (!set) {
                set = calloc(1, sizeof *set);
                if (!set)
                    return KOP_ENOMEM;
                kop__map_init(set);
                if (kop__map_put(&inf->indexes[i].by_value, *v, set, NULL)) {
                    free(set);
                    return KOP_ENOMEM;
                }
            }
            if (kop__map_put(set, key, NULL, NULL))
                return KOP_ENOMEM;
            e->nvals[i] = (unsigned char)(j + 1);
        }
    }
    return KOP_OK;
}

/* ---- lookups ------------------------------------------------------------ */

/* append_key parses the entry under key into arr. Lock held by the caller. */
static kop_err append_key(kop_informer *inf, const char *key, json_t *arr)
{
    struct kop__informer_entry *e = kop__map_get(&inf->store, key);
    if (!e)
        return KOP_OK;
    json_t *obj = kop__informer_parse_entry(e);
    return obj && json_array_append_new(arr, obj) == 0 ? KOP_OK : KOP_ENOMEM;
}

kop_err kop_informer_by_index(kop_informer *inf, const char *index, const char *value,
                              json_t **out)
{
    kop_err err = KOP_EINVAL;
    *out = json_array();
    if (!*out)
        return KOP_ENOMEM;
    pthread_rwlock_rdlock(&inf->lock);
    for (int i = 0; i < inf->nindexes; i++) {
        if (strcmp(inf->indexes[i].name, index) != 0)
            continue;
        err = KOP_OK;
        kop__map *set = kop__map_get(&inf->indexes[i].by_value, value);
        size_t pos = 0;
        const char *k;
        void *v;
        while (!err && set && kop__map_next(set, &pos, &k, &v))
            err = append_key(inf, k, *out);
        break;
    }
    pthread_rwlock_unlock(&inf->lock);
    if (err) {
        json_decref(*out);
        *out = NULL;
    }
    return err;
}

/* find_index returns the index named name, or NULL. */
static struct kop__informer_index *find_index(kop_informer *inf, const char *name)
{
    for (int i = 0; i < inf->nindexes; i++)
        if (strcmp(inf->indexes[i].name, name) == 0)
            return &inf->indexes[i];
    return NULL;
}

/*
 * page_keys copies up to max keys of set (0: all) into out, each with its
 * entry's resourceVersion, beginning at slot *cursor modulo the set's
 * capacity and going round once at most: from there to the end of the
 * slots, then from the first slot back to where it began. *cursor ends
 * past the last slot read. Lock held by the caller.
 */
static kop_err page_keys(kop_informer *inf, const kop__map *set, size_t *cursor, size_t max,
                         json_t *out)
{
    size_t cap = set ? set->cap : 0, start = cap ? *cursor % cap : 0, pos = start, got = 0;
    bool wrapped = false;
    while (cap && (max == 0 || got < max)) {
        const char *k;
        void *v;
        if (!kop__map_next(set, &pos, &k, &v)) {
            if (wrapped)
                break;
            wrapped = true; /* the end of the slots: on from the first */
            pos = 0;
            continue;
        }
        if (wrapped && pos > start)
            break; /* slot pos - 1 was read in the first lap */
        struct kop__informer_entry *e = kop__map_get(&inf->store, k);
        if (!e)
            continue;
        if (json_object_set_new(out, k, json_string(e->rv)) != 0)
            return KOP_ENOMEM;
        got++;
    }
    *cursor = pos;
    return KOP_OK;
}

kop_err kop_informer_index_keys(kop_informer *inf, const char *index, const char *value,
                                kop_index_page *page, json_t **out)
{
    kop_index_page all = {0, 0, 0};
    kop_index_page *p = page ? page : &all;
    kop_err err = KOP_OK;
    *out = json_object();
    if (!*out)
        return KOP_ENOMEM;
    pthread_rwlock_rdlock(&inf->lock);
    struct kop__informer_index *ix = index ? find_index(inf, index) : NULL;
    if (!ix || !value) {
        err = KOP_EINVAL;
    } else {
        const kop__map *set = kop__map_get(&ix->by_value, value);
        p->total = set ? set->len : 0;
        err = page_keys(inf, set, &p->cursor, p->max, *out);
    }
    pthread_rwlock_unlock(&inf->lock);
    if (err) {
        json_decref(*out);
        *out = NULL;
    }
    return err;
}
