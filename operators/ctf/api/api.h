/*
 * api/api.h - the instance API and the participant page, served by the
 * operator itself on --api-bind (docs/api.md). Reads come from the
 * manager's caches, writes go to the kube-apiserver.
 */
#ifndef CTF_API_API_H
#define CTF_API_API_H

#include "controller/operator.h"

typedef struct ctf_api ctf_api;

typedef struct ctf_api_opts {
    const char *bind;                /* "127.0.0.1:8080" (default); "0": no API */
    const char *challenge_namespace; /* default "ctf" */
    const char *system_namespace;    /* default "kopc-system": the token Secrets */
    int team_burst;                  /* writes a team may make at once; default 20 */
    int team_per_minute;             /* writes per minute after the burst; default 20 */
    int heartbeat_s;                 /* event stream heartbeat; default 15 */
    int per_address;                 /* connections per client address; 0: no cap */
    int max_streams;                 /* event streams in all; default 2048 */
} ctf_api_opts;

/*
 * ctf_api_new prepares the API on op (borrowed; op->challenges and
 * op->definitions set up by ctf_setup_controller): the Secret cache, the
 * event hub's handler, the metrics. Call before kop_manager_run. With
 * opts->bind "0", *out is NULL and nothing is served. *out is owned:
 * ctf_api_free.
 */
KOP_NODISCARD kop_err ctf_api_new(ctf_operator *op, const ctf_api_opts *opts, ctf_api **out,
                                  kop_status *st);

/*
 * ctf_api_start binds and serves. Until the caches have synced, API routes
 * answer 503. NULL api is ok (nothing to serve).
 */
KOP_NODISCARD kop_err ctf_api_start(ctf_api *api, kop_status *st);

/* ctf_api_bound_port returns the port the API listens on (0 if none). */
int ctf_api_bound_port(const ctf_api *api);

/*
 * ctf_api_free ends the event streams, stops serving and frees the API.
 * Call before kop_manager_free. NULL is ok.
 */
void ctf_api_free(ctf_api *api);

#endif /* CTF_API_API_H */
