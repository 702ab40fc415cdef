/* test_contract_attempts.c - the backend contract on both engines
 * (contract.h): the attempt history: fenced, bounded, failures only; a
 * run's logs (job_logs): fenced, bounded, none for a job that logged
 * nothing or a success deleted. Usage:
 * test_contract_attempts [POSTGRES_URL]; spec/run passes the throwaway
 * cluster's. Prints "N passed, N failed". */
#include "contract.h"

typedef struct history {        /* what show gave of a job's attempts */
    int    n;
    int    attempt[JR_ATTEMPTS_KEPT], worker[JR_ATTEMPTS_KEPT];
    double at[JR_ATTEMPTS_KEPT], duration[JR_ATTEMPTS_KEPT];
    char   error[JR_ATTEMPTS_KEPT][32], runner[JR_ATTEMPTS_KEPT][32];
    char   gen[JR_ATTEMPTS_KEPT][32];
} history;

static int
history_cb(const jr_job_row *row, void *arg)
{
    history *h = arg;
    int i;

    h->n = row->nhistory;
    for (i = 0; i < row->nhistory && i < JR_ATTEMPTS_KEPT; i++) {
        const jr_attempt_row *a = &row->history[i];
        h->attempt[i] = a->attempt;
        h->worker[i] = a->worker;
        h->at[i] = a->at;
        h->duration[i] = a->duration;
        snprintf(h->error[i], sizeof h->error[i], "%s",
                 a->error ? a->error : "");
        snprintf(h->runner[i], sizeof h->runner[i], "%s",
                 a->runner ? a->runner : "");
        snprintf(h->gen[i], sizeof h->gen[i], "%s",
                 a->generation ? a->generation : "");
    }
    return 0;
}

static history
attempts_of(jr_db *db, int64_t id)
{
    history h = {.n = -1};
    jr_err e = {0};

    CHECK_OK(db->ops->show(db->b, id, history_cb, &h, &e), e);
    return h;
}

/* Claims job name once under token and records a failure of kind. */
static int
fail_once(jr_db *db, const char *token, const char *name, int kind,
          const char *error, double secs, int worker)
{
    const char *names[1] = {name};
    jr_result r;
    jr_job *j[1];
    jr_err e = {0};
    int n;

    if (claim_spec(db, token, ALL_QUEUES(names, 1, 1), j) != 1)
        return -1;
    memset(&r, 0, sizeof r);
    r.id = j[0]->id;
    r.kind = kind;
    r.error = error;
    r.generation = "g1";
    r.secs = secs;
    r.worker = worker;
    free(j[0]);
    n = db->ops->complete(db->b, token, &r, 1, &e);
    CHECK_OK(n, e);
    return n;
}

/* Each fenced failure appends its attempt; the newest JR_ATTEMPTS_KEPT
 * stay; a success, a snooze and a foreign token add none. */
static void
test_attempt_history(void)
{
    jr_db db = conn_keep(3600);
    int64_t id = push1(&db, job("c.att")), ok = push1(&db, job("c.attok"));
    jr_result r;
    jr_err e = {0};
    history h;
    char err[32];
    int i;

    CHECK(fail_once(&db, "T", "c.att", JR_RETRY, "first", 0.5, 3) == 1);
    CHECK(fail_once(&db, "U", "c.att", JR_SNOOZE, NULL, 0, 0) == 1);
    CHECK(fail_once(&db, "T", "c.att", JR_DEAD, "second", 0, 0) == 1);
    h = attempts_of(&db, id);
    CHECK(h.n == 2);
    CHECK(h.attempt[0] == 1 && strcmp(h.error[0], "first") == 0 &&
          fabs(h.duration[0] - 0.5) < 1e-9 && h.worker[0] == 3 &&
          strcmp(h.runner[0], "T") == 0 && strcmp(h.gen[0], "g1") == 0 &&
          h.at[0] > 0);
    CHECK(h.attempt[1] == 2 && strcmp(h.error[1], "second") == 0 &&
          isnan(h.duration[1]) && h.worker[1] == 0 && h.at[1] >= h.at[0]);
    memset(&r, 0, sizeof r);    /* a foreign token: fenced, nothing added */
    r.id = id;
    r.kind = JR_RETRY;
    r.error = "stale";
    CHECK(db.ops->complete(db.b, "other", &r, 1, &e) == 0);
    CHECK(attempts_of(&db, id).n == 2);
    CHECK(db.ops->dead_retry(db.b, &id, 1, &e) == 1);
    for (i = 0; i < JR_ATTEMPTS_KEPT + 3; i++) {
        snprintf(err, sizeof err, "e%d", i + 1);
        CHECK(fail_once(&db, "T", "c.att", JR_RETRY, err, 0.1, 1) == 1);
    }
    h = attempts_of(&db, id);
    CHECK(h.n == JR_ATTEMPTS_KEPT);
    CHECK(h.attempt[0] == 4 && strcmp(h.error[0], "e4") == 0);
    CHECK(h.attempt[JR_ATTEMPTS_KEPT - 1] == JR_ATTEMPTS_KEPT + 3);
    CHECK(fail_once(&db, "T", "c.attok", JR_DONE, NULL, 0.1, 1) == 1);
    CHECK(attempts_of(&db, ok).n == 0);
    jr_db_close(&db);
}

