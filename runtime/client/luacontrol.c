/* luacontrol.c - the producer module's control methods (luaclient.c has
 * the module and pushes): q:cancel, q:show, q:list, q:pause, q:resume and
 * q:queues, q:wait, q:signal over the C library's jr_client_cancel,
 * _show, _list, _queue_pause, _queue_resume, _queue_list, _wait and
 * _signal. Uses luaclient.h,
 * jobrunner.h, json.h (util.h's buffer). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>
#include <lua.h>

#include "base/job.h"
#include "client/jobrunner.h"
#include "lua/json.h"
#include "lua/jsondec.h"
#include "client/luaclient.h"

/* --- control: cancel, show, list ------------------------------------------ */

/* q:cancel(id, ...) -> {outcome, ...} | nil, msg. One outcome per id, in
 * order: "cancelled" (it will never run), "requested" (running: its
 * runner stops it), "finished" (already completed, dead or cancelled:
 * nothing changed) or "notfound". */
int
jr_luaclient_cancel(lua_State *L)                          /* q id... */
{
    static const char *const names[] = {"?", "cancelled", "requested",
                                         "finished", "notfound"};
    jr_client *c = jr_luaclient_check(L);
    int n = lua_gettop(L) - 1, i;
    int64_t *ids;
    int *out;

    luaL_argcheck(L, n >= 1, 2, "give one or more job ids");
    ids = lua_newuserdatauv(L, (size_t)n * (sizeof *ids + sizeof *out), 0);
    out = (int *)(ids + n);                          /* q id... mem */
    for (i = 0; i < n; i++)
        ids[i] = (int64_t)luaL_checkinteger(L, i + 2);
    if (jr_client_cancel(c, ids, (size_t)n, out) != JR_CLIENT_OK)
        return jr_luaclient_fail(L, jr_client_errmsg(c));
    lua_createtable(L, n, 0);                        /* q id... mem t */
    for (i = 0; i < n; i++) {
        lua_pushstring(L, names[out[i] >= 1 && out[i] <= 4 ? out[i] : 0]);
        lua_rawseti(L, -2, i + 1);                   /* q id... mem t */
    }
    return 1;
}

/* One job as the database call copies it (it must not raise): the info
 * (its strings unused), then each string's length (JOB_NULL for NULL)
 * and bytes. */
enum { S_NAME, S_QUEUE, S_STATE, S_PAYLOAD, S_ERROR, S_GEN, S_LOCKED,
       S_UKEY, S_NOTE, S_KEY, S_RESULT, S_STEPS, NSTR };
#define JOB_NULL ((size_t)-1)

/* After the job: each failed attempt (the info, then its error, runner
 * and generation as the job's strings are). Returns 1 when out of
 * memory. */
static int
history_collect(const jr_client_job_info *j, jr_buf *b)
{
    size_t len;
    int i, k;

    for (i = 0; i < j->nhistory; i++) {
        const jr_client_attempt *a = &j->history[i];
        const char *str[3] = {a->error, a->runner, a->generation};
        if (jr_buf_put(b, a, sizeof *a) < 0)
            return 1;
        for (k = 0; k < 3; k++) {
            len = str[k] ? strlen(str[k]) : JOB_NULL;
            if (jr_buf_put(b, &len, sizeof len) < 0 ||
                (str[k] && jr_buf_put(b, str[k], len) < 0))
                return 1;
        }
    }
    return 0;
}

static int
job_collect(const jr_client_job_info *j, void *arg)
{
    const char *str[NSTR] = {j->name, j->queue, j->state, j->payload,
        j->last_error, j->generation, j->locked_by, j->unique_key,
        j->progress_note, j->limit_key, j->result, j->steps};
    jr_buf *b = arg;
    size_t len;
    int i;

    if (jr_buf_put(b, j, sizeof *j) < 0)
        return 1;
    for (i = 0; i < NSTR; i++) {
        len = str[i] ? strlen(str[i]) : JOB_NULL;
        if (jr_buf_put(b, &len, sizeof len) < 0 ||
            (str[i] && jr_buf_put(b, str[i], len) < 0))
            return 1;           /* b->oom tells the caller */
    }
    return history_collect(j, b);
}

