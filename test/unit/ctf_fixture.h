/*
 * ctf_fixture.h - what the CTF unit tests share: a fixed instant and JSON
 * fixtures written with single quotes, so definitions read as they would
 * in YAML. Include after <cmocka.h>.
 */
#ifndef CTF_FIXTURE_H
#define CTF_FIXTURE_H

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#define LEN(a) (sizeof(a) / sizeof((a)[0]))

/* 2026-11-21T10:00:00Z:
 * python3 -c "import calendar; print(calendar.timegm((2026,11,21,10,0,0)))" */
#define T0 ((time_t)1795255200)

/* parse reads single-quoted JSON (new reference); a bad fixture fails the test. */
static inline json_t *parse(const char *text)
{
    char *s = strdup(text);
    for (char *p = s; *p; p++)
        if (*p == '\'')
            *p = '"';
    json_error_t e;
    json_t *v = json_loads(s, JSON_DECODE_ANY, &e);
    if (!v)
        fail_msg("bad test JSON: %s: %s", e.text, s);
    free(s);
    return v;
}

/* child_of returns the object of that kind and metadata.name in the array children
 * (borrowed); NULL when there is none. */
static inline json_t *child_of(const json_t *children, const char *kind, const char *name)
{
    size_t i;
    json_t *o;
    json_array_foreach(children, i, o)
    {
        const char *k = json_string_value(json_object_get(o, "kind"));
        const char *n = json_string_value(json_object_get(json_object_get(o, "metadata"), "name"));
        if (k && n && strcmp(k, kind) == 0 && strcmp(n, name) == 0)
            return o;
    }
    return NULL;
}

#endif /* CTF_FIXTURE_H */
