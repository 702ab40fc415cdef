/* test_client.c - the control calls of the producer library (jobrunner.h):
 * cancel, queue pause/resume/list, show and list, wait, flows and batches
 * (push_flow, push_after, links, batch_show), through the public API
 * only, against SQLite (a temp file) and, when a URL is given, PostgreSQL
 * (a schema of its own, dropped after). A runner is played by the backend
 * ops where a job must be running. Usage: test_client [POSTGRES_URL];
 * spec/run passes the throwaway cluster's. Prints "N passed, N failed". */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include <libpq-fe.h>

#include "backend.h"
#include "engines.h"
#include "client/jobrunner.h"


static jr_client *
open_client(void)
{
    jr_client_config cfg = {.schema = schema[0] ? schema : NULL};
    jr_client *c;

    if (jr_client_open(&c, url, &cfg) != JR_CLIENT_OK) {
        fprintf(stderr, "%s: open: %s\n", engine, jr_client_errmsg(c));
        exit(2);
    }
    return c;
}

static int64_t
push(jr_client *c, const char *name, const char *queue, double run_in)
{
    jr_client_opts o = JR_CLIENT_OPTS_INIT;
    int64_t id = -1;

    o.queue = queue;
    o.run_in = run_in;
    CHECK(jr_client_push(c, name, "{\"k\": \"v\"}", &o, &id) ==
          JR_CLIENT_OK);
    return id;
}

/* Claims one job named name as a runner would (token "runner"). */
static int64_t
run_one(const char *name)
{
    jr_backend_opts o = {.schema = schema[0] ? schema : NULL};
    const char *names[1] = {name};
    jr_claim_spec spec = {.names = names, .nnames = 1, .others = 1,
                          .max = 1};
    jr_job *j[1];
    jr_err e = {0};
    jr_db db;
    int64_t id = -1;

    if (jr_db_open(&db, url, &o, &e) < 0) {
        CHECK_OK(-1, e);
        return -1;
    }
    if (db.ops->claim(db.b, "runner", 60, &spec, j, &e) == 1) {
        id = j[0]->id;
        free(j[0]);
    }
    jr_db_close(&db);
    return id;
}

typedef struct seen {
    int     n;
    int64_t id[8];
    char    state[8][16];
    char    payload[64];
    int     max_retries, cancel_requested, had_payload;
    double  done;
    double  expires_at, deadline, deadline_at;
} seen;

static int
job_fn(const jr_client_job_info *j, void *arg)
{
    seen *s = arg;

    if (s->n < 8) {
        s->id[s->n] = j->id;
        snprintf(s->state[s->n], sizeof s->state[0], "%s", j->state);
    }
    snprintf(s->payload, sizeof s->payload, "%s",
             j->payload ? j->payload : "");
    s->had_payload |= j->payload != NULL;
    s->max_retries = j->max_retries;
    s->cancel_requested = j->cancel_requested;
    s->done = j->progress_done;
    s->expires_at = j->expires_at;
    s->deadline = j->deadline;
    s->deadline_at = j->deadline_at;
    s->n++;
    return 0;
}

static seen
show(jr_client *c, int64_t id, int *status)
{
    seen s;

    memset(&s, 0, sizeof s);
    *status = jr_client_show(c, id, job_fn, &s);
    return s;
}

