/*
 * test_webhook.c - AdmissionReview and ConversionReview in and out
 * (webhook_review.c), without sockets: what a handler sees, what the
 * apiserver gets back (uid echoed, allowed, status, warnings, the JSON patch
 * of a mutation), conversion of every object or a Failure, and hostile
 * bodies that must be a 400 and never a crash or a leak.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>
#include <openssl/evp.h>

#include "kop/webhook.h"
#include "webhook_internal.h"

/* ---- handlers ------------------------------------------------------------- */

struct seen {
    char operation[16], kind[32], name[64], ns[64], user[64];
    bool dry_run, had_object, had_old;
};

/* refuse_same_route denies a ticket going where it comes from, warns on big ones. */
static kop_err refuse_same_route(kop_admission_request *req, kop_admission_response *resp,
                                 void *user)
{
    struct seen *seen = user;
    if (seen) {
        snprintf(seen->operation, sizeof seen->operation, "%s", req->operation);
        snprintf(seen->kind, sizeof seen->kind, "%s", req->kind);
        snprintf(seen->name, sizeof seen->name, "%s", req->name);
        snprintf(seen->ns, sizeof seen->ns, "%s", req->namespace);
        snprintf(seen->user, sizeof seen->user, "%s", req->username);
        seen->dry_run = req->dry_run;
        seen->had_object = req->object != NULL;
        seen->had_old = req->old_object != NULL;
    }
    const json_t *spec = json_object_get(req->object, "spec");
    const char *from = json_string_value(json_object_get(spec, "from"));
    const char *to = json_string_value(json_object_get(spec, "to"));
    if (json_integer_value(json_object_get(spec, "number")) > 5)
        kop_admission_warn(resp, "more than %d seats", 5);
    if (from && to && strcmp(from, to) == 0)
        return kop_admission_deny(resp, "spec.to: the destination equals the departure (%s)",
                                  from);
    return KOP_OK;
}

/* add_defaults sets a default, removes a field and names a key needing escapes. */
static kop_err add_defaults(kop_admission_request *req, kop_admission_response *resp, void *user)
{
    (void)resp;
    (void)user;
    json_t *spec = json_object_get(req->object, "spec");
    json_object_set_new(spec, "number", json_integer(1));
    json_object_del(spec, "obsolete");
    json_t *labels = json_object();
    json_object_set_new(labels, "a/b~c", json_string("x"));
    json_object_set_new(json_object_get(req->object, "metadata"), "labels", labels);
    return KOP_OK;
}

static kop_err fail_internally(kop_admission_request *req, kop_admission_response *resp,
                               void *user)
{
    (void)req;
    (void)resp;
    (void)user;
    return KOP_ENOMEM;
}

static kop_err deny_with_code(kop_admission_request *req, kop_admission_response *resp,
                              void *user)
{
    (void)req;
    (void)user;
    kop_status_setf(&resp->status, 422, NULL, "spec.number: must be at most 10");
    for (int i = 0; i < 20; i++) /* past the cap: the rest dropped */
        kop_admission_warn(resp, "warning %d", i);
    return KOP_EINVALID;
}

/* ---- helpers -------------------------------------------------------------- */

static const char *ticket_review(const char *from, const char *to, int number)
{
    static char buf[2048];
    snprintf(buf, sizeof buf,
             "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\","
             "\"request\":{\"uid\":\"705ab4f5-6393-11e8-b7cc-42010a800002\","
             "\"kind\":{\"group\":\"flights.com\",\"version\":\"v1\",\"kind\":\"FlightTicket\"},"
             "\"resource\":{\"group\":\"flights.com\",\"version\":\"v1\",\"resource\":"
             "\"flighttickets\"},\"operation\":\"CREATE\",\"namespace\":\"default\","
             "\"name\":\"t1\",\"userInfo\":{\"username\":\"alice\"},\"dryRun\":true,"
             "\"object\":{\"apiVersion\":\"flights.com/v1\",\"kind\":\"FlightTicket\","
             "\"metadata\":{\"name\":\"t1\"},\"spec\":{\"from\":\"%s\",\"to\":\"%s\","
             "\"number\":%d,\"obsolete\":true}}}}",
             from, to, number);
    return buf;
}

