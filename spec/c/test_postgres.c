/* test_postgres.c - jr_postgres_ops against a real cluster. Usage:
 *   url=$(spec/helpers/pgcluster.sh start); build/test_postgres "$url"
 * Works in the schemas jrtest, jrmig and jrrace, dropped first. Each test is
 * a function; main runs them all and prints "N passed, N failed". */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <libpq-fe.h>

#include "backend.h"
#include "check.h"

/* A claim spec of today's kind: names, every queue, max in all. */
#define ALL_QUEUES(nm, n, mx) (&(jr_claim_spec){.names = (nm),          \
        .nnames = (n), .others = (mx), .max = (mx)})
#include "base/util.h"

static const jr_backend_ops *ops = &jr_postgres_ops;
/* argv[1] with application_name APP: the connections test_reconnect
 * terminates are this test's own, not those of the specs that run beside
 * it on the same cluster (spec/run) */
#define APP "jrtest_postgres"
static char url[4096];
static PGconn *sql;             /* our own connection, for checks */


static void
nap(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

/* Runs a query on the check connection; returns the first value of the
 * first row as a string in a static buffer ("" for none or NULL). */
static const char *
q(const char *query)
{
    static char buf[4096];
    PGresult *res = PQexec(sql, query);
    ExecStatusType st = PQresultStatus(res);

    buf[0] = '\0';
    if (st != PGRES_TUPLES_OK && st != PGRES_COMMAND_OK) {
        fprintf(stderr, "query failed: %s: %s", query,
                PQresultErrorMessage(res));
        failed = 1;
    } else if (st == PGRES_TUPLES_OK && PQntuples(res) > 0) {
        snprintf(buf, sizeof buf, "%s", PQgetvalue(res, 0, 0));
    }
    PQclear(res);
    return buf;
}

static long
qn(const char *query)
{
    return atol(q(query));
}

extern const char jr_postgres_sql[];    /* build/postgres_sql.c */

/* Opens schema jrtest, migrated and empty. */
static jr_backend *
fresh(void)
{
    jr_backend_opts o = {.schema = "jrtest"};
    jr_backend *b;
    jr_err e = {0};

    if ((b = ops->open(url, &o, &e)) == NULL) {
        fprintf(stderr, "open: %s\n", e.msg);
        exit(2);
    }
    if (ops->migrate(b, &e) < 0) {
        fprintf(stderr, "migrate: %s\n", e.msg);
        exit(2);
    }
    q("TRUNCATE jrtest.jobs");
    return b;
}

static jr_push
job(const char *name, const char *payload)
{
    jr_push p = {.name = name, .payload = payload, .max_retries = -1};
    return p;
}

static int64_t
push1(jr_backend *b, jr_push p)
{
    int64_t id = -1;
    jr_err e = {0};

    CHECK_OK(ops->push(b, &p, 1, &id, &e), e);
    return id;
}

/* Claims every ready job named name under token; returns how many. */
static int
claim_all(jr_backend *b, const char *token, double lease, const char *name,
          jr_job **out, int max)
{
    const char *names[1] = {name};
    jr_err e = {0};
    int n = ops->claim(b, token, lease, ALL_QUEUES(names, 1, max), out, &e);

    CHECK_OK(n, e);
    return n;
}

static void
free_jobs(jr_job **j, int n)
{
    while (n-- > 0)
        free(j[n]);
}

static const char *
state_of(int64_t id)
{
    char query[128];
    snprintf(query, sizeof query,
             "SELECT state FROM jrtest.jobs WHERE id = %lld", (long long)id);
    return q(query);
}

/* ---- tests ---- */

static void
test_open_errors(void)
{
    jr_backend_opts o = {.schema = "Bad-Name"};
    jr_err e = {0};
    char bad[512];

    CHECK(ops->open(url, &o, &e) == NULL);
    CHECK(strstr(e.msg, "invalid PostgreSQL schema name 'Bad-Name'") != NULL);
    o.schema = "pg_mine";
    CHECK(ops->open(url, &o, &e) == NULL);
    CHECK(strstr(e.msg, "reserved") != NULL);
    o.schema = "a23456789012345678901234567890123456789012345678901234567890"
               "1234";
    CHECK(ops->open(url, &o, &e) == NULL);
    snprintf(bad, sizeof bad,
             "postgresql://joe:s3cret@/nodb?host=/nonexistent");
    CHECK(ops->open(bad, NULL, &e) == NULL);
    CHECK(strstr(e.msg, "cannot connect to PostgreSQL") != NULL);
    CHECK(strstr(e.msg, "s3cret") == NULL);
    CHECK(strstr(e.msg, "****") != NULL);
    /* a '/' or '@' unencoded in the password: refused, never parsed */
    snprintf(bad, sizeof bad,
             "postgresql://joe:s3cXq/Y9zzw@/nodb?host=/nonexistent");
    CHECK(ops->open(bad, NULL, &e) == NULL);
    CHECK(e.code == JR_EUSAGE);
    CHECK(strstr(e.msg, "percent-encoded") != NULL);
    CHECK(strstr(e.msg, "'postgresql://joe:****@/nodb?host=/nonexistent'")
          != NULL);
    CHECK(strstr(e.msg, "s3cXq") == NULL && strstr(e.msg, "Y9zzw") == NULL);
    snprintf(bad, sizeof bad, "postgresql://joe:s3cXq@Y9zzw@h.invalid/nodb");
    CHECK(ops->open(bad, NULL, &e) == NULL);
    CHECK(strstr(e.msg, "percent-encoded") != NULL);
    CHECK(strstr(e.msg, "s3cXq") == NULL && strstr(e.msg, "Y9zzw") == NULL);
    ops->close(NULL);
}

extern const char jr_postgres_sql[];    /* postgres/schema.sql, compiled in */

/* How many times s occurs in text. */
static long
occurrences(const char *text, const char *s)
{
    long n = 0;

    while ((text = strstr(text, s)) != NULL) {
        n++;
        text += strlen(s);
    }
    return n;
}

static void
test_migrate(void)
{
    jr_backend_opts o = {.schema = "jrmig"};
    jr_backend *b;
    jr_err e = {0};

    q("DROP SCHEMA IF EXISTS jrmig CASCADE");
    b = ops->open(url, &o, &e);
    CHECK(b != NULL);
    if (b == NULL)
        return;
    CHECK_OK(ops->migrate(b, &e), e);
    CHECK_OK(ops->migrate(b, &e), e);
    CHECK(qn("SELECT count(*) FROM jrmig.migrations") ==
          occurrences(jr_postgres_sql, "\n-- migration "));
    /* the tables of postgres/schema.sql (jobs, queues, schedule_fires...) and
     * the migrations table; its views (job_attempts) */
    CHECK(qn("SELECT count(*) FROM information_schema.tables "
             "WHERE table_schema = 'jrmig' AND table_type = 'BASE TABLE'") ==
          occurrences(jr_postgres_sql, "CREATE TABLE {{schema}}.") + 1);
    CHECK(qn("SELECT count(*) FROM information_schema.views "
             "WHERE table_schema = 'jrmig'") ==
          occurrences(jr_postgres_sql, "CREATE VIEW {{schema}}."));
    ops->close(b);
    /* another process migrating the same schema again */
    b = ops->open(url, &o, &e);
    CHECK_OK(ops->migrate(b, &e), e);
    ops->close(b);
    q("DROP SCHEMA jrmig CASCADE");
}

/* Runners starting together: the advisory lock serialises them. */
static void
test_migrate_race(void)
{
    int i, status, ok = 0;

    q("DROP SCHEMA IF EXISTS jrrace CASCADE");
    for (i = 0; i < 6; i++) {
        if (fork() == 0) {
            jr_backend_opts o = {.schema = "jrrace"};
            jr_err e = {0};
            jr_backend *b = ops->open(url, &o, &e);
            int rc = b && ops->migrate(b, &e) == 0 ? 0 : 1;
            if (rc)
                fprintf(stderr, "child migrate: %s\n", e.msg);
            ops->close(b);
            _exit(rc);
        }
    }
    for (i = 0; i < 6; i++)
        if (wait(&status) > 0 && WIFEXITED(status) &&
            WEXITSTATUS(status) == 0)
            ok++;
    CHECK(ok == 6);
    CHECK(qn("SELECT count(*) FROM jrrace.migrations") ==
          occurrences(jr_postgres_sql, "\n-- migration "));
    q("DROP SCHEMA jrrace CASCADE");
}

static void
test_push(void)
{
    jr_backend *b = fresh();
    jr_push p[3] = {job("a", "{\"n\": 1}"), job("b", NULL), job("c", "[]")};
    int64_t ids[3] = {0};
    jr_err e = {0};
    double at;

    p[1].queue = "mail";
    p[1].priority = -3;
    p[1].max_retries = 7;
    p[2].run_in = 60;
    CHECK_OK(ops->push(b, p, 3, ids, &e), e);
    CHECK(ids[0] > 0 && ids[1] == ids[0] + 1 && ids[2] == ids[1] + 1);
    CHECK(qn("SELECT count(*) FROM jrtest.jobs") == 3);
    CHECK(strcmp(q("SELECT name || payload::text || queue || priority || "
                   "max_retries FROM jrtest.jobs WHERE name = 'b'"),
                 "b{}mail-37") == 0);
    CHECK(qn("SELECT count(*) FROM jrtest.jobs WHERE name = 'c' AND "
             "run_at BETWEEN now() + interval '59 s' AND "
             "now() + interval '61 s'") == 1);

    /* an absolute run_at */
    p[0] = job("abs", NULL);
    at = 2000000000.25;
    p[0].run_at = at;
    push1(b, p[0]);
    CHECK(strcmp(q("SELECT extract(epoch FROM run_at) FROM jrtest.jobs "
                   "WHERE name = 'abs'"), "2000000000.250000") == 0);

    /* a batch with one invalid payload: all or none */
    p[0] = job("ok1", "{}");
    p[1] = job("hello", "{\"a\": nope}");
    p[2] = job("ok2", "{}");
    CHECK(ops->push(b, p, 3, ids, &e) == -1);
    CHECK(strstr(e.msg, "job 'hello': invalid JSON payload: ") == e.msg);
    CHECK(strstr(e.msg, "byte 7: expected a value") != NULL);  /* ours */
    CHECK(qn("SELECT count(*) FROM jrtest.jobs") == 4);
    p[0] = job("solo", "not json");
    CHECK(ops->push(b, p, 1, NULL, &e) == -1);
    CHECK(strstr(e.msg, "job 'solo': invalid JSON payload: ") == e.msg);

    /* checked before the database */
    p[0] = job("bad name", "{}");
    CHECK(ops->push(b, p, 1, NULL, &e) == -1);
    CHECK(strstr(e.msg, "invalid job name 'bad name'") != NULL);
    p[0] = job("x", "{}");
    p[0].queue = "q;drop";
    CHECK(ops->push(b, p, 1, NULL, &e) == -1);
    CHECK(strstr(e.msg, "invalid queue name") != NULL);

    /* the session still works after errors */
    CHECK(push1(b, job("after", NULL)) > 0);
    CHECK(ops->push(b, p, 0, NULL, &e) == 0);
    ops->close(b);
}

static void
test_push_quotes(void)
{
    static const char nasty[] =
        "{\"q\": \"'); DROP TABLE jrtest.jobs; --\", "
        "\"d\": \"\\\"x\\\" \\\\ {,} $1 \\u00e9\", \"a\": [\"{\\\"}\"]}";
    jr_backend *b = fresh();
    jr_job *j[2];
    int n;

    push1(b, job("quoted", nasty));
    n = claim_all(b, "t", 30, "quoted", j, 2);
    CHECK(n == 1);
    if (n == 1) {
        /* jsonb normalises: keys sorted by length then bytes */
        CHECK(strcmp(j[0]->payload,
                     "{\"a\": [\"{\\\"}\"], \"d\": \"\\\"x\\\" \\\\ {,} $1 "
                     "\xc3\xa9\", \"q\": \"'); DROP TABLE jrtest.jobs; "
                     "--\"}") == 0);
        CHECK(j[0]->payload_len == strlen(j[0]->payload));
        free_jobs(j, n);
    }
    CHECK(qn("SELECT count(*) FROM jrtest.jobs") == 1);
    ops->close(b);
}

static void
test_claim(void)
{
    jr_backend *b = fresh();
    const char *names[2] = {"b", "zzz"};
    jr_push p;
    int64_t late, first, mid, low;
    jr_job *j[10];
    jr_err e = {0};
    int n;

    p = job("a", "{\"i\": 1}");
    p.priority = 5;
    low = push1(b, p);
    p.priority = 0;
    mid = push1(b, p);
    p.run_at = jr_now() - 100;
    first = push1(b, p);
    p.run_at = 0;
    p.run_in = 3600;
    late = push1(b, p);
    push1(b, job("b", NULL));
    (void)late;

    n = claim_all(b, "tok", 30, "a", j, 10);
    CHECK(n == 3);
    if (n == 3) {
        CHECK(j[0]->id == first && j[1]->id == mid && j[2]->id == low);
        CHECK(j[0]->attempt == 1 && j[0]->max_retries == -1);
        CHECK(strcmp(j[0]->name, "a") == 0);
        CHECK(strcmp(j[0]->queue, "default") == 0);
        CHECK(strcmp(j[0]->payload, "{\"i\": 1}") == 0);
        CHECK(j[2]->priority == 5);
        CHECK(j[0]->run_at < j[1]->run_at);
        CHECK(j[0]->created_at > jr_now() - 60);
    }
    free_jobs(j, n);
    CHECK(qn("SELECT count(*) FROM jrtest.jobs WHERE state = 'running' "
             "AND locked_by = 'tok' AND locked_until > now() + "
             "interval '29 s'") == 3);
    CHECK(claim_all(b, "tok", 30, "a", j, 10) == 0);     /* late waits */

    n = ops->claim(b, "tok", 30, ALL_QUEUES(names, 2, 10), j, &e);
    CHECK(n == 1 && strcmp(j[0]->name, "b") == 0);
    free_jobs(j, n > 0 ? n : 0);
    CHECK(ops->claim(b, "tok", 30, ALL_QUEUES(names, 0, 10), j, &e) == 0);

    for (n = 0; n < 5; n++)
        push1(b, job("c", NULL));
    n = claim_all(b, "tok", 30, "c", j, 2);
    CHECK(n == 2 && j[0]->id < j[1]->id);
    free_jobs(j, n);
    ops->close(b);
}

/* Many runners share the queue: SKIP LOCKED hands each job out once. */
static void
test_claim_race(void)
{
    jr_backend *b = fresh();
    jr_push p[400];
    int fds[2], i, k, status, total = 0, dup = 0;
    static char seen[400];
    int64_t ids[400], id;

    for (i = 0; i < 400; i++)
        p[i] = job("race", NULL);
    CHECK(ops->push(b, p, 400, ids, &(jr_err){0}) == 0);
    CHECK(pipe(fds) == 0);
    for (k = 0; k < 4; k++) {
        if (fork() == 0) {
            jr_backend_opts o = {.schema = "jrtest"};
            jr_err e = {0};
            jr_backend *c = ops->open(url, &o, &e);
            const char *names[1] = {"race"};
            char tok[16];
            jr_job *j[7];
            int n;
            close(fds[0]);
            snprintf(tok, sizeof tok, "r%d", k);
            while (c && (n = ops->claim(c, tok, 30,
                                        ALL_QUEUES(names, 1, 7), j, &e)) > 0)
                for (i = 0; i < n; i++) {
                    if (write(fds[1], &j[i]->id, sizeof j[i]->id) < 0)
                        _exit(1);
                    free(j[i]);
                }
            ops->close(c);
            _exit(0);
        }
    }
    close(fds[1]);
    memset(seen, 0, sizeof seen);
    while (read(fds[0], &id, sizeof id) == sizeof id) {
        total++;
        if (id < ids[0] || id > ids[399] || seen[id - ids[0]]++)
            dup++;
    }
    close(fds[0]);
    while (wait(&status) > 0)
        ;
    CHECK(total == 400 && dup == 0);
    ops->close(b);
}

static void
test_complete(void)
{
    jr_backend *b = fresh();
    jr_push follow[2] = {job("next", "{\"from\": 1}"), job("next2", NULL)};
    jr_result r[6];
    jr_job *j[6];
    jr_err e = {0};
    char query[256];
    int i, n;

    for (i = 0; i < 6; i++)
        push1(b, job("k", NULL));
    n = claim_all(b, "T", 30, "k", j, 6);
    CHECK(n == 6);
    if (n != 6)
        return;
    memset(r, 0, sizeof r);
    for (i = 0; i < 6; i++)
        r[i].id = j[i]->id;
    r[0].kind = JR_DONE;
    r[0].pushes = follow;
    r[0].npushes = 2;
    r[1].kind = JR_RETRY;
    r[1].delay = 60;
    r[1].error = "boom: 'quoted' \"x\"";
    r[1].generation = "g1";
    r[2].kind = JR_DEAD;
    r[2].error = "fatal";
    r[2].generation = "g1";
    r[3].kind = JR_SNOOZE;
    r[3].delay = 30;
    r[4].kind = JR_RELEASE;
    r[5].kind = JR_DONE;
    r[5].pushes = follow;
    r[5].npushes = 1;

    /* the wrong token changes nothing, pushes included */
    CHECK(ops->complete(b, "other", r, 6, &e) == 0);
    CHECK(qn("SELECT count(*) FROM jrtest.jobs WHERE state = 'running'")
          == 6);
    CHECK(qn("SELECT count(*) FROM jrtest.jobs") == 6);

    CHECK(ops->complete(b, "T", r, 5, &e) == 5);
    CHECK(strcmp(state_of(j[0]->id), "") == 0);           /* deleted */
    CHECK(qn("SELECT count(*) FROM jrtest.jobs WHERE name = 'next' AND "
             "payload = '{\"from\": 1}' AND state = 'queued'") == 1);
    CHECK(qn("SELECT count(*) FROM jrtest.jobs WHERE name = 'next2'") == 1);
    snprintf(query, sizeof query, "SELECT state || attempts || last_error "
             "|| generation || (locked_by IS NULL) || (run_at > now() + "
             "interval '59 s') FROM jrtest.jobs WHERE id = %lld",
             (long long)j[1]->id);
    CHECK(strcmp(q(query), "queued1boom: 'quoted' \"x\"g1truetrue") == 0);
    snprintf(query, sizeof query, "SELECT state || attempts || last_error "
             "|| generation || (died_at IS NOT NULL) FROM jrtest.jobs "
             "WHERE id = %lld", (long long)j[2]->id);
    CHECK(strcmp(q(query), "dead1fatalg1true") == 0);
    snprintf(query, sizeof query, "SELECT state || attempts || (run_at > "
             "now() + interval '29 s') || (last_error IS NULL) FROM "
             "jrtest.jobs WHERE id = %lld", (long long)j[3]->id);
    CHECK(strcmp(q(query), "queued0truetrue") == 0);
    snprintf(query, sizeof query, "SELECT state || attempts || (run_at < "
             "now()) || (locked_until IS NULL) FROM jrtest.jobs "
             "WHERE id = %lld", (long long)j[4]->id);
    CHECK(strcmp(q(query), "queued0truetrue") == 0);

    /* applying the same results again: already done, fenced */
    CHECK(ops->complete(b, "T", r, 5, &e) == 0);
    CHECK(qn("SELECT count(*) FROM jrtest.jobs WHERE name = 'next'") == 1);

    /* a bad follow-up fails the whole batch before the database */
    follow[0].name = "no good";
    CHECK(ops->complete(b, "T", &r[5], 1, &e) == -1);
    CHECK(strstr(e.msg, "follow-up invalid job name") != NULL);
    follow[0] = job("next", "{broken");
    CHECK(ops->complete(b, "T", &r[5], 1, &e) == -1);
    CHECK(strstr(e.msg, "follow-up job 'next': invalid JSON payload") !=
          NULL);                /* jr_push_check's, as for the name */
    CHECK(strcmp(state_of(j[5]->id), "running") == 0);    /* rolled back */
    follow[0] = job("next", NULL);
    CHECK(ops->complete(b, "T", &r[5], 1, &e) == 1);
    CHECK(qn("SELECT count(*) FROM jrtest.jobs WHERE name = 'next'") == 2);
    free_jobs(j, n);
    ops->close(b);
}

static void
test_renew(void)
{
    jr_backend *b = fresh();
    jr_job *j[2];
    jr_err e = {0};
    int64_t ids[2];
    int n;

    push1(b, job("r", NULL));
    push1(b, job("r", NULL));
    n = claim_all(b, "R", 10, "r", j, 2);
    CHECK(n == 2);
    ids[0] = n == 2 ? j[0]->id : 0;
    ids[1] = n == 2 ? j[1]->id : 0;
    free_jobs(j, n);
    CHECK(ops->renew(b, "R", 100, ids, 1, &e) == 1);   /* only those named */
    CHECK(ops->renew(b, "R", 100, ids, 2, &e) == 2);
    CHECK(qn("SELECT count(*) FROM jrtest.jobs WHERE locked_until > now() "
             "+ interval '90 s'") == 2);
    CHECK(ops->renew(b, "nobody", 100, ids, 2, &e) == 0);
    ops->close(b);
}

static void
test_rescue(void)
{
    jr_backend *b = fresh();
    jr_push p = job("lost", NULL);
    int64_t keep, dies, held;
    jr_job *j[3];
    char query[200];
    jr_err e = {0};
    int n;

    keep = push1(b, p);
    p.max_retries = 0;
    dies = push1(b, p);
    n = claim_all(b, "gone", 0.01, "lost", j, 3);
    CHECK(n == 2);
    free_jobs(j, n);
    held = push1(b, job("held", NULL));
    n = claim_all(b, "alive", 60, "held", j, 3);
    free_jobs(j, n);
    nap(0.05);
    CHECK(ops->rescue(b, &e) == 2);
    snprintf(query, sizeof query, "SELECT state || attempts || last_error || "
             "(locked_by IS NULL) FROM jrtest.jobs WHERE id = %lld",
             (long long)keep);
    CHECK(strcmp(q(query), "queued1lease expired: runner losttrue") == 0);
    /* the rescue never decides death: the next claimer does (JR_EXPIRED) */
    snprintf(query, sizeof query, "SELECT state || attempts "
             "FROM jrtest.jobs WHERE id = %lld", (long long)dies);
    CHECK(strcmp(q(query), "queued1") == 0);
    CHECK(strcmp(state_of(held), "running") == 0);
    CHECK(ops->rescue(b, &e) == 0);
    ops->close(b);
}

typedef struct stats {
    int         n;
    char        names[8][16];
    long        v[8][4];
} stats;

static int
stat_cb(const jr_stat_row *row, void *arg)
{
    stats *s = arg;

    if (s->n < 8) {
        snprintf(s->names[s->n], sizeof s->names[0], "%s", row->name);
        s->v[s->n][0] = row->n[JR_STATE_READY];
        s->v[s->n][1] = row->n[JR_STATE_SCHEDULED];
        s->v[s->n][2] = row->n[JR_STATE_RUNNING];
        s->v[s->n][3] = row->n[JR_STATE_DEAD];
        s->n++;
    }
    return 0;
}

static void
test_stats(void)
{
    jr_backend *b = fresh();
    jr_push p = job("a", NULL);
    jr_result r = {0};
    stats s = {0};
    jr_job *j[2];
    jr_err e = {0};
    int n;

    push1(b, p);
    push1(b, p);
    p.run_in = 600;
    push1(b, p);
    push1(b, job("B", NULL));
    push1(b, job("c", NULL));
    n = claim_all(b, "t", 30, "B", j, 2);
    free_jobs(j, n);
    n = claim_all(b, "t", 30, "c", j, 2);
    CHECK(n == 1);
    r.id = j[0]->id;
    r.kind = JR_DEAD;
    r.error = "x";
    CHECK(ops->complete(b, "t", &r, 1, &e) == 1);
    free_jobs(j, n);
    CHECK_OK(ops->stats(b, stat_cb, &s, &e), e);
    CHECK(s.n == 3);
    CHECK(strcmp(s.names[0], "B") == 0 && s.v[0][2] == 1);
    CHECK(strcmp(s.names[1], "a") == 0 && s.v[1][0] == 2 &&
          s.v[1][1] == 1 && s.v[1][2] == 0 && s.v[1][3] == 0);
    CHECK(strcmp(s.names[2], "c") == 0 && s.v[2][3] == 1 &&
          s.v[2][0] == 0);
    ops->close(b);
}

typedef struct deads {
    int         n;
    int64_t     ids[8];
    char        err[8][32];
} deads;

static int
dead_cb(const jr_dead_row *row, void *arg)
{
    deads *d = arg;

    if (d->n < 8) {
        d->ids[d->n] = row->id;
        snprintf(d->err[d->n], sizeof d->err[0], "%s", row->last_error);
        if (row->generation == NULL || strcmp(row->name, "d") != 0 ||
            row->attempts != 1 || row->died_at < row->created_at ||
            strcmp(row->queue, "default") != 0)
            d->err[d->n][0] = '?';
        d->n++;
    }
    return 0;
}

/* Kills one job named d; returns its id. */
static int64_t
kill_one(jr_backend *b, const char *why)
{
    jr_result r = {0};
    jr_job *j[1];
    jr_err e = {0};
    int64_t id;

    push1(b, job("d", NULL));
    if (claim_all(b, "t", 30, "d", j, 1) != 1)
        return -1;
    id = r.id = j[0]->id;
    free(j[0]);
    r.kind = JR_DEAD;
    r.error = why;
    r.generation = "gen";
    CHECK(ops->complete(b, "t", &r, 1, &e) == 1);
    return id;
}

static void
test_dead(void)
{
    jr_backend *b = fresh();
    deads d = {0};
    int64_t a, c;
    jr_err e = {0};

    a = kill_one(b, "first");
    nap(0.01);
    kill_one(b, "second");
    nap(0.01);
    c = kill_one(b, "third");
    CHECK_OK(ops->dead_list(b, 2, dead_cb, &d, &e), e);
    CHECK(d.n == 2 && d.ids[0] == c && strcmp(d.err[0], "third") == 0 &&
          strcmp(d.err[1], "second") == 0);
    memset(&d, 0, sizeof d);
    CHECK_OK(ops->dead_list(b, 0, dead_cb, &d, &e), e);
    CHECK(d.n == 3 && d.ids[2] == a);

    CHECK(ops->dead_retry(b, &a, 1, &e) == 1);
    CHECK(strcmp(state_of(a), "queued") == 0);
    CHECK(qn("SELECT count(*) FROM jrtest.jobs WHERE attempts = 0 AND "
             "died_at IS NULL AND run_at <= now() AND state = 'queued'")
          == 1);
    CHECK(ops->dead_retry(b, &a, 1, &e) == 0);           /* not dead now */
    CHECK(ops->dead_retry(b, NULL, -1, &e) == 2);
    CHECK(qn("SELECT count(*) FROM jrtest.jobs WHERE state = 'dead'") == 0);

    kill_one(b, "again");
    kill_one(b, "again");
    CHECK(ops->dead_purge(b, 3600, &e) == 0);
    CHECK(ops->dead_purge(b, 0, &e) == 2);
    CHECK(qn("SELECT count(*) FROM jrtest.jobs") == 3);
    ops->close(b);
}

static int
readable(int fd, int ms)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    return poll(&p, 1, ms) == 1;
}

