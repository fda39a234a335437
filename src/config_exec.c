/*
 * config_exec.c - client-go exec credential plugins: run one, read its
 * ExecCredential.
 *
 * A kubeconfig user may name a command (aws eks get-token, gke-gcloud-auth-
 * plugin, kubelogin, ...) that prints a client.authentication.k8s.io
 * ExecCredential on stdout. We run it the way client-go does: the request
 * goes in $KUBERNETES_EXEC_INFO, the user's env entries are added to our
 * environment, the plugin's apiVersion must be the one asked for. We are
 * never interactive, so stdin is /dev/null and spec.interactive is false.
 *
 * What is ours: the plugin runs in its own process group with default
 * signal dispositions, its stdout is capped (KOP__EXEC_STDOUT_MAX) and its
 * stderr is kept only as an excerpt for error messages; at the deadline the
 * whole group is killed. Pipes are created close-on-exec so that a plugin
 * started by one thread never inherits another's descriptors.
 *
 * This file holds no state: config.c caches the answer under its lock and
 * decides when to run the plugin again.
 */
#define _GNU_SOURCE /* pipe2 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <openssl/evp.h>

#include "kop/buf.h"
#include "kop/meta.h"
#include "config_internal.h"
#include "kop/clock.h"
#include "kop_internal.h"

/* The module's error reporter (config_internal.h), by a short name. */
#define fail kop__config_fail

extern char **environ;

#define EXEC_INFO_VAR "KUBERNETES_EXEC_INFO"
#define EXCERPT_MAX   300 /* bytes of stderr quoted in an error */


void kop__exec_spec_free(kop__exec_spec *spec)
{
    if (!spec)
        return;
    free(spec->api_version);
    free(spec->command);
    for (size_t i = 0; i < spec->nargs; i++)
        free(spec->args[i]);
    free(spec->args);
    for (size_t i = 0; i < spec->nenv; i++) {
        free(spec->env[i].name);
        free(spec->env[i].value);
    }
    free(spec->env);
    free(spec->install_hint);
    free(spec);
}

void kop__exec_cred_fini(kop__exec_cred *c)
{
    free(c->token);
    free(c->cert);
    free(c->key);
    memset(c, 0, sizeof *c);
}

/* ---- the request ---------------------------------------------------------- */

/* exec_info builds the ExecCredential request put in KUBERNETES_EXEC_INFO,
 * with the cluster when the spec asks for it. Newly allocated, NULL on ENOMEM. */
static char *exec_info(const kop__exec_spec *spec, const kop__exec_cluster *cl)
{
    char *out = NULL, *ca64 = NULL;
    json_t *root = json_pack("{s:s, s:s, s:{s:b}}", "apiVersion", spec->api_version, "kind",
                             "ExecCredential", "spec", "interactive", 0);
    if (!root)
        return NULL;
    if (spec->provide_cluster_info && cl) {
        json_t *c = json_object();
        json_object_set_new(json_object_get(root, "spec"), "cluster", c);
        if (c && cl->server)
            json_object_set_new(c, "server", json_string(cl->server));
        if (c && cl->tls_server_name)
            json_object_set_new(c, "tls-server-name", json_string(cl->tls_server_name));
        if (c && cl->insecure)
            json_object_set_new(c, "insecure-skip-tls-verify", json_true());
        if (c && cl->ca && cl->ca_len <= INT32_MAX / 2) {
            ca64 = malloc((cl->ca_len + 2) / 3 * 4 + 1);
            if (!ca64)
                goto out;
            EVP_EncodeBlock((unsigned char *)ca64, (const unsigned char *)cl->ca, (int)cl->ca_len);
            json_object_set_new(c, "certificate-authority-data", json_string(ca64));
        }
    }
    out = kop_meta_dumps(root, JSON_COMPACT);
out:
    free(ca64);
    json_decref(root);
    return out;
}

/* same_name tells whether "NAME=value" entry e sets name. */
static bool same_name(const char *e, const char *name)
{
    size_t n = strlen(name);
    return strncmp(e, name, n) == 0 && e[n] == '=';
}

