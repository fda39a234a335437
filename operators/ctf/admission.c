/*
 * admission.c - the quotas: how many instances a team, and the whole CTF,
 * may run (--max-instances-per-team, --max-instances). One object answers
 * both askers: the reconciler, which admits a Challenge before it builds
 * anything (ctf_admission_admit), and the instance API, which refuses a
 * PUT that would be refused anyway (ctf_admission_check), with the same
 * counting rule and the same message.
 *
 * The rule: an instance counts from the moment it is admitted until its
 * Challenge is being deleted. A stopping instance no longer counts (its
 * team sees it Stopping, and may start another at once), so a team can
 * briefly hold its quota plus what is still being torn down.
 *
 * State: the set of admitted Challenges (by UID, with their team), a count
 * per team and a total, kept under one lock. Two sources fill it, united by
 * UID: the reconciler's own decisions, and the Challenge cache's events
 * (ctf_admission_handler): a Challenge the cache shows as admitted (it has
 * an instance namespace, it is not refused for quota) enters the set when
 * its event arrives, so a restarted operator counts what it admitted
 * before, and a Challenge being deleted, or deleted, leaves it. Every
 * question is O(1): nothing lists the cache.
 *
 * Warm pools (pool.c) count too: each pool reports its unclaimed warm
 * instances (ctf_admission_set_warm), and a fresh instance is admitted only
 * while the Challenges plus the warm instances stay within
 * --max-instances. A Challenge that will claim a warm instance takes that
 * instance's slot, so it only needs the Challenges to stay within it.
 *
 * Invariant (KOP_ASSERT): the total equals the set's size, and the sum of
 * the per-team counts equals the total.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctf_internal.h"

struct ctf_admission {
    int max_per_team, max_instances;
    pthread_mutex_t lock;
    json_t *admitted; /* uid -> "<namespace>/<team>" */
    json_t *per_team; /* "<namespace>/<team>" -> count */
    json_t *warm;     /* "<namespace>/<definition>" -> unclaimed warm instances */
    int total, warm_total;
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
    a->per_team = json_object();
    a->warm = json_object();
    pthread_mutex_init(&a->lock, NULL);
    if (!a->admitted || !a->per_team || !a->warm) {
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
    json_decref(a->per_team);
    json_decref(a->warm);
    pthread_mutex_destroy(&a->lock);
    free(a);
}

/* team_key writes "<namespace>/<team>" of chal; false when it has neither. */
static bool team_key(const char *ns, const char *team, char *out, size_t size)
{
    if (!ns || !team)
        return false;
    int n = snprintf(out, size, "%s/%s", ns, team);
    return n > 0 && (size_t)n < size;
}

static int team_count(const ctf_admission *a, const char *key)
{
    return (int)json_integer_value(json_object_get(a->per_team, key));
}

/*
 * check_invariant: the counts agree with the set (debug builds). The sum
 * walks every team, so it runs when the total is a power of two: every
 * change of a small table (the unit tests), and amortized constant time per
 * change of a large one, where a check per change made admission quadratic
 * (1.3 % of the operator's CPU at 1,000 Challenges in a profile).
 */
static void check_invariant(const ctf_admission *a)
{
#ifdef KOP_DEBUG
    if (a->total & (a->total - 1))
        return;
    const char *k;
    json_t *v;
    json_int_t sum = 0;
    json_object_foreach(a->per_team, k, v)
    {
        sum += json_integer_value(v);
    }
    KOP_ASSERT(a->total == (int)json_object_size(a->admitted) && sum == a->total);
#else
    (void)a;
#endif
}

/* add puts uid in the set with its team (lock held); false when out of memory. */
static bool add(ctf_admission *a, const char *uid, const char *key)
{
    if (json_object_get(a->admitted, uid))
        return true;
    if (json_object_set_new(a->admitted, uid, json_string(key)) != 0)
        return false;
    if (json_object_set_new(a->per_team, key, json_integer(team_count(a, key) + 1)) != 0) {
        json_object_del(a->admitted, uid);
        return false;
    }
    a->total++;
    check_invariant(a);
    return true;
}

