/*
 * challenge.c - the flag and the forking TCP server of the sample
 * challenges (challenge.h). One process per connection keeps a crash or a
 * hang of one participant's session away from the others; the cap on
 * children keeps a flood from exhausting the pod's pids limit.
 */
#define _GNU_SOURCE
#include "challenge.h"

#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile sig_atomic_t children;

static void on_child(int sig)
{
    (void)sig;
    int saved = errno;
    while (waitpid(-1, NULL, WNOHANG) > 0)
        children--;
    errno = saved;
}

static void on_term(int sig)
{
    (void)sig;
    _exit(0);
}

static void strip_newlines(char *s, size_t *len)
{
    while (*len > 0 && (s[*len - 1] == '\n' || s[*len - 1] == '\r'))
        s[--*len] = '\0';
}

int challenge_flag(char *out, size_t size)
{
    const char *path = getenv("FLAG_FILE");
    size_t len = 0;

    if (size == 0)
        return -1;
    out[0] = '\0';
    FILE *f = fopen(path && *path ? path : "/flag/flag", "r");
    if (f) {
        len = fread(out, 1, size - 1, f);
        fclose(f);
        out[len] = '\0';
        strip_newlines(out, &len);
        if (len > 0)
            return (int)len;
    }
    const char *env = getenv("FLAG");
    if (!env || !*env)
        return -1;
    len = strnlen(env, size - 1);
    memcpy(out, env, len);
    out[len] = '\0';
    strip_newlines(out, &len);
    return len > 0 ? (int)len : -1;
}

int challenge_port(const char *name, int fallback)
{
    const char *v = getenv(name);
    if (!v || !*v)
        return fallback;
    char *end = NULL;
    long port = strtol(v, &end, 10);
    if (*end || port < 1 || port > 65535) {
        fprintf(stderr, "%s=%s: want a port 1-65535\n", name, v);
        exit(2);
    }
    return (int)port;
}

int challenge_write_all(int fd, const char *buf, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, buf, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        buf += n;
        len -= (size_t)n;
    }
    return 0;
}

static int listen_on(int port)
{
    int fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1, zero = 0;
    struct sockaddr_in6 addr = {.sin6_family = AF_INET6, .sin6_port = htons((uint16_t)port),
                                .sin6_addr = in6addr_any};

    if (fd < 0) { /* no IPv6 in this kernel: IPv4 only */
        struct sockaddr_in a4 = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                                 .sin_addr.s_addr = htonl(INADDR_ANY)};
        fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) ||
            bind(fd, (struct sockaddr *)&a4, sizeof a4) || listen(fd, 128))
            return -1;
        return fd;
    }
    setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) ||
        bind(fd, (struct sockaddr *)&addr, sizeof addr) || listen(fd, 128)) {
        close(fd);
        return -1;
    }
    return fd;
}

int challenge_serve(int port, int max_children, unsigned idle_seconds, const char *busy_line,
                    void (*handler)(int fd))
{
    struct sigaction sa = {.sa_handler = on_child, .sa_flags = SA_RESTART | SA_NOCLDSTOP};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGCHLD, &sa, NULL);
    signal(SIGTERM, on_term);
    signal(SIGPIPE, SIG_IGN);

    int lfd = listen_on(port);
    if (lfd < 0) {
        perror("listen");
        return -1;
    }
    fprintf(stderr, "listening on port %d\n", port);
    for (;;) {
        int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED || errno == EMFILE)
                continue;
            perror("accept");
            return -1;
        }
        if (children >= max_children) {
            challenge_write_all(fd, busy_line, strlen(busy_line));
            close(fd);
            continue;
        }
        pid_t pid = fork();
        if (pid == 0) {
            close(lfd);
            signal(SIGCHLD, SIG_DFL);
            signal(SIGALRM, on_term);
            alarm(idle_seconds);
            handler(fd);
            close(fd);
            _exit(0);
        }
        if (pid > 0)
            children++;
        close(fd);
    }
}
