/*
 * claim.c - the claim side of warm pools: where a Challenge's instance
 * lives (ctf_pool_place), and the claim of a warm instance (ctf_pool_claim)
 * when that is not decided yet. The pool controller that keeps warm
 * instances is pool.c; the state both share is pool.h.
 *
 * The Challenge controller (reconcile.c) asks ctf_pool_place where a
 * Challenge's instance lives and, when that is not decided yet,
 * ctf_pool_claim, which claims a Ready warm instance with one conditional
 * write: a merge patch of the Namespace's labels carrying its
 * resourceVersion. Of two claimers exactly one wins; the other meets a
 * conflict and tries the next, or builds fresh. The labels written are the
 * record, so a restarted operator or a new leader finds every claim in its
 * first list.
 *
 * A claim's answer can be lost after the apiserver committed it (a cut
 * connection, a timeout, a 5xx from a proxy), and the cache may not show
 * the claim for a while. So after a conflict or an unknown outcome the
 * claimer reads the Namespace from the server (never the cache): labelled
 * with its uid, it is the Challenge's; another's or gone, the next is
 * tried; unclaimed, it is claimed again at the version read. When even
 * that read fails, the reservation stays and the claim is pending: the
 * Challenge's next pass settles it before it may try any other namespace.
 * One Challenge never holds two warm instances (issue 27, item 2).
 *
 * After the claim the instance is the Challenge's: its finalizer deletes
 * the namespace (never returned to the pool), the team's flag is written
 * into the Secret and the pods are touched so the kubelet rewrites
 * /flag/flag at once (ctf_pool_refresh_flag). A warm instance of a
 * definition with a dynamic flag holds an empty flag file and no env FLAG:
 * it never holds any team's flag before its claim.
 *
 * What a claim costs (issue 26, item 3). Reads: a page of at most
 * POOL_CLAIM_PAGE keys of the free warm namespaces (an index of the cache,
 * unparsed, from a cursor kept per pool) and the cached metadata of the
 * namespaces it tries, usually one. Writes: the claim (one merge patch of
 * the Namespace); the flag Secret when the flag is dynamic, then one touch
 * per pod so the kubelet rewrites the flag file at once; the Challenge's
 * status. Besides: the finalizer of a Challenge created without it, and
 * the Claimed Event; and before the claim, a GET of the definition
 * (reconcile.c), so that a claim right after a change of the
 * definition never takes a warm instance of the old version: any such read
 * that started after the Challenge was first seen serves, so the claims of
 * a burst share them (core/fresh.h) and most send none. A conflict or a
 * lost answer adds a GET. The pool pass
 * a claim wakes parses only the warm namespaces that changed since it last
 * looked (their resourceVersion, or an event of their objects).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "controller/apply.h"
#include "controller/claim.h"
#include "controller/pool.h"
#include "controller/update.h"
#include "kop/clock.h"

#define POOL_REQUESTS_MAX 4096  /* Challenges kept in a pool's demand window */
#define POOL_CLAIM_TRIES  4     /* warm instances tried per claim before building fresh */
#define POOL_CLAIM_ROUNDS 3     /* writes of one claim whose answers were lost, per pass */
#define POOL_RV_SIZE      64    /* a resourceVersion */
#define POOL_CLAIM_PAGE   8     /* free warm namespaces read (unparsed) per page of a claim */

/* ---- the claim records ------------------------------------------------------- */

/*
 * note_request records uid's request for a warm instance of the pool (served or not) in
 * its demand window (core/pool.h), once per window however often the Challenge asks:
 * retried, found lost, or refused by admission and woken again.
 */
static void note_request(ctf_pool *p, const char *key, const char *uid)
{
    pthread_mutex_lock(&p->lock);
    json_t *window = json_object_get(p->requests, key);
    if (!window && json_object_set_new(p->requests, key, json_object()) == 0)
        window = json_object_get(p->requests, key);
    int64_t now = kop_mono_ms();
    /* Out of the window first, so a Challenge whose last ask has aged out counts again. */
    (void)ctf_pool_demand_count(window, now, (int64_t)CTF_POOL_WINDOW_S * 1000);
    if (window && uid) /* short of memory: not counted, the pool stays as it is */
        (void)ctf_pool_demand_note(window, uid, now, POOL_REQUESTS_MAX);
    pthread_mutex_unlock(&p->lock);
}

