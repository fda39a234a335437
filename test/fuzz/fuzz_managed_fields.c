/*
 * fuzz_managed_fields.c - libFuzzer target for kop__cut_managed_fields, the
 * scan that removes object.metadata.managedFields from a watch event's text
 * before it is parsed (json_cut.c).
 *
 * The input is one line. Invariants: the cut never grows the text; and
 * whenever the line parses as the watch decoder parses it, the cut line
 * parses too, to the same document once the informer's default transform
 * (dropping object.metadata.managedFields) is applied to both.
 */
#include "fuzz_check.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "client_internal.h"

/* drop_managed removes root.object.metadata.managedFields, as the default transform does. */
static void drop_managed(json_t *root)
{
    json_t *meta = json_object_get(json_object_get(root, "object"), "metadata");
    if (json_is_object(meta))
        json_object_del(meta, "managedFields");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *line = malloc(size + 1);
    if (!line)
        return 0;
    memcpy(line, data, size);
    line[size] = '\0';
    size_t n = kop__cut_managed_fields(line, size);
    FUZZ_CHECK(n <= size);

    json_t *before = json_loadb((const char *)data, size, JSON_ALLOW_NUL, NULL);
    if (before) {
        json_t *after = json_loadb(line, n, JSON_ALLOW_NUL, NULL);
        FUZZ_CHECK(after != NULL);
        drop_managed(before);
        drop_managed(after);
        FUZZ_CHECK(json_equal(before, after));
        json_decref(after);
    }
    json_decref(before);
    free(line);
    return 0;
}