static void
test_wake(void)
{
    jr_backend *b = fresh();
    jr_backend *other = fresh();
    jr_result r = {0};
    jr_job *j[1];
    jr_err e = {0};
    int fd, n;

    fd = ops->wake_fd(b);
    CHECK(fd >= 0);
    CHECK(ops->changed(b, &e) == 0);
    q("SELECT jrtest.push('hello', '{\"a\": 1}')");
    CHECK(readable(fd, 5000));
    CHECK(ops->changed(b, &e) == 1);
    CHECK(ops->changed(b, &e) == 0);

    /* a claim does not wake anyone; a retry does */
    n = claim_all(other, "o", 30, "hello", j, 1);
    CHECK(n == 1);
    CHECK(!readable(fd, 200));
    CHECK(ops->changed(b, &e) == 0);
    r.id = j[0]->id;
    r.kind = JR_RETRY;
    r.error = "again";
    free_jobs(j, n);
    CHECK(ops->complete(other, "o", &r, 1, &e) == 1);
    CHECK(readable(fd, 5000));
    CHECK(ops->changed(b, &e) == 1);
    ops->close(other);
    ops->close(b);
}

/* The SQL function producers call inside their own transactions. */
static void
test_sql_push(void)
{
    jr_backend *b = fresh();
    jr_job *j[2];
    PGresult *res;
    int n;

    CHECK(qn("SELECT jrtest.push('sqljob')") > 0);
    CHECK(qn("SELECT jrtest.push('later', '{\"x\": [1]}', "
             "now() + interval '1 hour', priority => 3, queue => 'q2', "
             "max_retries => 4)") > 0);
    n = claim_all(b, "t", 30, "sqljob", j, 2);
    CHECK(n == 1 && strcmp(j[0]->payload, "{}") == 0 &&
          strcmp(j[0]->queue, "default") == 0 && j[0]->priority == 0);
    free_jobs(j, n);
    CHECK(strcmp(q("SELECT payload::text || queue || priority || "
                   "max_retries || (run_at > now()) FROM jrtest.jobs "
                   "WHERE name = 'later'"), "{\"x\": [1]}q234true") == 0);
    res = PQexec(sql, "SELECT jrtest.push('bad', '{oops')");
    CHECK(PQresultStatus(res) == PGRES_FATAL_ERROR);
    PQclear(res);
    res = PQexec(sql, "SELECT jrtest.push('bad name!')");
    CHECK(PQresultStatus(res) == PGRES_FATAL_ERROR &&
          strstr(PQresultErrorMessage(res), "check constraint") != NULL);
    PQclear(res);
    res = PQexec(sql, "INSERT INTO jrtest.jobs (name, payload) "
                 "VALUES ('n', '[1,')");
    CHECK(PQresultStatus(res) == PGRES_FATAL_ERROR);
    PQclear(res);
    res = PQexec(sql, "SELECT jrtest.push('never', run_at => 'infinity')");
    CHECK(PQresultStatus(res) == PGRES_FATAL_ERROR &&
          strstr(PQresultErrorMessage(res), "not a finite time") != NULL);
    PQclear(res);
    ops->close(b);
}

