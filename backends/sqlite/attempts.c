/* attempts.c - a job's attempt history (migration 12) as show gives it:
 * the failed attempts complete.c appends to the job's attempt_log, read
 * back through the job_attempts view, oldest first. Prepared per call (a
 * show is rare), not kept in the cache. Uses sqlite_int.h. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sqlite/sqlite_int.h"

static char *
dup_col(sqlite3_stmt *s, int i, int *oom)
{
    const char *v = col_text(s, i);
    char *d;

    if (v == NULL)
        return NULL;
    if ((d = strdup(v)) == NULL)
        *oom = 1;
    return d;
}

int
jr_sqlite_attempts(jr_backend *b, int64_t id, jr_attempt_row *a, int max,
                   jr_err *err)
{
    sqlite3_stmt *s;
    int rc, n = 0, oom = 0;

    if (sqlite3_prepare_v2(b->db, "SELECT attempt, error, at, duration,"
                           " runner, worker, generation FROM job_attempts"
                           " WHERE job_id = ?1 ORDER BY n DESC LIMIT ?2",
                           -1, &s, NULL) != SQLITE_OK)
        return jr_sqlite_fail(b, err, "reading a job's attempts");
    sqlite3_bind_int64(s, 1, id);
    sqlite3_bind_int(s, 2, max);
    /* the newest max, newest first: placed from the end */
    while ((rc = sqlite3_step(s)) == SQLITE_ROW && n < max) {
        jr_attempt_row *r = &a[max - 1 - n++];
        r->attempt = sqlite3_column_int(s, 0);
        r->error = dup_col(s, 1, &oom);
        r->at = sqlite3_column_double(s, 2);
        r->duration = sqlite3_column_type(s, 3) == SQLITE_NULL ? NAN :
                      sqlite3_column_double(s, 3);
        r->runner = dup_col(s, 4, &oom);
        r->worker = sqlite3_column_int(s, 5);
        r->generation = dup_col(s, 6, &oom);
    }
    sqlite3_finalize(s);
    if (n > 0 && n < max)
        memmove(a, a + max - n, (size_t)n * sizeof *a);
    if (oom || (rc != SQLITE_ROW && rc != SQLITE_DONE)) {
        jr_attempt_rows_clear(a, n);
        return oom ? jr_fail(err, JR_ENOMEM, "job %lld: out of memory "
                             "reading its attempts", (long long)id)
                   : jr_sqlite_fail(b, err, "reading a job's attempts");
    }
    return n;
}
