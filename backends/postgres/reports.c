/* reports.c - what a job reports while it runs, recorded with the
 * results of its batch: progress (only each job's last report), the
 * steps of its durable steps (the whole list), and the runs' logs of the
 * results other than successes (a success's go with its own statement,
 * complete.c). Owns their statements. Uses pg_int.h, arrays.h. */

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/joblog.h"
#include "postgres/pg_int.h"
#include "postgres/arrays.h"

static const pg_stmt st_progress = {"jr_progress", 5,
    "UPDATE {{schema}}.jobs j SET progress_done = u.done,"
    " progress_total = u.total, progress_note = u.note"
    " FROM unnest($2::bigint[], $3::float8[], $4::float8[], $5::text[])"
    "  AS u(id, done, total, note)"
    " WHERE j.id = u.id AND j.state = 'running'"
    " AND j.locked_by = $1::text"};

static const pg_stmt st_steps = {"jr_steps", 3,
    "UPDATE {{schema}}.jobs j SET steps = u.steps::jsonb"
    " FROM unnest($2::bigint[], $3::text[]) AS u(id, steps)"
    " WHERE j.id = u.id AND j.state = 'running'"
    " AND j.locked_by = $1::text"};

/* 1 if a result after r[i] in r[0..n) is of its kind and job: a report
 * (progress, a step's list) that a later one of the batch supersedes (an
 * UPDATE joined to two rows for one job applies either). */
static int
superseded_at(const jr_result *r, int n, int i)
{
    int k;

    for (k = i + 1; k < n; k++)
        if (r[k].kind == r[i].kind && r[k].id == r[i].id)
            return 1;
    return 0;
}

/* Records the STEP results of r[0..n): each holds the job's whole list,
 * so only a job's last one in the batch goes in. */
int
jr_pg_finish_steps(jr_backend *b, const char *token, const jr_result *r, int n,
             jr_err *err)
{
    const char *params[3];
    char num[32];
    jr_buf a[2];
    int i, rc, superseded = 0;

    memset(a, 0, sizeof a);
    for (i = 0; i < n; i++) {
        if (r[i].kind != JR_STEP)
            continue;
        if (superseded_at(r, n, i)) {
            superseded++;       /* counted as applied: the later one is */
            continue;
        }
        snprintf(num, sizeof num, "%lld", (long long)r[i].id);
        sb_num(&a[0], num);
        sb_elem(&a[1], r[i].result);
    }
    if (a[0].len == 0)
        return 0;
    params[0] = token;
    params[1] = sb_array(&a[0]);
    params[2] = sb_array(&a[1]);
    rc = a[0].oom || a[1].oom
         ? jr_fail(err, JR_ENOMEM, "postgres: recording steps: out of "
                   "memory")
         : jr_pg_run_count(b, &st_steps, params, "recording steps", err);
    free(a[0].p);
    free(a[1].p);
    return rc < 0 ? rc : rc + superseded;
}

/* The runs' logs of results other than successes (st_keep writes
 * theirs), before their end, while the jobs are ours. */
static const pg_stmt st_logs = {"jr_logs", 3,
    "UPDATE {{schema}}.jobs j SET logs = " JR_PG_LOGS_APPEND("u.e")
    " FROM unnest($2::bigint[], $3::text[]) AS u(id, e)"
    " WHERE j.id = u.id AND j.state = 'running'"
    " AND j.locked_by = $1::text"};

/* Records the runs' logs of r[0..n) but the successes' in one statement;
 * none when no such job logged. 0 or -1. */
int
jr_pg_finish_logs(jr_backend *b, const char *token, const jr_result *r, int n,
            jr_err *err)
{
    const char *params[3];
    char num[32];
    jr_buf a[2], json = {0};
    int i, rc;

    memset(a, 0, sizeof a);
    for (i = 0; i < n; i++) {
        if (r[i].logs == NULL || r[i].kind == JR_DONE)
            continue;
        snprintf(num, sizeof num, "%lld", (long long)r[i].id);
        sb_num(&a[0], num);
        sb_elem(&a[1], jr_joblog_json(r[i].logs, r[i].logs_len, &json));
    }
    jr_buf_free(&json);
    if (a[0].len == 0)
        return 0;
    params[0] = token;
    params[1] = sb_array(&a[0]);
    params[2] = sb_array(&a[1]);
    rc = a[0].oom || a[1].oom
         ? jr_fail(err, JR_ENOMEM, "postgres: recording logs: out of "
                   "memory")
         : jr_pg_run_count(b, &st_logs, params, "recording logs", err);
    free(a[0].p);
    free(a[1].p);
    return rc < 0 ? -1 : 0;
}

/* Records the PROGRESS results of r[0..n). */
int
jr_pg_finish_progress(jr_backend *b, const char *token, const jr_result *r, int n,
                jr_err *err)
{
    const char *params[5];
    char num[32];
    jr_buf a[4];
    int i, k, rc, superseded = 0;

    memset(a, 0, sizeof a);
    for (i = 0; i < n; i++) {
        if (r[i].kind != JR_PROGRESS)
            continue;
        if (superseded_at(r, n, i)) {   /* only the job's last report */
            superseded++;       /* counted as applied: the later one is */
            continue;
        }
        snprintf(num, sizeof num, "%lld", (long long)r[i].id);
        sb_num(&a[0], num);
        snprintf(num, sizeof num, "%.17g", r[i].done);
        sb_num(&a[1], isfinite(r[i].done) ? num : "NULL");
        snprintf(num, sizeof num, "%.17g", r[i].total);
        sb_num(&a[2], isfinite(r[i].total) ? num : "NULL");
        sb_elem(&a[3], r[i].note);
    }
    if (a[0].len == 0)
        return 0;
    params[0] = token;
    for (k = 0; k < 4; k++)
        params[k + 1] = sb_array(&a[k]);
    rc = a[0].oom || a[1].oom || a[2].oom || a[3].oom
         ? jr_fail(err, JR_ENOMEM, "postgres: recording progress: out of "
                   "memory")
         : jr_pg_run_count(b, &st_progress, params, "recording progress", err);
    for (k = 0; k < 4; k++)
        free(a[k].p);
    return rc < 0 ? rc : rc + superseded;
}