static int
ignore_stats(const jr_stat_row *row, void *arg)
{
    (void)row;
    (void)arg;
    return 0;
}

/* The server drops our connections: one op fails saying so, the next one
 * reconnects (statements prepared again); the LISTEN side likewise. */
static void
test_reconnect(void)
{
    jr_backend *b = fresh();
    jr_job *j[1];
    jr_err e = {0};
    int n;

    push1(b, job("rc", NULL));
    CHECK(ops->wake_fd(b) >= 0);
    CHECK_OK(ops->stats(b, ignore_stats, NULL, &e), e);
    q("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
      "WHERE application_name = '" APP "' AND pid <> pg_backend_pid()");
    nap(0.1);
    CHECK(ops->stats(b, ignore_stats, NULL, &e) == -1);
    CHECK(strstr(e.msg, "lost") != NULL);
    CHECK(strstr(e.msg, "reading stats") != NULL);
    n = claim_all(b, "t", 30, "rc", j, 1);
    CHECK(n == 1);
    free_jobs(j, n);
    CHECK(ops->changed(b, &e) == -1);
    CHECK(strstr(e.msg, "LISTEN connection") != NULL &&
          strstr(e.msg, "lost") != NULL);
    CHECK(ops->changed(b, &e) == 1);     /* reconnected: look again */
    CHECK(ops->changed(b, &e) == 0);
    CHECK(ops->wake_fd(b) >= 0);
    ops->close(b);
}