/* Sets t[key] = v for the table on top; nothing when v is 0 (not set).
 * [-0, +0, m] */
static void
set_num(lua_State *L, const char *key, double v)
{
    if (v == 0 || v != v)
        return;
    lua_pushnumber(L, v);                            /* t v */
    lua_setfield(L, -2, key);                        /* t */
}

static void
set_int(lua_State *L, const char *key, lua_Integer v)
{
    lua_pushinteger(L, v);                           /* t v */
    lua_setfield(L, -2, key);                        /* t */
}

/* The progress fields of j as t.progress = {done, total, note} (total
 * absent when unknown); nothing when never reported.  [-0, +0, m] */
static void
set_progress(lua_State *L, const jr_client_job_info *j, const char *note,
             size_t len)
{
    if (j->progress_done != j->progress_done && note == NULL)
        return;
    lua_createtable(L, 0, 3);                        /* t p */
    set_num(L, "done", j->progress_done);
    if (j->progress_done == 0)
        set_int(L, "done", 0);
    set_num(L, "total", j->progress_total);
    if (note != NULL) {
        lua_pushlstring(L, note, len);               /* t p note */
        lua_setfield(L, -2, "note");                 /* t p */
    }
    lua_setfield(L, -2, "progress");                 /* t */
}

/* Sets t.attempts to the n failed attempts copied at b->p + *at
 * (history_collect), oldest first, and moves *at past them.
 * [-0, +0, m] */
static void
set_history(lua_State *L, const jr_buf *b, size_t *at, int n)
{
    static const char *const keys[3] = {"error", "runner", "generation"};
    jr_client_attempt a;
    size_t len;
    int i, k;

    lua_createtable(L, n, 0);                        /* t h */
    for (i = 0; i < n; i++) {
        memcpy(&a, b->p + *at, sizeof a);
        *at += sizeof a;
        lua_createtable(L, 0, 7);                    /* t h e */
        set_int(L, "attempt", a.attempt);
        set_num(L, "at", a.at);
        set_num(L, "duration", a.duration);
        if (a.worker > 0)
            set_int(L, "worker", a.worker);
        for (k = 0; k < 3; k++) {
            memcpy(&len, b->p + *at, sizeof len);
            *at += sizeof len;
            if (len == JOB_NULL)
                continue;
            lua_pushlstring(L, b->p + *at, len);     /* t h e s */
            lua_setfield(L, -2, keys[k]);            /* t h e */
            *at += len;
        }
        lua_rawseti(L, -2, i + 1);                   /* t h */
    }
    lua_setfield(L, -2, "attempts");                 /* t */
}

/* Pushes the job copied at b->p + *at as a table and moves *at past it;
 * full (show): with its attempt history, t.attempts. [-0, +1, m] */
static void
push_job(lua_State *L, const jr_buf *b, size_t *at, int full)
{
    static const char *const keys[NSTR] = {"name", "queue", "state",
        "payload", "last_error", "generation", "locked_by", "unique_key",
        NULL, "key", "result", NULL};
    jr_client_job_info j;
    const char *note = NULL;
    char msg[128];
    size_t len, nlen = 0;
    int i;

    memcpy(&j, b->p + *at, sizeof j);
    *at += sizeof j;
    lua_createtable(L, 0, 20);                       /* t */
    set_int(L, "id", (lua_Integer)j.id);
    for (i = 0; i < NSTR; i++) {
        memcpy(&len, b->p + *at, sizeof len);
        *at += sizeof len;
        if (len == JOB_NULL)
            continue;
        if (i == S_STEPS) {         /* decoded; text the runner wrote */
            if (jr_json_decode(L, b->p + *at, len, msg, sizeof msg) == 0)
                lua_setfield(L, -2, "steps");        /* t */
        } else if (keys[i] == NULL) {
            note = b->p + *at;
            nlen = len;
        } else {
            lua_pushlstring(L, b->p + *at, len);     /* t s */
            lua_setfield(L, -2, keys[i]);            /* t */
        }
        *at += len;
    }
    set_int(L, "attempt", j.attempts);
    if (j.max_retries != JR_CLIENT_UNSET)
        set_int(L, "max_retries", j.max_retries);
    set_int(L, "priority", j.priority);
    set_num(L, "run_at", j.run_at);
    set_num(L, "created_at", j.created_at);
    set_num(L, "started_at", j.started_at);
    set_num(L, "finished_at", j.finished_at);
    set_num(L, "keep_until", j.keep_until);
    if (j.sql_statements > 0)
        set_int(L, "sql_statements", j.sql_statements);
    set_num(L, "expires_at", j.expires_at);
    set_num(L, "deadline", j.deadline);
    set_num(L, "deadline_at", j.deadline_at);
    if (j.cost > 0)
        set_int(L, "cost", j.cost);
    lua_pushboolean(L, j.cancel_requested);          /* t b */
    lua_setfield(L, -2, "cancel_requested");         /* t */
    set_progress(L, &j, note, nlen);
    if (full)
        set_history(L, b, at, j.nhistory);
}

