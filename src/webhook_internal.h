/*
 * webhook_internal.h - the pure half of the webhook server (webhook_review.c:
 * reviews in, answers out, no sockets), shared with webhook.c, the unit
 * tests and the fuzz target. Not installed.
 */
#ifndef KOP_WEBHOOK_INTERNAL_H
#define KOP_WEBHOOK_INTERNAL_H

#include <stddef.h>

#include <jansson.h>

#include "kop/webhook.h"

/* Caps on what a review may carry, past which it is a 400. */
#define KOP__WEBHOOK_UID_MAX      128 /* the apiserver sends a UUID */
#define KOP__WEBHOOK_MAX_OBJECTS  10000 /* objects in one ConversionReview */

/*
 * kop__admission_review answers one AdmissionReview (v1, or v1beta1 which
 * has the same shape) with handler h. KOP_OK: *out (owned, free()) is the
 * AdmissionReview to send with 200, whatever h decided. KOP_EBADREQUEST:
 * the body is not a review (st->message says why: send 400). KOP_ENOMEM.
 */
kop_err kop__admission_review(const kop_webhook_admission *h, const char *body, size_t len,
                              char **out, kop_status *st);

/*
 * kop__conversion_review answers one ConversionReview v1 with the n
 * converters cs, as kop__admission_review: a converter's failure is a 200
 * answer with result.status Failure; only a body that is no review is
 * KOP_EBADREQUEST.
 */
kop_err kop__conversion_review(const kop_webhook_converter *cs, int n, const char *body,
                               size_t len, char **out, kop_status *st);

/*
 * kop__json_diff returns in *ops (owned, a JSON array) the RFC 6902 patch
 * that turns from into to: objects are compared member by member, anything
 * else that differs (arrays included) is replaced whole. An empty array
 * when they are equal.
 */
kop_err kop__json_diff(const json_t *from, const json_t *to, json_t **ops);

/*
 * kop__webhook_dispatch answers body POSTed to path on s, as the HTTP side
 * does once the body is in: *code the HTTP status, *out (owned) the body to
 * send (a review, or a metav1.Status for 400/404/500). Returns the error
 * behind a non-200 answer.
 */
kop_err kop__webhook_dispatch(kop_webhook_server *s, const char *path, const char *body,
                              size_t len, char **out, int *code);

#endif /* KOP_WEBHOOK_INTERNAL_H */
