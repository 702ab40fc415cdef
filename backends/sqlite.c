/* sqlite.c - the embedded engine: one SQLite file in WAL mode. Owns the
 * connection and its prepared statements; writes begin IMMEDIATE so a
 * reader never has to upgrade its lock; the file and its -wal/-shm are
 * created mode 0600. Wake-ups come from inotify on the -wal file, confirmed
 * by PRAGMA data_version. Exports only jr_sqlite_ops. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/inotify.h>
#endif

#include <sqlite3.h>

#include "backend.h"
#include "util.h"

extern const char jr_sqlite_sql[];      /* build/sqlite_sql.c */

enum {
    S_CLAIM, S_DONE, S_RETRY, S_DEAD, S_SNOOZE, S_RELEASE, S_EXPIRED,
    S_INSERT,
    S_RENEW, S_RESCUE, S_STATS, S_DEAD_LIST, S_DEAD_RETRY, S_DEAD_RETRY_ALL,
    S_DEAD_PURGE, S_DATA_VERSION, S_BEGIN, S_COMMIT, S_ROLLBACK, S_READY,
    S_COUNT
};

static const char *const sql_text[S_COUNT] = {
    [S_CLAIM] =
        "UPDATE jobs SET state = 'running', attempts = attempts + 1,"
        " locked_by = ?1, locked_until = ?2, updated_at = ?3"
        " WHERE id IN (SELECT id FROM jobs WHERE state = 'queued'"
        "  AND run_at <= ?3 AND name IN (SELECT value FROM json_each(?4))"
        "  ORDER BY priority, run_at, id LIMIT ?5)"
        " RETURNING id, name, queue, payload, attempts, max_retries,"
        " priority, run_at, created_at",
    [S_DONE] =
        "DELETE FROM jobs WHERE id = ?1 AND state = 'running'"
        " AND locked_by = ?2",
    [S_RETRY] =
        "UPDATE jobs SET state = 'queued', run_at = ?3 + ?4, last_error = ?5,"
        " generation = ?6, locked_by = NULL, locked_until = NULL,"
        " updated_at = ?3"
        " WHERE id = ?1 AND state = 'running' AND locked_by = ?2",
    [S_DEAD] =
        "UPDATE jobs SET state = 'dead', died_at = ?3, last_error = ?5,"
        " generation = ?6, locked_by = NULL, locked_until = NULL,"
        " updated_at = ?3"
        " WHERE id = ?1 AND state = 'running' AND locked_by = ?2",
    [S_SNOOZE] =
        "UPDATE jobs SET state = 'queued', run_at = ?3 + ?4,"
        " attempts = attempts - 1, generation = ?6, locked_by = NULL,"
        " locked_until = NULL, updated_at = ?3"
        " WHERE id = ?1 AND state = 'running' AND locked_by = ?2",
    [S_RELEASE] =
        "UPDATE jobs SET state = 'queued', attempts = attempts - 1,"
        " locked_by = NULL, locked_until = NULL, updated_at = ?3"
        " WHERE id = ?1 AND state = 'running' AND locked_by = ?2",
    [S_EXPIRED] =
        "UPDATE jobs SET state = 'dead', died_at = ?3, attempts = attempts - 1,"
        " last_error = coalesce(?5, last_error), locked_by = NULL,"
        " locked_until = NULL, updated_at = ?3"
        " WHERE id = ?1 AND state = 'running' AND locked_by = ?2",
    [S_INSERT] =
        "INSERT INTO jobs (name, payload, queue, priority, max_retries,"
        " run_at, created_at, updated_at)"
        " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?7)",
    [S_RENEW] =
        "UPDATE jobs SET locked_until = ?2"
        " WHERE state = 'running' AND locked_by = ?1",
    [S_RESCUE] =
        "UPDATE jobs SET state = 'queued',"
        " last_error = 'lease expired: runner lost',"
        " locked_by = NULL, locked_until = NULL, updated_at = ?1"
        " WHERE state = 'running' AND locked_until < ?1",
    [S_STATS] =
        "SELECT name, sum(state = 'queued' AND run_at <= ?1),"
        " sum(state = 'queued' AND run_at > ?1), sum(state = 'running'),"
        " sum(state = 'dead') FROM jobs GROUP BY name ORDER BY name",
    [S_DEAD_LIST] =
        "SELECT id, name, queue, attempts, last_error, generation, died_at,"
        " created_at FROM jobs WHERE state = 'dead'"
        " ORDER BY died_at DESC, id DESC LIMIT ?1",
    [S_DEAD_RETRY] =
        "UPDATE jobs SET state = 'queued', attempts = 0, run_at = ?2,"
        " died_at = NULL, updated_at = ?2 WHERE state = 'dead' AND id = ?1",
    [S_DEAD_RETRY_ALL] =
        "UPDATE jobs SET state = 'queued', attempts = 0, run_at = ?1,"
        " died_at = NULL, updated_at = ?1 WHERE state = 'dead'",
    [S_DEAD_PURGE] =
        "DELETE FROM jobs WHERE state = 'dead' AND died_at <= ?1",
    [S_DATA_VERSION] = "PRAGMA data_version",
    [S_READY] =
        "SELECT count(*) FROM (SELECT 1 FROM jobs WHERE state = 'queued'"
        " AND run_at <= ?1 AND name IN (SELECT value FROM json_each(?2))"
        " LIMIT ?3)",
    [S_BEGIN] = "BEGIN IMMEDIATE",
    [S_COMMIT] = "COMMIT",
    [S_ROLLBACK] = "ROLLBACK",
};

