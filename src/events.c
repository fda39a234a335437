/*
 * events.c - the event recorder (see kop/events.h).
 *
 * Workload: reconcilers on several threads report what they did, often the
 * same thing again (a failing object is retried with backoff and reports
 * the same Warning every time), sometimes in bursts (a thousand challenge
 * instances starting). The apiserver must not be flooded, and a reconcile
 * must never wait for it. So:
 *
 * - kop_event formats the message, copies the object's identity into one
 *   allocation and appends it to a capped FIFO under rec->lock; that is all
 *   the calling thread pays.
 * - One sender thread pops events and runs client-go's correlation on
 *   them (aggregate, dedup, spam filter), each backed by an LRU of SHA-256
 *   key digests, then creates or patches the Event.
 * - The sender talks through a kop_client of its own with a short timeout
 *   and no retries: an unreachable apiserver costs KOP_RECORDER_TIMEOUT_MS
 *   per event at most, and shutdown at most the drain time plus that.
 *
 * Invariants: the queue, the stats and the stop flag are guarded by
 * rec->lock; the LRUs and last_name_ns belong to the sender thread alone.
 * accepted - done is the number of events queued or being processed, which
 * is what kop_recorder_flush waits on.
 */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "client_request_internal.h"
#include "kop/events.h"
#include "kop/log.h"
#include "kop/meta.h"
#include "kop/clock.h"
#include "kop_internal.h"

#define WINDOW_SECONDS      600 /* dedup and aggregation window: 10 minutes */
#define AGGREGATE_AFTER     10  /* distinct messages before combining */
#define SPAM_BURST          25.0
#define SPAM_REFILL_SECONDS 300.0 /* one token every 5 minutes */
#define DIGEST_LEN          32
#define MSG_DIGEST_LEN      8
#define COMBINED_PREFIX     "(combined from similar events): "

static const kop_resource EVENTS = {"", "v1", "events", "Event", true};

/* ---- the clock ---------------------------------------------------------- */

typedef time_t (*events_clock_fn)(void);
static _Atomic(events_clock_fn) events_clock; /* NULL: time(NULL) */

/*
 * kop__events_set_clock replaces the clock events are stamped and
 * correlated with (NULL: the real one). For libkop's own tests only.
 */
void kop__events_set_clock(events_clock_fn now);
void kop__events_set_clock(events_clock_fn now)
{
    atomic_store(&events_clock, now);
}

static time_t now_seconds(void)
{
    events_clock_fn fn = atomic_load(&events_clock);
    return fn ? fn() : time(NULL);
}

static struct timespec mono_after(long ms)
{
    return kop__time_after(CLOCK_MONOTONIC, ms);
}

/* ---- digests ------------------------------------------------------------ */

/*
 * digest hashes the strings parts[0..n), each followed by a NUL byte (NULL
 * counts as ""), so that no two different lists share an encoding. The
 * first part is a one-letter domain that keeps the caches' keys apart.
 */
static bool digest(uint8_t out[DIGEST_LEN], const char *const *parts, size_t n)
{
    unsigned int len = 0;
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    int ok = ctx && EVP_DigestInit_ex(ctx, EVP_sha256(), NULL);
    for (size_t i = 0; ok && i < n; i++) {
        const char *s = parts[i] ? parts[i] : "";
        ok = EVP_DigestUpdate(ctx, s, strlen(s) + 1);
    }
    ok = ok && EVP_DigestFinal_ex(ctx, out, &len) && len == DIGEST_LEN;
    EVP_MD_CTX_free(ctx);
    return ok;
}

/* ---- a fixed-size LRU of digest keys ------------------------------------ */

struct dedup_rec {
    char *name, *ns; /* the Event; owned */
    long long count;
    time_t first, last;
};

struct agg_rec {
    time_t last;
    int n; /* distinct messages seen, oldest first, fewer than AGGREGATE_AFTER */
    uint8_t msgs[AGGREGATE_AFTER][MSG_DIGEST_LEN];
};

struct spam_rec {
    double tokens;
    time_t refilled;
};

