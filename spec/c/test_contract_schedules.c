/* test_contract_schedules.c - the backend contract on both engines
 * (contract.h): the schedule controls: pause, resume, asked-for fires.
 * Usage: test_contract_schedules [POSTGRES_URL]; spec/run passes the
 * throwaway cluster's. Prints "N passed, N failed". */
#include "contract.h"

typedef struct ctl_seen {
    int    found, paused;
    double fire_at;
} ctl_seen;

static int
ctl_cb(const char *schedule, int paused, double paused_at, double fire_at,
       void *arg)
{
    ctl_seen *c = arg;

    (void)paused_at;
    if (strcmp(schedule, "c.s") == 0) {
        c->found = 1;
        c->paused = paused;
        c->fire_at = fire_at;
    }
    return 0;
}

static int
last_cb(const char *schedule, double at, int64_t job_id, void *arg)
{
    double *v = arg;

    if (strcmp(schedule, "c.s") == 0) {
        v[0] = at;
        v[1] = (double)job_id;
    }
    return 0;
}

/* One fire of c.s at at (manual: asked for by hand); returns inserted. */
static int
fire_at(jr_db *db, double at, int manual)
{
    jr_fire f = {.schedule = "c.s", .at = at, .job = job("c.s"),
                 .manual = manual};
    jr_err e = {0};

    CHECK_OK(db->ops->fire(db->b, &f, 1, 10, &e), e);
    return f.inserted;
}

/* Pause refuses fires; resume records its instant as the last fire (no
 * job); fire asks are once per instant, refused while paused. */
static void
test_sched_ctl(void)
{
    jr_db db = conn();
    double at = 0, now = floor((double)time(NULL)), last[2] = {0, -1};
    ctl_seen c = {0};
    jr_err e = {0};

    CHECK(db.ops->sched_ctl(db.b, "c.s", JR_SCHED_PAUSE, &at, &e) == 1);
    CHECK(db.ops->sched_ctl(db.b, "c.s", JR_SCHED_PAUSE, &at, &e) == 0);
    CHECK_OK(db.ops->sched_states(db.b, ctl_cb, &c, &e), e);
    CHECK(c.found && c.paused && c.fire_at == 0);
    CHECK(fire_at(&db, now - 5, 0) == -2);
    CHECK(db.ops->sched_ctl(db.b, "c.s", JR_SCHED_FIRE, &at, &e) < 0 &&
          e.code == JR_EINPUT && strstr(e.msg, "paused"));
    CHECK(db.ops->sched_ctl(db.b, "c.s", JR_SCHED_RESUME, &at, &e) == 1);
    CHECK(db.ops->sched_ctl(db.b, "c.s", JR_SCHED_RESUME, &at, &e) == 0);
    CHECK_OK(db.ops->last_fires(db.b, last_cb, last, &e), e);
    CHECK(last[0] >= now - 5 && last[1] == 0);
    CHECK(fire_at(&db, now - 5, 0) == 0);       /* the paused time */
    at = 0;
    CHECK(db.ops->sched_ctl(db.b, "c.s", JR_SCHED_FIRE, &at, &e) == 1);
    CHECK(at == floor(at) && fabs(at - now) <= 2);
    CHECK(db.ops->sched_ctl(db.b, "c.s", JR_SCHED_FIRE, &at, &e) == 0);
    c.found = 0;
    CHECK_OK(db.ops->sched_states(db.b, ctl_cb, &c, &e), e);
    CHECK(c.found && !c.paused && c.fire_at == at);
    CHECK(fire_at(&db, at, 1) == 1);            /* once per instant */
    CHECK(fire_at(&db, at, 1) == 0);
    at = now + 3600;
    CHECK(db.ops->sched_ctl(db.b, "c.s", JR_SCHED_FIRE, &at, &e) < 0 &&
          e.code == JR_EINPUT);
    CHECK(db.ops->sched_ctl(db.b, "no such", JR_SCHED_PAUSE, &at, &e) < 0 &&
          e.code == JR_EINPUT && strstr(e.msg, "schedule name"));
    jr_db_close(&db);
}

static const check_test tests[] = {
    {"schedule controls: pause, resume, fire asks", test_sched_ctl},
};

int
main(int argc, char **argv)
{
    return check_engines(argc, argv, tests, sizeof tests / sizeof tests[0],
                         "jrc_schedules");
}
