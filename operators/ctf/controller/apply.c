/*
 * apply.c - applying an instance's children, for the Challenge controller
 * (a team's instance, reconcile.c) and the pool controller (a warm one,
 * pool.c): server-side apply of each child in order, each only after the
 * one before it went through, the last write of a pass stamped with the
 * digest of the whole (core/applied.c; on a child the caches show, so a
 * new leader can see it), so that a pass whose children are what was
 * applied last, as the caches show them, writes nothing, and one whose
 * children changed writes the ones that did (and a warm instance's
 * Namespace; every child when a cached one is missing).
 *
 * A child the cluster refuses fills the observation (Error) and stops the
 * apply; a warm Namespace found claimed under the pool's apply stops it
 * with KOP_ECONFLICT, so the pool never writes over a team's instance.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "controller/apply.h"
#include "kop/clock.h"

/* ---- one child ---------------------------------------------------------------- */

/* apply server-side-applies obj (borrowed); *out (when out) gets the object as stored. */
static kop_err apply(ctf_operator *op, const kop_resource *r, json_t *obj, json_t **out,
                     kop_status *st)
{
    kop_patch_req req = {.target = {r, kop_meta_namespace(obj), kop_meta_name(obj)},
                         .type = KOP_PATCH_APPLY,
                         .patch = obj,
                         .opts = {.field_manager = CTF_FIELD_MANAGER, .force = true}};
    return kop_patch_object(kop_manager_client(op->mgr), &req, out, st);
}

static const kop_resource *resource_of(const json_t *obj)
{
    static const kop_resource QUOTAS = {"", "v1", "resourcequotas", "ResourceQuota", true};
    static const kop_resource LIMITS = {"", "v1", "limitranges", "LimitRange", true};
    static const kop_resource INGRESSES = {"networking.k8s.io", "v1", "ingresses", "Ingress",
                                           true};
    static const kop_resource *const all[] = {&CTF_NAMESPACES, &CTF_SECRETS, &QUOTAS,
                                              &LIMITS, &CTF_NETWORKPOLICIES, &CTF_DEPLOYMENTS,
                                              &CTF_SERVICES, &INGRESSES, &CTF_TLSROUTES,
                                              &CTF_HTTPROUTES};
    const char *kind = json_string_value(json_object_get(obj, "kind"));
    for (size_t i = 0; kind && i < sizeof all / sizeof all[0]; i++)
        if (strcmp(all[i]->kind, kind) == 0)
            return all[i];
    return NULL;
}


/* ---- the caches' view ---------------------------------------------------------- */

/* cache_of: the cache that shows children of kind, if the operator keeps one. */
static kop_informer *cache_of(ctf_operator *op, const char *kind)
{
    if (kop_streq(kind, "Namespace"))
        return op->namespaces;
    if (kop_streq(kind, "Deployment"))
        return op->deployments;
    if (kop_streq(kind, "Service"))
        return op->services;
    if (kop_streq(kind, "NetworkPolicy"))
        return op->networkpolicies;
    if (kop_streq(kind, CTF_KIND_TLSROUTE))
        return op->tlsroutes; /* NULL unless the gateway mode is on */
    if (kop_streq(kind, CTF_KIND_HTTPROUTE))
        return op->httproutes;
    return NULL;
}

/* child_cache: the cache that shows child (cache_of its kind), or NULL. */
static kop_informer *child_cache(ctf_operator *op, const json_t *child)
{
    return cache_of(op, json_string_value(json_object_get(child, "kind")));
}

/* ctf_apply_seen tells what the caches show of children (ctf_applied_seen). */
ctf_applied_seen ctf_apply_seen(ctf_operator *op, const json_t *children)
{
    ctf_applied_seen seen = {0, 0};
    const json_t *child;
    size_t i;
    json_array_foreach(children, i, child)
    {
        const char *kind = json_string_value(json_object_get(child, "kind"));
        kop_informer *cache = cache_of(op, kind);
        json_t *cached = NULL;
        if (!cache)
            continue;
        if (kop_informer_dup_metadata(cache, kop_meta_namespace(child), kop_meta_name(child),
                                      &cached) != KOP_OK ||
            kop_meta_is_deleting(cached))
            seen.missing++;
        else if (kop_streq(kind, "Deployment"))
            seen.generations += kop_meta_generation(cached);
        json_decref(cached);
    }
    return seen;
}

/*
 * claimed_under: child is a warm instance's Namespace (no Challenge label)
 * and stored, the server's answer to its apply, carries a claim: a team
 * took it meanwhile, and the warm objects after it (the empty flag Secret)
 * must not be written over the team's.
 */
