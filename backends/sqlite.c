/* sqlite.c - the embedded engine: one SQLite file in WAL mode. Owns the
 * connection and its prepared statements; writes begin IMMEDIATE so a
 * reader never has to upgrade its lock; the file and its -wal/-shm are
 * created mode 0600. Wake-ups come from inotify on the -wal file, confirmed
 * by PRAGMA data_version. Exports only jr_sqlite_ops. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <math.h>
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
#include "limitpick.h"
#include "base/util.h"

extern const char jr_sqlite_sql[];      /* build/sqlite_sql.c */

enum {
    S_CLAIM_QUEUES, S_QUEUE_READY, S_CLAIM_CANDIDATES, S_CLAIM,
    S_CLAIM_ONE,
    S_DONE, S_DONE_MANY, S_KEEP, S_RETRY, S_DEAD, S_SNOOZE, S_RELEASE, S_EXPIRED,
    S_CANCELLED, S_PROGRESS,
    S_INSERT, S_INSERT_MANY, S_INSERT_MANY_IDS,
    S_INSERT_BARE, S_INSERT_MANY_BARE, S_INSERT_MANY_BARE_IDS, S_LIMIT_PATH,
    S_RENEW, S_RESCUE, S_STATS, S_DEAD_LIST, S_DEAD_RETRY, S_DEAD_RETRY_ALL,
    S_DEAD_PURGE, S_DATA_VERSION, S_BEGIN, S_COMMIT, S_ROLLBACK,
    S_PRUNE_COMPLETED, S_PRUNE_CANCELLED, S_PRUNE_DEAD,
    S_CANCEL_QUEUED, S_CANCEL_RUNNING, S_EXISTS, S_CANCEL_POLL,
    S_PAUSE, S_RESUME, S_QUEUE_LIST, S_SHOW, S_LIST, S_PAUSED,
    S_READY_BY_QUEUE,
    S_UNIQUE_HOLDER, S_UNIQUE_WINDOW, S_UNIQUE_TAKE, S_UNIQUE_REPLACE,
    S_PRUNE_UNIQUE,
    S_DEAD_DELETE,
    S_LIM_CANDIDATES, S_LIM_RUNNING, S_LIM_BUCKET, S_LIM_BUCKET_SET,
    S_LIM_PRUNE, S_LIM_PATH_SET, S_LIM_USE, S_LIM_USE_TOP, S_LIM_TOKENS,
    S_SCHEMA_VERSION, S_TRIGGERS, S_QUEUE_SEEN, S_QUEUE_KNOWN,
    S_QUEUE_PRUNE,
    S_COUNT
};

#define NAME_BUF 129            /* a job or queue name (1 to 128 bytes), NUL */

/* The columns of show and list, in the order row_fields reads them. */
#define JOB_COLUMNS \
    "id, name, queue, state, attempts, max_retries, priority, run_at," \
    " created_at, updated_at, started_at, finished_at, last_error," \
    " generation, locked_by, locked_until, progress_done, progress_total," \
    " progress_note, cancel_requested, limit_key"

/* A requeue (retry, snooze, release, rescue) of a job whose cancel was
 * requested ends it cancelled instead. */
#define REQUEUE_STATE \
    " state = CASE WHEN cancel_requested THEN 'cancelled' ELSE 'queued' END," \
    " finished_at = CASE WHEN cancel_requested THEN ?3 END,"

/* A dead job retried keeps its unique key only if no queued or running
 * job holds it and no newer dead job has it; else it runs as a plain job
 * (the unique index would refuse the retry). */
#define RETRY_KEY \
    " unique_key = CASE WHEN EXISTS (SELECT 1 FROM jobs o" \
    "  WHERE o.name = jobs.name AND o.unique_key = jobs.unique_key" \
    "  AND (o.state IN ('queued', 'running')" \
    "  OR (o.state = 'dead' AND o.id > jobs.id)))" \
    "  THEN NULL ELSE unique_key END,"
/* A push's limit key: ?9 as given, else its payload (?2) at the path the
 * runner declared for its name (?1), if that is a string or number of 1
 * to 256 bytes; else NULL, unkeyed. */
#define LIMIT_KEY_OF \
    "coalesce(?9, (SELECT CASE WHEN json_valid(?2)" \
    " AND json_type(?2, '$.' || lp.path) IN ('text', 'integer', 'real')" \
    " AND length(CAST(json_extract(?2, '$.' || lp.path) AS BLOB))" \
    " BETWEEN 1 AND 256 THEN CAST(json_extract(?2, '$.' || lp.path) AS TEXT)" \
    " END FROM limit_paths lp WHERE lp.name = ?1))"

/* A push's row but its limit key (?9, or LIMIT_KEY_OF), and ")". */
#define INSERT_JOB \
    "INSERT INTO jobs (name, payload, queue, priority, max_retries," \
    " run_at, created_at, updated_at, unique_key, limit_key)" \
    " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?7, ?8, "

