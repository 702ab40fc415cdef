/* conn.c - the SQLite engine's connection: one file in WAL mode, opened
 * and closed, and checked before each write that the path still leads to
 * it; the statement cache's slow path; the IMMEDIATE transactions every
 * write runs in (a reader never has to upgrade its lock), which turn the
 * schema's triggers off while their rules are kept in C; wake-ups from
 * inotify on the -wal file, confirmed by PRAGMA data_version; the shared
 * error helpers. The file and its -wal/-shm are created mode 0600. Uses
 * sqlite_int.h; migrate.c when a file put back is reopened. */
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

#include "sqlite/sqlite_int.h"

/* The file's statements: slots of sql_text[] (sqlite_int.h). */
enum { S_BEGIN, S_COMMIT, S_ROLLBACK, S_SCHEMA_VERSION, S_TRIGGERS,
       S_DATA_VERSION, S_COUNT };

static const char *const sql_text[S_COUNT] = {
    [S_BEGIN] = "BEGIN IMMEDIATE",
    [S_COMMIT] = "COMMIT",
    [S_ROLLBACK] = "ROLLBACK",
    /* the schema's triggers (see triggers_check) */
    [S_SCHEMA_VERSION] = "PRAGMA schema_version",
    [S_TRIGGERS] =
        "SELECT name, sql FROM sqlite_schema WHERE type = 'trigger'",
    [S_DATA_VERSION] = "PRAGMA data_version",
};

static sqlite3_stmt *
stmt(jr_backend *b, int which, jr_err *err)
{
    return jr_sqlite_stmt(b, &sql_text[which], err);
}

/* JR_EINPUT when SQLite refused the row itself (a constraint, a value
 * of the wrong type or too big): the same row would be refused again.
 * JR_EDB for the rest (busy, I/O error, disk full, cannot open...): the
 * database is in trouble and a retry may succeed. */
int
jr_sqlite_error_class(int rc)
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

int
jr_sqlite_fail(jr_backend *b, jr_err *err, const char *what)
{
    return jr_fail(err,
                   jr_sqlite_error_class(sqlite3_extended_errcode(b->db)),
                   "sqlite '%s': %s: %s", b->path, what,
                   sqlite3_errmsg(b->db));
}

/* The cache's slow path (jr_sqlite_stmt is the fast one). sql NULL is a
 * bug: the statement has no text in the file that asked for it. */
sqlite3_stmt *
jr_sqlite_prepare(jr_backend *b, const char *const *key, const char *sql,
                  jr_err *err)
{
    sqlite3_stmt *s;

    if (sql == NULL) {
        jr_fail(err, JR_EDB, "sqlite: a statement has no text");
        return NULL;
    }
    if (sqlite3_prepare_v3(b->db, sql, -1, SQLITE_PREPARE_PERSISTENT, &s,
                           NULL) != SQLITE_OK) {
        jr_sqlite_fail(b, err, "preparing a statement");
        return NULL;
    }
    if (jr_stmtmap_put(&b->st, key, s) < 0) {
        sqlite3_finalize(s);
        jr_fail(err, JR_ENOMEM, "sqlite: out of memory for a statement");
        return NULL;
    }
    return s;
}

static int
simple(jr_backend *b, int which, jr_err *err, const char *what)
{
    sqlite3_stmt *s = stmt(b, which, err);
    return s == NULL ? -1 : run(b, s, err, what);
}

static int triggers_check(jr_backend *b, jr_err *err);

/* Every write of the library is in one of these transactions: the
 * trigger set is checked inside it, so no write runs with a stale one. */
int
jr_sqlite_begin(jr_backend *b, jr_err *err)
{
    if (jr_sqlite_file_check(b, err) < 0 ||
        simple(b, S_BEGIN, err, "beginning a transaction") < 0)
        return -1;
    b->queue_known[0] = b->pathless[0] = b->fair_seen[0] = '\0';
    if (triggers_check(b, err) < 0) {
        jr_sqlite_rollback(b);
        return -1;
    }
    return 0;
}

int
jr_sqlite_commit(jr_backend *b, jr_err *err)
{
    if (simple(b, S_COMMIT, err, "committing") < 0) {
        simple(b, S_ROLLBACK, NULL, "");
        return -1;
    }
    return 0;
}

void
jr_sqlite_rollback(jr_backend *b)
{
    if (!sqlite3_get_autocommit(b->db))
        simple(b, S_ROLLBACK, NULL, "");
}

/* Ends the transaction of a single write that returned rc (changes, or
 * -1 with err set): committed, or rolled back. Returns rc or -1. */
