/* wait.c - waiting for outcomes: the mark that keeps a waited-on job
 * completed after success (its result_ttl), where each job stands (state,
 * result, error) and the highest id ever given; the wake-ups: inotify
 * on the database's folder (the -wal file's writes), confirmed by
 * data_version (conn.c's changed); SQLite cannot say which job ended.
 * Owns their statements and that descriptor. Uses sqlite_int.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/inotify.h>
#endif

#include "sqlite/sqlite_int.h"

/* The file's statements: slots of sql_text[] (sqlite_int.h). */
enum { S_WATCH, S_OUTCOMES, S_LAST_ID, S_COUNT };

static const char *const sql_text[S_COUNT] = {
    /* ?1 the ids (JSON array), ?2 seconds */
    [S_WATCH] =
        "UPDATE jobs SET result_ttl = ?2"
        " WHERE id IN (SELECT value FROM json_each(?1))"
        " AND state NOT IN ('completed', 'dead', 'cancelled',"
        " 'expired')"
        " AND result_ttl IS NULL",
    /* one row per id asked, in the order asked (row r is the r-th id); a
     * job whose row is gone may have left its success behind: as a
     * batch's member, or as a parent for its children (written by the
     * transaction that recorded it; a dead end there may have been
     * retried since, a success is final) */
    [S_OUTCOMES] =
        "SELECT u.value, coalesce(j.state, m.state,"
        "  (SELECT d.parent_state FROM job_deps d WHERE d.parent_id ="
        "   u.value AND d.parent_state = 'completed' LIMIT 1)),"
        " CASE WHEN j.id IS NOT NULL THEN j.result"
        "  WHEN m.state = 'completed' THEN m.result"
        "  ELSE (SELECT d.parent_result FROM job_deps d WHERE d.parent_id ="
        "   u.value AND d.parent_state = 'completed' LIMIT 1) END,"
        " j.last_error"
        " FROM json_each(?1) AS u LEFT JOIN jobs j ON j.id = u.value"
        " LEFT JOIN batch_jobs m ON j.id IS NULL AND m.job_id = u.value"
        "  AND m.state = 'completed' ORDER BY u.key",
    [S_LAST_ID] =
        "SELECT coalesce((SELECT seq"
        " FROM sqlite_sequence"
        " WHERE name = 'jobs'), 0)",
};

static sqlite3_stmt *
stmt(jr_backend *b, int which, jr_err *err)
{
    return jr_sqlite_stmt(b, &sql_text[which], err);
}

/* ids[0..n) as a JSON array; malloc'd, NULL when out of memory. */
static char *
id_array(const int64_t *ids, int n)
{
    char *s = malloc((size_t)n * 22 + 3), *p = s;
    int i;

    if (s == NULL)
        return NULL;
    *p++ = '[';
    for (i = 0; i < n; i++)
        p += sprintf(p, "%s%lld", i ? "," : "", (long long)ids[i]);
    strcpy(p, "]");
    return s;
}

/* Marks the ids that have not ended: kept keep seconds after success. */
static int
watch(jr_backend *b, const char *ids, double keep, jr_err *err)
{
    sqlite3_stmt *s;

    if (jr_sqlite_begin(b, err) < 0)
        return -1;
    if ((s = stmt(b, S_WATCH, err)) == NULL)
        return jr_sqlite_write_end(b, -1, err);
    bind_text(s, 1, ids);
    sqlite3_bind_double(s, 2, keep);
    return jr_sqlite_write_end(b, run(b, s, err, "marking waited-on jobs"),
                               err) < 0 ? -1 : 0;
}

static char *
dup_col(sqlite3_stmt *s, int i, int *oom)
{
    const char *v = col_text(s, i);
    char *d = v ? strdup(v) : NULL;

    *oom |= v != NULL && d == NULL;
    return d;
}

/* Fills out[0..n) from the rows of S_OUTCOMES, row r for out[r]; then
 * the highest id given. */
