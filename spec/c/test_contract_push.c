/* test_contract_push.c - the backend contract on both engines (contract.h):
 * open, migrate, push: ids in order, a batch refused as a whole on bad
 * input. Usage: test_contract_push [POSTGRES_URL]; spec/run passes the
 * throwaway cluster's. Prints "N passed, N failed". */
#include "contract.h"

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

static const check_test tests[] = {
    {"open, migrate, close", test_open_migrate},
    {"push", test_push},
    {"push refused as input", test_push_refused},
};

int
main(int argc, char **argv)
{
    return check_engines(argc, argv, tests, sizeof tests / sizeof tests[0],
                         "jrc_push");
}
