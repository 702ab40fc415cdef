/* frame.c - the codec of frames between master and workers: the typed
 * fields, a frame's length and type, and the job and result frames (the
 * control frames are framectl.c's). Every decoder is bounds-checked: a
 * frame comes from another process and is fuzzed. */
#include <stdlib.h>
#include <string.h>

#include "worker/frame.h"
#include "base/joblog.h"
#include "base/jsontext.h"
#include "base/trace.h"
#include "base/sqlstmt.h"

#define NULL_LEN 0xffffffffu    /* string length that encodes NULL */

static void
put_le(jr_buf *b, uint64_t v, int bytes)
{
    unsigned char tmp[8], *d = tmp;
    int i, room = !b->oom && b->cap - b->len >= (size_t)bytes;

    /* in place when the buffer has room (a job's frame is a dozen of
     * these, each a call of jr_buf_put before) */
    if (room)
        d = (unsigned char *)b->p + b->len;
    for (i = 0; i < bytes; i++)
        d[i] = (unsigned char)(v >> (8 * i));
    if (room)
        b->len += (size_t)bytes;
    else
        jr_buf_put(b, tmp, (size_t)bytes);
}

void jr_put_u8(jr_buf *b, unsigned v)  { put_le(b, v, 1); }
void jr_put_i32(jr_buf *b, int32_t v)  { put_le(b, (uint32_t)v, 4); }
void jr_put_i64(jr_buf *b, int64_t v)  { put_le(b, (uint64_t)v, 8); }

void
jr_put_f64(jr_buf *b, double v)
{
    uint64_t u;
    memcpy(&u, &v, sizeof u);
    put_le(b, u, 8);
}

void
jr_put_strn(jr_buf *b, const char *s, size_t n)
{
    if (s == NULL) {
        put_le(b, NULL_LEN, 4);
        return;
    }
    put_le(b, (uint32_t)n, 4);
    if (n > 0)
        jr_buf_put(b, s, n);
}

void
jr_put_str(jr_buf *b, const char *s)
{
    jr_put_strn(b, s, s ? strlen(s) : 0);
}

/* A handler's text (an error, a discard's reason, a progress note) as
 * jr_put_str, but each byte that is not UTF-8 as U+FFFD: PostgreSQL
 * refuses such text, and what reads either engine expects UTF-8. This is
 * where all of it leaves the worker for the database. */
static void
put_text(jr_buf *b, const char *s)
{
    static const char bad[] = "\xef\xbf\xbd";     /* U+FFFD */
    const unsigned char *u = (const unsigned char *)s;
    size_t n = s ? strlen(s) : 0, i, k, out = 0;

    for (i = 0; i < n; i += k ? k : 1) {
        k = jr_jsontext_utf8_len(u + i, n - i);
        out += k ? k : sizeof bad - 1;
    }
    if (out == n) {             /* all UTF-8 (or NULL) */
        jr_put_str(b, s);
        return;
    }
    put_le(b, out, 4);
    for (i = 0; i < n; i += k ? k : 1) {
        k = jr_jsontext_utf8_len(u + i, n - i);
        jr_buf_put(b, k ? (const char *)u + i : bad, k ? k : sizeof bad - 1);
    }
}

size_t
jr_frame_begin(jr_buf *b, int type)
{
    size_t start = b->len;
    put_le(b, 0, 4);
    jr_put_u8(b, (unsigned)type);
    return start;
}

void
jr_frame_end(jr_buf *b, size_t start)
{
    uint32_t n = (uint32_t)(b->len - start - 4);
    int i;

    if (b->oom)
        return;
    for (i = 0; i < 4; i++)
        b->p[start + (size_t)i] = (char)(n >> (8 * i));
}

static uint64_t
get_le(jr_reader *r, int bytes)
{
    const unsigned char *p = (const unsigned char *)r->p;
    uint64_t v = 0;
    int i;

    if (r->bad || r->n < (size_t)bytes) {
        r->bad = 1;
        return 0;
    }
    for (i = 0; i < bytes; i++)
        v |= (uint64_t)p[i] << (8 * i);
    r->p += bytes;
    r->n -= (size_t)bytes;
    return v;
}

unsigned jr_get_u8(jr_reader *r)   { return (unsigned)get_le(r, 1); }
int32_t  jr_get_i32(jr_reader *r)  { return (int32_t)(uint32_t)get_le(r, 4); }
int64_t  jr_get_i64(jr_reader *r)  { return (int64_t)get_le(r, 8); }

