/*
 * client_stream.c - watch streams: kop_watch_open / _next / _cancel / _free.
 *
 * A watch is one long GET (?watch=true) whose body is a line-delimited
 * stream of events. libcurl pushes bytes through a write callback, while
 * callers want to pull one event at a time, so each watch drives its own
 * multi handle: kop_watch_next decodes what is buffered and, when nothing
 * is, runs the transfer until more bytes, the end, or a cancel arrive. A
 * watch holds its connection for its whole life, so it has an easy handle
 * of its own rather than one from the client's pool.
 *
 * Bytes go into a kop__watch_decoder capped at max_watch_line per event; an
 * oversized event aborts the transfer with KOP_ETOOBIG. Error responses
 * (non-200) are collected into a small capped buffer and decoded as a
 * Status. ERROR events end the stream and are returned as errors (410 Gone
 * means relist). kop_watch_cancel may be called from any thread: it sets a
 * flag and wakes the multi poll.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "client_internal.h"
#include "client_request_internal.h"
#include "kop/config.h"
#include "kop/clock.h"
#include "kop_internal.h"

#define ERROR_BODY_MAX (64 << 10)
#define POLL_MS        1000

struct kop_watch {
    kop_client *client;
    CURL *easy;
    CURLM *multi;
    struct curl_slist *headers;
    char errbuf[CURL_ERROR_SIZE];
    kop_buf url;
    kop__watch_decoder dec;
    kop_buf error_body;  /* body of a non-200 answer */
    kop_err write_err;   /* set by the write callback to abort */
    long code;           /* HTTP status once headers arrived */
    bool transfer_done;
    CURLcode result;     /* of the transfer, once done */
    bool finished;       /* a non-OK return happened: only KOP_EEOF from now */
    atomic_bool canceled;
};

static size_t on_data(char *data, size_t size, size_t n, void *user)
{
    kop_watch *w = user;
    size_t len = size * n;
    if (w->code == 0)
        curl_easy_getinfo(w->easy, CURLINFO_RESPONSE_CODE, &w->code);
    kop_err err = w->code == 200 ? kop__watch_decoder_feed(&w->dec, data, len)
                                 : kop_buf_append(&w->error_body, data, len);
    if (err && w->code != 200)
        return len; /* an error body past its cap is only cut short */
    if (err) {
        w->write_err = err;
        return 0;
    }
    return len;
}

/* pump runs the transfer for up to POLL_MS; sets transfer_done at the end. */
static kop_err pump(kop_watch *w)
{
    int running = 0;
    CURLMcode mc = curl_multi_perform(w->multi, &running);
    if (mc == CURLM_OK && running)
        mc = curl_multi_poll(w->multi, NULL, 0, POLL_MS, NULL);
    if (mc == CURLM_OK)
        mc = curl_multi_perform(w->multi, &running);
    if (mc != CURLM_OK)
        return mc == CURLM_OUT_OF_MEMORY ? KOP_ENOMEM : KOP_EIO;
    if (w->code == 0)
        curl_easy_getinfo(w->easy, CURLINFO_RESPONSE_CODE, &w->code);
    int left = 0;
    CURLMsg *msg;
    while ((msg = curl_multi_info_read(w->multi, &left))) {
        if (msg->msg == CURLMSG_DONE) {
            w->transfer_done = true;
            w->result = msg->data.result;
        }
    }
    return KOP_OK;
}

/*
 * gone_if_expired: a watch from a compacted version gets 410 with reason
 * Gone from the watch cache and Expired from etcd; both mean "relist", so a
 * watch reports both as KOP_EGONE (client-go's IsResourceExpired does the
 * same). Lists keep KOP_EEXPIRED for an expired continue token.
 */
static kop_err gone_if_expired(kop_err err)
{
    return err == KOP_EEXPIRED ? KOP_EGONE : err;
}

/* transfer_error explains how the transfer ended, when it did not end well. */
static kop_err transfer_error(kop_watch *w, kop_status *st)
{
    if (w->write_err == KOP_ETOOBIG) {
        kop_status_setf(st, 200, NULL, "watch %s: an event exceeds the %zu-byte cap",
                        kop_buf_str(&w->url), kop__client_opts(w->client)->max_watch_line);
        return KOP_ETOOBIG;
    }
    if (w->write_err)
        return w->write_err;
    if (w->code != 0 && w->code != 200)
        return gone_if_expired(
            kop__status_decode((int)w->code, w->error_body.data, w->error_body.len, st));
    if (w->result != CURLE_OK) {
        kop_status_setf(st, 0, NULL, "watch %s: %s", kop_buf_str(&w->url),
                        w->errbuf[0] ? w->errbuf : curl_easy_strerror(w->result));
        return w->result == CURLE_OPERATION_TIMEDOUT ? KOP_ETIMEOUT : KOP_ECONNECT;
    }
    return KOP_EEOF;
}

static kop_err build_url(kop_watch *w, const kop_resource *r, const char *ns,
                         const kop_watch_opts *o, kop_status *st)
{
    char timeout[32] = "";
    if (o->timeout_seconds > 0)
        snprintf(timeout, sizeof timeout, "%ld", o->timeout_seconds);
    kop__query_param p[] = {
        {"watch", "true"},
        {"resourceVersion", o->resource_version},
        {"labelSelector", o->label_selector},
        {"fieldSelector", o->field_selector},
        {"timeoutSeconds", timeout[0] ? timeout : NULL},
        {"allowWatchBookmarks", o->allow_bookmarks ? "true" : NULL},
    };
    return kop__url_build(&w->url, kop_config_server(kop_client_config(w->client)), r,
                          r->namespaced ? ns : NULL, NULL, NULL, p, KOP_ARRAY_LEN(p), st);
}