/* remember records chal's place (id NULL: fresh); a full table forgets nothing, it just
 * stops remembering: the caches answer then, a moment later. */
static void remember(ctf_pool *p, const char *uid, const char *ns, const char *id)
{
    pthread_mutex_lock(&p->lock);
    if (uid && json_object_size(p->decided) < POOL_DECIDED_MAX) {
        json_t *d = json_pack("{s:s, s:s*}", "ns", ns, "id", id);
        if (d)
            json_object_set_new(p->decided, uid, d);
        if (d && id)
            json_object_set_new(p->taken, ns, json_string(uid));
    }
    if (uid)
        json_object_del(p->pending, uid); /* decided: nothing is unknown any more */
    pthread_mutex_unlock(&p->lock);
}

/* recall copies chal's remembered place into ns and id; CTF_PLACE_UNDECIDED when none. */
static ctf_place recall(ctf_pool *p, const char *uid, char *ns, size_t size, char *id,
                        size_t id_size)
{
    ctf_place place = CTF_PLACE_UNDECIDED;
    pthread_mutex_lock(&p->lock);
    json_t *d = uid ? json_object_get(p->decided, uid) : NULL;
    if (d) {
        const char *warm = json_string_value(json_object_get(d, "id"));
        snprintf(ns, size, "%s", json_string_value(json_object_get(d, "ns")));
        snprintf(id, id_size, "%s", warm ? warm : "");
        place = warm ? CTF_PLACE_POOLED : CTF_PLACE_FRESH;
    }
    pthread_mutex_unlock(&p->lock);
    return place;
}

/*
 * reserve marks a warm namespace as being claimed by uid here; false when
 * it already is, or the pool pass is writing it (busy): a claim and the
 * pool's writes of one namespace never overlap, so the pool never writes
 * its empty flag over a team's (issue 27, item 4).
 */
static bool reserve(ctf_pool *p, const char *ns, const char *uid)
{
    pthread_mutex_lock(&p->lock);
    bool ok = !json_object_get(p->taken, ns) && !json_object_get(p->busy, ns) &&
              json_object_set_new(p->taken, ns, json_string(uid)) == 0;
    pthread_mutex_unlock(&p->lock);
    return ok;
}

/* unreserve gives up uid's reservation of ns: the claim is known not to be uid's. */
static void unreserve(ctf_pool *p, const char *ns, const char *uid)
{
    pthread_mutex_lock(&p->lock);
    if (kop_streq(json_string_value(json_object_get(p->taken, ns)), uid))
        json_object_del(p->taken, ns);
    json_object_del(p->pending, uid);
    pthread_mutex_unlock(&p->lock);
}

/* keep_pending records that uid's claim of ns (warm id) has an outcome not known yet: the
 * reservation stays, and uid's next claim settles this one before it tries any other. */
static void keep_pending(ctf_pool *p, const char *uid, const char *ns, const char *id)
{
    pthread_mutex_lock(&p->lock);
    json_t *rec = json_pack("{s:s, s:s}", "ns", ns, "id", id ? id : "");
    if (rec)
        json_object_set_new(p->pending, uid, rec);
    pthread_mutex_unlock(&p->lock);
}

/* pending_claim copies uid's claim of unknown outcome into ns and id; false when none. */
static bool pending_claim(ctf_pool *p, const char *uid, char *ns, size_t size, char *id,
                          size_t id_size)
{
    pthread_mutex_lock(&p->lock);
    json_t *rec = json_object_get(p->pending, uid);
    if (rec) {
        snprintf(ns, size, "%s", json_string_value(json_object_get(rec, "ns")));
        snprintf(id, id_size, "%s", json_string_value(json_object_get(rec, "id")));
    }
    pthread_mutex_unlock(&p->lock);
    return rec != NULL;
}

