/* test_contract_queues.c - the backend contract on both engines
 * (contract.h): fair claims across queues, per-queue caps, pause and resume,
 * the per-queue counts. Usage: test_contract_queues [POSTGRES_URL]; spec/run
 * passes the throwaway cluster's. Prints "N passed, N failed". */
#include "contract.h"

/* A backlog in one queue does not hold back the others: the first ready
 * job of each queue, then the second of each; priority within a queue. */
static void
test_fair_claim(void)
{
    jr_db db = conn();
    const char *names[1] = {"c.fair"};
    jr_claim_spec spec = {.names = names, .nnames = 1, .others = 100,
                          .max = 6};
    const char *q[6];
    jr_job *j[6];
    int64_t urgent;
    int i, n;

    for (i = 0; i < 300; i++)
        push_q(&db, "c.fair", "fair.a", 0, 0);
    urgent = push_q(&db, "c.fair", "fair.a", -1, 0);
    for (i = 0; i < 2; i++) {
        push_q(&db, "c.fair", "fair.b", 0, 0);
        push_q(&db, "c.fair", "fair.c", 0, 0);
    }
    push_q(&db, "c.fair", "fair.c", 0, 3600);   /* not due: not taken */
    n = claim_spec(&db, "T", &spec, j);
    CHECK(n == 6);
    for (i = 0; i < n; i++)
        q[i] = j[i]->queue;
    if (n == 6) {
        /* round 1: one of each queue, then round 2 */
        CHECK(strcmp(q[0], q[1]) != 0 && strcmp(q[1], q[2]) != 0 &&
              strcmp(q[0], q[2]) != 0);
        CHECK(strcmp(q[3], q[4]) != 0 && strcmp(q[4], q[5]) != 0 &&
              strcmp(q[3], q[5]) != 0);
        for (i = 0; i < 3; i++)
            if (strcmp(q[i], "fair.a") == 0)
                CHECK(j[i]->id == urgent);
    }
    free_jobs(j, n);
    /* b and c are drained: the rest comes from a */
    n = claim_spec(&db, "T", &spec, j);
    CHECK(n == 6);
    for (i = 0; i < n; i++)
        CHECK(strcmp(j[i]->queue, "fair.a") == 0);
    free_jobs(j, n);
    jr_db_close(&db);
}

/* One-job claims alternate between queues: the queue that leads a round
 * rotates from claim to claim, so an old backlog in one queue does not
 * win every claim of one. */
static void
test_fair_rotation(void)
{
    jr_db db = conn();
    const char *names[1] = {"c.rot"};
    jr_job *j[1];
    int i, from_b = 0;

    for (i = 0; i < 20; i++)
        push_q(&db, "c.rot", "rot.a", 0, 0);
    for (i = 0; i < 3; i++)
        push_q(&db, "c.rot", "rot.b", 0, 0);
    for (i = 0; i < 6; i++) {
        CHECK(claim_spec(&db, "T", ALL_QUEUES(names, 1, 1), j) == 1);
        from_b += strcmp(j[0]->queue, "rot.b") == 0;
        free(j[0]);
    }
    CHECK(from_b == 3);
    jr_db_close(&db);
}

static int
paused_cb(const char *queue, void *arg)
{
    char *seen = arg;

    if (strlen(seen) + strlen(queue) + 2 < 256)
        strcat(strcat(seen, queue), ",");
    return 0;
}

static int
ready_cb(const char *queue, long n, void *arg)
{
    char *seen = arg;
    char one[96];

    snprintf(one, sizeof one, "%s=%ld,", queue, n);
    if (strlen(seen) + strlen(one) < 256)
        strcat(seen, one);
    return 0;
}

/* paused lists the paused queues; ready_by_queue counts ready jobs of the
 * given names per queue not paused. */
static void
test_paused_ready(void)
{
    jr_db db = conn();
    const char *names[1] = {"c.pr"};
    char seen[256] = "";
    jr_err e = {0};

    push_q(&db, "c.pr", "pr.a", 0, 0);
    push_q(&db, "c.pr", "pr.a", 0, 0);
    push_q(&db, "c.pr", "pr.b", 0, 0);
    push_q(&db, "c.pr", "pr.b", 0, 3600);       /* not due */
    push_q(&db, "c.other", "pr.b", 0, 0);       /* another name */
    CHECK_OK(db.ops->ready_by_queue(db.b, names, 1, 1000, ready_cb, seen,
                                    &e), e);
    CHECK(strcmp(seen, "pr.a=2,pr.b=1,") == 0);
    CHECK_OK(db.ops->pause(db.b, "pr.b", &e), e);
    CHECK_OK(db.ops->pause(db.b, "pr.z", &e), e);
    seen[0] = '\0';
    CHECK_OK(db.ops->paused(db.b, paused_cb, seen, &e), e);
    CHECK(strcmp(seen, "pr.b,pr.z,") == 0);
    seen[0] = '\0';
    CHECK_OK(db.ops->ready_by_queue(db.b, names, 1, 1000, ready_cb, seen,
                                    &e), e);
    CHECK(strcmp(seen, "pr.a=2,") == 0);
    jr_db_close(&db);
}

