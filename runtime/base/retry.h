/* retry.h - the one retry policy: how many retries a job has (the job's
 * max_retries, else its handler's, else the config's), whether a failure
 * is a retry or death, and the delay before the retry (the handler's
 * backoff, else the config's, else the default schedule, capped at
 * JR_BACKOFF_CAP). The worker, the master's dead-worker path and the claim
 * of an expired job all decide here. Uses job.h. */
#ifndef JR_RETRY_H
#define JR_RETRY_H

#include "base/job.h"

#define JR_BACKOFF_CAP      604800.0    /* longest retry delay: 7 days */
#define JR_RETRY_UNRESOLVED (-1.0)      /* delay the master still chooses */

/* A backoff the policy may ask for: seconds for job j (max_retries is the
 * one in force) after error, or < 0 when there is none or it failed. */
typedef double (*jr_retry_fn)(void *arg, const jr_job *j, int max_retries,
                              const char *error);

/* What a decision needs. Strings and the job are borrowed. */
typedef struct jr_retry_in {
    const jr_job *job;
    const char   *error;            /* why it failed */
    int           handler_max;      /* handler's max_retries; -1: unset */
    int           config_max;       /* defaults.max_retries */
    double        handler_backoff;  /* handler's seconds; -1: unset */
    jr_retry_fn   handler_fn;       /* handler's backoff function, or NULL */
    void         *handler_arg;
    jr_retry_fn   config_fn;        /* the config's backoff (function or
                                       number), or NULL: the worker, which
                                       leaves it to the master */
    void         *config_arg;
} jr_retry_in;

/* The max_retries in force for job j: the job's, else the handler's
 * (handler: -1 when not set or unknown), else the config's default. */
int    jr_retry_max(const jr_job *j, int handler, int dflt);

/* Decides a failure: out->kind becomes JR_DEAD when no retries are left,
 * else JR_RETRY with out->delay from jr_retry_delay. Returns out->kind. */
int    jr_retry_decide(const jr_retry_in *in, jr_result *out);

/* The delay before the next attempt: the handler's number or function,
 * else the config's (config_fn), else the default schedule; capped at
 * JR_BACKOFF_CAP. With config_fn NULL and no handler backoff, returns
 * JR_RETRY_UNRESOLVED: the master finishes the choice (jr_retry_delay
 * again with its config_fn). */
double jr_retry_delay(const jr_retry_in *in);

/* 1 when a claimed job's retries were used up before it starts (its last
 * attempt was lost with its runner's lease, or the handler now allows
 * fewer): it is dead without running. */
int    jr_retry_expired(const jr_retry_in *in);

/* The default retry delay after attempt (1, 2, ...): attempt^4 + 15 s plus
 * up to 10 * (attempt + 1) s of jitter, as Sidekiq; capped at
 * JR_BACKOFF_CAP. */
double jr_retry_default(int attempt);

#endif