/* review runs handler h on body; returns the parsed answer's "response" (owned root in *root). */
static json_t *review(const kop_webhook_admission *h, const char *body, json_t **root)
{
    char *out = NULL;
    kop_status st = {0};
    assert_int_equal(kop__admission_review(h, body, strlen(body), &out, &st), KOP_OK);
    *root = json_loads(out, 0, NULL);
    free(out);
    assert_non_null(*root);
    return json_object_get(*root, "response");
}

/* decode_patch returns the JSON patch in response.patch, decoded (owned). */
static json_t *decode_patch(const json_t *resp)
{
    const char *b64 = json_string_value(json_object_get(resp, "patch"));
    assert_non_null(b64);
    unsigned char raw[4096];
    int n = EVP_DecodeBlock(raw, (const unsigned char *)b64, (int)strlen(b64));
    assert_true(n > 0);
    while (n > 0 && raw[n - 1] == '\0') /* EVP_DecodeBlock pads */
        n--;
    json_t *ops = json_loadb((const char *)raw, (size_t)n, 0, NULL);
    assert_non_null(ops);
    return ops;
}

/* ---- admission ------------------------------------------------------------ */

static void test_allow_echoes_uid(void **state)
{
    (void)state;
    struct seen seen = {0};
    kop_webhook_admission h = {.path = "/validate", .handle = refuse_same_route, .user = &seen};
    json_t *root;
    json_t *resp = review(&h, ticket_review("AMS", "LIS", 2), &root);
    assert_string_equal(json_string_value(json_object_get(root, "apiVersion")),
                        "admission.k8s.io/v1");
    assert_string_equal(json_string_value(json_object_get(root, "kind")), "AdmissionReview");
    assert_string_equal(json_string_value(json_object_get(resp, "uid")),
                        "705ab4f5-6393-11e8-b7cc-42010a800002");
    assert_true(json_is_true(json_object_get(resp, "allowed")));
    assert_null(json_object_get(resp, "status"));
    assert_null(json_object_get(resp, "patch")); /* validating: never a patch */
    assert_null(json_object_get(resp, "warnings"));
    /* What the handler saw. */
    assert_string_equal(seen.operation, "CREATE");
    assert_string_equal(seen.kind, "FlightTicket");
    assert_string_equal(seen.name, "t1");
    assert_string_equal(seen.ns, "default");
    assert_string_equal(seen.user, "alice");
    assert_true(seen.dry_run);
    assert_true(seen.had_object);
    assert_false(seen.had_old);
    json_decref(root);
}

static void test_deny_with_reason_and_warning(void **state)
{
    (void)state;
    kop_webhook_admission h = {.path = "/validate", .handle = refuse_same_route};
    json_t *root;
    json_t *resp = review(&h, ticket_review("AMS", "AMS", 7), &root);
    assert_true(json_is_false(json_object_get(resp, "allowed")));
    json_t *status = json_object_get(resp, "status");
    assert_int_equal(json_integer_value(json_object_get(status, "code")), 403);
    assert_string_equal(json_string_value(json_object_get(status, "reason")), "Forbidden");
    assert_string_equal(json_string_value(json_object_get(status, "message")),
                        "spec.to: the destination equals the departure (AMS)");
    json_t *w = json_object_get(resp, "warnings");
    assert_int_equal(json_array_size(w), 1);
    assert_string_equal(json_string_value(json_array_get(w, 0)), "more than 5 seats");
    json_decref(root);
}

static void test_deny_code_and_warning_cap(void **state)
{
    (void)state;
    kop_webhook_admission h = {.path = "/v", .handle = deny_with_code};
    json_t *root;
    json_t *resp = review(&h, ticket_review("A", "B", 1), &root);
    json_t *status = json_object_get(resp, "status");
    assert_int_equal(json_integer_value(json_object_get(status, "code")), 422);
    assert_string_equal(json_string_value(json_object_get(status, "reason")), "Invalid");
    assert_int_equal(json_array_size(json_object_get(resp, "warnings")),
                     KOP_ADMISSION_MAX_WARNINGS);
    json_decref(root);

    /* A handler that broke denies with 500 and the error's text. */
    h.handle = fail_internally;
    resp = review(&h, ticket_review("A", "B", 1), &root);
    status = json_object_get(resp, "status");
    assert_true(json_is_false(json_object_get(resp, "allowed")));
    assert_int_equal(json_integer_value(json_object_get(status, "code")), 500);
    assert_string_equal(json_string_value(json_object_get(status, "message")), "out of memory");
    json_decref(root);
}