struct jr_backend {
    sqlite3      *db;
    sqlite3_stmt *st[S_COUNT];  /* prepared on first use */
    char         *path;
    int           inotify_fd;   /* -1 until wake_fd is asked for */
    int           wal_watch;    /* inotify watch of the -wal file, or -1 */
    sqlite3_int64 data_version; /* last seen PRAGMA data_version */
    dev_t         dev;          /* identity of the file we opened */
    ino_t         ino;          /* 0: not a file */
    int           sync_normal;
    int           busy_ms;
    int           must_exist;   /* never create the file or the tables */
};

/* JR_EINPUT when SQLite refused the row itself (a constraint, a value
 * of the wrong type or too big): the same row would be refused again.
 * JR_EDB for the rest (busy, I/O error, disk full, cannot open...): the
 * database is in trouble and a retry may succeed. */
static int
error_class(int rc)
{
    switch (rc & 0xff) {
    case SQLITE_CONSTRAINT:
    case SQLITE_MISMATCH:
    case SQLITE_TOOBIG:
        return JR_EINPUT;
    default:
        return JR_EDB;
    }
}

static int
db_fail(jr_backend *b, jr_err *err, const char *what)
{
    return jr_fail(err, error_class(sqlite3_extended_errcode(b->db)),
                   "sqlite '%s': %s: %s", b->path, what,
                   sqlite3_errmsg(b->db));
}

/* Returns the statement, reset and unbound, or NULL with err set. */
static sqlite3_stmt *
stmt(jr_backend *b, int which, jr_err *err)
{
    sqlite3_stmt *s = b->st[which];

    if (s == NULL) {
        if (sqlite3_prepare_v3(b->db, sql_text[which], -1,
                               SQLITE_PREPARE_PERSISTENT, &s, NULL) != SQLITE_OK) {
            db_fail(b, err, "preparing a statement");
            return NULL;
        }
        b->st[which] = s;
    }
    sqlite3_reset(s);
    sqlite3_clear_bindings(s);
    return s;
}

/* Runs a statement that returns no rows. Returns changes or -1. */
static int
run(jr_backend *b, sqlite3_stmt *s, jr_err *err, const char *what)
{
    int rc = sqlite3_step(s);
    sqlite3_reset(s);
    if (rc != SQLITE_DONE && rc != SQLITE_ROW)
        return db_fail(b, err, what);
    return sqlite3_changes(b->db);
}