/* q:show(id) -> {id, name, queue, state, payload (JSON text), attempt,
 * max_retries, priority, run_at, created_at, started_at, finished_at,
 * last_error, generation, locked_by, unique_key, cancel_requested,
 * progress, key, result (JSON text), keep_until, sql_statements,
 * expires_at, deadline, deadline_at (each nil when not set),
 * attempts, steps} |
 * nil, msg (also for an unknown id). Times are epoch seconds; fields not
 * set are absent. attempts: the failed attempts, oldest first, each
 * {attempt, error, at, duration, runner, worker, generation}. steps:
 * its steps' records in order, each {name, value (a step that returned)
 * or cursor (its last checkpoint), at, secs, attempt}, decoded; absent
 * when none. */
int
jr_luaclient_show(lua_State *L)                            /* q id */
{
    jr_client *c = jr_luaclient_check(L);
    int64_t id = (int64_t)luaL_checkinteger(L, 2);
    jr_buf *b = jr_json_buf_new(L);                  /* q id b */
    size_t at = 0;

    if (jr_client_show(c, id, job_collect, b) != JR_CLIENT_OK)
        return jr_luaclient_fail(L, jr_client_errmsg(c));
    if (b->oom)
        return jr_luaclient_fail(L, "show: out of memory");
    push_job(L, b, &at, 1);                          /* q id b t */
    return 1;
}

/* q:list{state=, name=, queue=, limit=} -> {job, ...} newest first, as
 * show gives them without payload | nil, msg (a bad filter says why). */
int
jr_luaclient_list(lua_State *L)                            /* q f? */
{
    jr_client *c = jr_luaclient_check(L);
    jr_client_filter f = {0};
    lua_Integer limit;
    size_t at = 0;
    jr_buf *b;
    int n = 0;

    if (!lua_isnoneornil(L, 2)) {
        luaL_checktype(L, 2, LUA_TTABLE);
        lua_getfield(L, 2, "state");                 /* q f v */
        f.state = luaL_optstring(L, -1, NULL);       /* anchored in f */
        lua_getfield(L, 2, "name");                  /* q f v v */
        f.name = luaL_optstring(L, -1, NULL);
        lua_getfield(L, 2, "queue");                 /* q f v v v */
        f.queue = luaL_optstring(L, -1, NULL);
        lua_getfield(L, 2, "limit");                 /* q f v v v v */
        limit = luaL_optinteger(L, -1, 0);
        luaL_argcheck(L, limit >= 0 && limit <= 1000000000, 2,
                      "limit must be 0 (all) to 1000000000");
        f.limit = (int)limit;
    }
    b = jr_json_buf_new(L);                          /* .. b */
    if (jr_client_list(c, &f, job_collect, b) != JR_CLIENT_OK)
        return jr_luaclient_fail(L, jr_client_errmsg(c));
    if (b->oom)
        return jr_luaclient_fail(L, "list: out of memory");
    lua_newtable(L);                                 /* .. b t */
    while (at < b->len) {
        push_job(L, b, &at, 0);                      /* .. b t job */
        lua_rawseti(L, -2, ++n);                     /* .. b t */
    }
    return 1;
}

