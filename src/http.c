/*
 * http.c - the pieces libkop's HTTP servers share (kop/http.h).
 */
#include <netdb.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/resource.h>

#include "kop/http.h"

static pthread_once_t raise_once = PTHREAD_ONCE_INIT;

/* raise_nofile lifts the soft descriptor limit to the hard one (best effort). */
static void raise_nofile(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        (void)setrlimit(RLIMIT_NOFILE, &rl);
    }
}

unsigned kop_http_connection_limit(unsigned want)
{
    struct rlimit rl;
    pthread_once(&raise_once, raise_nofile);
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
        return want;
    rlim_t room = rl.rlim_cur > KOP_HTTP_FD_RESERVE + 16 ? rl.rlim_cur - KOP_HTTP_FD_RESERVE : 16;
    return room < want ? (unsigned)room : want;
}

kop_err kop_http_parse_bind(const char *bind, struct sockaddr_storage *out, socklen_t *len_out,
                            kop_status *st)
{
    char host[256];
    const char *colon = bind ? strrchr(bind, ':') : NULL;
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *res = NULL;
    char *end = NULL;

    if (!colon || (size_t)(colon - bind) >= sizeof host || !colon[1])
        goto bad;
    long port = strtol(colon + 1, &end, 10);
    if (*end || port < 0 || port > 65535)
        goto bad;
    snprintf(host, sizeof host, "%.*s", (int)(colon - bind), bind);
    char *h = host;
    size_t n = strlen(h);
    if (n >= 2 && h[0] == '[' && h[n - 1] == ']') {
        h[n - 1] = '\0';
        h++;
    } else if (strchr(h, ':')) {
        goto bad; /* an IPv6 address needs its brackets */
    }
    if (getaddrinfo(h[0] ? h : NULL, colon + 1, &hints, &res) != 0 || !res ||
        res->ai_addrlen > sizeof *out)
        goto bad;
    memset(out, 0, sizeof *out);
    memcpy(out, res->ai_addr, res->ai_addrlen);
    if (len_out)
        *len_out = (socklen_t)res->ai_addrlen;
    freeaddrinfo(res);
    return KOP_OK;
bad:
    if (res)
        freeaddrinfo(res);
    kop_status_setf(st, 0, NULL,
                    "bind address \"%s\": want HOST:PORT (an IPv4 address, [an IPv6 one], a name, "
                    "or nothing for every address; port 0-65535)",
                    bind ? bind : "(null)");
    return KOP_EINVAL;
}
