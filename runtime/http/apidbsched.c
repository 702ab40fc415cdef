/* apidbsched.c - the HTTP API's operator pages on the database thread:
 * GET /api/schedules (each schedule with its state and next fires) and the
 * controls of one schedule (pause, resume, fire now), GET /api/limits
 * (each limit's use, its busiest keys) and the bulk actions on what a job
 * list's filter selects (cancel, retry, purge), counted; a queue's pause
 * and resume, and the retry and purge of dead jobs. Part of apidb.c's
 * database reader (apidb.h); never runs in the loop. Uses backend.h,
 * api.h, cron.h, schedules.h, limit.h. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "http/api.h"
#include "http/apidb.h"
#include "backend.h"
#include "base/cron.h"
#include "base/limit.h"
#include "config/schedules.h"

/* --- schedules: GET /api/schedules and the controls (docs/http.md) --- */

#define NEXT_SHOWN 3            /* next fires given per schedule */

_Static_assert((int)JR_API_SCHED_PAUSE == (int)JR_SCHED_PAUSE &&
               (int)JR_API_SCHED_RESUME == (int)JR_SCHED_RESUME &&
               (int)JR_API_SCHED_FIRE == (int)JR_SCHED_FIRE,
               "api.h's controls are backend.h's");

typedef struct sched_state {    /* what the database holds of one */
    double   last;              /* last fire instant, 0: never */
    int64_t  job;               /* its job, 0: none */
    int      paused;
    double   paused_at, asked;
} sched_state;

typedef struct states {
    const jr_schedules *ss;
    sched_state        *v;      /* one per schedule of ss */
} states;

static int
sched_find(const states *st, const char *name)
{
    int i;

    for (i = 0; i < st->ss->n; i++)
        if (strcmp(st->ss->s[i].name, name) == 0)
            return i;
    return -1;
}

static int
on_fire(const char *schedule, double at, int64_t job, void *arg)
{
    states *st = arg;
    int i = sched_find(st, schedule);

    if (i >= 0) {
        st->v[i].last = at;
        st->v[i].job = job;
    }
    return 0;
}

static int
on_ctl(const char *schedule, int paused, double paused_at, double asked,
       void *arg)
{
    states *st = arg;
    int i = sched_find(st, schedule);

    if (i >= 0) {
        st->v[i].paused = paused;
        st->v[i].paused_at = paused_at;
        st->v[i].asked = asked;
    }
    return 0;
}

/* One schedule's object. */
static void
put_one(jr_buf *b, const jr_schedule *s, const sched_state *v, double now)
{
    double t = now;
    int i;

    jr_buf_put(b, "{\"name\":", 8);
    jr_api_str(b, s->name);
    jr_buf_put(b, ",\"job\":", 7);
    jr_api_str(b, s->job);
    if (s->cron.every > 0) {
        jr_api_printf(b, ",\"every\":%.0f,\"cron\":null", s->cron.every);
    } else {
        jr_buf_put(b, ",\"every\":null,\"cron\":", 21);
        jr_api_str(b, s->spec);
    }
    jr_buf_put(b, ",\"tz\":", 6);
    jr_api_str(b, s->tz);
    jr_buf_put(b, ",\"queue\":", 9);
    jr_api_str(b, s->queue ? s->queue : "default");
    jr_api_printf(b, ",\"catch_up\":\"%s\",\"paused\":%s,\"paused_at\":",
                  jr_catchup_name(s->catch_up), v->paused ? "true" :
                  "false");
    jr_api_time(b, v->paused ? v->paused_at : 0);
    jr_buf_put(b, ",\"last_fire\":", 13);
    jr_api_time(b, v->last);
    jr_buf_put(b, ",\"last_job\":", 12);
    jr_api_printf(b, v->job > 0 ? "%lld" : "null", (long long)v->job);
    jr_buf_put(b, ",\"fire_asked\":", 14);
    jr_api_time(b, v->asked);
    jr_buf_put(b, ",\"next\":[", 9);
    for (i = 0; i < NEXT_SHOWN &&
         jr_cron_next(&s->cron, s->tz, t, &t) == 0; i++)
        jr_api_printf(b, "%s%.3f", i ? "," : "", t);
    jr_buf_put(b, "]}", 2);
}