static void test_mutation_is_a_json_patch(void **state)
{
    (void)state;
    kop_webhook_admission h = {.path = "/mutate", .mutating = true, .handle = add_defaults};
    json_t *root;
    json_t *resp = review(&h, ticket_review("AMS", "LIS", 4), &root);
    assert_true(json_is_true(json_object_get(resp, "allowed")));
    assert_string_equal(json_string_value(json_object_get(resp, "patchType")), "JSONPatch");
    json_t *ops = decode_patch(resp);
    /* add labels (a key needing no escape in JSON, but in the pointer's value), remove
     * obsolete, replace number: in the object's member order. */
    json_t *want = json_loads("[{\"op\":\"add\",\"path\":\"/metadata/labels\","
                              "\"value\":{\"a/b~c\":\"x\"}},"
                              "{\"op\":\"remove\",\"path\":\"/spec/obsolete\"},"
                              "{\"op\":\"replace\",\"path\":\"/spec/number\",\"value\":1}]",
                              0, NULL);
    assert_true(json_equal(ops, want));
    json_decref(want);
    json_decref(ops);
    json_decref(root);

    /* Registered as validating, the same handler's changes are ignored. */
    h.mutating = false;
    resp = review(&h, ticket_review("AMS", "LIS", 4), &root);
    assert_null(json_object_get(resp, "patch"));
    json_decref(root);
}

static void test_delete_and_v1beta1(void **state)
{
    (void)state;
    struct seen seen = {0};
    kop_webhook_admission h = {.path = "/v", .mutating = true, .handle = refuse_same_route,
                               .user = &seen};
    const char *body = "{\"apiVersion\":\"admission.k8s.io/v1beta1\",\"kind\":\"AdmissionReview\","
                       "\"request\":{\"uid\":\"u1\",\"operation\":\"DELETE\",\"object\":null,"
                       "\"oldObject\":{\"spec\":{}}}}";
    json_t *root;
    json_t *resp = review(&h, body, &root);
    assert_string_equal(json_string_value(json_object_get(root, "apiVersion")),
                        "admission.k8s.io/v1beta1");
    assert_true(json_is_true(json_object_get(resp, "allowed")));
    assert_null(json_object_get(resp, "patch"));
    assert_false(seen.had_object);
    assert_true(seen.had_old);
    assert_string_equal(seen.kind, ""); /* missing fields are "" */
    json_decref(root);
}

