/* logs.c - each attempt's logs (migration 20) on SQLite: a run's entry
 * appended to its job's logs column in the transaction recording its end
 * (a success's by complete.c's S_KEEP, or here after S_KEEP_MANY), and
 * the column read back for show and the API. Uses sqlite_int.h. */
#include <stdlib.h>
#include <string.h>

#include "base/joblog.h"
#include "sqlite/sqlite_int.h"

void
jr_sqlite_bind_logs(sqlite3_stmt *s, int i, const jr_result *r)
{
    jr_buf json = {0};
    const char *text = jr_joblog_json(r->logs, r->logs_len, &json);

    if (text != NULL)
        sqlite3_bind_text(s, i, text, -1, SQLITE_TRANSIENT);
    else
        sqlite3_bind_null(s, i);
    jr_buf_free(&json);
}

/* a run's logs, before its end, while the job is ours */
static const char *const st_logs =
    "UPDATE jobs SET logs = " JR_SQLITE_LOGS_APPEND("?3")
    " WHERE id = ?1 AND state = 'running' AND locked_by = ?2";

/* a success's logs that S_KEEP_MANY kept, now (?3) */
static const char *const st_logs_kept =
    "UPDATE jobs SET logs = " JR_SQLITE_LOGS_APPEND("?2")
    " WHERE id = ?1 AND state = 'completed' AND finished_at = ?3";

int
jr_sqlite_logs_put(jr_backend *b, const char *token, const jr_result *r,
                   int n, jr_err *err)
{
    sqlite3_stmt *s;
    int i;

    for (i = 0; i < n; i++) {
        if (r[i].logs == NULL || r[i].kind == JR_DONE)
            continue;
        if ((s = jr_sqlite_stmt(b, &st_logs, err)) == NULL)
            return -1;
        sqlite3_bind_int64(s, 1, r[i].id);
        bind_text(s, 2, token);
        jr_sqlite_bind_logs(s, 3, &r[i]);
        if (run(b, s, err, "recording a job's logs") < 0)
            return -1;
    }
    return 0;
}

int
jr_sqlite_logs_kept(jr_backend *b, const jr_result *r, double now,
                    jr_err *err)
{
    sqlite3_stmt *s = jr_sqlite_stmt(b, &st_logs_kept, err);

    if (s == NULL)
        return -1;
    sqlite3_bind_int64(s, 1, r->id);
    jr_sqlite_bind_logs(s, 2, r);
    sqlite3_bind_double(s, 3, now);
    return run(b, s, err, "recording a job's logs") < 0 ? -1 : 0;
}

int
jr_sqlite_job_logs(jr_backend *b, int64_t id, char **out, jr_err *err)
{
    sqlite3_stmt *s;
    const char *v;
    int rc;

    *out = NULL;
    if (sqlite3_prepare_v2(b->db, "SELECT logs FROM jobs WHERE id = ?1", -1,
                           &s, NULL) != SQLITE_OK)
        return jr_sqlite_fail(b, err, "reading a job's logs");
    sqlite3_bind_int64(s, 1, id);
    if ((rc = sqlite3_step(s)) == SQLITE_ROW &&
        (v = col_text(s, 0)) != NULL && (*out = strdup(v)) == NULL) {
        sqlite3_finalize(s);
        return jr_fail(err, JR_ENOMEM, "job %lld: out of memory reading its "
                       "logs", (long long)id);
    }
    sqlite3_finalize(s);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
        return jr_sqlite_fail(b, err, "reading a job's logs");
    return rc == SQLITE_ROW;
}