/* Per-queue caps: a listed queue gives at most its max; others 0 serves
 * the listed queues only. */
static void
test_queue_caps(void)
{
    jr_db db = conn();
    const char *names[1] = {"c.caps"};
    jr_queue_want want[1] = {{"caps.a", 1}};
    jr_claim_spec spec = {.names = names, .nnames = 1, .queues = want,
                          .nqueues = 1, .others = 10, .max = 10};
    jr_job *j[10];
    int i, n, from_a = 0;

    for (i = 0; i < 5; i++) {
        push_q(&db, "c.caps", "caps.a", 0, 0);
        push_q(&db, "c.caps", "caps.b", 0, 0);
    }
    n = claim_spec(&db, "T", &spec, j);
    for (i = 0; i < n; i++)
        from_a += strcmp(j[i]->queue, "caps.a") == 0;
    CHECK(n == 6 && from_a == 1);
    free_jobs(j, n);
    /* only caps.a now, 2 at most; caps.b has none left anyway, so push */
    push_q(&db, "c.caps", "caps.b", 0, 0);
    want[0].max = 2;
    spec.others = 0;
    n = claim_spec(&db, "T", &spec, j);
    CHECK(n == 2);
    for (i = 0; i < n; i++)
        CHECK(strcmp(j[i]->queue, "caps.a") == 0);
    free_jobs(j, n);
    /* total max bounds it all */
    spec.others = 10;
    spec.max = 1;
    n = claim_spec(&db, "T", &spec, j);
    CHECK(n == 1);
    free_jobs(j, n);
    jr_db_close(&db);
}

typedef struct queues {
    int          n;
    jr_queue_row row[8];        /* name points into names */
    char         names[8][64];
    const char  *prefix;
} queues;

static int
queue_cb(const jr_queue_row *r, void *arg)
{
    queues *q = arg;

    if (strncmp(r->name, q->prefix, strlen(q->prefix)) != 0 || q->n == 8)
        return 0;
    q->row[q->n] = *r;
    copy(q->names[q->n], sizeof q->names[0], r->name);
    q->row[q->n].name = q->names[q->n];
    q->n++;
    return 0;
}

static queues
queue_list(jr_db *db, const char *prefix)
{
    queues q;
    jr_err e = {0};

    memset(&q, 0, sizeof q);
    q.prefix = prefix;
    CHECK_OK(db->ops->queue_list(db->b, queue_cb, &q, &e), e);
    return q;
}

/* A paused queue is never claimed nor counted ready; resume brings it
 * back. Pausing a new valid name creates it paused; a bad name is
 * refused. */
static void
test_pause(void)
{
    jr_db db = conn(), other = conn();
    const char *names[1] = {"c.pause"};
    jr_job *j[4];
    jr_err e = {0};
    queues q;
    int n;

    push_q(&db, "c.pause", "pause.q", 0, 0);
    push_q(&db, "c.pause", "pause.q", 0, 0);
    push_q(&db, "c.pause", "pause.r", 0, 0);
    CHECK_OK(db.ops->pause(db.b, "pause.q", &e), e);
    CHECK_OK(db.ops->pause(db.b, "pause.q", &e), e);    /* again: fine */
    CHECK(jr_db_count_ready(&other, names, 1, 100, &e) == 1);
    n = claim_spec(&other, "T", ALL_QUEUES(names, 1, 4), j);
    CHECK(n == 1 && strcmp(j[0]->queue, "pause.r") == 0);
    free_jobs(j, n);
    CHECK(claim_spec(&other, "T", ALL_QUEUES(names, 1, 4), j) == 0);
    CHECK(jr_db_count_ready(&other, names, 1, 100, &e) == 0);
    q = queue_list(&db, "pause.");
    CHECK(q.n == 2 && q.row[0].paused && !q.row[1].paused &&
          q.row[0].n[JR_STATE_READY] == 2 && q.row[0].paused_at > 0);
    CHECK_OK(db.ops->resume(db.b, "pause.q", &e), e);
    n = claim_spec(&other, "T", ALL_QUEUES(names, 1, 4), j);
    CHECK(n == 2);
    free_jobs(j, n);
    /* a queue no job used yet */
    CHECK_OK(db.ops->pause(db.b, "pause.new", &e), e);
    q = queue_list(&db, "pause.new");
    CHECK(q.n == 1 && q.row[0].paused && q.row[0].n[JR_STATE_READY] == 0);
    push_q(&db, "c.pause", "pause.new", 0, 0);      /* stays paused */
    CHECK(claim_spec(&other, "T", ALL_QUEUES(names, 1, 4), j) == 0);
    CHECK_OK(db.ops->resume(db.b, "pause.new", &e), e);
    CHECK_OK(db.ops->resume(db.b, "pause.never", &e), e);
    n = claim_spec(&other, "T", ALL_QUEUES(names, 1, 4), j);
    CHECK(n == 1);
    free_jobs(j, n);
    memset(&e, 0, sizeof e);
    CHECK(db.ops->pause(db.b, "bad/queue", &e) < 0 && e.code == JR_EINPUT &&
          strstr(e.msg, "queue name") != NULL);
    CHECK(db.ops->resume(db.b, "", &e) < 0 && e.code == JR_EINPUT);
    jr_db_close(&other);
    jr_db_close(&db);
}