static int
simple(jr_backend *b, int which, jr_err *err, const char *what)
{
    sqlite3_stmt *s = stmt(b, which, err);
    return s == NULL ? -1 : run(b, s, err, what);
}

static int file_check(jr_backend *b, jr_err *err);

static int
begin(jr_backend *b, jr_err *err)
{
    if (file_check(b, err) < 0)
        return -1;
    return simple(b, S_BEGIN, err, "beginning a transaction") < 0 ? -1 : 0;
}

static int
commit(jr_backend *b, jr_err *err)
{
    if (simple(b, S_COMMIT, err, "committing") < 0) {
        simple(b, S_ROLLBACK, NULL, "");
        return -1;
    }
    return 0;
}

static void
rollback(jr_backend *b)
{
    if (!sqlite3_get_autocommit(b->db))
        simple(b, S_ROLLBACK, NULL, "");
}

static void
bind_text(sqlite3_stmt *s, int i, const char *v)
{
    if (v == NULL)
        sqlite3_bind_null(s, i);
    else
        sqlite3_bind_text(s, i, v, -1, SQLITE_STATIC);
}

/* Creates the file 0600 before SQLite does, so that umask cannot widen it;
 * SQLite gives -wal and -shm the mode of the database file. */
static int
create_private(const char *path, jr_err *err)
{
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0)
        return jr_fail_errno(err, JR_EDB, errno, "sqlite '%s': cannot "
                             "open or create the database file", path);
    close(fd);
    return 0;
}

