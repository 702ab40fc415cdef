/* test_contract_list.c - the backend contract on both engines (contract.h):
 * show and list: every field, the filters, keyset pages, the payload filter.
 * Usage: test_contract_list [POSTGRES_URL]; spec/run passes the throwaway
 * cluster's. Prints "N passed, N failed". */
#include "contract.h"

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
    jr_list_filter f = {state, name, queue, limit, NULL, 0, 0, 0};
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
        "{\"u\": 42}", "{\"u\": \"42\"}",
        "{\"u\": 42.0, \"d\": {\"ok\": true}}", "{\"v\": 1}",
        "{\"u\": null}"};
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

static const check_test tests[] = {
    {"show and list", test_show_list},
    {"list pages and payload filter", test_list_page_where},
};

int
main(int argc, char **argv)
{
    return check_engines(argc, argv, tests, sizeof tests / sizeof tests[0],
                         "jrc_list");
}