static bool claimed_under(const json_t *child, const json_t *stored)
{
    return stored && !kop_meta_label(child, CTF_LABEL_CHALLENGE) &&
           kop_meta_label(child, CTF_LABEL_POOL) && kop_meta_label(stored, CTF_LABEL_CHALLENGE);
}

/* warm_namespace: child is a warm instance's Namespace (the pool's; no Challenge yet). */
static bool warm_namespace(const json_t *child)
{
    return kop_streq(json_string_value(json_object_get(child, "kind")), "Namespace") &&
           !kop_meta_label(child, CTF_LABEL_CHALLENGE);
}

/* stamp_cached: the applied digest the caches show on child (borrowed from *hold), or NULL. */
static const char *stamp_cached(ctf_operator *op, const json_t *child, json_t **hold)
{
    kop_informer *cache = child_cache(op, child);
    *hold = NULL;
    if (!cache || kop_informer_dup_metadata(cache, kop_meta_namespace(child), kop_meta_name(child),
                                            hold) != KOP_OK)
        return NULL;
    return kop_meta_annotation(*hold, CTF_ANNOTATION_APPLIED);
}

/*
 * ctf_apply_seed: a process with no record of key takes the newest stamp
 * its caches show on children (ctf_apply_built stamps the last child a pass
 * writes, of a cached kind) as its record (ctf_applied_seed).
 */
void ctf_apply_seed(ctf_operator *op, const char *key, const json_t *children,
                    const char *digest, const ctf_applied_seen *seen, int64_t now)
{
    char newest[CTF_STAMP_SIZE] = "";
    const json_t *child;
    size_t i;
    if (json_array_size(children) == 0 || seen->missing || ctf_applied_known(op->applied, key))
        return;
    json_array_foreach(children, i, child)
    {
        json_t *hold = NULL;
        const char *stamp = stamp_cached(op, child, &hold);
        if (stamp && ctf_applied_stamp_newer(newest[0] ? newest : NULL, stamp) == stamp)
            snprintf(newest, sizeof newest, "%s", stamp);
        json_decref(hold);
    }
    (void)ctf_applied_seed(op->applied, key, digest, newest[0] ? newest : NULL, seen, now);
}

/*
 * apply_each applies the children in order but those whose skip[i] is 0 or
 * more (skip NULL: every one); gens[i] (gens may be NULL) gets child i's
 * generation as the apply answered it (a Deployment's; 0 for other kinds),
 * or skip[i] for a skipped one; *generations sums them. KOP_ECONFLICT when
 * a warm instance turns out claimed (claimed_under): nothing after its
 * Namespace is written.
 */
static kop_err apply_each(ctf_operator *op, json_t *children, const int64_t *skip,
                          int64_t *gens, int64_t *generations, ctf_observation *o,
                          const kop_reconcile *req)
{
    kop_status st;
    json_t *child;
    size_t i;
    kop_err err = KOP_OK;
    *generations = 0;
    json_array_foreach(children, i, child)
    {
        const kop_resource *r = resource_of(child);
        bool deployment = r == &CTF_DEPLOYMENTS, ns = r == &CTF_NAMESPACES;
        json_t *stored = NULL;
        int64_t gen = skip && skip[i] >= 0 ? skip[i] : 0;
        if (skip && skip[i] >= 0)
            goto counted;
        err = r ? apply(op, r, child, deployment || ns ? &stored : NULL, &st) : KOP_EINVAL;
        gen = deployment ? kop_meta_generation(stored) : 0;
        if (!err && ns && claimed_under(child, stored)) {
            kop_logger_log(req->log, KOP_LOG_INFO,
                           "a warm instance was claimed meanwhile; left to its Challenge",
                           KOP_LOG_STR("instance_namespace", kop_meta_name(child)));
            err = KOP_ECONFLICT;
        }
        json_decref(stored);
        if (err == KOP_ECONFLICT && ns)
            break;
        if (err) {
            kop_logger_log(req->log, KOP_LOG_ERROR, "apply failed", KOP_LOG_ERR(err),
                           KOP_LOG_STR("kind", json_string_value(json_object_get(child, "kind"))),
                           KOP_LOG_STR("name", kop_meta_name(child)),
                           KOP_LOG_STR("detail", st.message));
            if (err == KOP_EINVALID || err == KOP_EFORBIDDEN) {
                /* The cluster refuses this instance as built: say why, keep it. */
                ctf_observe_error(o, err == KOP_EFORBIDDEN ? "Forbidden" : "InvalidDefinition",
                                  "%s %s refused: %.300s",
                                  json_string_value(json_object_get(child, "kind")),
                                  kop_meta_name(child), st.message);
                err = KOP_OK;
            }
            break;
        }
    counted:
        if (gens)
            gens[i] = gen;
        *generations += gen;
    }
    return err;
}

