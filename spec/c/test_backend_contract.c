/* test_backend_contract.c - one contract, both engines: every function of
 * jr_backend_ops (backend.h) driven the same way against SQLite (a temp
 * file) and, when a URL is given, PostgreSQL (a schema of its own, dropped
 * after). Checks go through the ops themselves, so one test reads the same
 * for both. Usage: test_backend_contract [POSTGRES_URL]; spec/run passes
 * the throwaway cluster's. Prints "N passed, N failed". */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <libpq-fe.h>

#include "backend.h"
#include "check.h"

/* A claim spec of today's kind: names, every queue, max in all. */
#define ALL_QUEUES(nm, n, mx) (&(jr_claim_spec){.names = (nm),          \
        .nnames = (n), .others = (mx), .max = (mx)})

static const char *engine;      /* "sqlite" or "postgres", for messages */
static char url[4096];          /* the engine's URL */
static char schema[64];         /* PostgreSQL schema of this run */


static void
nap(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

/* A new connection, migrated; the test exits if it cannot open. */
static jr_db
conn(void)
{
    jr_backend_opts o = {.schema = schema[0] ? schema : NULL};
    jr_db db;
    jr_err e = {0};

    if (jr_db_open(&db, url, &o, &e) < 0 || db.ops->migrate(db.b, &e) < 0) {
        fprintf(stderr, "%s: open: %s\n", engine, e.msg);
        exit(2);
    }
    return db;
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
    int n;

    push1(&db, p);
    p.max_retries = 0;
    push1(&db, p);
    push1(&db, job("c.held"));
    n = claim(&db, "gone", 0.05, "c.lease", j, 4);
    CHECK(n == 2);
    free_jobs(j, n);
    n = claim(&db, "alive", 0.05, "c.held", j, 4);
    free_jobs(j, n);
    CHECK(db.ops->renew(db.b, "alive", 60, &e) == 1);
    CHECK(db.ops->renew(db.b, "nobody", 60, &e) == 0);
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
    CHECK(db.ops->count_ready(db.b, names, 2, 100, &e) == 4);
    CHECK(db.ops->count_ready(db.b, names, 2, 2, &e) == 2);
    CHECK(db.ops->count_ready(db.b, names, 1, 100, &e) == 3);
    CHECK(db.ops->count_ready(db.b, names, 0, 100, &e) == 0);
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

static const struct test {
    const char *name;
    void      (*fn)(void);
} tests[] = {
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
    {"wake_fd, changed", test_wake},
};

static void
run_all(int *pass, int *fail)
{
    size_t i;

    for (i = 0; i < sizeof tests / sizeof tests[0]; i++) {
        failed = 0;
        tests[i].fn();
        printf("%s %s: %s\n", failed ? "FAIL" : "ok  ", engine,
               tests[i].name);
        if (failed)
            (*fail)++;
        else
            (*pass)++;
    }
}

static void
pg_exec(const char *pgurl, const char *sql)
{
    PGconn *c = PQconnectdb(pgurl);

    if (PQstatus(c) == CONNECTION_OK)
        PQclear(PQexec(c, sql));
    PQfinish(c);
}

int
main(int argc, char **argv)
{
    char dir[] = "/tmp/jrcontract.XXXXXX", drop[256];
    int pass = 0, fail = 0;

    if (mkdtemp(dir) == NULL) {
        perror("mkdtemp");
        return 2;
    }
    engine = check_where = "sqlite";
    snprintf(url, sizeof url, "sqlite:%s/jobs.db", dir);
    run_all(&pass, &fail);
    snprintf(drop, sizeof drop, "rm -rf '%s'", dir);
    if (system(drop) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    if (argc > 1 && argv[1][0] != '\0') {
        engine = check_where = "postgres";
        snprintf(url, sizeof url, "%s", argv[1]);
        snprintf(schema, sizeof schema, "jrcontract_%d", (int)getpid());
        snprintf(drop, sizeof drop, "SET client_min_messages = warning; "
                 "DROP SCHEMA IF EXISTS %s CASCADE", schema);
        pg_exec(url, drop);
        run_all(&pass, &fail);
        pg_exec(url, drop);
    } else {
        printf("skip postgres: no URL given\n");
    }
    printf("%d passed, %d failed\n", pass, fail);
    return fail ? 1 : 0;
}
