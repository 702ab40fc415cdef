/* migrate.c - the SQLite schema's migrations: the numbered blocks of
 * schema.sql (the C string jr_sqlite_sql), each applied once in the one
 * IMMEDIATE transaction of a migrate, PRAGMA user_version the number of
 * the last. A block that rebuilds the jobs table keeps what users made on
 * it (their indexes, triggers and views). Uses sqlite_int.h. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sqlite/sqlite_int.h"


static int
user_version(jr_backend *b, int *v, jr_err *err)
{
    sqlite3_stmt *s;
    int rc;

    if (sqlite3_prepare_v2(b->db, "PRAGMA user_version", -1, &s, NULL) !=
        SQLITE_OK)
        return jr_sqlite_fail(b, err, "reading the schema version");
    rc = sqlite3_step(s);
    *v = rc == SQLITE_ROW ? sqlite3_column_int(s, 0) : 0;
    sqlite3_finalize(s);
    return rc == SQLITE_ROW ? 0 : jr_sqlite_fail(b, err, "reading the "
                                                 "schema version");
}

/* The indexes and triggers a table rebuild would lose: SQLite drops a
 * table's own with it, and the migration recreates only ours. */
typedef struct kept_obj {
    char name[256];
    char *sql;
} kept_obj;

/* Before a migration that rebuilds jobs (creates jobs_new, drops jobs,
 * renames): the CREATE statements of every index and trigger on jobs,
 * ours and a user's alike (*n of them, in *out, to free with
 * keep_free). Returns 0 or -1. */
static int
keep_read(jr_backend *b, kept_obj **out, int *n, jr_err *err)
{
    sqlite3_stmt *s;
    kept_obj *k = NULL, *grown;
    int rc, cap = 0;

    *out = NULL;
    *n = 0;
    if (sqlite3_prepare_v2(b->db, "SELECT name, sql FROM sqlite_master "
                           "WHERE tbl_name = 'jobs' AND type IN ('index', "
                           "'trigger') AND sql IS NOT NULL", -1, &s,
                           NULL) != SQLITE_OK)
        return jr_sqlite_fail(b, err, "migration: reading the indexes of jobs");
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        if (*n == cap) {
            cap = cap ? cap * 2 : 16;
            if ((grown = realloc(k, (size_t)cap * sizeof *k)) == NULL)
                break;
            k = grown;
        }
        snprintf(k[*n].name, sizeof k[*n].name, "%s", col_text(s, 0));
        if ((k[*n].sql = strdup(col_text(s, 1))) == NULL)
            break;
        (*n)++;
    }
    sqlite3_finalize(s);
    *out = k;
    if (rc != SQLITE_DONE)
        return rc == SQLITE_ROW ? jr_fail(err, JR_ENOMEM, "sqlite: out of "
                                          "memory")
                                : jr_sqlite_fail(b, err, "migration: "
                                                 "reading the indexes of "
                                                 "jobs");
    return 0;
}

static void
keep_free(kept_obj *k, int n)
{
    for (int i = 0; i < n; i++)
        free(k[i].sql);
    free(k);
}

/* After the rebuild: creates again each kept index or trigger that is
 * gone (a user's; ours the migration made again, or dropped on purpose
 * under another name). A user's that no longer fits fails the
 * migration, named. */
static int
keep_restore(jr_backend *b, int version, const kept_obj *k, int n,
             jr_err *err)
{
    sqlite3_stmt *s;
    char *msg = NULL;
    int i, there;

    if (sqlite3_prepare_v2(b->db, "SELECT 1 FROM sqlite_master WHERE name "
                           "= ?", -1, &s, NULL) != SQLITE_OK)
        return jr_sqlite_fail(b, err, "migration: reading the indexes of jobs");
    for (i = 0; i < n; i++) {
        sqlite3_reset(s);
        sqlite3_bind_text(s, 1, k[i].name, -1, SQLITE_STATIC);
        there = sqlite3_step(s) == SQLITE_ROW;
        if (there)
            continue;
        if (sqlite3_exec(b->db, k[i].sql, NULL, NULL, &msg) != SQLITE_OK) {
            jr_fail(err, JR_EDB, "sqlite '%s': migration %d: your '%s' on "
                    "jobs could not be made again after the table's "
                    "rebuild: %s", b->path, version, k[i].name,
                    msg ? msg : sqlite3_errmsg(b->db));
            sqlite3_free(msg);
            sqlite3_finalize(s);
            return -1;
        }
    }
    sqlite3_finalize(s);
    return 0;
}

/* After a block that edited sqlite_master's text in place (a CHECK
 * widened): schema_version one up, as SQLite's documentation asks, so
 * every connection, this one too, reads the schema again. */
