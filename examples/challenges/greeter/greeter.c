/*
 * greeter.c - the sample TCP challenge: connect (nc HOST PORT) and it
 * greets you with your team's flag, then echoes what you type until you
 * send "quit", close, or stay idle for a minute.
 *
 * Environment: PORT (default 1337), CHALLENGE (the name in the greeting),
 * FLAG_FILE or FLAG (challenge.h). Every line it reads is capped at 1 KiB.
 */
#define _GNU_SOURCE
#include "challenge.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define LINE_MAX_BYTES 1024
#define IDLE_SECONDS   60

static const char *challenge_name(void)
{
    const char *name = getenv("CHALLENGE");
    return name && *name ? name : "the kopc greeter";
}

/* echo_lines answers each line with "echo: LINE" until quit or EOF. */
static void echo_lines(int fd)
{
    char line[LINE_MAX_BYTES + 1];
    size_t used = 0;

    for (;;) {
        ssize_t n = read(fd, line + used, LINE_MAX_BYTES - used);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return;
        alarm(IDLE_SECONDS); /* idle, not total: each line gives another minute */
        used += (size_t)n;
        char *nl;
        while ((nl = memchr(line, '\n', used)) != NULL) {
            size_t len = (size_t)(nl - line);
            if (len > 0 && line[len - 1] == '\r')
                len--;
            if (len == 4 && memcmp(line, "quit", 4) == 0) {
                challenge_write_all(fd, "bye\n", 4);
                return;
            }
            char out[LINE_MAX_BYTES + 16];
            int m = snprintf(out, sizeof out, "echo: %.*s\n", (int)len, line);
            if (challenge_write_all(fd, out, (size_t)m) < 0)
                return;
            used -= (size_t)(nl - line) + 1;
            memmove(line, nl + 1, used);
        }
        if (used == LINE_MAX_BYTES) { /* a line too long: say so, drop it */
            challenge_write_all(fd, "line too long\n", 14);
            used = 0;
        }
    }
}

static void greet(int fd)
{
    char flag[CHALLENGE_FLAG_MAX];
    char msg[CHALLENGE_FLAG_MAX + 256];
    int n;

    if (challenge_flag(flag, sizeof flag) < 0)
        n = snprintf(msg, sizeof msg, "Welcome to %s. No flag was given to this instance.\n",
                     challenge_name());
    else
        n = snprintf(msg, sizeof msg, "Welcome to %s. Your flag: %s\n", challenge_name(), flag);
    if (challenge_write_all(fd, msg, (size_t)n) < 0)
        return;
    echo_lines(fd);
}

int main(void)
{
    int port = challenge_port("PORT", 1337);
    return challenge_serve(port, 64, IDLE_SECONDS, "busy, try again\n", greet) ? 1 : 0;
}