static void free_strv(char **v)
{
    for (size_t i = 0; v && v[i]; i++)
        free(v[i]);
    free(v);
}

/*
 * build_env returns our environment without the names the spec sets, plus
 * the spec's entries and KUBERNETES_EXEC_INFO=info; NULL-terminated, every
 * string owned (free_strv). NULL on ENOMEM.
 */
static char **build_env(const kop__exec_spec *spec, const char *info)
{
    size_t n = 0, k = 0;
    while (environ && environ[n])
        n++;
    char **v = calloc(n + spec->nenv + 2, sizeof *v);
    if (!v)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        bool replaced = same_name(environ[i], EXEC_INFO_VAR);
        for (size_t j = 0; j < spec->nenv && !replaced; j++)
            replaced = same_name(environ[i], spec->env[j].name);
        if (!replaced && !(v[k++] = strdup(environ[i])))
            goto nomem;
    }
    for (size_t j = 0; j < spec->nenv; j++) {
        if (asprintf(&v[k], "%s=%s", spec->env[j].name, spec->env[j].value) < 0) {
            v[k] = NULL;
            goto nomem;
        }
        k++;
    }
    if (asprintf(&v[k], "%s=%s", EXEC_INFO_VAR, info) < 0) {
        v[k] = NULL;
        goto nomem;
    }
    return v;
nomem:
    free_strv(v);
    return NULL;
}

/* ---- running it ----------------------------------------------------------- */

/* A running plugin and what it has said so far. */
struct child {
    pid_t pid;
    int out_fd, err_fd; /* read ends; -1 once at EOF */
    kop_buf out, err;
    bool err_truncated;
};

/*
 * spawn starts the plugin with stdin on /dev/null and stdout/stderr on
 * fresh pipes, in a new process group with signals reset to default.
 * Returns 0 or an errno value.
 */
static int spawn(const kop__exec_spec *spec, char **envp, struct child *ch)
{
    int outp[2] = {-1, -1}, errp[2] = {-1, -1}, rc;
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    sigset_t none, dfl;
    char **argv = calloc(spec->nargs + 2, sizeof *argv);
    if (!argv)
        return ENOMEM;
    argv[0] = spec->command;
    for (size_t i = 0; i < spec->nargs; i++)
        argv[i + 1] = spec->args[i];
    if (pipe2(outp, O_CLOEXEC) != 0 || pipe2(errp, O_CLOEXEC) != 0) {
        rc = errno;
        goto out;
    }
    sigemptyset(&none);
    sigfillset(&dfl);
    posix_spawn_file_actions_init(&fa);
    posix_spawnattr_init(&attr);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, outp[1], 1);
    posix_spawn_file_actions_adddup2(&fa, errp[1], 2);
    posix_spawnattr_setpgroup(&attr, 0);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setsigdefault(&attr, &dfl);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK |
                                        POSIX_SPAWN_SETSIGDEF);
    /* A bare name is looked up in our $PATH, a path is used as is. */
    if (strchr(spec->command, '/'))
        rc = posix_spawn(&ch->pid, spec->command, &fa, &attr, argv, envp);
    else
        rc = posix_spawnp(&ch->pid, spec->command, &fa, &attr, argv, envp);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    if (rc == 0) {
        ch->out_fd = outp[0];
        ch->err_fd = errp[0];
        outp[0] = errp[0] = -1;
    }
out:
    for (int i = 0; i < 2; i++) {
        if (outp[i] >= 0)
            close(outp[i]);
        if (errp[i] >= 0)
            close(errp[i]);
    }
    free(argv);
    return rc;
}

/* kill_child ends the plugin's whole process group and reaps it. */
static void kill_child(struct child *ch)
{
    int status;
    kill(-ch->pid, SIGKILL);
    while (waitpid(ch->pid, &status, 0) < 0 && errno == EINTR)
        ;
    ch->pid = -1;
}

