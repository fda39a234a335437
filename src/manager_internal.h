/*
 * manager_internal.h - what controllers (controller.c) ask of the manager
 * beyond kop/manager.h; not installed. The dependency runs one way: the
 * manager knows controllers only as runnables (kop_manager_add_runnable).
 */
#ifndef KOP_MANAGER_INTERNAL_H
#define KOP_MANAGER_INTERNAL_H

#include <stdbool.h>

#include "kop/manager.h"

/* kop__manager_may_reconcile: not stopping, and leading if elections are on. */
bool kop__manager_may_reconcile(kop_manager *m);

/* kop__manager_name returns the manager's name (borrowed; the field
 * manager of kop_reconcile_child's writes). NULL m: NULL. */
const char *kop__manager_name(const kop_manager *m);

#endif /* KOP_MANAGER_INTERNAL_H */
