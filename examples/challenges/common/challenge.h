/*
 * challenge.h - what the sample challenges share: reading the team's flag
 * and serving TCP connections, one forked process per connection.
 *
 * The flag is read again for every connection, from the file the operator
 * mounts (FLAG_FILE, default /flag/flag) or else from the environment
 * (FLAG), so a flag that changes while the challenge runs (a warm instance
 * claimed by a team) is served at once, without a restart.
 *
 * These programs are the payload of the images the devcluster's real nodes
 * run (docs/devcluster.md); they are linked statically and need nothing but
 * the kernel.
 */
#ifndef KOPC_CHALLENGE_H
#define KOPC_CHALLENGE_H

#include <stddef.h>

/* The longest flag served; a longer file is cut here. */
#define CHALLENGE_FLAG_MAX 256

/*
 * challenge_flag copies the current flag into out (size bytes, NUL
 * terminated, trailing newlines removed) and returns its length, or -1 when
 * neither the file nor FLAG gives one (out is then "").
 */
int challenge_flag(char *out, size_t size);

/*
 * challenge_port returns the port from the environment variable name, or
 * fallback when it is unset; it exits with a message when it is not 1-65535.
 */
int challenge_port(const char *name, int fallback);

/*
 * challenge_serve listens on port (all addresses), forks handler(fd) for
 * each connection, at most max_children at once (later ones get busy_line
 * and are closed), and returns only on a fatal error. A child's connection
 * gets idle_seconds of inactivity before it is cut (SIGALRM).
 */
int challenge_serve(int port, int max_children, unsigned idle_seconds, const char *busy_line,
                    void (*handler)(int fd));

/* challenge_write_all writes all of buf to fd; 0 on success, -1 on error. */
int challenge_write_all(int fd, const char *buf, size_t len);

#endif
