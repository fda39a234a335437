/*
 * pool.c - warm pools: instances of a definition built before any team asks
 * for one, so that a team's Challenge is Running the moment it claims one.
 *
 * A warm instance is an instance namespace like any other (same children,
 * same isolation) whose objects carry the pool's labels instead of a team's
 * (instance.c, ctf_build_pooled_children). Two controllers share it:
 *
 *   the pool controller (pool_reconcile, keyed by ChallengeDefinition)
 *     keeps ctf_pool_target unclaimed warm instances of each definition
 *     applied and Ready, starts new ones as the CTF's quota allows (each
 *     start reserved in the admission ledger before it is made, so warm
 *     and team instances together never pass --max-instances), deletes
 *     extra, failed or orphaned ones (a definition deleted, min lowered),
 *     and reports status.pool on the definition and ctf_pool_* metrics;
 *
 *   the Challenge controller (reconcile.c) asks ctf_pool_place where a
 *     Challenge's instance lives and, when that is not decided yet,
 *     ctf_pool_claim, which claims a Ready warm instance with one
 *     conditional write: a merge patch of the Namespace's labels carrying
 *     its resourceVersion. Of two claimers exactly one wins; the other
 *     meets a conflict and tries the next, or builds fresh. The labels
 *     written are the record, so a restarted operator or a new leader
 *     finds every claim in its first list.
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
 * A pool whose warm instances fail to start replaces them, but waits
 * before it starts new ones, longer after each pass that met a failure
 * (ctf_pool_backoff_ms): a broken image does not churn namespaces.
 *
 * What a claim costs (issue 26, item 3). Reads: a page of at most
 * POOL_CLAIM_PAGE keys of the free warm namespaces (an index of the cache,
 * unparsed, from a cursor kept per pool) and the cached metadata of the
 * namespaces it tries, usually one. Writes: the claim (one merge patch of
 * the Namespace); the flag Secret when the flag is dynamic, then one touch
 * per pod so the kubelet rewrites the flag file at once; the Challenge's
 * status. Besides: the finalizer of a Challenge created without it, and
 * the Claimed Event. A conflict or a lost answer adds a GET. The pool pass
 * a claim wakes parses only the warm namespaces that changed since it last
 * looked (their resourceVersion, or an event of their objects).
 *
 * In memory, per process: the places decided (a claim the cache may not
 * show yet must not be made twice), the claims of unknown outcome, the
 * namespaces the pool pass is writing, each pool's claim cursor and last
 * look, the request times that size an autoscaled pool, and each pool's
 * run of failures. Losing them on a restart is safe: the caches show every
 * claim (an unknown one shows as its namespace's labels, or as an orphan
 * once its Challenge is gone), a pool falls back to min until demand shows
 * again, a new process looks at every warm instance once (and writes
 * nothing where the digest of the last full apply, stamped on the server,
 * still holds: applied.c), and a failing pool fails again (and waits).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/rand.h>

#include "controller/operator.h"
#include "kop/clock.h"

#define POOL_KEY_SIZE     320   /* "<namespace>/<definition>" */
#define POOL_REQUESTS_MAX 4096  /* request times kept per pool */
#define POOL_CLAIM_TRIES  4     /* warm instances tried per claim before building fresh */
#define POOL_CREATE_BATCH 20    /* warm instances started per pass */
#define POOL_RESYNC_MS    30000 /* an autoscaled pool looks again as its window slides */
#define POOL_DECIDED_MAX  200000
#define POOL_CLAIM_ROUNDS 3     /* writes of one claim whose answers were lost, per pass */
#define POOL_RV_SIZE      64    /* a resourceVersion */
#define POOL_CLAIM_PAGE   8     /* free warm namespaces read (unparsed) per page of a claim */
#define POOL_INDEX_FREE   "pool-free" /* unclaimed warm namespaces by their definition's name */
#define POOL_SEEN_MS      60000 /* a warm instance unchanged is looked at fully this often */
#define SEEN_CLAIMED      1     /* what a pass records of a warm namespace: claimed, */
#define SEEN_READY        2     /* or unclaimed and Ready, */
#define SEEN_GOING        3     /* or being deleted */