/* q:pause(queue) / q:resume(queue) -> true | nil, msg */
static int
client_pause_resume(lua_State *L, int pause)         /* q queue */
{
    jr_client *c = jr_luaclient_check(L);
    const char *queue = luaL_checkstring(L, 2);

    if ((pause ? jr_client_queue_pause(c, queue) :
         jr_client_queue_resume(c, queue)) != JR_CLIENT_OK)
        return jr_luaclient_fail(L, jr_client_errmsg(c));
    lua_pushboolean(L, 1);                           /* q queue true */
    return 1;
}

int
jr_luaclient_pause(lua_State *L)
{
    return client_pause_resume(L, 1);
}

int
jr_luaclient_resume(lua_State *L)
{
    return client_pause_resume(L, 0);
}

/* q:schedule_pause(name) / q:schedule_resume(name) -> true | nil, msg
 * (docs/schedules.md, "Pause, resume, fire now") */
static int
client_schedule(lua_State *L, int pause)             /* q name */
{
    jr_client *c = jr_luaclient_check(L);
    jr_err err;
    const char *name = jr_luaclient_schedule_name(L, 2, &err);

    if (name == NULL)
        return jr_luaclient_fail(L, err.msg);
    if ((pause ? jr_client_schedule_pause(c, name) :
         jr_client_schedule_resume(c, name)) != JR_CLIENT_OK)
        return jr_luaclient_fail(L, jr_client_errmsg(c));
    lua_pushboolean(L, 1);                           /* q name true */
    return 1;
}

int
jr_luaclient_schedule_pause(lua_State *L)
{
    return client_schedule(L, 1);
}

int
jr_luaclient_schedule_resume(lua_State *L)
{
    return client_schedule(L, 0);
}

/* q:schedule_fire(name [, at]) -> at | nil, msg: asks the runners for a
 * fire of schedule name at instant at (epoch seconds; default: the
 * database's current second), returned; asks for one instant make one
 * job. */
int
jr_luaclient_schedule_fire(lua_State *L)             /* q name [at] */
{
    jr_client *c = jr_luaclient_check(L);
    jr_err err;
    const char *name = jr_luaclient_schedule_name(L, 2, &err);
    double at = luaL_optnumber(L, 3, 0);

    if (name == NULL)
        return jr_luaclient_fail(L, err.msg);
    luaL_argcheck(L, at >= 0 && at <= 253402300799.0, 3,
                  "at must be epoch seconds");
    if (jr_client_schedule_fire(c, name, &at) != JR_CLIENT_OK)
        return jr_luaclient_fail(L, jr_client_errmsg(c));
    lua_pushnumber(L, at);                           /* q name [at] at */
    return 1;
}

typedef struct queue_rec {      /* one queue in the buffer; name follows */
    jr_client_queue q;          /* q.name is not used */
    size_t          len;
} queue_rec;

/* Runs inside the database call, so it must not raise: it only copies. */
static int
queues_collect(const jr_client_queue *q, void *arg)
{
    jr_buf *b = arg;
    queue_rec r;

    r.q = *q;
    r.len = strlen(q->name);
    if (jr_buf_put(b, &r, sizeof r) < 0 || jr_buf_put(b, q->name, r.len) < 0)
        return 1;               /* b->oom tells client_queues */
    return 0;
}

/* Sets name = v for the counts of q in the table on top. [-0, +0, m] */
static void
set_queue_fields(lua_State *L, const jr_client_queue *q)
{
    const long v[] = {q->ready, q->scheduled, q->running, q->dead,
                      q->cancelled, q->completed};  /* from JR_STATE_READY */
    size_t i;

    for (i = 0; i < sizeof v / sizeof v[0]; i++) {
        lua_pushinteger(L, v[i]);                    /* t v */
        lua_setfield(L, -2, jr_state_name(JR_STATE_READY + (int)i));
    }                                                /* t */
    lua_pushboolean(L, q->paused);                   /* t b */
    lua_setfield(L, -2, "paused");                   /* t */
    if (q->paused) {
        lua_pushnumber(L, q->paused_at);             /* t at */
        lua_setfield(L, -2, "paused_at");            /* t */
    }
}