static int
schema_bump(jr_backend *b, int version, jr_err *err)
{
    sqlite3_stmt *s;
    char sql[64];
    int v, rc;

    if (sqlite3_prepare_v2(b->db, "PRAGMA schema_version", -1, &s, NULL) !=
        SQLITE_OK)
        return jr_sqlite_fail(b, err, "migration: reading schema_version");
    rc = sqlite3_step(s);
    v = sqlite3_column_int(s, 0);
    sqlite3_finalize(s);
    if (rc != SQLITE_ROW)
        return jr_sqlite_fail(b, err, "migration: reading schema_version");
    /* the edit must have found its text: else the state it allows is
     * refused at every write of it */
    if (sqlite3_prepare_v2(b->db, "SELECT 1 FROM sqlite_master WHERE type ="
                           " 'table' AND name = 'jobs' AND sql LIKE "
                           "'%OR state = ''expired''%'", -1, &s,
                           NULL) != SQLITE_OK)
        return jr_sqlite_fail(b, err, "migration: reading the jobs table");
    rc = sqlite3_step(s);
    sqlite3_finalize(s);
    if (rc != SQLITE_ROW)
        return jr_fail(err, JR_EDB, "sqlite '%s': migration %d: the CHECK "
                       "of jobs.state is not the one this migration widens "
                       "(was the table changed by hand?): nothing changed",
                       b->path, version);
    snprintf(sql, sizeof sql, "PRAGMA schema_version = %d", v + 1);
    if (sqlite3_exec(b->db, sql, NULL, NULL, NULL) != SQLITE_OK)
        return jr_fail(err, JR_EDB, "sqlite '%s': migration %d: setting "
                       "schema_version: %s", b->path, version,
                       sqlite3_errmsg(b->db));
    return 0;
}

/* Applies one migration block (text up to the next marker or the end).
 * A block that rebuilds jobs keeps what users made on and around it:
 * views that read jobs (the rename would refuse them while jobs is
 * dropped: legacy_alter_table leaves them be, and they read the new
 * table by name), and indexes and triggers on it (made again). */
static int
apply(jr_backend *b, int version, const char *sql, size_t len, jr_err *err)
{
    char *text = malloc(len + 64);
    char *msg = NULL;
    kept_obj *kept = NULL;
    int rc, nkept = 0;
    int rebuild = memmem(sql, len, "RENAME TO jobs", 14) != NULL;

    if (text == NULL)
        return jr_fail(err, JR_ENOMEM, "sqlite: out of memory");
    memcpy(text, sql, len);
    snprintf(text + len, 64, "\n;PRAGMA user_version = %d;", version);
    if (rebuild && keep_read(b, &kept, &nkept, err) < 0) {
        keep_free(kept, nkept);
        free(text);
        return -1;
    }
    if (rebuild && sqlite3_exec(b->db, "PRAGMA legacy_alter_table = ON",
                                NULL, NULL, NULL) != SQLITE_OK) {
        keep_free(kept, nkept);
        free(text);
        return jr_sqlite_fail(b, err, "migration");
    }
    rc = sqlite3_exec(b->db, text, NULL, NULL, &msg);
    free(text);
    if (rebuild)
        sqlite3_exec(b->db, "PRAGMA legacy_alter_table = OFF", NULL, NULL,
                     NULL);
    if (rc != SQLITE_OK) {
        jr_fail(err, JR_EDB, "sqlite '%s': migration %d: %s", b->path,
                version, msg ? msg : sqlite3_errmsg(b->db));
        sqlite3_free(msg);
        keep_free(kept, nkept);
        return -1;
    }
    rc = rebuild ? keep_restore(b, version, kept, nkept, err) : 0;
    keep_free(kept, nkept);
    if (rc == 0 && memmem(sql, len, "writable_schema", 15) != NULL)
        rc = schema_bump(b, version, err);
    return rc;
}

int
jr_sqlite_migrate(jr_backend *b, jr_err *err)
{
    static const char marker[] = "-- migration ";
    const char *p = strstr(jr_sqlite_sql, marker);
    int current;

    if (jr_sqlite_begin(b, err) < 0)
        return -1;
    if (user_version(b, &current, err) < 0)
        goto fail;
    if (current == 0 && b->must_exist) {
        jr_fail(err, JR_ENOTFOUND, "sqlite '%s': the database does not "
                "exist (the file has no jobrunner tables; 'jobrunner "
                "migrate' creates them)", b->path);
        goto fail;
    }
    while (p != NULL) {
        int version = atoi(p + strlen(marker));
        const char *body = strchr(p, '\n');
        const char *next;
        if (body == NULL)
            break;
        next = strstr(body, marker);
        if (version > current) {
            /* with the triggers on; the next begin looks at them again */
            b->schema_seen = -1;
            if (jr_sqlite_triggers_set(b, 0, err) < 0 ||
                apply(b, version, body, next ? (size_t)(next - body) :
                      strlen(body), err) < 0)
                goto fail;
        }
        p = next;
    }
    return jr_sqlite_commit(b, err);
fail:
    jr_sqlite_rollback(b);
    return -1;
}