static void
test_cancel(void)
{
    jr_client *c = open_client();
    int64_t ids[4];
    int out[4], st;
    seen s;

    ids[0] = push(c, "cl.cancel", NULL, 0);
    ids[1] = push(c, "cl.cancel", NULL, 3600);
    ids[2] = push(c, "cl.cancel.run", NULL, 0);
    CHECK(run_one("cl.cancel.run") == ids[2]);
    ids[3] = 987654321;
    CHECK(jr_client_cancel(c, ids, 4, out) == JR_CLIENT_OK);
    CHECK(out[0] == JR_CLIENT_CANCELLED && out[1] == JR_CLIENT_CANCELLED &&
          out[2] == JR_CLIENT_CANCEL_REQUESTED &&
          out[3] == JR_CLIENT_CANCEL_NOTFOUND);
    CHECK(jr_client_cancel(c, ids, 1, out) == JR_CLIENT_OK &&
          out[0] == JR_CLIENT_CANCEL_FINISHED);
    CHECK(jr_client_cancel(c, ids, 2, NULL) == JR_CLIENT_OK);
    CHECK(jr_client_cancel(c, ids, 0, NULL) == JR_CLIENT_OK);
    CHECK(jr_client_cancel(c, NULL, 2, out) == JR_CLIENT_EUSAGE);
    s = show(c, ids[2], &st);
    CHECK(st == JR_CLIENT_OK && strcmp(s.state[0], "running") == 0 &&
          s.cancel_requested);
    s = show(c, ids[0], &st);
    CHECK(st == JR_CLIENT_OK && strcmp(s.state[0], "cancelled") == 0);
    jr_client_close(c);
}

static int
queue_fn(const jr_client_queue *q, void *arg)
{
    jr_client_queue *want = arg;

    if (strcmp(q->name, want->name) == 0) {
        *want = *q;
        want->name = "found";
    }
    return 0;
}

static void
test_pause(void)
{
    jr_client *c = open_client();
    jr_client_queue q = {.name = "cl.media"};

    push(c, "cl.pause", "cl.media", 0);
    push(c, "cl.pause", "cl.media", 3600);
    CHECK(jr_client_queue_pause(c, "cl.media") == JR_CLIENT_OK);
    CHECK(run_one("cl.pause") == -1);
    CHECK(jr_client_queue_list(c, queue_fn, &q) == JR_CLIENT_OK);
    CHECK(strcmp(q.name, "found") == 0 && q.paused && q.ready == 1 &&
          q.scheduled == 1 && q.paused_at > 0);
    CHECK(jr_client_queue_resume(c, "cl.media") == JR_CLIENT_OK);
    CHECK(run_one("cl.pause") > 0);
    q.name = "cl.media";
    CHECK(jr_client_queue_list(c, queue_fn, &q) == JR_CLIENT_OK);
    CHECK(!q.paused && q.ready == 0 && q.running == 1);
    CHECK(jr_client_queue_pause(c, "bad queue") == JR_CLIENT_EINPUT);
    CHECK(strstr(jr_client_errmsg(c), "queue name") != NULL);
    CHECK(jr_client_queue_resume(c, NULL) == JR_CLIENT_EUSAGE);
    CHECK(jr_client_queue_list(c, NULL, NULL) == JR_CLIENT_EUSAGE);
    jr_client_close(c);
}

static void
test_show_list(void)
{
    jr_client *c = open_client();
    jr_client_filter f = {.name = "cl.list"};
    int64_t a, b, d;
    int st;
    seen s;

    a = push(c, "cl.list", "cl.q1", 0);
    b = push(c, "cl.list", "cl.q2", 3600);
    d = push(c, "cl.list", "cl.q1", 0);
    s = show(c, a, &st);
    CHECK(st == JR_CLIENT_OK && s.n == 1 && s.id[0] == a &&
          strstr(s.payload, "\"k\"") != NULL &&
          s.max_retries == JR_CLIENT_UNSET && isnan(s.done));
    s = show(c, 987654321, &st);
    CHECK(st == JR_CLIENT_ENOTFOUND && s.n == 0 &&
          jr_client_errcode(c) == JR_CLIENT_ENOTFOUND &&
          strstr(jr_client_errmsg(c), "987654321") != NULL);
    memset(&s, 0, sizeof s);
    CHECK(jr_client_list(c, &f, job_fn, &s) == JR_CLIENT_OK);
    CHECK(s.n == 3 && s.id[0] == d && s.id[1] == b && s.id[2] == a &&
          !s.had_payload);
    memset(&s, 0, sizeof s);
    f.queue = "cl.q1";
    f.limit = 1;
    CHECK(jr_client_list(c, &f, job_fn, &s) == JR_CLIENT_OK);
    CHECK(s.n == 1 && s.id[0] == d);
    memset(&s, 0, sizeof s);
    f.queue = NULL;
    f.limit = 0;
    f.state = "scheduled";
    CHECK(jr_client_list(c, &f, job_fn, &s) == JR_CLIENT_OK);
    CHECK(s.n == 1 && s.id[0] == b);
    f.state = "finished";
    CHECK(jr_client_list(c, &f, job_fn, &s) == JR_CLIENT_EINPUT);
    CHECK(strstr(jr_client_errmsg(c), "'finished'") != NULL);
    CHECK(jr_client_list(c, NULL, NULL, NULL) == JR_CLIENT_EUSAGE);
    CHECK(jr_client_show(NULL, a, job_fn, &s) == JR_CLIENT_EUSAGE);
    jr_client_close(c);
}

