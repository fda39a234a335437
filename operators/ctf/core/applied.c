/*
 * applied.c - what the reconciler last applied to each instance, so that a
 * pass that would apply the same children again writes nothing (issue 15:
 * every pass re-applied all ten children, 2.5 passes per instance).
 *
 * A record per Challenge UID holds the SHA-256 of the children's canonical
 * text (sorted keys, compact), the sum of the applied Deployments'
 * metadata.generation (from the apply answers) and when it was made. The
 * reconciler asks ctf_applied_decide with what the caches show of the
 * children it can see (Namespace, Deployments, Services):
 *
 *   same digest, every seen child there, same generations -> skip
 *   a child missing, or a generation behind, just after    -> wait (the
 *     apply (CTF_APPLIED_LAG_MS)                              cache lags)
 *   a child missing later, a generation ahead (someone      -> apply
 *     edited a Deployment), another digest, no record, or
 *     a record older than CTF_APPLIED_RESYNC_MS
 *
 * Children the operator does not cache (Secret, ResourceQuota, LimitRange,
 * NetworkPolicies, Ingress) are put right at the next resync at the latest.
 * The records live in memory, and a full apply also stamps its digest on
 * the last child it writes (ctf_applied_stamp). A process that has no
 * record of an instance (a restarted operator, a new leader) takes the
 * newest stamp it sees in its caches as the record (ctf_applied_seed), so a takeover
 * re-applies only what changed, not every child of every instance (issue
 * 27: 3,857 writes by a new leader for 150 teams, half of them re-applies).
 * What the seed cannot see, it does not vouch for: the stamped child must be
 * of a cached kind (an instance whose last child is an Ingress is applied
 * once, as before) and every cached child present; a child edited or deleted
 * by hand while no leader ran is put right at the next resync. The digest
 * is a SHA-256 over children that include the flag: like the flag Secret,
 * it is readable only with the operator's own rights, and it does not give
 * the flag back.
 *
 * Beside the digest of the whole, the record keeps each child's own digest,
 * when it was applied and a Deployment's generation (issue 30), so that a
 * pass whose children changed applies only those that did (controller/
 * apply.c decides, with ctf_applied_child_skip); a seeded record has none.
 *
 * A lock guards the table; the work queue never hands one key to two
 * workers, so one record has one writer.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "core/applied.h"
#include "core/json.h"

struct ctf_applied {
    pthread_mutex_t lock;
    json_t *records; /* uid -> {"digest": hex, "generations": n, "at": ms} */
};

kop_err ctf_applied_new(ctf_applied **out)
{
    *out = NULL;
    ctf_applied *a = calloc(1, sizeof *a);
    if (!a)
        return KOP_ENOMEM;
    a->records = json_object();
    if (!a->records) {
        free(a);
        return KOP_ENOMEM;
    }
    pthread_mutex_init(&a->lock, NULL);
    *out = a;
    return KOP_OK;
}

void ctf_applied_free(ctf_applied *a)
{
    if (!a)
        return;
    json_decref(a->records);
    pthread_mutex_destroy(&a->lock);
    free(a);
}

kop_err ctf_applied_digest(const json_t *children, char out[CTF_DIGEST_HEX])
{
    static const char hex[] = "0123456789abcdef";
    unsigned char md[32];
    unsigned int len = 0;
    out[0] = '\0';
    char *text = kop_meta_dumps(children, JSON_COMPACT | JSON_SORT_KEYS);
    if (!text)
        return KOP_ENOMEM;
    int ok = EVP_Digest(text, strlen(text), md, &len, EVP_sha256(), NULL);
    OPENSSL_cleanse(text, strlen(text)); /* it holds the flag */
    free(text);
    if (!ok || len != sizeof md)
        return KOP_ENOMEM;
    for (size_t i = 0; i < sizeof md; i++) {
        out[2 * i] = hex[md[i] >> 4];
        out[2 * i + 1] = hex[md[i] & 15];
    }
    out[2 * sizeof md] = '\0';
    return KOP_OK;
}

ctf_applied_verdict ctf_applied_decide(ctf_applied *a, const char *uid, const char *digest,
                                       const ctf_applied_seen *seen, int64_t now_ms, long *wait_ms)
{
    ctf_applied_verdict v = CTF_APPLY;
    *wait_ms = 0;
    pthread_mutex_lock(&a->lock);
    json_t *r = uid ? json_object_get(a->records, uid) : NULL;
    const char *was = json_string_value(json_object_get(r, "digest"));
    int64_t at = json_integer_value(json_object_get(r, "at"));
    int64_t gens = json_integer_value(json_object_get(r, "generations"));
    int64_t age = now_ms - at;
    if (!was || strcmp(was, digest) != 0 || age < 0 || age >= CTF_APPLIED_RESYNC_MS)
        goto out; /* nothing known, something new, or time to put everything right */
    if (seen->missing == 0 && seen->generations == gens)
        v = CTF_APPLY_SKIP;
    else if (seen->generations <= gens && age < CTF_APPLIED_LAG_MS) {
        v = CTF_APPLY_WAIT; /* the caches have not caught up with the apply yet */
        *wait_ms = (long)(CTF_APPLIED_LAG_MS - age);
    }
out:
    pthread_mutex_unlock(&a->lock);
    return v;
}

