/*
 * web/web.h - the participant page (index.html, app.js, style.css) and the
 * API's description (openapi.json), compiled into the binary by
 * embed.cmake (web_data.c, generated at build time) and served from memory
 * by api/respond.c. The page is plain JavaScript that speaks only the
 * instance API (docs/api.md); it has no C of its own.
 */
#ifndef CTF_WEB_WEB_H
#define CTF_WEB_WEB_H

#include <stddef.h>

/* The embedded files: base names, contents (each NUL-terminated, the NUL not
 * counted in its size) and sizes, ctf_web_count of each. Constant data. */
extern const char *const ctf_web_names[];
extern const char *const ctf_web_data[];
extern const size_t ctf_web_size[];
extern const size_t ctf_web_count;

#endif /* CTF_WEB_WEB_H */
