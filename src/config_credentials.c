/*
 * config_credentials.c - what a request authenticates with (see
 * kop/config.h): the watched credential files and kop_config_credentials.
 *
 * Credentials are read under cfg->mu at kop_config_credentials time:
 * token, certificate and key files through a "watched file" that stats the
 * file at most once a second and re-reads it when its identity changed
 * (Kubernetes rotates projected tokens by swapping a symlink, which
 * changes the inode), and exec plugins through config_exec.c with the
 * answer cached until shortly before it expires. The workload is one
 * config per process and a credentials call per request, so the common
 * path is a lock, a clock read and a few copies.
 *
 * Invariants: a watched file's data is the last good contents, never
 * replaced by a failed read (a rotation half-done keeps serving the old
 * token); a tokenFile wins over a static token, and an exec plugin's
 * answer over both; kop_config_credentials fills out whole or leaves it
 * empty; invalidation forces one re-read and one plugin run, then clears.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "kop/buf.h"
#include "config_internal.h"
#include "kop/clock.h"
#include "kop_internal.h"

/* The module's error reporter (config_internal.h), by a short name. */
#define fail kop__config_fail

#define RECHECK_NS 1000000000LL /* token and certificate files: stat at most once a second */

static kop_err wfile_refresh(kop_config *cfg, struct kop__wfile *f, bool force, kop_status *st);

/* ---- watched files -------------------------------------------------------- */

/* kop__wfile_fini frees what f holds (f itself is the caller's). */
void kop__wfile_fini(struct kop__wfile *f)
{
    free(f->path);
    free(f->data);
}

/* kop__wfile_set starts watching path (taken over by f) and reads it once,
 * unless parse_only. */
kop_err kop__wfile_set(kop_config *cfg, struct kop__wfile *f, char **path, const char *fieldname,
                       size_t max, bool is_token, kop_status *st)
{
    f->path = *path;
    *path = NULL;
    f->field = fieldname;
    f->max = max;
    f->is_token = is_token;
    return cfg->parse_only ? KOP_OK : wfile_refresh(cfg, f, true, st);
}

/*
 * wfile_refresh brings f->data up to date: a stat at most once a second
 * (always when force), a read when the identity changed. A failure with a
 * previous good value keeps serving it (client-go's CachedFileTokenSource
 * does the same); with none it is an error naming the file and field.
 */
static kop_err wfile_refresh(kop_config *cfg, struct kop__wfile *f, bool force, kop_status *st)
{
    struct stat sb;
    kop_buf b;
    int eno = 0;
    kop_err err = KOP_OK;
    int64_t now = kop_mono_ns();
    kop_buf_init(&b, f->max);
    if (f->data && !force && now - f->checked_ns < RECHECK_NS)
        return KOP_OK;
    if (stat(f->path, &sb) != 0) {
        eno = errno;
        err = KOP_EIO;
        goto bad;
    }
    f->checked_ns = now;
    if (f->data && sb.st_dev == f->dev && sb.st_ino == f->ino && sb.st_size == f->size &&
        sb.st_mtim.tv_sec == f->mtime.tv_sec && sb.st_mtim.tv_nsec == f->mtime.tv_nsec)
        return KOP_OK;
    if ((err = kop__config_read_file(f->path, f->max, &b, &eno)))
        goto bad;
    if (f->is_token) {
        b.len = kop__config_trim_space(b.data, b.len);
        if (b.len == 0 || !kop__config_token_ok(b.data, b.len)) {
            err = KOP_ECREDENTIALS;
            goto bad;
        }
    }
    free(f->data);
    f->data = kop_buf_take(&b, &f->len);
    f->dev = sb.st_dev;
    f->ino = sb.st_ino;
    f->size = sb.st_size;
    f->mtime = sb.st_mtim;
    return f->data ? KOP_OK : KOP_ENOMEM;
bad:
    kop_buf_fini(&b);
    if (f->data) {
        f->checked_ns = now;
        return KOP_OK;
    }
    if (err == KOP_ECREDENTIALS)
        return fail(st, err, "%s.%s: %s: empty, or not a valid token", cfg->user_where, f->field,
                    f->path);
    char what[400];
    snprintf(what, sizeof what, "%s.%s", cfg->user_where, f->field);
    return kop__config_file_fail(st, err, eno, what, f->path, f->max);
}

/* ---- credentials -------------------------------------------------------- */

void kop__config_set_exec_timeout_ms(kop_config *cfg, int timeout_ms)
{
    pthread_mutex_lock(&cfg->mu);
    cfg->exec_timeout_ms = timeout_ms;
    pthread_mutex_unlock(&cfg->mu);
}