static const char *const sql_text[S_COUNT] = {
    /* the queues a claim may take from, by name: those with a queued job
     * (a skip scan of jobs_claim, one seek per such queue) and not paused,
     * so a claim's cost follows the queues with work, not the rows of
     * queues */
    [S_CLAIM_QUEUES] =
        "WITH RECURSIVE w(name) AS (SELECT min(queue) FROM jobs"
        "  WHERE state = 'queued'"
        " UNION ALL SELECT (SELECT min(queue) FROM jobs"
        "  WHERE state = 'queued' AND queue > w.name)"
        " FROM w WHERE w.name IS NOT NULL)"
        " SELECT name FROM w WHERE name IS NOT NULL"
        " AND NOT EXISTS (SELECT 1 FROM queues p WHERE p.name = w.name"
        "  AND p.paused = 1)",
    /* whether queue ?1 has a job of names ?3 ready by ?2 */
    [S_QUEUE_READY] =
        "SELECT 1 FROM jobs WHERE state = 'queued' AND queue = ?1"
        " AND run_at <= ?2 AND name IN (SELECT value FROM json_each(?3))"
        " LIMIT 1",
    /* the first ?4 ready jobs of one queue (the jobs_claim index) */
    [S_CLAIM_CANDIDATES] =
        "SELECT id, priority, run_at FROM jobs WHERE state = 'queued'"
        " AND queue = ?1 AND run_at <= ?2"
        " AND name IN (SELECT value FROM json_each(?3))"
        " ORDER BY priority, run_at, id LIMIT ?4",
    [S_CLAIM] =
        "UPDATE jobs SET state = 'running', attempts = attempts + 1,"
        " locked_by = ?1, locked_until = ?2, updated_at = ?3,"
        " started_at = ?3, progress_done = NULL, progress_total = NULL,"
        " progress_note = NULL"
        " WHERE id IN (SELECT value FROM json_each(?4)) AND state = 'queued'"
        " RETURNING id, name, queue, payload, attempts, max_retries,"
        " priority, run_at, created_at",
    /* the same when one queue has ready jobs and none is capped: its
     * first ?6 ready jobs of names ?4 in queue ?5, in one statement */
    [S_CLAIM_ONE] =
        "UPDATE jobs SET state = 'running', attempts = attempts + 1,"
        " locked_by = ?1, locked_until = ?2, updated_at = ?3,"
        " started_at = ?3, progress_done = NULL, progress_total = NULL,"
        " progress_note = NULL"
        " WHERE id IN (SELECT id FROM jobs WHERE state = 'queued'"
        " AND queue = ?5 AND run_at <= ?3"
        " AND name IN (SELECT value FROM json_each(?4))"
        " ORDER BY priority, run_at, id LIMIT ?6) AND state = 'queued'"
        " RETURNING id, name, queue, payload, attempts, max_retries,"
        " priority, run_at, created_at",
    [S_DONE] =
        "DELETE FROM jobs WHERE id = ?1 AND state = 'running'"
        " AND locked_by = ?2",
    /* plain successes of one batch: one statement, not one each */
    [S_DONE_MANY] =
        "DELETE FROM jobs WHERE id IN (SELECT value FROM json_each(?1))"
        " AND state = 'running' AND locked_by = ?2",
    [S_KEEP] =
        "UPDATE jobs SET state = 'completed', finished_at = ?3,"
        " generation = coalesce(?6, generation), locked_by = NULL,"
        " locked_until = NULL, cancel_requested = 0, updated_at = ?3"
        " WHERE id = ?1 AND state = 'running' AND locked_by = ?2",
    [S_RETRY] =
        "UPDATE jobs SET" REQUEUE_STATE " run_at = ?3 + ?4, last_error = ?5,"
        " generation = ?6, locked_by = NULL, locked_until = NULL,"
        " updated_at = ?3"
        " WHERE id = ?1 AND state = 'running' AND locked_by = ?2",
    [S_DEAD] =
        "UPDATE jobs SET state = 'dead', died_at = ?3, finished_at = ?3,"
        " last_error = ?5,"
        " generation = ?6, locked_by = NULL, locked_until = NULL,"
        " updated_at = ?3"
        " WHERE id = ?1 AND state = 'running' AND locked_by = ?2",
    [S_SNOOZE] =
        "UPDATE jobs SET" REQUEUE_STATE " run_at = ?3 + ?4,"
        " attempts = attempts - 1, generation = ?6, locked_by = NULL,"
        " locked_until = NULL, updated_at = ?3"
        " WHERE id = ?1 AND state = 'running' AND locked_by = ?2",
    [S_RELEASE] =
        "UPDATE jobs SET" REQUEUE_STATE " attempts = attempts - 1,"
        " locked_by = NULL, locked_until = NULL, updated_at = ?3"
        " WHERE id = ?1 AND state = 'running' AND locked_by = ?2",
    [S_EXPIRED] =
        "UPDATE jobs SET state = 'dead', died_at = ?3, finished_at = ?3,"
        " attempts = attempts - 1,"
        " last_error = coalesce(?5, last_error), locked_by = NULL,"
        " locked_until = NULL, updated_at = ?3"
        " WHERE id = ?1 AND state = 'running' AND locked_by = ?2",
    [S_CANCELLED] =
        "UPDATE jobs SET state = 'cancelled', finished_at = ?3,"
        " last_error = coalesce(?5, 'cancelled'),"
        " generation = coalesce(?6, generation), locked_by = NULL,"
        " locked_until = NULL, updated_at = ?3"
        " WHERE id = ?1 AND state = 'running' AND locked_by = ?2",
    [S_PROGRESS] =
        "UPDATE jobs SET progress_done = ?3, progress_total = ?4,"
        " progress_note = ?5"
        " WHERE id = ?1 AND state = 'running' AND locked_by = ?2",
    [S_INSERT] = INSERT_JOB LIMIT_KEY_OF ")",
    /* the same for a job whose name has no limit path: its key is ?9 (a
     * row looks up limit_paths in a subquery of its own, about 2,300
     * instructions; README "Batch push") */
    [S_INSERT_BARE] = INSERT_JOB "?9)",
    [S_LIMIT_PATH] = "SELECT 1 FROM limit_paths WHERE name = ?1",
    [S_RENEW] =
        "UPDATE jobs SET locked_until = ?2"
        " WHERE state = 'running' AND locked_by = ?1",
    [S_RESCUE] =
        "UPDATE jobs SET"
        " state = CASE WHEN cancel_requested THEN 'cancelled' ELSE 'queued'"
        "  END,"
        " finished_at = CASE WHEN cancel_requested THEN ?1 END,"
        " last_error = CASE WHEN cancel_requested"
        "  THEN 'cancelled: lease expired: runner lost'"
        "  ELSE 'lease expired: runner lost' END,"
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
        " died_at = NULL, finished_at = NULL, cancel_requested = 0,"
        RETRY_KEY " updated_at = ?2 WHERE state = 'dead' AND id = ?1",
    [S_DEAD_RETRY_ALL] =
        "UPDATE jobs SET state = 'queued', attempts = 0, run_at = ?1,"
        " died_at = NULL, finished_at = NULL, cancel_requested = 0,"
        RETRY_KEY " updated_at = ?1 WHERE state = 'dead'",
    [S_DEAD_PURGE] =
        "DELETE FROM jobs WHERE state = 'dead' AND died_at <= ?1",
    [S_DEAD_DELETE] = "DELETE FROM jobs WHERE state = 'dead' AND id = ?1",
    [S_DATA_VERSION] = "PRAGMA data_version",
    /* prune: ?1 the cut-off time, ?2 how many at most */
    [S_PRUNE_COMPLETED] =
        "DELETE FROM jobs WHERE id IN (SELECT id FROM jobs"
        " WHERE state = 'completed' AND finished_at < ?1 LIMIT ?2)",
    [S_PRUNE_CANCELLED] =
        "DELETE FROM jobs WHERE id IN (SELECT id FROM jobs"
        " WHERE state = 'cancelled' AND finished_at < ?1 LIMIT ?2)",
    [S_PRUNE_DEAD] =
        "DELETE FROM jobs WHERE id IN (SELECT id FROM jobs"
        " WHERE state = 'dead' AND died_at < ?1 LIMIT ?2)",
    [S_CANCEL_QUEUED] =
        "UPDATE jobs SET state = 'cancelled', finished_at = ?2,"
        " updated_at = ?2 WHERE id = ?1 AND state = 'queued'",
    [S_CANCEL_RUNNING] =
        "UPDATE jobs SET cancel_requested = 1, updated_at = ?2"
        " WHERE id = ?1 AND state = 'running'",
    [S_EXISTS] = "SELECT 1 FROM jobs WHERE id = ?1",
    [S_CANCEL_POLL] =
        "SELECT id FROM jobs WHERE state = 'running' AND cancel_requested = 1"
        " AND locked_by = ?1 ORDER BY id LIMIT ?2",
    [S_PAUSE] =
        "INSERT INTO queues (name, paused, paused_at, updated_at)"
        " VALUES (?1, 1, ?2, ?2) ON CONFLICT (name) DO UPDATE"
        " SET paused = 1, paused_at = coalesce(paused_at, ?2),"
        " updated_at = ?2",
    [S_RESUME] =
        "INSERT INTO queues (name, paused, updated_at) VALUES (?1, 0, ?2)"
        " ON CONFLICT (name) DO UPDATE"
        " SET paused = 0, paused_at = NULL, updated_at = ?2",
    [S_QUEUE_LIST] =
        "WITH c AS (SELECT queue, sum(state = 'queued' AND run_at <= ?1) r,"
        "  sum(state = 'queued' AND run_at > ?1) s, sum(state = 'running') u,"
        "  sum(state = 'dead') d, sum(state = 'cancelled') x,"
        "  sum(state = 'completed') f FROM jobs GROUP BY queue),"
        " n AS (SELECT name FROM queues UNION SELECT queue FROM c)"
        " SELECT n.name, coalesce(q.paused, 0), q.paused_at,"
        " coalesce(c.r, 0), coalesce(c.s, 0), coalesce(c.u, 0),"
        " coalesce(c.d, 0), coalesce(c.x, 0), coalesce(c.f, 0)"
        " FROM n LEFT JOIN queues q ON q.name = n.name"
        " LEFT JOIN c ON c.queue = n.name ORDER BY n.name",
    [S_SHOW] =
        "SELECT " JOB_COLUMNS ", payload, unique_key FROM jobs"
        " WHERE id = ?1",
    /* ?1 state (or scheduled, ready), ?2 name, ?3 queue, NULL: any; ?4
     * limit; ?5 now */
    [S_LIST] =
        "SELECT " JOB_COLUMNS " FROM jobs"
        " WHERE (?1 IS NULL OR state = ?1"
        "  OR (?1 = 'scheduled' AND state = 'queued' AND run_at > ?5)"
        "  OR (?1 = 'ready' AND state = 'queued' AND run_at <= ?5))"
        " AND (?2 IS NULL OR name = ?2) AND (?3 IS NULL OR queue = ?3)"
        " ORDER BY id DESC LIMIT ?4",
    [S_PAUSED] = "SELECT name FROM queues WHERE paused = 1 ORDER BY name",
    [S_READY_BY_QUEUE] =
        "SELECT queue, count(*) FROM (SELECT queue FROM jobs"
        " WHERE state = 'queued' AND run_at <= ?1"
        " AND name IN (SELECT value FROM json_each(?2))"
        " AND queue NOT IN (SELECT name FROM queues WHERE paused = 1)"
        " LIMIT ?3) GROUP BY queue ORDER BY queue",
    /* unique jobs (README "Unique jobs"): the writer lock of BEGIN
     * IMMEDIATE makes look-up then insert race-free; the unique index
     * jobs_unique is the last word */
    [S_UNIQUE_HOLDER] =
        "SELECT id, state FROM jobs WHERE name = ?1 AND unique_key = ?2"
        " AND unique_key IS NOT NULL AND state IN ('queued', 'running')",
    [S_UNIQUE_WINDOW] =
        "SELECT job_id FROM unique_keys WHERE name = ?1 AND unique_key = ?2"
        " AND held_until > ?3 AND job_id IS NOT NULL",
    [S_UNIQUE_TAKE] =
        "INSERT OR REPLACE INTO unique_keys (name, unique_key, job_id,"
        " held_until) VALUES (?1, ?2, ?3, ?4)",
    [S_UNIQUE_REPLACE] =
        "UPDATE jobs SET payload = ?2, run_at = ?3, updated_at = ?4"
        " WHERE id = ?1 AND state = 'queued'",
    [S_PRUNE_UNIQUE] =
        "DELETE FROM unique_keys WHERE (name, unique_key) IN (SELECT name,"
        " unique_key FROM unique_keys WHERE held_until < ?1 LIMIT ?2)",
    /* limits per key: the first ?4 ready jobs of queue ?1 not of a name
     * blocked whole (?5) nor of a name or queue and key at its cap or out
     * of tokens in this claim (?6, "n<name>\x1f<key>" and
     * "q<queue>\x1f<key>"), nor of a key whose stored bucket in a scope
     * of ?7 ({scope: per-key rate}) is short of a token by now ?2: one
     * primary key look-up per job passed over, so the cost follows the
     * keys with jobs, not the buckets */
    [S_LIM_CANDIDATES] =
        "SELECT id, priority, run_at, name, limit_key FROM jobs"
        " WHERE state = 'queued' AND queue = ?1 AND run_at <= ?2"
        " AND name IN (SELECT value FROM json_each(?3))"
        " AND name NOT IN (SELECT value FROM json_each(?5))"
        " AND (limit_key IS NULL"
        "  OR ('n' || name || char(31) || limit_key) NOT IN"
        "   (SELECT value FROM json_each(?6))"
        "  AND ('q' || queue || char(31) || limit_key) NOT IN"
        "   (SELECT value FROM json_each(?6))"
        "  AND NOT EXISTS (SELECT 1 FROM json_each(?7) r"
        "   JOIN limit_buckets lb ON lb.scope = r.key"
        "   AND lb.key = jobs.limit_key"
        "   WHERE (r.key = jobs.name OR r.key = 'queue:' || jobs.queue)"
        "   AND lb.tokens + (?2 - lb.updated_at) * r.value < 1))"
        " ORDER BY priority, run_at, id LIMIT ?4",
    [S_LIM_RUNNING] =
        "SELECT name, queue, limit_key, count(*) FROM jobs"
        " WHERE state = 'running' GROUP BY name, queue, limit_key",
    [S_LIM_BUCKET] =
        "SELECT tokens, updated_at FROM limit_buckets"
        " WHERE scope = ?1 AND key = ?2",
    [S_LIM_BUCKET_SET] =
        "INSERT INTO limit_buckets (scope, key, tokens, updated_at)"
        " VALUES (?1, ?2, ?3, ?4) ON CONFLICT (scope, key) DO UPDATE"
        " SET tokens = excluded.tokens, updated_at = excluded.updated_at",
    /* buckets of scope ?1 full again by now ?2 at rate ?3, burst ?4 */
    [S_LIM_PRUNE] =
        "DELETE FROM limit_buckets WHERE scope = ?1"
        " AND tokens + (?2 - updated_at) * ?3 >= ?4",
    /* a limit's use: ?1 its job name or ?2 its queue (the other NULL),
     * ?3 now */
    [S_LIM_USE] =
        "SELECT coalesce(sum(state = 'running'), 0),"
        " coalesce(sum(state = 'queued' AND run_at <= ?3), 0) FROM jobs"
        " WHERE state IN ('running', 'queued')"
        " AND (?1 IS NULL OR name = ?1) AND (?2 IS NULL OR queue = ?2)",
    [S_LIM_USE_TOP] =
        "SELECT limit_key, sum(state = 'queued' AND run_at <= ?3) AS w,"
        " sum(state = 'running') FROM jobs"
        " WHERE state IN ('running', 'queued') AND limit_key IS NOT NULL"
        " AND (?1 IS NULL OR name = ?1) AND (?2 IS NULL OR queue = ?2)"
        " GROUP BY limit_key ORDER BY w DESC, limit_key LIMIT ?4",
    [S_LIM_TOKENS] =
        "SELECT tokens, updated_at FROM limit_buckets"
        " WHERE scope = ?1 AND key = ''",
    [S_LIM_PATH_SET] =
        "INSERT OR REPLACE INTO limit_paths (name, path) VALUES (?1, ?2)",
    /* the schema's triggers (see triggers_check) */
    [S_SCHEMA_VERSION] = "PRAGMA schema_version",
    [S_TRIGGERS] =
        "SELECT name, sql FROM sqlite_schema WHERE type = 'trigger'",
    /* what the trigger jobs_queue_known does, for the library's inserts:
     * look, then insert if missing (an insert that finds the row pays the
     * name CHECK first; INSERT ... SELECT from queues fills a temporary
     * table first) */
    /* idle queues (queue_prune): ?1 cut-off, ?2 kept names (JSON), ?3 at
     * most; the queued probe is jobs_claim's, the running and dead ones
     * read those states' partial indexes once */
    [S_QUEUE_PRUNE] =
        "DELETE FROM queues WHERE name IN (SELECT q.name FROM queues q"
        " WHERE q.paused = 0 AND q.updated_at < ?1"
        " AND q.name NOT IN (SELECT value FROM json_each(?2))"
        " AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.state = 'queued'"
        "  AND j.queue = q.name)"
        " AND q.name NOT IN (SELECT queue FROM jobs WHERE state = 'running')"
        " AND q.name NOT IN (SELECT queue FROM jobs WHERE state = 'dead')"
        " LIMIT ?3)",
    [S_QUEUE_SEEN] = "SELECT 1 FROM queues WHERE name = ?1",
    [S_QUEUE_KNOWN] = "INSERT INTO queues (name) VALUES (?1)",
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
    unsigned      reconnects;   /* reopened: the file was put back */
    int           busy_ms;
    int           must_exist;   /* never create the file or the tables */
    double        keep_completed; /* seconds; 0: delete at success */
    unsigned      rotate;       /* claims so far: which queue leads */
    int           triggers_off; /* the schema's triggers are off (see
                                 * triggers_check) */
    sqlite3_int64 schema_seen;  /* PRAGMA schema_version they were set for;
                                 * -1: to be read */
    char          queue_known[NAME_BUF]; /* made known in this
                                 * transaction; "": none yet */
    char          pathless[NAME_BUF]; /* a job name without a limit path,
                                 * in this transaction; "": none yet */
    char         *lim_keys[JR_LIMIT_TOP]; /* limit_use's top keys */
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

/* Rows of one multi-row INSERT: a statement's set-up (its cursors, the
 * constant list of the state CHECK, the sqlite_sequence write of
 * AUTOINCREMENT) is paid once for them (README "Batch push"). */
#define INSERT_ROWS 32
#define INSERT_PARAMS 9         /* ?1..?9 of S_INSERT's row */

/* The VALUES row of S_INSERT (S_INSERT_BARE if bare) INSERT_ROWS times,
 * row k's ?N renumbered ?(9k + N): one text for the row, however
 * S_INSERT changes; with RETURNING id if returning. Malloc'd. */
static char *
insert_many_sql(int bare, int returning)
{
    const char *text = sql_text[bare ? S_INSERT_BARE : S_INSERT];
    const char *row = strstr(text, " VALUES ") + 8, *c;
    size_t len = strlen(text) + (size_t)INSERT_ROWS * (strlen(row) * 2 + 2)
                 + 16;
    char *sql = malloc(len), *o;
    int k;

    if (sql == NULL)
        return NULL;
    o = sql + sprintf(sql, "%.*s", (int)(row - text), text);
    for (k = 0; k < INSERT_ROWS; k++) {
        if (k > 0)
            *o++ = ',';
        for (c = row; *c != '\0'; c++) {
            *o++ = *c;
            if (*c == '?') {
                o += sprintf(o, "%ld", strtol(c + 1, NULL, 10) +
                             (long)k * INSERT_PARAMS);
                while (c[1] >= '0' && c[1] <= '9')
                    c++;
            }
        }
    }
    strcpy(o, returning ? " RETURNING id" : "");
    return sql;
}

/* Returns the statement, reset and unbound, or NULL with err set. */
static sqlite3_stmt *
stmt(jr_backend *b, int which, jr_err *err)
{
    sqlite3_stmt *s = b->st[which];

    if (s == NULL) {
        int is_many = which == S_INSERT_MANY || which == S_INSERT_MANY_IDS ||
                      which == S_INSERT_MANY_BARE ||
                      which == S_INSERT_MANY_BARE_IDS;
        char *many = is_many ? insert_many_sql(
                                   which == S_INSERT_MANY_BARE ||
                                   which == S_INSERT_MANY_BARE_IDS,
                                   which == S_INSERT_MANY_IDS ||
                                   which == S_INSERT_MANY_BARE_IDS)
                             : NULL;
        int rc;

        if (is_many && many == NULL) {
            jr_fail(err, JR_ENOMEM, "sqlite: out of memory for a statement");
            return NULL;
        }
        rc = sqlite3_prepare_v3(b->db, many ? many : sql_text[which], -1,
                                SQLITE_PREPARE_PERSISTENT, &s, NULL);
        free(many);
        if (rc != SQLITE_OK) {
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
static int triggers_check(jr_backend *b, jr_err *err);
static void rollback(jr_backend *b);

/* Every write of the library is in one of these transactions: the
 * trigger set is checked inside it, so no write runs with a stale one. */
static int
begin(jr_backend *b, jr_err *err)
{
    if (file_check(b, err) < 0 ||
        simple(b, S_BEGIN, err, "beginning a transaction") < 0)
        return -1;
    b->queue_known[0] = b->pathless[0] = '\0';
    if (triggers_check(b, err) < 0) {
        rollback(b);
        return -1;
    }
    return 0;
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

/* Ends the transaction of a single write that returned rc (changes, or
 * -1 with err set): committed, or rolled back. Returns rc or -1. */
static int
write_end(jr_backend *b, int rc, jr_err *err)
{
    if (rc < 0) {
        rollback(b);
        return -1;
    }
    return commit(b, err) < 0 ? -1 : rc;
}

static void
bind_text(sqlite3_stmt *s, int i, const char *v)
{
    if (v == NULL)
        sqlite3_bind_null(s, i);
    else
        sqlite3_bind_text(s, i, v, -1, SQLITE_STATIC);
}

/* A finite number, else NULL (progress not known). */
static void
bind_number(sqlite3_stmt *s, int i, double v)
{
    if (isfinite(v))
        sqlite3_bind_double(s, i, v);
    else
        sqlite3_bind_null(s, i);
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
        return db_fail(b, err, "cannot open");
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
    b->reconnects++;
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
    b->keep_completed = o->keep_completed;
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
    for (int i = 0; i < JR_LIMIT_TOP; i++)
        free(b->lim_keys[i]);
    free(b->path);
    free(b);
}

/* ---- the schema's triggers ----
 *
 * The schema's triggers hold plain-SQL producers to two push rules:
 * run_at a finite time (jobs_run_at_check), and the queue of an inserted
 * (or moved) job known in the queues table (jobs_queue_known, _moved).
 * The library keeps both itself: jr_push_check refuses a bad run_at
 * before any row is bound, each insert makes its queue known
 * (queue_known), and no statement here changes a job's queue. A trigger
 * is a sub-program run for each row: with them, a batch push costs about
 * 31,000 instructions a job, without them about 19,000 (README "Batch
 * push"). So the connection runs without the schema's triggers
 * (SQLITE_DBCONFIG_ENABLE_TRIGGER off; TEMP triggers, and so RETURNING,
 * still work) while they are exactly those sqlite.sql creates. Another
 * trigger (yours) or one of ours changed turns them all back on. */

/* 1 if sql is the newest text sqlite.sql gives the trigger name. */
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
static int
triggers_set(jr_backend *b, int off, jr_err *err)
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
    return rc == SQLITE_ROW ? 0 : db_fail(b, err, what);
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
        return db_fail(b, err, "reading the schema's triggers");
    if (triggers_set(b, own, err) < 0)
        return -1;
    b->schema_seen = version;
    return 0;
}

/* What the trigger jobs_queue_known does, when the triggers are off: the
 * job just inserted makes its queue known, once a transaction. */
static int
queue_known(jr_backend *b, const char *queue, jr_err *err)
{
    sqlite3_stmt *s;
    size_t len;
    int rc;

    if (queue == NULL)
        queue = "default";
    if (!b->triggers_off || strcmp(queue, b->queue_known) == 0)
        return 0;
    if ((s = stmt(b, S_QUEUE_SEEN, err)) == NULL)
        return -1;
    bind_text(s, 1, queue);
    rc = sqlite3_step(s);
    sqlite3_reset(s);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
        return db_fail(b, err, "looking up a queue");
    if (rc == SQLITE_DONE) {
        if ((s = stmt(b, S_QUEUE_KNOWN, err)) == NULL)
            return -1;
        bind_text(s, 1, queue);
        if (run(b, s, err, "making a queue known") < 0)
            return -1;
    }
    if ((len = strlen(queue)) < sizeof b->queue_known)
        memcpy(b->queue_known, queue, len + 1);
    return 0;
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

static const char *col_text(sqlite3_stmt *s, int i);

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
        return db_fail(b, err, "migration: reading the indexes of jobs");
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
                                : db_fail(b, err, "migration: reading the "
                                          "indexes of jobs");
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
        return db_fail(b, err, "migration: reading the indexes of jobs");
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
        return db_fail(b, err, "migration");
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
    return rc;
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
        if (version > current) {
            /* with the triggers on; the next begin looks at them again */
            b->schema_seen = -1;
            if (triggers_set(b, 0, err) < 0 ||
                apply(b, version, body, next ? (size_t)(next - body) :
                      strlen(body), err) < 0)
                goto fail;
        }
        p = next;
    }
    return commit(b, err);
fail:
    rollback(b);
    return -1;
}

/* ---- unique jobs ---- */

static const char *col_text(sqlite3_stmt *s, int i);

/* The job holding p's key: queued or running with it, or the job of a
 * window still held (unique_for). Returns its id, 0 if the key is free,
 * -1 on error; *queued says whether the holder is queued. */
static int64_t
unique_holder(jr_backend *b, const jr_push *p, double now, int *queued,
              jr_err *err)
{
    sqlite3_stmt *s;
    int64_t id = 0;
    int rc, which;

    *queued = 0;
    for (which = S_UNIQUE_HOLDER; which <= S_UNIQUE_WINDOW; which++) {
        if ((s = stmt(b, which, err)) == NULL)
            return -1;
        bind_text(s, 1, p->name);
        bind_text(s, 2, p->unique_key);
        sqlite3_bind_double(s, 3, now);
        if ((rc = sqlite3_step(s)) == SQLITE_ROW) {
            id = sqlite3_column_int64(s, 0);
            *queued = which == S_UNIQUE_HOLDER &&
                      strcmp(col_text(s, 1), "queued") == 0;
        }
        sqlite3_reset(s);
        if (rc != SQLITE_ROW && rc != SQLITE_DONE)
            return db_fail(b, err, "looking up a unique key");
        if (id > 0)
            return id;
    }
    return 0;
}

/* A push whose key is held: debounce (on_conflict replace) moves a queued
 * holder to p's payload and run_at; a running one is never replaced. */
static int
unique_conflict(jr_backend *b, const jr_push *p, int64_t holder, double now,
                jr_err *err)
{
    sqlite3_stmt *s;
    int rc;

    if (p->on_conflict != JR_CONFLICT_REPLACE)
        return JR_PUSH_DUPLICATE;
    if ((s = stmt(b, S_UNIQUE_REPLACE, err)) == NULL)
        return -1;
    sqlite3_bind_int64(s, 1, holder);
    bind_text(s, 2, p->payload ? p->payload : "{}");
    sqlite3_bind_double(s, 3, p->run_at > 0 ? p->run_at : now + p->run_in);
    sqlite3_bind_double(s, 4, now);
    if ((rc = run(b, s, err, "replacing a unique job")) < 0)
        return -1;
    return rc > 0 ? JR_PUSH_REPLACED : JR_PUSH_DUPLICATE;
}

/* Holds p's key until now + unique_for for job id. */
static int
unique_take(jr_backend *b, const jr_push *p, int64_t id, double now,
            jr_err *err)
{
    sqlite3_stmt *s;

    if (p->unique_for <= 0)
        return 0;
    if ((s = stmt(b, S_UNIQUE_TAKE, err)) == NULL)
        return -1;
    bind_text(s, 1, p->name);
    bind_text(s, 2, p->unique_key);
    sqlite3_bind_int64(s, 3, id);
    sqlite3_bind_double(s, 4, now + p->unique_for);
    return run(b, s, err, "holding a unique key") < 0 ? -1 : 0;
}

static int insert_row(jr_backend *b, const jr_push *p, double now,
                      int64_t *id, jr_err *err);

/* Inserts p, or finds the job that holds its key. */
static int
insert_one(jr_backend *b, const jr_push *p, double now, int64_t *id,
           jr_err *err)
{
    int64_t holder, got;
    int queued, outcome = JR_PUSH_NEW;

    if (p->unique_key == NULL) {
        outcome = insert_row(b, p, now, id, err);
    } else if ((holder = unique_holder(b, p, now, &queued, err)) < 0) {
        return -1;
    } else if (holder > 0) {
        if ((outcome = unique_conflict(b, p, queued ? holder : 0, now,
                                       err)) < 0)
            return -1;
        if (id != NULL)
            *id = holder;
    } else if (insert_row(b, p, now, &got, err) < 0 ||
               unique_take(b, p, got, now, err) < 0) {
        return -1;
    } else if (id != NULL) {
        *id = got;
    }
    if (outcome >= 0 && p->outcome != NULL)
        *p->outcome = outcome;
    return outcome < 0 ? -1 : 0;
}

/* Binds p as the row whose parameters start after ?base. */
static void
bind_row(sqlite3_stmt *s, int base, const jr_push *p, double now)
{
    bind_text(s, base + 1, p->name);
    bind_text(s, base + 2, p->payload ? p->payload : "{}");
    bind_text(s, base + 3, p->queue ? p->queue : "default");
    sqlite3_bind_int(s, base + 4, p->priority);
    if (p->max_retries >= 0)
        sqlite3_bind_int(s, base + 5, p->max_retries);
    sqlite3_bind_double(s, base + 6, p->run_at > 0 ? p->run_at :
                        now + p->run_in);
    sqlite3_bind_double(s, base + 7, now);
    bind_text(s, base + 8, p->unique_key);
    bind_text(s, base + 9, p->key);
}

static int
cmp_id(const void *x, const void *y)
{
    int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;

    return (a > b) - (a < b);
}

/* 1 if a job of p[0..n) without a key of its own has a name its runner
 * gave a limit path (LIMIT_KEY_OF takes its key from the payload), 0 if
 * none, -1 on error. The write lock keeps limit_paths as read until the
 * commit; the last name found without a path is kept till then. */
static int
limit_path_any(jr_backend *b, const jr_push *p, int n, jr_err *err)
{
    sqlite3_stmt *s;
    size_t len;
    int i, rc;

    for (i = 0; i < n; i++) {
        if (p[i].key != NULL || strcmp(p[i].name, b->pathless) == 0)
            continue;
        if ((s = stmt(b, S_LIMIT_PATH, err)) == NULL)
            return -1;
        bind_text(s, 1, p[i].name);
        rc = sqlite3_step(s);
        sqlite3_reset(s);
        if (rc == SQLITE_ROW)
            return 1;
        if (rc != SQLITE_DONE)
            return db_fail(b, err, "reading limit paths");
        if ((len = strlen(p[i].name)) < sizeof b->pathless)
            memcpy(b->pathless, p[i].name, len + 1);
    }
    return 0;
}

/* Inserts the INSERT_ROWS plain pushes p in one statement; ids (may be
 * NULL) gets their ids, read back with RETURNING (AUTOINCREMENT gives
 * increasing ids in insertion order, which is p's). Returns 0, 1 if the
 * database refused one of them (the statement undone: the caller
 * inserts them one by one to name the row and its reason), -1 on error. */
static int
insert_many(jr_backend *b, const jr_push *p, double now, int64_t *ids,
            jr_err *err)
{
    sqlite3_stmt *s;
    int k, rc, got = 0, paths = limit_path_any(b, p, INSERT_ROWS, err);

    if (paths < 0)
        return -1;
    if ((s = stmt(b, paths ? (ids ? S_INSERT_MANY_IDS : S_INSERT_MANY) :
                  (ids ? S_INSERT_MANY_BARE_IDS : S_INSERT_MANY_BARE),
                  err)) == NULL)
        return -1;
    for (k = 0; k < INSERT_ROWS; k++)
        bind_row(s, k * INSERT_PARAMS, &p[k], now);
    while ((rc = sqlite3_step(s)) == SQLITE_ROW)
        if (ids != NULL && got < INSERT_ROWS)
            ids[got++] = sqlite3_column_int64(s, 0);
    sqlite3_reset(s);
    if (error_class(rc) == JR_EINPUT)
        return 1;
    if (rc != SQLITE_DONE)
        return db_fail(b, err, "inserting jobs");
    if (sqlite3_changes(b->db) != INSERT_ROWS ||
        (ids != NULL && got != INSERT_ROWS))
        return jr_fail(err, JR_EDB, "sqlite '%s': a multi-row insert "
                       "inserted %d rows of %d", b->path,
                       sqlite3_changes(b->db), INSERT_ROWS);
    if (ids != NULL)
        qsort(ids, INSERT_ROWS, sizeof *ids, cmp_id);
    for (k = 0; k < INSERT_ROWS; k++) {
        if (queue_known(b, p[k].queue, err) < 0)
            return -1;
        if (p[k].outcome != NULL)
            *p[k].outcome = JR_PUSH_NEW;
    }
    return 0;
}

static int
insert_row(jr_backend *b, const jr_push *p, double now, int64_t *id,
           jr_err *err)
{
    sqlite3_stmt *s;
    int rc, paths = limit_path_any(b, p, 1, err);

    if (paths < 0 ||
        (s = stmt(b, paths ? S_INSERT : S_INSERT_BARE, err)) == NULL)
        return -1;
    bind_row(s, 0, p, now);
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
    return queue_known(b, p->queue, err);
}

/* Checks p[0..n) and inserts them, in the open transaction. */
static int
insert_all(jr_backend *b, const jr_push *p, int n, int64_t *ids, double now,
           jr_err *err)
{
    int i, k, singles = 0, rc;

    for (i = 0; i < n; i++)
        if (jr_push_check(&p[i], 0, err) < 0)
            return -1;
    for (i = 0; i < n; i++) {
        /* INSERT_ROWS plain pushes in a row: one statement */
        for (k = 0; singles == 0 && k < INSERT_ROWS && i + k < n &&
             p[i + k].unique_key == NULL; k++)
            ;
        if (singles == 0 && k == INSERT_ROWS) {
            if ((rc = insert_many(b, &p[i], now, ids ? &ids[i] : NULL,
                                  err)) < 0)
                return -1;
            if (rc == 0) {
                i += INSERT_ROWS - 1;
                continue;
            }
            singles = INSERT_ROWS;      /* one was refused: find which */
        }
        if (singles > 0)
            singles--;
        if (insert_one(b, &p[i], now, ids ? &ids[i] : NULL, err) < 0)
            return -1;
    }
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

/* A ready job one queue offers to a claim: its rank in that queue, then
 * what orders it within the rank. */
typedef struct candidate {
    int64_t id;
    int     rank;               /* 0: the queue's first ready job */
    int     turn;               /* the queue's place in this claim's round */
    int     priority;
    double  run_at;
    char   *name;               /* with limits: the job's name, queue and */
    char   *queue;              /* limit key (NULL: none), else NULL */
    char   *key;
} candidate;

/* A limited claim's state between passes: the pick, its blocked lists
 * as JSON, and how many each queue gave so far. */
typedef struct limq {
    jr_lpick *pick;
    char     *names;            /* job names blocked whole */
    char     *pairs;            /* names and queues blocked for a key */
    char     *rates;            /* {scope: per-key rate} */
    char    **qname;            /* queues that gave jobs, and how many */
    int      *qtaken;
    int       nq;
} limq;

/* Round robin between queues: rank first, then priority, run_at, id. */
static int
candidate_order(const void *a, const void *b)
{
    const candidate *x = a, *y = b;

    if (x->rank != y->rank)
        return x->rank < y->rank ? -1 : 1;
    if (x->turn != y->turn)
        return x->turn < y->turn ? -1 : 1;
    return jr_claim_cmp(x->priority, x->run_at, x->id, y->priority,
                        y->run_at, y->id);
}

/* How many jobs spec lets one claim take from queue: its listed max (the
 * smallest, if listed twice), else others; never more than the total. */
static int
queue_cap(const jr_claim_spec *spec, const char *queue, const limq *lim)
{
    int i, cap = -1, taken = 0;

    for (i = 0; lim && i < lim->nq; i++)
        if (strcmp(lim->qname[i], queue) == 0)
            taken = lim->qtaken[i];     /* a limited claim's earlier pass */
    for (i = 0; i < spec->nqueues; i++)
        if (strcmp(spec->queues[i].queue, queue) == 0 &&
            (cap < 0 || spec->queues[i].max < cap))
            cap = spec->queues[i].max;
    if (cap < 0)
        cap = spec->others;
    cap -= taken;
    return cap < spec->max ? cap : spec->max;
}

/* A limited candidate's name, queue and key (from columns 3, 4). */
static int
candidate_strings(sqlite3_stmt *s, const char *queue, candidate *c)
{
    const char *key = (const char *)sqlite3_column_text(s, 4);

    c->name = strdup((const char *)sqlite3_column_text(s, 3));
    c->queue = strdup(queue);
    c->key = key ? strdup(key) : NULL;
    return c->name && c->queue && (key == NULL || c->key) ? 0 : -1;
}

/* Appends the first cap ready jobs of queue to c[*n..]; c has room. With
 * lim, skips the jobs its lists block and keeps their strings. */
static int
queue_candidates(jr_backend *b, const char *queue, int cap, const char *json,
                 double now, candidate *c, int *n, const limq *lim,
                 jr_err *err)
{
    sqlite3_stmt *s = stmt(b, lim ? S_LIM_CANDIDATES : S_CLAIM_CANDIDATES,
                           err);
    int rank = 0, rc;

    if (s == NULL)
        return -1;
    bind_text(s, 1, queue);
    sqlite3_bind_double(s, 2, now);
    bind_text(s, 3, json);
    sqlite3_bind_int(s, 4, cap);
    if (lim) {
        bind_text(s, 5, lim->names);
        bind_text(s, 6, lim->pairs);
        bind_text(s, 7, lim->rates);
    }
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        c[*n].id = sqlite3_column_int64(s, 0);
        c[*n].priority = sqlite3_column_int(s, 1);
        c[*n].run_at = sqlite3_column_double(s, 2);
        c[*n].rank = rank++;
        c[*n].name = c[*n].queue = c[*n].key = NULL;
        (*n)++;
        if (lim && candidate_strings(s, queue, &c[*n - 1]) < 0) {
            sqlite3_reset(s);
            return jr_fail(err, JR_ENOMEM, "sqlite: out of memory");
        }
    }
    sqlite3_reset(s);
    return rc == SQLITE_DONE ? 0 : db_fail(b, err, "claiming jobs");
}

/* The ready jobs a claim may take, fairly ordered, into a new array;
 * *n gets how many. One short indexed read per queue not paused, so a
 * backlog in one queue costs no scan. NULL with err set on failure. */
static void
candidates_free(candidate *c, int n)
{
    int i;

    for (i = 0; c && i < n; i++) {
        free(c[i].name);
        free(c[i].queue);
        free(c[i].key);
    }
    free(c);
}

static candidate *
candidates(jr_backend *b, const jr_claim_spec *spec, const char *json,
           double now, int *n, const limq *lim, jr_err *err)
{
    sqlite3_stmt *q = stmt(b, S_CLAIM_QUEUES, err);
    candidate *c = NULL, *bigger;
    size_t cap = 0;
    int rc, k, i, from, nq = 0;

    *n = 0;
    if (q == NULL)
        return NULL;
    while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
        const char *queue = (const char *)sqlite3_column_text(q, 0);
        if ((k = queue_cap(spec, queue, lim)) <= 0 ||
            (lim && !jr_lpick_queue_open(lim->pick, queue)))
            continue;
        from = *n;
        if ((size_t)*n + (size_t)k > cap) {
            cap = ((size_t)*n + (size_t)k) * 2;
            if ((bigger = realloc(c, cap * sizeof *c)) == NULL) {
                jr_fail(err, JR_ENOMEM, "sqlite: out of memory");
                goto fail;
            }
            c = bigger;
        }
        if (queue_candidates(b, queue, k, json, now, c, n, lim, err) < 0)
            goto fail;
        for (i = from; i < *n; i++)
            c[i].turn = nq;
        nq += *n > from;        /* the rotation is over queues with jobs */
    }
    sqlite3_reset(q);
    if (rc != SQLITE_DONE) {
        db_fail(b, err, "claiming jobs");
        candidates_free(c, *n);
        return NULL;
    }
    /* the queue that leads each round rotates from claim to claim */
    for (i = 0, from = nq ? (int)(b->rotate++ % (unsigned)nq) : 0; i < *n;
         i++)
        c[i].turn = (c[i].turn - from + nq) % nq;
    if (c == NULL && (c = malloc(sizeof *c)) == NULL)
        jr_fail(err, JR_ENOMEM, "sqlite: out of memory");
    else
        qsort(c, (size_t)*n, sizeof *c, candidate_order);
    return c;
fail:
    sqlite3_reset(q);
    candidates_free(c, *n);
    return NULL;
}

/* Orders candidates by id, for bsearch. */
static int
candidate_id(const void *a, const void *b)
{
    const candidate *x = a, *y = b;

    return (x->id > y->id) - (x->id < y->id);
}

/* Writes [id,id,...] of c[0..n) into a new string. */
static char *
ids_json(const candidate *c, int n)
{
    char *s = malloc((size_t)n * 22 + 3), *p = s;
    int i;

    if (s == NULL)
        return NULL;
    *p++ = '[';
    for (i = 0; i < n; i++)
        p += sprintf(p, "%s%lld", i ? "," : "", (long long)c[i].id);
    *p++ = ']';
    *p = '\0';
    return s;
}

/* Marks the first n candidates running in one statement (a statement per
 * row costs a statement journal each) and puts them in out[] in their fair
 * order: c[i].rank is reused as the position. Returns how many. */
static int
claim_picked(jr_backend *b, const char *token, double lease, candidate *c,
             int n, jr_job **out, double now, jr_err *err)
{
    sqlite3_stmt *s;
    jr_job **tmp, *j;
    candidate key, *at;
    char *json;
    int i, k = 0, rc;

    if (n == 0)
        return 0;
    json = ids_json(c, n);
    tmp = calloc((size_t)n, sizeof *tmp);
    if (json == NULL || tmp == NULL || (s = stmt(b, S_CLAIM, err)) == NULL) {
        free(json);
        free(tmp);
        return json && tmp ? -1 : jr_fail(err, JR_ENOMEM, "sqlite: out of "
                                          "memory");
    }
    for (i = 0; i < n; i++)
        c[i].rank = i;
    qsort(c, (size_t)n, sizeof *c, candidate_id);
    bind_text(s, 1, token);
    sqlite3_bind_double(s, 2, now + lease);
    sqlite3_bind_double(s, 3, now);
    bind_text(s, 4, json);
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        if ((j = row_job(s)) == NULL) {
            rc = SQLITE_NOMEM;
            break;
        }
        key.id = j->id;
        at = bsearch(&key, c, (size_t)n, sizeof *c, candidate_id);
        if (at == NULL || tmp[at->rank] != NULL) {
            free(j);            /* cannot be: the ids are ours */
            continue;
        }
        tmp[at->rank] = j;
    }
    sqlite3_reset(s);
    free(json);
    for (i = 0; i < n; i++)
        if (tmp[i] != NULL)
            out[k++] = tmp[i];
    free(tmp);
    if (rc != SQLITE_DONE) {
        db_fail(b, err, "claiming jobs");
        while (k > 0)
            free(out[--k]);
        return -1;
    }
    return k;
}

/* ---- limits per key ---- */

/* Reads scope's bucket of key ("": the scope's own) into p; no row is a
 * full bucket. */
static int
lim_read_bucket(const char *scope, const char *key, void *arg)
{
    jr_backend *b = ((void **)arg)[0];
    jr_err *err = ((void **)arg)[1];
    jr_lpick *p = ((void **)arg)[2];
    sqlite3_stmt *s = stmt(b, S_LIM_BUCKET, err);
    int rc;

    if (s == NULL)
        return -1;
    bind_text(s, 1, scope);
    bind_text(s, 2, key);
    if ((rc = sqlite3_step(s)) == SQLITE_ROW &&
        jr_lpick_bucket(p, scope, key, sqlite3_column_double(s, 0),
                        sqlite3_column_double(s, 1)) < 0)
        rc = SQLITE_NOMEM;
    sqlite3_reset(s);
    if (rc == SQLITE_ROW || rc == SQLITE_DONE)
        return 0;
    return rc == SQLITE_NOMEM ? jr_fail(err, JR_ENOMEM, "sqlite: out of "
                                        "memory") :
           db_fail(b, err, "reading a token bucket");
}

/* Reads the running jobs and the scopes' own buckets into a new pick
 * (the keys' buckets are read as the claim meets their jobs). */
static jr_lpick *
lim_load(jr_backend *b, const jr_claim_spec *spec, double now, jr_err *err)
{
    jr_lpick *p = jr_lpick_new(spec->limits, spec->nlimits, now);
    void *arg[3] = {b, err, p};
    sqlite3_stmt *s;
    int rc = SQLITE_NOMEM, bad = p == NULL, i;

    if (!bad && (s = stmt(b, S_LIM_RUNNING, err)) != NULL) {
        while ((rc = sqlite3_step(s)) == SQLITE_ROW)
            bad |= jr_lpick_running(p, (const char *)sqlite3_column_text(s, 0),
                                    (const char *)sqlite3_column_text(s, 1),
                                    (const char *)sqlite3_column_text(s, 2),
                                    sqlite3_column_int64(s, 3)) < 0;
        sqlite3_reset(s);
    }
    if (!bad && rc == SQLITE_DONE) {
        for (i = 0; i < spec->nlimits; i++)
            if (spec->limits[i].all.rate > 0 &&
                lim_read_bucket(spec->limits[i].scope, "", arg) < 0) {
                jr_lpick_free(p);
                return NULL;
            }
        return p;
    }
    if (bad)
        jr_fail(err, JR_ENOMEM, "sqlite: out of memory");
    else if (rc != SQLITE_NOMEM)
        db_fail(b, err, "reading limits");
    jr_lpick_free(p);
    return NULL;
}

static int
rate_elem(const char *scope, double rate, void *arg)
{
    jr_buf *j = arg;
    char num[40];

    snprintf(num, sizeof num, "\":%.17g", rate);
    jr_buf_put(j, j->len > 1 ? ",\"" : "\"", j->len > 1 ? 2 : 1);
    jr_buf_put(j, scope, strlen(scope));
    return jr_buf_put(j, num, strlen(num));
}

/* {"scope": per-key rate, ...} of the limits with one, in a new string
 * (scopes are names: nothing to escape). NULL when out of memory. */
static char *
lim_rates(const jr_lpick *p)
{
    jr_buf j = {0};

    jr_buf_put(&j, "{", 1);
    jr_lpick_key_rates(p, rate_elem, &j);
    if (jr_buf_put(&j, "}", 2) < 0) {       /* and the NUL */
        jr_buf_free(&j);
        return NULL;
    }
    return j.p;
}

static int
lim_save_one(const char *scope, const char *key, double tokens, double now,
             void *arg)
{
    jr_backend *b = ((void **)arg)[0];
    jr_err *err = ((void **)arg)[1];
    sqlite3_stmt *s = stmt(b, S_LIM_BUCKET_SET, err);

    if (s == NULL)
        return -1;
    bind_text(s, 1, scope);
    bind_text(s, 2, key);
    sqlite3_bind_double(s, 3, tokens);
    sqlite3_bind_double(s, 4, now);
    return run(b, s, err, "saving a token bucket") < 0 ? -1 : 0;
}

/* Writes back the buckets the claim took from; every 64th claim also
 * forgets buckets that are full again (a missing row is full). */
static int
lim_save(jr_backend *b, const jr_claim_spec *spec, const jr_lpick *p,
         double now, jr_err *err)
{
    void *arg[2] = {b, err};
    sqlite3_stmt *s;
    int i, k;

    if (jr_lpick_dirty(p, lim_save_one, arg) < 0)
        return -1;
    if (b->rotate % 64 != 0)
        return 0;
    for (i = 0; i < spec->nlimits; i++)
        for (k = 0; k < 2; k++) {
            const jr_limit_set *set = k ? &spec->limits[i].per_key :
                                      &spec->limits[i].all;
            if (set->rate <= 0 || (s = stmt(b, S_LIM_PRUNE, err)) == NULL)
                continue;
            bind_text(s, 1, spec->limits[i].scope);
            sqlite3_bind_double(s, 2, now);
            sqlite3_bind_double(s, 3, set->rate);
            sqlite3_bind_double(s, 4, set->burst);
            if (run(b, s, err, "forgetting full buckets") < 0)
                return -1;
        }
    return 0;
}

/* Counts one more job taken from queue in lim. */
static int
lim_taken(limq *lim, const char *queue)
{
    char **qn;
    int *qt, i;

    for (i = 0; i < lim->nq; i++)
        if (strcmp(lim->qname[i], queue) == 0) {
            lim->qtaken[i]++;
            return 0;
        }
    if ((qn = realloc(lim->qname, (size_t)(lim->nq + 1) * sizeof *qn)))
        lim->qname = qn;
    if ((qt = realloc(lim->qtaken, (size_t)(lim->nq + 1) * sizeof *qt)))
        lim->qtaken = qt;
    if (qn == NULL || qt == NULL ||
        (lim->qname[lim->nq] = strdup(queue)) == NULL)
        return -1;
    lim->qtaken[lim->nq++] = 1;
    return 0;
}

/* Keeps the candidates c[0..nc) (fair order) the limits let through, at
 * most max, at the front of c; *rejected counts the others. Reads the
 * buckets of the keys it meets. Returns how many, or -1 with err set. */
static int
lim_filter(jr_backend *b, limq *lim, candidate *c, int nc, int max,
           int *rejected, jr_err *err)
{
    void *arg[3] = {b, err, lim->pick};
    int i, k = 0, rc = 0, ok;

    *rejected = 0;
    for (i = 0; i < nc; i++) {
        ok = 0;
        if (k < max && rc == 0 &&
            (rc = jr_lpick_need(lim->pick, c[i].name, c[i].queue, c[i].key,
                                lim_read_bucket, arg)) == 0 &&
            (ok = jr_lpick_take(lim->pick, c[i].name, c[i].queue,
                                c[i].key)) > 0 &&
            lim_taken(lim, c[i].queue) < 0)
            ok = -1;
        if (ok < 0)
            rc = -1;
        *rejected += ok == 0 && rc == 0 && k < max;
        free(c[i].name);
        free(c[i].queue);
        free(c[i].key);
        c[i].name = c[i].queue = c[i].key = NULL;
        if (ok > 0)
            c[k++] = c[i];
    }
    if (rc == -1)
        jr_fail(err, JR_ENOMEM, "sqlite: out of memory");
    return rc < 0 ? -1 : k;
}

static void
lim_clear(limq *lim)
{
    int i;

    jr_lpick_free(lim->pick);
    free(lim->names);
    free(lim->pairs);
    free(lim->rates);
    for (i = 0; i < lim->nq; i++)
        free(lim->qname[i]);
    free(lim->qname);
    free(lim->qtaken);
}

/* The claim under limits: in passes, each reading the first candidates
 * that the caps and buckets do not block, taking those that still fit
 * in fair order, until the claim is full or nothing was refused (a key
 * that fills up in a pass is skipped by the next). Returns how many jobs
 * it put in out[], or -1. */
static int
claim_limited(jr_backend *b, const char *token, double lease,
              const jr_claim_spec *spec, const char *json, jr_job **out,
              double now, jr_err *err)
{
    jr_claim_spec sub = *spec;
    limq lim = {0};
    candidate *c;
    int total = 0, pass, nc, k, n, rejected = 0;

    if ((lim.pick = lim_load(b, spec, now, err)) == NULL)
        return -1;
    if ((lim.rates = lim_rates(lim.pick)) == NULL) {
        jr_fail(err, JR_ENOMEM, "sqlite: out of memory");
        goto fail;
    }
    for (pass = 0; pass < 4 && total < spec->max; pass++) {
        free(lim.names);
        free(lim.pairs);
        lim.names = jr_lpick_list(lim.pick, 'n', 1);
        lim.pairs = jr_lpick_list(lim.pick, 'p', 1);
        sub.max = spec->max - total;
        if (lim.names == NULL || lim.pairs == NULL) {
            jr_fail(err, JR_ENOMEM, "sqlite: out of memory");
            goto fail;
        }
        if ((c = candidates(b, &sub, json, now, &nc, &lim, err)) == NULL)
            goto fail;
        k = lim_filter(b, &lim, c, nc, sub.max, &rejected, err);
        n = k < 0 ? -1 : claim_picked(b, token, lease, c, k, out + total,
                                      now, err);
        candidates_free(c, k < 0 ? nc : 0);
        if (n < 0)
            goto fail;
        total += n;
        if (rejected == 0 || nc == 0)
            break;
    }
    if (lim_save(b, spec, lim.pick, now, err) < 0)
        goto fail;
    if (spec->limit_next)
        *spec->limit_next = jr_lpick_next(lim.pick);
    lim_clear(&lim);
    return total;
fail:
    while (total > 0)
        free(out[--total]);
    lim_clear(&lim);
    return -1;
}

/* Which queues not paused have a job of names json ready by now: 1 with
 * *queue (the caller frees it) when one has, 0 when none has, 2 when
 * several have (the fair claim decides), -1 on failure. Stops at the
 * second: one indexed probe per queue up to there. */
static int
ready_queue(jr_backend *b, const char *json, double now, char **queue,
            jr_err *err)
{
    sqlite3_stmt *q = stmt(b, S_CLAIM_QUEUES, err), *p;
    int rc, found = 0;

    *queue = NULL;
    if (q == NULL || (p = stmt(b, S_QUEUE_READY, err)) == NULL) {
        if (q != NULL)
            sqlite3_reset(q);
        return -1;
    }
    while (found < 2 && (rc = sqlite3_step(q)) == SQLITE_ROW) {
        bind_text(p, 1, (const char *)sqlite3_column_text(q, 0));
        sqlite3_bind_double(p, 2, now);
        bind_text(p, 3, json);
        if ((rc = sqlite3_step(p)) == SQLITE_ROW && found++ == 0 &&
            (*queue = strdup((const char *)sqlite3_column_text(q, 0))) ==
            NULL)
            rc = SQLITE_NOMEM;
        sqlite3_reset(p);
        if (rc != SQLITE_ROW && rc != SQLITE_DONE)
            break;
    }
    sqlite3_reset(q);
    if (rc == SQLITE_ROW || rc == SQLITE_DONE)
        return found;
    free(*queue);
    *queue = NULL;
    return rc == SQLITE_NOMEM ? jr_fail(err, JR_ENOMEM, "sqlite: out of "
                                        "memory") : db_fail(b, err,
                                        "claiming jobs");
}

/* S_CLAIM_ONE when one queue has ready jobs and the spec caps none: the
 * claim without the fair reads (there is one queue to be fair to) in one
 * statement, its jobs sorted into claim order. Returns how many, or -2 if
 * the fair claim is to run instead. */
static int
claim_one(jr_backend *b, const char *token, double lease,
          const jr_claim_spec *spec, const char *json, jr_job **out,
          double now, jr_err *err)
{
    sqlite3_stmt *s;
    char *queue;
    int n = 0, rc;

    if (spec->nqueues > 0 || spec->others < spec->max)
        return -2;
    if ((rc = ready_queue(b, json, now, &queue, err)) != 1)
        return rc == 2 ? -2 : rc;       /* several, none (0), or -1 */
    if ((s = stmt(b, S_CLAIM_ONE, err)) == NULL) {
        free(queue);
        return -1;
    }
    bind_text(s, 1, token);
    sqlite3_bind_double(s, 2, now + lease);
    sqlite3_bind_double(s, 3, now);
    bind_text(s, 4, json);
    bind_text(s, 5, queue);
    sqlite3_bind_int(s, 6, spec->max);
    while ((rc = sqlite3_step(s)) == SQLITE_ROW && n < spec->max)
        if ((out[n++] = row_job(s)) == NULL) {          /* LIMIT ?6 */
            n--;
            rc = SQLITE_NOMEM;
            break;
        }
    sqlite3_reset(s);
    free(queue);
    if (rc != SQLITE_DONE) {
        while (n > 0)
            free(out[--n]);
        return rc == SQLITE_NOMEM ? jr_fail(err, JR_ENOMEM, "sqlite: out "
                                            "of memory") :
               db_fail(b, err, "claiming jobs");
    }
    qsort(out, (size_t)n, sizeof *out, jr_claimed_cmp);
    return n;
}

/* Claims the fairly ordered candidates, inside the open transaction.
 * Returns how many jobs it filled out[] with, or -1 (the caller rolls
 * back). */
static int
claim_rows(jr_backend *b, const char *token, double lease,
           const jr_claim_spec *spec, jr_job **out, double now, jr_err *err)
{
    candidate *c;
    char *json;
    int n, nc;

    if (spec->nnames <= 0 || spec->max <= 0)
        return 0;
    if ((json = names_json(spec->names, spec->nnames)) == NULL)
        return jr_fail(err, JR_ENOMEM, "sqlite: out of memory");
    if (spec->nlimits > 0) {
        n = claim_limited(b, token, lease, spec, json, out, now, err);
        free(json);
        return n;
    }
    if ((n = claim_one(b, token, lease, spec, json, out, now, err)) != -2) {
        free(json);
        return n;
    }
    c = candidates(b, spec, json, now, &nc, NULL, err);
    free(json);
    if (c == NULL)
        return -1;
    n = claim_picked(b, token, lease, c, nc < spec->max ? nc : spec->max,
                     out, now, err);
    free(c);
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
             const jr_claim_spec *spec, jr_job **out, jr_err *err)
{
    int n;

    if (spec->nnames <= 0 || spec->max <= 0)
        return 0;
    /* begin first: it may reopen the file, which remakes statements */
    if (begin(b, err) < 0)
        return -1;
    if ((n = claim_rows(b, token, lease, spec, out, jr_now(), err)) < 0) {
        rollback(b);
        return -1;
    }
    return commit_claimed(b, out, n, err);
}

static int
result_stmt_index(const jr_backend *b, int kind)
{
    switch (kind) {
    case JR_DONE:    return b->keep_completed > 0 ? S_KEEP : S_DONE;
    case JR_CANCELLED: return S_CANCELLED;
    case JR_PROGRESS: return S_PROGRESS;
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
    int which = result_stmt_index(b, r->kind), changed;
    sqlite3_stmt *s;

    if (which < 0)
        return jr_fail(err, JR_EPROTO, "job %lld: unknown result kind %d",
                       (long long)r->id, r->kind);
    if ((s = stmt(b, which, err)) == NULL)
        return -1;
    sqlite3_bind_int64(s, 1, r->id);
    bind_text(s, 2, token);
    if (which == S_PROGRESS) {
        bind_number(s, 3, r->done);
        bind_number(s, 4, r->total);
        bind_text(s, 5, r->note);
    } else if (which != S_DONE) {
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

/* 1 if r is a success whose row is simply deleted. */
static int
plain_done(const jr_backend *b, const jr_result *r)
{
    return r->kind == JR_DONE && r->npushes == 0 && b->keep_completed <= 0;
}

/* Applies r[0..n) in a transaction: the plain successes in one DELETE
 * after the others (a job's progress comes before its end, never after),
 * the rest one statement each, in order. Returns how many rows were
 * still ours. */
static int
complete_all(jr_backend *b, const char *token, const jr_result *r, int n,
             double now, jr_err *err)
{
    sqlite3_stmt *s;
    char *ids = NULL, *p = NULL;
    int applied = 0, nplain = 0, i, rc;

    for (i = 0; i < n; i++)
        nplain += plain_done(b, &r[i]);
    if (nplain > 1) {
        if ((p = ids = malloc((size_t)nplain * 22 + 3)) == NULL)
            return jr_fail(err, JR_ENOMEM, "sqlite: out of memory");
        *p++ = '[';
    }
    for (i = 0; i < n; i++) {
        if (ids != NULL && plain_done(b, &r[i])) {
            p += sprintf(p, "%s%lld", p == ids + 1 ? "" : ",",
                         (long long)r[i].id);
            continue;
        }
        if ((rc = complete_one(b, token, &r[i], now, err)) < 0) {
            free(ids);
            return -1;
        }
        applied += rc;
    }
    if (ids == NULL)
        return applied;
    strcpy(p, "]");
    if ((s = stmt(b, S_DONE_MANY, err)) == NULL) {
        free(ids);
        return -1;
    }
    bind_text(s, 1, ids);
    bind_text(s, 2, token);
    rc = run(b, s, err, "recording results");
    free(ids);
    return rc < 0 ? -1 : applied + rc;
}

static int
sqlite_complete(jr_backend *b, const char *token, const jr_result *r, int n,
                jr_err *err)
{
    int applied;

    if (n == 0)
        return 0;
    if (begin(b, err) < 0)
        return -1;
    if ((applied = complete_all(b, token, r, n, jr_now(), err)) < 0) {
        rollback(b);
        return -1;
    }
    return commit(b, err) < 0 ? -1 : applied;
}

/* Records the results and claims, in one transaction: one fsync a round
 * instead of two. */
static int
sqlite_complete_claim(jr_backend *b, const char *token, const jr_result *r,
                      int nr, int *applied, double lease,
                      const jr_claim_spec *spec, jr_job **out, jr_err *err)
{
    double now = jr_now();
    int n;

    *applied = 0;
    if (begin(b, err) < 0)
        return -1;
    if (nr > 0 && (*applied = complete_all(b, token, r, nr, now, err)) < 0) {
        *applied = 0;
        rollback(b);
        return -1;
    }
    if ((n = claim_rows(b, token, lease, spec, out, now, err)) < 0) {
        rollback(b);
        return -1;
    }
    return commit_claimed(b, out, n, err);
}

static int
sqlite_renew(jr_backend *b, const char *token, double lease, jr_err *err)
{
    sqlite3_stmt *s;

    if (begin(b, err) < 0)
        return -1;
    if ((s = stmt(b, S_RENEW, err)) == NULL)
        return write_end(b, -1, err);
    bind_text(s, 1, token);
    sqlite3_bind_double(s, 2, jr_now() + lease);
    return write_end(b, run(b, s, err, "renewing leases"), err);
}

static int
sqlite_rescue(jr_backend *b, jr_err *err)
{
    sqlite3_stmt *s;

    if (begin(b, err) < 0)
        return -1;
    if ((s = stmt(b, S_RESCUE, err)) == NULL)
        return write_end(b, -1, err);
    sqlite3_bind_double(s, 1, jr_now());
    return write_end(b, run(b, s, err, "requeueing expired leases"), err);
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

    if (begin(b, err) < 0)
        return -1;
    if ((s = stmt(b, S_DEAD_PURGE, err)) == NULL)
        return write_end(b, -1, err);
    sqlite3_bind_double(s, 1, jr_now() - older_than);
    return write_end(b, run(b, s, err, "purging dead jobs"), err);
}

static int
sqlite_dead_delete(jr_backend *b, const int64_t *ids, int n, jr_err *err)
{
    sqlite3_stmt *s;
    int total = 0, i, rc;

    if (begin(b, err) < 0)
        return -1;
    for (i = 0; i < n; i++) {
        if ((s = stmt(b, S_DEAD_DELETE, err)) == NULL)
            goto fail;
        sqlite3_bind_int64(s, 1, ids[i]);
        if ((rc = run(b, s, err, "deleting a dead job")) < 0)
            goto fail;
        total += rc;
    }
    return commit(b, err) < 0 ? -1 : total;
fail:
    rollback(b);
    return -1;
}

/* Deletes at most limit rows of one finished state older than age
 * seconds (age < 0: none). Returns how many, or -1. */
static int
prune_state(jr_backend *b, int which, double age, int limit, jr_err *err)
{
    sqlite3_stmt *s;

    if (age < 0 || limit <= 0)
        return 0;
    if ((s = stmt(b, which, err)) == NULL)
        return -1;
    sqlite3_bind_double(s, 1, jr_now() - age);
    sqlite3_bind_int(s, 2, limit);
    return run(b, s, err, "pruning finished jobs");
}

static int
sqlite_prune(jr_backend *b, double older_completed, double older_cancelled,
             double older_dead, int limit, jr_err *err)
{
    int n = 0, rc;

    if (limit <= 0)
        return 0;
    if (begin(b, err) < 0)
        return -1;
    if ((rc = prune_state(b, S_PRUNE_COMPLETED, older_completed, limit,
                          err)) < 0)
        goto fail;
    n += rc;
    if ((rc = prune_state(b, S_PRUNE_CANCELLED, older_cancelled, limit - n,
                          err)) < 0)
        goto fail;
    n += rc;
    if ((rc = prune_state(b, S_PRUNE_DEAD, older_dead, limit - n, err)) < 0)
        goto fail;
    n += rc;
    /* windows of unique keys that ended (unique_for) */
    if ((rc = prune_state(b, S_PRUNE_UNIQUE, 0, limit - n, err)) < 0)
        goto fail;
    n += rc;
    return commit(b, err) < 0 ? -1 : n;
fail:
    rollback(b);
    return -1;
}

/* Runs statement which on (id, now); returns changes or -1. */
static int
run_id(jr_backend *b, int which, int64_t id, double now, jr_err *err,
       const char *what)
{
    sqlite3_stmt *s = stmt(b, which, err);

    if (s == NULL)
        return -1;
    sqlite3_bind_int64(s, 1, id);
    sqlite3_bind_double(s, 2, now);
    return run(b, s, err, what);
}

/* The JR_CANCEL_* outcome of cancelling id, in the open transaction. */
static int
cancel_one(jr_backend *b, int64_t id, double now, jr_err *err)
{
    sqlite3_stmt *s;
    int rc;

    if ((rc = run_id(b, S_CANCEL_QUEUED, id, now, err, "cancelling a job"))
        != 0)
        return rc < 0 ? -1 : JR_CANCEL_DONE;
    if ((rc = run_id(b, S_CANCEL_RUNNING, id, now, err, "cancelling a job"))
        != 0)
        return rc < 0 ? -1 : JR_CANCEL_REQUESTED;
    if ((s = stmt(b, S_EXISTS, err)) == NULL)
        return -1;
    sqlite3_bind_int64(s, 1, id);
    rc = sqlite3_step(s);
    sqlite3_reset(s);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
        return db_fail(b, err, "cancelling a job");
    return rc == SQLITE_ROW ? JR_CANCEL_FINISHED : JR_CANCEL_NOTFOUND;
}

static int
sqlite_cancel(jr_backend *b, const int64_t *ids, int n, int *outcome,
              jr_err *err)
{
    double now = jr_now();
    int i;

    if (n <= 0)
        return 0;
    if (begin(b, err) < 0)
        return -1;
    for (i = 0; i < n; i++) {
        if ((outcome[i] = cancel_one(b, ids[i], now, err)) < 0) {
            rollback(b);
            return -1;
        }
    }
    return commit(b, err);
}

static int
sqlite_cancelled(jr_backend *b, const char *token, int64_t *ids, int max,
                 jr_err *err)
{
    sqlite3_stmt *s;
    int n = 0, rc;

    if (max <= 0)
        return 0;
    if ((s = stmt(b, S_CANCEL_POLL, err)) == NULL)
        return -1;
    bind_text(s, 1, token);
    sqlite3_bind_int(s, 2, max);
    while ((rc = sqlite3_step(s)) == SQLITE_ROW && n < max)
        ids[n++] = sqlite3_column_int64(s, 0);
    sqlite3_reset(s);
    return rc == SQLITE_ROW || rc == SQLITE_DONE ? n :
           db_fail(b, err, "reading cancel requests");
}

static int
set_paused(jr_backend *b, int which, const char *queue, jr_err *err)
{
    sqlite3_stmt *s;

    if (jr_name_check(queue, "queue name", err) < 0)
        return -1;
    if (begin(b, err) < 0)
        return -1;
    if ((s = stmt(b, which, err)) == NULL)
        return write_end(b, -1, err);
    bind_text(s, 1, queue);
    sqlite3_bind_double(s, 2, jr_now());
    return write_end(b, run(b, s, err, which == S_PAUSE ? "pausing a queue" :
                            "resuming a queue"), err) < 0 ? -1 : 0;
}

static int
sqlite_pause(jr_backend *b, const char *queue, jr_err *err)
{
    return set_paused(b, S_PAUSE, queue, err);
}

static int
sqlite_resume(jr_backend *b, const char *queue, jr_err *err)
{
    return set_paused(b, S_RESUME, queue, err);
}

static int
sqlite_queue_prune(jr_backend *b, double idle, const char *const *keep,
                   int nkeep, int limit, jr_err *err)
{
    char *json = names_json(keep, nkeep);
    sqlite3_stmt *s;
    int n = -1;

    if (json == NULL)
        return jr_fail(err, JR_ENOMEM, "sqlite: out of memory");
    if (begin(b, err) == 0 && (s = stmt(b, S_QUEUE_PRUNE, err)) != NULL) {
        sqlite3_bind_double(s, 1, jr_now() - idle);
        bind_text(s, 2, json);
        sqlite3_bind_int(s, 3, limit);
        n = run(b, s, err, "pruning idle queues");
    }
    free(json);
    if (n < 0 || commit(b, err) < 0) {
        rollback(b);
        return -1;
    }
    return n;
}

static int
sqlite_paused(jr_backend *b, jr_name_cb cb, void *arg, jr_err *err)
{
    sqlite3_stmt *s = stmt(b, S_PAUSED, err);
    int rc;

    if (s == NULL)
        return -1;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW)
        if (cb((const char *)sqlite3_column_text(s, 0), arg) != 0)
            break;
    sqlite3_reset(s);
    return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 :
           db_fail(b, err, "reading the paused queues");
}

static int
sqlite_ready_by_queue(jr_backend *b, const char *const *names, int nnames,
                      long limit, jr_count_cb cb, void *arg, jr_err *err)
{
    sqlite3_stmt *s;
    char *json;
    int rc;

    if (nnames == 0)
        return 0;
    if ((json = names_json(names, nnames)) == NULL)
        return jr_fail(err, JR_ENOMEM, "sqlite: out of memory");
    if ((s = stmt(b, S_READY_BY_QUEUE, err)) == NULL) {
        free(json);
        return -1;
    }
    sqlite3_bind_double(s, 1, jr_now());
    bind_text(s, 2, json);
    sqlite3_bind_int64(s, 3, limit);
    while ((rc = sqlite3_step(s)) == SQLITE_ROW)
        if (cb((const char *)sqlite3_column_text(s, 0),
               (long)sqlite3_column_int64(s, 1), arg) != 0)
            break;
    sqlite3_reset(s);
    free(json);
    return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 :
           db_fail(b, err, "counting ready jobs");
}

static int
sqlite_queue_list(jr_backend *b, jr_queue_cb cb, void *arg, jr_err *err)
{
    sqlite3_stmt *s = stmt(b, S_QUEUE_LIST, err);
    jr_queue_row row;
    int rc;

    if (s == NULL)
        return -1;
    sqlite3_bind_double(s, 1, jr_now());
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        row.name = (const char *)sqlite3_column_text(s, 0);
        row.paused = sqlite3_column_int(s, 1);
        row.paused_at = sqlite3_column_double(s, 2);
        row.ready = sqlite3_column_int64(s, 3);
        row.scheduled = sqlite3_column_int64(s, 4);
        row.running = sqlite3_column_int64(s, 5);
        row.dead = sqlite3_column_int64(s, 6);
        row.cancelled = sqlite3_column_int64(s, 7);
        row.completed = sqlite3_column_int64(s, 8);
        if (cb(&row, arg) != 0)
            break;
    }
    sqlite3_reset(s);
    return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 :
           db_fail(b, err, "listing queues");
}

static const char *
col_text(sqlite3_stmt *s, int i)
{
    return (const char *)sqlite3_column_text(s, i);
}

static double
col_number(sqlite3_stmt *s, int i)
{
    return sqlite3_column_type(s, i) == SQLITE_NULL ? NAN :
           sqlite3_column_double(s, i);
}

/* Reads the JOB_COLUMNS of the current row of s into r. */
static void
row_fields(sqlite3_stmt *s, jr_job_row *r)
{
    r->id = sqlite3_column_int64(s, 0);
    r->name = col_text(s, 1);
    r->queue = col_text(s, 2);
    r->state = col_text(s, 3);
    r->payload = NULL;
    r->attempts = sqlite3_column_int(s, 4);
    r->max_retries = sqlite3_column_type(s, 5) == SQLITE_NULL ? -1 :
                     sqlite3_column_int(s, 5);
    r->priority = sqlite3_column_int(s, 6);
    r->run_at = sqlite3_column_double(s, 7);
    r->created_at = sqlite3_column_double(s, 8);
    r->updated_at = sqlite3_column_double(s, 9);
    r->started_at = sqlite3_column_double(s, 10);
    r->finished_at = sqlite3_column_double(s, 11);
    r->last_error = col_text(s, 12);
    r->generation = col_text(s, 13);
    r->locked_by = col_text(s, 14);
    r->locked_until = sqlite3_column_double(s, 15);
    r->progress_done = col_number(s, 16);
    r->progress_total = col_number(s, 17);
    r->progress_note = col_text(s, 18);
    r->cancel_requested = sqlite3_column_int(s, 19);
    r->unique_key = NULL;
    r->limit_key = col_text(s, 20);
}

static int
sqlite_show(jr_backend *b, int64_t id, jr_job_cb cb, void *arg, jr_err *err)
{
    sqlite3_stmt *s = stmt(b, S_SHOW, err);
    jr_job_row row;
    int rc;

    if (s == NULL)
        return -1;
    sqlite3_bind_int64(s, 1, id);
    rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) {
        row_fields(s, &row);
        row.payload = col_text(s, 21);
        row.unique_key = col_text(s, 22);
        cb(&row, arg);
    }
    sqlite3_reset(s);
    if (rc == SQLITE_DONE)
        return jr_fail(err, JR_ENOTFOUND, "job %lld: no such job",
                       (long long)id);
    return rc == SQLITE_ROW ? 0 : db_fail(b, err, "reading a job");
}

static int
sqlite_list(jr_backend *b, const jr_list_filter *f, jr_job_cb cb, void *arg,
            jr_err *err)
{
    static const jr_list_filter all;
    sqlite3_stmt *s;
    jr_job_row row;
    int rc;

    if (f == NULL)
        f = &all;
    if (jr_list_filter_check(f, err) < 0 ||
        (s = stmt(b, S_LIST, err)) == NULL)
        return -1;
    bind_text(s, 1, f->state);
    bind_text(s, 2, f->name);
    bind_text(s, 3, f->queue);
    sqlite3_bind_int(s, 4, f->limit > 0 ? f->limit : -1);
    sqlite3_bind_double(s, 5, jr_now());
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        row_fields(s, &row);
        if (cb(&row, arg) != 0)
            break;
    }
    sqlite3_reset(s);
    return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 :
           db_fail(b, err, "listing jobs");
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
    sqlite3_int64 v;
    char buf[4096];
    int rc;

    if (b->inotify_fd >= 0)
        while (read(b->inotify_fd, buf, sizeof buf) > 0)
            ;
    if (pragma_int(b, S_DATA_VERSION, "reading data_version", &v, err) < 0)
        return -1;
    rc = v != b->data_version;
    b->data_version = v;
    return rc;
}

