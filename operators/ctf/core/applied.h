/*
 * core/applied.h - what was last applied to each instance (applied.c), so
 * that a pass that would apply the same children again writes nothing: a
 * record per key (a Challenge's or a warm instance's uid) of the children's
 * digest, the Deployments' generations and the time, and the digest
 * stamped on the server for a process that has no record. Pure: the caller
 * passes what its caches show and the time. Thread-safe (one lock).
 */
#ifndef CTF_CORE_APPLIED_H
#define CTF_CORE_APPLIED_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include <kop/err.h>

typedef struct ctf_applied ctf_applied;

#define CTF_DIGEST_HEX        65             /* SHA-256 in hex, NUL included */
#define CTF_APPLIED_LAG_MS    10000          /* how long the caches may lag behind an apply */
#define CTF_APPLIED_RESYNC_MS (10 * 60000L) /* every child applied again at least this often */

typedef enum ctf_applied_verdict {
    CTF_APPLY = 0,  /* apply every child */
    CTF_APPLY_SKIP, /* what the caches show is what was applied */
    CTF_APPLY_WAIT, /* applied just now: look again once the caches caught up */
} ctf_applied_verdict;

/* ctf_applied_seen: what the caches show of an instance's cached children. */
typedef struct ctf_applied_seen {
    int missing;         /* children absent from their cache, or being deleted */
    int64_t generations; /* the sum of the cached Deployments' metadata.generation */
} ctf_applied_seen;

KOP_NODISCARD kop_err ctf_applied_new(ctf_applied **out);
void ctf_applied_free(ctf_applied *a);

/* ctf_applied_digest writes the SHA-256 (hex) of children's canonical text. */
KOP_NODISCARD kop_err ctf_applied_digest(const json_t *children, char out[CTF_DIGEST_HEX]);

/* ctf_applied_decide: apply, skip or wait (*wait_ms) for uid's children of digest. */
ctf_applied_verdict ctf_applied_decide(ctf_applied *a, const char *uid, const char *digest,
                                       const ctf_applied_seen *seen, int64_t now_ms,
                                       long *wait_ms);

/* ctf_applied_record notes a full apply of digest whose Deployments are at generations. */
void ctf_applied_record(ctf_applied *a, const char *uid, const char *digest, int64_t generations,
                        int64_t now_ms);

/* ctf_applied_known: uid has a record (something applied for it was noted). */
bool ctf_applied_known(ctf_applied *a, const char *uid);

/* ctf_applied_forget drops uid's record (its instance is going). */
void ctf_applied_forget(ctf_applied *a, const char *uid);

/*
 * Each child is also remembered by itself (issue 30: a rolling update of
 * 1,000 instances re-applied ten unchanged children of each to change its
 * Deployment, and five to an instance waiting for its turn): the digest of
 * each child as it was last applied, when, and, for a Deployment, the
 * generation the apply answered. A pass whose children differ from the
 * last as a whole applies only the children that differ, or that were
 * last applied CTF_APPLIED_RESYNC_MS ago or more (ctf_applied_child_skips).
 * The records of the children are kept across passes that apply other sets
 * (an instance kept on its version applies only what no version changes),
 * and dropped with the instance's record (ctf_applied_forget).
 */

#define CTF_CHILD_KEY_SIZE 512 /* "<kind>/<namespace>/<name>" */

/* ctf_applied_child_key writes child's "<kind>/<namespace>/<name>" to out (size bytes). */
void ctf_applied_child_key(const json_t *child, char *out, size_t size);

/*
 * ctf_applied_children_dup returns a new reference to uid's children's
 * records ({key: {"digest", "at", "generation"}}), or NULL when it has none.
 */
json_t *ctf_applied_children_dup(ctf_applied *a, const char *uid);

/*
 * ctf_applied_child_skip: whether a child whose key has the record was
 * (record from ctf_applied_children_dup, may be NULL) need not be applied
 * again as digest: applied as digest less than CTF_APPLIED_RESYNC_MS before
 * now_ms, and, for a Deployment, its generation in the cache
 * (cached_generation; any other negative value when the cache has none)
 * what the apply answered (a Deployment edited by someone else is put right
 * at once); CTF_APPLIED_NOT_DEPLOYMENT for the other kinds. Pure.
 */
#define CTF_APPLIED_NOT_DEPLOYMENT (-1)
bool ctf_applied_child_skip(const json_t *was, const char *digest, int64_t cached_generation,
                            int64_t now_ms);

/*
 * ctf_applied_children_keep sets children (stolen: {key: {"digest", "at",
 * "generation"}}) as uid's children's records, on uid's record (which
 * ctf_applied_record made first); without one, they are dropped.
 */
void ctf_applied_children_keep(ctf_applied *a, const char *uid, json_t *children);

/*
 * The last apply's digest is also kept on the server, so that a process
 * without a record (a new leader, a restart) need not apply again what the
 * one before it applied in full: an apply stamps "<ms>:<digest>" on the
 * last child it writes (CTF_ANNOTATION_APPLIED; ms is the wall clock's, in
 * milliseconds), and children are applied in order, each only after the
 * one before it went through, while those it does not write were applied
 * as the same digest says before (their records). So the newest stamp on
 * an instance's children proves every child was applied as its digest
 * says. Stamps left on children not written since are older, and a child
 * written again without one loses its own (server-side apply drops a field
 * its manager no longer sends). The stamp goes on a changed child, not on
 * one fixed child (issue 30: a rolling update wrote each instance's last
 * Service again, only to move the stamp). Leaders follow each other by a
 * lease of seconds, so their clocks' skew does not reorder their stamps.
 * A stamp without "<ms>:" (from before 0.3) counts as the oldest.
 */
#define CTF_ANNOTATION_APPLIED "ctf.kopc.io/applied"
#define CTF_STAMP_SIZE (CTF_DIGEST_HEX + 21) /* "<ms>:<digest>", NUL included */

/* ctf_applied_stamp sets "<wall_ms>:<digest>" on child (the last one a pass writes). */
KOP_NODISCARD kop_err ctf_applied_stamp(json_t *child, const char *digest, int64_t wall_ms);

/*
 * ctf_applied_stamp_newer returns whichever of the stamps a and b (values
 * of CTF_ANNOTATION_APPLIED; NULL or malformed: none) was written later:
 * a when they tie, NULL when neither is a stamp.
 */
const char *ctf_applied_stamp_newer(const char *a, const char *b);

/*
 * ctf_applied_seed takes what the caches show of the children as uid's
 * record when uid has none: stamp (their newest CTF_ANNOTATION_APPLIED,
 * ctf_applied_stamp_newer; NULL when none of the cached kinds has one)
 * of digest and no cached child missing. The record then says "applied in
 * full at now_ms, the Deployments at seen->generations", so the next full
 * apply comes with the resync (CTF_APPLIED_RESYNC_MS). Returns whether it
 * seeded.
 */
bool ctf_applied_seed(ctf_applied *a, const char *uid, const char *digest, const char *stamp,
                      const ctf_applied_seen *seen, int64_t now_ms);

#endif /* CTF_CORE_APPLIED_H */