/* Unique pushes through the C API: the outcome comes back beside the id;
 * the push functions of before are unchanged. */
static void
test_unique(void)
{
    jr_client *c = open_client();
    jr_client_unique u = {.key = "order:1"};
    jr_client_job jobs[3] = {
        {"cl.u", "{}", JR_CLIENT_OPTS_INIT},
        {"cl.u", "{}", JR_CLIENT_OPTS_INIT},
        {"cl.u", "{}", JR_CLIENT_OPTS_INIT}};
    jr_client_unique us[3] = {{.key = "b"}, {.key = "b"}, {.key = NULL}};
    int64_t a = -1, b = -1, ids[3];
    int out = -1, outs[3];

    CHECK(jr_client_push_unique(c, "cl.u", "{\"n\":1}", NULL, &u, &a,
                                &out) == JR_CLIENT_OK &&
          out == JR_CLIENT_PUSHED);
    CHECK(jr_client_push_unique(c, "cl.u", "{\"n\":2}", NULL, &u, &b,
                                &out) == JR_CLIENT_OK &&
          out == JR_CLIENT_DUPLICATE && b == a);
    u.on_conflict = JR_CLIENT_REPLACE;
    CHECK(jr_client_push_unique(c, "cl.u", "{\"n\":3}", NULL, &u, &b,
                                &out) == JR_CLIENT_OK &&
          out == JR_CLIENT_REPLACED && b == a);
    CHECK(jr_client_push_many_unique(c, jobs, us, 3, ids, outs) ==
          JR_CLIENT_OK);
    CHECK(ids[0] == ids[1] && ids[2] != ids[0] &&
          outs[0] == JR_CLIENT_PUSHED && outs[1] == JR_CLIENT_DUPLICATE &&
          outs[2] == JR_CLIENT_PUSHED);
    /* a plain push, old and new call */
    CHECK(jr_client_push(c, "cl.u", NULL, NULL, &b) == JR_CLIENT_OK &&
          b > a);
    CHECK(jr_client_push_unique(c, "cl.u", NULL, NULL, NULL, &b, &out) ==
          JR_CLIENT_OK && out == JR_CLIENT_PUSHED);
    u.key = "";
    CHECK(jr_client_push_unique(c, "cl.u", NULL, NULL, &u, NULL, NULL) ==
          JR_CLIENT_EINPUT &&
          strstr(jr_client_errmsg(c), "unique_key is empty") != NULL);
    u.key = "k";
    u.unique_for = -1;
    CHECK(jr_client_push_unique(c, "cl.u", NULL, NULL, &u, NULL, NULL) ==
          JR_CLIENT_EINPUT &&
          strstr(jr_client_errmsg(c), "unique_for -1") != NULL);
    jr_client_close(c);
}

/* Records the end of job id as its runner (token "runner") would: kind,
 * with result (may be NULL). */
static void
end_job(int64_t id, int kind, const char *result)
{
    jr_backend_opts o = {.schema = schema[0] ? schema : NULL};
    jr_result r = {.id = id, .kind = kind, .result = result,
                   .error = kind == JR_DEAD ? "boom" : NULL};
    jr_err e = {0};
    jr_db db;

    if (jr_db_open(&db, url, &o, &e) < 0) {
        CHECK_OK(-1, e);
        return;
    }
    CHECK(db.ops->complete(db.b, "runner", &r, 1, &e) == 1);
    jr_db_close(&db);
}

