/*
 * fuzz_webhook.c - libFuzzer target for the webhook server's reviews
 * (webhook_review.c): what the apiserver, and through it any user's object,
 * can put in an AdmissionReview or a ConversionReview.
 *
 * The first byte picks the review: 0 a validating handler, 1 a mutating one
 * (which changes the object, so the JSON diff and base64 run), 2 a
 * conversion. The rest is the body. Invariants: an answer is a JSON review
 * whose response echoes a uid; a refusal hands back nothing and says why.
 * Under ASan a leak or an overflow fails.
 */
#include "fuzz_check.h"
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <jansson.h>

#include "webhook_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static kop_err judge(kop_admission_request *req, kop_admission_response *resp, void *user)
{
    (void)user;
    json_t *spec = json_object_get(req->object, "spec");
    json_object_del(spec, "from");
    json_object_set_new(spec, "checked/~", json_true());
    json_object_set_new(req->object, "added", json_integer(1));
    kop_admission_warn(resp, "%s", req->name);
    if (strcmp(req->operation, "DELETE") == 0)
        return kop_admission_deny(resp, "%s may not go", req->name);
    return KOP_OK;
}

static kop_err convert(json_t *obj, const char *from, const char *to, kop_status *st, void *user)
{
    (void)user;
    json_t *spec = json_object_get(obj, "spec");
    if (json_object_get(spec, "fail")) {
        kop_status_setf(st, 0, NULL, "cannot convert from %s to %s", from, to);
        return KOP_EINVAL;
    }
    json_object_set(spec, "seats", json_object_get(spec, "number"));
    json_object_del(spec, "number");
    return KOP_OK;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const kop_webhook_converter conv[] = {
        {.group = "flights.com", .kind = "FlightTicket", .convert = convert},
        {.group = "", .kind = "ConfigMap", .convert = convert},
    };
    if (size < 1)
        return 0;
    kop_webhook_admission h = {.path = "/x", .mutating = data[0] == 1, .handle = judge};
    const char *body = (const char *)data + 1;
    char *out = NULL;
    kop_status st;
    kop_status_clear(&st);
    kop_err err = data[0] == 2 ? kop__conversion_review(conv, 2, body, size - 1, &out, &st)
                               : kop__admission_review(&h, body, size - 1, &out, &st);
    FUZZ_CHECK(err == KOP_OK || err == KOP_EBADREQUEST || err == KOP_ENOMEM);
    if (err) {
        FUZZ_CHECK(out == NULL && (err == KOP_ENOMEM || st.message[0] != '\0'));
        return 0;
    }
    json_t *answer = json_loads(out, 0, NULL);
    FUZZ_CHECK(answer != NULL);
    json_t *resp = json_object_get(answer, "response");
    FUZZ_CHECK(json_is_object(resp) && json_is_string(json_object_get(resp, "uid")));
    json_decref(answer);
    free(out);
    return 0;
}