struct lru_entry {
    uint8_t key[DIGEST_LEN];
    int prev, next; /* recency list, most recent at head; -1 ends */
    int hnext;      /* hash chain; -1 ends */
    union {
        struct dedup_rec d;
        struct agg_rec a;
        struct spam_rec s;
    } v;
};

/*
 * lru: cap entries allocated up front, found through a chained hash table
 * of indices. When full, adding reuses the least recently used entry,
 * after evict (if set) has released what its payload owns.
 */
struct lru {
    struct lru_entry *e;
    int *bucket;
    int nbuckets, cap, n, head, tail;
    void (*evict)(struct lru_entry *);
};

static kop_err lru_init(struct lru *l, int cap, void (*evict)(struct lru_entry *))
{
    int nb = 1;
    while (nb < cap * 2)
        nb <<= 1;
    *l = (struct lru){.nbuckets = nb, .cap = cap, .head = -1, .tail = -1, .evict = evict};
    l->e = calloc((size_t)cap, sizeof *l->e);
    l->bucket = malloc((size_t)nb * sizeof *l->bucket);
    if (!l->e || !l->bucket)
        return KOP_ENOMEM;
    for (int i = 0; i < nb; i++)
        l->bucket[i] = -1;
    return KOP_OK;
}

static void lru_fini(struct lru *l)
{
    for (int i = 0; l->evict && i < l->n; i++)
        l->evict(&l->e[i]);
    free(l->e);
    free(l->bucket);
    l->e = NULL;
    l->bucket = NULL;
}

static int *lru_chain(struct lru *l, const uint8_t key[DIGEST_LEN])
{
    uint32_t h = (uint32_t)key[0] | (uint32_t)key[1] << 8 | (uint32_t)key[2] << 16 |
                 (uint32_t)key[3] << 24;
    return &l->bucket[h & (uint32_t)(l->nbuckets - 1)];
}

static void lru_unlink(struct lru *l, int i)
{
    struct lru_entry *e = &l->e[i];
    if (e->prev >= 0)
        l->e[e->prev].next = e->next;
    else
        l->head = e->next;
    if (e->next >= 0)
        l->e[e->next].prev = e->prev;
    else
        l->tail = e->prev;
}

static void lru_push_front(struct lru *l, int i)
{
    struct lru_entry *e = &l->e[i];
    e->prev = -1;
    e->next = l->head;
    if (l->head >= 0)
        l->e[l->head].prev = i;
    l->head = i;
    if (l->tail < 0)
        l->tail = i;
}

/* lru_get finds key and marks it most recently used; NULL if absent. */
static struct lru_entry *lru_get(struct lru *l, const uint8_t key[DIGEST_LEN])
{
    for (int i = *lru_chain(l, key); i >= 0; i = l->e[i].hnext) {
        if (memcmp(l->e[i].key, key, DIGEST_LEN) == 0) {
            lru_unlink(l, i);
            lru_push_front(l, i);
            return &l->e[i];
        }
    }
    return NULL;
}

/* lru_add inserts key (not present) with a zeroed payload, evicting if full. */
static struct lru_entry *lru_add(struct lru *l, const uint8_t key[DIGEST_LEN])
{
    int i;
    if (l->n < l->cap) {
        i = l->n++;
    } else {
        i = l->tail;
        if (l->evict)
            l->evict(&l->e[i]);
        int *p = lru_chain(l, l->e[i].key);
        while (*p != i)
            p = &l->e[*p].hnext;
        *p = l->e[i].hnext;
        lru_unlink(l, i);
    }
    struct lru_entry *e = &l->e[i];
    memset(e, 0, sizeof *e);
    memcpy(e->key, key, DIGEST_LEN);
    int *chain = lru_chain(l, key);
    e->hnext = *chain;
    *chain = i;
    lru_push_front(l, i);
    return e;
}

static void evict_dedup(struct lru_entry *e)
{
    free(e->v.d.name);
    free(e->v.d.ns);
    e->v.d.name = e->v.d.ns = NULL;
}