/* ---- schedules (migration 5): fires and their jobs ---- */

/* Runs sql with ?1 schedule, ?2 at, ?3 n (an integer; the parameters sql
 * does not use are not bound); returns the rows it changed, or -1 with
 * err set. */
static int
fire_sql(jr_backend *b, const char *sql, const char *schedule, double at,
         sqlite3_int64 n, jr_err *err)
{
    sqlite3_stmt *s;
    int rc;

    if (sqlite3_prepare_v2(b->db, sql, -1, &s, NULL) != SQLITE_OK)
        return db_fail(b, err, "preparing a schedule statement");
    bind_text(s, 1, schedule);
    sqlite3_bind_double(s, 2, at);
    sqlite3_bind_int64(s, 3, n);
    rc = sqlite3_step(s);
    sqlite3_finalize(s);
    if (rc != SQLITE_DONE && rc != SQLITE_ROW)
        return db_fail(b, err, "recording a schedule's fire");
    return sqlite3_changes(b->db);
}

static int
fire_one(jr_backend *b, jr_fire *f, int keep, jr_err *err)
{
    int rc;

    f->inserted = 0;
    f->job.run_at = f->at;
    f->job.run_in = 0;
    if (jr_push_check(&f->job, 0, err) < 0 || begin(b, err) < 0)
        return -1;
    /* nothing when this fire or a later one is recorded: another runner's */
    rc = fire_sql(b, "INSERT OR IGNORE INTO schedule_fires (schedule, "
                  "fire_at) SELECT ?1, ?2 WHERE NOT EXISTS "
                  "(SELECT 1 FROM schedule_fires WHERE schedule = ?1 "
                  "AND fire_at >= ?2)", f->schedule, f->at, 0, err);
    if (rc <= 0) {
        rollback(b);
        return rc;
    }
    if (insert_one(b, &f->job, jr_now(), &f->id, err) < 0 ||
        fire_sql(b, "UPDATE schedule_fires SET job_id = ?3 WHERE "
                 "schedule = ?1 AND fire_at = ?2", f->schedule, f->at,
                 f->id, err) < 0 ||
        fire_sql(b, "DELETE FROM schedule_fires WHERE schedule = ?1 AND "
                 "fire_at < (SELECT fire_at FROM schedule_fires WHERE "
                 "schedule = ?1 ORDER BY fire_at DESC LIMIT 1 OFFSET ?3)",
                 f->schedule, f->at,
                 keep > 0 ? keep - 1 : 0, err) < 0) {
        rollback(b);
        return -1;
    }
    if (commit(b, err) < 0)
        return -1;
    f->inserted = 1;
    return 1;
}