/* connect starts the transfer and runs it until the response status is known. */
static kop_err connect_stream(kop_watch *w, long timeout_seconds, kop_status *st)
{
    kop_err err = kop__client_setup(w->client, w->easy, kop_buf_str(&w->url), NULL, &w->headers,
                                    w->errbuf, st);
    if (err)
        return err;
    curl_easy_setopt(w->easy, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(w->easy, CURLOPT_WRITEDATA, w);
    curl_easy_setopt(w->easy, CURLOPT_TCP_KEEPIDLE, 30L);
    curl_easy_setopt(w->easy, CURLOPT_TCP_KEEPINTVL, 15L);
    if (timeout_seconds > 0) /* the server ends it; this catches a dead peer */
        curl_easy_setopt(w->easy, CURLOPT_TIMEOUT_MS, (timeout_seconds + 60) * 1000L);
    if (curl_multi_add_handle(w->multi, w->easy) != CURLM_OK)
        return KOP_ENOMEM;
    long limit_ms = kop__client_opts(w->client)->timeout_ms;
    int64_t start_ms = kop_mono_ms();
    while (w->code == 0 && !w->transfer_done) {
        if (atomic_load(&w->canceled))
            return KOP_ECANCELED;
        long waited_ms = (long)(kop_mono_ms() - start_ms);
        if (waited_ms >= limit_ms) {
            kop_status_setf(st, 0, NULL, "watch %s: no response in %ld ms", kop_buf_str(&w->url),
                            limit_ms);
            return KOP_ETIMEOUT;
        }
        err = pump(w);
        if (err)
            return err;
    }
    const kop_client_opts *co = kop__client_opts(w->client);
    if (co->on_response)
        co->on_response("WATCH", (int)w->code, co->on_response_user);
    if (w->code != 200) {
        while (!w->transfer_done && (err = pump(w)) == KOP_OK)
            ;
        return err ? err : transfer_error(w, st);
    }
    return KOP_OK;
}

kop_err kop_watch_open(kop_client *c, const kop_resource *r, const char *ns,
                       const kop_watch_opts *opts, kop_watch **out, kop_status *st)
{
    kop_err err = KOP_OK;
    kop_watch_opts o = opts ? *opts : (kop_watch_opts){0};
    kop_watch *w = calloc(1, sizeof *w);

    *out = NULL;
    kop_status_clear(st);
    if (!w)
        return KOP_ENOMEM;
    w->client = c;
    atomic_init(&w->canceled, false);
    kop_buf_init(&w->url, KOP__URL_MAX);
    kop_buf_init(&w->error_body, ERROR_BODY_MAX);
    kop__watch_decoder_init(&w->dec, kop__client_opts(c)->max_watch_line);
    w->dec.drop_managed_fields = o.drop_managed_fields;
    w->easy = curl_easy_init(); /* not pooled: it lives as long as the stream */
    w->multi = curl_multi_init();
    if (!w->easy || !w->multi) {
        err = KOP_ENOMEM;
        goto out;
    }
    err = build_url(w, r, ns, &o, st);
    if (err)
        goto out;
    kop__client_throttle(c);
    err = connect_stream(w, o.timeout_seconds, st);
    if (err)
        goto out;
    *out = w;
    w = NULL;
out:
    kop_watch_free(w);
    return err;
}

/* finish marks the stream over and passes err through. */
static kop_err finish(kop_watch *w, kop_err err)
{
    w->finished = true;
    return err;
}

kop_err kop_watch_next(kop_watch *w, kop_watch_event *ev, kop_status *st)
{
    ev->type = 0;
    ev->object = NULL;
    kop_status_clear(st);
    if (w->finished)
        return KOP_EEOF;
    for (;;) {
        if (atomic_load(&w->canceled))
            return finish(w, KOP_ECANCELED);
        bool got = false;
        kop_err err = kop__watch_decoder_next(&w->dec, ev, &got, st);
        if (err == KOP_EPARSE)
            return finish(w, err); /* the stream cannot be trusted past a bad line */
        if (err)
            return finish(w, err);
        if (got && ev->type == KOP_WATCH_ERROR) {
            err = gone_if_expired(kop__status_from_json(ev->object, st));
            kop_watch_event_fini(ev);
            return finish(w, err);
        }
        if (got)
            return KOP_OK;
        if (w->transfer_done)
            return finish(w, transfer_error(w, st));
        err = pump(w);
        if (err)
            return finish(w, err);
    }
}

void kop_watch_cancel(kop_watch *w)
{
    if (!w)
        return;
    atomic_store(&w->canceled, true);
    if (w->multi)
        curl_multi_wakeup(w->multi);
}

void kop_watch_free(kop_watch *w)
{
    if (!w)
        return;
    if (w->multi && w->easy)
        curl_multi_remove_handle(w->multi, w->easy);
    if (w->easy)
        curl_easy_cleanup(w->easy);
    if (w->multi)
        curl_multi_cleanup(w->multi);
    curl_slist_free_all(w->headers);
    kop__watch_decoder_fini(&w->dec);
    kop_buf_fini(&w->error_body);
    kop_buf_fini(&w->url);
    free(w);
}
