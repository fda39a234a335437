/*
 * admission.c - the quotas: how many instances a team, and the whole CTF,
 * may run (--max-instances-per-team, --max-instances). One ledger answers
 * every asker: the reconciler, which admits a Challenge before it builds
 * or claims anything (ctf_admission_admit), the pool controller, which
 * reserves each warm instance before it creates it
 * (ctf_admission_reserve_warm), and the instance API, which refuses a PUT
 * that would be refused anyway (ctf_admission_check), with the same
 * counting rule and the same message. The validating webhook asks it too
 * (ctf_admission_review): a Challenge that would only become an Error is
 * refused at create, with the reason and message of that Error.
 *
 * The invariant: the instance namespaces the ledger counts, warm ones
 * (unclaimed) plus the teams' (claimed or fresh), never exceed
 * --max-instances through anything the ledger grants. Each rule keeps it:
 *
 *   - a fresh instance is admitted against the total, warm ones included;
 *   - a claim turns a warm instance into a team's without changing the
 *     total: a Challenge of a pooled definition is admitted "on a warm
 *     slot" of its pool (not counted while it waits, since the warm
 *     instance it will take is) as long as the pool has a warm slot no
 *     other waiting claimer holds; its claim won moves the slot from the
 *     warm instance to it (ctf_admission_claimed); its claim lost (none
 *     Ready, an empty pool) re-admits it as fresh, against the total
 *     (ctf_admission_unclaimed), or refuses it;
 *   - the pool starts a warm instance only from room it reserved here,
 *     one instance at a time, under the same lock as every admission, so
 *     a pool pass and a burst of admissions cannot both take the last
 *     slot.
 *
 * What exists but was never granted is counted too, without a cap, so the
 * ledger never forgets a namespace: a warm namespace the cache shows
 * (after a restart, or one the pool created and then lost the answer of)
 * and a claimed instance found by its labels (ctf_admission_claimed). Only
 * such facts, never a grant, can take the total over the cap (a cap
 * lowered under a running CTF).
 *
 * A team's instance counts from the moment it is admitted until its
 * Challenge is being deleted; a warm one from its reservation until its
 * namespace is being deleted or is claimed. A stopping instance no longer
 * counts (its team sees it Stopping, and may start another at once), so a
 * team can briefly hold its quota plus what is still being torn down.
 *
 * State, under one lock: the admitted Challenges (by UID, with their team,
 * and the pool of those waiting on a warm slot), a count per team, the
 * warm namespaces (by name, with their pool), counts per pool of warm
 * namespaces and of waiting claimers, and the totals. The caches fill it
 * too, united by key: a Challenge the cache shows as admitted (it has an
 * instance namespace, it is not refused for quota) enters it, a Challenge
 * being deleted, or deleted, leaves it (ctf_admission_handler); a warm
 * namespace enters it, and leaves it when it is claimed, being deleted or
 * deleted (ctf_admission_namespace_handler). Every question is O(1): hash
 * lookups and counters, nothing lists a cache.
 *
 * Invariant checked (KOP_ASSERT, debug builds): the counters agree with
 * the sets they count.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/admission.h"
#include "core/definition.h"
#include "core/json.h"
#include "core/names.h"

struct ctf_admission {
    int max_per_team, max_instances;
    pthread_mutex_t lock;
    json_t *admitted;     /* uid -> "<namespace>/<team>" */
    json_t *waiting;      /* uid -> pool key: admitted on a warm slot, not counted yet */
    json_t *per_team;     /* "<namespace>/<team>" -> count (waiting ones included) */
    json_t *warm;         /* warm namespace -> pool key ("<namespace>/<definition>") */
    json_t *warm_by_pool; /* pool key -> warm namespaces counted */
    json_t *wait_by_pool; /* pool key -> Challenges waiting on one of its warm slots */
    int total;            /* admitted Challenges, waiting ones included */
    int waiting_total;    /* of those, waiting on a warm slot */
    int warm_total;       /* warm namespaces counted */
};

kop_err ctf_admission_new(int max_per_team, int max_instances, ctf_admission **out)
{
    ctf_admission *a = calloc(1, sizeof *a);
    *out = NULL;
    if (!a)
        return KOP_ENOMEM;
    a->max_per_team = max_per_team;
    a->max_instances = max_instances;
    a->admitted = json_object();
    a->waiting = json_object();
    a->per_team = json_object();
    a->warm = json_object();
    a->warm_by_pool = json_object();
    a->wait_by_pool = json_object();
    pthread_mutex_init(&a->lock, NULL);
    if (!a->admitted || !a->waiting || !a->per_team || !a->warm || !a->warm_by_pool ||
        !a->wait_by_pool) {
        ctf_admission_free(a);
        return KOP_ENOMEM;
    }
    *out = a;
    return KOP_OK;
}

