/* ranges.h - the ranges of the settings a config (config/) or a handler
 * file (lua/hopts.c) may set: constants only, no functions, so that
 * both layers check against one list. Uses retry.h (the backoff cap). */
#ifndef JR_RANGES_H
#define JR_RANGES_H

#include "base/retry.h"

/* The ranges of the durations (seconds) and counts a config or a handler
 * file may set; outside them is an error naming the key and the range.
 * Documented in jobrunner.lua.example, docs/configuration.md and
 * jobrunner(1). */
#define JR_RANGE_TIMEOUT_MIN   0.001    /* defaults.timeout, handler timeout */
#define JR_RANGE_TIMEOUT_MAX   604800.0 /* 7 days */
#define JR_RANGE_BACKOFF_MAX   JR_BACKOFF_CAP /* defaults.backoff, handler's */
#define JR_RANGE_RETRIES_MAX   1000000  /* defaults.max_retries, handler's */
#define JR_RANGE_LEASE_MIN     1.0
#define JR_RANGE_LEASE_MAX     86400.0
#define JR_RANGE_POLL_MIN      0.01
#define JR_RANGE_POLL_MAX      3600.0
#define JR_RANGE_DAY           86400.0  /* shutdown, tick, idle, wait_for_db */
#define JR_RANGE_TICK_MIN      0.01     /* tick_interval, idle_timeout */
#define JR_RANGE_BUSY_MAX      3600.0
#define JR_RANGE_LOAD_MIN      0.1      /* load_timeout */
#define JR_RANGE_LOAD_MAX      3600.0
#define JR_RANGE_INFLIGHT_MAX  10000    /* defaults.inflight, handler's */
#define JR_RANGE_RETENTION_MAX 315360000.0 /* retention: 10 years */

#endif
