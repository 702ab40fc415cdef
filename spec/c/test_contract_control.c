/* test_contract_control.c - the backend contract on both engines
 * (contract.h): cancel (every outcome, racing completion), progress, a
 * job's steps and rerun, retention and prune. Usage: test_contract_control [POSTGRES_URL]; spec/run
 * passes the throwaway cluster's. Prints "N passed, N failed". */
#include "contract.h"

/* Each outcome of cancel; a cancelled job is never claimed; the runner
 * holding a cancel-requested job sees it through cancelled(). */
static void
test_cancel(void)
{
    jr_db db = conn();
    const char *names[1] = {"c.cancel"};
    int64_t ids[5], got[4];
    int out[5];
    jr_job *j[4];
    jr_err e = {0};
    shown s;
    int n;

    ids[0] = push_q(&db, "c.cancel", "default", 0, 0);         /* queued */
    ids[1] = push_q(&db, "c.cancel", "default", 0, 3600);      /* later */
    ids[2] = push_q(&db, "c.cancel", "default", -9, 0);        /* running */
    n = claim_spec(&db, "T", ALL_QUEUES(names, 1, 1), j);
    CHECK(n == 1 && j[0]->id == ids[2]);
    free_jobs(j, n);
    ids[3] = push_q(&db, "c.cancel", "default", -9, 0);        /* dead */
    n = claim_spec(&db, "T", ALL_QUEUES(names, 1, 1), j);
    CHECK(n == 1 && j[0]->id == ids[3]);
    free_jobs(j, n);
    CHECK(result(&db, "T", ids[3], JR_DEAD) == 1);
    ids[4] = 999999999;                                        /* none */
    CHECK(db.ops->cancelled(db.b, "T", got, 4, &e) == 0);
    CHECK_OK(db.ops->cancel(db.b, ids, 5, out, &e), e);
    CHECK(out[0] == JR_CANCEL_DONE && out[1] == JR_CANCEL_DONE &&
          out[2] == JR_CANCEL_REQUESTED && out[3] == JR_CANCEL_FINISHED &&
          out[4] == JR_CANCEL_NOTFOUND);
    s = show(&db, ids[0]);
    CHECK(strcmp(s.state, "cancelled") == 0 && s.finished_at > 0);
    STATE_IS(&db, ids[1], "cancelled");
    s = show(&db, ids[2]);
    CHECK(strcmp(s.state, "running") == 0 && s.cancel_requested);
    CHECK(db.ops->cancelled(db.b, "T", got, 4, &e) == 1 && got[0] == ids[2]);
    CHECK(db.ops->cancelled(db.b, "other", got, 4, &e) == 0);
    /* again: the cancelled ones are finished, the running one asked */
    CHECK_OK(db.ops->cancel(db.b, ids, 3, out, &e), e);
    CHECK(out[0] == JR_CANCEL_FINISHED && out[1] == JR_CANCEL_FINISHED &&
          out[2] == JR_CANCEL_REQUESTED);
    CHECK(claim_spec(&db, "T", ALL_QUEUES(names, 1, 4), j) == 0);
    /* the runner stops it: cancelled, fenced like any result */
    CHECK(result(&db, "other", ids[2], JR_CANCELLED) == 0);
    CHECK(result(&db, "T", ids[2], JR_CANCELLED) == 1);
    s = show(&db, ids[2]);
    CHECK(strcmp(s.state, "cancelled") == 0 && s.finished_at > 0 &&
          s.locked_by[0] == '\0');
    CHECK(db.ops->cancelled(db.b, "T", got, 4, &e) == 0);
    CHECK(db.ops->cancel(db.b, ids, 0, out, &e) == 0);
    jr_db_close(&db);
}

/* Cancel racing with completion: one outcome. Success wins; a retry,
 * snooze or release of a cancel-requested job ends it cancelled; a
 * rescued one too. */