void ctf_admission_free(ctf_admission *a)
{
    if (!a)
        return;
    json_decref(a->admitted);
    json_decref(a->waiting);
    json_decref(a->per_team);
    json_decref(a->warm);
    json_decref(a->warm_by_pool);
    json_decref(a->wait_by_pool);
    pthread_mutex_destroy(&a->lock);
    free(a);
}

/* team_key writes "<namespace>/<team>"; false when it has neither. */
static bool team_key(const char *ns, const char *team, char *out, size_t size)
{
    if (!ns || !team)
        return false;
    int n = snprintf(out, size, "%s/%s", ns, team);
    return n > 0 && (size_t)n < size;
}

/* get_count reads counts[key] (absent: 0). */
static int get_count(const json_t *counts, const char *key)
{
    return (int)json_integer_value(json_object_get(counts, key));
}

/* bump adds d to counts[key], deleting it at 0; false when out of memory. */
static bool bump(json_t *counts, const char *key, int d)
{
    int n = get_count(counts, key) + d;
    if (n > 0)
        return json_object_set_new(counts, key, json_integer(n)) == 0;
    json_object_del(counts, key);
    return true;
}

/* counted: the instance namespaces the ledger counts (lock held). */
static int counted(const ctf_admission *a)
{
    return a->total - a->waiting_total + a->warm_total;
}

/* free_warm: the warm slots of pool no waiting claimer holds (lock held). */
static int free_warm(const ctf_admission *a, const char *pool)
{
    return get_count(a->warm_by_pool, pool) - get_count(a->wait_by_pool, pool);
}

/* sum_values adds up an object of counts. */
static json_int_t sum_values(const json_t *counts)
{
    const char *k;
    json_t *v;
    json_int_t sum = 0;
    json_object_foreach((json_t *)counts, k, v)
    {
        sum += json_integer_value(v);
    }
    return sum;
}

/*
 * check_invariant: the counters agree with the sets (debug builds). The
 * sums walk every team and pool, so they run when the total is a power of
 * two: every change of a small ledger (the unit tests), and amortized
 * constant time per change of a large one, where a check per change made
 * admission quadratic (1.3 % of the operator's CPU at 1,000 Challenges in
 * a profile).
 */
static void check_invariant(const ctf_admission *a)
{
#ifdef KOP_DEBUG
    int n = a->total + a->warm_total;
    if (n & (n - 1))
        return;
    KOP_ASSERT(a->total == (int)json_object_size(a->admitted) &&
               sum_values(a->per_team) == a->total);
    KOP_ASSERT(a->waiting_total == (int)json_object_size(a->waiting) &&
               sum_values(a->wait_by_pool) == a->waiting_total);
    KOP_ASSERT(a->warm_total == (int)json_object_size(a->warm) &&
               sum_values(a->warm_by_pool) == a->warm_total);
#else
    (void)a;
    (void)sum_values;
#endif
}

/* add puts uid in the set with its team, waiting on pool's warm slot when pool is
 * set (lock held); false when out of memory. */
static bool add(ctf_admission *a, const char *uid, const char *key, const char *pool)
{
    if (json_object_get(a->admitted, uid))
        return true;
    if (json_object_set_new(a->admitted, uid, json_string(key)) != 0)
        goto fail;
    if (!bump(a->per_team, key, 1))
        goto fail_admitted;
    if (pool) {
        if (json_object_set_new(a->waiting, uid, json_string(pool)) != 0)
            goto fail_team;
        if (!bump(a->wait_by_pool, pool, 1)) {
            json_object_del(a->waiting, uid);
            goto fail_team;
        }
        a->waiting_total++;
    }
    a->total++;
    check_invariant(a);
    return true;
fail_team:
    (void)bump(a->per_team, key, -1);
fail_admitted:
    json_object_del(a->admitted, uid);
fail:
    return false;
}

/* stop_waiting makes uid, waiting on a warm slot, an ordinary admitted one (lock held). */
static void stop_waiting(ctf_admission *a, const char *uid)
{
    const char *pool = json_string_value(json_object_get(a->waiting, uid));
    if (!pool)
        return;
    (void)bump(a->wait_by_pool, pool, -1); /* a decrement allocates nothing */
    json_object_del(a->waiting, uid);      /* frees pool: last */
    a->waiting_total--;
    check_invariant(a);
}