struct ctf_pool {
    pthread_mutex_t lock;
    json_t *decided;  /* Challenge uid -> {"ns": namespace, "id": warm id (pooled only)} */
    json_t *taken;    /* warm namespace -> Challenge uid: claimed (or being claimed) here */
    json_t *pending;  /* Challenge uid -> {"ns", "id"}: a claim whose outcome is not known yet */
    json_t *busy;     /* warm namespace -> true: the pool pass is writing it; not claimable */
    json_t *cursors;  /* pool key -> where the next claim reads the free index (kop_index_page) */
    json_t *seen;     /* pool key -> {warm namespace -> {"rv", "gen", "at", "state"}}: last pass */
    json_t *dirty;    /* warm namespace -> true: an object of it changed since it was looked at */
    json_t *requests; /* pool key -> [monotonic ms, ...], oldest first */
    json_t *targets;  /* pool key -> the target last acted on */
    json_t *failing;  /* pool key -> {"n": passes with failures, "gen": generation, "until": ms} */
    kop_controller *ctl;
    kop_metric *target_metric, *instances_metric, *claims_metric;
};

/* ---- small helpers ------------------------------------------------------------ */

static void pool_key(const char *ns, const char *def, char *out, size_t size)
{
    snprintf(out, size, "%s/%s", ns ? ns : "", def ? def : "");
}

static bool is_claimed(const json_t *nsobj)
{
    return kop_meta_label(nsobj, CTF_LABEL_CHALLENGE) != NULL;
}

/* recent_requests counts the pool's requests inside the window, forgetting older ones. */
static int recent_requests(ctf_pool *p, const char *key)
{
    int64_t since = kop_mono_ms() - (int64_t)CTF_POOL_WINDOW_S * 1000;
    pthread_mutex_lock(&p->lock);
    json_t *times = json_object_get(p->requests, key);
    while (json_array_size(times) > 0 &&
           json_integer_value(json_array_get(times, 0)) < (json_int_t)since)
        json_array_remove(times, 0);
    int n = (int)json_array_size(times);
    pthread_mutex_unlock(&p->lock);
    return n;
}

