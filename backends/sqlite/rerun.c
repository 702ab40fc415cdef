/* rerun.c - a job run again (rerun): finished or queued, it is queued
 * again with its steps' records cut at a step, its payload replaced if
 * asked, its attempt history kept; a job of a sequence gone on past it
 * goes to the sequence's end (seqretry.c). Uses sqlite_int.h,
 * steprec.h. */
#include <stdlib.h>
#include <string.h>

#include "sqlite/sqlite_int.h"
#include "base/steprec.h"
#include "base/util.h"

/* The file's statements: slots of sql_text[] (sqlite_int.h). */
enum { S_READ, S_RERUN, S_COUNT };

static const char *const sql_text[S_COUNT] = {
    [S_READ] = "SELECT state, steps FROM jobs WHERE id = ?1",
    /* ?2 now, ?3 the steps kept, ?4 a new payload or NULL */
    [S_RERUN] =
        "UPDATE jobs SET state = 'queued', attempts = 0, run_at = ?2,"
        " fair_tag = NULL,"
        " died_at = NULL, finished_at = NULL, cancel_requested = 0,"
        " result = NULL, keep_until = NULL, locked_by = NULL,"
        " locked_until = NULL, progress_done = NULL, progress_total = NULL,"
        " progress_note = NULL, steps = ?3,"
        " payload = coalesce(?4, payload),"
        " sealed = CASE WHEN ?4 IS NULL THEN sealed END, updated_at = ?2,"
        " expires_at = CASE WHEN state = 'expired' THEN NULL"
        "  ELSE expires_at END, deadline_at = NULL WHERE id = ?1",
};

/* Reads job id's state and steps (new copies) and checks it may run
 * again. */
static int
read_job(jr_backend *b, int64_t id, char **steps, jr_err *err)
{
    sqlite3_stmt *s = jr_sqlite_stmt(b, &sql_text[S_READ], err);
    const char *st;
    int rc, ok;

    if (s == NULL)
        return -1;
    sqlite3_bind_int64(s, 1, id);
    if ((rc = sqlite3_step(s)) != SQLITE_ROW) {
        sqlite3_reset(s);
        return rc == SQLITE_DONE
            ? jr_fail(err, JR_ENOTFOUND, "job %lld: no such job",
                      (long long)id)
            : jr_sqlite_fail(b, err, "reading a job");
    }
    st = col_text(s, 0);
    ok = strcmp(st, "running") != 0 && strcmp(st, "waiting") != 0;
    if (!ok) {
        jr_fail(err, JR_EINPUT, "job %lld is %s: only a completed, dead, "
                "cancelled, expired or queued job runs again", (long long)id,
                st);
        sqlite3_reset(s);
        return -1;
    }
    *steps = col_text(s, 1) ? strdup(col_text(s, 1)) : NULL;
    rc = col_text(s, 1) != NULL && *steps == NULL;
    sqlite3_reset(s);
    return rc ? jr_fail(err, JR_ENOMEM, "sqlite: out of memory") : 0;
}

int
jr_sqlite_rerun(jr_backend *b, int64_t id, const char *from_step,
                const char *payload, jr_err *err)
{
    char *steps = NULL, *kept = NULL;
    sqlite3_stmt *s;
    int rc = -1, waits = 0;

    if (jr_sqlite_begin(b, err) < 0)
        return -1;
    if (read_job(b, id, &steps, err) < 0)
        goto done;
    if (from_step != NULL &&
        jr_steprec_cut(steps, from_step, &kept, err) < 0) {
        char msg[sizeof err->msg];
        memcpy(msg, err->msg, sizeof msg);
        jr_fail(err, err->code, "job %lld: %s", (long long)id, msg);
        goto done;
    }
    if ((s = jr_sqlite_stmt(b, &sql_text[S_RERUN], err)) == NULL)
        goto done;
    sqlite3_bind_int64(s, 1, id);
    sqlite3_bind_double(s, 2, jr_now());
    bind_text(s, 3, kept);
    bind_text(s, 4, payload);
    /* one its sequence went on past goes to its end */
    rc = jr_sqlite_seq_again(b, id, s, jr_now(), &waits, err) < 0 ? -1 : 0;
done:
    free(steps);
    free(kept);
    if (rc < 0) {
        jr_sqlite_rollback(b);
        return -1;
    }
    return jr_sqlite_commit(b, err) < 0 ? -1 : waits;
}