static int
sqlite_fire(jr_backend *b, jr_fire *f, int n, int keep, jr_err *err)
{
    int i, rc, count = 0;

    for (i = 0; i < n; i++) {
        if ((rc = fire_one(b, &f[i], keep, err)) < 0)
            return -1;
        count += rc;
    }
    return count;
}

static int
sqlite_last_fires(jr_backend *b, jr_fire_cb cb, void *arg, jr_err *err)
{
    sqlite3_stmt *s;
    int rc;

    if (file_check(b, err) < 0)
        return -1;
    /* a bare column beside max() comes from the row of the max */
    if (sqlite3_prepare_v2(b->db, "SELECT schedule, max(fire_at), "
                           "coalesce(job_id, 0) FROM schedule_fires "
                           "GROUP BY schedule ORDER BY schedule", -1, &s,
                           NULL) != SQLITE_OK)
        return db_fail(b, err, "reading the last fires");
    while ((rc = sqlite3_step(s)) == SQLITE_ROW)
        if (cb((const char *)sqlite3_column_text(s, 0),
               sqlite3_column_double(s, 1), sqlite3_column_int64(s, 2),
               arg) != 0)
            break;
    sqlite3_finalize(s);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
        return db_fail(b, err, "reading the last fires");
    return 0;
}

