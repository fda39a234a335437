/*
 * core/fresh.h - the definitions a claim reads from the apiserver, one
 * read shared by the claims of a burst (fresh.c).
 *
 * A claim must not take a warm instance of a definition's old version
 * when the definition changed before the Challenge was made, which the
 * cache may not show yet; so it reads the definition from the apiserver (a
 * quorum read). Any such read that *started after the Challenge's ADDED
 * event reached this process* serves: the event is sent after the create
 * committed, and a quorum read sees every write committed before it
 * started. During a burst the Challenges wait in the work queue far longer
 * than a read takes, so most claims find a read that serves them already
 * done, and the others wait for the one in flight instead of sending
 * their own: a burst of N claims makes about one read per round trip, not
 * N, and most claims none.
 *
 * Pure: the caller passes the reader and the times (kop_mono_ms), and
 * records when each Challenge was first seen (ctf_fresh_seen). Thread-safe
 * (one lock, and a condition the waiting claims sleep on).
 */
#ifndef CTF_CORE_FRESH_H
#define CTF_CORE_FRESH_H

#include <stdint.h>

#include <jansson.h>

#include <kop/err.h>

typedef struct ctf_fresh ctf_fresh;

#define CTF_FRESH_DEFINITIONS 256    /* definitions whose last read is kept (the oldest goes) */
#define CTF_FRESH_SEEN_MAX    200000 /* Challenges whose first sight is kept; others: now */

/*
 * ctf_fresh_read_fn reads definition ns/name from the apiserver: KOP_OK
 * with *out owned (NULL: there is none), or an error (nothing is kept).
 */
typedef kop_err (*ctf_fresh_read_fn)(const char *ns, const char *name, json_t **out, void *user);

KOP_NODISCARD kop_err ctf_fresh_new(ctf_fresh **out);
void ctf_fresh_free(ctf_fresh *f);

/* ctf_fresh_seen records that Challenge uid was first seen at now_ms (a later call keeps the
 * first); ctf_fresh_gone forgets it. */
void ctf_fresh_seen(ctf_fresh *f, const char *uid, int64_t now_ms);
void ctf_fresh_gone(ctf_fresh *f, const char *uid);

/* ctf_fresh_since: when uid was first seen; now_ms when it is not known (the safe answer). */
int64_t ctf_fresh_since(ctf_fresh *f, const char *uid, int64_t now_ms);

/*
 * ctf_fresh_definition gives in *out (owned; NULL: none) definition
 * ns/name as a read that started at since_ms or later found it: the last
 * one when it did, else the one in flight when that did (waited for), else
 * a new one through read (clock: kop_mono_ms-like, for its start time).
 * A failed read keeps nothing and is the caller's error; a claim that
 * waited for it reads again itself.
 */
KOP_NODISCARD kop_err ctf_fresh_definition(ctf_fresh *f, const char *ns, const char *name,
                                           int64_t since_ms, ctf_fresh_read_fn read, void *user,
                                           int64_t (*clock)(void), json_t **out);

#endif