static void
test_cancel_race(void)
{
    static const int kinds[] = {JR_RETRY, JR_SNOOZE, JR_RELEASE};
    jr_db db = conn(), keep = conn_keep(3600);
    const char *names[1] = {"c.race"};
    int64_t id;
    int out, i;
    jr_job *j[1];
    jr_err e = {0};

    for (i = 0; i < 2; i++) {
        jr_db *d = i == 0 ? &db : &keep;
        id = push_q(d, "c.race", "default", 0, 0);
        CHECK(claim_spec(d, "T", ALL_QUEUES(names, 1, 1), j) == 1);
        free(j[0]);
        CHECK_OK(d->ops->cancel(d->b, &id, 1, &out, &e), e);
        CHECK(out == JR_CANCEL_REQUESTED);
        CHECK(result(d, "T", id, JR_DONE) == 1);
        if (i == 0)
            CHECK(!show(d, id).found);          /* deleted, not cancelled */
        else
            STATE_IS(d, id, "completed");
        CHECK_OK(d->ops->cancel(d->b, &id, 1, &out, &e), e);
        CHECK(out == (i == 0 ? JR_CANCEL_NOTFOUND : JR_CANCEL_FINISHED));
    }
    for (i = 0; i < 3; i++) {
        id = push_q(&db, "c.race", "default", 0, 0);
        CHECK(claim_spec(&db, "T", ALL_QUEUES(names, 1, 1), j) == 1);
        free(j[0]);
        CHECK_OK(db.ops->cancel(db.b, &id, 1, &out, &e), e);
        CHECK(result(&db, "T", id, kinds[i]) == 1);
        STATE_IS(&db, id, "cancelled");
        CHECK(result(&db, "T", id, JR_DONE) == 0);  /* and nothing else */
        STATE_IS(&db, id, "cancelled");
    }
    CHECK(claim_spec(&db, "T", ALL_QUEUES(names, 1, 1), j) == 0);
    /* the runner died: its cancel-requested job is not requeued */
    id = push_q(&db, "c.race", "default", 0, 0);
    CHECK(db.ops->claim(db.b, "gone", 0.05, ALL_QUEUES(names, 1, 1), j,
                        &e) == 1);
    free(j[0]);
    CHECK_OK(db.ops->cancel(db.b, &id, 1, &out, &e), e);
    nap(0.2);
    CHECK(db.ops->rescue(db.b, &e) >= 1);
    STATE_IS(&db, id, "cancelled");
    /* a dead job retried from the dead queue loses its cancel request */
    id = push_q(&db, "c.race", "default", 0, 0);
    CHECK(claim_spec(&db, "T", ALL_QUEUES(names, 1, 1), j) == 1);
    free(j[0]);
    CHECK_OK(db.ops->cancel(db.b, &id, 1, &out, &e), e);
    CHECK(result(&db, "T", id, JR_DEAD) == 1);
    STATE_IS(&db, id, "dead");
    CHECK(db.ops->dead_retry(db.b, &id, 1, &e) == 1);
    CHECK(!show(&db, id).cancel_requested);
    CHECK(claim_spec(&db, "T", ALL_QUEUES(names, 1, 1), j) == 1);
    free(j[0]);
    CHECK(result(&db, "T", id, JR_RETRY) == 1);
    STATE_IS(&db, id, "queued");
    jr_db_close(&keep);
    jr_db_close(&db);
}

/* Progress is recorded on a running job under its token, and cleared by
 * the next claim. */
static void
test_progress(void)
{
    jr_db db = conn();
    const char *names[1] = {"c.progress"};
    jr_result r;
    jr_job *j[1];
    jr_err e = {0};
    int64_t id = push_q(&db, "c.progress", "default", 0, 0);
    shown s;

    s = show(&db, id);
    CHECK(isnan(s.done) && isnan(s.total) && s.note[0] == '\0' &&
          s.started_at == 0);
    CHECK(claim_spec(&db, "T", ALL_QUEUES(names, 1, 1), j) == 1);
    free(j[0]);
    memset(&r, 0, sizeof r);
    r.id = id;
    r.kind = JR_PROGRESS;
    r.done = 3;
    r.total = 10;
    r.note = "copying";
    CHECK(db.ops->complete(db.b, "other", &r, 1, &e) == 0);
    CHECK(db.ops->complete(db.b, "T", &r, 1, &e) == 1);
    s = show(&db, id);
    CHECK(strcmp(s.state, "running") == 0 && s.done == 3 &&
          s.total == 10 && strcmp(s.note, "copying") == 0 &&
          s.started_at > 0);
    r.done = 4;
    r.total = NAN;                      /* unknown */
    r.note = NULL;
    CHECK(db.ops->complete(db.b, "T", &r, 1, &e) == 1);
    s = show(&db, id);
    CHECK(s.done == 4 && isnan(s.total) && s.note[0] == '\0');
    CHECK(result(&db, "T", id, JR_RETRY) == 1);
    CHECK(db.ops->complete(db.b, "T", &r, 1, &e) == 0);  /* not running */
    jr_db_close(&db);
}

/* A job's steps: written under its token while it runs, kept by a retry,
 * claimed with it; rerun cuts them at a step, replaces the payload,
 * queues the job, and refuses a running job, a step never recorded and
 * an unknown id. */
