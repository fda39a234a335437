/*
 * fuzz_ctf_conversion.c - libFuzzer target for the ChallengeDefinition
 * conversion between v1alpha1 and v1beta1 (operators/ctf/core/
 * conversion.h), which the conversion webhook runs on every object the
 * apiserver sends it.
 *
 * Input layout: byte 0 picks the direction (even: v1alpha1 -> v1beta1,
 * odd: the other way); the rest is any JSON text (an object, or not).
 * Invariants checked, abort() on violation:
 *  - the conversion never crashes nor leaks, whatever the JSON;
 *  - it touches nothing but spec.update and the reserved annotation:
 *    with those two taken out, the object is the one it was;
 *  - converting from v1alpha1 never fails on an object (what the apiserver
 *    stored before the upgrade must stay readable) unless it has
 *    spec.update.rolling, which v1alpha1 prunes;
 *  - a round trip gives back the object field for field, when the input
 *    had no reserved annotation and no empty annotations map (neither of
 *    which the apiserver serves);
 *  - converting to the same version changes nothing;
 *  - ctf_update_parse reads the result in its version's shape without a
 *    crash, and agrees with what it reads of the input.
 */
#include "fuzz_check.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/conversion.h"
#include "core/json.h"
#include "core/update.h"

/* bare returns a copy of def without spec.update and the reserved annotation (an empty map too). */
static json_t *bare(const json_t *def)
{
    json_t *c = json_deep_copy(def);
    json_object_del(json_object_get(c, "spec"), "update");
    json_t *ann = ctf_get2(c, "metadata", "annotations");
    json_object_del(ann, CTF_CONVERSION_ROLLING_ANNOTATION);
    if (json_is_object(ann) && json_object_size(ann) == 0)
        json_object_del(json_object_get(c, "metadata"), "annotations");
    return c;
}

/* parsed tells whether ctf_update_parse accepts def read as version v, and what it read. */
static kop_err parsed(json_t *def, const char *v, ctf_update_spec *u)
{
    json_t *copy = json_copy(def);
    if (!copy)
        return KOP_ENOMEM;
    json_object_set_new(copy, "apiVersion", json_sprintf("ctf.kopc.io/%s", v));
    kop_err err = ctf_update_parse(copy, u, NULL);
    json_decref(copy);
    return err;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    const char *from = (data[0] & 1) ? CTF_VERSION_BETA : CTF_VERSION_ALPHA;
    const char *to = (data[0] & 1) ? CTF_VERSION_ALPHA : CTF_VERSION_BETA;
    json_t *orig = json_loadb((const char *)data + 1, size - 1, JSON_DECODE_ANY, NULL);
    if (!orig)
        return 0;
    json_t *def = json_deep_copy(orig);
    kop_status st = {0};

    FUZZ_CHECK(ctf_convert_definition(def, from, from, &st) == KOP_OK);
    FUZZ_CHECK(json_equal(def, orig));

    kop_err err = ctf_convert_definition(def, from, to, &st);
    bool alpha = strcmp(from, CTF_VERSION_ALPHA) == 0;
    const json_t *update = ctf_get2(orig, "spec", "update");
    if (json_is_object(orig) && alpha && !json_object_get(update, "rolling"))
        FUZZ_CHECK(err == KOP_OK);
    if (err == KOP_OK && json_is_object(orig)) {
        json_t *b1 = bare(orig), *b2 = bare(def);
        FUZZ_CHECK(json_equal(b1, b2));
        json_decref(b1);
        json_decref(b2);

        ctf_update_spec u1, u2;
        kop_err p1 = parsed(orig, from, &u1), p2 = parsed(def, to, &u2);
        /* The reserved annotation may bring back a rolling the input never had. */
        bool saved = json_object_get(ctf_get2(orig, "metadata", "annotations"),
                                     CTF_CONVERSION_ROLLING_ANNOTATION) != NULL;
        if (!saved && p1 == KOP_OK && p2 == KOP_OK) {
            FUZZ_CHECK(u1.strategy == u2.strategy);
            FUZZ_CHECK(u1.max_unavailable == u2.max_unavailable && u1.percent == u2.percent);
        }
        if (!saved && p1 != KOP_ENOMEM && p2 != KOP_ENOMEM)
            FUZZ_CHECK((p1 == KOP_OK) == (p2 == KOP_OK) || !alpha);

        json_t *ann = ctf_get2(orig, "metadata", "annotations");
        bool clean = !saved && !(json_is_object(ann) && json_object_size(ann) == 0);
        if (ctf_convert_definition(def, to, from, &st) == KOP_OK && clean)
            FUZZ_CHECK(json_equal(def, orig));
    }
    json_decref(def);
    json_decref(orig);
    return 0;
}
