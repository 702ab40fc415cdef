/* retry.c - the retry policy (retry.h): one rule for max_retries, death
 * and backoff, whoever decides.
 *
 * Who calls what. A worker decides its handler's failures: it passes its
 * handler's backoff (number or function: the function lives in the
 * worker's Lua state) and no config_fn, because a worker never loads
 * jobrunner.lua (the master sends it a settings frame, frame.h). When the
 * handler sets no backoff, the worker's result says JR_RETRY with delay
 * JR_RETRY_UNRESOLVED, and the master (pool.c) finishes the choice with
 * the config's backoff, run in the config's Lua state where hooks run too,
 * else the default schedule. The master decides on its own when a worker
 * dies or is killed (pool.c), and when a claimed job's retries are used up
 * before it starts (claimq.c); the lease rescue only requeues. */
#include <math.h>
#include <stdlib.h>

#include "base/retry.h"

int
jr_retry_max(const jr_job *j, int handler, int dflt)
{
    return j->max_retries >= 0 ? j->max_retries : handler >= 0 ? handler :
           dflt;
}

static int
max_of(const jr_retry_in *in)
{
    return jr_retry_max(in->job, in->handler_max, in->config_max);
}

double
jr_retry_default(int attempt)
{
    double a = attempt, d;

    d = a * a * a * a + 15 + (double)(rand() % 10) * (a + 1);
    return d > JR_BACKOFF_CAP ? JR_BACKOFF_CAP : d;
}

double
jr_retry_delay(const jr_retry_in *in)
{
    int max = max_of(in);
    double d = in->handler_backoff;

    if (!(d >= 0) && in->handler_fn != NULL)
        d = in->handler_fn(in->handler_arg, in->job, max, in->error);
    if (!(d >= 0) && in->config_fn == NULL)
        return JR_RETRY_UNRESOLVED;
    if (!(d >= 0))
        d = in->config_fn(in->config_arg, in->job, max, in->error);
    if (!(d >= 0))
        d = jr_retry_default(in->job->attempt);
    return d > JR_BACKOFF_CAP ? JR_BACKOFF_CAP : d;
}

int
jr_retry_decide(const jr_retry_in *in, jr_result *out)
{
    if (in->job->attempt > max_of(in)) {
        out->kind = JR_DEAD;
        return JR_DEAD;
    }
    out->kind = JR_RETRY;
    out->delay = jr_retry_delay(in);
    return JR_RETRY;
}

int
jr_retry_expired(const jr_retry_in *in)
{
    return in->job->attempt > max_of(in) + 1;
}
