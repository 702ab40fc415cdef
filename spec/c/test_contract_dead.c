/* test_contract_dead.c - the backend contract on both engines (contract.h):
 * the dead list, retry and purge, past one transaction too. Usage:
 * test_contract_dead [POSTGRES_URL]; spec/run passes the throwaway
 * cluster's. Prints "N passed, N failed". */
#include "contract.h"

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

static const check_test tests[] = {
    {"dead list, retry, purge", test_dead},
    {"dead retry and purge past one transaction", test_dead_bulk},
};

int
main(int argc, char **argv)
{
    return check_engines(argc, argv, tests, sizeof tests / sizeof tests[0],
                         "jrc_dead");
}
