/*
 * api/views.h - the Instance view (views.c): what a team's page shows of a
 * Challenge, the one place where a Challenge becomes what a page shows
 * (the event stream, the GET routes and the writes all use it), and the
 * public view of a definition. Pure; the cache of views answered lately is
 * declared in internal.h.
 */
#ifndef CTF_API_VIEWS_H
#define CTF_API_VIEWS_H

#include <time.h>

#include <jansson.h>


/* The states a page shows (docs/api.md). */
#define CTF_STATE_STOPPED  "Stopped"
#define CTF_STATE_STARTING "Starting"
#define CTF_STATE_RUNNING  "Running"
#define CTF_STATE_ERROR    "Error"
#define CTF_STATE_STOPPING "Stopping"

/* ctf_api_state derives a Challenge's page state (static string). */
const char *ctf_api_state(const json_t *chal);

/*
 * ctf_api_instance_view returns (owned) the Instance a team sees of chal
 * at time now. def is the Challenge's ChallengeDefinition or NULL when it
 * is gone (the expiry then comes from status alone). NULL when out of memory.
 */
json_t *ctf_api_instance_view(const json_t *chal, const json_t *def, time_t now);

/*
 * ctf_api_stopped_view returns (owned) the Instance of a team's challenge
 * that has none: state Stopped, every other field null or empty.
 */
json_t *ctf_api_stopped_view(const char *team, const char *challenge);

/*
 * ctf_api_view_key returns (owned, free()) what of a view an event stream
 * compares to decide whether it changed: the view without secondsLeft.
 */
char *ctf_api_view_key(const json_t *view);

/* ctf_api_challenge_view returns (owned) the public fields of a definition. */
json_t *ctf_api_challenge_view(const json_t *def);

#endif /* CTF_API_VIEWS_H */