static void count_claim(ctf_operator *op, const json_t *def, const char *result)
{
    const char *labels[] = {kop_meta_namespace(def), kop_meta_name(def), result, NULL};
    kop_metric_inc(op->pool->claims_metric, labels);
}

/* ---- where an instance lives -------------------------------------------------- */

bool ctf_pool_wanted(const json_t *def)
{
    ctf_pool_spec spec;
    return ctf_pool_parse(def, &spec, NULL) == KOP_OK && ctf_pool_enabled(&spec);
}

/* claimed_by_labels finds, in the cache, the warm namespace labelled as chal's. */
static bool claimed_by_labels(ctf_operator *op, const json_t *chal, char *ns, size_t size, char *id,
                              size_t id_size)
{
    json_t *mine = NULL, *n;
    size_t i;
    bool found = false;
    if (kop_informer_by_index(op->namespaces, CTF_INDEX_CHALLENGE, kop_meta_name(chal), &mine))
        return false;
    json_array_foreach(mine, i, n)
    {
        const char *warm = kop_meta_label(n, CTF_LABEL_POOL);
        if (!found && warm &&
            kop_streq(kop_meta_label(n, CTF_LABEL_CHALLENGE_NS), kop_meta_namespace(chal)) &&
            kop_streq(kop_meta_annotation(n, CTF_ANNOTATION_CHALLENGE_UID), kop_meta_uid(chal))) {
            snprintf(ns, size, "%s", kop_meta_name(n));
            snprintf(id, id_size, "%s", warm);
            found = true;
        }
    }
    json_decref(mine);
    return found;
}

ctf_place ctf_pool_place(ctf_operator *op, const json_t *chal, char *ns, size_t size, char *id,
                         size_t id_size)
{
    json_t *fresh = NULL;
    const char *uid = kop_meta_uid(chal);
    id[0] = '\0';
    ctf_place place = recall(op->pool, uid, ns, size, id, id_size);
    if (place != CTF_PLACE_UNDECIDED)
        return place;
    if (claimed_by_labels(op, chal, ns, size, id, id_size)) {
        remember(op->pool, uid, ns, id);
        return CTF_PLACE_POOLED;
    }
    /* ns holds the fresh instance's name: it exists, or a pass decided before. */
    if (kop_informer_dup_metadata(op->namespaces, NULL, ns, &fresh) == KOP_OK ||
        ctf_str2(chal, "status", "namespace"))
        place = CTF_PLACE_FRESH;
    json_decref(fresh);
    return place;
}

/*
 * claim_one writes chal's labels and uid onto the warm namespace name, on
 * the condition that it is still at resourceVersion rv (unclaimed).
 */
static kop_err claim_one(ctf_operator *op, const json_t *chal, const char *name, const char *rv)
{
    kop_status st;
    json_t *labels = NULL;
    kop_err err = ctf_instance_labels(chal, &labels, &st);
    if (err)
        return err;
    json_t *patch = json_pack("{s:{s:s?, s:o, s:{s:s?}}}", "metadata", "resourceVersion",
                              rv, "labels", labels, "annotations",
                              CTF_ANNOTATION_CHALLENGE_UID, kop_meta_uid(chal));
    if (!patch)
        return KOP_ENOMEM;
    kop_patch_req req = {
        .target = {&CTF_NAMESPACES, NULL, name}, .type = KOP_PATCH_MERGE, .patch = patch};
    err = kop_patch_object(kop_manager_client(op->mgr), &req, NULL, &st);
    json_decref(patch);
    return err;
}

/*
 * read_claim reads the warm namespace name from the apiserver (not the
 * cache, which may not show a claim that landed) and judges it for uid;
 * rv gets its resourceVersion. An error: the read failed, nothing is known.
 */