/* ---- limits per key: paths and use ---- */

static int
sqlite_limit_paths(jr_backend *b, const jr_limit *l, int n, jr_err *err)
{
    sqlite3_stmt *s;
    int i;

    for (i = 0; i < n && l[i].key_path == NULL; i++)
        ;
    if (i == n)
        return 0;               /* no write for a runner without paths */
    if (begin(b, err) < 0)
        return -1;
    for (i = 0; i < n; i++) {
        if (l[i].key_path == NULL ||
            strncmp(l[i].scope, JR_LIMIT_QPREFIX, 6) == 0)
            continue;
        if ((s = stmt(b, S_LIM_PATH_SET, err)) == NULL)
            goto fail;
        bind_text(s, 1, l[i].scope);
        bind_text(s, 2, l[i].key_path);
        if (run(b, s, err, "recording a limit key path") < 0)
            goto fail;
    }
    return commit(b, err);
fail:
    rollback(b);
    return -1;
}

/* Binds a limit's scope as ?1 (job name) or ?2 (queue), ?3 now. */
static void
bind_scope(sqlite3_stmt *s, const jr_limit *l, double now)
{
    int q = strncmp(l->scope, JR_LIMIT_QPREFIX, 6) == 0;

    bind_text(s, q ? 2 : 1, q ? l->scope + 6 : l->scope);
    sqlite3_bind_double(s, 3, now);
}

