/*
 * controller/webhook.h - the validating webhook for Challenges
 * (webhook.c): its judgement of one AdmissionReview request, apart from
 * the caches it reads, so that the unit tests and the fuzz target hand it
 * their own. main.c registers it through ctf_setup_webhook
 * (controller/operator.h).
 */
#ifndef CTF_CONTROLLER_WEBHOOK_H
#define CTF_CONTROLLER_WEBHOOK_H

#include <stdbool.h>

#include <jansson.h>

#include <kop/webhook.h>

#include "core/admission.h"

/* The path the ValidatingWebhookConfiguration names (config/webhook, the chart). */
#define CTF_WEBHOOK_VALIDATE_CHALLENGE "/validate-ctf-kopc-io-v1alpha1-challenge"

/*
 * ctf_webhook_view: what the webhook reads, borrowed. definition finds the
 * ChallengeDefinition ns/name: KOP_OK with *def (owned) when it exists,
 * KOP_ENOTFOUND when it does not, another error when it cannot tell (the
 * Challenge is then let through, to be judged by the reconciler). synced
 * tells whether the caches have synced (until then everything is let
 * through). watch_namespace: --namespace (NULL: all); Challenges elsewhere
 * are not the operator's and are let through.
 */
typedef struct ctf_webhook_view {
    ctf_admission *admission;
    const char *watch_namespace;
    kop_err (*definition)(void *user, const char *ns, const char *name, json_t **def);
    bool (*synced)(void *user);
    void *user;
} ctf_webhook_view;

/*
 * ctf_webhook_judge answers one admission request for a Challenge: KOP_OK
 * admits it (possibly with a warning in resp), KOP_EFORBIDDEN refuses it
 * with resp->status: code 403, reason and message those its status would
 * show (ctf_admission_review). Only a CREATE is judged; any other
 * operation, a kind other than Challenge or a namespace outside the watch
 * scope is admitted untouched.
 */
kop_err ctf_webhook_judge(const ctf_webhook_view *v, const kop_admission_request *req,
                          kop_admission_response *resp);

#endif /* CTF_CONTROLLER_WEBHOOK_H */