static kop_err read_claim(ctf_operator *op, const char *name, const char *uid,
                          ctf_claim_verdict *verdict, char *rv, size_t rv_size)
{
    kop_status st;
    json_t *n = NULL;
    kop_err err = kop_get(kop_manager_client(op->mgr), &CTF_NAMESPACES, NULL, name, &n, &st);
    if (err == KOP_ENOTFOUND)
        err = KOP_OK; /* n NULL: gone */
    if (!err) {
        *verdict = ctf_pool_claim_verdict(n, uid);
        const char *version = n ? kop_meta_resource_version(n) : NULL;
        snprintf(rv, rv_size, "%s", version ? version : "");
    }
    json_decref(n);
    return err;
}

/* What became of one claim (settle_claim). */
typedef enum claim_end {
    CLAIM_WON,     /* the namespace is the Challenge's */
    CLAIM_LOST,    /* another's, or gone: try the next */
    CLAIM_REFUSED, /* the apiserver refused the write: nothing claimed, the pass fails */
    CLAIM_UNKNOWN, /* the outcome is not known: keep the reservation, settle it next pass */
} claim_end;

/*
 * settle_claim claims the warm namespace name, reserved for chal, at
 * resourceVersion rv (NULL: a claim of unknown outcome being settled: read
 * first), and does not let go of it while it may be chal's: after a
 * conflict or a lost answer it reads the Namespace from the server, which
 * says mine (the write landed), lost (another's) or free (write again, at
 * the version read). *err holds the error of a refused or unknown end.
 */
static claim_end settle_claim(ctf_operator *op, const json_t *chal, const char *name,
                              const char *rv, kop_err *err)
{
    const char *uid = kop_meta_uid(chal);
    char seen[POOL_RV_SIZE];
    bool read_first = rv == NULL;
    snprintf(seen, sizeof seen, "%s", rv ? rv : "");
    *err = KOP_OK;
    for (int round = 0; round < POOL_CLAIM_ROUNDS; round++) {
        if (!read_first) {
            *err = claim_one(op, chal, name, seen);
            switch (ctf_pool_claim_answer(*err)) {
            case CTF_CLAIM_DONE:
                return CLAIM_WON;
            case CTF_CLAIM_GONE:
                *err = KOP_OK;
                return CLAIM_LOST;
            case CTF_CLAIM_REFUSED:
                return CLAIM_REFUSED;
            case CTF_CLAIM_CHECK:
                break;
            }
        }
        read_first = false;
        ctf_claim_verdict verdict = CTF_CLAIM_LOST;
        kop_err rerr = read_claim(op, name, uid, &verdict, seen, sizeof seen);
        if (rerr) {
            *err = rerr;
            return CLAIM_UNKNOWN;
        }
        if (verdict == CTF_CLAIM_MINE) {
            *err = KOP_OK;
            return CLAIM_WON;
        }
        if (verdict == CTF_CLAIM_LOST) {
            *err = KOP_OK;
            return CLAIM_LOST;
        }
        /* Free: the write did not land (yet). Write again at the version the server has. */
    }
    if (!*err)
        *err = KOP_ETIMEOUT;
    return CLAIM_UNKNOWN;
}

/*
 * claim_end_here acts on how uid's claim of name (warm id) ended: a win
 * sets ns and id, a loss or refusal releases the reservation, an unknown
 * end keeps it (pending). Returns true when the claimer should stop
 * trying (won, or an error to return).
 */
static bool claim_end_here(ctf_pool *p, claim_end end, const char *uid, const char *name,
                           const char *warm_id, char *ns, size_t size, char *id, size_t id_size)
{
    switch (end) {
    case CLAIM_WON:
        snprintf(ns, size, "%s", name);
        snprintf(id, id_size, "%s", warm_id);
        return true;
    case CLAIM_LOST:
        unreserve(p, name, uid);
        return false;
    case CLAIM_REFUSED:
        unreserve(p, name, uid);
        return true;
    case CLAIM_UNKNOWN:
        keep_pending(p, uid, name, warm_id);
        return true;
    }
    return true;
}

/* taken_here: this process claimed (or is claiming) the warm namespace n, which the
 * cache may not show yet. */
static bool taken_here(ctf_pool *p, const json_t *n)
{
    pthread_mutex_lock(&p->lock);
    bool taken = json_object_get(p->taken, kop_meta_name(n)) != NULL;
    pthread_mutex_unlock(&p->lock);
    return taken;
}