/* ---- the recorder ------------------------------------------------------- */

/* pending: one kop_event call waiting for the sender; strings in arena. */
struct pending {
    struct pending *next;
    time_t when;
    kop_event_type type;
    const char *api_version, *kind, *name, *ns, *uid, *rv;
    const char *reason, *action, *message;
    char arena[];
};

struct kop_recorder {
    kop_client *client; /* owned: short timeout, no retries */
    char component[KOP_EVENT_FIELD_MAX + 1];
    char instance[KOP_EVENT_FIELD_MAX + 1];

    pthread_mutex_t lock;
    pthread_cond_t wake; /* the sender waits for work or stop */
    pthread_cond_t idle; /* flush waits for done to advance */
    struct pending *head, *tail;
    size_t queued;
    uint64_t accepted, done;
    bool stopping;
    int64_t drain_deadline_ms; /* kop_mono_ms() past which queued events are dropped */
    kop_recorder_stats stats;
    pthread_t thread;
    bool thread_started;

    /* The sender thread's own. */
    struct lru agg, dedup, spam;
    unsigned long long last_name_ns;
};

static void bump(kop_recorder *rec, uint64_t *counter)
{
    pthread_mutex_lock(&rec->lock);
    (*counter)++;
    pthread_mutex_unlock(&rec->lock);
}

static const char *type_name(kop_event_type t)
{
    return t == KOP_EVENT_WARNING ? "Warning" : "Normal";
}

/*
 * event_name makes "<object name>.<hex nanoseconds>", strictly increasing
 * within the recorder so two events in one nanosecond still differ. A name
 * that is no valid subdomain, or too long for the suffix, is replaced by a
 * hashed label made from it. Returns a malloc'd string or NULL.
 */
static char *event_name(kop_recorder *rec, const char *obj_name)
{
    struct timespec ts;
    char label[KOP_META_DNS1123_LABEL_MAX + 1];
    const char *base = obj_name;
    clock_gettime(CLOCK_REALTIME, &ts);
    unsigned long long ns =
        (unsigned long long)ts.tv_sec * 1000000000ULL + (unsigned long long)ts.tv_nsec;
    if (ns <= rec->last_name_ns)
        ns = rec->last_name_ns + 1;
    rec->last_name_ns = ns;
    if (!kop_meta_is_valid_dns1123_subdomain(obj_name) ||
        strlen(obj_name) > KOP_META_DNS1123_SUBDOMAIN_MAX - 17) {
        const char *parts[] = {obj_name, NULL};
        if (kop_meta_dns1123_label(label, sizeof label, NULL, parts) != KOP_OK)
            return NULL;
        base = label;
    }
    size_t size = strlen(base) + 18;
    char *name = malloc(size);
    if (name)
        snprintf(name, size, "%s.%llx", base, ns);
    return name;
}

/* build_event makes the core/v1 Event to create. */
static json_t *build_event(const kop_recorder *rec, const struct pending *p,
                           const struct dedup_rec *d, const char *message)
{
    char first[KOP_RFC3339_SIZE], last[KOP_RFC3339_SIZE];
    kop_rfc3339(d->first, first);
    kop_rfc3339(d->last, last);
    json_t *involved = json_object();
    const char *keys[] = {"apiVersion", "kind", "name", "namespace", "uid", "resourceVersion"};
    const char *vals[] = {p->api_version, p->kind, p->name, p->ns, p->uid, p->rv};
    for (size_t i = 0; involved && i < KOP_ARRAY_LEN(keys); i++) {
        if (vals[i] && json_object_set_new(involved, keys[i], json_string(vals[i])) != 0) {
            json_decref(involved);
            involved = NULL;
        }
    }
    if (!involved)
        return NULL;
    json_t *ev = json_pack("{s:s, s:s, s:{s:s, s:s}, s:o, s:s, s:s, s:s, s:{s:s, s:s}, s:s, s:s, "
                           "s:I, s:s, s:s}",
                           "apiVersion", "v1", "kind", "Event", "metadata", "name", d->name,
                           "namespace", d->ns, "involvedObject", involved, "reason", p->reason,
                           "message", message, "type", type_name(p->type), "source", "component",
                           rec->component, "host", rec->instance, "firstTimestamp", first,
                           "lastTimestamp", last, "count", (json_int_t)d->count,
                           "reportingComponent", rec->component, "reportingInstance",
                           rec->instance);
    if (ev && p->action && json_object_set_new(ev, "action", json_string(p->action)) != 0) {
        json_decref(ev);
        ev = NULL;
    }
    return ev;
}