/* Opens the connection of b: WAL, busy timeout, synchronous. */
static int
connect_db(jr_backend *b, jr_err *err)
{
    char pragmas[160];
    struct stat st;

    if (sqlite3_open_v2(b->path, &b->db, SQLITE_OPEN_READWRITE |
                        (b->must_exist ? 0 : SQLITE_OPEN_CREATE) |
                        SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK)
        return db_fail(b, err, "cannot open");
    sqlite3_extended_result_codes(b->db, 1);
    sqlite3_busy_timeout(b->db, b->busy_ms);
    snprintf(pragmas, sizeof pragmas, "PRAGMA journal_mode = WAL; "
             "PRAGMA synchronous = %s;", b->sync_normal ? "NORMAL" : "FULL");
    if (sqlite3_exec(b->db, pragmas, NULL, NULL, NULL) != SQLITE_OK)
        return db_fail(b, err, "setting WAL mode");
    if (stat(b->path, &st) == 0) {
        b->dev = st.st_dev;
        b->ino = st.st_ino;
    }
    return 0;
}

static void
disconnect_db(jr_backend *b)
{
    int i;

    for (i = 0; i < S_COUNT; i++) {
        sqlite3_finalize(b->st[i]);
        b->st[i] = NULL;
    }
    sqlite3_close(b->db);
    b->db = NULL;
}

static int sqlite_migrate(jr_backend *b, jr_err *err);

/* A connection keeps writing to a file that was deleted (or replaced) under
 * it, where no one will ever see the jobs: check, before each write, that
 * the path still leads to our file. A file put back at the path (restored)
 * is reopened; a missing one is an error until it is back. */
static int
file_check(jr_backend *b, jr_err *err)
{
    struct stat st;

    if (b->ino == 0)
        return 0;               /* :memory: */
    if (stat(b->path, &st) < 0)
        return jr_fail_errno(err, JR_EDB, errno, "sqlite '%s': the database "
                             "file is gone (deleted, or its directory)",
                             b->path);
    if (st.st_dev == b->dev && st.st_ino == b->ino)
        return 0;
    disconnect_db(b);
#ifdef __linux__
    if (b->wal_watch >= 0) {
        inotify_rm_watch(b->inotify_fd, b->wal_watch);
        b->wal_watch = -1;
    }
#endif
    b->ino = 0;
    if (connect_db(b, err) < 0)
        return -1;
    return sqlite_migrate(b, err);
}

static jr_backend *
sqlite_open(const char *path, const jr_backend_opts *o, jr_err *err)
{
    jr_backend *b;

    if (*path == '\0') {
        jr_fail(err, JR_EUSAGE, "sqlite: empty database path");
        return NULL;
    }
    if (o->must_exist && strcmp(path, ":memory:") != 0 &&
        access(path, F_OK) < 0) {
        jr_fail_errno(err, JR_ENOTFOUND, errno, "sqlite '%s': the database "
                      "does not exist (a push or 'jobrunner migrate' "
                      "creates it)", path);
        return NULL;
    }
    if (!o->must_exist && strcmp(path, ":memory:") != 0 &&
        create_private(path, err) < 0)
        return NULL;
    b = calloc(1, sizeof *b);
    if (b == NULL || (b->path = strdup(path)) == NULL) {
        free(b);
        jr_fail(err, JR_ENOMEM, "sqlite: out of memory");
        return NULL;
    }
    b->inotify_fd = -1;
    b->wal_watch = -1;
    b->data_version = -1;
    b->sync_normal = o->sync_normal;
    b->must_exist = o->must_exist;
    b->busy_ms = o->busy_timeout > 0 ? (int)(o->busy_timeout * 1000) : 5000;
    if (connect_db(b, err) < 0) {
        disconnect_db(b);
        free(b->path);
        free(b);
        return NULL;
    }
    return b;
}

static void
sqlite_close(jr_backend *b)
{
    if (b == NULL)
        return;
    disconnect_db(b);
    if (b->inotify_fd >= 0)
        close(b->inotify_fd);
    free(b->path);
    free(b);
}

static int
user_version(jr_backend *b, int *v, jr_err *err)
{
    sqlite3_stmt *s;
    int rc;

    if (sqlite3_prepare_v2(b->db, "PRAGMA user_version", -1, &s, NULL) !=
        SQLITE_OK)
        return db_fail(b, err, "reading the schema version");
    rc = sqlite3_step(s);
    *v = rc == SQLITE_ROW ? sqlite3_column_int(s, 0) : 0;
    sqlite3_finalize(s);
    return rc == SQLITE_ROW ? 0 : db_fail(b, err, "reading the schema version");
}

/* Applies one migration block (text up to the next marker or the end). */
static int
apply(jr_backend *b, int version, const char *sql, size_t len, jr_err *err)
{
    char *text = malloc(len + 64);
    char *msg = NULL;
    int rc;

    if (text == NULL)
        return jr_fail(err, JR_ENOMEM, "sqlite: out of memory");
    memcpy(text, sql, len);
    snprintf(text + len, 64, "\n;PRAGMA user_version = %d;", version);
    rc = sqlite3_exec(b->db, text, NULL, NULL, &msg);
    free(text);
    if (rc != SQLITE_OK) {
        jr_fail(err, JR_EDB, "sqlite '%s': migration %d: %s", b->path,
                version, msg ? msg : sqlite3_errmsg(b->db));
        sqlite3_free(msg);
        return -1;
    }
    return 0;
}

static int
sqlite_migrate(jr_backend *b, jr_err *err)
{
    static const char marker[] = "-- migration ";
    const char *p = strstr(jr_sqlite_sql, marker);
    int current;

    if (begin(b, err) < 0)
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
        if (version > current &&
            apply(b, version, body, next ? (size_t)(next - body) :
                  strlen(body), err) < 0)
            goto fail;
        p = next;
    }
    return commit(b, err);
fail:
    rollback(b);
    return -1;
}