static int
sqlite_limit_use(jr_backend *b, const jr_limit *l, jr_limit_use *u,
                 jr_err *err)
{
    double now = jr_now(), at;
    sqlite3_stmt *s;
    int rc, i;

    memset(u, 0, sizeof *u);
    for (i = 0; i < JR_LIMIT_TOP; i++) {
        free(b->lim_keys[i]);
        b->lim_keys[i] = NULL;
    }
    if ((s = stmt(b, S_LIM_USE, err)) == NULL)
        return -1;
    bind_scope(s, l, now);
    if ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        u->running = (long)sqlite3_column_int64(s, 0);
        u->waiting = (long)sqlite3_column_int64(s, 1);
    }
    sqlite3_reset(s);
    if (rc != SQLITE_ROW || (s = stmt(b, S_LIM_USE_TOP, err)) == NULL)
        return s ? db_fail(b, err, "reading a limit's use") : -1;
    bind_scope(s, l, now);
    sqlite3_bind_int(s, 4, JR_LIMIT_TOP);
    while ((rc = sqlite3_step(s)) == SQLITE_ROW && u->ntop < JR_LIMIT_TOP) {
        b->lim_keys[u->ntop] = strdup((const char *)
                                      sqlite3_column_text(s, 0));
        u->top_key[u->ntop] = b->lim_keys[u->ntop] ? b->lim_keys[u->ntop] :
                              "?";
        u->top_waiting[u->ntop] = (long)sqlite3_column_int64(s, 1);
        u->top_running[u->ntop++] = (long)sqlite3_column_int64(s, 2);
    }
    sqlite3_reset(s);
    u->tokens = l->all.rate > 0 ? l->all.burst : -1;
    if (l->all.rate > 0 && (s = stmt(b, S_LIM_TOKENS, err)) != NULL) {
        bind_text(s, 1, l->scope);
        if (sqlite3_step(s) == SQLITE_ROW) {
            at = sqlite3_column_double(s, 1);
            u->tokens = sqlite3_column_double(s, 0) +
                        (now > at ? now - at : 0) * l->all.rate;
            if (u->tokens > l->all.burst)
                u->tokens = l->all.burst;
        }
        sqlite3_reset(s);
    }
    return 0;
}