void ctf_applied_record(ctf_applied *a, const char *uid, const char *digest, int64_t generations,
                        int64_t now_ms)
{
    if (!uid)
        return;
    json_t *r = json_pack("{s:s, s:I, s:I}", "digest", digest, "generations",
                          (json_int_t)generations, "at", (json_int_t)now_ms);
    pthread_mutex_lock(&a->lock);
    if (!r || json_object_set_new(a->records, uid, r) != 0)
        json_object_del(a->records, uid); /* no memory: the next pass applies again */
    pthread_mutex_unlock(&a->lock);
}

bool ctf_applied_known(ctf_applied *a, const char *uid)
{
    if (!uid)
        return false;
    pthread_mutex_lock(&a->lock);
    bool known = json_object_get(a->records, uid) != NULL;
    pthread_mutex_unlock(&a->lock);
    return known;
}

void ctf_applied_forget(ctf_applied *a, const char *uid)
{
    if (!uid)
        return;
    pthread_mutex_lock(&a->lock);
    json_object_del(a->records, uid);
    pthread_mutex_unlock(&a->lock);
}

void ctf_applied_child_key(const json_t *child, char *out, size_t size)
{
    const char *kind = json_string_value(json_object_get(child, "kind"));
    const char *ns = kop_meta_namespace(child);
    snprintf(out, size, "%s/%s/%s", kind ? kind : "", ns ? ns : "", kop_meta_name(child));
}

json_t *ctf_applied_children_dup(ctf_applied *a, const char *uid)
{
    if (!uid)
        return NULL;
    pthread_mutex_lock(&a->lock);
    json_t *kids = json_object_get(json_object_get(a->records, uid), "children");
    json_t *dup = kids ? json_deep_copy(kids) : NULL;
    pthread_mutex_unlock(&a->lock);
    return dup;
}

bool ctf_applied_child_skip(const json_t *was, const char *digest, int64_t cached_generation,
                            int64_t now_ms)
{
    const char *d = json_string_value(json_object_get(was, "digest"));
    int64_t age = now_ms - json_integer_value(json_object_get(was, "at"));
    if (!d || !digest || strcmp(d, digest) != 0 || age < 0 || age >= CTF_APPLIED_RESYNC_MS)
        return false;
    return cached_generation == CTF_APPLIED_NOT_DEPLOYMENT ||
           (cached_generation >= 0 &&
            cached_generation == json_integer_value(json_object_get(was, "generation")));
}

void ctf_applied_children_keep(ctf_applied *a, const char *uid, json_t *children)
{
    if (!uid || !children) {
        json_decref(children);
        return;
    }
    pthread_mutex_lock(&a->lock);
    json_t *r = json_object_get(a->records, uid);
    if (!r)
        json_decref(children); /* no record to keep them on */
    else if (json_object_set_new(r, "children", children) != 0) /* steals, even on failure */
        json_object_del(a->records, uid); /* no memory: the next pass applies again */
    pthread_mutex_unlock(&a->lock);
}

/* is_digest: s is exactly a digest's lowercase hex. */
static bool is_digest(const char *s)
{
    size_t n = strspn(s, "0123456789abcdef");
    return n == CTF_DIGEST_HEX - 1 && s[n] == '\0';
}

kop_err ctf_applied_stamp(json_t *child, const char *digest, int64_t wall_ms)
{
    char value[CTF_STAMP_SIZE];
    if (!child || !digest || !is_digest(digest) || wall_ms < 0)
        return KOP_EINVAL;
    snprintf(value, sizeof value, "%lld:%s", (long long)wall_ms, digest);
    return kop_meta_set_annotation(child, CTF_ANNOTATION_APPLIED, value) ? KOP_OK : KOP_ENOMEM;
}

/* stamp_parse: stamp's time (0 without one) and its digest (borrowed); false when not one. */
static bool stamp_parse(const char *stamp, int64_t *ms, const char **digest)
{
    const char *colon = stamp ? strchr(stamp, ':') : NULL;
    size_t digits = colon ? strspn(stamp, "0123456789") : 0;
    *ms = 0;
    *digest = colon ? colon + 1 : stamp;
    if (colon && (digits == 0 || digits > 18 || stamp + digits != colon))
        return false;
    if (colon)
        *ms = strtoll(stamp, NULL, 10);
    return *digest && is_digest(*digest);
}

const char *ctf_applied_stamp_newer(const char *a, const char *b)
{
    int64_t ma, mb;
    const char *da, *db;
    bool ok_a = stamp_parse(a, &ma, &da), ok_b = stamp_parse(b, &mb, &db);
    if (!ok_b)
        return ok_a ? a : NULL;
    return ok_a && ma >= mb ? a : b;
}

bool ctf_applied_seed(ctf_applied *a, const char *uid, const char *digest, const char *stamp,
                      const ctf_applied_seen *seen, int64_t now_ms)
{
    int64_t ms;
    const char *stamped;
    if (!uid || !digest || !digest[0] || !stamp_parse(stamp, &ms, &stamped) ||
        strcmp(stamped, digest) != 0 || seen->missing != 0 || ctf_applied_known(a, uid))
        return false;
    ctf_applied_record(a, uid, digest, seen->generations, now_ms);
    return ctf_applied_known(a, uid); /* false only when there was no memory for it */
}