/* Claims job name under token and records its end of kind with logs. */
static int
end_logged(jr_db *db, const char *token, const char *name, int kind,
           const char *logs)
{
    const char *names[1] = {name};
    jr_result r;
    jr_job *j[1];
    jr_err e = {0};
    int n;

    if (claim_spec(db, token, ALL_QUEUES(names, 1, 1), j) != 1)
        return -1;
    memset(&r, 0, sizeof r);
    r.id = j[0]->id;
    r.kind = kind;
    r.error = kind == JR_DONE ? NULL : "boom";
    r.delay = 0;
    r.logs = logs;
    free(j[0]);
    n = db->ops->complete(db->b, token, &r, 1, &e);
    CHECK_OK(n, e);
    return n;
}

/* The job's logs text, or "" for none, or "(none)" for no job. */
static void
logs_of(jr_db *db, int64_t id, char *out, size_t size)
{
    jr_err e = {0};
    char *text = NULL;
    int rc = db->ops->job_logs(db->b, id, &text, &e);

    CHECK_OK(rc, e);
    snprintf(out, size, "%s", rc == 0 ? "(none)" : text ? text : "");
    free(text);
}

/* A run's entry joins the job's logs with its end, fenced; the newest
 * JR_LOGS_KEPT stay; a job that logs nothing has none; a success kept
 * keeps its run's, one deleted is gone with them. */
static void
test_job_logs(void)
{
    jr_db db = conn_keep(0), keep = conn_keep(3600);
    int64_t id = push1(&db, job("c.logs")), quiet = push1(&db, job("c.q"));
    int64_t gone = push1(&db, job("c.gone")), kept;
    char text[8192], entry[64];
    jr_result r;
    jr_err e = {0};
    int i;

    CHECK(end_logged(&db, "T", "c.logs", JR_RETRY,
                     "{\"attempt\":1,\"lines\":[]}") == 1);
    logs_of(&db, id, text, sizeof text);
    CHECK(strstr(text, "\"attempt\"") != NULL && strstr(text, "1") != NULL);
    CHECK(text[0] == '[');
    memset(&r, 0, sizeof r);    /* a foreign token: fenced, nothing added */
    r.id = id;
    r.kind = JR_RETRY;
    r.error = "stale";
    r.logs = "{\"attempt\":99}";
    CHECK(db.ops->complete(db.b, "other", &r, 1, &e) == 0);
    logs_of(&db, id, text, sizeof text);
    CHECK(strstr(text, "99") == NULL);
    for (i = 2; i <= JR_LOGS_KEPT + 3; i++) {
        snprintf(entry, sizeof entry, "{\"attempt\":%d}", 1000 + i);
        CHECK(end_logged(&db, "T", "c.logs", JR_RETRY, entry) == 1);
    }
    logs_of(&db, id, text, sizeof text);
    CHECK(strstr(text, "1003") == NULL && strstr(text, "1004") != NULL);
    CHECK(strstr(text, "1023") != NULL);
    CHECK(end_logged(&db, "T", "c.q", JR_RETRY, NULL) == 1);
    logs_of(&db, quiet, text, sizeof text);
    CHECK(strcmp(text, "") == 0);
    CHECK(end_logged(&db, "T", "c.gone", JR_DONE, "{\"attempt\":1}") == 1);
    logs_of(&db, gone, text, sizeof text);
    CHECK(strcmp(text, "(none)") == 0);
    kept = push1(&keep, job("c.kept"));
    CHECK(end_logged(&keep, "T", "c.kept", JR_DONE,
                     "{\"attempt\":7}") == 1);
    logs_of(&keep, kept, text, sizeof text);
    CHECK(strstr(text, "7") != NULL);
    jr_db_close(&keep);
    jr_db_close(&db);
}

static const check_test tests[] = {
    {"attempt history: fenced, bounded, failures only", test_attempt_history},
    {"job logs: fenced, bounded, none for nothing logged", test_job_logs},
};

int
main(int argc, char **argv)
{
    return check_engines(argc, argv, tests, sizeof tests / sizeof tests[0],
                         "jrc_attempts");
}