double
jr_get_f64(jr_reader *r)
{
    uint64_t u = get_le(r, 8);
    double v;
    memcpy(&v, &u, sizeof v);
    return v;
}

const char *
jr_get_str(jr_reader *r, size_t *len)
{
    uint32_t n = (uint32_t)get_le(r, 4);
    const char *s;

    *len = 0;
    if (r->bad || n == NULL_LEN)
        return NULL;
    if (r->n < n) {
        r->bad = 1;
        return NULL;
    }
    s = r->p;
    r->p += n;
    r->n -= n;
    *len = n;
    return s;
}

long
jr_frame_complete(const char *data, size_t n, jr_err *err)
{
    const unsigned char *p = (const unsigned char *)data;
    uint32_t len;

    if (n < 4)
        return 0;
    len = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
          (uint32_t)p[3] << 24;
    if (len < 1 || len > JR_FRAME_MAX)
        return jr_fail(err, JR_EPROTO, "frame of %lu bytes (at most %u)",
                       (unsigned long)len, JR_FRAME_MAX);
    return n - 4 >= len ? (long)len + 4 : 0;
}

int
jr_frame_open(jr_reader *r, const char *data)
{
    const unsigned char *p = (const unsigned char *)data;
    uint32_t len = (uint32_t)p[0] | (uint32_t)p[1] << 8 |
                   (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;

    r->p = data + 5;
    r->n = len - 1;
    r->bad = 0;
    return p[4];
}

void
jr_frame_put_job(jr_buf *b, const jr_job *j)
{
    size_t start = jr_frame_begin(b, JR_F_JOB);

    jr_put_i64(b, j->id);
    jr_put_i32(b, j->attempt);
    jr_put_i32(b, j->max_retries);
    jr_put_i32(b, j->priority);
    jr_put_f64(b, j->run_at);
    jr_put_f64(b, j->created_at);
    jr_put_str(b, j->name);
    jr_put_str(b, j->queue);
    jr_put_strn(b, j->payload, j->payload_len);
    jr_put_str(b, j->parents);
    jr_put_i64(b, j->batch);
    jr_put_str(b, j->steps);
    jr_put_str(b, j->waits);
    jr_put_str(b, j->trace);
    jr_put_str(b, j->key);
    jr_put_u8(b, j->deletable != 0);
    jr_frame_end(b, start);
}

/* Copies a string of the body into the arena, NUL-terminated. */
static const char *
arena_str(jr_reader *r, char **arena)
{
    size_t n;
    const char *s = jr_get_str(r, &n);
    char *d = *arena;

    if (s == NULL)
        return NULL;
    memcpy(d, s, n);
    d[n] = '\0';
    *arena += n + 1;
    return d;
}

static int
has_nul(const char *s, size_t n)
{
    return s != NULL && memchr(s, '\0', n) != NULL;
}

jr_job *
jr_frame_get_job(jr_reader *r, jr_err *err)
{
    int64_t id = jr_get_i64(r);
    int32_t attempt = jr_get_i32(r), max_retries = jr_get_i32(r);
    int32_t priority = jr_get_i32(r);
    double run_at = jr_get_f64(r), created_at = jr_get_f64(r);
    size_t ln, lq, lp;
    const char *name = jr_get_str(r, &ln), *queue = jr_get_str(r, &lq);
    const char *payload = jr_get_str(r, &lp);
    size_t lpar;
    const char *parents = jr_get_str(r, &lpar);
    int64_t batch = jr_get_i64(r);
    size_t lst, lw;
    const char *steps = jr_get_str(r, &lst);
    const char *waits = jr_get_str(r, &lw);
    size_t lt, lk;
    const char *trace = jr_get_str(r, &lt);
    const char *key = jr_get_str(r, &lk);
    int deletable = jr_get_u8(r) == 1;
    char nbuf[129], qbuf[129], *pbuf = NULL, *sbuf = NULL, *wbuf = NULL;
    char tbuf[JR_TRACEPARENT_LEN + JR_TRACESTATE_MAX + 2];
    char kbuf[JR_KEY_MAX + 1];
    jr_job *j;

    if (r->bad || name == NULL || queue == NULL || payload == NULL ||
        ln > 128 || lq > 128 || has_nul(name, ln) || has_nul(queue, lq)) {
        jr_fail(err, JR_EPROTO, "malformed job frame");
        return NULL;
    }
    memcpy(nbuf, name, ln);
    nbuf[ln] = '\0';
    memcpy(qbuf, queue, lq);
    qbuf[lq] = '\0';
    if (parents != NULL && (has_nul(parents, lpar) ||
                            (pbuf = strndup(parents, lpar)) == NULL)) {
        jr_fail(err, JR_EPROTO, "malformed job frame (parents)");
        return NULL;
    }
    if (steps != NULL && (has_nul(steps, lst) ||
                          (sbuf = strndup(steps, lst)) == NULL)) {
        free(pbuf);
        jr_fail(err, JR_EPROTO, "malformed job frame (steps)");
        return NULL;
    }
    if (waits != NULL && (has_nul(waits, lw) ||
                          (wbuf = strndup(waits, lw)) == NULL)) {
        free(pbuf);
        free(sbuf);
        jr_fail(err, JR_EPROTO, "malformed job frame (waits)");
        return NULL;
    }
    if ((trace != NULL && (lt >= sizeof tbuf || has_nul(trace, lt))) ||
        (key != NULL && (lk >= sizeof kbuf || has_nul(key, lk)))) {
        free(pbuf);
        free(sbuf);
        free(wbuf);
        jr_fail(err, JR_EPROTO, "malformed job frame (trace, key)");
        return NULL;
    }
    if (trace != NULL) {
        memcpy(tbuf, trace, lt);
        tbuf[lt] = '\0';
    }
    if (key != NULL) {
        memcpy(kbuf, key, lk);
        kbuf[lk] = '\0';
    }
    j = jr_job_new_full(id, nbuf, qbuf, payload, lp, pbuf, sbuf, wbuf,
                        trace != NULL ? tbuf : NULL,
                        key != NULL ? kbuf : NULL);
    free(pbuf);
    free(sbuf);
    free(wbuf);
    if (j == NULL) {
        jr_fail(err, JR_ENOMEM, "out of memory decoding a job");
        return NULL;
    }
    j->batch = batch;
    j->attempt = attempt;
    j->max_retries = max_retries;
    j->priority = priority;
    j->run_at = run_at;
    j->created_at = created_at;
    j->deletable = deletable;
    return j;
}

/* A push's workflow options (a handler's push: after, on_parent_failure,
 * batch, sequence and on_failure; never after_local nor batch_new), and
 * its cost. */
static void
put_flow(jr_buf *b, const jr_push *p)
{
    int k;

    jr_put_i32(b, p->nafter);
    for (k = 0; k < p->nafter; k++)
        jr_put_i64(b, p->after[k]);
    jr_put_i32(b, p->on_parent_failure);
    jr_put_i64(b, p->batch);
    jr_put_str(b, p->sequence);
    jr_put_i32(b, p->seq_fail);
    jr_put_f64(b, p->expires_at);
    jr_put_f64(b, p->expires_in);
    jr_put_f64(b, p->deadline);
    jr_put_str(b, p->traceparent);
    jr_put_str(b, p->tracestate);
    jr_put_i64(b, p->cost);
}

void
jr_frame_put_result(jr_buf *b, const jr_result *res)
{
    size_t start = jr_frame_begin(b, JR_F_RESULT);
    int i;

    jr_put_i64(b, res->id);
    jr_put_u8(b, (unsigned)res->kind);
    jr_put_f64(b, res->delay);
    put_text(b, res->error);
    jr_put_str(b, res->generation);
    jr_put_i32(b, res->npushes);
    for (i = 0; i < res->npushes; i++) {
        const jr_push *p = &res->pushes[i];
        jr_put_str(b, p->name);
        jr_put_str(b, p->payload);
        jr_put_str(b, p->queue);
        jr_put_i32(b, p->priority);
        jr_put_i32(b, p->max_retries);
        jr_put_f64(b, p->run_at);
        jr_put_f64(b, p->run_in);
        jr_put_str(b, p->unique_key);
        jr_put_f64(b, p->unique_for);
        jr_put_i32(b, p->on_conflict);
        jr_put_str(b, p->key);
        jr_put_f64(b, p->result_ttl);
        put_flow(b, p);
    }
    if (res->kind == JR_DONE || res->kind == JR_STEP)
        jr_put_str(b, res->result);
    if (res->kind == JR_DONE) {
        jr_put_i32(b, res->nsql);
        if (res->nsql > 0)
            jr_put_strn(b, res->sql, res->sql_len);
    }
    if (res->kind == JR_STEP) {
        jr_put_i32(b, res->durable);
        jr_put_f64(b, res->done);
    }
    if (res->kind == JR_PROGRESS) {
        jr_put_f64(b, res->done);
        jr_put_f64(b, res->total);
        put_text(b, res->note);
    }
    if (res->kind == JR_WAIT) {
        jr_put_str(b, res->wait_on);
        jr_put_f64(b, res->wake_at);
        jr_put_i32(b, res->sleep_n);
    }
    if (res->kind != JR_PROGRESS && res->kind != JR_STEP)
        jr_put_strn(b, res->logs, res->logs_len);
    if (res->kind == JR_DONE)
        jr_put_u8(b, (unsigned)res->held);
    jr_frame_end(b, start);
}

/* Smallest encoding of one push: five string lengths, five i32, five
 * f64 or i64. */
#define PUSH_MIN_BYTES (5 * 4 + 5 * 4 + 5 * 8)

/* A push's workflow options, back: the parents' ids go in the arena,
 * aligned (the body spends 4 bytes a string more than the arena, which
 * pays for the alignment). */
static void
get_flow(jr_reader *r, jr_push *p, char **arena)
{
    int32_t n = jr_get_i32(r), k;
    int64_t *ids;

    p->after = NULL;
    p->nafter = 0;
    if (n < 0 || n > JR_AFTER_MAX || (size_t)n * 8 > r->n) {
        r->bad = 1;
        return;
    }
    if (n > 0) {
        *arena += (8 - ((uintptr_t)*arena & 7)) & 7;
        ids = (int64_t *)(void *)*arena;
        for (k = 0; k < n; k++)
            ids[k] = jr_get_i64(r);
        *arena += (size_t)n * sizeof *ids;
        p->after = ids;
        p->nafter = n;
    }
    p->after_local = NULL;
    p->nafter_local = 0;
    p->on_parent_failure = jr_get_i32(r);
    p->batch = jr_get_i64(r);
    p->batch_new = NULL;
    p->sequence = arena_str(r, arena);
    p->seq_fail = jr_get_i32(r);
    p->expires_at = jr_get_f64(r);
    p->expires_in = jr_get_f64(r);
    p->deadline = jr_get_f64(r);
    p->traceparent = arena_str(r, arena);
    p->tracestate = arena_str(r, arena);
    p->cost = (long)jr_get_i64(r);
}

/* Room a result's arena holds for its statements' messages (get_sql):
 * only a result with statements has it (jr_frame_get_result). */
#define SQL_ROOM (JR_SQL_ERR_MAX + 129)

/* A success's statements, back: the encoding, checked whole, is copied
 * into the arena (it lives as long as res), with JR_SQL_ERR_MAX bytes
 * after it for the backend's message when one of them fails, and the
 * handler's name. 1 when there are statements and the arena was made
 * without that room (room 0). */
static int
get_sql(jr_reader *r, jr_result *res, char **arena, int room)
{
    int32_t n = jr_get_i32(r);
    const char *p;
    size_t len;

    if (r->bad || n < 0 || n > JR_SQL_STMTS_MAX)
        return -1;
    if (n == 0)
        return 0;
    if (!room)
        return 1;
    if ((p = jr_get_str(r, &len)) == NULL || jr_sql_check(p, len, n) < 0)
        return -1;
    memcpy(*arena, p, len);
    res->sql = *arena;
    res->sql_len = len;
    res->nsql = n;
    res->sql_error = *arena + len;
    res->sql_error[0] = '\0';
    res->sql_handler = res->sql_error + JR_SQL_ERR_MAX;
    res->sql_handler[0] = '\0';
    *arena += len + SQL_ROOM;
    return 0;
}

/* A run's logs, back: its entry as joblog.c makes it, its framing
 * checked (jr_joblog_check: records whose lengths add up); its text
 * becomes JSON only where the backend stores it (jr_joblog_json, which
 * escapes every byte a handler wrote: test_joblog checks what it
 * makes), so a success deleted at its end never pays for it. */
static int
get_logs(jr_reader *r, jr_result *res, char **arena)
{
    size_t len;
    const char *p = jr_get_str(r, &len);

    if (r->bad)
        return -1;
    if (p == NULL)
        return 0;
    if (jr_joblog_check(p, len) < 0)
        return -1;
    memcpy(*arena, p, len);
    (*arena)[len] = '\0';
    res->logs = *arena;
    res->logs_len = len;
    *arena += len + 1;
    return 0;
}

/* jr_frame_get_result's decoding, into an arena with the statements'
 * room (room 1) or without: then 1 when the result has statements. */
static int
get_result(jr_reader *r, jr_result *res, void **mem, int room, jr_err *err)
{
    size_t body = r->n, maxpush = body / PUSH_MIN_BYTES + 1;
    jr_push *pushes;
    char *arena;
    int32_t n;
    int i, rc;

    memset(res, 0, sizeof *res);
    *mem = malloc(maxpush * sizeof *pushes + body + 17 +
                  (room ? SQL_ROOM : 0));
    if (*mem == NULL)
        return jr_fail(err, JR_ENOMEM, "out of memory decoding a result");
    pushes = *mem;
    arena = (char *)(pushes + maxpush);
    res->id = jr_get_i64(r);
    res->kind = (int)jr_get_u8(r);
    res->delay = jr_get_f64(r);
    res->error = arena_str(r, &arena);
    res->generation = arena_str(r, &arena);
    n = jr_get_i32(r);
    if (r->bad || n < 0 || (size_t)n > maxpush || res->kind < JR_DONE ||
        res->kind > JR_WAIT || res->kind == JR_EXPIRED)
        return jr_fail(err, JR_EPROTO, "malformed result frame");
    for (i = 0; i < n && !r->bad; i++) {
        pushes[i].name = arena_str(r, &arena);
        pushes[i].payload = arena_str(r, &arena);
        pushes[i].queue = arena_str(r, &arena);
        pushes[i].priority = jr_get_i32(r);
        pushes[i].max_retries = jr_get_i32(r);
        pushes[i].run_at = jr_get_f64(r);
        pushes[i].run_in = jr_get_f64(r);
        pushes[i].unique_key = arena_str(r, &arena);
        pushes[i].unique_for = jr_get_f64(r);
        pushes[i].on_conflict = jr_get_i32(r);
        pushes[i].outcome = NULL;
        pushes[i].key = arena_str(r, &arena);
        pushes[i].result_ttl = jr_get_f64(r);
        get_flow(r, &pushes[i], &arena);
        if (pushes[i].name == NULL)
            r->bad = 1;
    }
    if (res->kind == JR_DONE || res->kind == JR_STEP)
        res->result = arena_str(r, &arena);
    if (res->kind == JR_DONE && (rc = get_sql(r, res, &arena, room)) != 0) {
        if (rc > 0)
            return 1;
        return jr_fail(err, JR_EPROTO, "malformed result frame "
                       "(statements)");
    }
    if (res->kind == JR_STEP) {
        res->durable = jr_get_i32(r);
        res->done = jr_get_f64(r);
        if (res->result == NULL || res->durable < 0 || !(res->done >= 0))
            r->bad = 1;
    }
    if (res->kind == JR_PROGRESS) {
        res->done = jr_get_f64(r);
        res->total = jr_get_f64(r);
        res->note = arena_str(r, &arena);
    }
    if (res->kind == JR_WAIT) {
        res->wait_on = arena_str(r, &arena);
        res->wake_at = jr_get_f64(r);
        res->sleep_n = jr_get_i32(r);
        if (res->wait_on != NULL &&
            jr_name_check(res->wait_on, "signal name", NULL) < 0)
            r->bad = 1;
    }
    if (res->kind != JR_PROGRESS && res->kind != JR_STEP &&
        get_logs(r, res, &arena) < 0)
        return jr_fail(err, JR_EPROTO, "malformed result frame (logs)");
    if (res->kind == JR_DONE) {     /* its lines held in the worker? */
        res->held = (int)jr_get_u8(r);
        if (res->held > 2 || (res->held != 0 && (n > 0 ||
                                                 res->nsql > 0)))
            r->bad = 1;
        if (res->held == 1) {       /* the backend's byte (job.h) */
            res->lines_wanted = (unsigned char *)arena;
            *arena++ = 0;
        }
    }
    if (r->bad)
        return jr_fail(err, JR_EPROTO, "malformed result frame");
    if ((res->kind == JR_RETRY || res->kind == JR_DEAD) && res->error == NULL)
        res->error = "(the worker gave no error message)";
    res->pushes = pushes;
    res->npushes = n;
    return 0;
}

/* Most results carry no statements: their arena leaves out the room of
 * the statements' messages (a plain success's allocation was three times
 * its size with it), and the rare one with statements is decoded again
 * from the start into an arena with it. */
int
jr_frame_get_result(jr_reader *r, jr_result *res, void **mem, jr_err *err)
{
    jr_reader start = *r;
    int rc = get_result(r, res, mem, 0, err);

    if (rc > 0) {
        free(*mem);
        *r = start;
        rc = get_result(r, res, mem, 1, err);
    }
    return rc;
}
