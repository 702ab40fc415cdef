/* rerun.c - a job run again (rerun): finished or queued, it is queued
 * again with its steps' records cut at a step, its payload replaced if
 * asked, its attempt history kept; one transaction, the row locked while
 * its steps are cut. A job of a sequence gone on past it goes to the
 * sequence's end (seqretry.c). Uses conn.c, steprec.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "postgres/pg_int.h"
#include "base/steprec.h"

static const pg_stmt st_read = {"jr_rerun_read", 1,
    "SELECT state, steps::text, sequence_key, seq_fail, " JR_PG_SEQ_PAST
    " FROM {{schema}}.jobs WHERE id = $1::bigint FOR UPDATE"};

/* $2 the steps kept, $3 a new payload or NULL */
static const pg_stmt st_rerun = {"jr_rerun", 3,
    "UPDATE {{schema}}.jobs SET state = 'queued', attempts = 0,"
    " run_at = now(), died_at = NULL, finished_at = NULL,"
    " cancel_requested = false, result = NULL, keep_until = NULL,"
    " locked_by = NULL, locked_until = NULL, progress_done = NULL,"
    " progress_total = NULL, progress_note = NULL, steps = $2::jsonb,"
    " payload = coalesce($3::jsonb, payload),"
    " sealed = CASE WHEN $3::jsonb IS NULL THEN sealed END,"
    " updated_at = now(),"
    " expires_at = CASE WHEN state = 'expired' THEN NULL"
    "  ELSE expires_at END, deadline_at = NULL"
    " WHERE id = $1::bigint"};

/* The new steps of job id (NULL: none) into *kept, after its state is
 * checked; res is the read's. */
static int
cut(int64_t id, const PGresult *res, const char *from_step, char **kept,
    jr_err *err)
{
    const char *st = PQgetvalue(res, 0, 0);
    char msg[sizeof err->msg];

    if (strcmp(st, "running") == 0 || strcmp(st, "waiting") == 0)
        return jr_fail(err, JR_EINPUT, "job %lld is %s: only a completed, "
                       "dead, cancelled, expired or queued job runs "
                       "again",
                       (long long)id, st);
    if (from_step == NULL ||
        jr_steprec_cut(PQgetisnull(res, 0, 1) ? NULL : PQgetvalue(res, 0, 1),
                       from_step, kept, err) == 0)
        return 0;
    memcpy(msg, err->msg, sizeof msg);
    return jr_fail(err, err->code, "job %lld: %s", (long long)id, msg);
}

int
jr_pg_rerun(jr_backend *b, int64_t id, const char *from_step,
            const char *payload, jr_err *err)
{
    char sid[24], *kept = NULL;
    const char *params[3] = {sid, NULL, payload};
    PGresult *res = NULL;
    int rc = -1, waits = 0;

    snprintf(sid, sizeof sid, "%lld", (long long)id);
    if (jr_pg_ready(b, err) < 0 ||
        jr_pg_run_plain(b, "BEGIN", "running a job again", err) < 0)
        return -1;
    if ((res = jr_pg_run(b, &st_read, params, "reading a job", err)) == NULL)
        goto done;
    if (PQntuples(res) == 0) {
        jr_fail(err, JR_ENOTFOUND, "job %lld: no such job", (long long)id);
        goto done;
    }
    if (cut(id, res, from_step, &kept, err) < 0)
        goto done;
    params[1] = kept;
    if (jr_pg_run_count(b, &st_rerun, params, "running a job again",
                        err) < 0)
        goto done;
    /* one its sequence went on past goes to its end (seqretry.c) */
    if (strcmp(PQgetvalue(res, 0, 4), "t") == 0 &&
        jr_pg_seq_to_end(b, sid, PQgetvalue(res, 0, 2),
                         PQgetisnull(res, 0, 3) ? NULL :
                         PQgetvalue(res, 0, 3), &waits, err) < 0)
        goto done;
    if ((rc = jr_pg_run_plain(b, "COMMIT", "running a job again", err)) == 0)
        rc = waits;
done:
    PQclear(res);
    free(kept);
    if (rc < 0)
        jr_pg_rollback(b);
    return rc;
}
