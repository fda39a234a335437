/*
 * manager_internal.h - what the manager (manager.c) and its controllers
 * (controller.c) share; not installed.
 */
#ifndef KOP_MANAGER_INTERNAL_H
#define KOP_MANAGER_INTERNAL_H

#include <stdbool.h>
#include <time.h>

#include "kop/controller.h"
#include "kop/manager.h"
#include "kop/metrics.h"

/* Reconcile metrics, registered once per manager, labelled by controller. */
typedef struct kop__reconcile_metrics {
    kop_metric *total;       /* controller_runtime_reconcile_total{controller,result} */
    kop_metric *errors;      /* controller_runtime_reconcile_errors_total{controller} */
    kop_metric *time;        /* controller_runtime_reconcile_time_seconds{controller} */
    kop_metric *workers;     /* controller_runtime_active_workers{controller} */
    kop_metric *max_workers; /* controller_runtime_max_concurrent_reconciles{controller} */
} kop__reconcile_metrics;

/* kop__manager_reconcile_metrics returns the manager's reconcile families. */
const kop__reconcile_metrics *kop__manager_reconcile_metrics(kop_manager *m);

/* kop__manager_add_controller hands ownership of c to m. */
KOP_NODISCARD kop_err kop__manager_add_controller(kop_manager *m, kop_controller *c);

/* kop__manager_may_reconcile: not stopping, and leading if elections are on. */
bool kop__manager_may_reconcile(kop_manager *m);

/* Controller lifecycle, driven by the manager. */
KOP_NODISCARD kop_err kop__controller_start(kop_controller *c);
void kop__controller_shutdown(kop_controller *c); /* stop taking work, wake the workers */
/* Wait for the workers to return, until deadline (CLOCK_REALTIME; NULL: no
 * limit). Returns false when some are still running at the deadline. */
bool kop__controller_join(kop_controller *c, const struct timespec *deadline);
void kop__controller_free(kop_controller *c);

#endif /* KOP_MANAGER_INTERNAL_H */
