/*
 * core/census.h - how many Challenges of each definition run which
 * generation, or are being replaced (census.c), for the definition's
 * status.update (controller/update.c: current, updating, behind).
 *
 * The count walked every Challenge of the definition, parsing each from
 * the cache, once a second during an update: a tenth of the operator's CPU
 * in a rolling update of 1,000 (issue 30's profile). The census is kept
 * by a handler of the Challenges' cache instead (controller/setup.c), and
 * a count is a lookup.
 * Each Challenge is filed by uid under "<namespace>/<definition>" with its
 * class: Updating, the definitionGeneration it runs, or none yet; a
 * Challenge being deleted leaves it, as the count always skipped those.
 * Thread-safe (one lock).
 */
#ifndef CTF_CORE_CENSUS_H
#define CTF_CORE_CENSUS_H

#include <stdint.h>

#include <jansson.h>

#include <kop/err.h>

typedef struct ctf_census ctf_census;

/* ctf_census_counts: a definition's instances at generation gen. */
typedef struct ctf_census_counts {
    int current;  /* running gen (or later) */
    int updating; /* Updating: being replaced */
    int behind;   /* running an older generation */
    int total;    /* all of them, those running nothing yet too (a rollout's budget) */
} ctf_census_counts;

KOP_NODISCARD kop_err ctf_census_new(ctf_census **out);
void ctf_census_free(ctf_census *c);

/* ctf_census_seen files Challenge chal as the cache shows it now (its add or update). */
void ctf_census_seen(ctf_census *c, const json_t *chal);

/* ctf_census_gone drops Challenge uid. */
void ctf_census_gone(ctf_census *c, const char *uid);

/* ctf_census_count: the instances of definition ns/name, against generation gen. */
ctf_census_counts ctf_census_count(ctf_census *c, const char *ns, const char *name, int64_t gen);

#endif /* CTF_CORE_CENSUS_H */
