/* fairclaim.c - a fair queue claimed alone (fairpick.c's jr_fair_alone:
 * its one limit, no cap, rate, key or aging, every queue served
 * uncapped) when it is the one queue with ready jobs, as claim.c's
 * claim_one claims one queue: its untagged jobs tagged, one read by
 * (priority, start tag, id), one update, its clock moved. Owns that
 * read. Uses sqlite_int.h (candidates.c's ready queue, claim.c's read
 * and mark, fair.c's tags, fairsave.c's clock). */
#include <stdlib.h>
#include <string.h>

#include "sqlite/sqlite_int.h"

/* The file's statements: slots of sql_text[] (sqlite_int.h). */
enum { S_FAIR_ONE, S_COUNT };

static const char *const sql_text[S_COUNT] = {
    /* claim.c's S_CLAIM_ONE in a fair queue claimed alone: by (priority,
     * start tag, id), one range of jobs_claim, with each job's tag, the
     * weight it was tagged with and its stored key */
    [S_FAIR_ONE] =
        "SELECT " JR_SQLITE_CLAIM_COLUMNS ", fair_tag, coalesce(fair_w, 1),"
        " fair_key"
        " FROM jobs"
        " WHERE state = 'queued' AND queue = ?1 AND fair_tag IS NOT NULL"
        " AND run_at <= ?2"
        JR_SQLITE_UNEXPIRED
        " AND name IN (SELECT value FROM json_each(?3))"
        " ORDER BY priority, " JR_SQLITE_CLAIM_ORDER ", id LIMIT ?4",
};

static sqlite3_stmt *
stmt(jr_backend *b, int which, jr_err *err)
{
    return jr_sqlite_stmt(b, &sql_text[which], err);
}

/* A row of S_FAIR_ONE (i from 0): the job's weight and key, and into
 * *clock the highest tag so far. */
static void
fair_row(sqlite3_stmt *s, jr_job *j, int i, void *clock)
{
    double tag = sqlite3_column_double(s, 17);

    if (tag > *(double *)clock || i == 0)
        *(double *)clock = tag;
    j->fair_weight = sqlite3_column_double(s, 18);
    if (!(j->fair_weight > 0))
        j->fair_weight = 1;
    j->fair_hash = jr_sqlite_fair_hash(col_text(s, 19));
}

/* One read and one update, as claim_one's: not the passes of the claim
 * under limits (each candidate's strings, the pick, the read by id),
 * whose cost made the master's CPU for a fair drain 1.2 times a plain
 * one's. */
int
jr_sqlite_fair_claim(jr_backend *b, const char *token, double lease,
                     const jr_claim_spec *spec, const char *json,
                     jr_job **out, double now, jr_err *err)
{
    const jr_limit *f = jr_fair_alone(spec);
    sqlite3_stmt *s;
    char *queue;
    double clock = 0;
    int n, rc;

    if (f == NULL)
        return -2;
    if ((rc = jr_sqlite_ready_queue(b, json, now, &queue, err)) != 1)
        return rc == 2 ? -2 : rc;       /* several, none (0), or -1 */
    if (strcmp(queue, f->scope + 6) != 0) {
        free(queue);
        return -2;                      /* another queue's: under limits */
    }
    if (jr_sqlite_fair_ready(b, f, queue, now, err) < 0 ||
        (s = stmt(b, S_FAIR_ONE, err)) == NULL) {
        free(queue);
        return -1;
    }
    n = jr_sqlite_claim_read(b, s, queue, json, spec->max, token, lease,
                             now, out, fair_row, &clock,
                             "claiming jobs of a fair queue", err);
    if (n > 0 && jr_sqlite_fair_tick(b, queue, clock, err) < 0) {
        while (n > 0)
            free(out[--n]);
        n = -1;                         /* err says why */
    }
    free(queue);
    if (n >= 0 && spec->limit_next)
        *spec->limit_next = 0;
    return n;                   /* already in claim order */
}