/*
 * claimable: a warm namespace no one claimed, not going, not being claimed
 * here, Ready, and on def's current version (its Deployments carry it,
 * rolled out: update.c). A warm instance of an older version is never
 * claimed; the pool controller replaces it.
 */
static bool claimable(ctf_operator *op, const json_t *def, const json_t *n)
{
    ctf_observation o = {.phase = CTF_STATUS_PENDING};
    ctf_instance_run run;
    char current[CTF_VERSION_LEN + 1];
    if (ctf_is_claimed(n) || kop_meta_is_deleting(n) || taken_here(op->pool, n))
        return false;
    ctf_update_look(op, kop_meta_name(n), &run);
    if (ctf_update_version(def, current) != KOP_OK || !ctf_update_current(&run, current))
        return false;
    bool ready = ctf_instance_ready(op, def, kop_meta_name(n), &o);
    json_decref(o.endpoints);
    return ready;
}

/* ctf_pool_in_use: the warm namespace name is claimed, being claimed or being written here. */
bool ctf_pool_in_use(ctf_pool *p, const char *name)
{
    pthread_mutex_lock(&p->lock);
    bool used = json_object_get(p->taken, name) || json_object_get(p->busy, name);
    pthread_mutex_unlock(&p->lock);
    return used;
}

/* next_page reads the next page of def's free warm namespaces (keys and versions, unparsed)
 * from the pool's cursor, and moves the cursor past it for the next claimer. */
static kop_err next_page(ctf_operator *op, const char *key, const char *def, kop_index_page *page,
                         json_t **keys)
{
    ctf_pool *p = op->pool;
    pthread_mutex_lock(&p->lock);
    page->cursor = (size_t)json_integer_value(json_object_get(p->cursors, key));
    pthread_mutex_unlock(&p->lock);
    kop_err err = kop_informer_index_keys(op->namespaces, POOL_INDEX_FREE, def, page, keys);
    pthread_mutex_lock(&p->lock);
    if (!err && json_object_size(p->cursors) < POOL_DECIDED_MAX)
        json_object_set_new(p->cursors, key, json_integer((json_int_t)page->cursor));
    pthread_mutex_unlock(&p->lock);
    return err;
}

/*
 * try_one claims the warm namespace name for chal when it is claimable
 * (parsing its cached metadata, the only parse a candidate costs); *tried
 * says whether it was. ns, id, *won and the error as try_claims.
 */
static kop_err try_one(ctf_operator *op, const json_t *chal, const json_t *def, const char *name,
                       char *ns, size_t size, char *id, size_t id_size, bool *won, bool *tried)
{
    const char *uid = kop_meta_uid(chal);
    json_t *cand = NULL;
    kop_err err = KOP_OK;
    *tried = false;
    if (ctf_pool_in_use(op->pool, name) ||
        kop_informer_dup_metadata(op->namespaces, NULL, name, &cand) != KOP_OK)
        return KOP_OK;
    /* The index holds a definition's name; the same name may be pooled in two namespaces. */
    if (kop_streq(kop_meta_label(cand, CTF_LABEL_POOL_NS), kop_meta_namespace(def)) &&
        claimable(op, def, cand) && reserve(op->pool, name, uid)) {
        *tried = true;
        claim_end end = settle_claim(op, chal, name, kop_meta_resource_version(cand), &err);
        *won = end == CLAIM_WON;
        (void)claim_end_here(op->pool, end, uid, name, kop_meta_label(cand, CTF_LABEL_POOL), ns,
                             size, id, id_size);
    }
    json_decref(cand);
    return err;
}

/*
 * try_claims claims one of def's warm instances for chal: ns and id set and
 * *won on success. The candidates come from the index of free warm
 * namespaces a page of keys at a time, unparsed, from a cursor the pool
 * keeps per definition: consecutive claimers start where the last one
 * stopped, not all at the same first namespace, and a claim parses only
 * the namespaces it tries, so it costs the same with a pool of 10 or of
 * 1,000. A namespace the server shows as another's (or gone) moves on to
 * the next; a refusal is returned; a claim whose outcome is not known
 * keeps its reservation and returns the error (settle_claim): the next
 * pass settles it before trying any other.
 */