/* Not a benchmark (bench/ has those): checks a big batch works and says
 * how long it took. */
static void
test_push_batch(void)
{
    enum { N = 100000 };
    jr_backend *b = fresh();
    jr_push *p = calloc(N, sizeof *p);
    int64_t *ids = calloc(N, sizeof *ids);
    jr_err e = {0};
    double t0;
    int i, ok = 1;

    for (i = 0; i < N; i++)
        p[i] = job("bulk", "{\"user\": 12345, \"text\": \"hello world\"}");
    t0 = jr_now();
    CHECK_OK(ops->push(b, p, N, ids, &e), e);
    printf("pushed %d jobs in one batch: %.2fs\n", N, jr_now() - t0);
    for (i = 1; i < N; i++)
        ok &= ids[i] > ids[i - 1];
    CHECK(ok);
    CHECK(qn("SELECT count(*) FROM jrtest.jobs") == N);
    free(p);
    free(ids);
    ops->close(b);
}

/* A batch whose ids are not asked goes in by COPY (docs/performance.md):
 * the same rows, order, defaults, queues, NOTIFY and limit keys as the
 * INSERT that takes the others. */
static void
test_push_copy(void)
{
    jr_backend *b = fresh();
    jr_backend *other = fresh();
    jr_push p[4] = {job("c1", "{\"n\": 1, \"a\": [1, 2]}"), job("c2", NULL),
                    job("c3", "[]"), job("c4", "{\"acct\": \"a9\"}")};
    jr_err e = {0};
    int fd;

    fd = ops->wake_fd(other);
    CHECK(fd >= 0);
    CHECK(ops->changed(other, &e) == 0);
    p[1].queue = "copyq";
    p[1].priority = -3;
    p[1].max_retries = 7;
    p[3].key = "given";
    CHECK_OK(ops->push(b, p, 4, NULL, &e), e);
    CHECK(strcmp(q("SELECT string_agg(name || '|' || payload::text || '|' ||"
                   " queue || '|' || priority || '|' ||"
                   " coalesce(max_retries::text, '-') || '|' ||"
                   " coalesce(limit_key, '-') || '|' || state || '|' ||"
                   " (run_at = created_at), ' ' ORDER BY id)"
                   " FROM jrtest.jobs"),
                 "c1|{\"a\": [1, 2], \"n\": 1}|default|0|-|-|queued|true "
                 "c2|{}|copyq|-3|7|-|queued|true "
                 "c3|[]|default|0|-|-|queued|true "
                 "c4|{\"acct\": \"a9\"}|default|0|-|given|queued|true") == 0);
    CHECK(qn("SELECT count(*) FROM jrtest.queues WHERE name = 'copyq'") == 1);
    CHECK(readable(fd, 5000));
    CHECK(ops->changed(other, &e) == 1);

    /* a name with a limit path gets its key from the payload, in that
     * batch and the next ones */
    q("INSERT INTO jrtest.limit_paths VALUES ('c4', 'acct')");
    q("TRUNCATE jrtest.jobs");
    p[3].key = NULL;
    CHECK_OK(ops->push(b, p, 4, NULL, &e), e);
    CHECK_OK(ops->push(b, p + 2, 2, NULL, &e), e);
    CHECK(strcmp(q("SELECT string_agg(name || '=' ||"
                   " coalesce(limit_key, '-'), ' ' ORDER BY id)"
                   " FROM jrtest.jobs"),
                 "c1=- c2=- c3=- c4=a9 c3=- c4=a9") == 0);
    q("DELETE FROM jrtest.limit_paths");

    /* a row the database refuses refuses the batch, with its reason */
    q("TRUNCATE jrtest.jobs");
    q("CREATE FUNCTION jrtest.refuse() RETURNS trigger LANGUAGE plpgsql AS"
      " $$ BEGIN IF NEW.name = 'c3' THEN RAISE EXCEPTION 'no c3 here'"
      " USING ERRCODE = 'check_violation'; END IF; RETURN NEW; END $$");
    q("CREATE TRIGGER refuse BEFORE INSERT ON jrtest.jobs FOR EACH ROW"
      " EXECUTE FUNCTION jrtest.refuse()");
    CHECK(ops->push(b, p, 4, NULL, &e) == -1);
    CHECK(e.code == JR_EINPUT);
    CHECK(strstr(e.msg, "no c3 here") != NULL);
    CHECK(qn("SELECT count(*) FROM jrtest.jobs") == 0);
    q("DROP TRIGGER refuse ON jrtest.jobs");

    /* the connection goes on; delays go by the INSERT */
    p[0].run_in = 60;
    CHECK_OK(ops->push(b, p, 2, NULL, &e), e);
    CHECK(qn("SELECT count(*) FROM jrtest.jobs WHERE name = 'c1' AND "
             "run_at BETWEEN now() + interval '59 s' AND "
             "now() + interval '61 s'") == 1);
    CHECK(qn("SELECT count(*) FROM jrtest.jobs") == 2);
    ops->close(other);
    ops->close(b);
}