static int
insert_one(jr_backend *b, const jr_push *p, double now, int64_t *id,
           jr_err *err)
{
    sqlite3_stmt *s = stmt(b, S_INSERT, err);
    int rc;

    if (s == NULL)
        return -1;
    bind_text(s, 1, p->name);
    bind_text(s, 2, p->payload ? p->payload : "{}");
    bind_text(s, 3, p->queue ? p->queue : "default");
    sqlite3_bind_int(s, 4, p->priority);
    if (p->max_retries >= 0)
        sqlite3_bind_int(s, 5, p->max_retries);
    sqlite3_bind_double(s, 6, p->run_at > 0 ? p->run_at : now + p->run_in);
    sqlite3_bind_double(s, 7, now);
    rc = sqlite3_step(s);
    sqlite3_reset(s);
    if (rc == SQLITE_CONSTRAINT_CHECK &&
        strstr(sqlite3_errmsg(b->db), "json_valid") != NULL)
        return jr_fail(err, JR_EINPUT, "job '%s': invalid JSON payload "
                       "(refused by the database)", p->name);
    if (rc != SQLITE_DONE)
        return jr_fail(err, error_class(rc), "job '%s': insert %s: %s",
                       p->name, error_class(rc) == JR_EINPUT ? "refused" :
                       "failed", sqlite3_errmsg(b->db));
    if (id != NULL)
        *id = sqlite3_last_insert_rowid(b->db);
    return 0;
}

/* Checks p[0..n) and inserts them, in the open transaction. */
static int
insert_all(jr_backend *b, const jr_push *p, int n, int64_t *ids, double now,
           jr_err *err)
{
    int i;

    for (i = 0; i < n; i++)
        if (jr_push_check(&p[i], 0, err) < 0)
            return -1;
    for (i = 0; i < n; i++)
        if (insert_one(b, &p[i], now, ids ? &ids[i] : NULL, err) < 0)
            return -1;
    return 0;
}

static int
sqlite_push(jr_backend *b, const jr_push *p, int n, int64_t *ids,
            jr_err *err)
{
    if (begin(b, err) < 0)
        return -1;
    if (insert_all(b, p, n, ids, jr_now(), err) < 0) {
        rollback(b);
        return -1;
    }
    return commit(b, err);
}

/* Writes ["a","b",...] of the (validated, quote-free) names into a new
 * string. */
static char *
names_json(const char *const *names, int n)
{
    size_t len = 3;
    char *s, *p;
    int i;

    for (i = 0; i < n; i++)
        len += strlen(names[i]) + 3;
    s = p = malloc(len);
    if (s == NULL)
        return NULL;
    *p++ = '[';
    for (i = 0; i < n; i++)
        p += sprintf(p, "%s\"%s\"", i ? "," : "", names[i]);
    *p++ = ']';
    *p = '\0';
    return s;
}

static jr_job *
row_job(sqlite3_stmt *s)
{
    jr_job *j = jr_job_new(sqlite3_column_int64(s, 0),
                           (const char *)sqlite3_column_text(s, 1),
                           (const char *)sqlite3_column_text(s, 2),
                           (const char *)sqlite3_column_text(s, 3),
                           (size_t)sqlite3_column_bytes(s, 3));
    if (j == NULL)
        return NULL;
    j->attempt = sqlite3_column_int(s, 4);
    j->max_retries = sqlite3_column_type(s, 5) == SQLITE_NULL ? -1 :
                     sqlite3_column_int(s, 5);
    j->priority = sqlite3_column_int(s, 6);
    j->run_at = sqlite3_column_double(s, 7);
    j->created_at = sqlite3_column_double(s, 8);
    return j;
}

/* Runs the claim statement inside the open transaction. Returns how many
 * jobs it filled out[] with, or -1 (the caller rolls back). */
