/* test_contract_waits.c - the backend contract on both engines
 * (contract.h): a JR_WAIT result (waiting, attempt not counted, its
 * record kept), signal (made ready, kept, refused: no such job, finished,
 * sent already, timed out), the signal that came while the job ran, wake
 * (a sleep's date, a signal's timeout recorded) and wait_counts. Usage:
 * test_contract_waits [POSTGRES_URL]; spec/run passes the throwaway
 * cluster's. Prints "N passed, N failed". */
#include "contract.h"
#include "base/util.h"

/* What show says of a job's wait. */
typedef struct waitrow {
    char   state[16], wait_on[64], waits[512];
    double wake_at;
    int    attempts;
} waitrow;

static int
wait_cb(const jr_job_row *r, void *arg)
{
    waitrow *w = arg;

    copy(w->state, sizeof w->state, r->state);
    copy(w->wait_on, sizeof w->wait_on, r->wait_on);
    copy(w->waits, sizeof w->waits, r->waits);
    w->wake_at = r->wake_at;
    w->attempts = r->attempts;
    return 0;
}

static waitrow
wait_of(jr_db *db, int64_t id)
{
    waitrow w;
    jr_err e = {0};

    memset(&w, 0, sizeof w);
    CHECK_OK(db->ops->show(db->b, id, wait_cb, &w, &e), e);
    return w;
}

/* Claims the one job of name under token T; returns it (freed). */
static void
take(jr_db *db, const char *name, int64_t id, const char **waits_out,
     char *buf, size_t size)
{
    const char *names[1] = {name};
    jr_job *j[2];
    int n = claim_spec(db, "T", ALL_QUEUES(names, 1, 2), j);

    CHECK(n == 1 && j[0]->id == id);
    if (n >= 1 && waits_out != NULL) {
        snprintf(buf, size, "%s", j[0]->waits ? j[0]->waits : "");
        *waits_out = buf;
    }
    free_jobs(j, n);
}

/* The attempt of id under T ends waiting for signal on (NULL: a sleep
 * numbered n) until at (INFINITY: no date). */
static int
wait_result(jr_db *db, int64_t id, const char *on, double at, int n)
{
    jr_result r;
    jr_err e = {0};
    int rc;

    memset(&r, 0, sizeof r);
    r.id = id;
    r.kind = JR_WAIT;
    r.wait_on = on;
    r.wake_at = at;
    r.sleep_n = n;
    rc = db->ops->complete(db->b, "T", &r, 1, &e);
    CHECK_OK(rc, e);
    return rc;
}

static int
sig(jr_db *db, int64_t id, const char *name, const char *payload,
    jr_err *e)
{
    char st[16];

    memset(e, 0, sizeof *e);
    return db->ops->signal(db->b, id, name, payload, st, sizeof st, e);
}

/* A wait and its signal, one sent before the wait, one while it ran,
 * and the refusals. */