/* Ends the jobs ids[0] (completed, with a result) and ids[1] (dead) a
 * moment later, on a connection of its own: a thread (a forked child
 * must not use SQLite the parent has open). */
static void *
ender(void *arg)
{
    const int64_t *ids = arg;

    nanosleep(&(struct timespec){0, 300000000L}, NULL);
    end_job(ids[0], JR_DONE, "{\"x\":1}");
    end_job(ids[1], JR_DEAD, NULL);
    return NULL;
}

static double
mono(void)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec / 1e9;
}

/* jr_client_wait: a timeout, ends recorded by another process while it
 * waits (woken at once, not by a poll), a plain success deleted before
 * the wait, an unknown id. */
static void
test_wait(void)
{
    jr_client *c = open_client();
    jr_client_outcome out[3];
    int64_t ids[3], gone;
    double t0;
    pthread_t th;

    ids[0] = push(c, "cw.a", NULL, 0);
    ids[1] = push(c, "cw.b", NULL, 0);
    gone = push(c, "cw.c", NULL, 0);
    CHECK(run_one("cw.a") == ids[0] && run_one("cw.b") == ids[1] &&
          run_one("cw.c") == gone);
    end_job(gone, JR_DONE, NULL);           /* deleted: no result */
    CHECK(jr_client_wait(c, ids, 1, 0.2, out) == JR_CLIENT_ETIMEOUT &&
          strcmp(out[0].state, "running") == 0 && out[0].result == NULL &&
          strstr(jr_client_errmsg(c), "timed out") != NULL);
    CHECK(pthread_create(&th, NULL, ender, ids) == 0);
    t0 = mono();
    CHECK(jr_client_wait(c, ids, 2, 20, out) == JR_CLIENT_OK);
    CHECK(mono() - t0 < 5);
    CHECK(out[0].id == ids[0] && strcmp(out[0].state, "completed") == 0 &&
          out[0].result != NULL && strstr(out[0].result, "\"x\"") != NULL);
    CHECK(strcmp(out[1].state, "dead") == 0 && out[1].result == NULL &&
          out[1].error != NULL && strcmp(out[1].error, "boom") == 0);
    pthread_join(th, NULL);
    ids[2] = gone;                          /* no row: outcome unknown */
    CHECK(jr_client_wait(c, &ids[2], 1, 1, out) == JR_CLIENT_OK &&
          strcmp(out[0].state, "gone") == 0 && out[0].result == NULL &&
          out[0].error == NULL);
    ids[2] = gone + 1000;
    CHECK(jr_client_wait(c, &ids[2], 1, 1, out) == JR_CLIENT_ENOTFOUND &&
          strstr(jr_client_errmsg(c), "no such job") != NULL);
    CHECK(jr_client_wait(c, NULL, 1, 1, out) == JR_CLIENT_EUSAGE);
    jr_client_close(c);
}

/* Cancels the jobs of arg (MANY ids) in CHUNKS steps, on a handle of its
 * own, while a waiter waits on them all: each step wakes it. */
#define MANY 100000
#define CHUNKS 20
static void *
canceller(void *arg)
{
    const int64_t *ids = arg;
    jr_client *c = open_client();
    int i;

    for (i = 0; i < CHUNKS; i++) {
        nanosleep(&(struct timespec){0, 50000000L}, NULL);
        CHECK(jr_client_cancel(c, ids + i * (MANY / CHUNKS), MANY / CHUNKS,
                               NULL) == JR_CLIENT_OK);
    }
    jr_client_close(c);
    return NULL;
}

/* jr_client_wait on 100,000 ids (the most it takes), pushed in one batch:
 * all of them given back, in order, while queued (at the timeout) and once
 * cancelled in 20 steps while it waits (a read of those not ended at each
 * wake-up). Each id's outcome is found by its order or a sorted search: a
 * scan per id took 10 s of CPU for the first read alone; SIGALRM stops
 * the test after 240 s. */