/* drop takes uid out of the set (lock held); true when it was there. */
static bool drop(ctf_admission *a, const char *uid)
{
    const char *key = json_string_value(json_object_get(a->admitted, uid));
    if (!key)
        return false;
    stop_waiting(a, uid);
    (void)bump(a->per_team, key, -1);
    json_object_del(a->admitted, uid); /* frees key: last */
    a->total--;
    check_invariant(a);
    return true;
}

/* add_warm counts warm namespace ns of pool (lock held); false when out of memory. */
static bool add_warm(ctf_admission *a, const char *ns, const char *pool)
{
    if (json_object_get(a->warm, ns))
        return true;
    if (json_object_set_new(a->warm, ns, json_string(pool)) != 0)
        return false;
    if (!bump(a->warm_by_pool, pool, 1)) {
        json_object_del(a->warm, ns);
        return false;
    }
    a->warm_total++;
    check_invariant(a);
    return true;
}

/* drop_warm stops counting warm namespace ns (lock held). */
static void drop_warm(ctf_admission *a, const char *ns)
{
    const char *pool = json_string_value(json_object_get(a->warm, ns));
    if (!pool)
        return;
    (void)bump(a->warm_by_pool, pool, -1);
    json_object_del(a->warm, ns); /* frees pool: last */
    a->warm_total--;
    check_invariant(a);
}

static void say_team_full(const ctf_admission *a, const char *team, char *msg, size_t size)
{
    snprintf(msg, size,
             "team %s already runs %d instances, the most a team may "
             "(--max-instances-per-team); stop one first",
             team, a->max_per_team);
}

static void say_ctf_full(const ctf_admission *a, char *msg, size_t size)
{
    snprintf(msg, size,
             "the CTF runs its maximum of %d instances, warm ones included (--max-instances); "
             "try again later",
             a->max_instances);
}

/*
 * grant decides, and records, one more instance for uid of team key (lock
 * held): on a free warm slot of pool when it has one (pool NULL: none), or
 * fresh when the total has room.
 */
static ctf_verdict grant(ctf_admission *a, const char *uid, const char *key, const char *team,
                         const char *pool, char *msg, size_t size)
{
    if (get_count(a->per_team, key) >= a->max_per_team) {
        say_team_full(a, team, msg, size);
        return CTF_ADMIT_TEAM_FULL;
    }
    const char *slot = pool && free_warm(a, pool) > 0 ? pool : NULL;
    if (!slot && counted(a) >= a->max_instances) {
        say_ctf_full(a, msg, size);
        return CTF_ADMIT_CTF_FULL;
    }
    if (!add(a, uid, key, slot)) {
        snprintf(msg, size, "out of memory admitting the instance");
        return CTF_ADMIT_CTF_FULL;
    }
    return CTF_ADMIT_OK;
}

/* chal_keys reads chal's uid and team key; false (msg set, unless NULL) when it lacks them. */
static bool chal_keys(const json_t *chal, const char **uid, const char **team, char *key,
                      char *msg, size_t size)
{
    *uid = kop_meta_uid(chal);
    *team = ctf_str2(chal, "spec", "team");
    if (*uid && team_key(kop_meta_namespace(chal), *team, key, CTF_TEAM_KEY_SIZE))
        return true;
    if (msg)
        snprintf(msg, size, "the Challenge has no uid, namespace or team");
    return false;
}

ctf_verdict ctf_admission_admit(ctf_admission *a, const json_t *chal, const char *pool, char *msg,
                                size_t size)
{
    char key[CTF_TEAM_KEY_SIZE];
    const char *uid, *team;
    msg[0] = '\0';
    if (!chal_keys(chal, &uid, &team, key, msg, size))
        return CTF_ADMIT_TEAM_FULL;
    pthread_mutex_lock(&a->lock);
    ctf_verdict v = CTF_ADMIT_OK;
    if (!json_object_get(a->admitted, uid))
        v = grant(a, uid, key, team, pool, msg, size);
    pthread_mutex_unlock(&a->lock);
    return v;
}

ctf_verdict ctf_admission_unclaimed(ctf_admission *a, const json_t *chal, char *msg, size_t size)
{
    char key[CTF_TEAM_KEY_SIZE];
    const char *uid, *team;
    msg[0] = '\0';
    if (!chal_keys(chal, &uid, &team, key, msg, size))
        return CTF_ADMIT_TEAM_FULL;
    pthread_mutex_lock(&a->lock);
    ctf_verdict v = CTF_ADMIT_OK;
    if (json_object_get(a->waiting, uid)) {
        /* Its warm slot was not taken: it needs a slot of the total, as any fresh one. */
        stop_waiting(a, uid);
        if (counted(a) > a->max_instances) {
            (void)drop(a, uid);
            say_ctf_full(a, msg, size);
            v = CTF_ADMIT_CTF_FULL;
        }
    } else if (!json_object_get(a->admitted, uid)) {
        v = grant(a, uid, key, team, NULL, msg, size);
    }
    pthread_mutex_unlock(&a->lock);
    return v;
}