/* send_event creates the Event, or raises its count with a merge patch. */
static void send_event(kop_recorder *rec, const struct pending *p, const struct dedup_rec *d,
                       const char *message, bool patch)
{
    kop_status st;
    kop_err err = KOP_OK;
    json_t *body = NULL;
    kop_status_clear(&st);
    if (patch) {
        char last[KOP_RFC3339_SIZE];
        kop_rfc3339(d->last, last);
        body = json_pack("{s:I, s:s, s:s}", "count", (json_int_t)d->count, "lastTimestamp", last,
                         "message", message);
        kop_patch_req req = {
            .target = {&EVENTS, d->ns, d->name}, .type = KOP_PATCH_MERGE, .patch = body};
        err = body ? kop_patch_object(rec->client, &req, NULL, &st) : KOP_ENOMEM;
        json_decref(body);
        body = NULL;
        if (err == KOP_OK) {
            bump(rec, &rec->stats.patched);
            goto out;
        }
        if (err != KOP_ENOTFOUND)
            goto out;
        /* The Event expired or was deleted: make it again, count and all. */
    }
    body = build_event(rec, p, d, message);
    kop_write_req write = {.target = {&EVENTS, d->ns, NULL}, .object = body};
    err = body ? kop_create_object(rec->client, &write, NULL, &st) : KOP_ENOMEM;
    if (err == KOP_OK)
        bump(rec, &rec->stats.created);
out:
    json_decref(body);
    if (err) {
        bump(rec, &rec->stats.failed);
        kop_log(KOP_LOG_WARN, "cannot write event", KOP_LOG_STR("namespace", d->ns),
                KOP_LOG_STR("event", d->name), KOP_LOG_STR("reason", p->reason), KOP_LOG_ERR(err),
                KOP_LOG_STR("detail", st.message));
    }
}

/*
 * aggregate tells whether the event is to be combined with its similar
 * ones: client-go's EventAggregator, remembering up to AGGREGATE_AFTER - 1
 * distinct messages per (object, type, reason) and combining from the
 * AGGREGATE_AFTER-th distinct one within the window on.
 */
static bool aggregate(kop_recorder *rec, const uint8_t key[DIGEST_LEN], const struct pending *p)
{
    uint8_t md[DIGEST_LEN];
    const char *msg[] = {p->message};
    if (!digest(md, msg, 1))
        return false;
    struct lru_entry *e = lru_get(&rec->agg, key);
    if (!e)
        e = lru_add(&rec->agg, key);
    else if (p->when - e->v.a.last > WINDOW_SECONDS)
        memset(&e->v.a, 0, sizeof e->v.a);
    struct agg_rec *a = &e->v.a;
    a->last = p->when;
    for (int i = 0; i < a->n; i++) {
        if (memcmp(a->msgs[i], md, MSG_DIGEST_LEN) == 0)
            return false;
    }
    if (a->n < AGGREGATE_AFTER - 1) {
        memcpy(a->msgs[a->n++], md, MSG_DIGEST_LEN);
        return false;
    }
    /* The AGGREGATE_AFTER-th distinct message: forget the oldest, combine. */
    memmove(a->msgs[0], a->msgs[1], (size_t)(a->n - 1) * MSG_DIGEST_LEN);
    memcpy(a->msgs[a->n - 1], md, MSG_DIGEST_LEN);
    return true;
}