static void
test_wait_many(void)
{
    enum { N = MANY };
    jr_client *c = open_client();
    jr_client_job *jobs = calloc(N, sizeof *jobs);
    jr_client_outcome *out = calloc(N, sizeof *out);
    int64_t *ids = calloc(N, sizeof *ids);
    int i, queued = 0, cancelled = 0, inorder = 0;
    clock_t t0 = clock();
    pthread_t th;

    CHECK(jobs != NULL && out != NULL && ids != NULL);
    for (i = 0; i < N; i++)
        jobs[i] = (jr_client_job){.name = "cw.many",
                                  .opts = JR_CLIENT_OPTS_INIT};
    CHECK(jr_client_push_many(c, jobs, N, ids) == JR_CLIENT_OK);
    alarm(240);
    CHECK(jr_client_wait(c, ids, N, 0.2, out) == JR_CLIENT_ETIMEOUT);
    for (i = 0; i < N; i++) {
        inorder += out[i].id == ids[i];
        queued += strcmp(out[i].state, "queued") == 0;
    }
    CHECK(inorder == N && queued == N);
    CHECK(pthread_create(&th, NULL, canceller, ids) == 0);
    CHECK(jr_client_wait(c, ids, N, 200, out) == JR_CLIENT_OK);
    pthread_join(th, NULL);
    for (i = inorder = 0; i < N; i++) {
        inorder += out[i].id == ids[i];
        cancelled += strcmp(out[i].state, "cancelled") == 0;
    }
    alarm(0);
    CHECK(inorder == N && cancelled == N);
    printf("%s: jr_client_wait on %d ids: %.2f s of CPU in all\n", engine, N,
           (double)(clock() - t0) / CLOCKS_PER_SEC);
    free(ids);
    free(out);
    free(jobs);
    jr_client_close(c);
}

/* --- workflows: jr_client_push_flow, push_after, links, batch_show --- */

typedef struct refs {
    int     n;
    char    ref[8][8];
    int64_t id[8];
} refs;

static int
ref_fn(const char *ref, int64_t id, void *arg)
{
    refs *r = arg;

    snprintf(r->ref[r->n], sizeof r->ref[0], "%s", ref);
    r->id[r->n++] = id;
    return 0;
}

static int64_t
id_of(const refs *r, const char *ref)
{
    for (int i = 0; i < r->n; i++)
        if (strcmp(r->ref[i], ref) == 0)
            return r->id[i];
    return -1;
}

typedef struct linked {
    int     np, nc, nm;
    int64_t batch;
    char    states[64];
} linked;

static int
link_fn(int kind, int64_t id, const char *state, void *arg)
{
    linked *l = arg;

    if (kind == 'b')
        l->batch = id;
    l->np += kind == 'p';
    l->nc += kind == 'c';
    l->nm += kind == 'm';
    if (state != NULL && strlen(l->states) + strlen(state) + 2 <
        sizeof l->states)
        strcat(strcat(l->states, state), " ");
    return 0;
}

/* batch_show's arg: the batch, then its members as link_fn counts them
 * (linked first: link_fn takes the same arg) */
typedef struct shown {
    linked          l;
    jr_client_batch b;
} shown;

static int
batch_fn(const jr_client_batch *b, void *arg)
{
    shown *out = arg;

    out->b = *b;
    out->b.on_complete = out->b.on_success = NULL;
    out->b.payload = out->b.queue = NULL;
    return 0;
}

