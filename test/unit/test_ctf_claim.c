/*
 * test_ctf_claim.c - how a claim of a warm instance whose answer was lost is
 * settled (operators/ctf/controller/claim.c): which answers of the claim's
 * write leave the namespace to be read again (ctf_pool_claim_answer), and
 * whose a warm Namespace is as the server shows it (ctf_pool_claim_verdict).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ctf_fixture.h"
#include "controller/claim.h"

/* A claim's write: only a refusal before acting lets the namespace go unread. */
static void test_claim_answer(void **state)
{
    (void)state;
    assert_int_equal(ctf_pool_claim_answer(KOP_OK), CTF_CLAIM_DONE);
    assert_int_equal(ctf_pool_claim_answer(KOP_ENOTFOUND), CTF_CLAIM_GONE);
    assert_int_equal(ctf_pool_claim_answer(KOP_EFORBIDDEN), CTF_CLAIM_REFUSED);
    assert_int_equal(ctf_pool_claim_answer(KOP_EINVALID), CTF_CLAIM_REFUSED);
    assert_int_equal(ctf_pool_claim_answer(KOP_ETOOMANYREQUESTS), CTF_CLAIM_REFUSED);
    /* A conflict may be the claimer's own write, retried; the rest may have landed. */
    const kop_err check[] = {KOP_ECONFLICT, KOP_ETIMEOUT, KOP_ECONNECT, KOP_EIO, KOP_EINTERNAL,
                             KOP_EUNAVAILABLE, KOP_ESERVERTIMEOUT, KOP_EPARSE, KOP_EAPI, KOP_EEOF};
    for (size_t i = 0; i < sizeof check / sizeof check[0]; i++)
        assert_int_equal(ctf_pool_claim_answer(check[i]), CTF_CLAIM_CHECK);
}

/* Whose a warm Namespace is, as the server shows it. */
static void test_claim_verdict(void **state)
{
    (void)state;
    json_t *warm = parse("{'metadata':{'name':'w','resourceVersion':'5',"
                         "'labels':{'ctf.kopc.io/pool':'0123456789'}}}");
    json_t *mine = parse("{'metadata':{'name':'w','labels':{'ctf.kopc.io/pool':'0123456789',"
                         "'ctf.kopc.io/challenge':'web-team1'},"
                         "'annotations':{'ctf.kopc.io/challenge-uid':'uid-1'}}}");
    json_t *going = parse("{'metadata':{'name':'w','deletionTimestamp':'2026-01-01T00:00:00Z',"
                          "'labels':{'ctf.kopc.io/pool':'0123456789'}}}");
    json_t *mine_going = parse("{'metadata':{'name':'w','deletionTimestamp':'2026-01-01T00:00:00Z',"
                               "'labels':{'ctf.kopc.io/challenge':'web-team1'},"
                               "'annotations':{'ctf.kopc.io/challenge-uid':'uid-1'}}}");
    assert_int_equal(ctf_pool_claim_verdict(warm, "uid-1"), CTF_CLAIM_FREE);
    assert_int_equal(ctf_pool_claim_verdict(mine, "uid-1"), CTF_CLAIM_MINE);
    assert_int_equal(ctf_pool_claim_verdict(mine, "uid-2"), CTF_CLAIM_LOST);
    assert_int_equal(ctf_pool_claim_verdict(mine, NULL), CTF_CLAIM_LOST);
    assert_int_equal(ctf_pool_claim_verdict(going, "uid-1"), CTF_CLAIM_LOST);
    assert_int_equal(ctf_pool_claim_verdict(mine_going, "uid-1"), CTF_CLAIM_MINE);
    assert_int_equal(ctf_pool_claim_verdict(NULL, "uid-1"), CTF_CLAIM_LOST);
    json_decref(warm);
    json_decref(mine);
    json_decref(going);
    json_decref(mine_going);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_claim_answer),
        cmocka_unit_test(test_claim_verdict),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
