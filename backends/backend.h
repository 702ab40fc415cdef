/* backend.h - the storage interface: one table of functions per engine, as
 * redis's engine table. sqlite.c and postgres.c each export only their
 * jr_backend_ops; backend.c picks one from a URL (jr_url_parse, the one
 * parser) and masks passwords in URLs (jr_url_mask, in url.h with
 * jr_url_engine for the code that does not include this header). Also
 * the rows that stats and the dead queue list. All calls are blocking;
 * the master never calls them from its event loop directly (see
 * dbthread.c, the only file of the runner that includes this header
 * besides commands.c, client.c and luaclient.c). The jobs, pushes and
 * results they store are job.h's. Uses err.h, job.h, url.h. */
#ifndef JR_BACKEND_H
#define JR_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "job.h"
#include "url.h"

typedef struct jr_backend jr_backend;   /* opaque; each engine defines it */

/* One row of stats: counts for one job name. */
typedef struct jr_stat_row {
    const char *name;
    long        ready;          /* queued and due */
    long        scheduled;      /* queued, run_at in the future */
    long        running;
    long        dead;
} jr_stat_row;

/* One dead job. Strings valid during the callback only. */
typedef struct jr_dead_row {
    int64_t     id;
    const char *name;
    const char *queue;
    int         attempts;
    const char *last_error;
    const char *generation;     /* may be NULL */
    double      died_at;
    double      created_at;
} jr_dead_row;

typedef int (*jr_stat_cb)(const jr_stat_row *row, void *arg);
typedef int (*jr_dead_cb)(const jr_dead_row *row, void *arg);

typedef struct jr_backend_opts {
    int         sync_normal;    /* SQLite: synchronous=NORMAL instead of FULL */
    double      busy_timeout;   /* SQLite: seconds to wait for a lock */
    const char *schema;         /* PostgreSQL: schema name, NULL "jobrunner" */
    size_t      max_payload;    /* bytes; 0: no limit */
    int         must_exist;     /* readers: open an existing database only;
                                   SQLite creates no file, migrate creates
                                   no schema (JR_ENOTFOUND instead) */
} jr_backend_opts;

/* Every function returns -1 with err set on failure unless said otherwise.
 * Times are judged by the database's clock. */
typedef struct jr_backend_ops {
    const char *name;           /* "sqlite" or "postgres" */
    /* Opens a connection. url is what followed the scheme check in
     * backend.c (whole URL for postgres, the path for sqlite). Does not
     * create tables: call migrate. NULL with err set on failure. */
    jr_backend *(*open)(const char *url, const jr_backend_opts *o,
                        jr_err *err);
    /* Creates or upgrades the schema; safe to run from many processes at
     * once. Returns 0. */
    int  (*migrate)(jr_backend *b, jr_err *err);
    /* Inserts n jobs in one transaction; all or none. ids (may be NULL)
     * receives their ids. Returns 0. */
    int  (*push)(jr_backend *b, const jr_push *p, int n, int64_t *ids,
                 jr_err *err);
    /* Claims up to max ready jobs (state queued, run_at <= now) whose name
     * is one of names[0..nnames), ordered by priority, run_at, id: marks them
     * running under token until now + lease seconds and counts the attempt.
     * Fills out[] (max slots) with new jobs (caller frees each). Returns how many, or -1
     * and then nothing was claimed. */
    int  (*claim)(jr_backend *b, const char *token, double lease,
                  const char *const *names, int nnames, int max,
                  jr_job **out, jr_err *err);
    /* Records n results in one transaction, each fenced: a row changes only
     * if it is still running under token. Returns how many were applied. */
    int  (*complete)(jr_backend *b, const char *token, const jr_result *r,
                     int n, jr_err *err);
    /* Optional (NULL: complete, then claim): both in one transaction.
     * Returns what claim returns and sets *applied as complete would; on
     * -1 nothing was recorded nor claimed. */
    int  (*complete_claim)(jr_backend *b, const char *token,
                           const jr_result *r, int nr, int *applied,
                           double lease, const char *const *names,
                           int nnames, int max, jr_job **out, jr_err *err);
    /* Extends to now + lease every lease held by token. Returns count. */
    int  (*renew)(jr_backend *b, const char *token, double lease,
                  jr_err *err);
    /* Requeues running jobs whose lease expired (any runner's), with
     * last_error 'lease expired: runner lost' and the lost attempt counted
     * (it was counted at claim). It never decides death: the runner that
     * claims the job next knows its handler's max_retries and records a
     * job out of retries as JR_EXPIRED without running it. Returns how
     * many rows it changed. */
    int  (*rescue)(jr_backend *b, jr_err *err);
    /* Counts ready jobs (queued, due) whose name is in names[0..nnames),
     * stopping at limit. Returns the count. */
    long (*count_ready)(jr_backend *b, const char *const *names, int nnames,
                        long limit, jr_err *err);
    /* Calls cb for each job name with any job, ordered by name. A non-zero
     * return from cb stops the walk (still a success). */
    int  (*stats)(jr_backend *b, jr_stat_cb cb, void *arg, jr_err *err);
    /* Calls cb for up to limit dead jobs (limit 0: all of them), newest
     * death first; a non-zero return from cb stops the walk. */
    int  (*dead_list)(jr_backend *b, int limit, jr_dead_cb cb, void *arg,
                      jr_err *err);
    /* Requeues dead jobs ids[0..n) (n < 0: all dead jobs) with attempts 0.
     * Returns how many. */
    int  (*dead_retry)(jr_backend *b, const int64_t *ids, int n,
                       jr_err *err);
    /* Deletes dead jobs that died more than older_than seconds ago
     * (0: all). Returns how many. */
    int  (*dead_purge)(jr_backend *b, double older_than, jr_err *err);
    /* A descriptor that becomes readable when another process may have
     * added work (PostgreSQL's LISTEN socket, SQLite's inotify on the WAL),
     * or -1 if there is none. Valid until the next call on b. */
    int  (*wake_fd)(jr_backend *b);
    /* Consumes pending wake-ups; returns 1 if the database changed since
     * the last call, 0 if not, -1 on error (e.g. connection lost). */
    int  (*changed)(jr_backend *b, jr_err *err);
    /* Closes the connection; NULL is a no-op. */
    void (*close)(jr_backend *b);
} jr_backend_ops;

/* A backend connection as the rest of the runtime holds it. */
typedef struct jr_db {
    const jr_backend_ops *ops;
    jr_backend           *b;
} jr_db;

/* Opens the backend named by url: "sqlite:PATH", a path ending in .db, or
 * "postgres://..." / "postgresql://..." / a libpq conninfo "host=...".
 * Returns 0 and fills db, or -1 with err set. */
int  jr_db_open(jr_db *db, const char *url, const jr_backend_opts *o,
                jr_err *err);
void jr_db_close(jr_db *db);    /* zeroed or closed db is a no-op */

/* The one URL parser: which engine url names ("sqlite:PATH",
 * "sqlite://PATH", a path ending in .db, .sqlite or .sqlite3, or a
 * PostgreSQL URL or conninfo) and in *arg what its open takes (the file
 * path for SQLite, the whole URL for PostgreSQL). NULL with err set (err
 * may be NULL) when it names none. */
const jr_backend_ops *jr_url_parse(const char *url, const char **arg,
                                   jr_err *err);
/* jr_url_engine and jr_url_mask, for callers without backend.h, are in
 * url.h. */

extern const jr_backend_ops jr_sqlite_ops;
extern const jr_backend_ops jr_postgres_ops;

#endif