/* note_request records a request for a warm instance of the pool (served or not). */
static void note_request(ctf_pool *p, const char *key)
{
    pthread_mutex_lock(&p->lock);
    json_t *times = json_object_get(p->requests, key);
    if (!times && json_object_set_new(p->requests, key, json_array()) == 0)
        times = json_object_get(p->requests, key);
    if (times && json_array_size(times) >= POOL_REQUESTS_MAX)
        json_array_remove(times, 0);
    if (times)
        json_array_append_new(times, json_integer(kop_mono_ms()));
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

/* hold_warm marks the warm namespace ns as being written by the pool pass; false when it is
 * claimed or being claimed here (then the pass must not write it). */
static bool hold_warm(ctf_pool *p, const char *ns)
{
    pthread_mutex_lock(&p->lock);
    bool ok = !json_object_get(p->taken, ns) && json_object_set_new(p->busy, ns, json_true()) == 0;
    pthread_mutex_unlock(&p->lock);
    return ok;
}

/* release_warm ends hold_warm: the namespace may be claimed again. */
static void release_warm(ctf_pool *p, const char *ns)
{
    pthread_mutex_lock(&p->lock);
    json_object_del(p->busy, ns);
    pthread_mutex_unlock(&p->lock);
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

/* claimable: a warm namespace no one claimed, not going, not being claimed here, and Ready. */
static bool claimable(ctf_operator *op, const json_t *def, const json_t *n)
{
    ctf_observation o = {.phase = CTF_STATUS_PENDING};
    if (is_claimed(n) || kop_meta_is_deleting(n) || taken_here(op->pool, n))
        return false;
    bool ready = ctf_instance_ready(op, def, kop_meta_name(n), &o);
    json_decref(o.endpoints);
    return ready;
}

/* in_use: the warm namespace name is claimed, being claimed or being written here. */
static bool in_use(ctf_pool *p, const char *name)
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
    if (in_use(op->pool, name) ||
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
    pool_key(kop_meta_namespace(def), kop_meta_name(def), key, sizeof key);
    if (!won) {
        note_request(op->pool, key);
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
        kop_event(op->events, chal, KOP_EVENT_NORMAL, "Claimed", "Claim",
                  "claimed the warm instance in namespace %s", ns);
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

/* ---- the pool controller --------------------------------------------------------- */

/* pool_view: what one pass of the pool controller saw. */
typedef struct pool_view {
    int unclaimed; /* warm, claimed by no one, not being deleted */
    int ready;     /* of those, Ready */
    int claimed;   /* claimed, not being deleted */
    int failed;    /* failed to start: deleted by this pass */
    json_t *spare; /* names of the unclaimed, not Ready first (the ones to delete first) */
} pool_view;

/* warm_flag: the flag a warm instance holds: a static flag, "" for a dynamic one. */
static kop_err warm_flag(ctf_operator *op, const json_t *def, char **flag, kop_status *st)
{
    const char *name, *key;
    *flag = NULL;
    if (ctf_flag_secret_ref(def, &name, &key)) {
        *flag = strdup("");
        return *flag ? KOP_OK : KOP_ENOMEM;
    }
    return ctf_team_flag(op, def, "pool", flag, st);
}

kop_err ctf_pool_build_warm(ctf_operator *op, const json_t *def, const char *id, json_t **out,
                            kop_status *st)
{
    char *flag = NULL;
    kop_err err = warm_flag(op, def, &flag, st);
    *out = NULL;
    if (!err)
        err = ctf_build_pooled_children(&op->instance, def, id, NULL, flag, out, st);
    free(flag); /* static or empty: not a team's secret */
    return err;
}

/* apply_warm applies warm instance id of def (its record keyed by the namespace). */
static kop_err apply_warm(ctf_operator *op, const kop_reconcile *req, const json_t *def,
                          const char *ns, const char *id, ctf_observation *o)
{
    kop_status st;
    json_t *children = NULL;
    kop_err err = ctf_pool_build_warm(op, def, id, &children, &st);
    if (err) {
        ctf_observe_error(o, CTF_REASON_INVALID_DEFINITION, "%s", st.message);
        return err == KOP_ENOMEM ? err : KOP_OK;
    }
    err = ctf_apply_built(op, ns, children, o, req, NULL);
    json_decref(children);
    return err;
}

/* delete_warm deletes a warm namespace, unless a claim changed it since it was cached. */
static void delete_warm(ctf_operator *op, const kop_reconcile *req, const json_t *n,
                        const char *why)
{
    kop_status st;
    kop_delete_req del = {.target = {&CTF_NAMESPACES, NULL, kop_meta_name(n)},
                          .opts = {.propagation = KOP_PROPAGATION_BACKGROUND,
                                   .precondition_uid = kop_meta_uid(n),
                                   .precondition_resource_version = kop_meta_resource_version(n)}};
    kop_err err = kop_delete_object(req->client, &del, NULL, &st);
    ctf_applied_forget(op->applied, kop_meta_name(n));
    if (err == KOP_OK)
        kop_logger_log(req->log, KOP_LOG_INFO, "deleted a warm instance",
                       KOP_LOG_STR("instance_namespace", kop_meta_name(n)),
                       KOP_LOG_STR("why", why));
}

/* started_too_long: a warm instance not Ready within the definition's start timeout. */
static bool started_too_long(const json_t *def, const json_t *n)
{
    ctf_lifetime lt;
    int64_t timeout_ms = 5 * 60 * 1000;
    if (ctf_lifetime_parse(json_object_get(def, "spec"), &lt, NULL) == KOP_OK)
        timeout_ms = lt.start_timeout_ms;
    return difftime(time(NULL), ctf_created_at(n)) * 1000 >= (double)timeout_ms;
}

/* mark_dirty records that an object of the warm namespace ns changed (pool_reconcile looks at
 * it again). A full table is emptied with the records it guards: every instance is looked at. */
static void mark_dirty(ctf_pool *p, const char *ns)
{
    pthread_mutex_lock(&p->lock);
    if (json_object_size(p->dirty) >= POOL_DECIDED_MAX) {
        json_object_clear(p->dirty);
        json_object_clear(p->seen);
    }
    json_object_set_new(p->dirty, ns, json_true());
    pthread_mutex_unlock(&p->lock);
}

/*
 * unchanged: what the pool's last pass recorded of warm namespace name (in
 * before) still holds: same resourceVersion and definition generation, no
 * event of its objects since (dirty), recorded less than POOL_SEEN_MS ago.
 * Returns the state recorded (SEEN_*), 0 when it must be looked at.
 */
static int unchanged(ctf_pool *p, const json_t *before, const char *name, const char *rv,
                     int64_t gen, int64_t now)
{
    const json_t *rec = json_object_get(before, name);
    if (!rec || !kop_streq(json_string_value(json_object_get(rec, "rv")), rv) ||
        json_integer_value(json_object_get(rec, "gen")) != gen ||
        now - json_integer_value(json_object_get(rec, "at")) >= POOL_SEEN_MS)
        return 0;
    pthread_mutex_lock(&p->lock);
    bool dirty = json_object_get(p->dirty, name) != NULL;
    pthread_mutex_unlock(&p->lock);
    return dirty ? 0 : (int)json_integer_value(json_object_get(rec, "state"));
}

/* take_dirty clears name's dirty mark before it is looked at: an event after this marks it
 * again (the cache is updated before the mark), so none is missed. */
static void take_dirty(ctf_pool *p, const char *name)
{
    pthread_mutex_lock(&p->lock);
    json_object_del(p->dirty, name);
    pthread_mutex_unlock(&p->lock);
}

/* see records what this pass found of name (SEEN_*; 0: nothing worth keeping) in after. */
static void see(json_t *after, const char *name, const char *rv, int64_t gen, int64_t now,
                int state)
{
    if (state)
        json_object_set_new(after, name,
                            json_pack("{s:s, s:I, s:I, s:i}", "rv", rv, "gen", (json_int_t)gen,
                                      "at", (json_int_t)now, "state", state));
}

/*
 * look_at_one looks at the warm namespace n of def (NULL: an orphan,
 * deleted): keeps it applied, counts it in v, replaces it when it failed.
 * Returns what to record of it (SEEN_*), 0 for nothing; *err the apply's.
 */
static int look_at_one(ctf_operator *op, const kop_reconcile *req, const json_t *def,
                       const json_t *n, json_t *ready, pool_view *v, kop_err *err)
{
    const char *ns = kop_meta_name(n), *id = kop_meta_label(n, CTF_LABEL_POOL);
    ctf_observation o = {.phase = CTF_STATUS_PENDING};
    if (kop_meta_is_deleting(n))
        return SEEN_GOING;
    /* The Challenge's (or being claimed here): never touched here. From here until
     * release_warm no claim can begin on it. */
    if (is_claimed(n) || !hold_warm(op->pool, ns)) {
        v->claimed++;
        return is_claimed(n) ? SEEN_CLAIMED : 0;
    }
    if (!def) {
        delete_warm(op, req, n, "its definition is gone or has no pool");
        release_warm(op->pool, ns);
        return 0;
    }
    /* n was read from the cache right before this (look_at); a claim on the server shows in
     * the Namespace's apply answer, which stops the apply before the flag Secret. */
    kop_err e = apply_warm(op, req, def, ns, id, &o);
    release_warm(op->pool, ns);
    if (e == KOP_ECONFLICT) {
        v->claimed++;
        return 0;
    }
    *err = *err ? *err : e;
    bool ok = !o.reason && ctf_instance_ready(op, def, ns, &o);
    json_decref(o.endpoints);
    if (!ok && (o.reason || started_too_long(def, n))) {
        kop_event(op->events, def, KOP_EVENT_WARNING, "WarmInstanceFailed", "Replace",
                  "warm instance %s failed (%s): replacing it", ns,
                  o.reason ? o.message : "not Ready within startTimeout");
        delete_warm(op, req, n, "it failed to start");
        v->failed++;
        return 0;
    }
    v->unclaimed++;
    v->ready += ok;
    json_array_append_new(ok ? ready : v->spare, json_string(ns));
    return ok && !e ? SEEN_READY : 0;
}

/*
 * look_at keeps the unclaimed warm instances of def_ns/def_name applied
 * (def NULL: they are orphans, deleted), and counts what it sees. A warm
 * instance that cannot start (an image that cannot be pulled, a crash
 * loop, the start timeout) is deleted, with an Event, and a new one takes
 * its place.
 *
 * It reads the pool's index as keys and versions, unparsed, and skips a
 * warm instance that is Ready or claimed and unchanged since the last
 * pass (unchanged): a pass woken by one claim looks at that claim's
 * namespace and the ones whose objects changed, not at every warm
 * instance. Each is still looked at fully every POOL_SEEN_MS.
 *
 * It never writes a warm instance that is claimed: not one this process
 * claimed or is claiming (taken), held against claims while it writes
 * (hold_warm), read from the cache right before the write, and on
 * the server by the Namespace's apply, whose answer shows a claim before
 * the flag Secret is written (ctf_apply_built stops there): the empty flag
 * of a warm instance never lands on a team's.
 */
static kop_err look_at(ctf_operator *op, const kop_reconcile *req, const char *key,
                       const json_t *def, pool_view *v)
{
    ctf_pool *p = op->pool;
    json_t *keys = NULL, *rv, *ready = json_array(), *after = json_object();
    const char *name;
    int64_t now = kop_mono_ms(), gen = def ? kop_meta_generation(def) : -1;
    kop_err err = KOP_OK;
    v->spare = json_array();
    if (!ready || !after || !v->spare ||
        kop_informer_index_keys(op->namespaces, CTF_INDEX_POOL, req->name, NULL, &keys)) {
        json_decref(ready);
        json_decref(after);
        return KOP_ENOMEM;
    }
    pthread_mutex_lock(&p->lock);
    json_t *before = json_incref(json_object_get(p->seen, key));
    pthread_mutex_unlock(&p->lock);
    json_object_foreach(keys, name, rv)
    {
        const char *version = json_string_value(rv);
        int state = def ? unchanged(p, before, name, version, gen, now) : 0;
        if (state == SEEN_READY && in_use(p, name))
            state = 0; /* being claimed or claimed here: the cache may not show it yet */
        if (state) { /* as the last pass left it: counted, not parsed */
            v->claimed += state == SEEN_CLAIMED;
            v->unclaimed += state == SEEN_READY;
            v->ready += state == SEEN_READY;
            if (state == SEEN_READY)
                json_array_append_new(ready, json_string(name));
            json_object_set(after, name, json_object_get(before, name));
            continue;
        }
        json_t *n = NULL;
        take_dirty(p, name);
        if (kop_informer_dup_metadata(op->namespaces, NULL, name, &n) != KOP_OK)
            continue;
        /* The index holds a definition's name; the same name may be pooled in two namespaces. */
        if (kop_streq(kop_meta_label(n, CTF_LABEL_POOL_NS), req->namespace))
            see(after, name, kop_meta_resource_version(n), gen, now,
                look_at_one(op, req, def, n, ready, v, &err));
        json_decref(n);
    }
    json_array_extend(v->spare, ready); /* not Ready first */
    pthread_mutex_lock(&p->lock);
    json_object_foreach(before, name, rv)
    {
        if (!json_object_get(keys, name))
            json_object_del(p->dirty, name); /* gone: its last events need no look */
    }
    if (def && json_object_size(p->seen) < POOL_DECIDED_MAX)
        json_object_set(p->seen, key, after); /* only the namespaces there now */
    else
        json_object_del(p->seen, key);
    pthread_mutex_unlock(&p->lock);
    json_decref(before);
    json_decref(after);
    json_decref(ready);
    json_decref(keys);
    return err;
}

/*
 * release_slot gives back the slot reserved for the warm namespace ns,
 * whose start failed, unless the cache shows that the namespace was
 * created all the same (its answer lost): then it stays counted, as it
 * exists. The cache is read after the slot is given back, so a creation
 * event before it is seen here and one after it counts the namespace again
 * (admission.c's namespace handler).
 */
static void release_slot(ctf_operator *op, const char *key, const char *ns)
{
    json_t *n = NULL;
    ctf_admission_drop_warm(op->admission, ns);
    if (kop_informer_dup_metadata(op->namespaces, NULL, ns, &n) == KOP_OK &&
        !kop_meta_is_deleting(n) && !is_claimed(n))
        ctf_admission_add_warm(op->admission, key, ns);
    json_decref(n);
}

/*
 * start_warm starts up to want new warm instances of def (pool key key),
 * each from a slot it reserved in the admission's ledger just before, under
 * the lock every admission takes: a fresh Challenge admitted meanwhile sees
 * every warm instance already started, and the pool stops at the first
 * slot refused (--max-instances reached).
 */
static kop_err start_warm(ctf_operator *op, const kop_reconcile *req, const json_t *def,
                          const char *key, int want, int *started)
{
    kop_err err = KOP_OK;
    *started = 0;
    for (int i = 0; i < want && i < POOL_CREATE_BATCH && !err; i++) {
        unsigned char raw[CTF_POOL_ID_LEN / 2];
        char id[CTF_POOL_ID_LEN + 1], ns[CTF_NAMESPACE_SIZE];
        ctf_observation o = {.phase = CTF_STATUS_PENDING};
        if (RAND_bytes(raw, sizeof raw) != 1)
            return KOP_ENOMEM;
        for (size_t k = 0; k < sizeof raw; k++)
            snprintf(id + 2 * k, 3, "%02x", raw[k]);
        if (ctf_pool_namespace(kop_meta_namespace(def), kop_meta_name(def), id, ns, sizeof ns))
            return KOP_EINVAL;
        if (!ctf_admission_reserve_warm(op->admission, key, ns))
            break; /* no room left in --max-instances */
        err = apply_warm(op, req, def, ns, id, &o);
        if (err || o.reason)
            release_slot(op, key, ns);
        if (!err && o.reason) {
            kop_event(op->events, def, KOP_EVENT_WARNING, "WarmInstanceRefused", "Create",
                      "warm instance refused: %s", o.message);
            break;
        }
        *started += !err;
    }
    return err;
}

/* report writes status.pool when it changed, and the pool's gauges. */
static void report(ctf_operator *op, const kop_reconcile *req, const json_t *def, int target,
                   const pool_view *v)
{
    const char *ns = kop_meta_namespace(def), *name = kop_meta_name(def);
    const char *l_target[] = {ns, name, NULL};
    const char *l_ready[] = {ns, name, "ready", NULL};
    const char *l_starting[] = {ns, name, "starting", NULL};
    const char *l_claimed[] = {ns, name, "claimed", NULL};
    kop_metric_set(op->pool->target_metric, l_target, target);
    kop_metric_set(op->pool->instances_metric, l_ready, v->ready);
    kop_metric_set(op->pool->instances_metric, l_starting, v->unclaimed - v->ready);
    kop_metric_set(op->pool->instances_metric, l_claimed, v->claimed);

    json_t *want = json_pack("{s:i, s:i, s:i, s:i}", "target", target, "size", v->unclaimed,
                             "ready", v->ready, "claimed", v->claimed);
    if (!want || json_equal(want, ctf_get2(def, "status", "pool"))) {
        json_decref(want);
        return;
    }
    json_t *patch = json_pack("{s:{s:o}}", "status", "pool", want);
    kop_status st;
    kop_patch_req pr = {.target = {&CTF_DEFINITIONS, ns, name},
                        .type = KOP_PATCH_MERGE,
                        .patch = patch,
                        .opts = {.subresource = "status"}};
    kop_err err = patch ? kop_patch_object(req->client, &pr, NULL, &st) : KOP_ENOMEM;
    if (err && err != KOP_ENOTFOUND)
        kop_logger_log(req->log, KOP_LOG_WARN, "pool status not written", KOP_LOG_ERR(err),
                       KOP_LOG_STR("detail", st.message));
    json_decref(patch);
}

/* retarget tells (an Event) when an autoscaled pool's target changes. */
static void retarget(ctf_operator *op, const json_t *def, const char *key, int target, int requests)
{
    pthread_mutex_lock(&op->pool->lock);
    json_t *was = json_object_get(op->pool->targets, key);
    int before = was ? (int)json_integer_value(was) : -1;
    json_object_set_new(op->pool->targets, key, json_integer(target));
    pthread_mutex_unlock(&op->pool->lock);
    if (before >= 0 && before != target)
        kop_event(op->events, def, KOP_EVENT_NORMAL, "PoolScaled", "Scale",
                  "warm pool target %d -> %d: %d requests in the last %d s", before, target,
                  requests, CTF_POOL_WINDOW_S);
}

/*
 * backoff updates the pool's run of failures with what this pass saw and
 * returns how long it must still wait before starting warm instances (ms).
 * The run ends when the pool is full and every warm instance Ready, or the
 * definition changes (a fixed image is tried at once).
 */
static int64_t backoff(ctf_operator *op, const json_t *def, const char *key, int target,
                       const pool_view *v)
{
    ctf_pool *p = op->pool;
    int64_t now = kop_mono_ms(), gen = kop_meta_generation(def), wait = 0;
    int n = 0;
    pthread_mutex_lock(&p->lock);
    json_t *run = json_object_get(p->failing, key);
    if (run && json_integer_value(json_object_get(run, "gen")) != gen)
        run = NULL; /* a new generation: start the count again */
    if (v->failed > 0) {
        n = (run ? (int)json_integer_value(json_object_get(run, "n")) : 0) + 1;
        wait = ctf_pool_backoff_ms(n);
        json_object_set_new(p->failing, key,
                            json_pack("{s:i, s:I, s:I}", "n", n, "gen", (json_int_t)gen, "until",
                                      (json_int_t)(now + wait)));
    } else if (!run || (v->unclaimed >= target && v->ready == v->unclaimed)) {
        json_object_del(p->failing, key); /* healthy, or changed since */
    } else {
        wait = json_integer_value(json_object_get(run, "until")) - now;
    }
    pthread_mutex_unlock(&p->lock);
    if (v->failed > 0)
        kop_event(op->events, def, KOP_EVENT_WARNING, "PoolBackoff", "Wait",
                  "warm instances failed (%d time%s in a row): new ones start in %lld s", n,
                  n == 1 ? "" : "s", (long long)(wait / 1000));
    return wait > 0 ? wait : 0;
}

/* forget_pool drops what is kept of a deleted definition's pool: its metric series and
 * the records in memory. */
static void forget_pool(ctf_operator *op, const char *key, const char *ns, const char *name)
{
    ctf_pool *p = op->pool;
    static const char *const states[] = {"ready", "starting", "claimed"};
    static const char *const results[] = {"pool", "fresh"};
    const char *labels[] = {ns, name, NULL, NULL};
    kop_metric_remove(p->target_metric, labels);
    for (size_t i = 0; i < CTF_LEN(states); i++) {
        labels[2] = states[i];
        kop_metric_remove(p->instances_metric, labels);
    }
    for (size_t i = 0; i < CTF_LEN(results); i++) {
        labels[2] = results[i];
        kop_metric_remove(p->claims_metric, labels);
    }
    pthread_mutex_lock(&p->lock);
    json_object_del(p->requests, key);
    json_object_del(p->targets, key);
    json_object_del(p->failing, key);
    json_object_del(p->cursors, key);
    json_object_del(p->seen, key);
    pthread_mutex_unlock(&p->lock);
}

/*
 * pool_reconcile keeps one definition's pool at its target: look at every
 * warm instance (apply, count, replace the failed), delete the extra ones
 * (not Ready first), start the missing ones, report.
 */
static kop_result pool_reconcile(const kop_reconcile *req, void *user)
{
    ctf_operator *op = user;
    char key[POOL_KEY_SIZE];
    json_t *def = NULL;
    ctf_pool_spec spec = {0, 0, false};
    kop_status st;
    pool_view v = {0, 0, 0, 0, NULL};
    int target = 0, requests = 0, started = 0;
    int64_t wait_ms = 0;

    pool_key(req->namespace, req->name, key, sizeof key);
    if (kop_informer_dup(req->cache, req->namespace, req->name, &def) == KOP_OK &&
        kop_meta_is_deleting(def)) {
        json_decref(def);
        def = NULL;
    }
    /* pooled: def (still) asks for a pool; without, its warm instances go. */
    bool pooled = def && ctf_validate_definition(def, &st) == KOP_OK &&
                  ctf_pool_parse(def, &spec, &st) == KOP_OK && ctf_pool_enabled(&spec);
    if (pooled) {
        requests = recent_requests(op->pool, key);
        target = ctf_pool_target(&spec, requests);
        retarget(op, def, key, target, requests);
    }
    kop_err err = look_at(op, req, key, pooled ? def : NULL, &v);

    for (int i = 0; pooled && i < v.unclaimed - target; i++) {
        json_t *extra = NULL;
        if (kop_informer_dup_metadata(op->namespaces, NULL,
                                      json_string_value(json_array_get(v.spare, (size_t)i)),
                                      &extra) == KOP_OK)
            delete_warm(op, req, extra, "the pool is above its target");
        json_decref(extra);
    }
    if (pooled && v.unclaimed > target) {
        v.ready = v.ready < target ? v.ready : target;
        v.unclaimed = target;
    }
    if (pooled)
        wait_ms = backoff(op, def, key, target, &v);
    if (!err && pooled && v.unclaimed < target && wait_ms == 0)
        err = start_warm(op, req, def, key, target - v.unclaimed, &started);
    if (started > 0)
        kop_logger_log(req->log, KOP_LOG_INFO, "started warm instances",
                       KOP_LOG_INT("started", started), KOP_LOG_INT("unclaimed", v.unclaimed),
                       KOP_LOG_INT("ready", v.ready), KOP_LOG_INT("claimed", v.claimed),
                       KOP_LOG_INT("target", target));
    v.unclaimed += started;
    /* A definition that never had a pool gets no status written. */
    if (def && (pooled || ctf_get2(def, "status", "pool")))
        report(op, req, def, target, &v);
    if (!def)
        forget_pool(op, key, req->namespace, req->name);
    json_decref(v.spare);
    json_decref(def);
    if (err)
        return KOP_RETRY;
    if (wait_ms > 0 && v.unclaimed < target) {
        if (spec.autoscale && wait_ms > POOL_RESYNC_MS)
            wait_ms = POOL_RESYNC_MS; /* the window slides meanwhile */
        return KOP_REQUEUE_AFTER(wait_ms);
    }
    if (spec.autoscale)
        return KOP_REQUEUE_AFTER(POOL_RESYNC_MS);
    /* Starting instances wake this through their events; the timer catches a start timeout. */
    return v.ready < v.unclaimed ? KOP_REQUEUE_AFTER(POOL_RESYNC_MS) : KOP_DONE;
}

/* ---- setup ---------------------------------------------------------------------- */

/* by_pool maps a warm instance's object to its definition. */
static void by_pool(const json_t *obj, kop_emit_fn emit, void *ctx, void *user)
{
    ctf_operator *op = user;
    const char *ns = kop_meta_label(obj, CTF_LABEL_POOL_NS);
    const char *def = kop_meta_label(obj, CTF_LABEL_DEFINITION);
    const char *instance = kop_meta_namespace(obj); /* a Namespace: its own name */
    if (!ns || !def || !kop_meta_label(obj, CTF_LABEL_POOL))
        return;
    mark_dirty(op->pool, ctf_nonempty(instance) ? instance : kop_meta_name(obj));
    emit(ns, def, ctx);
}

/* index_pool: warm namespaces by their definition's name (the asker checks the namespace). */
static size_t index_pool(const json_t *n, const char **values, size_t max, void *user)
{
    (void)user;
    values[0] =
        max && kop_meta_label(n, CTF_LABEL_POOL) ? kop_meta_label(n, CTF_LABEL_DEFINITION) : NULL;
    return values[0] ? 1 : 0;
}

/* index_pool_free: the warm namespaces no one claimed (and not going), by their definition's
 * name: what a claim looks for, without parsing the claimed ones. */
static size_t index_pool_free(const json_t *n, const char **values, size_t max, void *user)
{
    (void)user;
    if (max == 0 || !kop_meta_label(n, CTF_LABEL_POOL) || is_claimed(n) || kop_meta_is_deleting(n))
        return 0;
    values[0] = kop_meta_label(n, CTF_LABEL_DEFINITION);
    return values[0] ? 1 : 0;
}

static kop_err pool_metrics(ctf_operator *op)
{
    kop_metrics *m = kop_manager_metrics(op->mgr);
    static const char *const def_labels[] = {"namespace", "definition", NULL};
    static const char *const state_labels[] = {"namespace", "definition", "state", NULL};
    static const char *const result_labels[] = {"namespace", "definition", "result", NULL};
    kop_err err =
        kop_metrics_gauge(m, "ctf_pool_target", "Unclaimed warm instances each pool is kept at",
                          def_labels, &op->pool->target_metric);
    if (!err)
        err = kop_metrics_gauge(m, "ctf_pool_instances",
                                "Warm instances by state (ready, starting, claimed)", state_labels,
                                &op->pool->instances_metric);
    if (!err)
        err = kop_metrics_counter(m, "ctf_pool_claims_total",
                                  "Requests of a pooled definition, by result (pool, fresh)",
                                  result_labels, &op->pool->claims_metric);
    return err;
}

void ctf_pool_free(ctf_pool *p)
{
    if (!p)
        return;
    json_decref(p->decided);
    json_decref(p->taken);
    json_decref(p->pending);
    json_decref(p->busy);
    json_decref(p->cursors);
    json_decref(p->seen);
    json_decref(p->dirty);
    json_decref(p->requests);
    json_decref(p->targets);
    json_decref(p->failing);
    pthread_mutex_destroy(&p->lock);
    free(p);
}

kop_err ctf_setup_pool(ctf_operator *op, kop_status *st)
{
    ctf_pool *p = calloc(1, sizeof *p);
    if (!p)
        return KOP_ENOMEM;
    pthread_mutex_init(&p->lock, NULL);
    p->decided = json_object();
    p->taken = json_object();
    p->pending = json_object();
    p->busy = json_object();
    p->cursors = json_object();
    p->seen = json_object();
    p->dirty = json_object();
    p->requests = json_object();
    p->targets = json_object();
    p->failing = json_object();
    op->pool = p;
    kop_err err =
        p->decided && p->taken && p->pending && p->busy && p->cursors && p->seen && p->dirty &&
                    p->requests && p->targets && p->failing
            ? KOP_OK
            : KOP_ENOMEM;
    kop_controller_opts co = {
        .name = "pool",
        .for_resource = CTF_DEFINITIONS,
        .namespace = op->watch_namespace,
        .reconcile = pool_reconcile,
        .user = op,
        .update_predicate = kop_predicate_generation_changed,
        .max_concurrent = 1,
    };
    if (!err)
        err = pool_metrics(op);
    if (!err)
        err = kop_informer_add_index(op->namespaces, CTF_INDEX_POOL, index_pool, NULL);
    if (!err)
        err = kop_informer_add_index(op->namespaces, POOL_INDEX_FREE, index_pool_free, NULL);
    if (!err)
        err = kop_controller_new(op->mgr, &co, &p->ctl);
    const kop_resource *children[] = {&CTF_NAMESPACES, &CTF_DEPLOYMENTS, &CTF_PODS,
                                      &CTF_ENDPOINTSLICES, &CTF_NETWORKPOLICIES};
    for (size_t i = 0; !err && i < CTF_LEN(children); i++)
        err =
            kop_controller_watch(p->ctl, &(kop_controller_watch_opts){.resource = children[i],
                                                                      .label_selector = CTF_MANAGED,
                                                                      .fn = by_pool,
                                                                      .user = op,
                                                                      .map_reads_metadata = true});
    if (err)
        kop_status_setf(st, 0, NULL, "pool controller: %s", kop_strerror(err));
    return err;
}
