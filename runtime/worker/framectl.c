/* framectl.c - the control frames of the codec between master and
 * workers (frame.h): a cancel, the hello a worker sends at its start and
 * the settings the master sends it. Every decoder is bounds-checked: a
 * frame comes from another process and is fuzzed. Uses frame.h, config.h
 * for handler names, log.h for log levels, ranges.h for the settings'
 * bounds. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "worker/frame.h"
#include "base/log.h"
#include "base/ranges.h"


void
jr_frame_put_cancel(jr_buf *b, int64_t id)
{
    size_t start = jr_frame_begin(b, JR_F_CANCEL);

    jr_put_i64(b, id);
    jr_frame_end(b, start);
}

void
jr_frame_put_stepok(jr_buf *b, int64_t id, int seq)
{
    size_t start = jr_frame_begin(b, JR_F_STEPOK);

    jr_put_i64(b, id);
    jr_put_i32(b, seq);
    jr_frame_end(b, start);
}

int64_t
jr_frame_get_stepok(jr_reader *r, int *seq, jr_err *err)
{
    int64_t id = jr_get_i64(r);

    *seq = jr_get_i32(r);
    if (r->bad || r->n != 0 || id < 1 || *seq < 1)
        return jr_fail(err, JR_EPROTO, "malformed step frame");
    return id;
}

int
jr_frame_find_step(const char *data, size_t n, int type, int64_t id,
                   int seq)
{
    jr_reader r;
    jr_err err;
    long len;
    int got;

    while ((len = jr_frame_complete(data, n, &err)) > 0) {
        if (jr_frame_open(&r, data) == type &&
            (type == JR_F_HANDBACK ||
             (jr_frame_get_stepok(&r, &got, &err) == id && got == seq)))
            return 1;
        data += len;
        n -= (size_t)len;
    }
    return 0;
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
        jr_put_str(b, s->h[i].sequence);
        jr_put_str(b, s->h[i].fair);
        jr_put_str(b, s->h[i].fair_weights);
        jr_put_f64(b, s->h[i].fair_default);
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
    for (i = 0; i < h->n; i++) {
        free(h->h[i].name);
        free(h->h[i].sequence);
        free(h->h[i].fair);
        free(h->h[i].fair_weights);
    }
    for (i = 0; i < h->nerrors; i++)
        free(h->errors[i]);
    free(h->h);
    free(h->errors);
    free(h->setup_error);
    memset(h, 0, sizeof *h);
}

static char *dup_str(jr_reader *r, int *bad);

/* Reads one handler into h (name, sequence and fair owned); NULL or a
 * message. */
static const char *
get_handler(jr_reader *r, jr_handler *h)
{
    size_t len;
    const char *name = jr_get_str(r, &len);
    int oom = 0;

    h->max_retries = jr_get_i32(r);
    h->timeout = jr_get_f64(r);
    h->backoff = jr_get_f64(r);
    h->inflight = jr_get_i32(r);
    h->avg = 0;
    h->sequence = r->bad ? NULL : dup_str(r, &oom);
    h->fair = r->bad || oom ? NULL : dup_str(r, &oom);
    h->fair_weights = r->bad || oom ? NULL : dup_str(r, &oom);
    h->fair_default = jr_get_f64(r);
    if (oom)
        return "out of memory";
    if (r->bad)
        return "truncated in a handler";
    if (h->sequence != NULL && (h->sequence[0] == '\0' ||
                                strlen(h->sequence) > 192))
        return "a handler with a bad sequence path";
    if (h->fair != NULL && (h->fair[0] == '\0' || strlen(h->fair) > 192))
        return "a handler with a bad fair path";
    if ((h->fair_weights != NULL) != (h->fair_default >= 1) ||
        !(h->fair_default == 0 || h->fair_default <= 1000) ||
        (h->fair_weights != NULL && h->fair == NULL))
        return "a handler with bad fair weights";
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
        else {                  /* not counted: not freed with them */
            free(out->h[i].sequence);
            out->h[i].sequence = NULL;
            free(out->h[i].fair);
            out->h[i].fair = NULL;
            free(out->h[i].fair_weights);
            out->h[i].fair_weights = NULL;
        }
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
    jr_put_str(b, s->db_url ? s->db_url : "");
    jr_put_str(b, s->attach ? s->attach : "");
    jr_put_str(b, s->handler_role ? s->handler_role : "");
    jr_put_u8(b, s->durable_steps ? 1 : 0);
    jr_put_i64(b, (int64_t)s->log_attempt_max);
    jr_put_u8(b, s->log_echo ? 1 : 0);
    jr_put_str(b, s->key_file ? s->key_file : "");
    jr_put_u8(b, s->tracing ? 1 : 0);
    jr_put_f64(b, s->trace_sample);
    jr_frame_end(b, start);
}

