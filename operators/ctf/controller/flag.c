/*
 * flag.c - a team's flag as the cluster defines it now (core/flag.c
 * computes it): the
 * definition's static flag, or its dynamic flag from the HMAC key the
 * definition's Secret holds, read from the apiserver on each call (a key
 * rotated a moment ago counts). The reconciler hands it to the instance's
 * Secret; the API's flag check compares a submission with it. Neither
 * stores it. ctf_team_flag_owner asks, with the same key, whose flag a
 * wrong submission is (flag attribution).
 */
#include <stdlib.h>

#include <openssl/crypto.h>

#include "controller/operator.h"

/* read_key reads the dynamic flag's HMAC key into *key (owned: cleanse and free). */
static kop_err read_key(ctf_operator *op, const json_t *def, unsigned char **key, size_t *len,
                        kop_status *st)
{
    const char *name = NULL, *k = NULL;
    json_t *secret = NULL;
    kop_status gst;
    *key = NULL;
    *len = 0;
    if (!ctf_flag_secret_ref(def, &name, &k))
        return KOP_OK;
    if (!name || kop_get(kop_manager_client(op->mgr), &CTF_SECRETS, kop_meta_namespace(def), name,
                         &secret, &gst) != KOP_OK) {
        kop_status_setf(st, 0, "InvalidDefinition", "flag key Secret %s not found",
                        name ? name : "(unnamed)");
        return KOP_EINVAL;
    }
    kop_err err = ctf_secret_value(secret, k, key, len);
    json_decref(secret);
    if (err) {
        kop_status_setf(st, 0, "InvalidDefinition", "flag key Secret %s has no usable key \"%s\"",
                        name, k);
        return KOP_EINVAL;
    }
    return KOP_OK;
}

kop_err ctf_team_flag(ctf_operator *op, const json_t *def, const char *team, char **flag,
                      kop_status *st)
{
    unsigned char *key = NULL;
    size_t key_len = 0;
    kop_status fst;
    *flag = NULL;
    kop_err err = read_key(op, def, &key, &key_len, st);
    if (err)
        return err;
    err = ctf_flag(def, kop_meta_name(def), team, key, key_len, flag, &fst);
    if (key) {
        OPENSSL_cleanse(key, key_len);
        free(key);
    }
    if (err)
        kop_status_setf(st, 0, "InvalidDefinition", "flag: %s", fst.message);
    return err;
}

kop_err ctf_team_flag_owner(ctf_operator *op, const json_t *def, const char *const *teams,
                            size_t n, const char *submission, size_t *owner, kop_status *st)
{
    unsigned char *key = NULL;
    size_t key_len = 0;
    kop_status fst;
    *owner = CTF_FLAG_NO_OWNER;
    if (!ctf_flag_secret_ref(def, NULL, NULL) || n == 0)
        return KOP_OK; /* a static flag or none is never attributed: no key is read */
    kop_err err = read_key(op, def, &key, &key_len, st);
    if (err)
        return err;
    kop_status_clear(&fst);
    err = ctf_flag_owner(def, kop_meta_name(def), teams, n, submission, key, key_len, owner, &fst);
    if (key) {
        OPENSSL_cleanse(key, key_len);
        free(key);
    }
    if (err)
        kop_status_setf(st, 0, "InvalidDefinition", "flag: %s", fst.message);
    return err;
}
