/* test_contract_claim.c - the backend contract on both engines (contract.h):
 * claim, renew and rescue, count_ready, the wake descriptor. Usage:
 * test_contract_claim [POSTGRES_URL]; spec/run passes the throwaway
 * cluster's. Prints "N passed, N failed". */
#include <sqlite3.h>

#include "contract.h"

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

/* SQLite: a wake-up comes with the producer's WAL write, an fsync before
 * its commit shows. While another connection holds the write lock,
 * changed() says 2 (look again soon); once none does and nothing
 * changed, 0: the runner's own commits end their wake-ups there. */
static void
test_wake_writer(void)
{
    jr_db db;
    sqlite3 *raw = NULL;
    jr_err e = {0};

    if (strcmp(engine, "sqlite") != 0)
        return;
    db = conn();
    CHECK(db.ops->changed(db.b, &e) >= 0);
    CHECK(db.ops->changed(db.b, &e) == 0);
    CHECK(sqlite3_open(url + strlen("sqlite:"), &raw) == SQLITE_OK);
    CHECK(sqlite3_exec(raw, "BEGIN IMMEDIATE", NULL, NULL, NULL) ==
          SQLITE_OK);
    CHECK(db.ops->changed(db.b, &e) == 2);
    CHECK(db.ops->changed(db.b, &e) == 2);
    CHECK(sqlite3_exec(raw, "ROLLBACK", NULL, NULL, NULL) == SQLITE_OK);
    CHECK(db.ops->changed(db.b, &e) == 0);
    /* the probe leaves our connection as it was: it still writes */
    push1(&db, job("c.wake2"));
    CHECK(sqlite3_exec(raw, "BEGIN IMMEDIATE; UPDATE jobs SET priority = "
                       "priority + 1 WHERE name = 'c.wake2'", NULL, NULL,
                       NULL) == SQLITE_OK);
    CHECK(db.ops->changed(db.b, &e) == 2);
    CHECK(sqlite3_exec(raw, "COMMIT", NULL, NULL, NULL) == SQLITE_OK);
    CHECK(db.ops->changed(db.b, &e) == 1);
    CHECK(db.ops->changed(db.b, &e) == 0);
    sqlite3_close(raw);
    jr_db_close(&db);
}

static const check_test tests[] = {
    {"claim", test_claim},
    {"renew, rescue", test_renew_rescue},
    {"count_ready", test_count_ready},
    {"wake_fd, changed", test_wake},
    {"changed while another writes (SQLite)", test_wake_writer},
};

int
main(int argc, char **argv)
{
    return check_engines(argc, argv, tests, sizeof tests / sizeof tests[0],
                         "jrc_claim");
}