static int
sched_list(jr_db *db, jr_apireq *q, jr_err *e)
{
    const jr_schedules *ss = q->schedules;
    states st = {ss, calloc((size_t)(ss->n > 0 ? ss->n : 1),
                            sizeof *st.v)};
    double now = jr_now();
    int i;

    if (st.v == NULL)
        return jr_fail(e, JR_ENOMEM, "out of memory listing schedules");
    if (ss->n > 0 && (db->ops->last_fires(db->b, on_fire, &st, e) < 0 ||
                      db->ops->sched_states(db->b, on_ctl, &st, e) < 0)) {
        free(st.v);
        return -1;
    }
    jr_api_printf(&q->body, "{\"now\":%.3f,\"schedules\":[", now);
    for (i = 0; i < ss->n; i++) {
        if (i > 0)
            jr_buf_put(&q->body, ",", 1);
        put_one(&q->body, &ss->s[i], &st.v[i], now);
    }
    jr_buf_put(&q->body, "]}", 2);
    free(st.v);
    return 0;
}

/* GET /api/schedules, and a control of one schedule. apidb.h. */
int
jr_apidb_schedule(jr_db *db, jr_apireq *q, jr_err *e)
{
    double at = q->at;
    int rc;

    if (q->op == &jr_apiop_schedules)
        return sched_list(db, q, e);
    if ((rc = db->ops->sched_ctl(db->b, q->name, q->what, &at, e)) < 0)
        return -1;
    if (q->what == JR_SCHED_FIRE)
        q->status = 202;        /* a runner fires it within a second */
    jr_buf_put(&q->body, "{\"schedule\":", 12);
    jr_api_str(&q->body, q->name);
    jr_api_printf(&q->body, ",\"%s\":%s", q->what == JR_SCHED_FIRE ?
                  "asked" : "changed", rc > 0 ? "true" : "false");
    if (q->what == JR_SCHED_FIRE)
        jr_api_printf(&q->body, ",\"at\":%.3f", at);
    else
        jr_api_printf(&q->body, ",\"paused\":%s", q->what ==
                      JR_SCHED_PAUSE ? "true" : "false");
    jr_buf_put(&q->body, "}", 1);
    return 0;
}

static void
limit_set(jr_buf *b, const char *key, const jr_limit_set *s)
{
    jr_api_printf(b, ",\"%s\":{\"concurrency\":%d,\"rate\":", key,
                  s->concurrency);
    jr_api_str(b, s->rate > 0 ? s->rate_text : NULL);
    jr_api_printf(b, ",\"per_second\":%.6g,\"burst\":%.6g}",
                  s->rate > 0 ? s->rate : 0, s->rate > 0 ? s->burst : 0);
}

/* Each limit of the config with its use now (as `jobrunner limits
 * --json`): running and waiting jobs, tokens, the busiest keys. */
int
jr_apidb_limits(jr_db *db, jr_apireq *q, jr_err *e)
{
    jr_buf *b = &q->body;
    jr_limit_use u;

    jr_buf_put(b, "[", 1);
    for (int i = 0; i < q->nlimits; i++) {
        const jr_limit *l = &q->limits[i];
        if (db->ops->limit_use(db->b, l, &u, e) < 0)
            return -1;
        jr_buf_put(b, i ? ",{\"name\":" : "{\"name\":", i ? 9 : 8);
        jr_api_str(b, l->scope);
        jr_buf_put(b, ",\"key\":", 7);
        jr_api_str(b, l->key_path);
        limit_set(b, "limit", &l->all);
        limit_set(b, "per_key", &l->per_key);
        jr_api_printf(b, ",\"running\":%ld,\"waiting\":%ld,\"tokens\":",
                      u.running, u.waiting);
        if (u.tokens >= 0)
            jr_api_printf(b, "%.3f", u.tokens);
        else
            jr_buf_put(b, "null", 4);
        jr_buf_put(b, ",\"top_keys\":[", 13);
        for (int k = 0; k < u.ntop; k++) {
            jr_buf_put(b, k ? ",{\"key\":" : "{\"key\":", k ? 8 : 7);
            jr_api_str(b, u.top_key[k]);
            jr_api_printf(b, ",\"waiting\":%ld,\"running\":%ld,"
                          "\"tokens\":", u.top_waiting[k], u.top_running[k]);
            if (u.top_tokens[k] >= 0)
                jr_api_printf(b, "%.3f}", u.top_tokens[k]);
            else
                jr_buf_put(b, "null}", 5);
        }
        jr_buf_put(b, "]}", 2);
    }
    jr_buf_put(b, "]", 1);
    return 0;
}

static int
add_id(const jr_job_row *r, void *arg)
{
    jr_apireq *q = arg;

    q->ids[q->nids++] = r->id;
    return 0;
}

