/* test_contract_complete.c - the backend contract on both engines
 * (contract.h): complete (every kind, fenced by the token), a refused
 * follow-up, complete_claim. Usage: test_contract_complete [POSTGRES_URL];
 * spec/run passes the throwaway cluster's. Prints "N passed, N failed". */
#include "contract.h"

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

static const check_test tests[] = {
    {"complete, every kind, fenced", test_complete},
    {"complete refused as input", test_complete_refused},
    {"complete_claim", test_complete_claim},
};

int
main(int argc, char **argv)
{
    return check_engines(argc, argv, tests, sizeof tests / sizeof tests[0],
                         "jrc_complete");
}
