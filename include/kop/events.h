/*
 * kop/events.h - Kubernetes Events, recorded the way client-go's
 * tools/record does it: deduplicated, aggregated, rate-limited per object,
 * and sent in the background.
 *
 *   kop_recorder *rec = NULL;
 *   if (kop_recorder_new(client, "kopc-ctf", NULL, &rec)) ...;
 *   kop_event(rec, challenge, KOP_EVENT_NORMAL, "Provisioned", "Provision",
 *             "namespace %s created", ns);
 *   kop_recorder_free(rec);
 *
 * What is written: core/v1 Events (not events.k8s.io/v1; both APIs serve
 * the same objects). core/v1 is what `kubectl describe` and
 * `kubectl get events` show, and its count / firstTimestamp /
 * lastTimestamp model is exactly the dedup described below; events.k8s.io
 * would need the series protocol for the same effect. Each Event lives in
 * the involved object's namespace ("default" for cluster-scoped objects),
 * names it in involvedObject {apiVersion, kind, name, namespace, uid,
 * resourceVersion}, and carries source {component, host} and
 * reportingComponent / reportingInstance / action. Names are
 * "<object name>.<16 hex digits>" (a nanosecond timestamp, unique within
 * the process), as client-go makes them.
 *
 * Correlation, in this order (client-go's EventCorrelator):
 * - Aggregation: when 10 events with the same object, type and reason but
 *   different messages arrive within 10 minutes, the next ones are combined
 *   into one Event whose message is "(combined from similar events): " and
 *   the latest message.
 * - Dedup: the same (object, type, reason, message) within 10 minutes of
 *   its last occurrence raises count and lastTimestamp of the existing
 *   Event with a merge patch instead of creating another. An Event deleted
 *   meanwhile (Events expire after an hour) is created again.
 * - Spam filter: per object, a token bucket of 25 that refills one token
 *   every 5 minutes; an event without a token is dropped, though its
 *   occurrence still counts toward the next count that is sent.
 * Each of the three remembers at most KOP_RECORDER_CACHE_MAX keys,
 * least recently used first out.
 *
 * Never blocking a reconcile: kop_event copies what it needs and queues it
 * (at most KOP_RECORDER_QUEUE_MAX; when full the event is dropped and
 * counted) for one sender thread. The sender uses a client of its own, made
 * from the same configuration, with a short timeout and no retries, so a
 * slow apiserver delays Events, never reconciles. Events are best effort:
 * failures are counted and logged (kop/log.h), not returned.
 */
#ifndef KOP_EVENTS_H
#define KOP_EVENTS_H

#include <stdint.h>

#include <jansson.h>

#include "kop/client.h"
#include "kop/common.h"
#include "kop/err.h"

KOP_BEGIN_DECLS

#define KOP_RECORDER_QUEUE_MAX   1000  /* events waiting for the sender */
#define KOP_RECORDER_CACHE_MAX   4096  /* keys remembered by each correlation cache */
#define KOP_RECORDER_TIMEOUT_MS  5000  /* one request of the sender */
#define KOP_RECORDER_DRAIN_MS    2000  /* kop_recorder_free's wait for queued events */
#define KOP_EVENT_MESSAGE_MAX    1024  /* longer messages are cut (events.k8s.io's limit) */
#define KOP_EVENT_FIELD_MAX      128   /* reason, action, component, instance */

typedef struct kop_recorder kop_recorder;

typedef enum kop_event_type {
    KOP_EVENT_NORMAL = 0,
    KOP_EVENT_WARNING,
} kop_event_type;

/* kop_recorder_stats: counters since kop_recorder_new. */
typedef struct kop_recorder_stats {
    uint64_t recorded;     /* accepted by kop_event and queued */
    uint64_t created;      /* Events created */
    uint64_t patched;      /* existing Events whose count was raised */
    uint64_t dropped_full; /* not queued: the queue was full */
    uint64_t dropped_spam; /* not sent: the object's spam filter had no token */
    uint64_t dropped_shutdown; /* still queued when kop_recorder_free's drain ended */
    uint64_t invalid;      /* refused by kop_event: no object name, bad reason */
    uint64_t failed;       /* the apiserver refused or could not be reached */
} kop_recorder_stats;

/*
 * kop_recorder_new makes a recorder that writes Events through a client of
 * its own built from c's configuration (c is borrowed only during this
 * call, but its configuration must outlive the recorder). component is the
 * reportingComponent / source.component ("kopc-ctf"); instance the
 * reportingInstance / source.host, NULL for the host name; both at most
 * KOP_EVENT_FIELD_MAX bytes, copied. Starts the sender thread. *out is
 * owned: kop_recorder_free. KOP_EINVAL for bad arguments, KOP_ENOMEM, or
 * what kop_client_new returns.
 */
KOP_API KOP_NODISCARD kop_err kop_recorder_new(kop_client *c, const char *component,
                                               const char *instance, kop_recorder **out);

/*
 * kop_recorder_free sends what is queued for up to KOP_RECORDER_DRAIN_MS
 * (plus the request in flight), drops the rest, stops the sender and frees
 * everything. NULL is ok.
 */
KOP_API void kop_recorder_free(kop_recorder *rec);

/*
 * kop_event_req: what an Event is about, besides its message. Every string
 * and the object are borrowed for the call only (what the Event needs is
 * copied before kop_event returns). Zero type is KOP_EVENT_NORMAL.
 */
typedef struct kop_event_req {
    const json_t *object; /* the involved object: apiVersion, kind, metadata copied */
    kop_event_type type;  /* KOP_EVENT_NORMAL (zero) or KOP_EVENT_WARNING */
    const char *reason;   /* required: CamelCase ("Provisioned"), <= KOP_EVENT_FIELD_MAX */
    const char *action;   /* "Provision"; NULL for none */
} kop_event_req;

/*
 * kop_event records an event about req->object (its apiVersion, kind and
 * metadata name, namespace, uid and resourceVersion are copied). The
 * message is printf-formatted and cut at KOP_EVENT_MESSAGE_MAX bytes on a
 * UTF-8 boundary. Returns at once; rec NULL does nothing, so code can run
 * without a recorder. Invalid input is counted in stats.invalid.
 *
 *   kop_event(rec, &(kop_event_req){.object = chal, .type = KOP_EVENT_WARNING,
 *       .reason = "Expired", .action = "Delete"}, "expired after %d s", secs);
 */
KOP_API void kop_event(kop_recorder *rec, const kop_event_req *req, const char *fmt, ...)
    KOP_PRINTF(3, 4);

/*
 * kop_recorder_flush waits until every event queued before the call has
 * been sent or dropped: KOP_OK, or KOP_ETIMEOUT after timeout_ms.
 */
KOP_API KOP_NODISCARD kop_err kop_recorder_flush(kop_recorder *rec, long timeout_ms);

/* kop_recorder_read_stats copies the counters into *out (caller storage). */
KOP_API void kop_recorder_read_stats(kop_recorder *rec, kop_recorder_stats *out);

KOP_END_DECLS

#endif /* KOP_EVENTS_H */
