/*
 * json_cut.c - metadata.managedFields cut out of a watch event's text before
 * it is parsed.
 *
 * The apiserver sends every object with its managedFields, often a third of
 * its bytes or more, and informers drop them at once (the default
 * transform). Parsing text into a jansson tree costs far more than scanning
 * it, and the watch decoder is the hottest parse in the library (a fifth of
 * the CTF operator's CPU at 1,000 Challenges), so a watch that asks for it
 * (kop_watch_opts.drop_managed_fields) has the member removed from the line
 * in place, and parses the rest.
 *
 * The scan is one pass over the line keeping, for the three outer levels,
 * whether each container is an object, whether a key comes next, and the
 * key it is in; strings are skipped with their escapes. Only the member
 * "managedFields" of the object at envelope.object.metadata is cut, and
 * only when its value is an array or null that ends within the line; the
 * comma on one side goes with it. Anything unexpected (a key written with
 * escapes, another value type, an unterminated string, a NUL byte anywhere:
 * jansson's tokenizer takes one after some tokens and not after others, so
 * a cut next to one could turn a line it accepts into one it refuses)
 * leaves the text as it is, and the transform drops the member after the
 * parse as before. So
 * the property fuzz_managed_fields checks: whenever the line parses, the cut
 * line parses too, to the same object once managedFields are dropped.
 */
#include <stdbool.h>
#include <string.h>

#include "client_internal.h"

#define CUT_LEVELS 3 /* the envelope, its object, the object's metadata */

/* cut_state: what the scan knows of the containers at levels 1..CUT_LEVELS. */
struct cut_state {
    int depth;
    bool object[CUT_LEVELS + 1];   /* the container at this level is an object */
    bool want_key[CUT_LEVELS + 1]; /* the next string at this level is a key */
    bool on_path[CUT_LEVELS + 1];  /* envelope, envelope.object, envelope.object.metadata */
    const char *key[CUT_LEVELS + 1];
    size_t key_len[CUT_LEVELS + 1];
};

/* string_end returns the index of the quote closing the string opened at s[i], or n. */
static size_t string_end(const char *s, size_t i, size_t n)
{
    for (i++; i < n; i++) {
        if (s[i] == '\\')
            i++;
        else if (s[i] == '"')
            return i;
    }
    return n;
}

/* is_space: JSON's whitespace. */
static bool is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static size_t skip_space(const char *s, size_t i, size_t n)
{
    while (i < n && is_space(s[i]))
        i++;
    return i;
}

/* value_end returns the index just past the array or null starting at s[i], or 0. */
static size_t value_end(const char *s, size_t i, size_t n)
{
    if (n - i >= 4 && memcmp(s + i, "null", 4) == 0)
        return i + 4;
    if (s[i] != '[')
        return 0;
    for (size_t depth = 0; i < n; i++) {
        if (s[i] == '"')
            i = string_end(s, i, n);
        else if (s[i] == '[' || s[i] == '{')
            depth++;
        else if ((s[i] == ']' || s[i] == '}') && --depth == 0)
            return i + 1;
    }
    return 0;
}

static bool key_is(const struct cut_state *c, int level, const char *want)
{
    return c->key_len[level] == strlen(want) && memcmp(c->key[level], want, c->key_len[level]) == 0;
}

/* open notes a container opened at s[i] ('{' or '['). */
static void open_container(struct cut_state *c, char kind)
{
    int d = ++c->depth;
    if (d > CUT_LEVELS)
        return;
    c->object[d] = kind == '{';
    c->want_key[d] = kind == '{';
    c->key[d] = NULL;
    c->key_len[d] = 0;
    c->on_path[d] = kind == '{' && (d == 1 || (c->on_path[d - 1] && c->object[d - 1] &&
                                               key_is(c, d - 1, d == 2 ? "object" : "metadata")));
}

/*
 * cut_member removes the member whose key starts at s[k] and whose value
 * ends before s[e], with the comma before it, or else the one after it;
 * returns the new length and sets *resume to where scanning goes on.
 */
static size_t cut_member(char *s, size_t n, size_t k, size_t e, size_t *resume)
{
    size_t from = k, to = e, p = k;
    while (p > 0 && is_space(s[p - 1]))
        p--;
    if (p > 0 && s[p - 1] == ',') {
        from = p - 1; /* ",key:value" */
    } else {
        size_t q = skip_space(s, e, n);
        if (q < n && s[q] == ',')
            to = skip_space(s, q + 1, n); /* "key:value," (the first member) */
    }
    memmove(s + from, s + to, n - to);
    *resume = from;
    return n - (to - from);
}

size_t kop__cut_managed_fields(char *s, size_t n)
{
    struct cut_state c = {0};
    size_t i = 0;
    if (memchr(s, '\0', n))
        return n; /* no apiserver writes one; leave such a line to the parser */
    while (i < n) {
        char ch = s[i];
        int d = c.depth;
        bool level = d >= 1 && d <= CUT_LEVELS;
        if (ch == '"') {
            size_t j = string_end(s, i, n);
            if (j == n)
                return n; /* unterminated: leave it to the parser */
            if (level && c.object[d] && c.want_key[d]) {
                c.key[d] = s + i + 1;
                c.key_len[d] = j - i - 1;
                c.want_key[d] = false;
                if (d == CUT_LEVELS && c.on_path[d] && key_is(&c, d, "managedFields")) {
                    size_t v = skip_space(s, j + 1, n);
                    size_t e = v < n && s[v] == ':' ? skip_space(s, v + 1, n) : n;
                    size_t end = e < n ? value_end(s, e, n) : 0;
                    if (end) {
                        n = cut_member(s, n, i, end, &i);
                        c.want_key[d] = i < n && s[i] == '"'; /* the next member moved up */
                        continue;
                    }
                }
            }
            i = j + 1;
            continue;
        }
        if (ch == '{' || ch == '[') {
            open_container(&c, ch);
        } else if (ch == '}' || ch == ']') {
            if (--c.depth <= 0)
                return n; /* the envelope closed: nothing more to look at */
        } else if (ch == ',' && level && c.object[d]) {
            c.want_key[d] = true;
        }
        i++;
    }
    return n;
}
