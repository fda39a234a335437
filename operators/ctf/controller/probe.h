/*
 * controller/probe.h - Running means served, in the gateway mode (probe.c):
 * before an instance turns Running, the operator connects to the gateway
 * (--gateway-probe-address) as a participant would, TLS with the
 * instance's host as SNI, and checks that the instance answers, not the
 * gateway: a gateway writes a route's Accepted before it applies its
 * configuration (Traefik about 2-3 s before), so Accepted alone is not yet
 * a served host.
 */
#ifndef CTF_CONTROLLER_PROBE_H
#define CTF_CONTROLLER_PROBE_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include <kop/err.h>

#include "core/names.h"

/* At most this many probes (each a thread of its own) run at once; other hosts wait a turn. */
#define CTF_PROBE_MAX_IN_FLIGHT 16

/* ctf_probe_outcome: what ctf_gateway_served found. */
typedef enum ctf_probe_outcome {
    CTF_PROBE_OFF,     /* no probe address: Running waits for Accepted only */
    CTF_PROBE_OK,      /* every host answered with its instance's bytes */
    CTF_PROBE_NOT_YET, /* a host's probe runs, or it got the gateway's own answer: msg says */
    CTF_PROBE_BUSY,    /* CTF_PROBE_MAX_IN_FLIGHT probes run already: look again soon */
    CTF_PROBE_UNTRUSTED, /* a host's certificate failed verification (or the CA cannot be
                          * read): msg says which host and why */
} ctf_probe_outcome;

/* The reason a Pending instance shows while its gateway's certificate fails verification. */
#define CTF_REASON_GATEWAY_CERT "GatewayCertificateInvalid"

/*
 * ctf_gateway_served tells whether each entry of eps (status.endpoints of
 * the gateway mode: {type, host, ...}) is served through the gateway at
 * cfg->gateway.probe_address, from probes run off the caller's thread: one
 * connection per host (two when the answer is a 404 to compare with a host
 * without a route), each bounded by about 2 s. Does not block: a host
 * without a result gets its probe started (or waits a turn: CTF_PROBE_BUSY)
 * and the call answers CTF_PROBE_NOT_YET; call again later (the result of a
 * finished probe waits for the next call, a served one up to 3 s). msg (size
 * bytes) says what the first host not served waits for or got. CTF_PROBE_OK
 * once every host's probe found it served; CTF_PROBE_UNTRUSTED when a host's
 * last probe met a certificate that failed verification against
 * cfg->gateway.probe_ca (NULL or "": the system's CA store), which wins the
 * message over a host still waiting. Borrowed inputs; copies kept.
 */
ctf_probe_outcome ctf_gateway_served(const ctf_config *cfg, const json_t *eps, char *msg,
                                     size_t size);

/*
 * ctf_probe_retry_ms: how long to wait before looking again at the probe of
 * an instance whose Challenge is age_ms old: 200 ms in its first 30 s (the
 * gateway usually serves within 3 s of Accepted), 1 s until 5 min, then 3 s.
 */
long ctf_probe_retry_ms(double age_ms);

/*
 * ctf_probe_wait_idle waits up to timeout_ms until no probe thread runs (each
 * ends within about 2 s of its start), so that a program or a test that
 * stops asking can exit with nothing of a probe still allocated. true when
 * none runs.
 */
bool ctf_probe_wait_idle(long timeout_ms);

/*
 * ctf_probe_ca_check: path (--gateway-probe-ca) is a readable PEM file
 * holding at least one certificate, checked once at start-up so that a
 * wrong path fails there and not at every probe. KOP_OK, or KOP_EINVAL
 * with st's message saying what is wrong with it.
 */
KOP_NODISCARD kop_err ctf_probe_ca_check(const char *path, kop_status *st);

#endif /* CTF_CONTROLLER_PROBE_H */