/* Bodies that are no review: each a 400 with a reason, none a crash. */
static void test_hostile_admission(void **state)
{
    (void)state;
    kop_webhook_admission h = {.path = "/v", .handle = refuse_same_route};
    char long_uid[600];
    memset(long_uid, 'u', sizeof long_uid);
    long_uid[sizeof long_uid - 1] = '\0';
    char huge[1024];
    snprintf(huge, sizeof huge,
             "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\","
             "\"request\":{\"uid\":\"%s\"}}",
             long_uid);
    char deep[8192];
    size_t n = 0;
    for (int i = 0; i < 3000; i++)
        deep[n++] = '[';
    deep[n] = '\0';
    const char *bad[] = {
        "",
        "{",
        "null",
        "[]",
        "\"AdmissionReview\"",
        "{\"kind\":\"AdmissionReview\"}",
        "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"ConversionReview\",\"request\":{}}",
        "{\"apiVersion\":\"admission.k8s.io/v2\",\"kind\":\"AdmissionReview\","
        "\"request\":{\"uid\":\"x\"}}",
        "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\"}",
        "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":[]}",
        "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\","
        "\"request\":{\"uid\":7}}",
        "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\","
        "\"request\":{\"uid\":\"\"}}",
        "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\","
        "\"request\":{\"uid\":\"a\",\"uid\":\"b\"}}", /* duplicate keys */
        huge,
        deep,
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char *out = (char *)1;
        kop_status st = {0};
        assert_int_equal(kop__admission_review(&h, bad[i], strlen(bad[i]), &out, &st),
                         KOP_EBADREQUEST);
        assert_null(out);
        assert_int_equal(st.code, 400);
        assert_true(st.message[0] != '\0');
    }
    /* A NUL inside the body and a body with no terminator. */
    const char nul[] = "{\"apiVersion\":\"admission.k8s.io/v1\"\0}";
    char *out = NULL;
    kop_status st = {0};
    assert_int_equal(kop__admission_review(&h, nul, sizeof nul - 1, &out, &st), KOP_EBADREQUEST);
    assert_int_equal(kop__admission_review(&h, NULL, 0, &out, &st), KOP_EBADREQUEST);

    /* Fields of the wrong type are "" or NULL to the handler, not a crash. */
    const char *odd = "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\","
                      "\"request\":{\"uid\":\"u\",\"kind\":\"FlightTicket\",\"name\":5,"
                      "\"object\":[1,2],\"oldObject\":\"x\",\"userInfo\":[]}}";
    json_t *root;
    struct seen seen = {0};
    h.user = &seen;
    json_t *resp = review(&h, odd, &root);
    assert_true(json_is_true(json_object_get(resp, "allowed")));
    assert_false(seen.had_object);
    assert_false(seen.had_old);
    assert_string_equal(seen.name, "");
    json_decref(root);
}

/* ---- JSON diff ------------------------------------------------------------ */

static void test_json_diff(void **state)
{
    (void)state;
    json_t *a = json_loads("{\"k\":1,\"arr\":[1,2],\"o\":{\"x\":1,\"y\":{\"z\":1}},"
                           "\"~/\":true}", 0, NULL);
    json_t *b = json_loads("{\"k\":\"1\",\"arr\":[1],\"o\":{\"y\":{\"z\":1,\"w\":2}},"
                           "\"n\":null}", 0, NULL);
    json_t *ops = NULL;
    assert_int_equal(kop__json_diff(a, b, &ops), KOP_OK);
    json_t *want = json_loads("[{\"op\":\"remove\",\"path\":\"/~0~1\"},"
                              "{\"op\":\"replace\",\"path\":\"/k\",\"value\":\"1\"},"
                              "{\"op\":\"replace\",\"path\":\"/arr\",\"value\":[1]},"
                              "{\"op\":\"remove\",\"path\":\"/o/x\"},"
                              "{\"op\":\"add\",\"path\":\"/o/y/w\",\"value\":2},"
                              "{\"op\":\"add\",\"path\":\"/n\",\"value\":null}]",
                              0, NULL);
    assert_true(json_equal(ops, want));
    json_decref(ops);
    assert_int_equal(kop__json_diff(a, a, &ops), KOP_OK);
    assert_int_equal(json_array_size(ops), 0);
    json_decref(ops);
    json_decref(want);
    json_decref(a);
    json_decref(b);
}

/* ---- conversion ----------------------------------------------------------- */

/* ticket_convert: v1 has spec.number, v2 has spec.seats. */
static kop_err ticket_convert(json_t *obj, const char *from, const char *to, kop_status *st,
                              void *user)
{
    (void)user;
    json_t *spec = json_object_get(obj, "spec");
    if (json_object_get(spec, "poison")) {
        kop_status_setf(st, 0, NULL, "spec.poison cannot be converted");
        return KOP_EINVAL;
    }
    const char *old_key = strcmp(from, "v1") == 0 ? "number" : "seats";
    const char *new_key = strcmp(to, "v1") == 0 ? "number" : "seats";
    json_t *v = json_object_get(spec, old_key);
    if (v) {
        json_object_set(spec, new_key, v);
        if (strcmp(old_key, new_key) != 0)
            json_object_del(spec, old_key);
    }
    return KOP_OK;
}

static const kop_webhook_converter converters[] = {
    {.group = "flights.com", .kind = "FlightTicket", .convert = ticket_convert},
};