static int
claim_rows(jr_backend *b, const char *token, double lease,
           const char *const *names, int nnames, int max, jr_job **out,
           double now, jr_err *err)
{
    sqlite3_stmt *s;
    char *json;
    int n = 0, rc;

    if (nnames == 0 || max <= 0)
        return 0;
    if ((json = names_json(names, nnames)) == NULL)
        return jr_fail(err, JR_ENOMEM, "sqlite: out of memory");
    if ((s = stmt(b, S_CLAIM, err)) == NULL) {
        free(json);
        return -1;
    }
    bind_text(s, 1, token);
    sqlite3_bind_double(s, 2, now + lease);
    sqlite3_bind_double(s, 3, now);
    bind_text(s, 4, json);
    sqlite3_bind_int(s, 5, max);
    while (n < max && (rc = sqlite3_step(s)) == SQLITE_ROW) {
        if ((out[n] = row_job(s)) == NULL) {
            rc = SQLITE_NOMEM;
            break;
        }
        n++;
    }
    if (n == max)
        rc = SQLITE_DONE;
    sqlite3_reset(s);
    free(json);
    if (rc != SQLITE_DONE) {
        db_fail(b, err, "claiming jobs");
        while (n > 0)
            free(out[--n]);
        return -1;
    }
    qsort(out, (size_t)n, sizeof *out, jr_job_order);
    return n;
}

/* Commits a transaction that claimed out[0..n); on failure frees them. */
static int
commit_claimed(jr_backend *b, jr_job **out, int n, jr_err *err)
{
    if (commit(b, err) == 0)
        return n;
    while (n > 0)
        free(out[--n]);
    return -1;
}

static int
sqlite_claim(jr_backend *b, const char *token, double lease,
             const char *const *names, int nnames, int max, jr_job **out,
             jr_err *err)
{
    int n;

    if (nnames == 0 || max <= 0)
        return 0;
    /* begin first: it may reopen the file, which remakes statements */
    if (begin(b, err) < 0)
        return -1;
    if ((n = claim_rows(b, token, lease, names, nnames, max, out, jr_now(),
                        err)) < 0) {
        rollback(b);
        return -1;
    }
    return commit_claimed(b, out, n, err);
}

static int
result_stmt_index(int kind)
{
    switch (kind) {
    case JR_DONE:    return S_DONE;
    case JR_RETRY:   return S_RETRY;
    case JR_DEAD:    return S_DEAD;
    case JR_SNOOZE:  return S_SNOOZE;
    case JR_RELEASE: return S_RELEASE;
    case JR_EXPIRED: return S_EXPIRED;
    default:         return -1;
    }
}

/* Applies one result; returns 1 if the row was still ours, 0 if fenced
 * off, -1 on error. */
static int
complete_one(jr_backend *b, const char *token, const jr_result *r, double now,
             jr_err *err)
{
    int which = result_stmt_index(r->kind), changed;
    sqlite3_stmt *s;

    if (which < 0)
        return jr_fail(err, JR_EPROTO, "job %lld: unknown result kind %d",
                       (long long)r->id, r->kind);
    if ((s = stmt(b, which, err)) == NULL)
        return -1;
    sqlite3_bind_int64(s, 1, r->id);
    bind_text(s, 2, token);
    if (which != S_DONE) {
        sqlite3_bind_double(s, 3, now);
        sqlite3_bind_double(s, 4, r->delay);
        bind_text(s, 5, r->error);
        bind_text(s, 6, r->generation);
    }
    if ((changed = run(b, s, err, "recording a result")) <= 0)
        return changed;
    if (r->kind == JR_DONE && insert_all(b, r->pushes, r->npushes, NULL, now,
                                         err) < 0)
        return -1;
    return 1;
}

static int
sqlite_complete(jr_backend *b, const char *token, const jr_result *r, int n,
                jr_err *err)
{
    double now = jr_now();
    int applied = 0, i, rc;

    if (n == 0)
        return 0;
    if (begin(b, err) < 0)
        return -1;
    for (i = 0; i < n; i++) {
        if ((rc = complete_one(b, token, &r[i], now, err)) < 0) {
            rollback(b);
            return -1;
        }
        applied += rc;
    }
    return commit(b, err) < 0 ? -1 : applied;
}

