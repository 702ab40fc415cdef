/* test_contract_complete.c - the backend contract on both engines
 * (contract.h): complete (every kind, fenced by the token), a refused
 * follow-up, complete_claim. Usage: test_contract_complete [POSTGRES_URL];
 * spec/run passes the throwaway cluster's. Prints "N passed, N failed". */
#include "contract.h"
#include "base/sqlstmt.h"
#include "sqlres.h"

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

/* Statements in the encoding jobrunner.sql makes, into b: texts[i] with
 * one integer parameter when ints[i] is not 0. */
static void
encode(jr_buf *b, const char *const *texts, const int64_t *ints, int n)
{
    jr_sqlval v = {.type = JR_SQLV_INT};
    int i;

    for (i = 0; i < n; i++) {
        jr_sql_put_text(b, texts[i], strlen(texts[i]), ints[i] != 0);
        v.i = ints[i];
        if (ints[i] != 0)
            jr_sql_put_param(b, &v);
    }
}

/* Pushes n jobs of name and claims them for token T into j; r[i] is job
 * j[i]'s success, ending dead if its statements fail, with err[i] for
 * their message and handler name (which must outlive r). */
static int
claim_successes(jr_db *db, char *name, jr_job **j, jr_result *r,
                char (*err)[JR_SQL_ERR_MAX], int n)
{
    int i, got;

    for (i = 0; i < n; i++)
        push1(db, job(name));
    got = claim(db, "T", 30, name, j, n);
    CHECK(got == n);
    memset(r, 0, (size_t)n * sizeof *r);
    for (i = 0; i < got; i++) {
        r[i].id = j[i]->id;
        r[i].kind = JR_DONE;
        r[i].sql_kind = JR_DEAD;
        r[i].sql_error = err[i];
        r[i].sql_handler = name;
    }
    return got;
}

/* A success's statements (job.h's jr_result.sql): run only for a job the
 * token holds, each job's in a savepoint; one that fails rolls back its
 * job's statements alone, and the success becomes the failed attempt
 * sql_kind says, the message naming the handler and the statement. */
static void
test_complete_sql(void)
{
    static const char *const ok[] = {
        "CREATE TEMP TABLE ct_sql (k bigint)",
        "INSERT INTO ct_sql VALUES ($1)"};
    static const int64_t ok_i[] = {0, 9007199254740993LL};
    static const char *const bad[] = {
        "INSERT INTO ct_sql VALUES ($1)", "INSERT INTO ct_nope VALUES (1)"};
    static const int64_t bad_i[] = {7, 0};
    /* fails unless the table holds the good job's row alone, exact */
    static const char *const look[] = {
        "CREATE TEMP TABLE ct_chk (ok int CHECK (ok = 1))",
        "INSERT INTO ct_chk SELECT CASE WHEN (SELECT count(*) FROM ct_sql)"
        " = 1 AND (SELECT max(k) FROM ct_sql) = 9007199254740993"
        " THEN 1 ELSE 0 END"};
    static const int64_t look_i[] = {0, 0};
    jr_db db = conn();
    jr_buf a = {0}, b = {0}, c = {0};
    char err[3][JR_SQL_ERR_MAX], name[] = "c.sql";
    jr_result r[3];
    jr_job *j[3];
    jr_err e = {0};
    deads d;
    int i, n, found = 0;

    n = claim_successes(&db, name, j, r, err, 3);
    encode(&a, ok, ok_i, 2);
    encode(&b, bad, bad_i, 2);
    encode(&c, look, look_i, 2);
    r[0].sql = a.p, r[0].sql_len = a.len, r[0].nsql = 2;
    r[1].sql = b.p, r[1].sql_len = b.len, r[1].nsql = 2;
    /* fenced: another token runs none of them (the bad one fails not) */
    CHECK(db.ops->complete(db.b, "other", r, 2, &e) == 0);
    CHECK(err[1][0] == '\0');
    STATE(&db, "c.sql", 0, 0, 3, 0);
    CHECK(db.ops->complete(db.b, "T", r, 2, &e) == 2);
    CHECK(err[0][0] == '\0');
    CHECK(strncmp(err[1], "jobrunner.sql statement 2 of 'c.sql' failed: ",
                  45) == 0);
    STATE(&db, "c.sql", 0, 0, 1, 1);
    d = dead_list(&db, 0);
    for (i = 0; i < d.n && i < 16; i++)
        if (d.id[i] == j[1]->id)
            found = strncmp(d.error[i], err[1], 60) == 0;
    CHECK(found);
    /* the good job's row is there, once and exact; the bad one's not */
    r[2].sql = c.p, r[2].sql_len = c.len, r[2].nsql = 2;
    CHECK(db.ops->complete(db.b, "T", &r[2], 1, &e) == 1);
    CHECK(err[2][0] == '\0');
    if (err[2][0] != '\0')
        fprintf(stderr, "  %s\n", err[2]);
    STATE(&db, "c.sql", 0, 0, 0, 1);
    free_jobs(j, n);
    jr_buf_free(&a);
    jr_buf_free(&b);
    jr_buf_free(&c);
    jr_db_close(&db);
}

/* After interrupt (a stopping runner's, backend.h), no handler's
 * statement runs on the connection: a success with statements becomes
 * the failed attempt sql_kind says, its statements unrun (one that would
 * fail says so by its own message otherwise); the runner's own writes go
 * on. */
static void
test_complete_sql_cut(void)
{
    static const char *const bad[] = {"INSERT INTO ct_nope VALUES ($1)"};
    static const int64_t bad_i[] = {7};
    static const char *const ok[] = {"SELECT 1"};
    static const int64_t ok_i[] = {0};
    jr_db db = conn();
    jr_buf a = {0}, b = {0};
    char err[2][JR_SQL_ERR_MAX], want[JR_SQL_ERR_MAX], name[] = "c.cut";
    jr_result r[2];
    jr_job *j[2];
    jr_err e = {0};
    int i, n;

    if (db.ops->interrupt == NULL) {
        jr_db_close(&db);
        return;
    }
    n = claim_successes(&db, name, j, r, err, 2);
    encode(&a, bad, bad_i, 1);
    encode(&b, ok, ok_i, 1);
    r[0].sql = a.p, r[0].sql_len = a.len, r[0].nsql = 1;
    r[1].sql = b.p, r[1].sql_len = b.len, r[1].nsql = 1;
    db.ops->interrupt(db.b);            /* nothing runs: the cut alone */
    CHECK(db.ops->complete(db.b, "T", r, 2, &e) == 2);
    snprintf(want, sizeof want, "jobrunner.sql statement 1 of 'c.cut' "
             "failed: %s", JR_SQLRES_CUT);
    for (i = 0; i < 2; i++) {
        CHECK(strcmp(err[i], want) == 0);
        if (strcmp(err[i], want) != 0)
            fprintf(stderr, "  %s\n", err[i]);
    }
    STATE(&db, "c.cut", 0, 0, 0, 2);
    free_jobs(j, n);
    jr_buf_free(&a);
    jr_buf_free(&b);
    jr_db_close(&db);
}

static const check_test tests[] = {
    {"complete, every kind, fenced", test_complete},
    {"complete refused as input", test_complete_refused},
    {"complete_claim", test_complete_claim},
    {"complete with a success's statements", test_complete_sql},
    {"complete after interrupt: no statement runs", test_complete_sql_cut},
};

int
main(int argc, char **argv)
{
    return check_engines(argc, argv, tests, sizeof tests / sizeof tests[0],
                         "jrc_complete");
}
