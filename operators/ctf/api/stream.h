/*
 * api/stream.h - the format of one Server-Sent Event of the event streams
 * (stream.c). Pure; the streams themselves are declared in internal.h.
 */
#ifndef CTF_API_STREAM_H
#define CTF_API_STREAM_H

#include <stddef.h>

#include <jansson.h>
#include <kop/err.h>


/*
 * ctf_sse_event formats one Server-Sent Event, "event: NAME\ndata: JSON\n\n",
 * into *out (owned, free()); the JSON is compact, on one line. KOP_ENOMEM.
 */
KOP_NODISCARD kop_err ctf_sse_event(const char *name, const json_t *data, char **out,
                                    size_t *len);

#endif /* CTF_API_STREAM_H */