/* drop takes uid out of the set (lock held); true when it was there. */
static bool drop(ctf_admission *a, const char *uid)
{
    const char *key = json_string_value(json_object_get(a->admitted, uid));
    if (!key)
        return false;
    int n = team_count(a, key) - 1;
    if (n > 0)
        json_object_set_new(a->per_team, key, json_integer(n));
    else
        json_object_del(a->per_team, key);
    json_object_del(a->admitted, uid); /* frees key: last */
    a->total--;
    check_invariant(a);
    return true;
}

/* verdict decides whether one more instance fits for key (lock held). */
static ctf_verdict verdict(const ctf_admission *a, const char *key, const char *team,
                           bool from_pool, char *msg, size_t size)
{
    if (team_count(a, key) >= a->max_per_team) {
        snprintf(msg, size,
                 "team %s already runs %d instances, the most a team may "
                 "(--max-instances-per-team); stop one first",
                 team, a->max_per_team);
        return CTF_ADMIT_TEAM_FULL;
    }
    if (a->total + (from_pool ? 0 : a->warm_total) >= a->max_instances) {
        snprintf(msg, size,
                 "the CTF runs its maximum of %d instances (--max-instances); try again later",
                 a->max_instances);
        return CTF_ADMIT_CTF_FULL;
    }
    return CTF_ADMIT_OK;
}

ctf_verdict ctf_admission_admit(ctf_admission *a, const json_t *chal, bool from_pool, char *msg,
                                size_t size)
{
    char key[CTF_TEAM_KEY_SIZE];
    const char *uid = kop_meta_uid(chal), *team = ctf_str2(chal, "spec", "team");
    msg[0] = '\0';
    if (!uid || !team_key(kop_meta_namespace(chal), team, key, sizeof key)) {
        snprintf(msg, size, "the Challenge has no uid, namespace or team");
        return CTF_ADMIT_TEAM_FULL;
    }
    pthread_mutex_lock(&a->lock);
    ctf_verdict v = CTF_ADMIT_OK;
    if (!json_object_get(a->admitted, uid)) {
        v = verdict(a, key, team, from_pool, msg, size);
        if (v == CTF_ADMIT_OK && !add(a, uid, key)) {
            snprintf(msg, size, "out of memory admitting the instance");
            v = CTF_ADMIT_CTF_FULL;
        }
    }
    pthread_mutex_unlock(&a->lock);
    return v;
}

ctf_verdict ctf_admission_check(ctf_admission *a, const char *ns, const char *team, char *msg,
                                size_t size)
{
    char key[CTF_TEAM_KEY_SIZE];
    msg[0] = '\0';
    if (!team_key(ns, team, key, sizeof key)) {
        snprintf(msg, size, "no namespace or team");
        return CTF_ADMIT_TEAM_FULL;
    }
    pthread_mutex_lock(&a->lock);
    ctf_verdict v = verdict(a, key, team, true, msg, size);
    pthread_mutex_unlock(&a->lock);
    return v;
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
    n = team ? (team_key(ns, team, key, sizeof key) ? team_count(a, key) : 0) : a->total;
    pthread_mutex_unlock(&a->lock);
    return n;
}

void ctf_admission_set_warm(ctf_admission *a, const char *pool_key, int n)
{
    pthread_mutex_lock(&a->lock);
    a->warm_total -= (int)json_integer_value(json_object_get(a->warm, pool_key));
    if (n > 0 && json_object_set_new(a->warm, pool_key, json_integer(n)) == 0)
        a->warm_total += n;
    else
        json_object_del(a->warm, pool_key);
    pthread_mutex_unlock(&a->lock);
}

int ctf_admission_room(ctf_admission *a)
{
    pthread_mutex_lock(&a->lock);
    int room = a->max_instances - a->total - a->warm_total;
    pthread_mutex_unlock(&a->lock);
    return room > 0 ? room : 0;
}

/* ---- the cache's view -------------------------------------------------------- */

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
        (void)add(a, uid, key); /* out of memory: the reconciler adds it */
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