/* q:queues() -> { {name, paused, paused_at, ready, scheduled, running,
 *                  dead, cancelled, completed}, ... } by name | nil, msg */
int
jr_luaclient_queues(lua_State *L)                          /* q */
{
    jr_client *c = jr_luaclient_check(L);
    size_t at = 0;
    int n = 0;
    jr_buf *b = jr_json_buf_new(L);                  /* q b */

    if (jr_client_queue_list(c, queues_collect, b) != JR_CLIENT_OK)
        return jr_luaclient_fail(L, jr_client_errmsg(c));
    if (b->oom)
        return jr_luaclient_fail(L, "queues: out of memory");
    lua_newtable(L);                                 /* q b list */
    while (at < b->len) {
        queue_rec r;
        memcpy(&r, b->p + at, sizeof r);
        at += sizeof r;
        lua_createtable(L, 0, 10);                   /* q b list t */
        lua_pushlstring(L, b->p + at, r.len);        /* q b list t name */
        lua_setfield(L, -2, "name");                 /* q b list t */
        at += r.len;
        set_queue_fields(L, &r.q);
        lua_rawseti(L, -2, ++n);                     /* q b list */
    }
    return 1;
}


/* --- wait ------------------------------------------------------------------ */

/* Sets t.result (decoded by jsondec.c: integers exact) and t.result_json
 * from the JSON text json; nothing when NULL. Text that does not decode
 * (a plain SQL update may have stored it) leaves result_json only.
 * [-0, +0, m] */
static void
set_result(lua_State *L, const char *json)
{
    char why[200];

    if (json == NULL)
        return;
    lua_pushstring(L, json);                         /* t s */
    lua_setfield(L, -2, "result_json");              /* t */
    if (jr_json_decode(L, json, strlen(json), why, sizeof why) < 0)
        return;                                      /* t */
    lua_setfield(L, -2, "result");                   /* t */
}

/* Reads the ids at 2 (an id or a list of ids) into a new userdata on top
 * (freed by the GC); *n gets how many.  [-0, +1, v] */
static int64_t *
wait_ids(lua_State *L, size_t *n)
{
    int64_t *ids;
    size_t i;
    int isint;

    if (lua_type(L, 2) == LUA_TNUMBER) {             /* 7 or 7.0 */
        ids = lua_newuserdatauv(L, sizeof *ids, 0);
        ids[0] = (int64_t)lua_tointegerx(L, 2, &isint);
        if (!isint)
            luaL_argerror(L, 2, "not an integer job id");
        *n = 1;
        return ids;
    }
    if (lua_type(L, 2) != LUA_TTABLE)
        luaL_typeerror(L, 2, "job id or list of job ids");
    *n = lua_rawlen(L, 2);
    if (*n == 0 || *n > 100000)
        luaL_error(L, "wait: give 1 to 100000 job ids, got %d", (int)*n);
    ids = lua_newuserdatauv(L, *n * sizeof *ids, 0);
    for (i = 0; i < *n; i++) {
        lua_rawgeti(L, 2, (lua_Integer)i + 1);       /* ... u id */
        ids[i] = (int64_t)lua_tointegerx(L, -1, &isint);
        if (!isint || lua_type(L, -1) != LUA_TNUMBER)
            luaL_error(L, "wait: ids[%d] is not an integer job id",
                       (int)i + 1);
        lua_pop(L, 1);
    }
    return ids;
}

