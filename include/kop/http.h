/*
 * kop/http.h - what libkop's HTTP servers (the manager's /metrics, /healthz
 * and /readyz) and an operator's own (the CTF operator's instance API) share:
 * reading the address they listen on, and how many connections they may
 * hold.
 */
#ifndef KOP_HTTP_H
#define KOP_HTTP_H

#include <sys/socket.h>

#include "kop/common.h"
#include "kop/err.h"

KOP_BEGIN_DECLS

/*
 * kop_http_parse_bind reads "HOST:PORT" into *out (*len_out its length):
 * HOST a numeric IPv4 address, a bracketed IPv6 one ("[::1]:8080"), a name
 * ("localhost"), or empty for every address; PORT 0-65535 (0: any free
 * port). Returns KOP_OK, or KOP_EINVAL explained in st (which may be NULL)
 * without touching *out.
 */
KOP_API KOP_NODISCARD kop_err kop_http_parse_bind(const char *bind, struct sockaddr_storage *out,
                                                  socklen_t *len_out, kop_status *st);

/*
 * kop_http_connection_limit returns how many connections a server may hold:
 * want, or fewer when the process's descriptor limit (RLIMIT_NOFILE) leaves
 * less room beside KOP_HTTP_FD_RESERVE descriptors for everything else. It
 * first raises the soft limit as far as the hard one allows, once per
 * process. Never less than 16.
 */
#define KOP_HTTP_FD_RESERVE 512
KOP_API unsigned kop_http_connection_limit(unsigned want);

KOP_END_DECLS

#endif /* KOP_HTTP_H */
