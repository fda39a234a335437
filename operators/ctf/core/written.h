/*
 * core/written.h - the status this process last wrote to each Challenge,
 * kept until the cache shows it (written.c).
 *
 * A status write is answered at once, but the cache shows it only when its
 * watch event arrives. A pass that runs in between (woken by a pod, a
 * Deployment, an EndpointSlice of the same instance) finds the old status
 * in the cache, wants the one just written, and writes it again with the
 * old resourceVersion: the apiserver refuses it (409), and the Challenge
 * waits to be looked at again. A rolling update of 1,000 instances made 766
 * such writes (issue 30). With the last write kept, that pass sees that
 * what it wants is already written and writes nothing.
 *
 * A note is dropped once the cache shows its resourceVersion, after
 * CTF_WRITTEN_LAG_MS (a cache that lags longer is told by a write's 409),
 * or when its Challenge goes. At most CTF_WRITTEN_MAX notes: beyond, a
 * status write is not noted (and may meet a 409, as before). Pure: the
 * caller passes the times (kop_mono_ms). Thread-safe (one lock).
 */
#ifndef CTF_CORE_WRITTEN_H
#define CTF_CORE_WRITTEN_H

#include <stdint.h>

#include <jansson.h>

#include <kop/err.h>

typedef struct ctf_written ctf_written;

#define CTF_WRITTEN_LAG_MS 10000  /* how long a cache may lag behind a status write */
#define CTF_WRITTEN_MAX    200000 /* notes kept at once */

KOP_NODISCARD kop_err ctf_written_new(ctf_written **out);
void ctf_written_free(ctf_written *w);

/* ctf_written_note keeps status (copied) as written to uid at now_ms, stored as version rv. */
void ctf_written_note(ctf_written *w, const char *uid, const char *rv, const json_t *status,
                      int64_t now_ms);

/*
 * ctf_written_dup returns (a new reference) the status last written to
 * uid while the cache, showing resource version cached_rv, has not caught
 * up with it; NULL when there is none, the cache shows it (the note is
 * dropped), or it is older than CTF_WRITTEN_LAG_MS (dropped too).
 */
json_t *ctf_written_dup(ctf_written *w, const char *uid, const char *cached_rv, int64_t now_ms);

/* ctf_written_forget drops uid's note (its Challenge is going). */
void ctf_written_forget(ctf_written *w, const char *uid);

/* ctf_written_count: how many notes are kept (tests). */
size_t ctf_written_count(ctf_written *w);

#endif /* CTF_CORE_WRITTEN_H */