/* spam_allows takes a token from the object's bucket, refilled by elapsed time. */
static bool spam_allows(kop_recorder *rec, const uint8_t key[DIGEST_LEN], time_t when)
{
    struct lru_entry *e = lru_get(&rec->spam, key);
    if (!e) {
        e = lru_add(&rec->spam, key);
        e->v.s.tokens = SPAM_BURST;
        e->v.s.refilled = when;
    } else if (when > e->v.s.refilled) {
        e->v.s.tokens += (double)(when - e->v.s.refilled) / SPAM_REFILL_SECONDS;
        if (e->v.s.tokens > SPAM_BURST)
            e->v.s.tokens = SPAM_BURST;
        e->v.s.refilled = when;
    }
    if (e->v.s.tokens < 1.0)
        return false;
    e->v.s.tokens -= 1.0;
    return true;
}

/* process correlates one event and sends what is left of it. */
static void process(kop_recorder *rec, const struct pending *p)
{
    const char *type = type_name(p->type);
    const char *event_ns = p->ns && *p->ns ? p->ns : "default";
    uint8_t okey[DIGEST_LEN], akey[DIGEST_LEN], dkey[DIGEST_LEN];
    const char *obj[] = {"O", p->api_version, p->kind, p->ns, p->name, p->uid};
    const char *agg[] = {"A", p->api_version, p->kind, p->ns, p->name, p->uid, type, p->reason};
    const char *dup[] = {"D", p->api_version, p->kind, p->ns, p->name, p->uid, type, p->reason,
                         p->message};
    char combined[sizeof COMBINED_PREFIX + KOP_EVENT_MESSAGE_MAX];
    const char *message = p->message;

    if (!digest(okey, obj, KOP_ARRAY_LEN(obj)) || !digest(akey, agg, KOP_ARRAY_LEN(agg)))
        goto nomem;
    if (aggregate(rec, akey, p)) {
        /* All combined events share one Event, keyed like the aggregate. */
        snprintf(combined, sizeof combined, "%s%s", COMBINED_PREFIX, p->message);
        message = combined;
        agg[0] = "C";
        if (!digest(dkey, agg, KOP_ARRAY_LEN(agg)))
            goto nomem;
    } else if (!digest(dkey, dup, KOP_ARRAY_LEN(dup))) {
        goto nomem;
    }

    struct lru_entry *e = lru_get(&rec->dedup, dkey);
    bool patch = e && e->v.d.name && p->when - e->v.d.last <= WINDOW_SECONDS;
    if (patch) {
        e->v.d.count++;
        if (p->when > e->v.d.last)
            e->v.d.last = p->when;
    } else {
        if (e)
            evict_dedup(e);
        else
            e = lru_add(&rec->dedup, dkey);
        e->v.d = (struct dedup_rec){.name = event_name(rec, p->name), .ns = strdup(event_ns),
                                    .count = 1, .first = p->when, .last = p->when};
        if (!e->v.d.name || !e->v.d.ns) {
            evict_dedup(e);
            goto nomem;
        }
    }
    if (!spam_allows(rec, okey, p->when)) {
        bump(rec, &rec->stats.dropped_spam);
        return;
    }
    send_event(rec, p, &e->v.d, message, patch);
    return;
nomem:
    bump(rec, &rec->stats.failed);
}

static void *sender_main(void *arg)
{
    kop_recorder *rec = arg;
    pthread_mutex_lock(&rec->lock);
    for (;;) {
        while (!rec->head && !rec->stopping)
            pthread_cond_wait(&rec->wake, &rec->lock);
        struct pending *p = rec->head;
        if (!p)
            break; /* stopping, and nothing left */
        rec->head = p->next;
        if (!rec->head)
            rec->tail = NULL;
        rec->queued--;
        bool drop = rec->stopping && kop_mono_ms() >= rec->drain_deadline_ms;
        pthread_mutex_unlock(&rec->lock);
        if (!drop)
            process(rec, p);
        free(p);
        pthread_mutex_lock(&rec->lock);
        if (drop)
            rec->stats.dropped_shutdown++;
        rec->done++;
        pthread_cond_broadcast(&rec->idle);
    }
    pthread_mutex_unlock(&rec->lock);
    return NULL;
}