static void
test_flow(void)
{
    static const char diamond[] =
        "{\"jobs\": [{\"ref\": \"d\", \"name\": \"cl.d\", \"after\": [\"b\", \"c\"]},"
        " {\"ref\": \"a\", \"name\": \"cl.a\"},"
        " {\"ref\": \"b\", \"name\": \"cl.b\", \"after\": [\"a\"]},"
        " {\"ref\": \"c\", \"name\": \"cl.c\", \"after\": [\"a\"]}],"
        " \"batch\": {\"on_complete\": \"cl.cb\", \"on_success\": \"cl.ok\"}}";
    static const char cycle[] = "[{\"ref\": \"x\", \"name\": \"cl.x\", "
        "\"after\": [\"y\"]}, {\"ref\": \"y\", \"name\": \"cl.y\", "
        "\"after\": [\"x\"]}]";
    jr_client *c = open_client();
    jr_client_after a = {0};
    shown sh = {0};
    jr_client_batch b;
    refs r = {0};
    linked l = {0};
    int64_t batch = 0, id, missing = 987654321;

    CHECK(jr_client_push_flow(c, diamond, strlen(diamond), ref_fn, &r,
                              &batch) == JR_CLIENT_OK);
    CHECK(r.n == 4 && batch > 0);
    CHECK(jr_client_links(c, id_of(&r, "d"), link_fn, &l) == JR_CLIENT_OK);
    CHECK(l.np == 2 && l.nc == 0 && l.batch == batch);
    CHECK(run_one("cl.d") == -1 && run_one("cl.b") == -1);  /* waiting */
    CHECK(run_one("cl.a") == id_of(&r, "a"));
    end_job(id_of(&r, "a"), JR_DONE, "{\"v\":1}");
    CHECK(run_one("cl.b") == id_of(&r, "b") &&
          run_one("cl.c") == id_of(&r, "c"));
    end_job(id_of(&r, "b"), JR_DONE, NULL);
    CHECK(run_one("cl.d") == -1);                          /* c runs */
    end_job(id_of(&r, "c"), JR_DONE, NULL);
    CHECK(run_one("cl.d") == id_of(&r, "d"));
    end_job(id_of(&r, "d"), JR_DONE, NULL);
    CHECK(jr_client_batch_show(c, batch, batch_fn, link_fn, &sh) ==
          JR_CLIENT_OK);
    b = sh.b;
    CHECK(sh.l.nm == 4 && strcmp(sh.l.states, "completed completed "
          "completed completed ") == 0);
    CHECK(b.total == 4 && b.completed == 4 && b.pending == 0 &&
          b.finished_at > 0 && b.complete_job > 0 && b.success_job > 0);
    CHECK(run_one("cl.cb") == b.complete_job && run_one("cl.ok") ==
          b.success_job && run_one("cl.cb") == -1);
    /* refused: a cycle, an unknown parent; nothing pushed */
    CHECK(jr_client_push_flow(c, cycle, strlen(cycle), NULL, NULL, NULL) ==
          JR_CLIENT_EINPUT && strstr(jr_client_errmsg(c), "cycle") != NULL);
    a.after = &missing;
    a.nafter = 1;
    CHECK(jr_client_push_after(c, "cl.x", NULL, NULL, &a, &id) ==
          JR_CLIENT_EINPUT &&
          strstr(jr_client_errmsg(c), "unknown parent id 987654321") != NULL);
    CHECK(run_one("cl.x") == -1 && run_one("cl.y") == -1);
    CHECK(jr_client_batch_show(c, batch + 1000, batch_fn, link_fn, &sh) ==
          JR_CLIENT_ENOTFOUND);
    jr_client_close(c);
}

static int
seq_fn(const char *key, int64_t head, const char *state, long jobs,
       int blocked, void *arg)
{
    seen *s = arg;

    if (strcmp(key, "cl.k") == 0) {
        s->id[0] = head;
        snprintf(s->state[0], sizeof s->state[0], "%s", state);
        s->max_retries = (int)jobs;
        s->cancel_requested = blocked;
        s->n++;
    }
    return 0;
}

/* Sequences: push_seq and push_many_seq put jobs behind the sequence's
 * head (waiting), sequences lists it, sequence_act on a sequence not
 * blocked counts 0; on_conflict replace gives the waiting last job the
 * payload; bad input names the job. */
