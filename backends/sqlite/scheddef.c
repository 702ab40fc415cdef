/* scheddef.c - schedules managed at run time (migration 22): a
 * definition added, replaced or removed in a transaction that counts the
 * change, and the definitions read when the count moved. Statements
 * prepared per call (a change is rare; the count's read is one row).
 * Uses sqlite_int.h. */
#include <stdio.h>

#include "sqlite/sqlite_int.h"
#include "base/util.h"

/* Runs sql with ?1 name, ?2 def, ?3 old, ?4 now; its changes, or -1. */
static int
def_sql(jr_backend *b, const char *sql, const char *name, const char *def,
        const char *old, jr_err *err)
{
    sqlite3_stmt *s;
    int rc;

    if (sqlite3_prepare_v2(b->db, sql, -1, &s, NULL) != SQLITE_OK)
        return jr_sqlite_fail(b, err, "preparing a schedule's change");
    bind_text(s, 1, name);
    bind_text(s, 2, def);
    bind_text(s, 3, old);
    sqlite3_bind_double(s, 4, jr_now());
    rc = sqlite3_step(s);
    sqlite3_finalize(s);
    if (rc != SQLITE_DONE)
        return jr_sqlite_fail(b, err, "changing a schedule");
    return sqlite3_changes(b->db);
}

/* Whether run-time schedule name exists: 1, 0, or -1 with err set. */
static int
exists(jr_backend *b, const char *name, jr_err *err)
{
    sqlite3_stmt *s;
    int rc;

    if (sqlite3_prepare_v2(b->db, "SELECT 1 FROM schedule_defs WHERE name "
                           "= ?1", -1, &s, NULL) != SQLITE_OK)
        return jr_sqlite_fail(b, err, "reading a schedule");
    bind_text(s, 1, name);
    rc = sqlite3_step(s);
    sqlite3_finalize(s);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
        return jr_sqlite_fail(b, err, "reading a schedule");
    return rc == SQLITE_ROW;
}

/* Whether JR_SCHEDDEFS_MAX run-time schedules exist: 1, 0, or -1. */
static int
full(jr_backend *b, jr_err *err)
{
    sqlite3_stmt *s;
    int rc;

    if (sqlite3_prepare_v2(b->db, "SELECT 1 FROM schedule_defs LIMIT 1 "
                           "OFFSET ?1", -1, &s, NULL) != SQLITE_OK)
        return jr_sqlite_fail(b, err, "reading the schedules");
    sqlite3_bind_int(s, 1, JR_SCHEDDEFS_MAX - 1);
    rc = sqlite3_step(s);
    sqlite3_finalize(s);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
        return jr_sqlite_fail(b, err, "reading the schedules");
    return rc == SQLITE_ROW;
}

static int
put_tx(jr_backend *b, const char *name, const char *def, const char *old,
       jr_err *err)
{
    int rc;

    if (def != NULL && old == NULL) {
        if ((rc = exists(b, name, err)) == 0 && (rc = full(b, err)) > 0)
            return jr_fail(err, JR_EINPUT, "schedule '%s': %d schedules "
                           "are managed at run time already, the most; "
                           "remove one first", name, JR_SCHEDDEFS_MAX);
        if (rc < 0)
            return -1;
        rc = def_sql(b, "INSERT OR IGNORE INTO schedule_defs (name, def, "
                     "created_at, updated_at) SELECT ?1, ?2, ?4, ?4 WHERE "
                     "?3 IS NULL", name, def, NULL, err);
        if (rc == 0)
            return jr_fail(err, JR_EINPUT, "schedule '%s' exists: change "
                           "it with set, or remove it first", name);
    } else if (def != NULL) {
        rc = def_sql(b, "UPDATE schedule_defs SET def = ?2, updated_at = "
                     "?4 WHERE name = ?1 AND def = ?3", name, def, old,
                     err);
        if (rc == 0 && exists(b, name, err) == 0)
            return jr_fail(err, JR_ENOTFOUND, "no schedule '%s' added at "
                           "run time", name);
    } else {
        rc = def_sql(b, "DELETE FROM schedule_defs WHERE name = ?1 AND ?2 "
                     "IS NULL AND ?3 IS NULL AND ?4 > 0", name, NULL, NULL,
                     err);
        if (rc == 0)
            return jr_fail(err, JR_ENOTFOUND, "no schedule '%s' added at "
                           "run time", name);
    }
    if (rc > 0 && def_sql(b, "UPDATE schedule_defs_rev SET rev = rev + 1 "
                          "WHERE ?1 IS NULL AND ?2 IS NULL AND ?3 IS NULL "
                          "AND ?4 > 0", NULL, NULL, NULL, err) < 0)
        return -1;
    return rc;
}

int
jr_sqlite_sched_def_put(jr_backend *b, const char *name, const char *def,
                        const char *old, jr_err *err)
{
    int rc;

    if (jr_name_check(name, "schedule name", err) < 0)
        return -1;
    if (jr_sqlite_begin(b, err) < 0)
        return -1;
    if ((rc = put_tx(b, name, def, old, err)) < 0) {
        jr_sqlite_rollback(b);
        return -1;
    }
    return jr_sqlite_commit(b, err) < 0 ? -1 : rc > 0;
}

int
jr_sqlite_sched_defs(jr_backend *b, int64_t *rev, jr_scheddef_cb cb,
                     void *arg, jr_err *err)
{
    sqlite3_stmt *s;
    int64_t now_rev = -1;
    int rc;

    /* two reads: rows newer than the count are read again next time */
    if (jr_sqlite_file_check(b, err) < 0)
        return -1;
    if (sqlite3_prepare_v2(b->db, "SELECT rev FROM schedule_defs_rev", -1,
                           &s, NULL) != SQLITE_OK)
        goto fail;
    if ((rc = sqlite3_step(s)) == SQLITE_ROW)
        now_rev = sqlite3_column_int64(s, 0);
    sqlite3_finalize(s);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
        goto fail;
    if (now_rev == *rev)
        return 0;
    if (sqlite3_prepare_v2(b->db, "SELECT name, def, created_at, updated_at "
                           "FROM schedule_defs ORDER BY name", -1, &s,
                           NULL) != SQLITE_OK)
        goto fail;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW)
        if (cb(col_text(s, 0), col_text(s, 1), sqlite3_column_double(s, 2),
               sqlite3_column_double(s, 3), arg) != 0)
            break;
    sqlite3_finalize(s);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
        goto fail;
    *rev = now_rev;
    return 1;
fail:
    return jr_sqlite_fail(b, err, "reading the run-time schedules");
}
