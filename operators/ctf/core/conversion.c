/*
 * core/conversion.c - ChallengeDefinition v1alpha1 <-> v1beta1
 * (conversion.h, docs/crd-versions.md).
 *
 * Invariants: only spec.update and the one reserved annotation are ever
 * touched; every other key, known or not, stays as it was. Converting from
 * v1alpha1 never fails on anything the apiserver could have stored at
 * v1alpha1 (a definition stored before the upgrade must stay readable, or
 * one object would break every list): an annotation it cannot use is left
 * where it is. The workload: one review per apiserver read or write in the
 * other version, a few objects each, microseconds per object.
 */
#include <stdlib.h>
#include <string.h>

#include "core/conversion.h"
#include "core/json.h"

/* annotations returns metadata.annotations, borrowed, or NULL. */
static json_t *annotations(json_t *def)
{
    return ctf_get2(def, "metadata", "annotations");
}

/* drop_annotation removes the reserved annotation, and the map when that empties it. */
static void drop_annotation(json_t *def)
{
    json_t *ann = annotations(def);
    json_object_del(ann, CTF_CONVERSION_ROLLING_ANNOTATION);
    if (json_is_object(ann) && json_object_size(ann) == 0)
        json_object_del(json_object_get(def, "metadata"), "annotations");
}

/*
 * saved_rolling reads back what a conversion to v1alpha1 kept of rolling:
 * a new reference, or NULL when there is no annotation or it does not hold
 * JSON (then it is left in place, untouched).
 */
static json_t *saved_rolling(json_t *def)
{
    const char *text = json_string_value(json_object_get(annotations(def),
                                                         CTF_CONVERSION_ROLLING_ANNOTATION));
    if (!text || strlen(text) > CTF_CONVERSION_ANNOTATION_MAX)
        return NULL;
    return json_loads(text, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, NULL);
}

/* to_beta: spec.update.maxUnavailable moves under rolling; a saved rolling comes back. */
static kop_err to_beta(json_t *def, kop_status *st)
{
    json_t *update = ctf_get2(def, "spec", "update");
    if (!json_is_object(update))
        return KOP_OK; /* nothing to move; an annotation stays as it is */
    if (json_object_get(update, "rolling")) {
        kop_status_setf(st, 0, "Invalid", "spec.update.rolling is not a field of v1alpha1");
        return KOP_EINVAL;
    }
    json_t *rolling = saved_rolling(def);
    if (rolling)
        drop_annotation(def);
    json_t *unavailable = json_object_get(update, "maxUnavailable");
    if (unavailable) {
        /* A rolling kept as a non-object cannot hold it; the newer field wins. */
        if (!json_is_object(rolling)) {
            json_decref(rolling);
            if (!(rolling = json_object()))
                return KOP_ENOMEM;
        }
        if (json_object_set(rolling, "maxUnavailable", unavailable) != 0) {
            json_decref(rolling);
            return KOP_ENOMEM;
        }
        json_object_del(update, "maxUnavailable");
    }
    if (rolling && json_object_set_new(update, "rolling", rolling) != 0)
        return KOP_ENOMEM;
    return KOP_OK;
}

/*
 * rest_of returns what v1alpha1 cannot hold of rolling (a new reference), or
 * NULL when rolling is exactly {maxUnavailable: x}: nothing to keep.
 */
static json_t *rest_of(json_t *rolling, bool *nomem)
{
    *nomem = false;
    if (json_is_object(rolling) && json_object_get(rolling, "maxUnavailable") &&
        json_object_size(rolling) == 1)
        return NULL;
    json_t *rest = json_is_object(rolling) ? json_copy(rolling) : json_incref(rolling);
    if (!rest)
        *nomem = true;
    else if (json_is_object(rest))
        json_object_del(rest, "maxUnavailable");
    return rest;
}

/*
 * keep writes rest into the reserved annotation, as compact JSON. The
 * object must have metadata (every stored object has), so that taking the
 * annotation out again gives back the metadata it had.
 */
static kop_err keep(json_t *def, json_t *rest, kop_status *st)
{
    json_t *meta = json_object_get(def, "metadata");
    json_t *ann = json_object_get(meta, "annotations");
    if (!json_is_object(meta) || (ann && !json_is_object(ann))) {
        kop_status_setf(st, 0, "Invalid", "metadata and metadata.annotations must be objects");
        return KOP_EINVAL;
    }
    char *text = kop_meta_dumps(rest, JSON_COMPACT | JSON_ENCODE_ANY);
    ann = text ? ctf_child(meta, "annotations") : NULL;
    kop_err err = KOP_OK;
    if (!ann)
        err = KOP_ENOMEM;
    else if (strlen(text) > CTF_CONVERSION_ANNOTATION_MAX) {
        kop_status_setf(st, 0, "Invalid", "spec.update.rolling is longer than %d bytes of JSON",
                        CTF_CONVERSION_ANNOTATION_MAX);
        err = KOP_EINVAL;
    } else if (!ctf_put(ann, CTF_CONVERSION_ROLLING_ANNOTATION, json_string(text)))
        err = KOP_ENOMEM;
    free(text);
    return err;
}

/* to_alpha: rolling.maxUnavailable moves up beside strategy; the rest goes to the annotation. */
static kop_err to_alpha(json_t *def, kop_status *st)
{
    json_t *update = ctf_get2(def, "spec", "update");
    if (!json_is_object(update))
        return KOP_OK;
    if (json_object_get(update, "maxUnavailable")) {
        kop_status_setf(st, 0, "Invalid", "spec.update.maxUnavailable is not a field of v1beta1");
        return KOP_EINVAL;
    }
    json_t *rolling = json_object_get(update, "rolling");
    if (!rolling)
        return KOP_OK;
    bool nomem;
    json_t *rest = rest_of(rolling, &nomem);
    kop_err err = nomem ? KOP_ENOMEM : rest ? keep(def, rest, st) : KOP_OK;
    json_decref(rest);
    if (err)
        return err;
    json_t *unavailable = json_object_get(rolling, "maxUnavailable");
    if (json_is_object(rolling) && unavailable &&
        json_object_set(update, "maxUnavailable", unavailable) != 0)
        return KOP_ENOMEM;
    json_object_del(update, "rolling");
    return KOP_OK;
}

static bool known(const char *v)
{
    return kop_streq(v, CTF_VERSION_ALPHA) || kop_streq(v, CTF_VERSION_BETA);
}

kop_err ctf_convert_definition(json_t *def, const char *from, const char *to, kop_status *st)
{
    if (!known(from) || !known(to)) {
        kop_status_setf(st, 0, "Invalid", "cannot convert a ChallengeDefinition from %s to %s",
                        from ? from : "(none)", to ? to : "(none)");
        return KOP_EINVAL;
    }
    if (strcmp(from, to) == 0)
        return KOP_OK;
    if (!json_is_object(def)) {
        kop_status_setf(st, 0, "Invalid", "a ChallengeDefinition must be a JSON object");
        return KOP_EINVAL;
    }
    return strcmp(to, CTF_VERSION_BETA) == 0 ? to_beta(def, st) : to_alpha(def, st);
}