static kop_err try_claims(ctf_operator *op, const json_t *chal, const json_t *def,
                          const char *key, char *ns, size_t size, char *id, size_t id_size,
                          bool *won)
{
    kop_index_page page = {.max = POOL_CLAIM_PAGE};
    size_t visited = 0;
    int tries = 0;
    kop_err err = KOP_OK;
    *won = false;
    do {
        json_t *keys = NULL, *rv;
        const char *name;
        if (next_page(op, key, kop_meta_name(def), &page, &keys) != KOP_OK)
            break;
        size_t got = json_object_size(keys);
        json_object_foreach(keys, name, rv)
        {
            bool tried = false;
            if (*won || err || tries >= POOL_CLAIM_TRIES)
                break;
            visited++;
            err = try_one(op, chal, def, name, ns, size, id, id_size, won, &tried);
            tries += tried;
        }
        json_decref(keys);
        if (got == 0)
            break;
    } while (!*won && !err && tries < POOL_CLAIM_TRIES && visited < page.total);
    return err;
}

/*
 * settle_pending settles chal's claim of unknown outcome, if it has one:
 * won (ns and id set), lost (released: claim as usual), or an error (still
 * unknown: the Challenge stays undecided and claims nothing else).
 */
static kop_err settle_pending(ctf_operator *op, const json_t *chal, char *ns, size_t size,
                              char *id, size_t id_size, bool *won)
{
    char name[CTF_NAMESPACE_SIZE], warm_id[CTF_POOL_ID_LEN + 1];
    const char *uid = kop_meta_uid(chal);
    kop_err err = KOP_OK;
    *won = false;
    if (!uid || !pending_claim(op->pool, uid, name, sizeof name, warm_id, sizeof warm_id))
        return KOP_OK;
    claim_end end = settle_claim(op, chal, name, NULL, &err);
    *won = end == CLAIM_WON;
    (void)claim_end_here(op->pool, end, uid, name, warm_id, ns, size, id, id_size);
    return end == CLAIM_LOST ? KOP_OK : err;
}

kop_err ctf_pool_claim(ctf_operator *op, const kop_reconcile *req, const json_t *chal,
                       const json_t *def, char *ns, size_t size, char *id, size_t id_size,
                       ctf_place *place)
{
    char key[POOL_KEY_SIZE];
    const char *uid = kop_meta_uid(chal);
    bool won = false;

    *place = CTF_PLACE_FRESH;
    id[0] = '\0';
    /* A claim of unknown outcome first: it may be this Challenge's already. */
    kop_err err = settle_pending(op, chal, ns, size, id, id_size, &won);
    if (err)
        return err; /* still not known: undecided, retried */
    if (!won && !ctf_pool_wanted(def)) {
        remember(op->pool, uid, ns, NULL);
        return KOP_OK;
    }
    ctf_pool_key(kop_meta_namespace(def), kop_meta_name(def), key, sizeof key);
    if (!won) {
        note_request(op->pool, key, uid);
        err = try_claims(op, chal, def, key, ns, size, id, id_size, &won);
    }
    if (err)
        return err; /* the apiserver failed: undecided, retried */
    *place = won ? CTF_PLACE_POOLED : CTF_PLACE_FRESH;
    remember(op->pool, uid, ns, won ? id : NULL);
    count_claim(op, def, won ? "pool" : "fresh");
    if (won) {
        kop_logger_log(req->log, KOP_LOG_INFO, "claimed a warm instance",
                       KOP_LOG_STR("instance_namespace", ns));
        kop_event(op->events,
                  &(kop_event_req){.object = chal, .type = KOP_EVENT_NORMAL, .reason = "Claimed",
                                   .action = "Claim"}, "claimed the warm instance in namespace %s",
                  ns);
    }
    kop_controller_enqueue(op->pool->ctl, kop_meta_namespace(def), kop_meta_name(def));
    return KOP_OK;
}