static json_t *convert(const char *body, json_t **root)
{
    char *out = NULL;
    kop_status st = {0};
    assert_int_equal(kop__conversion_review(converters, 1, body, strlen(body), &out, &st), KOP_OK);
    *root = json_loads(out, 0, NULL);
    free(out);
    assert_non_null(*root);
    assert_string_equal(json_string_value(json_object_get(*root, "kind")), "ConversionReview");
    return json_object_get(*root, "response");
}

static void test_conversion(void **state)
{
    (void)state;
    json_t *root;
    json_t *resp = convert(
        "{\"apiVersion\":\"apiextensions.k8s.io/v1\",\"kind\":\"ConversionReview\","
        "\"request\":{\"uid\":\"c1\",\"desiredAPIVersion\":\"flights.com/v2\",\"objects\":["
        "{\"apiVersion\":\"flights.com/v1\",\"kind\":\"FlightTicket\",\"metadata\":{\"name\":"
        "\"a\"},\"spec\":{\"number\":3,\"from\":\"AMS\"}},"
        "{\"apiVersion\":\"flights.com/v2\",\"kind\":\"FlightTicket\",\"spec\":{\"seats\":2}}]}}",
        &root);
    assert_string_equal(json_string_value(json_object_get(resp, "uid")), "c1");
    assert_string_equal(json_string_value(json_object_get(json_object_get(resp, "result"),
                                                          "status")),
                        "Success");
    json_t *objs = json_object_get(resp, "convertedObjects");
    assert_int_equal(json_array_size(objs), 2);
    json_t *want = json_loads("{\"apiVersion\":\"flights.com/v2\",\"kind\":\"FlightTicket\","
                              "\"metadata\":{\"name\":\"a\"},\"spec\":{\"seats\":3,\"from\":"
                              "\"AMS\"}}", 0, NULL);
    assert_true(json_equal(json_array_get(objs, 0), want));
    json_decref(want);
    /* Already in the desired version: unchanged. */
    assert_int_equal(json_integer_value(json_object_get(
                         json_object_get(json_array_get(objs, 1), "spec"), "seats")),
                     2);
    json_decref(root);

    /* One object fails: the whole review fails, with the converter's message. */
    resp = convert(
        "{\"apiVersion\":\"apiextensions.k8s.io/v1\",\"kind\":\"ConversionReview\","
        "\"request\":{\"uid\":\"c2\",\"desiredAPIVersion\":\"flights.com/v1\",\"objects\":["
        "{\"apiVersion\":\"flights.com/v2\",\"kind\":\"FlightTicket\",\"spec\":{\"seats\":1}},"
        "{\"apiVersion\":\"flights.com/v2\",\"kind\":\"FlightTicket\",\"spec\":{\"poison\":1}}"
        "]}}",
        &root);
    json_t *result = json_object_get(resp, "result");
    assert_string_equal(json_string_value(json_object_get(result, "status")), "Failure");
    assert_string_equal(json_string_value(json_object_get(result, "message")),
                        "conversion failed: spec.poison cannot be converted");
    assert_null(json_object_get(resp, "convertedObjects"));
    assert_string_equal(json_string_value(json_object_get(resp, "uid")), "c2");
    json_decref(root);

    /* No converter for the kind, another group, an object without a kind. */
    const char *failing[] = {
        "{\"apiVersion\":\"flights.com/v1\",\"kind\":\"Boat\"}",
        "{\"apiVersion\":\"boats.com/v1\",\"kind\":\"FlightTicket\"}",
        "{\"apiVersion\":\"flights.com/v1\"}",
        "17",
    };
    for (size_t i = 0; i < sizeof failing / sizeof *failing; i++) {
        char body[512];
        snprintf(body, sizeof body,
                 "{\"apiVersion\":\"apiextensions.k8s.io/v1\",\"kind\":\"ConversionReview\","
                 "\"request\":{\"uid\":\"c3\",\"desiredAPIVersion\":\"flights.com/v2\","
                 "\"objects\":[%s]}}",
                 failing[i]);
        resp = convert(body, &root);
        assert_string_equal(json_string_value(json_object_get(json_object_get(resp, "result"),
                                                              "status")),
                            "Failure");
        json_decref(root);
    }
}