static unsigned
sqlite_reconnects(jr_backend *b)
{
    return b->reconnects;
}

/* ---- actions that someone is told succeeded: durable ---- */

/* With sync_normal (the runner's connection) a commit survives the
 * runner's crash but not the machine's; the ops below (HTTP actions, a
 * schedule's fire) commit with synchronous = FULL, as the command line's
 * do. Claims and results stay NORMAL. */
static int
set_full(jr_backend *b, int on, jr_err *err)
{
    if (on && file_check(b, err) < 0)
        return -1;
    if (b->sync_normal && b->db != NULL)
        sqlite3_exec(b->db, on ? "PRAGMA synchronous = FULL" :
                     "PRAGMA synchronous = NORMAL", NULL, NULL, NULL);
    return 0;
}

enum { D_PAUSE, D_RESUME, D_RETRY, D_DELETE, D_PURGE, D_FIRE, D_CANCEL };

typedef struct dargs {
    const char    *queue;
    const int64_t *ids;
    int            n, keep;
    double         age;
    jr_fire       *f;
    int           *outcome;
} dargs;

static int
durable(jr_backend *b, int which, const dargs *a, jr_err *err)
{
    int rc = -1;

    if (set_full(b, 1, err) < 0)
        return -1;
    switch (which) {
    case D_PAUSE:  rc = sqlite_pause(b, a->queue, err); break;
    case D_RESUME: rc = sqlite_resume(b, a->queue, err); break;
    case D_RETRY:  rc = sqlite_dead_retry(b, a->ids, a->n, err); break;
    case D_DELETE: rc = sqlite_dead_delete(b, a->ids, a->n, err); break;
    case D_PURGE:  rc = sqlite_dead_purge(b, a->age, err); break;
    case D_FIRE:   rc = sqlite_fire(b, a->f, a->n, a->keep, err); break;
    case D_CANCEL:
        rc = sqlite_cancel(b, a->ids, a->n, a->outcome, err);
        break;
    }
    set_full(b, 0, err);
    return rc;
}