static void
test_sequences(void)
{
    jr_client *c = open_client();
    jr_client_seq sq = {"cl.k", JR_CLIENT_SEQ_SKIP, JR_CLIENT_KEEP, NULL},
                  many[2] = {{"cl.k", JR_CLIENT_SEQ_BLOCK, JR_CLIENT_KEEP,
                              NULL}, {NULL, 0, 0, NULL}};
    int64_t again = 0;
    int outcome = -1;
    jr_client_job jobs[2] = {{"cl.s", "{}", JR_CLIENT_OPTS_INIT},
                             {"cl.s", "{}", JR_CLIENT_OPTS_INIT}};
    int64_t first = 0, ids[2] = {0, 0};
    long count = -1;
    int status;
    seen s;

    CHECK(jr_client_push_seq(c, "cl.s", "{}", NULL, &sq, &first) ==
          JR_CLIENT_OK);
    CHECK(jr_client_push_many_seq(c, jobs, many, 2, ids) == JR_CLIENT_OK);
    s = show(c, first, &status);
    CHECK(status == JR_CLIENT_OK && strcmp(s.state[0], "queued") == 0);
    s = show(c, ids[0], &status);
    CHECK(status == JR_CLIENT_OK && strcmp(s.state[0], "waiting") == 0);
    s = show(c, ids[1], &status);           /* no sequence: a plain job */
    CHECK(status == JR_CLIENT_OK && strcmp(s.state[0], "queued") == 0);
    memset(&s, 0, sizeof s);
    CHECK(jr_client_sequences(c, 0, 0, seq_fn, &s) == JR_CLIENT_OK);
    CHECK(s.n == 1 && s.id[0] == first && strcmp(s.state[0], "queued") == 0
          && s.max_retries == 2 && s.cancel_requested == 0);
    memset(&s, 0, sizeof s);
    CHECK(jr_client_sequences(c, 1, 0, seq_fn, &s) == JR_CLIENT_OK &&
          s.n == 0);
    CHECK(jr_client_sequence_act(c, "cl.k", 0, &count) == JR_CLIENT_OK &&
          count == 0);
    /* on_conflict replace: the last job, waiting, takes the payload */
    sq.on_conflict = JR_CLIENT_REPLACE;
    sq.outcome = &outcome;
    CHECK(jr_client_push_seq(c, "cl.s", "{\"n\": 2}", NULL, &sq, &again) ==
          JR_CLIENT_OK && again == ids[0] && outcome == JR_CLIENT_REPLACED);
    s = show(c, ids[0], &status);
    CHECK(status == JR_CLIENT_OK && strcmp(s.state[0], "waiting") == 0);
    sq.on_conflict = JR_CLIENT_KEEP;
    sq.outcome = NULL;
    sq.key = "";
    CHECK(jr_client_push_seq(c, "cl.s", "{}", NULL, &sq, NULL) ==
          JR_CLIENT_EINPUT && strstr(jr_client_errmsg(c), "job 'cl.s'"));
    jr_client_close(c);
}

/* Expiry and deadline (docs/queues.md): the options reach the row, the
 * claim passes over a job past its expiry and the wake-up op ends it
 * expired, the first claim sets the deadline, bad values are refused. */