void
jr_settings_free(jr_settings *s)
{
    if (s == NULL)
        return;
    free(s->scripts);
    free(s->db_url);
    free(s->attach);
    free(s->handler_role);
    free(s->key_file);
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
        s->log_json > 1 || s->durable_steps > 1 || s->log_echo > 1)
        return "log";
    if (s->inflight < 1 || s->inflight > JR_RANGE_INFLIGHT_MAX)
        return "inflight";
    if (s->tracing > 1 || !(s->trace_sample >= 0 && s->trace_sample <= 1))
        return "tracing";
    return NULL;
}

int
jr_frame_get_settings(jr_reader *r, jr_settings *out, jr_err *err)
{
    size_t len, slen[3], klen;
    const char *dir = jr_get_str(r, &len), *bad, *str[3], *kf;
    char **own[3] = {&out->db_url, &out->attach, &out->handler_role};
    int64_t mem, payload, result, logmax;
    int i;

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
    for (i = 0; i < 3; i++)
        str[i] = jr_get_str(r, &slen[i]);
    out->durable_steps = (int)jr_get_u8(r);
    logmax = jr_get_i64(r);
    out->log_echo = (int)jr_get_u8(r);
    kf = jr_get_str(r, &klen);
    out->tracing = (int)jr_get_u8(r);
    out->trace_sample = jr_get_f64(r);
    if (r->bad || r->n != 0)
        return jr_fail(err, JR_EPROTO, "malformed settings: %s", r->bad ?
                       "truncated" : "trailing bytes");
    if (dir == NULL || len == 0 || memchr(dir, 0, len))
        return jr_fail(err, JR_EPROTO, "malformed settings: no scripts "
                       "directory");
    if ((bad = settings_range(out, mem, payload, result)) != NULL)
        return jr_fail(err, JR_EPROTO, "malformed settings: %s out of "
                       "range", bad);
    if (logmax < 0 || logmax > (1 << 20))
        return jr_fail(err, JR_EPROTO, "malformed settings: log.attempt_max "
                       "out of range");
    out->log_attempt_max = (size_t)logmax;
    out->memory_limit = (size_t)mem;
    out->max_payload = (size_t)payload;
    out->max_result = (size_t)result;
    if ((out->scripts = strndup(dir, len)) == NULL)
        return jr_fail(err, JR_ENOMEM, "settings: out of memory");
    for (i = 0; i < 3; i++) {
        if (str[i] == NULL || memchr(str[i], 0, slen[i]))
            return jr_fail(err, JR_EPROTO, "malformed settings: a database "
                           "string");
        if (slen[i] > 0 && (*own[i] = strndup(str[i], slen[i])) == NULL)
            return jr_fail(err, JR_ENOMEM, "settings: out of memory");
    }
    if (kf == NULL || memchr(kf, 0, klen))
        return jr_fail(err, JR_EPROTO, "malformed settings: the key file");
    if (klen > 0 && (out->key_file = strndup(kf, klen)) == NULL)
        return jr_fail(err, JR_ENOMEM, "settings: out of memory");
    return 0;
}

void
jr_frame_put_spans(jr_buf *b, const char *text, size_t len, int n)
{
    size_t start = jr_frame_begin(b, JR_F_SPANS);

    jr_put_i32(b, n);
    jr_put_strn(b, text, len);
    jr_frame_end(b, start);
}

int
jr_frame_get_spans(jr_reader *r, const char **text, size_t *len,
                   jr_err *err)
{
    int32_t n = jr_get_i32(r);

    *text = jr_get_str(r, len);
    if (r->bad || r->n != 0 || n < 1 || *text == NULL || *len == 0)
        return jr_fail(err, JR_EPROTO, "malformed spans frame");
    return n;
}