/* Records the results and claims, in one transaction: one fsync a round
 * instead of two. */
static int
sqlite_complete_claim(jr_backend *b, const char *token, const jr_result *r,
                      int nr, int *applied, double lease,
                      const char *const *names, int nnames, int max,
                      jr_job **out, jr_err *err)
{
    double now = jr_now();
    int i, rc, n;

    *applied = 0;
    if (begin(b, err) < 0)
        return -1;
    for (i = 0; i < nr; i++) {
        if ((rc = complete_one(b, token, &r[i], now, err)) < 0) {
            rollback(b);
            return -1;
        }
        *applied += rc;
    }
    if ((n = claim_rows(b, token, lease, names, nnames, max, out, now,
                        err)) < 0) {
        rollback(b);
        return -1;
    }
    return commit_claimed(b, out, n, err);
}

static int
sqlite_renew(jr_backend *b, const char *token, double lease, jr_err *err)
{
    sqlite3_stmt *s;

    if (file_check(b, err) < 0 || (s = stmt(b, S_RENEW, err)) == NULL)
        return -1;
    bind_text(s, 1, token);
    sqlite3_bind_double(s, 2, jr_now() + lease);
    return run(b, s, err, "renewing leases");
}

static int
sqlite_rescue(jr_backend *b, jr_err *err)
{
    sqlite3_stmt *s;

    if (file_check(b, err) < 0 || (s = stmt(b, S_RESCUE, err)) == NULL)
        return -1;
    sqlite3_bind_double(s, 1, jr_now());
    return run(b, s, err, "requeueing expired leases");
}

static long
sqlite_count_ready(jr_backend *b, const char *const *names, int nnames,
                   long limit, jr_err *err)
{
    sqlite3_stmt *s;
    char *json;
    long n;
    int rc;

    if (nnames == 0)
        return 0;
    if ((json = names_json(names, nnames)) == NULL)
        return jr_fail(err, JR_ENOMEM, "sqlite: out of memory");
    if ((s = stmt(b, S_READY, err)) == NULL) {
        free(json);
        return -1;
    }
    sqlite3_bind_double(s, 1, jr_now());
    bind_text(s, 2, json);
    sqlite3_bind_int64(s, 3, limit);
    rc = sqlite3_step(s);
    n = (long)sqlite3_column_int64(s, 0);
    sqlite3_reset(s);
    free(json);
    return rc == SQLITE_ROW ? n : db_fail(b, err, "counting ready jobs");
}

static int
sqlite_stats(jr_backend *b, jr_stat_cb cb, void *arg, jr_err *err)
{
    sqlite3_stmt *s = stmt(b, S_STATS, err);
    jr_stat_row row;
    int rc;

    if (s == NULL)
        return -1;
    sqlite3_bind_double(s, 1, jr_now());
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        row.name = (const char *)sqlite3_column_text(s, 0);
        row.ready = sqlite3_column_int64(s, 1);
        row.scheduled = sqlite3_column_int64(s, 2);
        row.running = sqlite3_column_int64(s, 3);
        row.dead = sqlite3_column_int64(s, 4);
        if (cb(&row, arg) != 0)
            break;
    }
    sqlite3_reset(s);
    return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 :
           db_fail(b, err, "reading stats");
}

static int
sqlite_dead_list(jr_backend *b, int limit, jr_dead_cb cb, void *arg,
                 jr_err *err)
{
    sqlite3_stmt *s = stmt(b, S_DEAD_LIST, err);
    jr_dead_row row;
    int rc;

    if (s == NULL)
        return -1;
    sqlite3_bind_int(s, 1, limit > 0 ? limit : -1);     /* -1: no limit */
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        row.id = sqlite3_column_int64(s, 0);
        row.name = (const char *)sqlite3_column_text(s, 1);
        row.queue = (const char *)sqlite3_column_text(s, 2);
        row.attempts = sqlite3_column_int(s, 3);
        row.last_error = (const char *)sqlite3_column_text(s, 4);
        row.generation = (const char *)sqlite3_column_text(s, 5);
        row.died_at = sqlite3_column_double(s, 6);
        row.created_at = sqlite3_column_double(s, 7);
        if (cb(&row, arg) != 0)
            break;
    }
    sqlite3_reset(s);
    return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 :
           db_fail(b, err, "listing dead jobs");
}

