/*
 * core/flag.h - a team's flag (flag.c): static, or derived with HMAC-SHA256
 * from a key the definition's Secret holds, and how pods see it. Pure: the
 * caller reads the key (controller/flag.c, ctf_team_flag).
 *
 * The flag is a secret: it is written only into the Secret "flag" (base64
 * data) and reaches the pods through a secretKeyRef and a secret volume;
 * no label, annotation, env literal or message ever carries it.
 */
#ifndef CTF_CORE_FLAG_H
#define CTF_CORE_FLAG_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include <kop/err.h>

/* The Secret holding the flag, its key, and where pods see it. */
#define CTF_FLAG_SECRET     "flag"
#define CTF_FLAG_KEY        "flag"
#define CTF_FLAG_ENV        "FLAG"
#define CTF_FLAG_MOUNT_PATH "/flag"

/* ctf_flag_delivery: how the pods see the flag Secret. */
typedef enum ctf_flag_delivery {
    CTF_FLAG_NONE = 0,         /* no flag: nothing injected */
    CTF_FLAG_ENV_AND_FILE = 1, /* env FLAG and the file /flag/flag */
    CTF_FLAG_FILE = 2,         /* the file only: it changes under a running pod, env cannot */
} ctf_flag_delivery;

/*
 * ctf_flag_secret_ref tells whether the definition's flag is dynamic and,
 * if so, sets *name and *key (borrowed from def; key defaults to "key") to
 * the Secret holding the HMAC key, in the definition's namespace.
 */
bool ctf_flag_secret_ref(const json_t *def, const char **name, const char **key);

/*
 * ctf_secret_value decodes data[key] of a Secret into *out (malloc'ed,
 * caller cleanses and frees; NUL-terminated beyond *len for convenience).
 * KOP_ENOTFOUND when the Secret has no such key, KOP_EPARSE when it is not
 * base64, KOP_ENOMEM.
 */
KOP_NODISCARD kop_err ctf_secret_value(const json_t *secret, const char *key, unsigned char **out,
                                       size_t *len);

/*
 * ctf_flag computes the flag of a team's instance into *out (malloc'ed,
 * caller frees): spec.flag.static as is, or for spec.flag.dynamic
 * prefix (default "flag{") + the first 32 hex digits of
 * HMAC-SHA256(key, "<definition_name>:<team>") + suffix (default "}"). The
 * caller reads the key bytes from the Secret named by ctf_flag_secret_ref.
 * A definition without a flag gives KOP_OK and *out NULL. KOP_EINVAL
 * (explained in st) for a dynamic flag without a key or bad arguments,
 * KOP_ENOMEM when memory or OpenSSL fails.
 */
KOP_NODISCARD kop_err ctf_flag(const json_t *def, const char *definition_name, const char *team,
                               const unsigned char *key, size_t key_len, char **out,
                               kop_status *st);

/* CTF_FLAG_NO_OWNER: ctf_flag_owner found no team whose flag the submission is. */
#define CTF_FLAG_NO_OWNER ((size_t)-1)

/*
 * ctf_flag_owner tells whose dynamic flag of def a submission is, for flag
 * attribution: *owner is the index in teams[0..n) of the team whose flag
 * submission equals, or CTF_FLAG_NO_OWNER. Only a dynamic flag is ever
 * attributed: a static flag (the same for every team) or none gives KOP_OK
 * and no owner. Every team's flag is computed (HMAC-SHA256, on the stack,
 * cleansed) and compared in constant time, with no early exit, so the time
 * depends on n and not on which team matched; a submission whose length no
 * dynamic flag of def has matches nobody, and then no HMAC is computed.
 * Errors as ctf_flag (KOP_EINVAL without a key, KOP_ENOMEM).
 */
KOP_NODISCARD kop_err ctf_flag_owner(const json_t *def, const char *definition_name,
                                     const char *const *teams, size_t n, const char *submission,
                                     const unsigned char *key, size_t key_len, size_t *owner,
                                     kop_status *st);

#endif /* CTF_CORE_FLAG_H */