static void
test_signal(void)
{
    jr_db db = conn();
    char buf[512];
    const char *w = NULL;
    int64_t id, before, during, dead;
    jr_err e;
    waitrow r;

    id = push_q(&db, "w.sig", "default", 0, 0);
    take(&db, "w.sig", id, NULL, NULL, 0);
    CHECK(wait_result(&db, id, "go", INFINITY, 0) == 1);
    r = wait_of(&db, id);
    CHECK(strcmp(r.state, "waiting") == 0 && strcmp(r.wait_on, "go") == 0 &&
          r.wake_at == 0 && r.attempts == 0);
    CHECK(sig(&db, id, "go", "{\"by\":\"ada\"}", &e) == 1);
    r = wait_of(&db, id);
    CHECK(strcmp(r.state, "queued") == 0 && r.wait_on[0] == '\0');
    take(&db, "w.sig", id, &w, buf, sizeof buf);
    CHECK(w != NULL && strstr(w, "\"ada\"") != NULL);
    CHECK(sig(&db, id, "go", NULL, &e) == -1 && e.code == JR_EINPUT &&
          strstr(e.msg, "sent already") != NULL);
    CHECK(sig(&db, 999999999, "go", NULL, &e) == -1 &&
          e.code == JR_ENOTFOUND && strstr(e.msg, "no such job") != NULL);
    CHECK(sig(&db, id, "bad name", NULL, &e) == -1 && e.code == JR_EINPUT);
    CHECK(sig(&db, id, "x", "{nope", &e) == -1 && e.code == JR_EINPUT);
    /* sent before the wait: kept, the job stays queued */
    before = push_q(&db, "w.before", "default", 0, 0);
    CHECK(sig(&db, before, "go", "[1]", &e) == 0);
    STATE_IS(&db, before, "queued");
    /* sent while the job ran: its wait ends it ready at once */
    during = push_q(&db, "w.during", "default", 0, 0);
    take(&db, "w.during", during, NULL, NULL, 0);
    CHECK(sig(&db, during, "go", NULL, &e) == 0);
    STATE_IS(&db, during, "running");
    CHECK(wait_result(&db, during, "go", INFINITY, 0) == 1);
    STATE_IS(&db, during, "queued");
    /* a finished job refuses, nothing changed */
    dead = push_q(&db, "w.dead", "default", 0, 0);
    take(&db, "w.dead", dead, NULL, NULL, 0);
    CHECK(result(&db, "T", dead, JR_DEAD) == 1);
    CHECK(sig(&db, dead, "go", NULL, &e) == -1 && e.code == JR_EINPUT &&
          strstr(e.msg, "the job is dead (finished)") != NULL);
    CHECK(wait_of(&db, dead).waits[0] == '\0');
    jr_db_close(&db);
}

/* A wait's date: a signal's deadline times it out (recorded, and a
 * later signal refused), a sleep's date ends it; wait_counts. */
static void
test_wake(void)
{
    jr_db db = conn();
    char buf[512];
    const char *w = NULL;
    long on_signal = -1, on_date = -1;
    int64_t late, later, sleeper;
    jr_err e = {0};
    waitrow r;
    int n;

    late = push_q(&db, "w.late", "default", 0, 0);
    take(&db, "w.late", late, NULL, NULL, 0);
    CHECK(wait_result(&db, late, "go", jr_now() + 0.5, 0) == 1);
    later = push_q(&db, "w.later", "default", 0, 0);
    take(&db, "w.later", later, NULL, NULL, 0);
    CHECK(wait_result(&db, later, "go", jr_now() + 3600, 0) == 1);
    sleeper = push_q(&db, "w.sleep", "default", 0, 0);
    take(&db, "w.sleep", sleeper, NULL, NULL, 0);
    CHECK(wait_result(&db, sleeper, NULL, jr_now() + 0.5, 1) == 1);
    r = wait_of(&db, sleeper);
    CHECK(strcmp(r.state, "waiting") == 0 && r.wait_on[0] == '\0' &&
          r.wake_at > 0 && strstr(r.waits, "\"sleeps\"") != NULL);
    CHECK_OK(db.ops->wait_counts(db.b, &on_signal, &on_date, &e), e);
    CHECK(on_signal == 2 && on_date == 1);
    nap(0.7);
    n = db.ops->wake(db.b, 100, &e);
    CHECK_OK(n, e);
    CHECK(n == 2);
    STATE_IS(&db, later, "waiting");
    take(&db, "w.late", late, &w, buf, sizeof buf);
    CHECK(w != NULL && strstr(w, "\"timeouts\"") != NULL);
    CHECK(sig(&db, late, "go", NULL, &e) == -1 && e.code == JR_EINPUT &&
          strstr(e.msg, "timed out") != NULL);
    take(&db, "w.sleep", sleeper, NULL, NULL, 0);
    CHECK_OK(db.ops->wait_counts(db.b, &on_signal, &on_date, &e), e);
    CHECK(on_signal == 1 && on_date == 0);
    CHECK(db.ops->wake(db.b, 100, &e) == 0);
    jr_db_close(&db);
}

static const check_test tests[] = {
    {"signal: ready, kept, refused; one while it ran", test_signal},
    {"wake: timeouts, sleeps; wait_counts", test_wake},
};

int
main(int argc, char **argv)
{
    return check_engines(argc, argv, tests, sizeof tests / sizeof tests[0],
                         "jrc_waits");
}