static void test_hostile_conversion(void **state)
{
    (void)state;
    const char *bad[] = {
        "{}",
        "{\"apiVersion\":\"apiextensions.k8s.io/v1\",\"kind\":\"ConversionReview\"}",
        "{\"apiVersion\":\"apiextensions.k8s.io/v1\",\"kind\":\"ConversionReview\","
        "\"request\":{\"uid\":\"c\"}}",
        "{\"apiVersion\":\"apiextensions.k8s.io/v1\",\"kind\":\"ConversionReview\","
        "\"request\":{\"uid\":\"c\",\"desiredAPIVersion\":\"flights.com/v2\",\"objects\":{}}}",
        "{\"apiVersion\":\"apiextensions.k8s.io/v1beta1\",\"kind\":\"ConversionReview\","
        "\"request\":{\"uid\":\"c\",\"desiredAPIVersion\":\"x/v\",\"objects\":[]}}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char *out = NULL;
        kop_status st = {0};
        assert_int_equal(kop__conversion_review(converters, 1, bad[i], strlen(bad[i]), &out, &st),
                         KOP_EBADREQUEST);
        assert_null(out);
    }
}

/* ---- dispatch by path ----------------------------------------------------- */

static void test_dispatch(void **state)
{
    (void)state;
    kop_webhook_server *s = NULL;
    kop_status st = {0};
    assert_int_equal(kop_webhook_server_new(&(kop_webhook_server_opts){.bind = "127.0.0.1:0"},
                                             &s, &st),
                     KOP_OK);
    kop_webhook_admission h = {.path = "/validate", .handle = refuse_same_route};
    assert_int_equal(kop_webhook_add_admission(s, &h), KOP_OK);
    assert_int_equal(kop_webhook_add_admission(s, &h), KOP_EINVAL); /* path taken */
    h.path = "/convert";
    assert_int_equal(kop_webhook_add_admission(s, &h), KOP_EINVAL); /* the conversion path */
    h.path = "relative";
    assert_int_equal(kop_webhook_add_admission(s, &h), KOP_EINVAL);
    assert_int_equal(kop_webhook_add_converter(s, &converters[0]), KOP_OK);
    assert_int_equal(kop_webhook_add_converter(s, &converters[0]), KOP_EINVAL);
    /* A NULL server (webhooks off) takes anything. */
    assert_int_equal(kop_webhook_add_admission(NULL, &h), KOP_OK);

    char *out = NULL;
    int code = 0;
    const char *body = ticket_review("X", "X", 1);
    assert_int_equal(kop__webhook_dispatch(s, "/validate", body, strlen(body), &out, &code),
                     KOP_OK);
    assert_int_equal(code, 200);
    assert_non_null(strstr(out, "\"allowed\":false"));
    free(out);
    assert_int_equal(kop__webhook_dispatch(s, "/nowhere", body, strlen(body), &out, &code),
                     KOP_ENOTFOUND);
    assert_int_equal(code, 404);
    free(out);
    assert_int_equal(kop__webhook_dispatch(s, "/convert", body, strlen(body), &out, &code),
                     KOP_EBADREQUEST);
    assert_int_equal(code, 400);
    assert_non_null(strstr(out, "\"kind\":\"Status\""));
    free(out);
    kop_webhook_server_free(s);

    /* Options checked at once. */
    assert_int_equal(kop_webhook_server_new(&(kop_webhook_server_opts){.bind = "nonsense"}, &s,
                                            &st),
                     KOP_EINVAL);
    assert_null(s);
    assert_non_null(strstr(st.message, "webhook bind"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_allow_echoes_uid),
        cmocka_unit_test(test_deny_with_reason_and_warning),
        cmocka_unit_test(test_deny_code_and_warning_cap),
        cmocka_unit_test(test_mutation_is_a_json_patch),
        cmocka_unit_test(test_delete_and_v1beta1),
        cmocka_unit_test(test_hostile_admission),
        cmocka_unit_test(test_json_diff),
        cmocka_unit_test(test_conversion),
        cmocka_unit_test(test_hostile_conversion),
        cmocka_unit_test(test_dispatch),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
