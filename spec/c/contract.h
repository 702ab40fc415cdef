/* contract.h - the backend contract's shared setup: every test_contract_*.c
 * drives the functions of jr_backend_ops (backend.h) the same way against
 * SQLite (a temp file) and, when a URL is given, PostgreSQL (a schema of its
 * own, dropped after), through engines.h. Checks go through the ops
 * themselves, so one test reads the same for both. Here: a connection, a
 * push, a claim, the counts per state and the dead and shown jobs as the
 * ops give them. The helpers are static inline: each file uses some. */
#ifndef JR_SPEC_CONTRACT_H
#define JR_SPEC_CONTRACT_H

#include <math.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <libpq-fe.h>

#include "backend.h"
#include "engines.h"

/* A claim spec of today's kind: names, every queue, max in all. */
#define ALL_QUEUES(nm, n, mx) (&(jr_claim_spec){.names = (nm),          \
        .nnames = (n), .others = (mx), .max = (mx)})

static inline void
nap(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

/* A new connection, migrated, keeping completed jobs keep seconds (0:
 * deleting them); the test exits if it cannot open. */
static inline jr_db
conn_keep(double keep)
{
    jr_backend_opts o = {.schema = schema[0] ? schema : NULL,
                         .keep_completed = keep};
    jr_db db;
    jr_err e = {0};

    if (jr_db_open(&db, url, &o, &e) < 0 || db.ops->migrate(db.b, &e) < 0) {
        fprintf(stderr, "%s: open: %s\n", engine, e.msg);
        exit(2);
    }
    return db;
}

static inline jr_db
conn(void)
{
    return conn_keep(0);
}

static inline jr_push
job(const char *name)
{
    jr_push p = {.name = name, .max_retries = -1};
    return p;
}

static inline int64_t
push1(jr_db *db, jr_push p)
{
    int64_t id = -1;
    jr_err e = {0};

    CHECK_OK(db->ops->push(db->b, &p, 1, &id, &e), e);
    return id;
}

static inline int
claim(jr_db *db, const char *token, double lease, const char *name,
      jr_job **out, int max)
{
    const char *names[1] = {name};
    jr_err e = {0};
    int n = db->ops->claim(db->b, token, lease, ALL_QUEUES(names, 1, max),
                           out, &e);

    CHECK_OK(n, e);
    return n;
}

static inline void
free_jobs(jr_job **j, int n)
{
    while (n-- > 0)
        free(j[n]);
}

/* Counts of one name from stats: ready, scheduled, running, dead. */
typedef struct counts {
    const char *name;
    long        v[4];
} counts;

static inline int
count_cb(const jr_stat_row *row, void *arg)
{
    counts *c = arg;

    if (strcmp(row->name, c->name) == 0) {
        c->v[0] = row->n[JR_STATE_READY];
        c->v[1] = row->n[JR_STATE_SCHEDULED];
        c->v[2] = row->n[JR_STATE_RUNNING];
        c->v[3] = row->n[JR_STATE_DEAD];
    }
    return 0;
}

static inline counts
counts_of(jr_db *db, const char *name)
{
    counts c = {name, {0, 0, 0, 0}};
    jr_err e = {0};

    CHECK_OK(db->ops->stats(db->b, count_cb, &c, &e), e);
    return c;
}

#define STATE(db, name, r, s, run, d) do {                               \
        counts c_ = counts_of(db, name);                                      \
        CHECK(c_.v[0] == (r) && c_.v[1] == (s) && c_.v[2] == (run) &&    \
              c_.v[3] == (d));                                           \
        if (c_.v[0] != (r) || c_.v[1] != (s) || c_.v[2] != (run) ||      \
            c_.v[3] != (d))                                              \
            fprintf(stderr, "  %s: ready %ld scheduled %ld running %ld " \
                    "dead %ld\n", name, c_.v[0], c_.v[1], c_.v[2],       \
                    c_.v[3]);                                            \
    } while (0)

/* Dead rows as dead_list gives them. */
typedef struct deads {
    int     n;
    int64_t id[16];
    int     attempts[16];
    char    error[16][128];
} deads;