/* The counts of name from stats, by state. */
static int
name_counts(const jr_stat_row *row, void *arg)
{
    jr_stat_row *want = arg;

    if (strcmp(row->name, want->name) == 0)
        memcpy(want->n, row->n, sizeof want->n);
    return 0;
}

/* queue_list and stats count each state of job.h's list (one job in
 * each here), queued the sum of ready and scheduled. */
static void
test_queue_list(void)
{
    jr_db db = conn_keep(3600);
    const char *names[1] = {"c.ql"};
    int64_t id;
    jr_job *j[3];
    jr_err e = {0};
    queues q;
    jr_push child;
    jr_stat_row byname;
    int64_t parent;
    int out, i;

    for (i = 0; i < 3; i++)
        push_q(&db, "c.ql", "ql.q", 0, 0);
    CHECK(claim_spec(&db, "T", ALL_QUEUES(names, 1, 3), j) == 3);
    CHECK(result(&db, "T", j[0]->id, JR_DONE) == 1);
    CHECK(result(&db, "T", j[1]->id, JR_DEAD) == 1);
    free_jobs(j, 3);
    push_q(&db, "c.ql", "ql.q", 0, 0);
    parent = push_q(&db, "c.ql", "ql.q", 0, 3600);
    child = job("c.ql");
    child.queue = "ql.q";
    child.after = &parent;
    child.nafter = 1;
    push1(&db, child);                                  /* waiting */
    id = push_q(&db, "c.ql", "ql.q", 0, 0);
    CHECK_OK(db.ops->cancel(db.b, &id, 1, &out, &e), e);
    child = job("c.ql");                                /* expired */
    child.queue = "ql.q";
    child.expires_at = 1000;
    push1(&db, child);
    CHECK(db.ops->wake(db.b, 10, &e) == 1);
    push_q(&db, "c.ql", "ql.r", 0, 0);
    q = queue_list(&db, "ql.");
    CHECK(q.n == 2);
    if (q.n == 2) {
        jr_queue_row *r = &q.row[0];
        CHECK(strcmp(r->name, "ql.q") == 0 && !r->paused);
        for (i = 0; i < JR_NSTATES; i++)
            if (r->n[i] != (i == JR_STATE_QUEUED ? 2 : 1)) {
                CHECK(!"one job of each state in ql.q");
                fprintf(stderr, "  state %s: %ld\n", jr_state_name(i),
                        r->n[i]);
            }
        CHECK(strcmp(q.row[1].name, "ql.r") == 0 &&
              q.row[1].n[JR_STATE_READY] == 1 &&
              q.row[1].n[JR_STATE_QUEUED] == 1);
    }
    /* by name: ql.r's ready job too */
    memset(&byname, 0, sizeof byname);
    byname.name = "c.ql";
    CHECK_OK(db.ops->stats(db.b, name_counts, &byname, &e), e);
    for (i = 0; i < JR_NSTATES; i++)
        if (byname.n[i] != (i == JR_STATE_QUEUED ? 3 :
                            i == JR_STATE_READY ? 2 : 1)) {
            CHECK(!"stats of c.ql: one job of each state, ready 2");
            fprintf(stderr, "  state %s: %ld\n", jr_state_name(i),
                    byname.n[i]);
        }
    jr_db_close(&db);
}

static const check_test tests[] = {
    {"fair claim across queues with a backlog in one", test_fair_claim},
    {"claim caps per queue, others 0, total", test_queue_caps},
    {"one-job claims alternate between queues", test_fair_rotation},
    {"paused queues and ready jobs per queue", test_paused_ready},
    {"paused queue never claimed, resume", test_pause},
    {"queue_list counts", test_queue_list},
};

int
main(int argc, char **argv)
{
    return check_engines(argc, argv, tests, sizeof tests / sizeof tests[0],
                         "jrc_queues");
}