kop_err kop_recorder_new(kop_client *c, const char *component, const char *instance,
                         kop_recorder **out)
{
    kop_err err = KOP_OK;
    kop_recorder *rec = NULL;
    pthread_condattr_t ca;

    *out = NULL;
    if (!c || !component || !*component || strlen(component) > KOP_EVENT_FIELD_MAX ||
        (instance && (!*instance || strlen(instance) > KOP_EVENT_FIELD_MAX)))
        return KOP_EINVAL;
    rec = calloc(1, sizeof *rec);
    if (!rec)
        return KOP_ENOMEM;
    snprintf(rec->component, sizeof rec->component, "%s", component);
    if (instance)
        snprintf(rec->instance, sizeof rec->instance, "%s", instance);
    else if (gethostname(rec->instance, sizeof rec->instance - 1) != 0 || !rec->instance[0])
        snprintf(rec->instance, sizeof rec->instance, "%s", "unknown");
    rec->instance[sizeof rec->instance - 1] = '\0';

    pthread_mutex_init(&rec->lock, NULL);
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&rec->wake, NULL);
    pthread_cond_init(&rec->idle, &ca);
    pthread_condattr_destroy(&ca);

    /* Its requests are counted where the parent's are (rest_client_requests_total). */
    const kop_client_opts *parent = kop__client_opts(c);
    kop_client_opts o = {.timeout_ms = KOP_RECORDER_TIMEOUT_MS,
                         .max_retries = -1,
                         .on_response = parent->on_response,
                         .on_response_user = parent->on_response_user};
    err = kop_client_new(kop_client_config(c), &o, &rec->client, NULL);
    if (!err)
        err = lru_init(&rec->agg, KOP_RECORDER_CACHE_MAX, NULL);
    if (!err)
        err = lru_init(&rec->dedup, KOP_RECORDER_CACHE_MAX, evict_dedup);
    if (!err)
        err = lru_init(&rec->spam, KOP_RECORDER_CACHE_MAX, NULL);
    if (!err && pthread_create(&rec->thread, NULL, sender_main, rec) != 0)
        err = KOP_ENOMEM;
    if (err)
        goto out;
    rec->thread_started = true;
    *out = rec;
out:
    if (err)
        kop_recorder_free(rec);
    return err;
}

void kop_recorder_free(kop_recorder *rec)
{
    if (!rec)
        return;
    if (rec->thread_started) {
        pthread_mutex_lock(&rec->lock);
        rec->stopping = true;
        rec->drain_deadline_ms = kop_mono_ms() + KOP_RECORDER_DRAIN_MS;
        pthread_cond_signal(&rec->wake);
        pthread_mutex_unlock(&rec->lock);
        pthread_join(rec->thread, NULL);
    }
    KOP_ASSERT(rec->head == NULL);
    lru_fini(&rec->agg);
    lru_fini(&rec->dedup);
    lru_fini(&rec->spam);
    kop_client_free(rec->client);
    pthread_cond_destroy(&rec->wake);
    pthread_cond_destroy(&rec->idle);
    pthread_mutex_destroy(&rec->lock);
    free(rec);
}

/* utf8_cut shortens s (of length len) so that it does not end inside a character. */
static void utf8_cut(char *s, size_t len)
{
    size_t start = len;
    while (start > 0 && ((unsigned char)s[start - 1] & 0xC0) == 0x80)
        start--;
    if (start == 0)
        return;
    unsigned char lead = (unsigned char)s[start - 1];
    size_t need = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
    if (len - (start - 1) < need)
        s[start - 1] = '\0';
}

