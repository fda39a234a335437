/*
 * webflag.c - the sample web challenge: a page that hides the team's flag
 * behind a path (robots.txt gives it away). One forked process per
 * connection, one request per connection (Connection: close), the request
 * head capped at 8 KiB and read within 10 seconds.
 *
 *   GET /            the page
 *   GET /robots.txt  "Disallow: FLAG_PATH"
 *   GET FLAG_PATH    the flag (FLAG_PATH defaults to /flag)
 *   GET /healthz     "ok", for readiness probes
 *
 * Environment: PORT (default 8080), FLAG_PATH, FLAG_FILE or FLAG.
 */
#define _GNU_SOURCE
#include "challenge.h"
#include "request.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define READ_SECONDS 10

static const char *flag_path(void)
{
    const char *p = getenv("FLAG_PATH");
    return p && p[0] == '/' ? p : "/flag";
}

static void respond(int fd, int code, const char *reason, const char *type, const char *body,
                    int head_only)
{
    char head[512];
    size_t len = strlen(body);
    int n = snprintf(head, sizeof head,
                     "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
                     "Cache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\n"
                     "Connection: close\r\n\r\n",
                     code, reason, type, len);
    if (challenge_write_all(fd, head, (size_t)n) == 0 && !head_only)
        challenge_write_all(fd, body, len);
}

static void route(int fd, const struct webflag_request *req)
{
    int head_only = strcmp(req->method, "HEAD") == 0;
    char body[CHALLENGE_FLAG_MAX + 512];

    if (!head_only && strcmp(req->method, "GET") != 0) {
        respond(fd, 405, "Method Not Allowed", "text/plain", "GET only\n", 0);
    } else if (strcmp(req->path, "/") == 0) {
        respond(fd, 200, "OK", "text/html; charset=utf-8",
                "<!doctype html><title>kopc web challenge</title>"
                "<h1>Nothing to see here</h1><p>The flag is on this server. Robots know where.</p>\n",
                head_only);
    } else if (strcmp(req->path, "/robots.txt") == 0) {
        snprintf(body, sizeof body, "User-agent: *\nDisallow: %s\n", flag_path());
        respond(fd, 200, "OK", "text/plain", body, head_only);
    } else if (strcmp(req->path, "/healthz") == 0) {
        respond(fd, 200, "OK", "text/plain", "ok\n", head_only);
    } else if (strcmp(req->path, flag_path()) == 0) {
        char flag[CHALLENGE_FLAG_MAX];
        if (challenge_flag(flag, sizeof flag) < 0)
            respond(fd, 503, "Service Unavailable", "text/plain", "no flag given\n", head_only);
        else {
            snprintf(body, sizeof body, "%s\n", flag);
            respond(fd, 200, "OK", "text/plain", body, head_only);
        }
    } else {
        respond(fd, 404, "Not Found", "text/plain", "not found\n", head_only);
    }
}

static void serve_one(int fd)
{
    char buf[WEBFLAG_HEAD_MAX];
    size_t used = 0;
    struct webflag_request req;

    alarm(READ_SECONDS);
    for (;;) {
        enum webflag_parse r = webflag_parse_request(buf, used, &req);
        if (r == WEBFLAG_COMPLETE) {
            route(fd, &req);
            return;
        }
        if (r == WEBFLAG_BAD) {
            respond(fd, 400, "Bad Request", "text/plain", "bad request\n", 0);
            return;
        }
        if (r == WEBFLAG_TOO_BIG) {
            respond(fd, 431, "Request Header Fields Too Large", "text/plain", "too large\n", 0);
            return;
        }
        ssize_t n = read(fd, buf + used, sizeof buf - used);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return;
        used += (size_t)n;
    }
}

int main(void)
{
    int port = challenge_port("PORT", 8080);
    return challenge_serve(port, 64, READ_SECONDS, "HTTP/1.1 503 Busy\r\nConnection: close\r\n\r\n",
                           serve_one)
               ? 1
               : 0;
}
