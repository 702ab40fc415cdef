/* frame.c - the codec of frames between master and workers. Every decoder
 * is bounds-checked: a frame comes from another process and is fuzzed. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "worker/frame.h"
#include "base/jsontext.h"
#include "base/log.h"
#include "base/ranges.h"

#define NULL_LEN 0xffffffffu    /* string length that encodes NULL */

static void
put_le(jr_buf *b, uint64_t v, int bytes)
{
    unsigned char tmp[8];
    int i;

    for (i = 0; i < bytes; i++)
        tmp[i] = (unsigned char)(v >> (8 * i));
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
    jr_buf_put(b, s, n);
}

void
jr_put_str(jr_buf *b, const char *s)
{
    jr_put_strn(b, s, s ? strlen(s) : 0);
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
    char nbuf[129], qbuf[129], *pbuf = NULL;
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
    j = jr_job_new_parents(id, nbuf, qbuf, payload, lp, pbuf);
    free(pbuf);
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
    return j;
}

/* A push's workflow options (a handler's push: after, on_parent_failure,
 * batch; never after_local nor batch_new). */
static void
put_flow(jr_buf *b, const jr_push *p)
{
    int k;

    jr_put_i32(b, p->nafter);
    for (k = 0; k < p->nafter; k++)
        jr_put_i64(b, p->after[k]);
    jr_put_i32(b, p->on_parent_failure);
    jr_put_i64(b, p->batch);
}

/* Text for a text column (an error): s with each byte that is not
 * UTF-8 as U+FFFD. A handler's error("...\xff") or a message cut inside
 * a character made PostgreSQL refuse the whole completion. */
static void
put_text(jr_buf *b, const char *s)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t n, k, len = 0, i;

    if (s == NULL) {
        jr_put_str(b, s);
        return;
    }
    n = strlen(s);
    for (i = 0; i < n; i += k > 0 ? k : 1) {
        k = jr_jsontext_utf8_len(u + i, n - i);
        len += k > 0 ? k : 3;
    }
    put_le(b, (uint32_t)len, 4);
    for (i = 0; i < n; i += k > 0 ? k : 1) {
        k = jr_jsontext_utf8_len(u + i, n - i);
        jr_buf_put(b, k > 0 ? s + i : "\xef\xbf\xbd", k > 0 ? k : 3);
    }
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
    if (res->kind == JR_DONE)
        jr_put_str(b, res->result);
    if (res->kind == JR_PROGRESS) {
        jr_put_f64(b, res->done);
        jr_put_f64(b, res->total);
        jr_put_str(b, res->note);
    }
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
}

int
jr_frame_get_result(jr_reader *r, jr_result *res, void **mem, jr_err *err)
{
    size_t body = r->n, maxpush = body / PUSH_MIN_BYTES + 1;
    jr_push *pushes;
    char *arena;
    int32_t n;
    int i;

    memset(res, 0, sizeof *res);
    *mem = malloc(maxpush * sizeof *pushes + body + 16);
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
        res->kind > JR_PROGRESS || res->kind == JR_EXPIRED)
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
    if (res->kind == JR_DONE)
        res->result = arena_str(r, &arena);
    if (res->kind == JR_PROGRESS) {
        res->done = jr_get_f64(r);
        res->total = jr_get_f64(r);
        res->note = arena_str(r, &arena);
    }
    if (r->bad)
        return jr_fail(err, JR_EPROTO, "malformed result frame");
    if ((res->kind == JR_RETRY || res->kind == JR_DEAD) && res->error == NULL)
        res->error = "(the worker gave no error message)";
    res->pushes = pushes;
    res->npushes = n;
    return 0;
}

/* --- cancel ---------------------------------------------------------- */

void
jr_frame_put_cancel(jr_buf *b, int64_t id)
{
    size_t start = jr_frame_begin(b, JR_F_CANCEL);

    jr_put_i64(b, id);
    jr_frame_end(b, start);
}

int64_t
jr_frame_get_cancel(jr_reader *r, jr_err *err)
{
    int64_t id = jr_get_i64(r);

    if (r->bad || r->n != 0 || id < 1)
        return jr_fail(err, JR_EPROTO, "malformed cancel frame");
    return id;
}

int
jr_frame_find_cancel(const char *data, size_t n, int64_t id, int *any)
{
    jr_reader r;
    jr_err err;
    long len;

    if (any != NULL)
        *any = 0;
    while ((len = jr_frame_complete(data, n, &err)) > 0) {
        if (jr_frame_open(&r, data) == JR_F_CANCEL && any != NULL)
            *any = 1;
        if (jr_frame_open(&r, data) == JR_F_CANCEL &&
            jr_frame_get_cancel(&r, &err) == id)
            return 1;
        data += len;
        n -= (size_t)len;
    }
    return 0;
}

