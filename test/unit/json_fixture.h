/*
 * json_fixture.h - what the metadata unit tests share: JSON documents
 * written inline, and a comparison that prints both sides when it fails.
 * Include after <cmocka.h>.
 */
#ifndef KOP_TEST_JSON_FIXTURE_H
#define KOP_TEST_JSON_FIXTURE_H

#include <stdlib.h>

#include <jansson.h>

/* parse returns the document text holds (owned), failing the test when it does not parse. */
static inline json_t *parse(const char *text)
{
    json_error_t e;
    json_t *v = json_loads(text, 0, &e);
    if (!v)
        fail_msg("bad test JSON: %s: %s", e.text, text);
    return v;
}

/* assert_json_eq compares a document with expected JSON text. */
static inline void assert_json_eq(const json_t *got, const char *want_text, const char *what)
{
    json_t *want = parse(want_text);
    if (!json_equal(got, want)) {
        char *g = json_dumps(got, JSON_SORT_KEYS | JSON_COMPACT);
        fail_msg("%s:\n got %s\nwant %s", what, g, want_text);
    }
    json_decref(want);
}

#endif /* KOP_TEST_JSON_FIXTURE_H */
