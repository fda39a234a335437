/*
 * kop/kop.h - libkop, a Kubernetes operator runtime in C.
 *
 * Include this one header to get every module. Each module also has a
 * header of its own under kop/, for code that wants only part of it.
 */
#ifndef KOP_KOP_H
#define KOP_KOP_H

#include "kop/common.h"
#include "kop/err.h"
#include "kop/buf.h"
#include "kop/clock.h"
#include "kop/client.h"
#include "kop/config.h"
#include "kop/leader.h"
#include "kop/metrics.h"
#include "kop/workqueue.h"
#include "kop/informer.h"
#include "kop/controller.h"
#include "kop/manager.h"
#include "kop/meta.h"
#include "kop/log.h"
#include "kop/events.h"
#include "kop/webhook.h"
#include "kop/ctrlutil.h"
#include "kop/program.h"

#endif /* KOP_KOP_H */