/* --- hello ---------------------------------------------------------- */

void
jr_frame_put_hello(jr_buf *b, const jr_scripts *s, const char *setup_error)
{
    size_t start = jr_frame_begin(b, JR_F_HELLO);
    int i;

    jr_put_str(b, s->generation);
    jr_put_i32(b, s->n);
    for (i = 0; i < s->n; i++) {
        jr_put_str(b, s->h[i].name);
        jr_put_i32(b, s->h[i].max_retries);
        jr_put_f64(b, s->h[i].timeout);
        jr_put_f64(b, s->h[i].backoff);
        jr_put_i32(b, s->h[i].inflight);
    }
    jr_put_i32(b, s->nerrors);
    for (i = 0; i < s->nerrors; i++)
        jr_put_str(b, s->errors[i]);
    jr_put_str(b, setup_error);
    jr_frame_end(b, start);
}

void
jr_hello_free(jr_hello *h)
{
    int i;

    if (h == NULL)
        return;
    for (i = 0; i < h->n; i++)
        free(h->h[i].name);
    for (i = 0; i < h->nerrors; i++)
        free(h->errors[i]);
    free(h->h);
    free(h->errors);
    free(h->setup_error);
    memset(h, 0, sizeof *h);
}

/* Reads one handler into h (name owned); NULL or a message. */
static const char *
get_handler(jr_reader *r, jr_handler *h)
{
    size_t len;
    const char *name = jr_get_str(r, &len);

    h->max_retries = jr_get_i32(r);
    h->timeout = jr_get_f64(r);
    h->backoff = jr_get_f64(r);
    h->inflight = jr_get_i32(r);
    h->avg = 0;
    if (r->bad)
        return "truncated in a handler";
    if (name == NULL || len == 0 || len > 128 || memchr(name, 0, len))
        return "a handler without a valid name";
    if ((h->name = strndup(name, len)) == NULL)
        return "out of memory";
    if (jr_name_check(h->name, "job name", NULL) < 0)
        return "a handler without a valid name";
    if (h->max_retries < -1 || !isfinite(h->timeout) || h->timeout < 0 ||
        !isfinite(h->backoff) || h->backoff < -1 || h->inflight < 0 ||
        h->inflight > JR_RANGE_INFLIGHT_MAX)
        return "a handler with options out of range";
    return NULL;
}

/* Copies a string of the body, NUL-terminated; NULL for NULL or on
 * failure (*bad set unless it was a NULL). */
static char *
dup_str(jr_reader *r, int *bad)
{
    size_t len;
    const char *s = jr_get_str(r, &len);
    char *d;

    if (s == NULL)
        return NULL;
    if ((d = strndup(s, len)) == NULL)
        *bad = 1;
    return d;
}

int
jr_frame_get_hello(jr_reader *r, jr_hello *out, jr_err *err)
{
    size_t len;
    const char *gen = jr_get_str(r, &len);
    const char *bad = NULL;
    int32_t n = jr_get_i32(r), i;
    int oom = 0;

    memset(out, 0, sizeof *out);
    /* a handler takes 24 bytes at least, an error 4: counts beyond what
     * the body can hold are lies, refused before any allocation */
    if (r->bad || gen == NULL || len >= sizeof out->generation ||
        memchr(gen, 0, len) || n < 0 || (size_t)n > r->n / 24)
        return jr_fail(err, JR_EPROTO, "malformed hello: bad generation or "
                       "handler count");
    memcpy(out->generation, gen, len);
    if ((out->h = calloc((size_t)n + 1, sizeof *out->h)) == NULL)
        return jr_fail(err, JR_ENOMEM, "hello: out of memory");
    for (i = 0; i < n && bad == NULL; i++) {
        bad = get_handler(r, &out->h[i]);
        if (out->h[i].name != NULL)
            out->n++;
    }
    if (bad != NULL)
        return jr_fail(err, strcmp(bad, "out of memory") == 0 ? JR_ENOMEM :
                       JR_EPROTO, "malformed hello: %s", bad);
    n = jr_get_i32(r);
    if (r->bad || n < 0 || (size_t)n > r->n / 4)
        return jr_fail(err, JR_EPROTO, "malformed hello: bad error count");
    if ((out->errors = calloc((size_t)n + 1, sizeof *out->errors)) == NULL)
        return jr_fail(err, JR_ENOMEM, "hello: out of memory");
    for (i = 0; i < n && !r->bad && !oom; i++) {
        if ((out->errors[i] = dup_str(r, &oom)) == NULL)
            break;
        out->nerrors++;
    }
    if (oom)
        return jr_fail(err, JR_ENOMEM, "hello: out of memory");
    if (r->bad || out->nerrors < n)
        return jr_fail(err, JR_EPROTO, "malformed hello: bad load error");
    out->setup_error = dup_str(r, &oom);
    if (oom)
        return jr_fail(err, JR_ENOMEM, "hello: out of memory");
    if (r->bad || r->n != 0)
        return jr_fail(err, JR_EPROTO, "malformed hello: %s", r->bad ?
                       "truncated" : "trailing bytes");
    if (out->setup_error == NULL && out->generation[0] == '\0')
        return jr_fail(err, JR_EPROTO, "malformed hello: no generation");
    return 0;
}