static void
test_expiry(void)
{
    jr_client *c = open_client();
    jr_client_opts o = JR_CLIENT_OPTS_INIT;
    jr_backend_opts bo = {.schema = schema[0] ? schema : NULL};
    jr_err e = {0};
    jr_db db;
    int64_t gone = -1, ok = -1, bad = -1;
    double now = (double)time(NULL);
    int st;
    seen s;

    o.expires_at = 1000;
    CHECK(jr_client_push(c, "cl.exp", NULL, &o, &gone) == JR_CLIENT_OK);
    o.expires_at = 0;
    o.expires_in = 600;
    o.deadline = 5.5;
    CHECK(jr_client_push(c, "cl.exp", NULL, &o, &ok) == JR_CLIENT_OK);
    s = show(c, ok, &st);
    CHECK(st == JR_CLIENT_OK && fabs(s.expires_at - (now + 600)) < 60 &&
          s.deadline == 5.5 && s.deadline_at == 0);
    /* the older job is first in claim order, but expired */
    CHECK(run_one("cl.exp") == ok);
    s = show(c, ok, &st);
    CHECK(st == JR_CLIENT_OK && fabs(s.deadline_at - (now + 5.5)) < 60);
    s = show(c, gone, &st);
    CHECK(st == JR_CLIENT_OK && strcmp(s.state[0], "queued") == 0 &&
          s.expires_at == 1000);
    if (jr_db_open(&db, url, &bo, &e) < 0) {
        CHECK_OK(-1, e);
    } else {
        CHECK(db.ops->wake(db.b, 10, &e) >= 1);
        jr_db_close(&db);
    }
    s = show(c, gone, &st);
    CHECK(st == JR_CLIENT_OK && strcmp(s.state[0], "expired") == 0);
    o.expires_in = NAN;
    CHECK(jr_client_push(c, "cl.exp", NULL, &o, &bad) == JR_CLIENT_EINPUT);
    CHECK(strstr(jr_client_errmsg(c), "expires_in nan") != NULL);
    o.expires_in = 0;
    o.deadline = -1;
    CHECK(jr_client_push(c, "cl.exp", NULL, &o, &bad) == JR_CLIENT_EINPUT);
    CHECK(strstr(jr_client_errmsg(c), "deadline -1") != NULL);
    CHECK(bad == -1);
    jr_client_close(c);
}

/* A push's trace context (docs/tracing.md): taken whole when it is W3C's
 * format, else refused naming the job and what is wrong, nothing
 * inserted. */
static void
test_trace(void)
{
    jr_client *c = open_client();
    jr_client_opts o = JR_CLIENT_OPTS_INIT;
    jr_client_job jobs[2] = {{"cl.t", "{}", JR_CLIENT_OPTS_INIT},
                             {"cl.t", "{}", JR_CLIENT_OPTS_INIT}};
    int64_t id = 0, ids[2];

    o.traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    o.tracestate = "congo=t61rcWkgMzE";
    CHECK(jr_client_push(c, "cl.t", "{}", &o, &id) == JR_CLIENT_OK && id > 0);
    o.traceparent = "00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01";
    CHECK(jr_client_push(c, "cl.t", "{}", &o, NULL) == JR_CLIENT_EINPUT &&
          strstr(jr_client_errmsg(c), "job 'cl.t': traceparent") &&
          strstr(jr_client_errmsg(c), "lowercase hex"));
    o.traceparent = NULL;
    CHECK(jr_client_push(c, "cl.t", "{}", &o, NULL) == JR_CLIENT_EINPUT &&
          strstr(jr_client_errmsg(c), "a tracestate needs a traceparent"));
    jobs[1].opts.traceparent =
        "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01";
    CHECK(jr_client_push_many(c, jobs, 2, ids) == JR_CLIENT_EINPUT &&
          strstr(jr_client_errmsg(c), "all-zero parent id"));
    jobs[1].opts.traceparent =
        "00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-00";
    CHECK(jr_client_push_many(c, jobs, 2, ids) == JR_CLIENT_OK &&
          ids[1] == ids[0] + 1 && ids[0] > id);
    jr_client_close(c);
}

static const check_test tests[] = {
    {"expires_at, expires_in, deadline", test_expiry},
    {"jr_client_opts.traceparent, tracestate", test_trace},
    {"jr_client_push_seq, push_many_seq, sequences, sequence_act",
     test_sequences},
    {"jr_client_push_flow, links, batch_show", test_flow},
    {"jr_client_wait", test_wait},
    {"jr_client_wait on 100,000 ids", test_wait_many},
    {"jr_client_push_unique, jr_client_push_many_unique", test_unique},
    {"jr_client_cancel", test_cancel},
    {"jr_client_queue_pause, resume, list", test_pause},
    {"jr_client_show, jr_client_list", test_show_list},
};

int
main(int argc, char **argv)
{
    return check_engines(argc, argv, tests, sizeof tests / sizeof tests[0],
                         "jrclient");
}