static int
sqlite_dead_retry(jr_backend *b, const int64_t *ids, int n, jr_err *err)
{
    sqlite3_stmt *s;
    double now = jr_now();
    int total = 0, i, rc;

    if (begin(b, err) < 0)
        return -1;
    if (n < 0) {
        if ((s = stmt(b, S_DEAD_RETRY_ALL, err)) == NULL)
            goto fail;
        sqlite3_bind_double(s, 1, now);
        if ((total = run(b, s, err, "retrying dead jobs")) < 0)
            goto fail;
    }
    for (i = 0; i < n; i++) {
        if ((s = stmt(b, S_DEAD_RETRY, err)) == NULL)
            goto fail;
        sqlite3_bind_int64(s, 1, ids[i]);
        sqlite3_bind_double(s, 2, now);
        if ((rc = run(b, s, err, "retrying a dead job")) < 0)
            goto fail;
        total += rc;
    }
    return commit(b, err) < 0 ? -1 : total;
fail:
    rollback(b);
    return -1;
}

static int
sqlite_dead_purge(jr_backend *b, double older_than, jr_err *err)
{
    sqlite3_stmt *s;

    if (file_check(b, err) < 0 || (s = stmt(b, S_DEAD_PURGE, err)) == NULL)
        return -1;
    sqlite3_bind_double(s, 1, jr_now() - older_than);
    return run(b, s, err, "purging dead jobs");
}

/* Watches the -wal file: every commit, ours or another process's, writes
 * it. Our own commits wake us too; changed() filters them out. */
static int
sqlite_wake_fd(jr_backend *b)
{
#ifdef __linux__
    char wal[4096];

    if (b->inotify_fd < 0)
        b->inotify_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (b->inotify_fd >= 0 && b->wal_watch < 0) {
        snprintf(wal, sizeof wal, "%s-wal", b->path);
        b->wal_watch = inotify_add_watch(b->inotify_fd, wal, IN_MODIFY);
    }
    return b->wal_watch >= 0 ? b->inotify_fd : -1;
#else
    (void)b;
    return -1;
#endif
}

static int
sqlite_changed(jr_backend *b, jr_err *err)
{
    sqlite3_stmt *s;
    sqlite3_int64 v;
    char buf[4096];
    int rc;

    if (b->inotify_fd >= 0)
        while (read(b->inotify_fd, buf, sizeof buf) > 0)
            ;
    if ((s = stmt(b, S_DATA_VERSION, err)) == NULL)
        return -1;
    rc = sqlite3_step(s);
    v = sqlite3_column_int64(s, 0);
    sqlite3_reset(s);
    if (rc != SQLITE_ROW)
        return db_fail(b, err, "reading data_version");
    rc = v != b->data_version;
    b->data_version = v;
    return rc;
}

const jr_backend_ops jr_sqlite_ops = {
    .name = "sqlite",
    .open = sqlite_open,
    .migrate = sqlite_migrate,
    .push = sqlite_push,
    .claim = sqlite_claim,
    .complete = sqlite_complete,
    .complete_claim = sqlite_complete_claim,
    .renew = sqlite_renew,
    .rescue = sqlite_rescue,
    .count_ready = sqlite_count_ready,
    .stats = sqlite_stats,
    .dead_list = sqlite_dead_list,
    .dead_retry = sqlite_dead_retry,
    .dead_purge = sqlite_dead_purge,
    .wake_fd = sqlite_wake_fd,
    .changed = sqlite_changed,
    .close = sqlite_close,
};
