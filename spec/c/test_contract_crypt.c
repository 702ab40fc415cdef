/* test_contract_crypt.c - the backend contract on both engines
 * (contract.h) of what encryption's rotation stands on: crypt_scan reads
 * the jobs by id from after, limit at a time, with their payload, result,
 * steps and waits (NULL when none); crypt_put replaces, in one
 * transaction, each value still holding the text read, and leaves one
 * that changed since (what a runner or producer wrote wins). Usage:
 * test_contract_crypt [POSTGRES_URL]; spec/run passes the throwaway
 * cluster's. Prints "N passed, N failed". */
#include "contract.h"

typedef struct seen {
    int64_t id[8];
    char    payload[8][128];
    int     nulls[8];           /* result, steps, waits that were NULL */
    int     n;
} seen;

static int
seen_cb(int64_t id, const char *const *vals, void *arg)
{
    seen *s = arg;
    int c;

    if (s->n == 8)
        return 1;
    s->id[s->n] = id;
    snprintf(s->payload[s->n], sizeof s->payload[0], "%s",
             vals[JR_CRYPT_PAYLOAD] ? vals[JR_CRYPT_PAYLOAD] : "(null)");
    for (c = JR_CRYPT_RESULT; c < JR_CRYPT_COLS; c++)
        s->nulls[s->n] += vals[c] == NULL;
    s->n++;
    return 0;
}

static void
test_scan_put(void)
{
    jr_db db = conn();
    jr_push p[3] = {job("c.a"), job("c.b"), job("c.c")};
    int64_t ids[3];
    seen s;
    jr_err e = {0};
    int n;

    p[0].payload = "{\"n\":1}";
    p[1].payload = "{\"n\":2}";
    p[2].payload = "{\"n\":3}";
    CHECK_OK(db.ops->push(db.b, p, 3, ids, &e), e);
    /* by id, limit at a time, from after */
    memset(&s, 0, sizeof s);
    n = db.ops->crypt_scan(db.b, 0, 2, seen_cb, &s, &e);
    CHECK(n == 2 && s.n == 2 && s.id[0] == ids[0] && s.id[1] == ids[1]);
    CHECK(strstr(s.payload[0], "1") != NULL && s.nulls[0] == 3);
    memset(&s, 0, sizeof s);
    n = db.ops->crypt_scan(db.b, ids[1], 2, seen_cb, &s, &e);
    CHECK(n == 1 && s.n == 1 && s.id[0] == ids[2]);
    /* replaced when unchanged; left when the text read is not there now */
    {
        char old0[128];
        jr_crypt_put puts[2];

        memset(&s, 0, sizeof s);
        CHECK(db.ops->crypt_scan(db.b, 0, 3, seen_cb, &s, &e) == 3);
        snprintf(old0, sizeof old0, "%s", s.payload[0]);
        puts[0] = (jr_crypt_put){ids[0], JR_CRYPT_PAYLOAD, old0,
                                 "{\"n\":10}"};
        puts[1] = (jr_crypt_put){ids[1], JR_CRYPT_PAYLOAD, "{\"n\": 99}",
                                 "{\"n\":20}"};
        CHECK(db.ops->crypt_put(db.b, puts, 2, &e) == 1);
        memset(&s, 0, sizeof s);
        CHECK(db.ops->crypt_scan(db.b, 0, 3, seen_cb, &s, &e) == 3);
        CHECK(strstr(s.payload[0], "10") != NULL);
        CHECK(strstr(s.payload[1], "2") != NULL &&
              strstr(s.payload[1], "20") == NULL);
        /* a NULL column is never replaced */
        puts[0] = (jr_crypt_put){ids[2], JR_CRYPT_RESULT, "{}", "{\"r\":1}"};
        CHECK(db.ops->crypt_put(db.b, puts, 1, &e) == 0);
    }
    jr_db_close(&db);
}

static const check_test tests[] = {
    {"crypt_scan by id; crypt_put only what is unchanged", test_scan_put},
};

int
main(int argc, char **argv)
{
    return check_engines(argc, argv, tests, sizeof tests / sizeof tests[0],
                         "jrc_crypt");
}