void ctf_admission_claimed(ctf_admission *a, const json_t *chal, const char *ns)
{
    char key[CTF_TEAM_KEY_SIZE];
    const char *uid, *team;
    if (!chal_keys(chal, &uid, &team, key, NULL, 0))
        return; /* nothing to count: no one reads why */
    pthread_mutex_lock(&a->lock);
    /* The namespace exists and is the team's: counted whatever the caps say. */
    if (add(a, uid, key, NULL)) {
        stop_waiting(a, uid);
        drop_warm(a, ns);
    }
    pthread_mutex_unlock(&a->lock);
}

ctf_verdict ctf_admission_check(ctf_admission *a, const char *ns, const char *team, char *msg,
                                size_t size)
{
    char key[CTF_TEAM_KEY_SIZE];
    ctf_verdict v = CTF_ADMIT_OK;
    msg[0] = '\0';
    if (!team_key(ns, team, key, sizeof key)) {
        snprintf(msg, size, "no namespace or team");
        return CTF_ADMIT_TEAM_FULL;
    }
    pthread_mutex_lock(&a->lock);
    if (get_count(a->per_team, key) >= a->max_per_team) {
        say_team_full(a, team, msg, size);
        v = CTF_ADMIT_TEAM_FULL;
    } else if (counted(a) >= a->max_instances && a->warm_total <= a->waiting_total) {
        /* No room, and no warm slot free (which pool, the definition would tell). */
        say_ctf_full(a, msg, size);
        v = CTF_ADMIT_CTF_FULL;
    }
    pthread_mutex_unlock(&a->lock);
    return v;
}

void ctf_say_no_definition(const char *def, const char *ns, char *msg, size_t size)
{
    snprintf(msg, size, "ChallengeDefinition %s not found in namespace %s", def ? def : "(none)",
             ns ? ns : "(none)");
}

bool ctf_admission_review(ctf_admission *a, const char *ns, const json_t *chal,
                          const json_t *def, ctf_refusal *r)
{
    kop_status st;
    if (!ns)
        ns = kop_meta_namespace(chal);
    r->reason = NULL;
    r->message[0] = '\0';
    if (!def) {
        r->reason = CTF_REASON_DEFINITION_NOT_FOUND;
        ctf_say_no_definition(ctf_str2(chal, "spec", "definition"), ns, r->message,
                              sizeof r->message);
    } else if (ctf_validate_definition(def, &st) != KOP_OK) {
        r->reason = CTF_REASON_INVALID_DEFINITION;
        /* Cut where the status's message (as long as r->message) is cut. */
        snprintf(r->message, sizeof r->message, "%.*s", (int)sizeof r->message - 1, st.message);
    } else if (ctf_admission_check(a, ns, ctf_str2(chal, "spec", "team"), r->message,
                                   sizeof r->message) != CTF_ADMIT_OK) {
        r->reason = CTF_REASON_QUOTA;
    }
    return r->reason == NULL;
}

bool ctf_admission_release(ctf_admission *a, const char *uid)
{
    if (!uid)
        return false;
    pthread_mutex_lock(&a->lock);
    bool was = drop(a, uid);
    pthread_mutex_unlock(&a->lock);
    return was;
}

int ctf_admission_count(ctf_admission *a, const char *ns, const char *team)
{
    char key[CTF_TEAM_KEY_SIZE];
    int n;
    pthread_mutex_lock(&a->lock);
    n = team ? (team_key(ns, team, key, sizeof key) ? get_count(a->per_team, key) : 0) : a->total;
    pthread_mutex_unlock(&a->lock);
    return n;
}

/* ---- warm instances ------------------------------------------------------------- */

bool ctf_admission_reserve_warm(ctf_admission *a, const char *pool, const char *ns)
{
    pthread_mutex_lock(&a->lock);
    bool ok = json_object_get(a->warm, ns) ||
              (counted(a) < a->max_instances && add_warm(a, ns, pool));
    pthread_mutex_unlock(&a->lock);
    return ok;
}

void ctf_admission_add_warm(ctf_admission *a, const char *pool, const char *ns)
{
    pthread_mutex_lock(&a->lock);
    (void)add_warm(a, ns, pool); /* out of memory: the next event of ns adds it */
    pthread_mutex_unlock(&a->lock);
}