static int
read_outcomes(jr_backend *b, const char *ids, int n, jr_outcome *out,
              int64_t *last, jr_err *err)
{
    sqlite3_stmt *s;
    int r = 0, rc, oom = 0;

    if ((s = stmt(b, S_OUTCOMES, err)) == NULL)
        return -1;
    bind_text(s, 1, ids);
    while ((rc = sqlite3_step(s)) == SQLITE_ROW && r < n) {
        if (col_text(s, 1) != NULL) {
            out[r].state = jr_state_parse(col_text(s, 1));
            out[r].result = dup_col(s, 2, &oom);
            out[r].error = dup_col(s, 3, &oom);
        }
        r++;
    }
    sqlite3_reset(s);
    if (rc != SQLITE_DONE && rc != SQLITE_ROW)
        return jr_sqlite_fail(b, err, "reading outcomes");
    if (oom)
        return jr_fail(err, JR_ENOMEM, "sqlite: reading outcomes: out of "
                       "memory");
    if (r != n || rc == SQLITE_ROW)
        return jr_fail(err, JR_EDB, "sqlite: reading outcomes: not one row "
                       "per id (%d ids)", n);
    if ((s = stmt(b, S_LAST_ID, err)) == NULL)
        return -1;
    rc = sqlite3_step(s);
    *last = rc == SQLITE_ROW ? sqlite3_column_int64(s, 0) : 0;
    sqlite3_reset(s);
    return rc == SQLITE_ROW ? 0 : jr_sqlite_fail(b, err, "reading ids");
}

int
jr_sqlite_outcomes(jr_backend *b, const int64_t *ids, int n, double keep,
                   jr_outcome *out, int64_t *last, jr_err *err)
{
    char *arr;
    int i, rc;

    for (i = 0; i < n; i++) {
        memset(&out[i], 0, sizeof out[i]);
        out[i].id = ids[i];
        out[i].state = -1;
    }
    *last = 0;
    if (n <= 0)
        return 0;
    if ((arr = id_array(ids, n)) == NULL)
        return jr_fail(err, JR_ENOMEM, "sqlite: out of memory");
    rc = keep > 0 ? watch(b, arr, keep, err) : 0;
    if (rc == 0)
        rc = read_outcomes(b, arr, n, out, last, err);
    free(arr);
    if (rc < 0)
        for (i = 0; i < n; i++) {
            free(out[i].result);
            free(out[i].error);
            out[i].result = out[i].error = NULL;
        }
    return rc;
}

/* The folder of the database file: every commit writes its -wal file,
 * which the last connection to close deletes and the next writer makes
 * again (a watch of the file itself would see the first one only). */
int
jr_sqlite_finished_fd(jr_backend *b)
{
#ifdef __linux__
    char dir[4096], *slash;

    if (b->fin_fd >= 0 || b->ino == 0)
        return b->fin_fd;
    snprintf(dir, sizeof dir, "%s", b->path);
    if ((slash = strrchr(dir, '/')) == NULL)
        snprintf(dir, sizeof dir, ".");
    else
        slash[slash == dir] = '\0';
    if ((b->fin_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC)) >= 0 &&
        inotify_add_watch(b->fin_fd, dir, IN_MODIFY | IN_CREATE) < 0) {
        close(b->fin_fd);
        b->fin_fd = -1;
    }
    return b->fin_fd;
#else
    (void)b;
    return -1;
#endif
}

int
jr_sqlite_finished(jr_backend *b, int64_t *ids, int max, jr_err *err)
{
    char buf[4096];
    unsigned was = b->reconnects;
    int rc;

    (void)ids;
    (void)max;
    if (b->fin_fd >= 0)         /* what changed is data_version's to say */
        while (read(b->fin_fd, buf, sizeof buf) > 0)
            ;
    /* a file put back at the path (a backup restored) is the one the
     * runners now write: reopened, it is all new to us; a file gone is
     * an error until it is back */
    if (jr_sqlite_file_check(b, err) < 0)
        return -1;
    rc = jr_sqlite_changed(b, err);
    return rc < 0 ? rc : rc > 0 || b->reconnects != was ?
           JR_FINISHED_SOME : 0;
}
