/*
 * kop/leader.h - leader election on a coordination.k8s.io/v1 Lease, with
 * the semantics of client-go's tools/leaderelection and its LeaseLock.
 *
 * Several replicas of an operator run the same elector on the same Lease;
 * at most one of them holds it at a time and reconciles, the others wait as
 * hot standbys. The Lease records the holder's identity, how long the
 * holder's claim lasts (leaseDurationSeconds) and when it last renewed it.
 *
 * The elector of one kop_leader runs on a thread of its own:
 *
 *   acquire  every retry_period (jittered up to 2.2x, as client-go's
 *            JitterFactor 1.2), read the Lease; create it if missing; take it
 *            if its holder is empty, is us, or has not changed its record for
 *            the record's leaseDurationSeconds, timed by *our* monotonic clock
 *            from when we first saw that record (never by the remote
 *            timestamps, so clock skew between replicas does not matter). Every write carries the
 *            resourceVersion read: of two candidates, one wins and the other
 *            gets a Conflict and waits again. leaseTransitions counts holder
 *            changes.
 *   renew    every retry_period while leading, write a new renewTime. If no
 *            renewal succeeds for renew_deadline, or the Lease names another
 *            holder, leadership is lost: kop_leader_is_leader turns false
 *            first, then on_stopped_leading is called, and the elector ends
 *            (client-go's Run returns; kopc's manager then exits and the
 *            process restarts as a candidate). A kop_leader runs one term;
 *            make a new one to stand again.
 *   release  on kop_leader_stop while leading, with release_on_stop, write
 *            holderIdentity "", leaseDurationSeconds 1 and renewTime now (as
 *            client-go's ReleaseOnCancel does), so that a standby takes over
 *            at its next retry instead of waiting for the lease to expire.
 *
 * Safety margins: kop_leader_is_leader is computed from the clock, not only
 * from the elector's state: it is false as soon as renew_deadline has passed
 * since the start of the last successful write, even while the elector is
 * still blocked in a request. Since renew_deadline < lease_duration, a
 * replica stops considering itself leader before any standby can take over.
 * Once false it stays false for the life of the kop_leader.
 *
 * The elector talks to the apiserver through a client of its own, made from
 * the configuration of the client passed in, with a per-request timeout of
 * half the renew deadline and no client-level retries: reconciler traffic
 * and the caller's rate limit never delay a renewal (controller-runtime
 * likewise gives leader election a client of its own).
 *
 * Callbacks run on the elector thread and must return promptly: renewals
 * wait for them. They must not call kop_leader_stop or kop_leader_free.
 * The library never prints; failed attempts are retried silently and
 * counted in kop_leader_stats.
 */
#ifndef KOP_LEADER_H
#define KOP_LEADER_H

#include <stdbool.h>

#include "kop/client.h"
#include "kop/common.h"
#include "kop/err.h"

KOP_BEGIN_DECLS

typedef struct kop_leader kop_leader;

/* Defaults applied to zero fields of kop_leader_opts, client-go's values. */
#define KOP_LEADER_DEFAULT_LEASE_DURATION_MS 15000
#define KOP_LEADER_DEFAULT_RENEW_DEADLINE_MS 10000
#define KOP_LEADER_DEFAULT_RETRY_PERIOD_MS   2000

/*
 * kop_leader_opts: strings are copied by kop_leader_new. Durations must
 * satisfy lease_duration_ms > renew_deadline_ms > 1.2 * retry_period_ms > 0,
 * and lease_duration_ms >= 1000 (the Lease stores whole seconds, rounded
 * down).
 */
typedef struct kop_leader_opts {
    const char *lease_namespace; /* required */
    const char *lease_name;      /* required */
    const char *identity;        /* default: hostname "_" random UUID, as controller-runtime */
    long lease_duration_ms;      /* how long a standby waits for a silent holder; default 15 s */
    long renew_deadline_ms;      /* how long the leader tries to renew before giving up; 10 s */
    long retry_period_ms;        /* between attempts; default 2 s */
    /* On kop_leader_stop while leading, give the Lease up (client-go's
     * ReleaseOnCancel). kopc's manager sets it: it stops reconciling before
     * it stops the elector, so a successor may start at once. */
    bool release_on_stop;
    /* Called once leadership is acquired. */
    void (*on_started_leading)(void *user);
    /* Called when leadership ends, lost or stopped, after kop_leader_is_leader
     * turned false and before a release; only if on_started_leading was
     * called. Stop reconciling here. */
    void (*on_stopped_leading)(void *user);
    /* Optional: the observed holder changed (our own identity included; never
     * called with "", a released Lease). identity is borrowed for the call. */
    void (*on_new_leader)(const char *identity, void *user);
    void *user;
} kop_leader_opts;

/*
 * kop_leader_stats: counters of one elector, for tests and metrics. A copy
 * taken under the elector's lock; every field is read-only.
 */
typedef struct kop_leader_stats {
    unsigned long attempts;   /* acquire or renew attempts made */
    unsigned long failures;   /* attempts the apiserver refused or that failed in transit */
    unsigned long renewals;   /* successful renewals while leading */
    bool leading;             /* between on_started_leading and on_stopped_leading */
    bool lost;                /* leadership was lost, not given up by kop_leader_stop */
    kop_err last_error;       /* the last failed attempt's error; KOP_OK if none */
    kop_status last_status;   /* and its detail */
} kop_leader_stats;

/*
 * kop_leader_new makes an elector for the Lease opts names, not yet running.
 * c's configuration is borrowed and must outlive the elector (c itself is
 * not used after this call). Returns KOP_EINVAL, explained in st, for
 * missing names or inconsistent durations. *out is owned by the caller:
 * kop_leader_free.
 */
KOP_API KOP_NODISCARD kop_err kop_leader_new(kop_client *c, const kop_leader_opts *opts,
                                             kop_leader **out, kop_status *st);

/*
 * kop_leader_start starts the elector on a thread of its own and returns at
 * once. An elector runs once: a second start, or a start after
 * kop_leader_stop, gives KOP_EINVAL.
 */
KOP_API KOP_NODISCARD kop_err kop_leader_start(kop_leader *l);

/*
 * kop_leader_is_leader tells whether l holds the Lease now: it has acquired
 * it, has not lost or stopped, and renewed within renew_deadline. Cheap
 * (two atomic loads and a clock read) and safe from any thread.
 */
KOP_API bool kop_leader_is_leader(const kop_leader *l);

/* kop_leader_identity returns l's identity, borrowed until kop_leader_free. */
KOP_API const char *kop_leader_identity(const kop_leader *l);

/* kop_leader_read_stats copies l's counters into *out (caller storage). */
KOP_API void kop_leader_read_stats(const kop_leader *l, kop_leader_stats *out);

/*
 * kop_leader_stop stops the elector and waits for its thread to end. If l
 * was leading: is_leader turns false, on_stopped_leading is called, then the
 * Lease is released when opts.release_on_stop is set (a failed release is
 * counted in the stats; the Lease then simply expires). Idempotent; does
 * nothing if l was never started. Not from a callback.
 */
KOP_API void kop_leader_stop(kop_leader *l);

/* kop_leader_free stops l (kop_leader_stop) and frees it. NULL is ok. */
KOP_API void kop_leader_free(kop_leader *l);

KOP_END_DECLS

#endif /* KOP_LEADER_H */