void ctf_admission_drop_warm(ctf_admission *a, const char *ns)
{
    pthread_mutex_lock(&a->lock);
    drop_warm(a, ns);
    pthread_mutex_unlock(&a->lock);
}

int ctf_admission_warm(ctf_admission *a, const char *pool)
{
    pthread_mutex_lock(&a->lock);
    int n = pool ? get_count(a->warm_by_pool, pool) : a->warm_total;
    pthread_mutex_unlock(&a->lock);
    return n;
}

int ctf_admission_room(ctf_admission *a)
{
    pthread_mutex_lock(&a->lock);
    int room = a->max_instances - counted(a);
    pthread_mutex_unlock(&a->lock);
    return room > 0 ? room : 0;
}

/* ---- the caches' view -------------------------------------------------------- */

/* shown_admitted: the cache shows chal as admitted: it has an instance
 * namespace and was not refused for quota. */
static bool shown_admitted(const json_t *chal)
{
    const char *phase = ctf_str2(chal, "status", "currentStatus");
    const char *reason = ctf_str2(chal, "status", "reason");
    if (kop_streq(phase, "Error") && kop_streq(reason, CTF_REASON_QUOTA))
        return false;
    return ctf_str2(chal, "status", "namespace") != NULL;
}

/* seen updates the set from a Challenge as the cache has it now. */
static void seen(ctf_admission *a, const json_t *chal)
{
    char key[CTF_TEAM_KEY_SIZE];
    const char *uid = kop_meta_uid(chal);
    if (!uid)
        return;
    pthread_mutex_lock(&a->lock);
    if (kop_meta_is_deleting(chal))
        (void)drop(a, uid);
    else if (shown_admitted(chal) &&
             team_key(kop_meta_namespace(chal), ctf_str2(chal, "spec", "team"), key, sizeof key))
        (void)add(a, uid, key, NULL); /* out of memory: the reconciler adds it */
    pthread_mutex_unlock(&a->lock);
}

static void on_add(const json_t *obj, void *user)
{
    seen(user, obj);
}

static void on_update(const json_t *old_obj, const json_t *new_obj, void *user)
{
    (void)old_obj;
    seen(user, new_obj);
}

static void on_delete(const json_t *obj, void *user)
{
    (void)ctf_admission_release(user, kop_meta_uid(obj));
}

kop_informer_handler ctf_admission_handler(ctf_admission *a)
{
    return (kop_informer_handler){on_add, on_update, on_delete, a, KOP_OLD_UNUSED};
}

/*
 * seen_namespace updates the warm namespaces from an instance namespace as
 * the cache has it now: an unclaimed warm one counts; one being deleted no
 * longer does; a claimed one turns into its Challenge's slot when that
 * Challenge is admitted here (its claim's answer may come after this
 * event), and otherwise stays counted as warm until it goes: never less
 * than what exists.
 */
static void seen_namespace(ctf_admission *a, const json_t *n)
{
    char pool[CTF_TEAM_KEY_SIZE];
    const char *ns = kop_meta_name(n);
    const char *def = kop_meta_label(n, CTF_LABEL_DEFINITION);
    const char *def_ns = kop_meta_label(n, CTF_LABEL_POOL_NS);
    if (!ns || !kop_meta_label(n, CTF_LABEL_POOL) || !team_key(def_ns, def, pool, sizeof pool))
        return; /* not a warm instance, nor a claimed one */
    const char *uid = kop_meta_annotation(n, CTF_ANNOTATION_CHALLENGE_UID);
    pthread_mutex_lock(&a->lock);
    if (kop_meta_is_deleting(n)) {
        drop_warm(a, ns);
    } else if (kop_meta_label(n, CTF_LABEL_CHALLENGE)) {
        if (uid && json_object_get(a->admitted, uid)) {
            stop_waiting(a, uid);
            drop_warm(a, ns);
        }
    } else {
        (void)add_warm(a, ns, pool); /* out of memory: the next event adds it */
    }
    pthread_mutex_unlock(&a->lock);
}

static void on_ns_add(const json_t *obj, void *user)
{
    seen_namespace(user, obj);
}

static void on_ns_update(const json_t *old_obj, const json_t *new_obj, void *user)
{
    (void)old_obj;
    seen_namespace(user, new_obj);
}

static void on_ns_delete(const json_t *obj, void *user)
{
    const char *ns = kop_meta_name(obj);
    if (ns)
        ctf_admission_drop_warm(user, ns);
}

kop_informer_handler ctf_admission_namespace_handler(ctf_admission *a)
{
    return (kop_informer_handler){on_ns_add, on_ns_update, on_ns_delete, a, KOP_OLD_UNUSED};
}
