/*
 * gateway.c - the gateway mode's host key, kept in a Secret as a dynamic
 * flag's key is (controller/flag.c reads that one): the HMAC key every
 * instance host "<id>.<domain>" derives from (core/host.h). Only the
 * operator reads it; without it nobody can compute a team's host.
 *
 * Unlike a flag key, which the definition's author supplies and may rotate,
 * the host key is the operator's own: made once (32 random bytes from
 * OpenSSL) in the system namespace when absent, and read once at start-up.
 * Every host of every team hangs on it, so it must outlive stops, starts,
 * operator restarts and upgrades: deleting the Secret changes every host
 * at the next start-up (docs/running-a-ctf.md).
 *
 * Workload: one call at start-up, before the controllers run.
 */
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include "controller/operator.h"
#include "core/host.h"

/* new_secret returns the Secret holding a fresh random key (new reference), or NULL. */
static json_t *new_secret(const char *ns, const char *name)
{
    unsigned char raw[CTF_GATEWAY_KEY_BYTES];
    char b64[4 * ((CTF_GATEWAY_KEY_BYTES + 2) / 3) + 1];
    json_t *secret = NULL;
    if (RAND_bytes(raw, sizeof raw) != 1)
        goto out;
    EVP_EncodeBlock((unsigned char *)b64, raw, (int)sizeof raw);
    secret = json_pack("{s:s, s:s, s:{s:s, s:s, s:{s:s}}, s:s, s:{s:s}}", "apiVersion", "v1",
                       "kind", "Secret", "metadata", "name", name, "namespace", ns, "labels",
                       CTF_LABEL_MANAGED_BY, CTF_MANAGED_BY, "type", "Opaque", "data",
                       CTF_GATEWAY_KEY_FIELD, b64);
    OPENSSL_cleanse(b64, sizeof b64);
out:
    OPENSSL_cleanse(raw, sizeof raw);
    return secret;
}

kop_err ctf_gateway_key_load(kop_client *c, const char *ns, const char *name, unsigned char **key,
                             size_t *len, kop_status *st)
{
    json_t *secret = NULL, *fresh = NULL;
    *key = NULL;
    *len = 0;
    kop_err err = kop_get(c, &CTF_SECRETS, ns, name, &secret, st);
    if (err == KOP_ENOTFOUND) {
        /* First start in this cluster: make it. A replica that raced us made it first. */
        fresh = new_secret(ns, name);
        err = fresh ? kop_create_object(c,
                                        &(kop_write_req){.target = {&CTF_SECRETS, ns, NULL},
                                                         .object = fresh},
                                        &secret, st)
                    : KOP_ENOMEM;
        if (err == KOP_EALREADYEXISTS)
            err = kop_get(c, &CTF_SECRETS, ns, name, &secret, st);
        if (!err)
            kop_log(KOP_LOG_INFO, "made the gateway's host key", KOP_LOG_STR("namespace", ns),
                    KOP_LOG_STR("secret", name));
    }
    if (err)
        goto out;
    err = ctf_secret_value(secret, CTF_GATEWAY_KEY_FIELD, key, len);
    if (!err && *len < CTF_HOST_KEY_MIN)
        err = KOP_EINVAL;
    if (err) {
        kop_status_setf(st, 0, NULL, "Secret %s/%s has no usable \"%s\" (%d bytes or more)", ns,
                        name, CTF_GATEWAY_KEY_FIELD, CTF_HOST_KEY_MIN);
        if (*key) {
            OPENSSL_cleanse(*key, *len);
            free(*key);
        }
        *key = NULL;
        *len = 0;
        err = KOP_EINVAL;
    }
out:
    if (fresh) {
        /* The JSON held the key's base64: wipe what jansson keeps of it. */
        json_t *data = json_object_get(fresh, "data");
        const char *v = json_string_value(json_object_get(data, CTF_GATEWAY_KEY_FIELD));
        if (v)
            OPENSSL_cleanse((char *)v, strlen(v));
    }
    json_decref(fresh);
    json_decref(secret);
    return err;
}
