/* test_contract_fairname.c - the backend contract (contract.h) of a job
 * name's own fair share (docs/queues.md, "A name's own weights"):
 * fair_names with a handler's weights, its push into a queue that is not
 * fair making the queue fair (fair_name_list), its keys and weights
 * (fair_name_use), and fair_name_set's weight over the handler's. */
#include "contract.h"
#include "fairpick.h"

typedef struct seen {
    char   key[8][32];
    long   waiting[8];
    double weight[8];
    int    n;
} seen;

static int
use_cb(const char *key, long waiting, long running, double weight,
       void *arg)
{
    seen *s = arg;

    (void)running;
    if (s->n < 8) {
        snprintf(s->key[s->n], sizeof s->key[0], "%s", key);
        s->waiting[s->n] = waiting;
        s->weight[s->n++] = weight;
    }
    return 0;
}

static seen
use_of(jr_db *db, const char *name)
{
    seen s = {0};
    jr_err e = {0};

    CHECK_OK(db->ops->fair_name_use(db->b, name, use_cb, &s, &e), e);
    return s;
}

static void
test_fair_name_ops(void)
{
    jr_db db = conn();
    jr_err e = {0};
    char name[] = "cfn.w", path[] = "t", weights[] = "{\"a\":3}";
    jr_handler h = {.name = name, .fair = path, .fair_weights = weights,
                    .fair_default = 2};
    jr_fair_names names = {0}, queues = {0};
    jr_push p = job("cfn.w");
    seen s;

    CHECK_OK(db.ops->fair_names(db.b, &h, 1, &e), e);
    p.queue = "cfn.q";
    p.payload = "{\"t\":\"a\"}";
    push1(&db, p);
    push1(&db, p);
    p.payload = "{\"t\":\"b\"}";
    push1(&db, p);
    CHECK_OK(db.ops->fair_name_list(db.b, 1, jr_fair_names_add, &names, &e),
             e);
    CHECK(names.n == 1 && strcmp(names.name[0], "cfn.w") == 0);
    CHECK_OK(db.ops->fair_name_list(db.b, 0, jr_fair_names_add, &queues,
                                    &e), e);
    CHECK(queues.n == 1 && strcmp(queues.name[0], "cfn.q") == 0);
    /* by most ready first: a (the handler's 3), b (its default 2) */
    s = use_of(&db, "cfn.w");
    CHECK(s.n == 2);
    CHECK(strcmp(s.key[0], "a") == 0 && s.waiting[0] == 2 &&
          s.weight[0] == 3);
    CHECK(strcmp(s.key[1], "b") == 0 && s.waiting[1] == 1 &&
          s.weight[1] == 2);
    CHECK_OK(db.ops->fair_name_set(db.b, "cfn.w", "b", 7, &e), e);
    s = use_of(&db, "cfn.w");
    CHECK(s.n == 2 && strcmp(s.key[1], "b") == 0 && s.weight[1] == 7);
    jr_db_close(&db);
}

static const check_test tests[] = {
    {"a name's weights, its queue made fair, fair_name_set",
     test_fair_name_ops},
};

int
main(int argc, char **argv)
{
    return check_engines(argc, argv, tests, sizeof tests / sizeof tests[0],
                         "jrc_fairname");
}
