/*
 * flag.c - POST .../instances/{challenge}/flag: a CTF platform's
 * backend asks whether a submission is the team's flag (docs/api.md,
 * docs/ctfd.md). Only the admin token may ask, so the question never
 * reaches a participant's browser; the answer is a yes or no, never the
 * flag. It needs no running instance (a team may submit after stopping
 * one), and the flag is computed afresh from the definition and its key,
 * then compared in constant time and cleansed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "api/internal.h"

enum MHD_Result ctf_api_check_flag(ctf_api *api, mhd_conn *conn, request *rq,
                                   const char *submission)
{
    char msg[CTF_CHALLENGE_SIZE + 96], *flag = NULL;
    kop_status st;
    enum MHD_Result ret;
    kop_status_clear(&st);

    json_t *def = ctf_api_definition(api, rq->route.challenge);
    if (!def) {
        snprintf(msg, sizeof msg, "no challenge named %s", rq->route.challenge);
        return ctf_api_send_error(api, conn, rq, 404, "NotFound", msg, NULL);
    }
    kop_err err = ctf_team_flag(api->op, def, rq->route.team, &flag, &st);
    json_decref(def);
    if (err == KOP_ENOMEM)
        return ctf_api_send_error(api, conn, rq, 500, "Internal", "out of memory", NULL);
    if (err)
        return ctf_api_send_error(api, conn, rq, 409, "InvalidDefinition", st.message, NULL);
    if (!flag) {
        snprintf(msg, sizeof msg, "%s has no flag the operator knows; check it in the platform",
                 rq->route.challenge);
        return ctf_api_send_error(api, conn, rq, 409, "NoFlag", msg, NULL);
    }
    bool correct =
        ctf_api_token_equal(submission, (const unsigned char *)flag, strlen(flag));
    OPENSSL_cleanse(flag, strlen(flag));
    free(flag);
    json_t *v = json_pack("{s:b}", "correct", correct);
    ret = v ? ctf_api_send_json(api, conn, rq, 200, v, NULL)
            : ctf_api_send_error(api, conn, rq, 500, "Internal", "out of memory", NULL);
    json_decref(v);
    return ret;
}