/* A bulk action: the filter's jobs a page of JR_BULK_ROWS at a time
 * (newest first, by keyset), each page acted on in one call, one
 * transaction; counted. After a page it waits as long as the page took
 * (0.2 s at most), so that the other writers get in (SQLite has one write
 * lock), and it ends there when the server stops (503, with the count so
 * far). Retry and purge touch dead jobs only: without a state they select
 * the dead ones. */
int
jr_apidb_bulk(jr_db *db, jr_apireq *q, jr_list_filter *f, jr_err *e)
{
    static const char *const word[] = {"", "cancelled", "cancel_requested",
                                       "finished", "not_found"};
    long matched = 0, n[5] = {0};
    int out[JR_API_IDS_MAX], r;
    double t0, d;

    if (q->op != &jr_apiop_bulk_cancel && f->state == NULL)
        f->state = "dead";
    f->limit = JR_BULK_ROWS;
    f->after_id = 0;
    for (;;) {
        t0 = jr_mono();
        q->nids = 0;
        if (db->ops->list(db->b, f, add_id, q, e) < 0)
            return -1;
        if (q->nids == 0)
            break;
        matched += q->nids;
        f->before_id = q->ids[q->nids - 1];
        r = q->op == &jr_apiop_bulk_cancel ?
            db->ops->cancel(db->b, q->ids, q->nids, out, e) :
            q->op == &jr_apiop_bulk_retry ?
            db->ops->dead_retry(db->b, q->ids, q->nids, e) :
            db->ops->dead_delete(db->b, q->ids, q->nids, e);
        if (r < 0)
            return -1;
        for (int i = 0; q->op == &jr_apiop_bulk_cancel && i < q->nids; i++)
            n[out[i] >= 1 && out[i] <= 4 ? out[i] : 0]++;
        n[0] += q->op == &jr_apiop_bulk_cancel ? 0 : r;
        if (q->nids < JR_BULK_ROWS)
            break;
        if (atomic_load(&q->stop))
            return jr_fail(e, JR_EDB, "the runner is stopping: %ld jobs "
                           "matched so far, %ld %s", matched,
                           q->op == &jr_apiop_bulk_cancel ? n[1] + n[2] :
                           n[0], q->op == &jr_apiop_bulk_cancel ?
                           "cancelled or cancel requested" : q->op ==
                           &jr_apiop_bulk_retry ? "retried" : "purged");
        d = jr_mono() - t0;
        d = d > 0.2 ? 0.2 : d;
        nanosleep(&(struct timespec){0, (long)(d * 1e9)}, NULL);
    }
    jr_api_printf(&q->body, "{\"matched\":%ld", matched);
    if (q->op != &jr_apiop_bulk_cancel)
        jr_api_printf(&q->body, ",\"%s\":%ld}", q->op ==
                      &jr_apiop_bulk_retry ? "retried" : "purged", n[0]);
    for (int i = 1; q->op == &jr_apiop_bulk_cancel && i <= 4; i++)
        jr_api_printf(&q->body, ",\"%s\":%ld%s", word[i], n[i],
                      i == 4 ? "}" : "");
    return 0;
}

/* --- a queue's pause and resume, a dead job's retry and purge --- */

static int
pause_queue(jr_db *db, jr_apireq *q, int paused, jr_err *e)
{
    if ((paused ? db->ops->pause : db->ops->resume)(db->b, q->queue, e) < 0)
        return -1;
    jr_buf_put(&q->body, "{\"queue\":", 9);
    jr_api_str(&q->body, q->queue);
    jr_api_printf(&q->body, ",\"paused\":%s}", paused ? "true" : "false");
    return 0;
}

int
jr_apidb_pause(jr_db *db, jr_apireq *q, jr_err *e)
{
    return pause_queue(db, q, 1, e);
}

int
jr_apidb_resume(jr_db *db, jr_apireq *q, jr_err *e)
{
    return pause_queue(db, q, 0, e);
}

int
jr_apidb_retry(jr_db *db, jr_apireq *q, jr_err *e)
{
    int n = db->ops->dead_retry(db->b, q->ids, q->nids, e);

    if (n < 0)
        return -1;
    jr_api_printf(&q->body, "{\"retried\":%d}", n);
    return 0;
}

int
jr_apidb_purge(jr_db *db, jr_apireq *q, jr_err *e)
{
    int n = q->nids > 0 ? db->ops->dead_delete(db->b, q->ids, q->nids, e) :
            db->ops->dead_purge(db->b, q->older_than, e);

    if (n < 0)
        return -1;
    jr_api_printf(&q->body, "{\"purged\":%d}", n);
    return 0;
}