static void
test_steps_rerun(void)
{
    jr_db db = conn();
    const char *names[1] = {"c.steps"};
    jr_result r;
    jr_job *j[1];
    jr_err e = {0};
    int64_t id = push_q(&db, "c.steps", "default", 0, 0);
    shown s;

    CHECK(claim_spec(&db, "T", ALL_QUEUES(names, 1, 1), j) == 1);
    CHECK(j[0]->steps == NULL);
    free(j[0]);
    memset(&r, 0, sizeof r);
    r.id = id;
    r.kind = JR_STEP;
    r.result = "[{\"name\":\"a\",\"value\":1},{\"name\":\"b\",\"value\":2}]";
    CHECK(db.ops->complete(db.b, "other", &r, 1, &e) == 0);
    CHECK(db.ops->complete(db.b, "T", &r, 1, &e) == 1);
    CHECK(db.ops->rerun(db.b, id, NULL, NULL, &e) < 0 &&
          e.code == JR_EINPUT && strstr(e.msg, "is running"));
    CHECK(result(&db, "T", id, JR_DEAD) == 1);
    CHECK(db.ops->rerun(db.b, id, "zz", NULL, &e) < 0 &&
          e.code == JR_EINPUT && strstr(e.msg, "no step 'zz' recorded"));
    STATE_IS(&db, id, "dead");
    CHECK(db.ops->rerun(db.b, 999999999, NULL, NULL, &e) < 0 &&
          e.code == JR_ENOTFOUND);
    CHECK_OK(db.ops->rerun(db.b, id, "b", "{\"v\":2}", &e), e);
    s = show(&db, id);
    CHECK(strcmp(s.state, "queued") == 0 && s.attempts == 0 &&
          strstr(s.payload, "\"v\"") != NULL);
    CHECK(claim_spec(&db, "T", ALL_QUEUES(names, 1, 1), j) == 1);
    CHECK(j[0]->steps != NULL && strstr(j[0]->steps, "\"a\"") != NULL &&
          strstr(j[0]->steps, "\"b\"") == NULL);
    free(j[0]);
    CHECK(result(&db, "T", id, JR_RETRY) == 1);
    CHECK_OK(db.ops->rerun(db.b, id, "a", NULL, &e), e);
    CHECK(claim_spec(&db, "T", ALL_QUEUES(names, 1, 1), j) == 1);
    CHECK(j[0]->steps == NULL);
    free(j[0]);
    jr_db_close(&db);
}

/* keep_completed keeps succeeded jobs as completed; prune deletes
 * finished jobs older than each threshold, at most limit at a time. */
static void
test_retention(void)
{
    jr_db db = conn_keep(3600);
    const char *names[1] = {"c.keep"};
    int64_t done[3], cancelled, dead;
    jr_job *j[3];
    jr_err e = {0};
    shown s;
    int i, out, n;

    for (i = 0; i < 3; i++)
        done[i] = push_q(&db, "c.keep", "default", 0, 0);
    CHECK(claim_spec(&db, "T", ALL_QUEUES(names, 1, 3), j) == 3);
    free_jobs(j, 3);
    for (i = 0; i < 3; i++)
        CHECK(result(&db, "T", done[i], JR_DONE) == 1);
    s = show(&db, done[0]);
    CHECK(strcmp(s.state, "completed") == 0 && s.finished_at > 0 &&
          s.finished_at >= s.started_at && s.locked_by[0] == '\0');
    cancelled = push_q(&db, "c.keep", "default", 0, 0);
    CHECK_OK(db.ops->cancel(db.b, &cancelled, 1, &out, &e), e);
    dead = push_q(&db, "c.keep", "default", 0, 0);
    CHECK(claim_spec(&db, "T", ALL_QUEUES(names, 1, 1), j) == 1);
    free(j[0]);
    CHECK(result(&db, "T", dead, JR_DEAD) == 1);
    nap(0.05);
    CHECK(db.ops->prune(db.b, -1, -1, -1, 100, &e) == 0);
    CHECK(db.ops->prune(db.b, 3600, 3600, 3600, 100, &e) == 0);
    CHECK(db.ops->prune(db.b, 0, -1, -1, 0, &e) == 0);
    n = db.ops->prune(db.b, 0, -1, -1, 2, &e);
    CHECK(n == 2);
    while ((n = db.ops->prune(db.b, 0, -1, -1, 2, &e)) > 0)
        ;
    CHECK(n == 0);
    for (i = 0; i < 3; i++)
        CHECK(!show(&db, done[i]).found);
    STATE_IS(&db, cancelled, "cancelled");
    STATE_IS(&db, dead, "dead");
    CHECK(db.ops->prune(db.b, -1, 0, -1, 1000, &e) >= 1);
    CHECK(!show(&db, cancelled).found);
    STATE_IS(&db, dead, "dead");
    CHECK(db.ops->prune(db.b, -1, -1, 0, 1000, &e) >= 1);
    CHECK(!show(&db, dead).found);
    jr_db_close(&db);
}

static const check_test tests[] = {
    {"cancel: every outcome", test_cancel},
    {"cancel racing completion: one outcome", test_cancel_race},
    {"progress result", test_progress},
    {"steps and rerun", test_steps_rerun},
    {"retention and prune", test_retention},
};

int
main(int argc, char **argv)
{
    return check_engines(argc, argv, tests, sizeof tests / sizeof tests[0],
                         "jrc_control");
}