/* ctf_apply_children applies every child; *generations sums the Deployments' as applied.
 * KOP_ECONFLICT when a warm instance turns out claimed (claimed_under): nothing after its
 * Namespace is written. */
kop_err ctf_apply_children(ctf_operator *op, json_t *children, int64_t *generations,
                           ctf_observation *o, const kop_reconcile *req)
{
    return apply_each(op, children, NULL, NULL, generations, o, req);
}

/* cached_generation: the cache's generation of Deployment child, or -2 when it has none. */
static int64_t cached_generation(ctf_operator *op, const json_t *child)
{
    json_t *d = NULL;
    int64_t gen = -2; /* never a record's */
    if (kop_informer_dup_metadata(op->deployments, kop_meta_namespace(child),
                                  kop_meta_name(child), &d) == KOP_OK)
        gen = kop_meta_generation(d);
    json_decref(d);
    return gen;
}

/*
 * child_skips decides, for an apply of children whose records before it
 * are was (ctf_applied_children_dup; NULL: apply every child), which need
 * not go out again (ctf_applied_child_skip): skip[i] is -1 to apply child
 * i, or the generation it counts (a Deployment's as last applied, 0 for
 * other kinds). A warm instance's Namespace always goes out (the pool's
 * apply learns from its answer whether a team claimed the instance
 * meanwhile: claimed_under). digests (an array) gets each child's digest.
 * KOP_ENOMEM: apply every child, record none.
 */
static kop_err child_skips(ctf_operator *op, const json_t *children, const json_t *was,
                           int64_t now, int64_t *skip, json_t *digests)
{
    size_t n = json_array_size(children);
    for (size_t i = 0; i < n; i++) {
        const json_t *child = json_array_get(children, i);
        const char *kind = json_string_value(json_object_get(child, "kind"));
        bool deployment = kop_streq(kind, "Deployment");
        char key[CTF_CHILD_KEY_SIZE], digest[CTF_DIGEST_HEX];
        skip[i] = -1;
        ctf_applied_child_key(child, key, sizeof key);
        if (ctf_applied_digest(child, digest) != KOP_OK ||
            json_array_append_new(digests, json_string(digest)) != 0)
            return KOP_ENOMEM;
        const json_t *rec = json_object_get(was, key);
        if (!rec || warm_namespace(child))
            continue;
        int64_t cached = deployment ? cached_generation(op, child) : CTF_APPLIED_NOT_DEPLOYMENT;
        if (ctf_applied_child_skip(rec, digest, cached, now))
            skip[i] = deployment ? cached : 0;
    }
    return KOP_OK;
}

/*
 * children_records returns was (stolen; a new object when NULL) with the
 * record of every child applied now (skip[i] < 0): its digest, now, and
 * its generation as answered (gens). Skipped children keep theirs (when
 * they were applied), and children not in this apply theirs too. NULL when
 * out of memory.
 */
static json_t *children_records(json_t *was, const json_t *children, const json_t *digests,
                                const int64_t *skip, const int64_t *gens, int64_t now)
{
    json_t *kids = was ? was : json_object();
    for (size_t i = 0; kids && i < json_array_size(children); i++) {
        char key[CTF_CHILD_KEY_SIZE];
        if (skip[i] >= 0)
            continue;
        ctf_applied_child_key(json_array_get(children, i), key, sizeof key);
        json_t *r = json_pack("{s:s, s:I, s:I}", "digest",
                              json_string_value(json_array_get(digests, i)), "at", (json_int_t)now,
                              "generation", (json_int_t)gens[i]);
        if (!r || json_object_set_new(kids, key, r) != 0) {
            json_decref(kids);
            kids = NULL;
        }
    }
    return kids;
}

/*
 * stamp_target picks the child that carries this apply's stamp, one a seed
 * can see (cache_of) and written after every other write of the pass: the
 * last child written (skip[i] < 0) when its kind is cached, else the first
 * cached child after it, which is then written too. When none follows
 * (only a Secret, or an Ingress, changed), *again is set: the last cached
 * child before it is written once more, at the end. -1 when the pass
 * writes nothing, so stamps nothing.
 */
static long stamp_target(ctf_operator *op, const json_t *children, int64_t *skip, bool *again)
{
    long n = (long)json_array_size(children), w = n - 1, t;
    *again = false;
    while (w >= 0 && skip[w] >= 0)
        w--;
    if (w < 0)
        return -1;
    for (t = w; t < n; t++) {
        if (child_cache(op, json_array_get(children, t))) {
            skip[t] = -1;
            return t;
        }
    }
    for (t = w - 1; t >= 0; t--) {
        if (child_cache(op, json_array_get(children, t))) {
            *again = true;
            return t;
        }
    }
    return w; /* no cached kind at all: stamped where no seed looks */
}