/* --- settings ------------------------------------------------------- */

void
jr_frame_put_settings(jr_buf *b, const jr_settings *s)
{
    size_t start = jr_frame_begin(b, JR_F_SETTINGS);

    jr_put_str(b, s->scripts);
    jr_put_i32(b, s->max_retries);
    jr_put_f64(b, s->timeout);
    jr_put_f64(b, s->load_timeout);
    jr_put_i64(b, (int64_t)s->memory_limit);
    jr_put_i64(b, (int64_t)s->max_payload);
    jr_put_i64(b, (int64_t)s->max_result);
    jr_put_u8(b, (unsigned)s->log_level);
    jr_put_u8(b, s->log_json ? 1 : 0);
    jr_put_i32(b, s->inflight);
    jr_frame_end(b, start);
}

void
jr_settings_free(jr_settings *s)
{
    if (s == NULL)
        return;
    free(s->scripts);
    memset(s, 0, sizeof *s);
}

/* NULL, or what is out of range in s. */
static const char *
settings_range(const jr_settings *s, int64_t mem, int64_t payload,
               int64_t result)
{
    if (s->max_retries < 0 || s->max_retries > JR_RANGE_RETRIES_MAX)
        return "max_retries";
    if (!(s->timeout >= JR_RANGE_TIMEOUT_MIN &&
          s->timeout <= JR_RANGE_TIMEOUT_MAX))
        return "timeout";
    if (!(s->load_timeout >= JR_RANGE_LOAD_MIN &&
          s->load_timeout <= JR_RANGE_LOAD_MAX))
        return "load_timeout";
    if (mem < 0 || mem > ((int64_t)1 << 40))
        return "memory_limit";
    if (payload < 1 || payload > (1 << 30))
        return "max_payload";
    if (result < 1 || result > (1 << 30))
        return "max_result";
    if (s->log_level < JR_LOG_DEBUG || s->log_level > JR_LOG_ERROR ||
        s->log_json > 1)
        return "log";
    if (s->inflight < 1 || s->inflight > JR_RANGE_INFLIGHT_MAX)
        return "inflight";
    return NULL;
}

int
jr_frame_get_settings(jr_reader *r, jr_settings *out, jr_err *err)
{
    size_t len;
    const char *dir = jr_get_str(r, &len), *bad;
    int64_t mem, payload, result;

    memset(out, 0, sizeof *out);
    out->max_retries = jr_get_i32(r);
    out->timeout = jr_get_f64(r);
    out->load_timeout = jr_get_f64(r);
    mem = jr_get_i64(r);
    payload = jr_get_i64(r);
    result = jr_get_i64(r);
    out->log_level = (int)jr_get_u8(r);
    out->log_json = (int)jr_get_u8(r);
    out->inflight = jr_get_i32(r);
    if (r->bad || r->n != 0)
        return jr_fail(err, JR_EPROTO, "malformed settings: %s", r->bad ?
                       "truncated" : "trailing bytes");
    if (dir == NULL || len == 0 || memchr(dir, 0, len))
        return jr_fail(err, JR_EPROTO, "malformed settings: no scripts "
                       "directory");
    if ((bad = settings_range(out, mem, payload, result)) != NULL)
        return jr_fail(err, JR_EPROTO, "malformed settings: %s out of "
                       "range", bad);
    out->memory_limit = (size_t)mem;
    out->max_payload = (size_t)payload;
    out->max_result = (size_t)result;
    if ((out->scripts = strndup(dir, len)) == NULL)
        return jr_fail(err, JR_ENOMEM, "settings: out of memory");
    return 0;
}