/* The timeout of the options at 3 (nil: none).  [-0, +0, v] */
static double
wait_timeout(lua_State *L)
{
    double t = 0;

    if (lua_isnoneornil(L, 3))
        return 0;
    luaL_checktype(L, 3, LUA_TTABLE);
    lua_pushnil(L);
    while (lua_next(L, 3) != 0) {
        if (lua_type(L, -2) != LUA_TSTRING ||
            strcmp(lua_tostring(L, -2), "timeout") != 0)
            luaL_error(L, "wait: unknown option '%s' (valid: timeout)",
                       lua_type(L, -2) == LUA_TSTRING ?
                       lua_tostring(L, -2) : luaL_typename(L, -2));
        if (!lua_isnumber(L, -1) || !((t = lua_tonumber(L, -1)) >= 0) ||
            t > 1e9)
            luaL_error(L, "wait: option 'timeout' must be seconds "
                       "(0 to 1e9), got %s", luaL_tolstring(L, -1, NULL));
        lua_pop(L, 1);
    }
    return t;
}

/* q:wait(ids, {timeout = s}) -> outcomes | nil, msg[, outcomes]: ids is
 * an id or a list of ids; each outcome is {id, state, result (decoded),
 * result_json, error}, in the order of ids, once every job has ended
 * (completed, dead, cancelled, or gone: no row, outcome unknown). At the
 * timeout: nil, the message, and the outcomes so far. */
int
jr_luaclient_wait(lua_State *L)                      /* q ids opts? */
{
    jr_client *c = jr_luaclient_check(L);
    jr_client_outcome *out;
    double timeout = wait_timeout(L);
    int64_t *ids;
    size_t n, i;
    int rc;

    ids = wait_ids(L, &n);                           /* q ids opts? u */
    out = lua_newuserdatauv(L, n * sizeof *out, 0);  /* ... u o */
    rc = jr_client_wait(c, ids, n, timeout, out);
    if (rc != JR_CLIENT_OK && rc != JR_CLIENT_ETIMEOUT)
        return jr_luaclient_fail(L, jr_client_errmsg(c));
    lua_createtable(L, (int)n, 0);                   /* ... list */
    for (i = 0; i < n; i++) {
        lua_createtable(L, 0, 5);                    /* ... list t */
        set_int(L, "id", (lua_Integer)out[i].id);
        lua_pushstring(L, out[i].state);
        lua_setfield(L, -2, "state");
        if (out[i].error != NULL) {
            lua_pushstring(L, out[i].error);
            lua_setfield(L, -2, "error");
        }
        set_result(L, out[i].result);
        lua_rawseti(L, -2, (lua_Integer)i + 1);      /* ... list */
    }
    if (rc == JR_CLIENT_OK)
        return 1;
    lua_pushnil(L);                                  /* ... list nil */
    lua_pushstring(L, jr_client_errmsg(c));          /* ... list nil msg */
    lua_rotate(L, -3, 2);                            /* ... nil msg list */
    return 3;
}

/* q:signal(id, name [, payload]) -> true (the job waited for it and is
 * ready now) | false (kept for its wait_signal) | nil, msg (refused:
 * no such job, a finished job, a signal sent already or timed out).
 * [-0, +(1|2), v] */
int
jr_luaclient_signal(lua_State *L)               /* q id name payload */
{
    jr_client *c = jr_luaclient_check(L);
    lua_Integer id = luaL_checkinteger(L, 2);
    size_t len;
    const char *name = luaL_checklstring(L, 3, &len);
    char msg[400];
    int woken = 0;
    jr_buf *b;
    jr_err err;

    if (jr_name_check_len(name, len, "signal name", &err) < 0)
        return jr_luaclient_fail(L, err.msg);   /* a \0 inside: not cut */
    lua_settop(L, 4);                           /* q id name payload */
    b = jr_json_buf_new(L);                     /* q id name payload b */
    if (jr_json_encode(L, 4, b, msg, sizeof msg) < 0)
        return jr_luaclient_fail(L, lua_pushfstring(L, "signal '%s': %s",
                                                    name, msg));
    if (jr_client_signal(c, (int64_t)id, name, b->p, &woken) !=
        JR_CLIENT_OK)
        return jr_luaclient_fail(L, jr_client_errmsg(c));
    lua_pushboolean(L, woken);                  /* .. b woken */
    return 1;
}