/* drain reads what fd has: stdout is capped hard (KOP_ETOOBIG), stderr
 * keeps its first KOP__EXEC_STDERR_MAX bytes. Closes fd at EOF. */
static kop_err drain(struct child *ch, int *fd, bool is_out)
{
    char chunk[4096];
    ssize_t n = read(*fd, chunk, sizeof chunk);
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
        return KOP_OK;
    if (n <= 0) {
        close(*fd);
        *fd = -1;
        return KOP_OK;
    }
    if (is_out)
        return kop_buf_append(&ch->out, chunk, (size_t)n);
    size_t room = ch->err.max - ch->err.len;
    if ((size_t)n > room)
        ch->err_truncated = true;
    return kop_buf_append(&ch->err, chunk, (size_t)n < room ? (size_t)n : room);
}

/*
 * collect reads the plugin's output until both pipes close, then reaps it,
 * all before deadline (monotonic ms). *status is the wait status, or -1 if
 * the application reaped the child itself.
 */
static kop_err collect(struct child *ch, int64_t deadline, int *status)
{
    kop_err err;
    while (ch->out_fd >= 0 || ch->err_fd >= 0) {
        struct pollfd pf[2] = {{.fd = ch->out_fd, .events = POLLIN},
                               {.fd = ch->err_fd, .events = POLLIN}};
        int64_t left = deadline - kop_mono_ms();
        if (left <= 0)
            return KOP_ETIMEOUT;
        int n = poll(pf, 2, (int)(left > INT32_MAX ? INT32_MAX : left));
        if (n < 0 && errno != EINTR)
            return KOP_EIO;
        if (n > 0 && pf[0].revents && (err = drain(ch, &ch->out_fd, true)))
            return err;
        if (n > 0 && pf[1].revents && (err = drain(ch, &ch->err_fd, false)))
            return err;
    }
    /* Both pipes closed: the plugin is exiting; wait for it, still bounded. */
    for (;;) {
        pid_t r = waitpid(ch->pid, status, WNOHANG);
        if (r == ch->pid) {
            ch->pid = -1;
            return KOP_OK;
        }
        if (r < 0 && errno == ECHILD) { /* someone else's SIGCHLD handler reaped it */
            ch->pid = -1;
            *status = -1;
            return KOP_OK;
        }
        if (r < 0 && errno != EINTR)
            return KOP_EIO;
        if (kop_mono_ms() >= deadline)
            return KOP_ETIMEOUT;
        struct timespec ts = {0, 5 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

/* excerpt renders the captured stderr as one short printable line. */
static void excerpt(const struct child *ch, char *buf, size_t n)
{
    size_t k = 0;
    bool space = false;
    for (size_t i = 0; i < ch->err.len && k + 4 < n && k < EXCERPT_MAX; i++) {
        unsigned char c = (unsigned char)ch->err.data[i];
        if (c < 0x20 || c == 0x7f) {
            space = k > 0;
            continue;
        }
        if (space)
            buf[k++] = ' ';
        space = false;
        buf[k++] = (char)c;
    }
    if (k >= EXCERPT_MAX || ch->err_truncated)
        k += (size_t)snprintf(buf + k, n - k, "...");
    buf[k < n ? k : n - 1] = '\0';
}

kop_err kop__exec_run(const kop__exec_spec *spec, const kop__exec_cluster *cluster,
                      int timeout_ms, const char *where, kop__exec_cred *out, kop_status *st)
{
    struct child ch = {.pid = -1, .out_fd = -1, .err_fd = -1};
    char *info = NULL, **envp = NULL, msg[EXCERPT_MAX + 8];
    int status = 0, rc;
    kop_err err = KOP_OK;
    memset(out, 0, sizeof *out);
    kop_buf_init(&ch.out, KOP__EXEC_STDOUT_MAX);
    kop_buf_init(&ch.err, KOP__EXEC_STDERR_MAX);
    if (!(info = exec_info(spec, cluster)) || !(envp = build_env(spec, info))) {
        err = KOP_ENOMEM;
        goto out;
    }
    int64_t deadline = kop_mono_ms() + timeout_ms;
    if ((rc = spawn(spec, envp, &ch)) != 0) {
        err = fail(st, KOP_ECREDENTIALS, "%s.exec: cannot run %s: %s%s%s", where, spec->command,
                   strerror(rc), rc == ENOENT && spec->install_hint ? "; " : "",
                   rc == ENOENT && spec->install_hint ? spec->install_hint : "");
        goto out;
    }
    err = collect(&ch, deadline, &status);
    if (err == KOP_ETIMEOUT) {
        err = fail(st, err, "%s.exec: %s did not finish within %d ms", where, spec->command,
                   timeout_ms);
        goto out;
    }
    if (err == KOP_ETOOBIG) {
        err = fail(st, err, "%s.exec: %s wrote more than %zu KiB", where, spec->command,
                   KOP__EXEC_STDOUT_MAX >> 10);
        goto out;
    }
    if (err) {
        err = fail(st, err, "%s.exec: reading from %s: %s", where, spec->command, strerror(errno));
        goto out;
    }
    excerpt(&ch, msg, sizeof msg);
    if (status != -1 && WIFSIGNALED(status)) {
        err = fail(st, KOP_ECREDENTIALS, "%s.exec: %s was killed by signal %d%s%s", where,
                   spec->command, WTERMSIG(status), msg[0] ? ": " : "", msg);
        goto out;
    }
    if (status != -1 && WEXITSTATUS(status) != 0) {
        err = fail(st, KOP_ECREDENTIALS, "%s.exec: %s exited with status %d%s%s", where,
                   spec->command, WEXITSTATUS(status), msg[0] ? ": " : "", msg);
        goto out;
    }
    err =
        kop__exec_parse_output(kop_buf_str(&ch.out), ch.out.len, spec->api_version, where, out, st);
out:
    if (ch.pid > 0)
        kill_child(&ch);
    if (ch.out_fd >= 0)
        close(ch.out_fd);
    if (ch.err_fd >= 0)
        close(ch.err_fd);
    kop_buf_fini(&ch.out);
    kop_buf_fini(&ch.err);
    free_strv(envp);
    free(info);
    return err;
}

/* ---- the answer ----------------------------------------------------------- */

/* get_string reads an optional string member; "" counts as absent. */
static bool get_string(json_t *obj, const char *key, const char **out)
{
    json_t *v = json_object_get(obj, key);
    *out = NULL;
    if (!v || json_is_null(v))
        return true;
    if (!json_is_string(v))
        return false;
    if (json_string_length(v) > 0)
        *out = json_string_value(v);
    return true;
}

kop_err kop__exec_parse_output(const char *json, size_t len, const char *api_version,
                               const char *where, kop__exec_cred *out, kop_status *st)
{
    json_error_t je;
    json_t *root = json_loadb(json, len, JSON_REJECT_DUPLICATES, &je);
    const char *kind, *version, *token, *cert, *key, *exp;
    kop_err err = KOP_ECREDENTIALS;
    memset(out, 0, sizeof *out);
    if (!root) {
        err = fail(st, err, "%s.exec: the plugin's output is not JSON: %s", where, je.text);
        goto out;
    }
    json_t *status = json_object_get(root, "status");
    if (!json_is_object(root) || !get_string(root, "kind", &kind) || !kind ||
        strcmp(kind, "ExecCredential") != 0) {
        err = fail(st, err, "%s.exec: the plugin's output is not an ExecCredential", where);
        goto out;
    }
    if (!get_string(root, "apiVersion", &version) || !version ||
        strcmp(version, api_version) != 0) {
        err = fail(st, err, "%s.exec: the plugin answered apiVersion %.100s, expected %s", where,
                   version ? version : "(none)", api_version);
        goto out;
    }
    if (!json_is_object(status)) {
        err = fail(st, err, "%s.exec: the plugin's ExecCredential has no status", where);
        goto out;
    }
    if (!get_string(status, "token", &token) ||
        !get_string(status, "clientCertificateData", &cert) ||
        !get_string(status, "clientKeyData", &key) ||
        !get_string(status, "expirationTimestamp", &exp)) {
        err = fail(st, err, "%s.exec: the plugin's status has a field of the wrong type", where);
        goto out;
    }
    if (!token && !cert && !key) {
        err = fail(st, err, "%s.exec: the plugin returned neither a token nor a certificate",
                   where);
        goto out;
    }
    if (!cert != !key) {
        err = fail(st, err, "%s.exec: the plugin returned a certificate or a key, not both", where);
        goto out;
    }
    for (const char *c = token; c && *c; c++) {
        if ((unsigned char)*c < 0x20 || *c == 0x7f) {
            err = fail(st, err, "%s.exec: the plugin's token contains control characters", where);
            goto out;
        }
    }
    if (exp && !kop__parse_rfc3339(exp, &out->expiry)) {
        err = fail(st, err, "%s.exec: expirationTimestamp %.64s is not RFC 3339", where, exp);
        goto out;
    }
    out->has_expiry = exp != NULL;
    out->token = token ? strdup(token) : NULL;
    out->cert = cert ? strdup(cert) : NULL;
    out->key = key ? strdup(key) : NULL;
    out->cert_len = cert ? strlen(cert) : 0;
    out->key_len = key ? strlen(key) : 0;
    err = KOP_OK;
    if ((token && !out->token) || (cert && !out->cert) || (key && !out->key))
        err = KOP_ENOMEM;
out:
    if (err)
        kop__exec_cred_fini(out);
    json_decref(root);
    return err;
}

/* digits parses exactly n decimal digits at *p, advancing it. */
static bool digits(const char **p, int n, int *v)
{
    *v = 0;
    for (int i = 0; i < n; i++) {
        char c = (*p)[i];
        if (c < '0' || c > '9')
            return false;
        *v = *v * 10 + (c - '0');
    }
    *p += n;
    return true;
}

static bool expect(const char **p, const char *set)
{
    if (**p == '\0' || !strchr(set, **p))
        return false;
    (*p)++;
    return true;
}

bool kop__parse_rfc3339(const char *s, time_t *out)
{
    static const int mdays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    int y, mo, d, h, mi, sec, oh = 0, om = 0, sign = 0;
    const char *p = s;
    if (!digits(&p, 4, &y) || !expect(&p, "-") || !digits(&p, 2, &mo) || !expect(&p, "-") ||
        !digits(&p, 2, &d) || !expect(&p, "Tt ") || !digits(&p, 2, &h) || !expect(&p, ":") ||
        !digits(&p, 2, &mi) || !expect(&p, ":") || !digits(&p, 2, &sec))
        return false;
    if (*p == '.') { /* fraction: at least one digit, ignored */
        p++;
        if (*p < '0' || *p > '9')
            return false;
        while (*p >= '0' && *p <= '9')
            p++;
    }
    if (*p == 'Z' || *p == 'z') {
        p++;
    } else if (*p == '+' || *p == '-') {
        sign = *p++ == '+' ? 1 : -1;
        if (!digits(&p, 2, &oh) || !expect(&p, ":") || !digits(&p, 2, &om) || oh > 23 || om > 59)
            return false;
    } else {
        return false;
    }
    bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    if (*p || mo < 1 || mo > 12 || d < 1 || d > mdays[mo - 1] + (mo == 2 && leap) || h > 23 ||
        mi > 59 || sec > 60)
        return false;
    struct tm tm = {.tm_year = y - 1900,
                    .tm_mon = mo - 1,
                    .tm_mday = d,
                    .tm_hour = h,
                    .tm_min = mi,
                    .tm_sec = sec > 59 ? 59 : sec}; /* a leap second is its minute's end */
    *out = timegm(&tm) - (time_t)sign * (oh * 3600 + om * 60);
    return true;
}
