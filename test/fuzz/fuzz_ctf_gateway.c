/*
 * fuzz_ctf_gateway.c - libFuzzer target for what the gateway mode reads from
 * outside (operators/ctf/core/gateway.h): a route's status, which whatever
 * gateway controller runs in the cluster writes, and the pod selector an
 * operator is started with.
 *
 * Input layout: the first line is the pod selector ("k=v,k2=v2"); the rest
 * is a route as JSON (any document; not JSON: a route with no status).
 * Invariants checked, abort() on violation:
 *  - ctf_gateway_route_state returns one of the three states and writes a
 *    NUL-terminated message into its buffer, naming our Gateway, whatever
 *    the route holds;
 *  - the state does not depend on the buffer's size (a short buffer only
 *    cuts the message);
 *  - a selector ctf_gateway_check accepts gives a peer whose podSelector
 *    labels are valid label keys and values; one it refuses gives none;
 *  - the probe's verdict on the whole input as what a gateway answered
 *    (bytes from the network, not NUL-terminated) is one of the three, an
 *    answer is the same as itself exactly when it is an HTTP answer with a
 *    head, and nothing reads past the input (ASan).
 */
#include "fuzz_check.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <kop/meta.h>

#include "core/gateway.h"

static const unsigned char KEY[32] = "0123456789abcdef0123456789abcde";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    char *nl = strchr(text, '\n');
    const char *route_text = nl ? nl + 1 : "";
    if (nl)
        *nl = '\0';

    ctf_config cfg = {.gateway = {.domain = "ctf.example.test", .namespace = "edge",
                                  .name = "door", .pod_selector = text, .key = KEY,
                                  .key_len = sizeof KEY}};
    kop_status st;
    json_t *peer = ctf_gateway_peer(&cfg);
    if (ctf_gateway_check(&cfg, &st) == KOP_OK) {
        FUZZ_CHECK(peer != NULL);
        const char *k;
        json_t *v;
        json_object_foreach(json_object_get(json_object_get(peer, "podSelector"), "matchLabels"),
                            k, v)
        {
            FUZZ_CHECK(kop_meta_is_valid_label_key(k));
            FUZZ_CHECK(kop_meta_is_valid_label_value(json_string_value(v)));
        }
    } else if (strlen(text) < 4096) {
        FUZZ_CHECK(peer == NULL);
    }
    json_decref(peer);

    json_t *route = json_loads(route_text, JSON_DECODE_ANY, NULL);
    char big[512], small[8];
    memset(big, 'x', sizeof big);
    memset(small, 'x', sizeof small);
    ctf_route_state a =
        ctf_gateway_route_state(&cfg, route, "TLSRoute", "ns1", "tcp", big, sizeof big);
    ctf_route_state b =
        ctf_gateway_route_state(&cfg, route, "TLSRoute", "ns1", "tcp", small, sizeof small);
    FUZZ_CHECK(a == CTF_ROUTE_ACCEPTED || a == CTF_ROUTE_WAITING || a == CTF_ROUTE_REFUSED);
    FUZZ_CHECK(a == b);
    FUZZ_CHECK(memchr(big, '\0', sizeof big) != NULL);
    FUZZ_CHECK(memchr(small, '\0', sizeof small) != NULL);
    FUZZ_CHECK(strstr(big, "edge/door") != NULL);
    json_decref(route);
    free(text);

    /* The answer exactly as read: a copy of its own size, so ASan sees any overread. */
    char *answer = malloc(size ? size : 1);
    if (!answer)
        return 0;
    memcpy(answer, data, size);
    for (int m = 0; m < 8; m++) {
        ctf_probe_verdict v = ctf_gateway_probe_verdict(answer, size, m & 1, m & 2, m & 4);
        FUZZ_CHECK(v == CTF_PROBE_SERVED || v == CTF_PROBE_GATEWAY || v == CTF_PROBE_COMPARE);
    }
    int code = ctf_gateway_http_status(answer, size);
    FUZZ_CHECK(code == 0 || (code >= 100 && code <= 599));
    bool same = ctf_gateway_probe_same(answer, size, answer, size);
    FUZZ_CHECK(!same || code != 0);
    free(answer);
    return 0;
}