void ctf_pool_refresh_flag(ctf_operator *op, const kop_reconcile *req, const json_t *chal,
                           const char *ns)
{
    json_t *pods = NULL, *pod;
    size_t i;
    kop_status st;
    if (kop_informer_list(op->pods, ns, &pods) != KOP_OK)
        return;
    json_t *patch = json_pack("{s:{s:{s:s?}}}", "metadata", "annotations",
                              "ctf.kopc.io/flag-refresh", kop_meta_uid(chal));
    json_array_foreach(pods, i, pod)
    {
        kop_patch_req pr = {
            .target = {&CTF_PODS, ns, kop_meta_name(pod)}, .type = KOP_PATCH_MERGE, .patch = patch};
        kop_err err = patch ? kop_patch_object(req->client, &pr, NULL, &st) : KOP_ENOMEM;
        if (err && err != KOP_ENOTFOUND) /* the kubelet's periodic sync still delivers it */
            kop_logger_log(req->log, KOP_LOG_WARN, "could not touch a pod for its flag",
                           KOP_LOG_ERR(err), KOP_LOG_STR("pod", kop_meta_name(pod)));
    }
    json_decref(patch);
    json_decref(pods);
}

void ctf_pool_forget(ctf_operator *op, const char *uid)
{
    ctf_pool *p = op->pool;
    if (!p || !uid)
        return;
    pthread_mutex_lock(&p->lock);
    json_t *d = json_object_get(p->decided, uid);
    const char *ns = json_string_value(json_object_get(d, "ns"));
    if (ns && kop_streq(json_string_value(json_object_get(p->taken, ns)), uid))
        json_object_del(p->taken, ns);
    json_t *rec = json_object_get(p->pending, uid);
    const char *pns = json_string_value(json_object_get(rec, "ns"));
    if (pns && kop_streq(json_string_value(json_object_get(p->taken, pns)), uid))
        json_object_del(p->taken, pns);
    json_object_del(p->pending, uid);
    json_object_del(p->decided, uid);
    pthread_mutex_unlock(&p->lock);
}

/* ---- what a claim's write and read say -------------------------------------- */

ctf_claim_answer ctf_pool_claim_answer(kop_err err)
{
    switch (err) {
    case KOP_OK:
        return CTF_CLAIM_DONE;
    case KOP_ENOTFOUND:
        return CTF_CLAIM_GONE;
    /* Refused before anything was written: local failures and the 4xx that are not a conflict. */
    case KOP_ENOMEM:
    case KOP_EINVAL:
    case KOP_ECONFIG:
    case KOP_ECREDENTIALS:
    case KOP_EBADREQUEST:
    case KOP_EUNAUTHORIZED:
    case KOP_EFORBIDDEN:
    case KOP_EMETHODNOTALLOWED:
    case KOP_ENOTACCEPTABLE:
    case KOP_ETOOLARGE:
    case KOP_EUNSUPPORTEDMEDIA:
    case KOP_EINVALID:
    case KOP_ETOOMANYREQUESTS: /* priority and fairness refuse before acting */
        return CTF_CLAIM_REFUSED;
    default: /* 409, a timeout, a lost connection, 5xx, an unreadable answer */
        return CTF_CLAIM_CHECK;
    }
}

ctf_claim_verdict ctf_pool_claim_verdict(const json_t *nsobj, const char *uid)
{
    if (!nsobj)
        return CTF_CLAIM_LOST;
    const char *claimer = kop_meta_annotation(nsobj, CTF_ANNOTATION_CHALLENGE_UID);
    bool labelled = kop_meta_label(nsobj, CTF_LABEL_CHALLENGE) != NULL;
    /* The claim writes the label and the uid in one patch: both, or neither. */
    if (labelled && uid && kop_streq(claimer, uid))
        return CTF_CLAIM_MINE;
    if (labelled || kop_meta_is_deleting(nsobj))
        return CTF_CLAIM_LOST;
    return CTF_CLAIM_FREE;
}
