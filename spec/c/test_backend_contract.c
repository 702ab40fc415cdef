/* test_backend_contract.c - one contract, both engines: every function of
 * jr_backend_ops (backend.h) driven the same way against SQLite (a temp
 * file) and, when a URL is given, PostgreSQL (a schema of its own, dropped
 * after). Checks go through the ops themselves, so one test reads the same
 * for both. Usage: test_backend_contract [POSTGRES_URL]; spec/run passes
 * the throwaway cluster's. Prints "N passed, N failed". */
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



static void
nap(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

/* A new connection, migrated, keeping completed jobs keep seconds (0:
 * deleting them); the test exits if it cannot open. */
static jr_db
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

static jr_db
conn(void)
{
    return conn_keep(0);
}

static jr_push
job(const char *name)
{
    jr_push p = {.name = name, .max_retries = -1};
    return p;
}

static int64_t
push1(jr_db *db, jr_push p)
{
    int64_t id = -1;
    jr_err e = {0};

    CHECK_OK(db->ops->push(db->b, &p, 1, &id, &e), e);
    return id;
}

static int
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

static void
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

static int
count_cb(const jr_stat_row *row, void *arg)
{
    counts *c = arg;

    if (strcmp(row->name, c->name) == 0) {
        c->v[0] = row->ready;
        c->v[1] = row->scheduled;
        c->v[2] = row->running;
        c->v[3] = row->dead;
    }
    return 0;
}

static counts
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

static int
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

static deads
dead_list(jr_db *db, int limit)
{
    deads d;
    jr_err e = {0};

    memset(&d, 0, sizeof d);
    CHECK_OK(db->ops->dead_list(db->b, limit, dead_cb, &d, &e), e);
    return d;
}

/* ---- tests: each works on names of its own ---- */

static void
test_open_migrate(void)
{
    jr_db db = conn();
    jr_db bad;
    jr_err e = {0};

    CHECK(db.ops->migrate(db.b, &e) == 0);     /* again: a no-op */
    CHECK(strcmp(db.ops->name, engine) == 0);
    CHECK(jr_db_open(&bad, "nosuch://x", NULL, &e) < 0 &&
          e.code == JR_EUSAGE);
    db.ops->close(NULL);                       /* NULL is a no-op */
    jr_db_close(&db);
}

static void
test_push(void)
{
    jr_db db = conn();
    jr_push p[3] = {job("c.push"), job("c.push"), job("c.push")};
    int64_t ids[3];
    jr_err e = {0};

    p[1].payload = "{\"a\": [1, 2]}";
    p[2].queue = "other";
    CHECK_OK(db.ops->push(db.b, p, 3, ids, &e), e);
    CHECK(ids[0] < ids[1] && ids[1] < ids[2]);
    STATE(&db, "c.push", 3, 0, 0, 0);
    p[0].run_in = 3600;
    CHECK(push1(&db, p[0]) > ids[2]);
    STATE(&db, "c.push", 3, 1, 0, 0);
    CHECK(db.ops->push(db.b, p, 0, NULL, &e) == 0);
    jr_db_close(&db);
}

/* A batch with one bad job is refused as a whole, as input (JR_EINPUT),
 * before or by the database, whatever is wrong with it. */
static void
test_push_refused(void)
{
    static const char *const why[] = {"name", "queue", "json", "run_in",
                                      "run_at", "max_retries", "both"};
    jr_db db = conn();
    jr_push p[2];
    jr_err e;
    size_t i;

    for (i = 0; i < sizeof why / sizeof why[0]; i++) {
        p[0] = job("c.refused");
        p[1] = job("c.refused");
        switch (i) {
        case 0: p[1].name = "bad name"; break;
        case 1: p[1].queue = "bad/queue"; break;
        case 2: p[1].payload = "{nope"; break;
        case 3: p[1].run_in = 0.0 / 0.0; break;
        case 4: p[1].run_at = 1.0 / 0.0; break;
        case 5: p[1].max_retries = -5; break;
        case 6: p[1].run_at = 1e9; p[1].run_in = 5; break;
        }
        memset(&e, 0, sizeof e);
        CHECK(db.ops->push(db.b, p, 2, NULL, &e) < 0);
        if (e.code != JR_EINPUT)
            fprintf(stderr, "  %s: %s: code %d: %s\n", engine, why[i],
                    e.code, e.msg);
        CHECK(e.code == JR_EINPUT);
    }
    STATE(&db, "c.refused", 0, 0, 0, 0);
    jr_db_close(&db);
}

static void
test_claim(void)
{
    jr_db db = conn();
    jr_push p = job("c.claim");
    int64_t low, mid, high;
    jr_job *j[4];
    const char *none[1] = {"c.nothing"};
    jr_err e = {0};
    int n;

    mid = push1(&db, p);
    p.priority = 5;
    high = push1(&db, p);
    p.priority = -5;
    p.max_retries = 3;
    low = push1(&db, p);
    CHECK(db.ops->claim(db.b, "T", 30, ALL_QUEUES(none, 0, 4), j, &e) == 0);
    CHECK(db.ops->claim(db.b, "T", 30, ALL_QUEUES(none, 1, 4), j, &e) == 0);
    n = claim(&db, "T", 30, "c.claim", j, 2);
    CHECK(n == 2);
    if (n == 2) {
        CHECK(j[0]->id == low && j[1]->id == mid);
        CHECK(j[0]->attempt == 1 && j[0]->max_retries == 3 &&
              j[1]->max_retries == -1);
        CHECK(j[0]->priority == -5 && strcmp(j[0]->queue, "default") == 0);
        CHECK(strcmp(j[0]->payload, "{}") == 0 && j[0]->payload_len == 2);
    }
    free_jobs(j, n);
    STATE(&db, "c.claim", 1, 0, 2, 0);
    n = claim(&db, "T", 30, "c.claim", j, 4);
    CHECK(n == 1 && j[0]->id == high);
    free_jobs(j, n);
    CHECK(claim(&db, "T", 30, "c.claim", j, 4) == 0);
    jr_db_close(&db);
}

static void
test_complete(void)
{
    jr_db db = conn();
    jr_push follow[2] = {job("c.follow"), job("c.follow")};
    jr_result r[6];
    int64_t id[6];
    jr_job *j[6];
    jr_err e = {0};
    deads d;
    int i, n;

    for (i = 0; i < 6; i++)
        id[i] = push1(&db, job("c.done"));
    n = claim(&db, "T", 30, "c.done", j, 6);
    CHECK(n == 6);
    free_jobs(j, n);
    memset(r, 0, sizeof r);
    for (i = 0; i < 6; i++)
        r[i].id = id[i];
    r[0].kind = JR_DONE;
    r[0].pushes = follow;
    r[0].npushes = 2;
    r[1].kind = JR_RETRY;
    r[1].delay = 3600;
    r[1].error = "boom";
    r[2].kind = JR_DEAD;
    r[2].error = "gave up";
    r[3].kind = JR_SNOOZE;
    r[3].delay = 3600;
    r[4].kind = JR_RELEASE;
    r[5].kind = JR_EXPIRED;
    /* fenced: another token changes nothing */
    CHECK(db.ops->complete(db.b, "other", r, 6, &e) == 0);
    STATE(&db, "c.done", 0, 0, 6, 0);
    CHECK(db.ops->complete(db.b, "T", r, 6, &e) == 6);
    STATE(&db, "c.done", 1, 2, 0, 2);
    STATE(&db, "c.follow", 2, 0, 0, 0);
    d = dead_list(&db, 0);
    CHECK(d.n == 2);
    for (i = 0; i < d.n && i < 16; i++) {
        if (d.id[i] == id[2])
            CHECK(d.attempts[i] == 1 && strcmp(d.error[i], "gave up") == 0);
        else
            CHECK(d.id[i] == id[5] && d.attempts[i] == 0);
    }
    /* the released job's attempt was not counted */
    n = claim(&db, "T", 30, "c.done", j, 6);
    CHECK(n == 1 && j[0]->id == id[4] && j[0]->attempt == 1);
    free_jobs(j, n);
    CHECK(db.ops->complete(db.b, "T", r, 0, &e) == 0);
    jr_db_close(&db);
}

/* A follow-up the database will not take: the whole batch is refused as
 * input (so the caller can isolate it), nothing recorded. */
static void
test_complete_refused(void)
{
    jr_db db = conn();
    jr_push follow = job("c.rfollow");
    jr_result r[2];
    jr_job *j[2];
    jr_err e = {0};
    int n;

    push1(&db, job("c.rdone"));
    push1(&db, job("c.rdone"));
    n = claim(&db, "T", 30, "c.rdone", j, 2);
    CHECK(n == 2);
    memset(r, 0, sizeof r);
    r[0].id = j[0]->id;
    r[0].kind = JR_DONE;
    r[1].id = j[1]->id;
    r[1].kind = JR_DONE;
    r[1].pushes = &follow;
    r[1].npushes = 1;
    free_jobs(j, n);
    follow.run_in = 0.0 / 0.0;
    CHECK(db.ops->complete(db.b, "T", r, 2, &e) < 0 && e.code == JR_EINPUT);
    STATE(&db, "c.rdone", 0, 0, 2, 0);
    follow.run_in = 0;
    follow.payload = "[not json";
    CHECK(db.ops->complete(db.b, "T", r, 2, &e) < 0 && e.code == JR_EINPUT);
    STATE(&db, "c.rdone", 0, 0, 2, 0);
    STATE(&db, "c.rfollow", 0, 0, 0, 0);
    CHECK(db.ops->complete(db.b, "T", r, 1, &e) == 1);
    STATE(&db, "c.rdone", 0, 0, 1, 0);
    jr_db_close(&db);
}

static void
test_complete_claim(void)
{
    jr_db db = conn();
    const char *names[1] = {"c.cc"};
    jr_result r;
    jr_job *j[4];
    jr_err e = {0};
    int n, applied = -1;

    if (db.ops->complete_claim == NULL) {
        jr_db_close(&db);
        return;
    }
    push1(&db, job("c.cc"));
    push1(&db, job("c.cc"));
    n = claim(&db, "T", 30, "c.cc", j, 1);
    CHECK(n == 1);
    memset(&r, 0, sizeof r);
    r.id = j[0]->id;
    r.kind = JR_DONE;
    free_jobs(j, n);
    n = db.ops->complete_claim(db.b, "T", &r, 1, &applied, 30,
                               ALL_QUEUES(names, 1, 4), j, &e);
    CHECK_OK(n, e);
    CHECK(n == 1 && applied == 1);
    free_jobs(j, n > 0 ? n : 0);
    STATE(&db, "c.cc", 0, 0, 1, 0);
    jr_db_close(&db);
}

static void
test_renew_rescue(void)
{
    jr_db db = conn();
    jr_push p = job("c.lease");
    jr_job *j[4];
    jr_err e = {0};
    int64_t held, other = 999999;
    int n;

    push1(&db, p);
    p.max_retries = 0;
    push1(&db, p);
    push1(&db, job("c.held"));
    n = claim(&db, "gone", 0.05, "c.lease", j, 4);
    CHECK(n == 2);
    free_jobs(j, n);
    n = claim(&db, "alive", 0.05, "c.held", j, 4);
    CHECK(n == 1);
    held = n == 1 ? j[0]->id : 0;
    free_jobs(j, n);
    /* only the jobs named: a row of the token not among them is left to
     * expire (a completion a crash undid) */
    CHECK(db.ops->renew(db.b, "alive", 60, NULL, 0, &e) == 0);
    CHECK(db.ops->renew(db.b, "alive", 60, &other, 1, &e) == 0);
    CHECK(db.ops->renew(db.b, "alive", 60, &held, 1, &e) == 1);
    CHECK(db.ops->renew(db.b, "nobody", 60, &held, 1, &e) == 0);
    nap(0.2);
    /* requeued with the attempt counted, never dead, even at max_retries 0:
     * the runner that claims it next decides (JR_EXPIRED) */
    CHECK(db.ops->rescue(db.b, &e) == 2);
    STATE(&db, "c.lease", 2, 0, 0, 0);
    STATE(&db, "c.held", 0, 0, 1, 0);
    CHECK(db.ops->rescue(db.b, &e) == 0);
    n = claim(&db, "next", 30, "c.lease", j, 4);
    CHECK(n == 2 && j[0]->attempt == 2 && j[1]->attempt == 2);
    free_jobs(j, n);
    jr_db_close(&db);
}

static void
test_count_ready(void)
{
    jr_db db = conn();
    const char *names[2] = {"c.ready", "c.ready2"};
    jr_push p = job("c.ready");
    jr_err e = {0};
    int i;

    for (i = 0; i < 3; i++)
        push1(&db, p);
    p.name = "c.ready2";
    push1(&db, p);
    p.run_in = 3600;
    push1(&db, p);
    CHECK(jr_db_count_ready(&db, names, 2, 100, &e) == 4);
    CHECK(jr_db_count_ready(&db, names, 2, 2, &e) == 2);
    CHECK(jr_db_count_ready(&db, names, 1, 100, &e) == 3);
    CHECK(jr_db_count_ready(&db, names, 0, 100, &e) == 0);
    jr_db_close(&db);
}

/* limit 0 lists every dead job on both engines; limit n at most n, newest
 * death first. */
static void
test_dead(void)
{
    jr_db db = conn();
    jr_result r;
    int64_t id[3];
    jr_job *j[1];
    jr_err e = {0};
    deads d;
    int i, before = dead_list(&db, 0).n;

    for (i = 0; i < 3; i++) {
        id[i] = push1(&db, job("c.dead"));
        CHECK(claim(&db, "T", 30, "c.dead", j, 1) == 1);
        free(j[0]);
        memset(&r, 0, sizeof r);
        r.id = id[i];
        r.kind = JR_DEAD;
        r.error = "x";
        CHECK(db.ops->complete(db.b, "T", &r, 1, &e) == 1);
        nap(0.01);
    }
    d = dead_list(&db, 0);
    CHECK(d.n == before + 3);
    d = dead_list(&db, 2);
    CHECK(d.n == 2 && d.id[0] == id[2] && d.id[1] == id[1]);
    CHECK(db.ops->dead_retry(db.b, &id[0], 1, &e) == 1);
    CHECK(db.ops->dead_retry(db.b, &id[0], 1, &e) == 0);
    STATE(&db, "c.dead", 1, 0, 0, 2);
    CHECK(db.ops->dead_retry(db.b, NULL, 0, &e) == 0);
    CHECK(db.ops->dead_purge(db.b, 3600, &e) == 0);
    CHECK(db.ops->dead_purge(db.b, 0, &e) == before + 2);
    STATE(&db, "c.dead", 1, 0, 0, 0);
    CHECK(dead_list(&db, 0).n == 0);
    push1(&db, job("c.dead2"));
    CHECK(claim(&db, "T", 30, "c.dead2", j, 1) == 1);
    memset(&r, 0, sizeof r);
    r.id = j[0]->id;
    r.kind = JR_DEAD;
    free(j[0]);
    CHECK(db.ops->complete(db.b, "T", &r, 1, &e) == 1);
    CHECK(db.ops->dead_retry(db.b, NULL, -1, &e) == 1);
    STATE(&db, "c.dead2", 1, 0, 0, 0);
    jr_db_close(&db);
}

/* Claims the n jobs named name and records them dead; ids[] gets them. */
static void
kill_all(jr_db *db, const char *name, int n, int64_t *ids)
{
    jr_job **j = calloc((size_t)n, sizeof *j);
    jr_result *r = calloc((size_t)n, sizeof *r);
    jr_err e = {0};
    int i, got;

    CHECK(j != NULL && r != NULL);
    got = claim(db, "T", 30, name, j, n);
    CHECK(got == n);
    for (i = 0; i < got; i++) {
        r[i].id = ids[i] = j[i]->id;
        r[i].kind = JR_DEAD;
        r[i].error = "x";
    }
    CHECK(db->ops->complete(db->b, "T", r, got, &e) == got);
    free_jobs(j, got);
    free(j);
    free(r);
}

/* Retrying and purging more dead jobs than one transaction takes
 * (JR_BULK_ROWS): by ids and all of them, each counted once. */
static void
test_dead_bulk(void)
{
    enum { N = 2 * JR_BULK_ROWS + 7 };
    jr_db db = conn();
    jr_push *p = calloc(N, sizeof *p);
    int64_t *ids = calloc(N, sizeof *ids);
    jr_err e = {0};
    int i, before = dead_list(&db, 0).n;

    CHECK(p != NULL && ids != NULL);
    for (i = 0; i < N; i++)
        p[i] = job("c.bulk");
    CHECK(db.ops->push(db.b, p, N, NULL, &e) == 0);
    kill_all(&db, "c.bulk", N, ids);
    STATE(&db, "c.bulk", 0, 0, 0, N);
    CHECK(db.ops->dead_retry(db.b, ids, N, &e) == N);
    STATE(&db, "c.bulk", N, 0, 0, 0);
    kill_all(&db, "c.bulk", N, ids);
    CHECK(db.ops->dead_retry(db.b, NULL, -1, &e) == N + before);
    STATE(&db, "c.bulk", N, 0, 0, 0);
    kill_all(&db, "c.bulk", N, ids);
    CHECK(db.ops->dead_purge(db.b, 0, &e) == N);
    STATE(&db, "c.bulk", 0, 0, 0, 0);
    free(p);
    free(ids);
    jr_db_close(&db);
}

/* Another connection's push makes the wake descriptor readable and
 * changed() say so; then it says nothing changed. */
static void
test_wake(void)
{
    jr_db db = conn(), other = conn();
    struct pollfd p = {.events = POLLIN};
    jr_err e = {0};
    int fd, rc = 0, i;

    CHECK(db.ops->changed(db.b, &e) >= 0);  /* consumes the start */
    fd = db.ops->wake_fd(db.b);
    CHECK(fd >= 0);
    push1(&other, job("c.wake"));
    p.fd = fd;
    for (i = 0; i < 40 && rc == 0; i++) {
        poll(&p, 1, 50);
        rc = db.ops->changed(db.b, &e);
    }
    CHECK(rc == 1);
    nap(0.05);
    CHECK(db.ops->changed(db.b, &e) == 0);
    jr_db_close(&other);
    jr_db_close(&db);
}

/* ---- queues and control ---- */

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

static void
copy(char *dst, size_t size, const char *src)
{
    snprintf(dst, size, "%s", src ? src : "");
}

static int
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
static shown
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
static int
claim_spec(jr_db *db, const char *token, const jr_claim_spec *spec,
           jr_job **out)
{
    jr_err e = {0};
    int n = db->ops->claim(db->b, token, 30, spec, out, &e);

    CHECK_OK(n, e);
    return n < 0 ? 0 : n;
}

static int64_t
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
static int
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

/* A backlog in one queue does not hold back the others: the first ready
 * job of each queue, then the second of each; priority within a queue. */
static void
test_fair_claim(void)
{
    jr_db db = conn();
    const char *names[1] = {"c.fair"};
    jr_claim_spec spec = {.names = names, .nnames = 1, .others = 100,
                          .max = 6};
    const char *q[6];
    jr_job *j[6];
    int64_t urgent;
    int i, n;

    for (i = 0; i < 300; i++)
        push_q(&db, "c.fair", "fair.a", 0, 0);
    urgent = push_q(&db, "c.fair", "fair.a", -1, 0);
    for (i = 0; i < 2; i++) {
        push_q(&db, "c.fair", "fair.b", 0, 0);
        push_q(&db, "c.fair", "fair.c", 0, 0);
    }
    push_q(&db, "c.fair", "fair.c", 0, 3600);   /* not due: not taken */
    n = claim_spec(&db, "T", &spec, j);
    CHECK(n == 6);
    for (i = 0; i < n; i++)
        q[i] = j[i]->queue;
    if (n == 6) {
        /* round 1: one of each queue, then round 2 */
        CHECK(strcmp(q[0], q[1]) != 0 && strcmp(q[1], q[2]) != 0 &&
              strcmp(q[0], q[2]) != 0);
        CHECK(strcmp(q[3], q[4]) != 0 && strcmp(q[4], q[5]) != 0 &&
              strcmp(q[3], q[5]) != 0);
        for (i = 0; i < 3; i++)
            if (strcmp(q[i], "fair.a") == 0)
                CHECK(j[i]->id == urgent);
    }
    free_jobs(j, n);
    /* b and c are drained: the rest comes from a */
    n = claim_spec(&db, "T", &spec, j);
    CHECK(n == 6);
    for (i = 0; i < n; i++)
        CHECK(strcmp(j[i]->queue, "fair.a") == 0);
    free_jobs(j, n);
    jr_db_close(&db);
}

/* One-job claims alternate between queues: the queue that leads a round
 * rotates from claim to claim, so an old backlog in one queue does not
 * win every claim of one. */
static void
test_fair_rotation(void)
{
    jr_db db = conn();
    const char *names[1] = {"c.rot"};
    jr_job *j[1];
    int i, from_b = 0;

    for (i = 0; i < 20; i++)
        push_q(&db, "c.rot", "rot.a", 0, 0);
    for (i = 0; i < 3; i++)
        push_q(&db, "c.rot", "rot.b", 0, 0);
    for (i = 0; i < 6; i++) {
        CHECK(claim_spec(&db, "T", ALL_QUEUES(names, 1, 1), j) == 1);
        from_b += strcmp(j[0]->queue, "rot.b") == 0;
        free(j[0]);
    }
    CHECK(from_b == 3);
    jr_db_close(&db);
}

static int
paused_cb(const char *queue, void *arg)
{
    char *seen = arg;

    if (strlen(seen) + strlen(queue) + 2 < 256)
        strcat(strcat(seen, queue), ",");
    return 0;
}

static int
ready_cb(const char *queue, long n, void *arg)
{
    char *seen = arg;
    char one[96];

    snprintf(one, sizeof one, "%s=%ld,", queue, n);
    if (strlen(seen) + strlen(one) < 256)
        strcat(seen, one);
    return 0;
}

/* paused lists the paused queues; ready_by_queue counts ready jobs of the
 * given names per queue not paused. */
static void
test_paused_ready(void)
{
    jr_db db = conn();
    const char *names[1] = {"c.pr"};
    char seen[256] = "";
    jr_err e = {0};

    push_q(&db, "c.pr", "pr.a", 0, 0);
    push_q(&db, "c.pr", "pr.a", 0, 0);
    push_q(&db, "c.pr", "pr.b", 0, 0);
    push_q(&db, "c.pr", "pr.b", 0, 3600);       /* not due */
    push_q(&db, "c.other", "pr.b", 0, 0);       /* another name */
    CHECK_OK(db.ops->ready_by_queue(db.b, names, 1, 1000, ready_cb, seen,
                                    &e), e);
    CHECK(strcmp(seen, "pr.a=2,pr.b=1,") == 0);
    CHECK_OK(db.ops->pause(db.b, "pr.b", &e), e);
    CHECK_OK(db.ops->pause(db.b, "pr.z", &e), e);
    seen[0] = '\0';
    CHECK_OK(db.ops->paused(db.b, paused_cb, seen, &e), e);
    CHECK(strcmp(seen, "pr.b,pr.z,") == 0);
    seen[0] = '\0';
    CHECK_OK(db.ops->ready_by_queue(db.b, names, 1, 1000, ready_cb, seen,
                                    &e), e);
    CHECK(strcmp(seen, "pr.a=2,") == 0);
    jr_db_close(&db);
}

/* Per-queue caps: a listed queue gives at most its max; others 0 serves
 * the listed queues only. */
static void
test_queue_caps(void)
{
    jr_db db = conn();
    const char *names[1] = {"c.caps"};
    jr_queue_want want[1] = {{"caps.a", 1}};
    jr_claim_spec spec = {.names = names, .nnames = 1, .queues = want,
                          .nqueues = 1, .others = 10, .max = 10};
    jr_job *j[10];
    int i, n, from_a = 0;

    for (i = 0; i < 5; i++) {
        push_q(&db, "c.caps", "caps.a", 0, 0);
        push_q(&db, "c.caps", "caps.b", 0, 0);
    }
    n = claim_spec(&db, "T", &spec, j);
    for (i = 0; i < n; i++)
        from_a += strcmp(j[i]->queue, "caps.a") == 0;
    CHECK(n == 6 && from_a == 1);
    free_jobs(j, n);
    /* only caps.a now, 2 at most; caps.b has none left anyway, so push */
    push_q(&db, "c.caps", "caps.b", 0, 0);
    want[0].max = 2;
    spec.others = 0;
    n = claim_spec(&db, "T", &spec, j);
    CHECK(n == 2);
    for (i = 0; i < n; i++)
        CHECK(strcmp(j[i]->queue, "caps.a") == 0);
    free_jobs(j, n);
    /* total max bounds it all */
    spec.others = 10;
    spec.max = 1;
    n = claim_spec(&db, "T", &spec, j);
    CHECK(n == 1);
    free_jobs(j, n);
    jr_db_close(&db);
}

typedef struct queues {
    int          n;
    jr_queue_row row[8];        /* name points into names */
    char         names[8][64];
    const char  *prefix;
} queues;

static int
queue_cb(const jr_queue_row *r, void *arg)
{
    queues *q = arg;

    if (strncmp(r->name, q->prefix, strlen(q->prefix)) != 0 || q->n == 8)
        return 0;
    q->row[q->n] = *r;
    copy(q->names[q->n], sizeof q->names[0], r->name);
    q->row[q->n].name = q->names[q->n];
    q->n++;
    return 0;
}

static queues
queue_list(jr_db *db, const char *prefix)
{
    queues q;
    jr_err e = {0};

    memset(&q, 0, sizeof q);
    q.prefix = prefix;
    CHECK_OK(db->ops->queue_list(db->b, queue_cb, &q, &e), e);
    return q;
}

/* A paused queue is never claimed nor counted ready; resume brings it
 * back. Pausing a new valid name creates it paused; a bad name is
 * refused. */
static void
test_pause(void)
{
    jr_db db = conn(), other = conn();
    const char *names[1] = {"c.pause"};
    jr_job *j[4];
    jr_err e = {0};
    queues q;
    int n;

    push_q(&db, "c.pause", "pause.q", 0, 0);
    push_q(&db, "c.pause", "pause.q", 0, 0);
    push_q(&db, "c.pause", "pause.r", 0, 0);
    CHECK_OK(db.ops->pause(db.b, "pause.q", &e), e);
    CHECK_OK(db.ops->pause(db.b, "pause.q", &e), e);    /* again: fine */
    CHECK(jr_db_count_ready(&other, names, 1, 100, &e) == 1);
    n = claim_spec(&other, "T", ALL_QUEUES(names, 1, 4), j);
    CHECK(n == 1 && strcmp(j[0]->queue, "pause.r") == 0);
    free_jobs(j, n);
    CHECK(claim_spec(&other, "T", ALL_QUEUES(names, 1, 4), j) == 0);
    CHECK(jr_db_count_ready(&other, names, 1, 100, &e) == 0);
    q = queue_list(&db, "pause.");
    CHECK(q.n == 2 && q.row[0].paused && !q.row[1].paused &&
          q.row[0].ready == 2 && q.row[0].paused_at > 0);
    CHECK_OK(db.ops->resume(db.b, "pause.q", &e), e);
    n = claim_spec(&other, "T", ALL_QUEUES(names, 1, 4), j);
    CHECK(n == 2);
    free_jobs(j, n);
    /* a queue no job used yet */
    CHECK_OK(db.ops->pause(db.b, "pause.new", &e), e);
    q = queue_list(&db, "pause.new");
    CHECK(q.n == 1 && q.row[0].paused && q.row[0].ready == 0);
    push_q(&db, "c.pause", "pause.new", 0, 0);      /* stays paused */
    CHECK(claim_spec(&other, "T", ALL_QUEUES(names, 1, 4), j) == 0);
    CHECK_OK(db.ops->resume(db.b, "pause.new", &e), e);
    CHECK_OK(db.ops->resume(db.b, "pause.never", &e), e);
    n = claim_spec(&other, "T", ALL_QUEUES(names, 1, 4), j);
    CHECK(n == 1);
    free_jobs(j, n);
    memset(&e, 0, sizeof e);
    CHECK(db.ops->pause(db.b, "bad/queue", &e) < 0 && e.code == JR_EINPUT &&
          strstr(e.msg, "queue name") != NULL);
    CHECK(db.ops->resume(db.b, "", &e) < 0 && e.code == JR_EINPUT);
    jr_db_close(&other);
    jr_db_close(&db);
}

/* Each outcome of cancel; a cancelled job is never claimed; the runner
 * holding a cancel-requested job sees it through cancelled(). */
static void
test_cancel(void)
{
    jr_db db = conn();
    const char *names[1] = {"c.cancel"};
    int64_t ids[5], got[4];
    int out[5];
    jr_job *j[4];
    jr_err e = {0};
    shown s;
    int n;

    ids[0] = push_q(&db, "c.cancel", "default", 0, 0);         /* queued */
    ids[1] = push_q(&db, "c.cancel", "default", 0, 3600);      /* later */
    ids[2] = push_q(&db, "c.cancel", "default", -9, 0);        /* running */
    n = claim_spec(&db, "T", ALL_QUEUES(names, 1, 1), j);
    CHECK(n == 1 && j[0]->id == ids[2]);
    free_jobs(j, n);
    ids[3] = push_q(&db, "c.cancel", "default", -9, 0);        /* dead */
    n = claim_spec(&db, "T", ALL_QUEUES(names, 1, 1), j);
    CHECK(n == 1 && j[0]->id == ids[3]);
    free_jobs(j, n);
    CHECK(result(&db, "T", ids[3], JR_DEAD) == 1);
    ids[4] = 999999999;                                        /* none */
    CHECK(db.ops->cancelled(db.b, "T", got, 4, &e) == 0);
    CHECK_OK(db.ops->cancel(db.b, ids, 5, out, &e), e);
    CHECK(out[0] == JR_CANCEL_DONE && out[1] == JR_CANCEL_DONE &&
          out[2] == JR_CANCEL_REQUESTED && out[3] == JR_CANCEL_FINISHED &&
          out[4] == JR_CANCEL_NOTFOUND);
    s = show(&db, ids[0]);
    CHECK(strcmp(s.state, "cancelled") == 0 && s.finished_at > 0);
    STATE_IS(&db, ids[1], "cancelled");
    s = show(&db, ids[2]);
    CHECK(strcmp(s.state, "running") == 0 && s.cancel_requested);
    CHECK(db.ops->cancelled(db.b, "T", got, 4, &e) == 1 && got[0] == ids[2]);
    CHECK(db.ops->cancelled(db.b, "other", got, 4, &e) == 0);
    /* again: the cancelled ones are finished, the running one asked */
    CHECK_OK(db.ops->cancel(db.b, ids, 3, out, &e), e);
    CHECK(out[0] == JR_CANCEL_FINISHED && out[1] == JR_CANCEL_FINISHED &&
          out[2] == JR_CANCEL_REQUESTED);
    CHECK(claim_spec(&db, "T", ALL_QUEUES(names, 1, 4), j) == 0);
    /* the runner stops it: cancelled, fenced like any result */
    CHECK(result(&db, "other", ids[2], JR_CANCELLED) == 0);
    CHECK(result(&db, "T", ids[2], JR_CANCELLED) == 1);
    s = show(&db, ids[2]);
    CHECK(strcmp(s.state, "cancelled") == 0 && s.finished_at > 0 &&
          s.locked_by[0] == '\0');
    CHECK(db.ops->cancelled(db.b, "T", got, 4, &e) == 0);
    CHECK(db.ops->cancel(db.b, ids, 0, out, &e) == 0);
    jr_db_close(&db);
}

/* Cancel racing with completion: one outcome. Success wins; a retry,
 * snooze or release of a cancel-requested job ends it cancelled; a
 * rescued one too. */
static void
test_cancel_race(void)
{
    static const int kinds[] = {JR_RETRY, JR_SNOOZE, JR_RELEASE};
    jr_db db = conn(), keep = conn_keep(3600);
    const char *names[1] = {"c.race"};
    int64_t id;
    int out, i;
    jr_job *j[1];
    jr_err e = {0};

    for (i = 0; i < 2; i++) {
        jr_db *d = i == 0 ? &db : &keep;
        id = push_q(d, "c.race", "default", 0, 0);
        CHECK(claim_spec(d, "T", ALL_QUEUES(names, 1, 1), j) == 1);
        free(j[0]);
        CHECK_OK(d->ops->cancel(d->b, &id, 1, &out, &e), e);
        CHECK(out == JR_CANCEL_REQUESTED);
        CHECK(result(d, "T", id, JR_DONE) == 1);
        if (i == 0)
            CHECK(!show(d, id).found);          /* deleted, not cancelled */
        else
            STATE_IS(d, id, "completed");
        CHECK_OK(d->ops->cancel(d->b, &id, 1, &out, &e), e);
        CHECK(out == (i == 0 ? JR_CANCEL_NOTFOUND : JR_CANCEL_FINISHED));
    }
    for (i = 0; i < 3; i++) {
        id = push_q(&db, "c.race", "default", 0, 0);
        CHECK(claim_spec(&db, "T", ALL_QUEUES(names, 1, 1), j) == 1);
        free(j[0]);
        CHECK_OK(db.ops->cancel(db.b, &id, 1, &out, &e), e);
        CHECK(result(&db, "T", id, kinds[i]) == 1);
        STATE_IS(&db, id, "cancelled");
        CHECK(result(&db, "T", id, JR_DONE) == 0);  /* and nothing else */
        STATE_IS(&db, id, "cancelled");
    }
    CHECK(claim_spec(&db, "T", ALL_QUEUES(names, 1, 1), j) == 0);
    /* the runner died: its cancel-requested job is not requeued */
    id = push_q(&db, "c.race", "default", 0, 0);
    CHECK(db.ops->claim(db.b, "gone", 0.05, ALL_QUEUES(names, 1, 1), j,
                        &e) == 1);
    free(j[0]);
    CHECK_OK(db.ops->cancel(db.b, &id, 1, &out, &e), e);
    nap(0.2);
    CHECK(db.ops->rescue(db.b, &e) >= 1);
    STATE_IS(&db, id, "cancelled");
    /* a dead job retried from the dead queue loses its cancel request */
    id = push_q(&db, "c.race", "default", 0, 0);
    CHECK(claim_spec(&db, "T", ALL_QUEUES(names, 1, 1), j) == 1);
    free(j[0]);
    CHECK_OK(db.ops->cancel(db.b, &id, 1, &out, &e), e);
    CHECK(result(&db, "T", id, JR_DEAD) == 1);
    STATE_IS(&db, id, "dead");
    CHECK(db.ops->dead_retry(db.b, &id, 1, &e) == 1);
    CHECK(!show(&db, id).cancel_requested);
    CHECK(claim_spec(&db, "T", ALL_QUEUES(names, 1, 1), j) == 1);
    free(j[0]);
    CHECK(result(&db, "T", id, JR_RETRY) == 1);
    STATE_IS(&db, id, "queued");
    jr_db_close(&keep);
    jr_db_close(&db);
}

/* Progress is recorded on a running job under its token, and cleared by
 * the next claim. */
static void
test_progress(void)
{
    jr_db db = conn();
    const char *names[1] = {"c.progress"};
    jr_result r;
    jr_job *j[1];
    jr_err e = {0};
    int64_t id = push_q(&db, "c.progress", "default", 0, 0);
    shown s;

    s = show(&db, id);
    CHECK(isnan(s.done) && isnan(s.total) && s.note[0] == '\0' &&
          s.started_at == 0);
    CHECK(claim_spec(&db, "T", ALL_QUEUES(names, 1, 1), j) == 1);
    free(j[0]);
    memset(&r, 0, sizeof r);
    r.id = id;
    r.kind = JR_PROGRESS;
    r.done = 3;
    r.total = 10;
    r.note = "copying";
    CHECK(db.ops->complete(db.b, "other", &r, 1, &e) == 0);
    CHECK(db.ops->complete(db.b, "T", &r, 1, &e) == 1);
    s = show(&db, id);
    CHECK(strcmp(s.state, "running") == 0 && s.done == 3 &&
          s.total == 10 && strcmp(s.note, "copying") == 0 &&
          s.started_at > 0);
    r.done = 4;
    r.total = NAN;                      /* unknown */
    r.note = NULL;
    CHECK(db.ops->complete(db.b, "T", &r, 1, &e) == 1);
    s = show(&db, id);
    CHECK(s.done == 4 && isnan(s.total) && s.note[0] == '\0');
    CHECK(result(&db, "T", id, JR_RETRY) == 1);
    CHECK(db.ops->complete(db.b, "T", &r, 1, &e) == 0);  /* not running */
    jr_db_close(&db);
}

/* keep_completed keeps succeeded jobs as completed; prune deletes
 * finished jobs older than each threshold, at most limit at a time. */
static void
test_retention(void)
{
    jr_db db = conn_keep(3600);
    const char *names[1] = {"c.keep"};
    int64_t done[3], cancelled, dead;
    jr_job *j[3];
    jr_err e = {0};
    shown s;
    int i, out, n;

    for (i = 0; i < 3; i++)
        done[i] = push_q(&db, "c.keep", "default", 0, 0);
    CHECK(claim_spec(&db, "T", ALL_QUEUES(names, 1, 3), j) == 3);
    free_jobs(j, 3);
    for (i = 0; i < 3; i++)
        CHECK(result(&db, "T", done[i], JR_DONE) == 1);
    s = show(&db, done[0]);
    CHECK(strcmp(s.state, "completed") == 0 && s.finished_at > 0 &&
          s.finished_at >= s.started_at && s.locked_by[0] == '\0');
    cancelled = push_q(&db, "c.keep", "default", 0, 0);
    CHECK_OK(db.ops->cancel(db.b, &cancelled, 1, &out, &e), e);
    dead = push_q(&db, "c.keep", "default", 0, 0);
    CHECK(claim_spec(&db, "T", ALL_QUEUES(names, 1, 1), j) == 1);
    free(j[0]);
    CHECK(result(&db, "T", dead, JR_DEAD) == 1);
    nap(0.05);
    CHECK(db.ops->prune(db.b, -1, -1, -1, 100, &e) == 0);
    CHECK(db.ops->prune(db.b, 3600, 3600, 3600, 100, &e) == 0);
    CHECK(db.ops->prune(db.b, 0, -1, -1, 0, &e) == 0);
    n = db.ops->prune(db.b, 0, -1, -1, 2, &e);
    CHECK(n == 2);
    while ((n = db.ops->prune(db.b, 0, -1, -1, 2, &e)) > 0)
        ;
    CHECK(n == 0);
    for (i = 0; i < 3; i++)
        CHECK(!show(&db, done[i]).found);
    STATE_IS(&db, cancelled, "cancelled");
    STATE_IS(&db, dead, "dead");
    CHECK(db.ops->prune(db.b, -1, 0, -1, 1000, &e) >= 1);
    CHECK(!show(&db, cancelled).found);
    STATE_IS(&db, dead, "dead");
    CHECK(db.ops->prune(db.b, -1, -1, 0, 1000, &e) >= 1);
    CHECK(!show(&db, dead).found);
    jr_db_close(&db);
}

typedef struct listed {
    int     n;
    int64_t id[16];
    int     payload;            /* some row had a payload */
} listed;

static int
list_cb(const jr_job_row *r, void *arg)
{
    listed *l = arg;

    if (l->n < 16)
        l->id[l->n] = r->id;
    l->payload |= r->payload != NULL;
    l->n++;
    return 0;
}

static listed
list(jr_db *db, const char *state, const char *name, const char *queue,
     int limit)
{
    jr_list_filter f = {state, name, queue, limit, NULL, 0, 0};
    listed l;
    jr_err e = {0};

    memset(&l, 0, sizeof l);
    CHECK_OK(db->ops->list(db->b, &f, list_cb, &l, &e), e);
    return l;
}

/* show gives every field; list filters by state, name and queue, newest
 * first, without payload. */
static void
test_show_list(void)
{
    jr_db db = conn();
    const char *names[1] = {"c.show"};
    jr_push p = job("c.show");
    int64_t id[4];
    jr_list_filter bad = {.state = "bogus"};
    jr_job *j[1];
    jr_err e = {0};
    listed l;
    shown s;

    p.payload = "{\"x\": 1}";
    p.queue = "show.q";
    p.priority = 7;
    p.max_retries = 4;
    id[0] = push1(&db, p);
    id[1] = push_q(&db, "c.show", "show.r", 0, 3600);
    id[2] = push_q(&db, "c.show2", "show.q", 0, 0);
    id[3] = push_q(&db, "c.show", "show.r", 0, 0);
    s = show(&db, id[0]);
    CHECK(s.found && s.id == id[0] && strcmp(s.name, "c.show") == 0 &&
          strcmp(s.queue, "show.q") == 0 && strcmp(s.state, "queued") == 0 &&
          s.priority == 7 && s.max_retries == 4 && s.attempts == 0 &&
          s.has_payload && strstr(s.payload, "\"x\"") != NULL &&
          s.created_at > 0 && s.run_at > 0 && s.finished_at == 0 &&
          !s.cancel_requested);
    CHECK(show(&db, id[1]).max_retries == -1);
    CHECK(!show(&db, 999999999).found);
    p.max_retries = -1;
    /* from show.r only: which queue leads a one-job claim rotates */
    CHECK(claim_spec(&db, "tok", &(jr_claim_spec){.names = names,
          .nnames = 1, .queues = &(jr_queue_want){"show.r", 1},
          .nqueues = 1, .others = 0, .max = 1}, j) == 1);
    free(j[0]);
    s = show(&db, id[3]);
    CHECK(strcmp(s.state, "running") == 0 && s.attempts == 1 &&
          strcmp(s.locked_by, "tok") == 0 && s.started_at > 0);
    l = list(&db, NULL, "c.show", NULL, 0);
    CHECK(l.n == 3 && l.id[0] == id[3] && l.id[1] == id[1] &&
          l.id[2] == id[0] && !l.payload);
    l = list(&db, NULL, NULL, "show.q", 0);
    CHECK(l.n == 2 && l.id[0] == id[2] && l.id[1] == id[0]);
    l = list(&db, "running", "c.show", NULL, 0);
    CHECK(l.n == 1 && l.id[0] == id[3]);
    l = list(&db, "scheduled", NULL, "show.r", 0);
    CHECK(l.n == 1 && l.id[0] == id[1]);
    l = list(&db, "ready", "c.show", NULL, 0);
    CHECK(l.n == 1 && l.id[0] == id[0]);
    l = list(&db, "queued", "c.show", "show.r", 0);
    CHECK(l.n == 1 && l.id[0] == id[1]);
    l = list(&db, NULL, "c.show", NULL, 2);
    CHECK(l.n == 2 && l.id[0] == id[3]);
    CHECK(db.ops->list(db.b, &bad, list_cb, &l, &e) < 0 &&
          e.code == JR_EINPUT && strstr(e.msg, "bogus"));
    bad.state = NULL;
    bad.queue = "no/such";
    CHECK(db.ops->list(db.b, &bad, list_cb, &l, &e) < 0 &&
          e.code == JR_EINPUT && strstr(e.msg, "queue name"));
    jr_db_close(&db);
}

/* list pages by keyset (before_id: below, newest first; after_id: above,
 * oldest first) and filters on a payload field, typed. */
static void
test_list_page_where(void)
{
    static const char *const payload[5] = {
        "{\"u\": 42}", "{\"u\": \"42\"}", "{\"u\": 42.0, \"d\": {\"ok\": true}}",
        "{\"v\": 1}", "{\"u\": null}"};
    jr_db db = conn();
    jr_push p = job("c.where");
    jr_list_filter f = {.name = "c.where"};
    int64_t id[5];
    jr_err e = {0};
    listed l;
    int i;

    for (i = 0; i < 5; i++) {
        p.payload = payload[i];
        id[i] = push1(&db, p);
    }
    f.before_id = id[3];
    memset(&l, 0, sizeof l);
    CHECK_OK(db.ops->list(db.b, &f, list_cb, &l, &e), e);
    CHECK(l.n == 3 && l.id[0] == id[2] && l.id[2] == id[0]);
    f.before_id = 0;
    f.after_id = id[1];
    f.limit = 2;
    memset(&l, 0, sizeof l);
    CHECK_OK(db.ops->list(db.b, &f, list_cb, &l, &e), e);
    CHECK(l.n == 2 && l.id[0] == id[2] && l.id[1] == id[3]);
    f.after_id = 0;
    f.limit = 0;
    f.where = "payload.u = 42";             /* 42 and 42.0, not "42" */
    memset(&l, 0, sizeof l);
    CHECK_OK(db.ops->list(db.b, &f, list_cb, &l, &e), e);
    CHECK(l.n == 2 && l.id[0] == id[2] && l.id[1] == id[0]);
    f.where = "payload.u = \"42\"";
    memset(&l, 0, sizeof l);
    CHECK_OK(db.ops->list(db.b, &f, list_cb, &l, &e), e);
    CHECK(l.n == 1 && l.id[0] == id[1]);
    f.where = "payload.u = null";           /* a missing key is not null */
    memset(&l, 0, sizeof l);
    CHECK_OK(db.ops->list(db.b, &f, list_cb, &l, &e), e);
    CHECK(l.n == 1 && l.id[0] == id[4]);
    f.where = "payload.d.ok = true";
    memset(&l, 0, sizeof l);
    CHECK_OK(db.ops->list(db.b, &f, list_cb, &l, &e), e);
    CHECK(l.n == 1 && l.id[0] == id[2]);
    f.where = "payload.u >= 1";
    CHECK(db.ops->list(db.b, &f, list_cb, &l, &e) < 0 &&
          e.code == JR_EINPUT && strstr(e.msg, "payload filter"));
    f.where = NULL;
    f.before_id = f.after_id = id[2];
    CHECK(db.ops->list(db.b, &f, list_cb, &l, &e) < 0 &&
          e.code == JR_EINPUT && strstr(e.msg, "not both"));
    jr_db_close(&db);
}

/* queue_list counts each state per queue. */
static void
test_queue_list(void)
{
    jr_db db = conn_keep(3600);
    const char *names[1] = {"c.ql"};
    int64_t id;
    jr_job *j[3];
    jr_err e = {0};
    queues q;
    int out, i;

    for (i = 0; i < 3; i++)
        push_q(&db, "c.ql", "ql.q", 0, 0);
    CHECK(claim_spec(&db, "T", ALL_QUEUES(names, 1, 3), j) == 3);
    CHECK(result(&db, "T", j[0]->id, JR_DONE) == 1);
    CHECK(result(&db, "T", j[1]->id, JR_DEAD) == 1);
    free_jobs(j, 3);
    push_q(&db, "c.ql", "ql.q", 0, 0);
    push_q(&db, "c.ql", "ql.q", 0, 3600);
    id = push_q(&db, "c.ql", "ql.q", 0, 0);
    CHECK_OK(db.ops->cancel(db.b, &id, 1, &out, &e), e);
    push_q(&db, "c.ql", "ql.r", 0, 0);
    q = queue_list(&db, "ql.");
    CHECK(q.n == 2);
    if (q.n == 2) {
        jr_queue_row *r = &q.row[0];
        CHECK(strcmp(r->name, "ql.q") == 0 && !r->paused &&
              r->ready == 1 && r->scheduled == 1 && r->running == 1 &&
              r->dead == 1 && r->cancelled == 1 && r->completed == 1);
        CHECK(strcmp(q.row[1].name, "ql.r") == 0 && q.row[1].ready == 1);
    }
    jr_db_close(&db);
}

/* ---- migration 12: the attempt history and the schedule controls ---- */

typedef struct history {        /* what show gave of a job's attempts */
    int    n;
    int    attempt[JR_ATTEMPTS_KEPT], worker[JR_ATTEMPTS_KEPT];
    double at[JR_ATTEMPTS_KEPT], duration[JR_ATTEMPTS_KEPT];
    char   error[JR_ATTEMPTS_KEPT][32], runner[JR_ATTEMPTS_KEPT][32];
    char   gen[JR_ATTEMPTS_KEPT][32];
} history;

static int
history_cb(const jr_job_row *row, void *arg)
{
    history *h = arg;
    int i;

    h->n = row->nhistory;
    for (i = 0; i < row->nhistory && i < JR_ATTEMPTS_KEPT; i++) {
        const jr_attempt_row *a = &row->history[i];
        h->attempt[i] = a->attempt;
        h->worker[i] = a->worker;
        h->at[i] = a->at;
        h->duration[i] = a->duration;
        snprintf(h->error[i], sizeof h->error[i], "%s", a->error ? a->error : "");
        snprintf(h->runner[i], sizeof h->runner[i], "%s", a->runner ? a->runner : "");
        snprintf(h->gen[i], sizeof h->gen[i], "%s", a->generation ? a->generation : "");
    }
    return 0;
}

static history
attempts_of(jr_db *db, int64_t id)
{
    history h = {.n = -1};
    jr_err e = {0};

    CHECK_OK(db->ops->show(db->b, id, history_cb, &h, &e), e);
    return h;
}

/* Claims job name once under token and records a failure of kind. */
static int
fail_once(jr_db *db, const char *token, const char *name, int kind,
          const char *error, double secs, int worker)
{
    const char *names[1] = {name};
    jr_result r;
    jr_job *j[1];
    jr_err e = {0};
    int n;

    if (claim_spec(db, token, ALL_QUEUES(names, 1, 1), j) != 1)
        return -1;
    memset(&r, 0, sizeof r);
    r.id = j[0]->id;
    r.kind = kind;
    r.error = error;
    r.generation = "g1";
    r.secs = secs;
    r.worker = worker;
    free(j[0]);
    n = db->ops->complete(db->b, token, &r, 1, &e);
    CHECK_OK(n, e);
    return n;
}

/* Each fenced failure appends its attempt; the newest JR_ATTEMPTS_KEPT
 * stay; a success, a snooze and a foreign token add none. */
static void
test_attempt_history(void)
{
    jr_db db = conn_keep(3600);
    int64_t id = push1(&db, job("c.att")), ok = push1(&db, job("c.attok"));
    jr_result r;
    jr_err e = {0};
    history h;
    char err[32];
    int i;

    CHECK(fail_once(&db, "T", "c.att", JR_RETRY, "first", 0.5, 3) == 1);
    CHECK(fail_once(&db, "U", "c.att", JR_SNOOZE, NULL, 0, 0) == 1);
    CHECK(fail_once(&db, "T", "c.att", JR_DEAD, "second", 0, 0) == 1);
    h = attempts_of(&db, id);
    CHECK(h.n == 2);
    CHECK(h.attempt[0] == 1 && strcmp(h.error[0], "first") == 0 &&
          fabs(h.duration[0] - 0.5) < 1e-9 && h.worker[0] == 3 &&
          strcmp(h.runner[0], "T") == 0 && strcmp(h.gen[0], "g1") == 0 &&
          h.at[0] > 0);
    CHECK(h.attempt[1] == 2 && strcmp(h.error[1], "second") == 0 &&
          isnan(h.duration[1]) && h.worker[1] == 0 && h.at[1] >= h.at[0]);
    memset(&r, 0, sizeof r);    /* a foreign token: fenced, nothing added */
    r.id = id;
    r.kind = JR_RETRY;
    r.error = "stale";
    CHECK(db.ops->complete(db.b, "other", &r, 1, &e) == 0);
    CHECK(attempts_of(&db, id).n == 2);
    CHECK(db.ops->dead_retry(db.b, &id, 1, &e) == 1);
    for (i = 0; i < JR_ATTEMPTS_KEPT + 3; i++) {
        snprintf(err, sizeof err, "e%d", i + 1);
        CHECK(fail_once(&db, "T", "c.att", JR_RETRY, err, 0.1, 1) == 1);
    }
    h = attempts_of(&db, id);
    CHECK(h.n == JR_ATTEMPTS_KEPT);
    CHECK(h.attempt[0] == 4 && strcmp(h.error[0], "e4") == 0);
    CHECK(h.attempt[JR_ATTEMPTS_KEPT - 1] == JR_ATTEMPTS_KEPT + 3);
    CHECK(fail_once(&db, "T", "c.attok", JR_DONE, NULL, 0.1, 1) == 1);
    CHECK(attempts_of(&db, ok).n == 0);
    jr_db_close(&db);
}

typedef struct ctl_seen {
    int    found, paused;
    double fire_at;
} ctl_seen;

static int
ctl_cb(const char *schedule, int paused, double paused_at, double fire_at,
       void *arg)
{
    ctl_seen *c = arg;

    (void)paused_at;
    if (strcmp(schedule, "c.s") == 0) {
        c->found = 1;
        c->paused = paused;
        c->fire_at = fire_at;
    }
    return 0;
}

static int
last_cb(const char *schedule, double at, int64_t job_id, void *arg)
{
    double *v = arg;

    if (strcmp(schedule, "c.s") == 0) {
        v[0] = at;
        v[1] = (double)job_id;
    }
    return 0;
}

/* One fire of c.s at at (manual: asked for by hand); returns inserted. */
static int
fire_at(jr_db *db, double at, int manual)
{
    jr_fire f = {.schedule = "c.s", .at = at, .job = job("c.s"),
                 .manual = manual};
    jr_err e = {0};

    CHECK_OK(db->ops->fire(db->b, &f, 1, 10, &e), e);
    return f.inserted;
}

/* Pause refuses fires; resume records its instant as the last fire (no
 * job); fire asks are once per instant, refused while paused. */
static void
test_sched_ctl(void)
{
    jr_db db = conn();
    double at = 0, now = floor((double)time(NULL)), last[2] = {0, -1};
    ctl_seen c = {0};
    jr_err e = {0};

    CHECK(db.ops->sched_ctl(db.b, "c.s", JR_SCHED_PAUSE, &at, &e) == 1);
    CHECK(db.ops->sched_ctl(db.b, "c.s", JR_SCHED_PAUSE, &at, &e) == 0);
    CHECK_OK(db.ops->sched_states(db.b, ctl_cb, &c, &e), e);
    CHECK(c.found && c.paused && c.fire_at == 0);
    CHECK(fire_at(&db, now - 5, 0) == -2);
    CHECK(db.ops->sched_ctl(db.b, "c.s", JR_SCHED_FIRE, &at, &e) < 0 &&
          e.code == JR_EINPUT && strstr(e.msg, "paused"));
    CHECK(db.ops->sched_ctl(db.b, "c.s", JR_SCHED_RESUME, &at, &e) == 1);
    CHECK(db.ops->sched_ctl(db.b, "c.s", JR_SCHED_RESUME, &at, &e) == 0);
    CHECK_OK(db.ops->last_fires(db.b, last_cb, last, &e), e);
    CHECK(last[0] >= now - 5 && last[1] == 0);
    CHECK(fire_at(&db, now - 5, 0) == 0);       /* the paused time */
    at = 0;
    CHECK(db.ops->sched_ctl(db.b, "c.s", JR_SCHED_FIRE, &at, &e) == 1);
    CHECK(at == floor(at) && fabs(at - now) <= 2);
    CHECK(db.ops->sched_ctl(db.b, "c.s", JR_SCHED_FIRE, &at, &e) == 0);
    c.found = 0;
    CHECK_OK(db.ops->sched_states(db.b, ctl_cb, &c, &e), e);
    CHECK(c.found && !c.paused && c.fire_at == at);
    CHECK(fire_at(&db, at, 1) == 1);            /* once per instant */
    CHECK(fire_at(&db, at, 1) == 0);
    at = now + 3600;
    CHECK(db.ops->sched_ctl(db.b, "c.s", JR_SCHED_FIRE, &at, &e) < 0 &&
          e.code == JR_EINPUT);
    CHECK(db.ops->sched_ctl(db.b, "no such", JR_SCHED_PAUSE, &at, &e) < 0 &&
          e.code == JR_EINPUT && strstr(e.msg, "schedule name"));
    jr_db_close(&db);
}

static const check_test tests[] = {
    {"open, migrate, close", test_open_migrate},
    {"push", test_push},
    {"push refused as input", test_push_refused},
    {"claim", test_claim},
    {"complete, every kind, fenced", test_complete},
    {"complete refused as input", test_complete_refused},
    {"complete_claim", test_complete_claim},
    {"renew, rescue", test_renew_rescue},
    {"count_ready", test_count_ready},
    {"dead list, retry, purge", test_dead},
    {"dead retry and purge past one transaction", test_dead_bulk},
    {"wake_fd, changed", test_wake},
    {"fair claim across queues with a backlog in one", test_fair_claim},
    {"claim caps per queue, others 0, total", test_queue_caps},
    {"one-job claims alternate between queues", test_fair_rotation},
    {"paused queues and ready jobs per queue", test_paused_ready},
    {"paused queue never claimed, resume", test_pause},
    {"cancel: every outcome", test_cancel},
    {"cancel racing completion: one outcome", test_cancel_race},
    {"progress result", test_progress},
    {"retention and prune", test_retention},
    {"show and list", test_show_list},
    {"list pages and payload filter", test_list_page_where},
    {"queue_list counts", test_queue_list},
    {"attempt history: fenced, bounded, failures only", test_attempt_history},
    {"schedule controls: pause, resume, fire asks", test_sched_ctl},
};

int
main(int argc, char **argv)
{
    return check_engines(argc, argv, tests, sizeof tests / sizeof tests[0],
                         "jrcontract");
}
