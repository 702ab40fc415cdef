/* apidbsched.c - the HTTP API's schedules and limits: GET /api/schedules
 * (each schedule with its state and next fires), the controls of one
 * schedule (POST /api/schedules/NAME/{pause,resume,fire}) and GET
 * /api/limits (each limit's use, its busiest keys). Each route (checked
 * in the loop), the operation it asks and the operation's run function on
 * the database thread. Uses apiroute.h, apidb.h, backend.h, cron.h,
 * schedules.h, limit.h, config.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <math.h>

#include "http/apiroute.h"
#include "http/apidb.h"
#include "backend.h"
#include "base/cron.h"
#include "base/limit.h"
#include "config/config.h"
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
    jr_api_printf(b, ",\"source\":\"%s\",\"overlap\":\"%s\",\"jitter\":%g,"
                  "\"start_at\":", s->runtime ? "runtime" : "config",
                  jr_overlap_name(s->overlap), s->jitter);
    jr_api_time(b, s->start_at);
    jr_buf_put(b, ",\"end_at\":", 10);
    jr_api_time(b, s->end_at);
    jr_api_printf(b, ",\"priority\":%d,\"payload\":", s->priority);
    jr_buf_put(b, s->payload, strlen(s->payload));
    jr_buf_put(b, ",\"next\":[", 9);
    if (s->start_at > 0 && t < s->start_at)
        t = s->start_at - 0.001;        /* start_at itself may fire */
    for (i = 0; i < NEXT_SHOWN &&
         jr_cron_next(&s->cron, s->tz, t, &t) == 0 &&
         (s->end_at <= 0 || t <= s->end_at); i++)
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

/* A control of one schedule: pause, resume or fire (q->what). */
static int
sched_ctl(jr_db *db, jr_apireq *q, jr_err *e)
{
    double at = q->at;
    int rc;

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
static int
limits(jr_db *db, jr_apireq *q, jr_err *e)
{
    jr_buf *b = &q->body;
    jr_limit_use u;

    jr_buf_put(b, "[", 1);
    for (int i = 0; i < q->nlimits; i++) {
        const jr_limit *l = &q->limits[i];
        u.top = JR_LIMIT_TOP;
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

/* The operations (api.h): name; reader (the schedules' list reads, but
 * on the runner's connection; a limit's use counts every queued job of
 * its scope, a scan of them all: on the reads' own connection, which
 * neither holds up the runner's claims meanwhile nor plans with their
 * settings, seqscan and bitmapscan off, which made PostgreSQL sort
 * 100,000 rows on disk for the busiest keys); scope; run; the status of
 * JR_EINPUT (the fire of a paused schedule: 409). */
static const jr_apiop op_schedules = {"schedules", 0, JR_SCOPE_READ,
                                      sched_list, 0};
static const jr_apiop op_sched_ctl = {"sched_ctl", 0, JR_SCOPE_WRITE,
                                      sched_ctl, 409};
static const jr_apiop op_limits    = {"limits", 1, JR_SCOPE_READ, limits,
                                      0};

/* ---- the routes, in the loop ---- */

static void
r_limits(jr_apicall *c)
{
    jr_apireq *q = jr_api_req(c, &op_limits);

    if (q != NULL) {
        q->limits = c->host->cfg->limits.l;
        q->nlimits = c->host->cfg->limits.n;
        jr_api_ask(c, q);
    }
}

static void
r_schedules(jr_apicall *c)
{
    jr_apireq *q = jr_api_req(c, &op_schedules);

    if (q == NULL)
        return;
    /* a copy: a reload may replace the runner's while the read runs */
    if ((q->schedules = calloc(1, sizeof *q->schedules)) == NULL ||
        jr_schedules_copy(q->schedules,
                          c->host->schedules(c->host->runner)) < 0) {
        jr_http_error(c->req, 503, "out of memory");
        jr_apireq_free(q);
        return;
    }
    jr_api_ask(c, q);
}

/* POST /api/schedules/NAME/{pause,resume,fire}: a schedule of the
 * runner's config (404 otherwise); fire takes {"at": epoch seconds}. */
static void
r_sched(jr_apicall *c, int what)
{
    const jr_schedules *ss = c->host->schedules(c->host->runner);
    jr_apireq *q;
    jr_apibody b;
    int i;

    for (i = 0; i < ss->n && strcmp(ss->s[i].name, c->arg) != 0; i++)
        ;
    if (i == ss->n) {
        jr_http_error(c->req, 404, "no schedule '%.128s' in the runner's "
                      "config", c->arg);
        return;
    }
    if ((q = jr_api_with_body(c, &op_sched_ctl, &b)) == NULL)
        return;
    if ((what != JR_API_SCHED_FIRE && b.at > 0) ||
        (b.at > 0 && fabs(b.at - jr_now()) > 60)) {
        jr_http_error(c->req, 400, what != JR_API_SCHED_FIRE ? "'at' is for "
                      "fire only" : "'at' must be within 60 s of now");
        free(q);
        return;
    }
    memcpy(q->name, c->arg, strlen(c->arg) + 1);    /* <= 128: a name */
    q->what = what;
    q->at = b.at;
    jr_api_ask(c, q);
}

static void r_sched_pause(jr_apicall *c) { r_sched(c, JR_API_SCHED_PAUSE); }
static void r_sched_resume(jr_apicall *c) { r_sched(c, JR_API_SCHED_RESUME); }
static void r_sched_fire(jr_apicall *c) { r_sched(c, JR_API_SCHED_FIRE); }

const jr_apiroute jr_apiroutes_sched[] = {
    {"limits", 0, r_limits},
    {"schedules", 0, r_schedules},
    {"schedules/*/pause", 1, r_sched_pause},
    {"schedules/*/resume", 1, r_sched_resume},
    {"schedules/*/fire", 1, r_sched_fire},
    {NULL, 0, NULL}
};