static const struct test {
    const char *name;
    void      (*fn)(void);
} tests[] = {
    {"open errors", test_open_errors},
    {"migrate", test_migrate},
    {"migrate race", test_migrate_race},
    {"push", test_push},
    {"push quotes", test_push_quotes},
    {"claim", test_claim},
    {"claim race", test_claim_race},
    {"complete", test_complete},
    {"renew", test_renew},
    {"rescue", test_rescue},
    {"stats", test_stats},
    {"dead", test_dead},
    {"wake", test_wake},
    {"sql push", test_sql_push},
    {"reconnect", test_reconnect},
    {"push batch", test_push_batch},
    {"push copy", test_push_copy},
};

int
main(int argc, char **argv)
{
    size_t i;
    int pass = 0, fail = 0;

    if (argc != 2) {
        fprintf(stderr, "usage: test_postgres URL\n");
        return 2;
    }
    if ((size_t)snprintf(url, sizeof url, "%s%sapplication_name=" APP,
                         argv[1],
                         strncmp(argv[1], "postgres", 8) != 0 ? " " :
                         strchr(argv[1], '?') ? "&" : "?") >=
        sizeof url) {
        fprintf(stderr, "test_postgres: URL too long\n");
        return 2;
    }
    sql = PQconnectdb(url);
    if (PQstatus(sql) != CONNECTION_OK) {
        fprintf(stderr, "test_postgres: %s", PQerrorMessage(sql));
        return 2;
    }
    q("SET client_min_messages = warning");
    q("DROP SCHEMA IF EXISTS jrtest CASCADE");
    for (i = 0; i < sizeof tests / sizeof tests[0]; i++) {
        failed = 0;
        tests[i].fn();
        printf("%s %s\n", failed ? "FAIL" : "ok  ", tests[i].name);
        if (failed)
            fail++;
        else
            pass++;
    }
    q("DROP SCHEMA IF EXISTS jrtest CASCADE");
    PQfinish(sql);
    printf("%d passed, %d failed\n", pass, fail);
    return fail ? 1 : 0;
}