void kop_credentials_fini(kop_credentials *c)
{
    if (!c)
        return;
    free(c->token);
    free(c->cert_pem);
    free(c->key_pem);
    memset(c, 0, sizeof *c);
}

/* dup_cred replaces *dst with a copy of n bytes of src (src NULL: keep). */
static kop_err dup_cred(char **dst, size_t *dlen, const char *src, size_t n)
{
    if (!src)
        return KOP_OK;
    char *s = kop__memdup0(src, n);
    if (!s)
        return KOP_ENOMEM;
    free(*dst);
    *dst = s;
    if (dlen)
        *dlen = n;
    return KOP_OK;
}

/* run_exec refreshes the cached plugin answer if it is missing, invalidated
 * or within KOP__EXEC_REFRESH_S of its expiry. Called under cfg->mu. */
static kop_err run_exec(kop_config *cfg, bool force, kop_status *st)
{
    kop__exec_cred fresh;
    time_t now = time(NULL);
    if (cfg->exec_cached && !force &&
        (!cfg->exec_cred.has_expiry || now + KOP__EXEC_REFRESH_S < cfg->exec_cred.expiry))
        return KOP_OK;
    kop__exec_cluster cl = {.server = cfg->server,
                            .tls_server_name = cfg->tls_server_name,
                            .insecure = cfg->insecure,
                            .ca = cfg->ca,
                            .ca_len = cfg->ca_len};
    kop_err err = kop__exec_run(cfg->exec, &cl, cfg->exec_timeout_ms, cfg->user_where, &fresh, st);
    if (err)
        return err;
    kop__exec_cred_fini(&cfg->exec_cred);
    cfg->exec_cred = fresh;
    cfg->exec_cached = true;
    return KOP_OK;
}

kop_err kop_config_credentials(kop_config *cfg, kop_credentials *out, kop_status *st)
{
    kop_err err = KOP_OK;
    kop_status_clear(st);
    if (!out)
        return fail(st, KOP_EINVAL, "kop_config_credentials: out is NULL");
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&cfg->mu);
    bool force = cfg->invalidated;
    if (cfg->parse_only && (cfg->token_file.path || cfg->cert_file.path || cfg->key_file.path ||
                            cfg->exec)) {
        err = fail(st, KOP_EINVAL, "%s: configuration loaded with parse_only: its credentials "
                   "need a file or a plugin", cfg->user_where);
        goto out;
    }
    /* Token: the file, when there is one, else the static value. */
    if (cfg->token_file.path) {
        if ((err = wfile_refresh(cfg, &cfg->token_file, force, st)) ||
            (err = dup_cred(&out->token, NULL, cfg->token_file.data, cfg->token_file.len)))
            goto out;
    } else if (cfg->token &&
               (err = dup_cred(&out->token, NULL, cfg->token, strlen(cfg->token)))) {
        goto out;
    }
    if (cfg->cert_file.path && (err = wfile_refresh(cfg, &cfg->cert_file, force, st)))
        goto out;
    if (cfg->key_file.path && (err = wfile_refresh(cfg, &cfg->key_file, force, st)))
        goto out;
    if ((err = dup_cred(&out->cert_pem, &out->cert_len,
                        cfg->cert_data ? cfg->cert_data : cfg->cert_file.data,
                        cfg->cert_data ? cfg->cert_len : cfg->cert_file.len)) ||
        (err = dup_cred(&out->key_pem, &out->key_len,
                        cfg->key_data ? cfg->key_data : cfg->key_file.data,
                        cfg->key_data ? cfg->key_len : cfg->key_file.len)))
        goto out;
    /* An exec plugin's answer overrides what it provides. */
    if (cfg->exec) {
        const kop__exec_cred *c = &cfg->exec_cred;
        if ((err = run_exec(cfg, force, st)) ||
            (err = dup_cred(&out->token, NULL, c->token, c->token ? strlen(c->token) : 0)) ||
            (err = dup_cred(&out->cert_pem, &out->cert_len, c->cert, c->cert_len)) ||
            (err = dup_cred(&out->key_pem, &out->key_len, c->key, c->key_len)))
            goto out;
    }
    cfg->invalidated = false;
out:
    pthread_mutex_unlock(&cfg->mu);
    if (err)
        kop_credentials_fini(out);
    return err;
}

void kop_config_invalidate_credentials(kop_config *cfg)
{
    pthread_mutex_lock(&cfg->mu);
    cfg->invalidated = true;
    pthread_mutex_unlock(&cfg->mu);
}