int
jr_sqlite_write_end(jr_backend *b, int rc, jr_err *err)
{
    if (rc < 0) {
        jr_sqlite_rollback(b);
        return -1;
    }
    return jr_sqlite_commit(b, err) < 0 ? -1 : rc;
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
    int rc, waited;

    if (sqlite3_open_v2(b->path, &b->db, SQLITE_OPEN_READWRITE |
                        (b->must_exist ? 0 : SQLITE_OPEN_CREATE) |
                        SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK)
        return jr_sqlite_fail(b, err, "cannot open");
    sqlite3_extended_result_codes(b->db, 1);
    b->triggers_off = 0;        /* a new connection runs them */
    b->schema_seen = -1;
    sqlite3_busy_timeout(b->db, b->busy_ms);
    snprintf(pragmas, sizeof pragmas, "PRAGMA journal_mode = WAL; "
             "PRAGMA synchronous = %s;", b->sync_normal ? "NORMAL" : "FULL");
    /* SQLite answers BUSY here without its busy handler while another
     * connection turns a new file to WAL (a push racing a runner's first
     * start): wait for it as for any lock, busy_timeout at most */
    for (waited = 0; (rc = sqlite3_exec(b->db, pragmas, NULL, NULL, NULL))
         != SQLITE_OK && (rc & 0xff) == SQLITE_BUSY && waited < b->busy_ms;
         waited += 10)
        usleep(10000);
    if (rc != SQLITE_OK)
        return jr_sqlite_fail(b, err, "setting WAL mode");
    if (jr_sqlite_attach(b, err) < 0 ||
        jr_sqlite_crypt_functions(b, err) < 0)
        return -1;
    if (stat(b->path, &st) == 0) {
        b->dev = st.st_dev;
        b->ino = st.st_ino;
    }
    return 0;
}

static void
disconnect_db(jr_backend *b)
{
    unsigned i;

    for (i = 0; i < b->st.cap; i++)
        if (b->st.key[i] != NULL)
            sqlite3_finalize(b->st.val[i]);
    jr_stmtmap_clear(&b->st);
    jr_sqlite_sql_forget(b);
    sqlite3_close(b->db);
    b->db = NULL;
}

/* A connection keeps writing to a file that was deleted (or replaced) under
 * it, where no one will ever see the jobs: check, before each write, that
 * the path still leads to our file. A file put back at the path (restored)
 * is reopened; a missing one is an error until it is back. */
int
jr_sqlite_file_check(jr_backend *b, jr_err *err)
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
    b->reconnects++;
    return jr_sqlite_migrate(b, err);
}

jr_backend *
jr_sqlite_open(const char *path, const jr_backend_opts *o, jr_err *err)
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
    if (b == NULL || (b->path = strdup(path)) == NULL ||
        (o->attach != NULL && (b->attach = strdup(o->attach)) == NULL)) {
        if (b != NULL)
            free(b->path);
        free(b);
        jr_fail(err, JR_ENOMEM, "sqlite: out of memory");
        return NULL;
    }
    b->inotify_fd = -1;
    b->fin_fd = -1;
    b->wal_watch = -1;
    b->data_version = -1;
    b->sync_normal = o->sync_normal;
    b->durable_push = o->durable_push;
    b->must_exist = o->must_exist;
    b->keep_completed = o->keep_completed;
    b->opf = o->on_parent_failure;
    b->result_ttl = o->result_ttl > 0 ? o->result_ttl : 3600;
    b->busy_ms = o->busy_timeout > 0 ? (int)(o->busy_timeout * 1000) : 5000;
    if (connect_db(b, err) < 0) {
        disconnect_db(b);
        jr_stmtmap_free(&b->st);
        free(b->attach);
        free(b->path);
        free(b);
        return NULL;
    }
    return b;
}

void
jr_sqlite_close(jr_backend *b)
{
    if (b == NULL)
        return;
    disconnect_db(b);
    if (b->inotify_fd >= 0)
        close(b->inotify_fd);
    if (b->fin_fd >= 0)
        close(b->fin_fd);
    for (int i = 0; i < JR_LIMIT_TOP; i++)
        free(b->lim_keys[i]);
    jr_stmtmap_free(&b->st);
    free(b->attach);
    free(b->path);
    free(b);
}

/* ---- the schema's triggers ----
 *
 * The schema's triggers hold plain-SQL producers to three push rules:
 * run_at a finite time (jobs_run_at_check), the queue of an inserted
 * (or moved) job known in the queues table (jobs_queue_known, _moved),
 * and a name and queue that are text with no NUL byte (jobs_names_ok,
 * _moved). The library keeps them itself: jr_push_check refuses a bad
 * run_at before any row is bound, each insert makes its queue known
 * (push.c's queue_known), names are bound as C strings of text, and no
 * statement here changes a job's queue.
 * A trigger is a sub-program run for each row: with them, a batch push
 * costs about 31,000 instructions a job, without them about 19,000
 * (docs/performance.md, "Batch push"). So the connection runs without
 * the schema's triggers (SQLITE_DBCONFIG_ENABLE_TRIGGER off; TEMP
 * triggers, and so RETURNING, still work) while they are exactly those
 * schema.sql creates. Another trigger (yours) or one of ours changed
 * turns them all back on. */

/* 1 if sql is the newest text schema.sql gives the trigger name. */
static int
own_trigger(const char *name, const char *sql)
{
    const char *p = jr_sqlite_sql, *last = NULL;
    char head[64];
    size_t len;

    if (name == NULL || sql == NULL)
        return 0;
    len = strlen(sql);
    if (snprintf(head, sizeof head, "CREATE TRIGGER %s ", name) >=
        (int)sizeof head)
        return 0;
    while ((p = strstr(p, head)) != NULL)
        last = p++;
    return last != NULL && strncmp(last, sql, len) == 0 && last[len] == ';';
}