static inline int
dead_cb(const jr_dead_row *row, void *arg)
{
    deads *d = arg;

    if (d->n < 16) {
        d->id[d->n] = row->id;
        d->attempts[d->n] = row->attempts;
        snprintf(d->error[d->n], sizeof d->error[0], "%s",
                 row->last_error ? row->last_error : "");
    }
    d->n++;
    return 0;
}

static inline deads
dead_list(jr_db *db, int limit)
{
    deads d;
    jr_err e = {0};

    memset(&d, 0, sizeof d);
    CHECK_OK(db->ops->dead_list(db->b, limit, dead_cb, &d, &e), e);
    return d;
}

/* ---- jobs as show gives them, claims by spec, results ---- */

/* A job as show gives it, strings copied. */
typedef struct shown {
    int     found;
    int64_t id;
    char    name[64], queue[64], state[16], payload[128], last_error[128];
    char    locked_by[32], note[64];
    int     attempts, max_retries, priority, cancel_requested;
    int     has_payload;
    double  run_at, created_at, started_at, finished_at, done, total;
} shown;

static inline void
copy(char *dst, size_t size, const char *src)
{
    snprintf(dst, size, "%s", src ? src : "");
}

static inline int
show_cb(const jr_job_row *r, void *arg)
{
    shown *s = arg;

    s->found = 1;
    s->id = r->id;
    copy(s->name, sizeof s->name, r->name);
    copy(s->queue, sizeof s->queue, r->queue);
    copy(s->state, sizeof s->state, r->state);
    copy(s->payload, sizeof s->payload, r->payload);
    s->has_payload = r->payload != NULL;
    copy(s->last_error, sizeof s->last_error, r->last_error);
    copy(s->locked_by, sizeof s->locked_by, r->locked_by);
    copy(s->note, sizeof s->note, r->progress_note);
    s->attempts = r->attempts;
    s->max_retries = r->max_retries;
    s->priority = r->priority;
    s->cancel_requested = r->cancel_requested;
    s->run_at = r->run_at;
    s->created_at = r->created_at;
    s->started_at = r->started_at;
    s->finished_at = r->finished_at;
    s->done = r->progress_done;
    s->total = r->progress_total;
    return 0;
}

/* The job id as show gives it; found 0 (and JR_ENOTFOUND checked) if
 * there is none. */
static inline shown
show(jr_db *db, int64_t id)
{
    shown s;
    jr_err e = {0};

    memset(&s, 0, sizeof s);
    if (db->ops->show(db->b, id, show_cb, &s, &e) < 0)
        CHECK(e.code == JR_ENOTFOUND && strstr(e.msg, "no such job"));
    return s;
}

#define STATE_IS(db, id, st) do {                                        \
        shown s_ = show(db, id);                                         \
        CHECK(strcmp(s_.state, (st)) == 0);                              \
        if (strcmp(s_.state, (st)) != 0)                                 \
            fprintf(stderr, "  job %lld: state '%s', expected '%s'\n",   \
                    (long long)(id), s_.state, (st));                    \
    } while (0)

/* Claims with spec; returns how many (out has room for spec->max). */
static inline int
claim_spec(jr_db *db, const char *token, const jr_claim_spec *spec,
           jr_job **out)
{
    jr_err e = {0};
    int n = db->ops->claim(db->b, token, 30, spec, out, &e);

    CHECK_OK(n, e);
    return n < 0 ? 0 : n;
}

static inline int64_t
push_q(jr_db *db, const char *name, const char *queue, int priority,
       double run_in)
{
    jr_push p = job(name);

    p.queue = queue;
    p.priority = priority;
    p.run_in = run_in;
    return push1(db, p);
}

/* Records one result of kind for id under token; returns applied. */
static inline int
result(jr_db *db, const char *token, int64_t id, int kind)
{
    jr_result r;
    jr_err e = {0};
    int n;

    memset(&r, 0, sizeof r);
    r.id = id;
    r.kind = kind;
    r.error = kind == JR_RETRY || kind == JR_DEAD ? "failed" : NULL;
    n = db->ops->complete(db->b, token, &r, 1, &e);
    CHECK_OK(n, e);
    return n;
}

#endif
