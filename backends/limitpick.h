/* limitpick.h - one claim's view of the limits (base/limit.h), shared by the
 * engines: the running jobs and token buckets the claim read in its
 * transaction, which candidates it may take, what it must skip next time
 * round and the buckets to write back. Pure C, no database. Uses
 * limit.h. */
#ifndef JR_LIMITPICK_H
#define JR_LIMITPICK_H

#include "base/limit.h"

typedef struct jr_lpick jr_lpick;

/* Returns a new pick over l[0..n) (borrowed) at time now, or NULL when
 * out of memory. Free with jr_lpick_free(). */
jr_lpick *jr_lpick_new(const jr_limit *l, int n, double now);
void      jr_lpick_free(jr_lpick *p);   /* NULL is a no-op */
/* Whether a job of name in queue is under any limit. */
int       jr_lpick_limited(const jr_lpick *p, const char *name,
                           const char *queue);
/* Counts n running jobs of name, queue and key (NULL: unkeyed). -1 when
 * out of memory. */
int       jr_lpick_running(jr_lpick *p, const char *name, const char *queue,
                           const char *key, long n);
/* A stored bucket of scope ("" key: the scope's own) with tokens at
 * time at; refilled to now. Unknown scopes are ignored. */
int       jr_lpick_bucket(jr_lpick *p, const char *scope, const char *key,
                          double tokens, double at);
/* Calls cb with the scope and key of each per-key bucket with a rate that
 * a job of name, queue and key takes from and that was not read yet,
 * then counts it read: the engine reads that one row and hands it to
 * jr_lpick_bucket (no row: a full bucket). So a claim reads the buckets
 * of the keys it meets, not every bucket. 0; -1 when out of memory; -2
 * when cb returned < 0 (its error stands). */
typedef int (*jr_lpick_need_cb)(const char *scope, const char *key,
                                void *arg);
int       jr_lpick_need(jr_lpick *p, const char *name, const char *queue,
                        const char *key, jr_lpick_need_cb cb, void *arg);
/* Calls cb with the scope and per-key rate of each limit that has one,
 * for the claim's SQL to skip the keys whose stored bucket is short of a
 * token. */
typedef int (*jr_lpick_rate_cb)(const char *scope, double rate, void *arg);
int       jr_lpick_key_rates(const jr_lpick *p, jr_lpick_rate_cb cb,
                             void *arg);
/* Whether a queue's own limits have room (0: skip the queue). */
int       jr_lpick_queue_open(jr_lpick *p, const char *queue);
/* Takes a job of name, queue, key if every limit on it has room: counts
 * it and returns 1; else 0 (and notes when a token comes); -1 when out of
 * memory. */
int       jr_lpick_take(jr_lpick *p, const char *name, const char *queue,
                        const char *key);
/* Calls cb for each scope or scope and key with no room now: queue is
 * 1 for "queue:" scopes, target the job name or queue, key NULL for the
 * whole scope. */
typedef void (*jr_lpick_blocked_cb)(int queue, const char *target,
                                    const char *key, void *arg);
void      jr_lpick_blocked(const jr_lpick *p, jr_lpick_blocked_cb cb,
                           void *arg);
/* Calls cb for each bucket the claim took tokens from: scope, key (""
 * for the scope's own), tokens left at now. */
typedef int (*jr_lpick_bucket_cb)(const char *scope, const char *key,
                                  double tokens, double now, void *arg);
int       jr_lpick_dirty(const jr_lpick *p, jr_lpick_bucket_cb cb,
                         void *arg);
/* The time the pick was made at. */
double    jr_lpick_now(const jr_lpick *p);
/* The earliest time a bucket that refused a job has a token again; 0 if
 * none refused. */
double    jr_lpick_next(const jr_lpick *p);

/* Builds [...] JSON strings of blocked lists for SQL: the job names that
 * are blocked whole, the queues, and "n<name>\x1f<key>" / "q<queue>\x1f<key>"
 * pairs. Returns a new string, free with free(); NULL when out of memory.
 * which: 'n' names, 'q' queues, 'p' pairs. json 1: a JSON array; 0: a
 * PostgreSQL array literal. */
char     *jr_lpick_list(const jr_lpick *p, int which, int json);

/* jr_lpick_take for a job of cost units (docs/limits.md, "Limits by
 * cost"; 1 for a job without one): it takes cost slots of each
 * concurrency cap (jr_lpick_running counts the running jobs' costs) and
 * cost tokens of each bucket, and fits only when all have that much. */
int       jr_lpick_take_cost(jr_lpick *p, const char *name,
                             const char *queue, const char *key,
                             long cost);
/* {"scope": room, ...} of the scopes whose own cap or bucket has room
 * for less than JR_COST_MAX now (the slots or whole tokens left), for
 * the claim's SQL to skip the jobs whose cost is over one of theirs (a
 * cost the claim could not take: without the skip, expensive jobs at the
 * front of a queue hide the cheaper ones behind them pass after pass).
 * A new string, free with free(); NULL when out of memory. */
char     *jr_lpick_rooms(const jr_lpick *p);

/* 1 when one of l[0..n) caps running jobs (its own or a key's
 * concurrency): only then are the running jobs read for jr_lpick_running
 * (a claim under a fair queue or rates alone reads none). */
int       jr_lpick_caps_running(const jr_limit *l, int n);

#endif