/* Sets the connection's triggers on or off. Changing it expires every
 * prepared statement: each is compiled again at its next step. */
int
jr_sqlite_triggers_set(jr_backend *b, int off, jr_err *err)
{
    int on;

    if (off == b->triggers_off)
        return 0;
    if (sqlite3_db_config(b->db, SQLITE_DBCONFIG_ENABLE_TRIGGER, !off, &on)
        != SQLITE_OK || on != !off)
        return jr_fail(err, JR_EDB, "sqlite '%s': cannot turn the schema's "
                       "triggers %s", b->path, off ? "off" : "on");
    b->triggers_off = off;
    return 0;
}

/* The one integer a PRAGMA statement which returns, into *v; -1 with err
 * set (what says what was being read). */
static int
pragma_int(jr_backend *b, int which, const char *what, sqlite3_int64 *v,
           jr_err *err)
{
    sqlite3_stmt *s = stmt(b, which, err);
    int rc;

    if (s == NULL)
        return -1;
    rc = sqlite3_step(s);
    *v = sqlite3_column_int64(s, 0);
    sqlite3_reset(s);
    return rc == SQLITE_ROW ? 0 : jr_sqlite_fail(b, err, what);
}

/* In a write transaction: when the schema changed since the last look,
 * reads its triggers and turns them off if all are our own, else on. */
static int
triggers_check(jr_backend *b, jr_err *err)
{
    sqlite3_stmt *s;
    sqlite3_int64 version;
    int rc, own = 1;

    if (pragma_int(b, S_SCHEMA_VERSION, "reading the schema version",
                   &version, err) < 0)
        return -1;
    if (version == b->schema_seen)
        return 0;
    if ((s = stmt(b, S_TRIGGERS, err)) == NULL)
        return -1;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW)
        own = own && own_trigger((const char *)sqlite3_column_text(s, 0),
                                 (const char *)sqlite3_column_text(s, 1));
    sqlite3_reset(s);
    if (rc != SQLITE_DONE)
        return jr_sqlite_fail(b, err, "reading the schema's triggers");
    if (jr_sqlite_triggers_set(b, own, err) < 0)
        return -1;
    b->schema_seen = version;
    return 0;
}

/* Watches the -wal file: every commit, ours or another process's, writes
 * it. Our own commits wake us too; changed() filters them out. */
int
jr_sqlite_wake_fd(jr_backend *b)
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

/* 1 if another connection holds the write lock now (its WAL write may be
 * an fsync away from its commit), or when that cannot be told; 0 if none
 * does, with *v data_version read inside that trial transaction (no commit
 * can be on its way while we hold the lock: exact, and no second read
 * transaction with its pair of lock calls). A BEGIN IMMEDIATE that does
 * not wait: our own connection is between transactions here. */
static int
writer_busy(jr_backend *b, sqlite3_int64 *v, jr_err *err)
{
    sqlite3_stmt *s = stmt(b, S_BEGIN, NULL);
    int rc;

    if (s == NULL || !sqlite3_get_autocommit(b->db))
        return 1;
    sqlite3_busy_timeout(b->db, 0);
    rc = sqlite3_step(s);
    sqlite3_reset(s);
    sqlite3_busy_timeout(b->db, b->busy_ms);
    if (rc != SQLITE_DONE)
        return 1;
    rc = pragma_int(b, S_DATA_VERSION, "reading data_version", v, err);
    simple(b, S_ROLLBACK, NULL, "");
    return rc < 0 ? -1 : 0;
}

/* Every WAL write wakes us, our own commits' too: data_version tells
 * another process's commit (1) from none (0). A producer's write wakes us
 * an fsync before its commit shows: while another connection still holds
 * the write lock, 2 (look again soon). The lock is looked at first: a
 * commit that ends in between shows in data_version, read then in a read
 * transaction of its own (a producer's commit shows before it lets the
 * lock go: unread, the looks while it held the lock doubled). */
int
jr_sqlite_changed(jr_backend *b, jr_err *err)
{
    sqlite3_int64 v;
    char buf[4096];
    int rc, busy;

    if (b->inotify_fd >= 0)
        while (read(b->inotify_fd, buf, sizeof buf) > 0)
            ;
    if ((busy = writer_busy(b, &v, err)) < 0)
        return -1;
    if (busy &&
        pragma_int(b, S_DATA_VERSION, "reading data_version", &v, err) < 0)
        return -1;
    rc = v != b->data_version;
    b->data_version = v;
    return rc ? 1 : busy ? 2 : 0;
}

unsigned
jr_sqlite_reconnects(jr_backend *b)
{
    return b->reconnects;
}

/* Writes ["a","b",...] of the (validated, quote-free) names into a new
 * string. */
char *
jr_sqlite_names_json(const char *const *names, int n)
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