static int
durable_pause(jr_backend *b, const char *queue, jr_err *err)
{
    return durable(b, D_PAUSE, &(dargs){.queue = queue}, err);
}

static int
durable_resume(jr_backend *b, const char *queue, jr_err *err)
{
    return durable(b, D_RESUME, &(dargs){.queue = queue}, err);
}

static int
durable_dead_retry(jr_backend *b, const int64_t *ids, int n, jr_err *err)
{
    return durable(b, D_RETRY, &(dargs){.ids = ids, .n = n}, err);
}

static int
durable_dead_delete(jr_backend *b, const int64_t *ids, int n, jr_err *err)
{
    return durable(b, D_DELETE, &(dargs){.ids = ids, .n = n}, err);
}

static int
durable_dead_purge(jr_backend *b, double older_than, jr_err *err)
{
    return durable(b, D_PURGE, &(dargs){.age = older_than}, err);
}

static int
durable_fire(jr_backend *b, jr_fire *f, int n, int keep, jr_err *err)
{
    return durable(b, D_FIRE, &(dargs){.f = f, .n = n, .keep = keep}, err);
}

static int
durable_cancel(jr_backend *b, const int64_t *ids, int n, int *outcome,
               jr_err *err)
{
    return durable(b, D_CANCEL, &(dargs){.ids = ids, .n = n,
                                         .outcome = outcome}, err);
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
    .stats = sqlite_stats,
    .dead_list = sqlite_dead_list,
    .dead_retry = durable_dead_retry,
    .dead_purge = durable_dead_purge,
    .prune = sqlite_prune,
    .queue_prune = sqlite_queue_prune,
    .cancel = durable_cancel,
    .cancelled = sqlite_cancelled,
    .pause = durable_pause,
    .resume = durable_resume,
    .queue_list = sqlite_queue_list,
    .paused = sqlite_paused,
    .ready_by_queue = sqlite_ready_by_queue,
    .show = sqlite_show,
    .list = sqlite_list,
    .wake_fd = sqlite_wake_fd,
    .changed = sqlite_changed,
    .close = sqlite_close,
    .fire = durable_fire,
    .last_fires = sqlite_last_fires,
    .dead_delete = durable_dead_delete,
    .limit_paths = sqlite_limit_paths,
    .limit_use = sqlite_limit_use,
    .reconnects = sqlite_reconnects,
};
