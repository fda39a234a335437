/*
 * fuzz_ctf_webhook.c - libFuzzer target for the Challenge validating
 * webhook (operators/ctf/controller/webhook.c): any AdmissionReview the
 * apiserver may forward, carrying any user's object, judged against a
 * fixed table of definitions and a real quota ledger.
 *
 * The first byte sets the view: bit 0 the caches synced, bit 1 a failed
 * definition read, bit 2 a --namespace of "ctf". The rest is the body.
 * Invariants: an answer is a review echoing a uid; a refusal is a 403 with
 * one of the status's three reasons and a message, and only ever of a
 * CREATE of a ctf.kopc.io Challenge; judging admits nothing (the ledger's
 * counts do not move). Under ASan a leak or an overflow fails.
 */
#include "fuzz_check.h"
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "controller/webhook.h"
#include "core/definition.h"
#include "webhook_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char DEF_OK[] =
    "{\"apiVersion\":\"ctf.kopc.io/v1alpha1\",\"kind\":\"ChallengeDefinition\","
    "\"metadata\":{\"name\":\"pwn\",\"namespace\":\"ctf\"},"
    "\"spec\":{\"pods\":[{\"name\":\"app\",\"template\":{\"containers\":[{\"name\":\"app\","
    "\"image\":\"registry.example/pwn:1\",\"ports\":[{\"containerPort\":1337}]}]}}],"
    "\"expose\":[{\"name\":\"pwn\",\"pod\":\"app\",\"port\":1337,\"type\":\"TCP\"}],"
    "\"flag\":{\"static\":\"flag{x}\"}}}";
static const char DEF_BAD[] =
    "{\"metadata\":{\"name\":\"broken\",\"namespace\":\"ctf\"},\"spec\":{\"pods\":[]}}";

struct view_state {
    json_t *defs;
    bool synced, read_fails;
};

static kop_err lookup(void *user, const char *ns, const char *name, json_t **def)
{
    struct view_state *v = user;
    *def = NULL;
    if (strcmp(ns, "ctf") == 0)
        *def = json_incref(json_object_get(v->defs, name));
    if (*def)
        return KOP_OK;
    return v->read_fails ? KOP_EIO : KOP_ENOTFOUND;
}

static bool is_synced(void *user)
{
    return ((struct view_state *)user)->synced;
}

static kop_err handle(kop_admission_request *req, kop_admission_response *resp, void *user)
{
    return ctf_webhook_judge(user, req, resp);
}

/* judged: the request is one the webhook may refuse (a CREATE of a Challenge). */
static bool judged(const char *body, size_t len)
{
    json_t *root = json_loadb(body, len, JSON_REJECT_DUPLICATES, NULL);
    const json_t *rq = json_object_get(root, "request");
    const json_t *kind = json_object_get(rq, "kind");
    bool yes = json_is_string(json_object_get(rq, "operation")) &&
               strcmp(json_string_value(json_object_get(rq, "operation")), "CREATE") == 0 &&
               json_is_string(json_object_get(kind, "kind")) &&
               strcmp(json_string_value(json_object_get(kind, "kind")), "Challenge") == 0;
    json_decref(root);
    return yes;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static ctf_admission *adm;
    static struct view_state vs;
    if (!adm) { /* once: a ledger where team a runs its one instance */
        if (ctf_admission_new(1, 2, &adm) != KOP_OK)
            abort();
        vs.defs = json_object();
        json_object_set_new(vs.defs, "pwn", json_loads(DEF_OK, 0, NULL));
        json_object_set_new(vs.defs, "broken", json_loads(DEF_BAD, 0, NULL));
        json_t *c = json_loads("{\"metadata\":{\"name\":\"a\",\"namespace\":\"ctf\",\"uid\":\"u1\"},"
                               "\"spec\":{\"team\":\"a\",\"definition\":\"pwn\"}}",
                               0, NULL);
        char msg[512];
        if (ctf_admission_admit(adm, c, NULL, msg, sizeof msg) != CTF_ADMIT_OK)
            abort();
        json_decref(c);
    }
    if (size < 1)
        return 0;
    vs.synced = data[0] & 1;
    vs.read_fails = data[0] & 2;
    ctf_webhook_view view = {.admission = adm,
                             .watch_namespace = (data[0] & 4) ? "ctf" : NULL,
                             .definition = lookup,
                             .synced = is_synced,
                             .user = &vs};
    kop_webhook_admission h = {.path = CTF_WEBHOOK_VALIDATE_CHALLENGE, .handle = handle,
                               .user = &view};
    const char *body = (const char *)data + 1;
    char *out = NULL;
    kop_status st;
    kop_status_clear(&st);
    kop_err err = kop__admission_review(&h, body, size - 1, &out, &st);
    FUZZ_CHECK(err == KOP_OK || err == KOP_EBADREQUEST || err == KOP_ENOMEM);
    FUZZ_CHECK(ctf_admission_count(adm, NULL, NULL) == 1);
    if (err) {
        FUZZ_CHECK(out == NULL && (err == KOP_ENOMEM || st.message[0] != '\0'));
        return 0;
    }
    json_t *answer = json_loads(out, 0, NULL);
    FUZZ_CHECK(answer != NULL);
    json_t *resp = json_object_get(answer, "response");
    FUZZ_CHECK(json_is_object(resp) && json_is_string(json_object_get(resp, "uid")));
    if (!json_is_true(json_object_get(resp, "allowed"))) {
        const json_t *s = json_object_get(resp, "status");
        const char *reason = json_string_value(json_object_get(s, "reason"));
        const char *message = json_string_value(json_object_get(s, "message"));
        FUZZ_CHECK(json_integer_value(json_object_get(s, "code")) == 403);
        FUZZ_CHECK(reason && (strcmp(reason, CTF_REASON_DEFINITION_NOT_FOUND) == 0 ||
                              strcmp(reason, CTF_REASON_INVALID_DEFINITION) == 0 ||
                              strcmp(reason, CTF_REASON_QUOTA) == 0));
        FUZZ_CHECK(message && message[0] != '\0');
        FUZZ_CHECK(judged(body, size - 1));
    }
    json_decref(answer);
    free(out);
    return 0;
}