/* pending_new copies an event's strings into one allocation. */
static struct pending *pending_new(const json_t *obj, kop_event_type type, const char *reason,
                                   const char *action, const char *message)
{
    const char *src[] = {json_string_value(json_object_get(obj, "apiVersion")),
                         json_string_value(json_object_get(obj, "kind")),
                         kop_meta_name(obj),
                         kop_meta_namespace(obj),
                         kop_meta_uid(obj),
                         kop_meta_resource_version(obj),
                         reason,
                         action,
                         message};
    const char *dst[KOP_ARRAY_LEN(src)];
    size_t size = sizeof(struct pending);
    for (size_t i = 0; i < KOP_ARRAY_LEN(src); i++)
        size += src[i] ? strlen(src[i]) + 1 : 0;
    struct pending *p = malloc(size);
    if (!p)
        return NULL;
    char *arena = p->arena;
    for (size_t i = 0; i < KOP_ARRAY_LEN(src); i++) {
        dst[i] = NULL;
        if (src[i]) {
            size_t n = strlen(src[i]) + 1;
            dst[i] = memcpy(arena, src[i], n);
            arena += n;
        }
    }
    /* Field by field: a whole-struct assignment could write padding over the arena. */
    p->next = NULL;
    p->when = now_seconds();
    p->type = type;
    p->api_version = dst[0];
    p->kind = dst[1];
    p->name = dst[2];
    p->ns = dst[3];
    p->uid = dst[4];
    p->rv = dst[5];
    p->reason = dst[6];
    p->action = dst[7];
    p->message = dst[8];
    return p;
}

void kop_event(kop_recorder *rec, const kop_event_req *req, const char *fmt, ...)
{
    char message[KOP_EVENT_MESSAGE_MAX + 1];
    if (!rec)
        return;
    if (!req) {
        bump(rec, &rec->stats.invalid);
        return;
    }
    const json_t *involved_object = req->object;
    kop_event_type type = req->type;
    const char *reason = req->reason, *action = req->action;
    const char *name = kop_meta_name(involved_object);
    if (!name || !*name || !reason || !*reason || strlen(reason) > KOP_EVENT_FIELD_MAX ||
        (action && strlen(action) > KOP_EVENT_FIELD_MAX) || !fmt ||
        (type != KOP_EVENT_NORMAL && type != KOP_EVENT_WARNING)) {
        bump(rec, &rec->stats.invalid);
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    if (n < 0)
        message[0] = '\0';
    else if ((size_t)n > KOP_EVENT_MESSAGE_MAX)
        utf8_cut(message, KOP_EVENT_MESSAGE_MAX);

    kop_logv(4, "event", KOP_LOG_STR("object", name), KOP_LOG_STR("type", type_name(type)),
             KOP_LOG_STR("reason", reason), KOP_LOG_STR("message", message));
    struct pending *p = pending_new(involved_object, type, reason, action, message);
    pthread_mutex_lock(&rec->lock);
    if (!p) {
        rec->stats.failed++;
    } else if (rec->stopping || rec->queued >= KOP_RECORDER_QUEUE_MAX) {
        rec->stats.dropped_full++;
        free(p);
    } else {
        if (rec->tail)
            rec->tail->next = p;
        else
            rec->head = p;
        rec->tail = p;
        rec->queued++;
        rec->accepted++;
        rec->stats.recorded++;
        pthread_cond_signal(&rec->wake);
    }
    pthread_mutex_unlock(&rec->lock);
}

kop_err kop_recorder_flush(kop_recorder *rec, long timeout_ms)
{
    kop_err err = KOP_OK;
    if (!rec)
        return KOP_OK;
    struct timespec deadline = mono_after(timeout_ms < 0 ? 0 : timeout_ms);
    pthread_mutex_lock(&rec->lock);
    uint64_t target = rec->accepted;
    while (rec->done < target) {
        if (pthread_cond_timedwait(&rec->idle, &rec->lock, &deadline) == ETIMEDOUT &&
            rec->done < target) {
            err = KOP_ETIMEOUT;
            break;
        }
    }
    pthread_mutex_unlock(&rec->lock);
    return err;
}

void kop_recorder_read_stats(kop_recorder *rec, kop_recorder_stats *out)
{
    if (!rec) {
        *out = (kop_recorder_stats){0};
        return;
    }
    pthread_mutex_lock(&rec->lock);
    *out = rec->stats;
    pthread_mutex_unlock(&rec->lock);
}
