/*
 * torture.h - allocation failure injection for tests, as curl's torture
 * tests do: a test binary linked with
 *   -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc,--wrap=strdup
 * (kop_torture_link in test/CMakeLists.txt) sends every allocation libkop
 * makes (it is linked statically) through these wrappers, and jansson's
 * through torture_json_alloc. torture_fail_at(n) makes the n-th allocation
 * from then on fail (0: none); torture_fail_ratio(p) makes each fail with
 * probability p per mille. torture_hit() tells whether a failure was
 * injected since the last torture_fail_* call.
 */
#ifndef KOP_TEST_TORTURE_H
#define KOP_TEST_TORTURE_H

#include <stdbool.h>
#include <stddef.h>

void torture_fail_at(long n);
void torture_fail_ratio(int per_mille);
bool torture_hit(void);
/* torture_counts: allocations seen (not exempt) and failed, since the start. */
void torture_counts(long *calls, long *failures);
/*
 * torture_window(on) opens or closes the calling thread's window: with
 * torture_fail_window(p) set, only allocations inside an open window fail
 * (with probability p per mille), and a failure closes the window. A test
 * opens it where the code under test starts its work (an informer's
 * transform, at the start of applying an event) and closes it where that
 * work ends (the event handler), so that exactly that work meets failures.
 */
void torture_window(bool on);
void torture_fail_window(int per_mille);
/* torture_exempt_thread: allocations of the calling thread never fail (a test's own writes). */
void torture_exempt_thread(void);
/* torture_json_alloc routes jansson's allocations through the injection too. */
void torture_json_alloc(void);

#endif /* KOP_TEST_TORTURE_H */
