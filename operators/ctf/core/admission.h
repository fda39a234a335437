/*
 * core/admission.h - the quotas (admission.c): one ledger of the instances
 * a team, and the whole CTF, may run (--max-instances-per-team,
 * --max-instances), asked by the reconciler, the pool controller and the
 * instance API with one counting rule and one message. Fed by the caches'
 * events through the handlers below (the ledger never calls a cache);
 * thread-safe (one lock). Opaque: ctf_admission_new / ctf_admission_free.
 */
#ifndef CTF_CORE_ADMISSION_H
#define CTF_CORE_ADMISSION_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include <kop/err.h>
#include <kop/informer.h> /* kop_informer_handler, a table of callbacks: no call into a cache */

/* status.reason of a Challenge refused for quota. */
#define CTF_REASON_QUOTA "QuotaExceeded"
/* status.reason of a Challenge whose ChallengeDefinition does not exist. */
#define CTF_REASON_DEFINITION_NOT_FOUND "DefinitionNotFound"

typedef struct ctf_admission ctf_admission;

#define CTF_TEAM_KEY_SIZE 320 /* "<namespace>/<team>" */

typedef enum ctf_verdict {
    CTF_ADMIT_OK = 0,
    CTF_ADMIT_TEAM_FULL, /* the team runs --max-instances-per-team */
    CTF_ADMIT_CTF_FULL,  /* the CTF runs --max-instances */
} ctf_verdict;

/* ctf_admission_new makes the quotas' state (empty); *out owned: ctf_admission_free. */
KOP_NODISCARD kop_err ctf_admission_new(int max_per_team, int max_instances, ctf_admission **out);
void ctf_admission_free(ctf_admission *a);

/* ctf_admission_handler: the Challenge cache's events, to keep the counts (register once). */
kop_informer_handler ctf_admission_handler(ctf_admission *a);

/* ctf_admission_namespace_handler: the instance namespaces' cache events, to count the
 * warm instances that exist (register once). */
kop_informer_handler ctf_admission_namespace_handler(ctf_admission *a);

/*
 * ctf_admission_admit admits chal if one more instance fits, and keeps it
 * admitted (asking again answers the same). pool: the pool key
 * ("<namespace>/<definition>") of chal's definition when it keeps warm
 * instances, NULL otherwise: chal is then admitted on a warm slot of that
 * pool no other claimer holds, if there is one, and must then tell how its
 * claim went (ctf_admission_claimed or ctf_admission_unclaimed); else it
 * is admitted fresh, against every instance counted, warm ones included.
 * Anything but CTF_ADMIT_OK comes with msg (size bytes) saying why, for
 * the Challenge's status.
 */
ctf_verdict ctf_admission_admit(ctf_admission *a, const json_t *chal, const char *pool, char *msg,
                                size_t size);

/*
 * ctf_admission_claimed records that chal's instance is the warm one in
 * namespace ns, which it claimed: the warm slot becomes the team's (the
 * total does not change). Counted even when chal was never admitted here
 * (a claim found by its labels after a restart): the namespace exists.
 */
void ctf_admission_claimed(ctf_admission *a, const json_t *chal, const char *ns);

/*
 * ctf_admission_unclaimed: chal, admitted on a warm slot, claimed none and
 * will be built fresh; it is admitted again as fresh, against every
 * instance counted, or refused and released (msg as above). A Challenge
 * admitted fresh already answers CTF_ADMIT_OK.
 */
ctf_verdict ctf_admission_unclaimed(ctf_admission *a, const json_t *chal, char *msg, size_t size);

/* ctf_admission_check answers, admitting nothing, whether a new instance of
 * team (Challenges in ns) might fit; msg as above. */
ctf_verdict ctf_admission_check(ctf_admission *a, const char *ns, const char *team, char *msg,
                                size_t size);

/*
 * ctf_refusal: why a Challenge is refused, as its status would say it.
 * reason is static (a CTF_REASON_* of core/admission.h or
 * core/definition.h), NULL when the Challenge is admitted.
 */
typedef struct ctf_refusal {
    const char *reason;
    char message[512];
} ctf_refusal;

/* ctf_say_no_definition writes the message of a Challenge whose definition def (NULL:
 * none named) is not in namespace ns: the status's and the webhook's. */
void ctf_say_no_definition(const char *def, const char *ns, char *msg, size_t size);

/*
 * ctf_admission_review judges a Challenge about to be created (the
 * validating webhook's question) in namespace ns (NULL: chal's own),
 * admitting nothing: the reconciler still admits it when it runs. def is
 * its ChallengeDefinition as the caches show it (borrowed; NULL: there is
 * none). Returns true when it would be admitted now; false with r filled
 * with the reason and message its status would show, checked in the
 * reconciler's order: DefinitionNotFound, InvalidDefinition, QuotaExceeded
 * (the team's cap, then the CTF's, as ctf_admission_check answers the
 * instance API).
 */
bool ctf_admission_review(ctf_admission *a, const char *ns, const json_t *chal,
                          const json_t *def, ctf_refusal *r);

/*
 * ctf_admission_reserve_warm counts the warm namespace ns of pool before
 * the pool creates it, if one more instance fits in --max-instances; false
 * (nothing counted) when it does not. Already counted: true.
 */
bool ctf_admission_reserve_warm(ctf_admission *a, const char *pool, const char *ns);

/* ctf_admission_add_warm counts the warm namespace ns of pool, which exists, whatever
 * the cap says. */
void ctf_admission_add_warm(ctf_admission *a, const char *pool, const char *ns);

/* ctf_admission_drop_warm stops counting the warm namespace ns (not created, or going). */
void ctf_admission_drop_warm(ctf_admission *a, const char *ns);

/* ctf_admission_warm returns the warm namespaces counted of pool (NULL: of all pools). */
int ctf_admission_warm(ctf_admission *a, const char *pool);

/* ctf_admission_room returns how many more instances (warm or not) fit in --max-instances. */
int ctf_admission_room(ctf_admission *a);

/* ctf_admission_release frees uid's slot; true when it held one. */
bool ctf_admission_release(ctf_admission *a, const char *uid);

/* ctf_admission_count returns the team's admitted instances (team NULL: all). */
int ctf_admission_count(ctf_admission *a, const char *ns, const char *team);

#endif /* CTF_CORE_ADMISSION_H */
