/*
 * fuzz_ctf_stamp.c - libFuzzer target for the applied stamps the CTF
 * operator reads back from its caches (operators/ctf/core/applied.h:
 * ctf_applied_stamp_newer, ctf_applied_seed): an annotation anyone with
 * write access to an instance's objects can set to anything.
 *
 * Input layout: two stamps separated by the first NUL or '\n' (the second
 * absent when there is none).
 * Invariants checked, abort() on violation:
 *  - ctf_applied_stamp_newer returns one of its arguments or NULL; NULL
 *    exactly when it returns NULL with the arguments swapped; a stamp is
 *    never newer than itself in a way that drops it (newer(a, a) is a or
 *    NULL);
 *  - ctf_applied_stamp stamps a digest (64 lowercase hex digits) and
 *    refuses anything else; what it writes is one ctf_applied_stamp_newer
 *    takes, newer than one written a millisecond before, and seeds the
 *    digest it names;
 *  - ctf_applied_seed of a fuzzed stamp records a record only when the
 *    stamp is a stamp (newer(stamp, NULL) is it) of exactly that digest.
 */
#include "fuzz_check.h"
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kop/meta.h>

#include "core/applied.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* check_pair: the invariants of ctf_applied_stamp_newer on a and b (either may be NULL). */
static void check_pair(const char *a, const char *b)
{
    const char *ab = ctf_applied_stamp_newer(a, b), *ba = ctf_applied_stamp_newer(b, a);
    FUZZ_CHECK(ab == NULL || ab == a || ab == b);
    FUZZ_CHECK(ba == NULL || ba == a || ba == b);
    FUZZ_CHECK((ab == NULL) == (ba == NULL));
    const char *aa = ctf_applied_stamp_newer(a, a);
    FUZZ_CHECK(aa == NULL || aa == a);
}

/* check_seed: a seed from stamp records exactly when stamp names digest. */
static void check_seed(const char *stamp, const char *digest)
{
    ctf_applied *a = NULL;
    const ctf_applied_seen whole = {.missing = 0, .generations = 1};
    if (ctf_applied_new(&a) != KOP_OK)
        return;
    bool seeded = ctf_applied_seed(a, "uid", digest, stamp, &whole, 1000);
    FUZZ_CHECK(seeded == ctf_applied_known(a, "uid"));
    if (seeded) {
        FUZZ_CHECK(ctf_applied_stamp_newer(stamp, NULL) == stamp);
        FUZZ_CHECK(strstr(stamp, digest) != NULL);
    }
    ctf_applied_free(a);
}

/* check_written: what ctf_applied_stamp writes is read back as written. */
static void check_written(const char *digest, int64_t ms)
{
    json_t *child = json_pack("{s:{s:s}}", "metadata", "name", "c");
    json_t *before = json_pack("{s:{s:s}}", "metadata", "name", "c");
    bool hex = strspn(digest, "0123456789abcdef") == CTF_DIGEST_HEX - 1;
    if (!child || !before)
        goto out;
    kop_err err = ctf_applied_stamp(child, digest, ms);
    FUZZ_CHECK(hex ? err == KOP_OK : err == KOP_EINVAL); /* only a digest is stamped */
    if (err)
        goto out;
    FUZZ_CHECK(ctf_applied_stamp(before, digest, ms - 1) == KOP_OK);
    const char *now = kop_meta_annotation(child, CTF_ANNOTATION_APPLIED);
    const char *then = kop_meta_annotation(before, CTF_ANNOTATION_APPLIED);
    FUZZ_CHECK(now && then && strlen(now) < CTF_STAMP_SIZE);
    FUZZ_CHECK(ctf_applied_stamp_newer(now, NULL) == now);
    FUZZ_CHECK(ctf_applied_stamp_newer(then, now) == now);
    check_seed(now, digest);
out:
    json_decref(child);
    json_decref(before);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    char *second = NULL;
    size_t first_len = strcspn(text, "\n");
    if (first_len < size) {
        text[first_len] = '\0';
        second = text + first_len + 1;
    }
    check_pair(text, second);
    check_pair(text, NULL);
    /* The digest the stamp names, if it names one, and a digest it does not name. */
    const char *colon = strchr(text, ':');
    const char *named = colon ? colon + 1 : text;
    char other[CTF_DIGEST_HEX];
    memset(other, '0', CTF_DIGEST_HEX - 1);
    other[CTF_DIGEST_HEX - 1] = '\0';
    if (strlen(named) == CTF_DIGEST_HEX - 1) {
        check_seed(text, named);
        check_written(named, 1700000000000 + (int64_t)(size % 1000));
    }
    check_seed(text, other);
    free(text);
    return 0;
}