/*
 * stamp_and_apply applies children but the skipped (apply_each) with the
 * stamp of digest on their stamp_target, the last write of the pass.
 */
static kop_err stamp_and_apply(ctf_operator *op, json_t *children, int64_t *skip, int64_t *gens,
                               int64_t *generations, const char *digest, ctf_observation *o,
                               const kop_reconcile *req)
{
    bool again = false;
    long t = stamp_target(op, children, skip, &again);
    json_t *child = t >= 0 ? json_array_get(children, (size_t)t) : NULL;
    struct timespec now;
    int64_t unused = 0;
    clock_gettime(CLOCK_REALTIME, &now);
    int64_t wall_ms = (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000;
    kop_err err = KOP_OK;
    bool stamped = child && digest[0] && !again;
    if (stamped && ctf_applied_stamp(child, digest, wall_ms) != KOP_OK)
        return KOP_ENOMEM;
    err = apply_each(op, children, skip, gens, generations, o, req);
    if (err || o->reason || !again || !digest[0])
        return err;
    json_t *one = json_array();
    if (!one || json_array_append(one, child) != 0 ||
        ctf_applied_stamp(json_array_get(one, 0), digest, wall_ms) != KOP_OK) {
        json_decref(one);
        return KOP_ENOMEM;
    }
    err = apply_each(op, one, NULL, NULL, &unused, o, req);
    json_decref(one);
    return err;
}

/*
 * ctf_apply_built applies every child, unless they are what was applied
 * last (applied.c), or those that changed since; on a refusal o is filled
 * and KOP_OK returned. An apply that went through is recorded, so the
 * passes that follow (woken by the children's own events, by readiness)
 * write nothing; *applied says whether this pass wrote. A pass whose
 * children each are as last applied (an instance waiting for its turn of a
 * rolling update, applying what no version changes) writes nothing at all,
 * and only records the new whole.
 */
kop_err ctf_apply_built(ctf_operator *op, const char *key, json_t *children, ctf_observation *o,
                        const kop_reconcile *req, bool *applied)
{
    char digest[CTF_DIGEST_HEX] = "";
    int64_t now = kop_mono_ms(), generations = 0;
    long wait_ms = 0;
    kop_err err = KOP_OK;
    ctf_applied_verdict v = CTF_APPLY;
    ctf_applied_seen seen = {1, 0};
    size_t n = json_array_size(children);
    int64_t *skip = NULL, *gens = NULL;
    json_t *was = NULL, *digests = NULL;
    if (applied)
        *applied = false;
    if (ctf_applied_digest(children, digest) == KOP_OK) {
        seen = ctf_apply_seen(op, children);
        ctf_apply_seed(op, key, children, digest, &seen, now);
        v = ctf_applied_decide(op->applied, key, digest, &seen, now, &wait_ms);
    }
    if (v == CTF_APPLY_WAIT)
        o->requeue_ms = ctf_min_positive(o->requeue_ms, wait_ms);
    if (v != CTF_APPLY)
        return KOP_OK;
    /* What changed since the last apply goes out, the rest only when every cached child is
     * there (one deleted by hand is put back: every child goes out then). */
    if (seen.missing == 0)
        was = ctf_applied_children_dup(op->applied, key);
    ctf_applied_forget(op->applied, key);
    skip = n ? calloc(n, sizeof *skip) : NULL;
    gens = n ? calloc(n, sizeof *gens) : NULL;
    digests = json_array();
    if (skip && gens &&
        (!digests || child_skips(op, children, was, now, skip, digests) != KOP_OK)) {
        for (size_t i = 0; skip && i < n; i++)
            skip[i] = -1;
        json_decref(digests);
        digests = NULL; /* applied in full, the children not recorded */
    }
    bool writes = false;
    for (size_t i = 0; skip && i < n; i++)
        writes = writes || skip[i] < 0;
    if (n && (!skip || !gens))
        err = KOP_ENOMEM; /* nothing written: the pass is retried */
    else if (n)
        err = stamp_and_apply(op, children, skip, gens, &generations, digest, o, req);
    if (!err && !o->reason && digest[0]) {
        ctf_applied_record(op->applied, key, digest, generations, now);
        if (digests) {
            ctf_applied_children_keep(op->applied, key,
                                      children_records(was, children, digests, skip, gens, now));
            was = NULL; /* stolen */
        }
    }
    if (applied)
        *applied = !err && !o->reason && writes;
    json_decref(was);
    json_decref(digests);
    free(skip);
    free(gens);
    return err;
}
