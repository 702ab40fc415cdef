/* fuzz_frame.c - the frame codec between master and workers (frame.c,
 * framectl.c).
 * Input byte 0 picks the mode:
 *   even: the rest is a byte stream from a peer: split into frames with
 *         jr_frame_complete, open each and decode it as a job, a result, a
 *         hello and a worker's settings (the real decoders), whatever its
 *         type (a decoder must refuse, not overrun, and never half-build);
 *         and a cancel;
 *   odd:  the rest describes a job, a result (bit 1), a hello (bit 2),
 *         settings (bits 1 and 2) or a cancel (bit 3 alone), which is
 *         encoded, decoded and compared field by field (abort on any
 *         difference). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "fuzz.h"
#include "worker/frame.h"
#include "base/log.h"

#define CHECK(c) do { if (!(c)) { \
    fprintf(stderr, "fuzz_frame: check failed: %s (line %d)\n", #c, \
            __LINE__); abort(); } } while (0)

static int
same_f64(double a, double b)
{
    return memcmp(&a, &b, sizeof a) == 0;
}

static int
same_str(const char *a, const char *b)
{
    return (a == NULL && b == NULL) ||
           (a != NULL && b != NULL && strcmp(a, b) == 0);
}

/* Decodes a hello with the master's decoder (framectl.c): it must refuse a
 * malformed body with JR_EPROTO (or JR_ENOMEM), never half-build one. */
static void
read_hello(jr_reader r)
{
    jr_hello h;
    jr_err err;
    int i;

    if (jr_frame_get_hello(&r, &h, &err) == 0) {
        CHECK(r.n == 0 && !r.bad);
        CHECK(h.n >= 0 && h.nerrors >= 0);
        CHECK(strlen(h.generation) < sizeof h.generation);
        CHECK(h.setup_error != NULL || h.generation[0] != '\0');
        for (i = 0; i < h.n; i++) {
            CHECK(h.h[i].name != NULL);
            CHECK(jr_name_check(h.h[i].name, "job name", NULL) == 0);
            CHECK(h.h[i].max_retries >= -1 && h.h[i].timeout >= 0 &&
                  h.h[i].backoff >= -1);
        }
        for (i = 0; i < h.nerrors; i++)
            (void)strlen(h.errors[i]);
        if (h.setup_error)
            (void)strlen(h.setup_error);
    } else {
        CHECK(err.code == JR_EPROTO || err.code == JR_ENOMEM);
    }
    jr_hello_free(&h);
}

/* Decodes settings with the worker's decoder (framectl.c): refused with
 * JR_EPROTO (or JR_ENOMEM), or every value in the config's ranges. */
static void
read_settings(jr_reader r)
{
    jr_settings s;
    jr_err err;

    if (jr_frame_get_settings(&r, &s, &err) == 0) {
        CHECK(r.n == 0 && !r.bad);
        CHECK(s.scripts != NULL && s.scripts[0] != '\0');
        CHECK(s.max_retries >= 0 && s.max_retries <= JR_RANGE_RETRIES_MAX);
        CHECK(s.timeout >= JR_RANGE_TIMEOUT_MIN &&
              s.timeout <= JR_RANGE_TIMEOUT_MAX);
        CHECK(s.load_timeout >= JR_RANGE_LOAD_MIN &&
              s.load_timeout <= JR_RANGE_LOAD_MAX);
        CHECK(s.max_payload >= 1);
        CHECK(s.log_level >= JR_LOG_DEBUG && s.log_level <= JR_LOG_ERROR);
        CHECK(s.log_json == 0 || s.log_json == 1);
        CHECK(s.durable_steps == 0 || s.durable_steps == 1);
    } else {
        CHECK(err.code == JR_EPROTO || err.code == JR_ENOMEM);
    }
    jr_settings_free(&s);
}

static void
stream(const uint8_t *data, size_t size)
{
    size_t off = 0;
    int any;

    /* the worker's look-ahead for a cancel walks the same frames */
    if (jr_frame_find_cancel((const char *)data, size, 42, &any))
        CHECK(any);

    while (off < size) {
        jr_err err;
        jr_reader r, r2;
        jr_result res;
        jr_job *j;
        void *mem;
        long len = jr_frame_complete((const char *)data + off, size - off,
                                     &err);
        int type, i;

        if (len <= 0)
            break;
        CHECK((size_t)len >= 5 && (size_t)len <= size - off);
        type = jr_frame_open(&r, (const char *)data + off);
        CHECK(type == data[off + 4]);
        CHECK(r.n == (size_t)len - 5);
        r2 = r;
        if ((j = jr_frame_get_job(&r2, &err)) != NULL) {
            CHECK(strlen(j->name) <= 128 && strlen(j->queue) <= 128);
            CHECK(j->payload[j->payload_len] == '\0');
            free(j);
        } else {
            CHECK(err.code == JR_EPROTO || err.code == JR_ENOMEM);
        }
        r2 = r;
        if (jr_frame_get_result(&r2, &res, &mem, &err) == 0) {
            CHECK(res.kind >= JR_DONE && res.kind <= JR_PROGRESS &&
                  res.kind != JR_EXPIRED);
            if (res.kind == JR_PROGRESS && res.note)
                (void)strlen(res.note);
            CHECK(res.npushes >= 0);
            CHECK(res.error != NULL ||
                  (res.kind != JR_RETRY && res.kind != JR_DEAD));
            if (res.error)
                (void)strlen(res.error);
            if (res.generation)
                (void)strlen(res.generation);
            for (i = 0; i < res.npushes; i++) {
                CHECK(res.pushes[i].name != NULL);
                (void)strlen(res.pushes[i].name);
                if (res.pushes[i].payload)
                    (void)strlen(res.pushes[i].payload);
                if (res.pushes[i].queue)
                    (void)strlen(res.pushes[i].queue);
            }
        }
        free(mem);
        read_hello(r);
        read_settings(r);
        r2 = r;
        if (jr_frame_get_cancel(&r2, &err) < 0)
            CHECK(err.code == JR_EPROTO);
        else
            CHECK(r2.n == 0 && !r2.bad);
        off += (size_t)len;
    }
}

static void
job_round_trip(fz *f)
{
    char name[256], queue[256], payload[256];
    int64_t id = (int64_t)fz_int(f, 8);
    int32_t attempt = (int32_t)fz_int(f, 4), max_retries = (int32_t)fz_int(f, 4);
    int32_t priority = (int32_t)fz_int(f, 4);
    double run_at = fz_double(f), created_at = fz_double(f);
    size_t ln = fz_str(f, name, 1), lq = fz_str(f, queue, 1);
    size_t lp = fz_str(f, payload, 0);
    jr_buf b = {0};
    jr_job *j = jr_job_new(id, name, queue, payload, lp), *d;
    jr_reader r;
    jr_err err;

    CHECK(j != NULL);
    j->attempt = attempt;
    j->max_retries = max_retries;
    j->priority = priority;
    j->run_at = run_at;
    j->created_at = created_at;
    jr_frame_put_job(&b, j);
    CHECK(!b.oom);
    CHECK(jr_frame_complete(b.p, b.len, &err) == (long)b.len);
    CHECK(jr_frame_complete(b.p, b.len - 1, &err) == 0);
    CHECK(jr_frame_open(&r, b.p) == JR_F_JOB);
    d = jr_frame_get_job(&r, &err);
    if (ln > 128 || lq > 128) {
        CHECK(d == NULL && err.code == JR_EPROTO);
    } else {
        CHECK(d != NULL);
        CHECK(r.n == 0 && !r.bad);
        CHECK(d->id == id && d->attempt == attempt &&
              d->max_retries == max_retries && d->priority == priority);
        CHECK(same_f64(d->run_at, run_at) &&
              same_f64(d->created_at, created_at));
        CHECK(strcmp(d->name, name) == 0 && strcmp(d->queue, queue) == 0);
        CHECK(d->payload_len == lp && memcmp(d->payload, payload, lp) == 0);
        CHECK(d->payload[lp] == '\0');
    }
    free(d);
    free(j);
    jr_buf_free(&b);
}

#define MAXPUSH 5

static void
result_round_trip(fz *f)
{
    static const int kinds[] = {JR_DONE, JR_RETRY, JR_DEAD, JR_SNOOZE,
                                JR_RELEASE, JR_CANCELLED, JR_PROGRESS};
    char err_s[256], gen_s[256], note_s[256];
    char names[MAXPUSH][256], payloads[MAXPUSH][256], queues[MAXPUSH][256];
    jr_push pushes[MAXPUSH];
    jr_result res, d;
    unsigned flags;
    jr_buf b = {0};
    jr_reader r;
    jr_err err;
    void *mem;
    int i;

    memset(&res, 0, sizeof res);
    memset(pushes, 0, sizeof pushes);
    res.id = (int64_t)fz_int(f, 8);
    res.kind = kinds[fz_int(f, 1) % 7];
    res.delay = fz_double(f);
    flags = (unsigned)fz_int(f, 1);
    fz_str(f, err_s, 1);
    fz_str(f, gen_s, 1);
    res.error = flags & 1 ? err_s : NULL;
    res.generation = flags & 2 ? gen_s : NULL;
    if (res.kind == JR_PROGRESS) {
        res.done = fz_double(f);
        res.total = fz_double(f);
        fz_str(f, note_s, 1);
        res.note = flags & 4 ? note_s : NULL;
    }
    res.npushes = (int)(fz_int(f, 1) % (MAXPUSH + 1));
    for (i = 0; i < res.npushes; i++) {
        unsigned pf = (unsigned)fz_int(f, 1);
        fz_str(f, names[i], 1);
        fz_str(f, payloads[i], 1);
        fz_str(f, queues[i], 1);
        pushes[i].name = names[i];
        pushes[i].payload = pf & 1 ? payloads[i] : NULL;
        pushes[i].queue = pf & 2 ? queues[i] : NULL;
        pushes[i].priority = (int)(int32_t)fz_int(f, 4);
        pushes[i].max_retries = (int)(int32_t)fz_int(f, 4);
        pushes[i].run_at = fz_double(f);
        pushes[i].run_in = fz_double(f);
    }
    res.pushes = pushes;
    jr_frame_put_result(&b, &res);
    CHECK(!b.oom);
    CHECK(jr_frame_complete(b.p, b.len, &err) == (long)b.len);
    CHECK(jr_frame_open(&r, b.p) == JR_F_RESULT);
    CHECK(jr_frame_get_result(&r, &d, &mem, &err) == 0);
    CHECK(r.n == 0 && !r.bad);
    CHECK(d.id == res.id && d.kind == res.kind && same_f64(d.delay, res.delay));
    /* a retry or death without a message gets the decoder's placeholder */
    CHECK(same_str(d.error, res.error) ||
          (res.error == NULL && (res.kind == JR_RETRY || res.kind == JR_DEAD)
           && d.error != NULL));
    CHECK(same_str(d.generation, res.generation));
    CHECK(same_f64(d.done, res.done) && same_f64(d.total, res.total) &&
          same_str(d.note, res.note));
    CHECK(d.npushes == res.npushes);
    for (i = 0; i < res.npushes; i++) {
        const jr_push *p = &d.pushes[i], *q = &pushes[i];
        CHECK(same_str(p->name, q->name) && same_str(p->payload, q->payload) &&
              same_str(p->queue, q->queue));
        CHECK(p->priority == q->priority && p->max_retries == q->max_retries);
        CHECK(same_f64(p->run_at, q->run_at) && same_f64(p->run_in, q->run_in));
    }
    free(mem);
    jr_buf_free(&b);
}

#define MAXH 4

/* A hello of valid handlers, an error and maybe a set-up error, encoded by
 * the worker's encoder and decoded by the master's: the same values. */
static void
hello_round_trip(fz *f)
{
    char names[MAXH][256], errs[MAXH][256], setup[256];
    char *errp[MAXH];
    jr_handler h[MAXH];
    jr_scripts s;
    jr_hello d;
    jr_buf b = {0};
    jr_reader r;
    jr_err err;
    unsigned flags = (unsigned)fz_int(f, 1);
    int i, n = 0;

    memset(&s, 0, sizeof s);
    memset(h, 0, sizeof h);
    snprintf(s.generation, sizeof s.generation, "%016llx",
             (unsigned long long)fz_int(f, 8));
    for (i = 0; i < (int)(flags % (MAXH + 1)); i++) {
        size_t k;
        fz_str(f, names[n], 1);
        for (k = 0; names[n][k]; k++)   /* keep it a valid job name */
            names[n][k] = "abcdefghij.-_:0123456789"[(unsigned char)
                                                    names[n][k] % 24];
        if (k == 0 || k > 128)
            continue;
        h[n].name = names[n];
        h[n].max_retries = (int)(fz_int(f, 1) % 50) - 1;
        h[n].timeout = (double)fz_int(f, 2);
        h[n].backoff = (double)fz_int(f, 2) - 1;
        h[n].inflight = (int)(fz_int(f, 2) % JR_RANGE_INFLIGHT_MAX);
        n++;
    }
    s.h = h;
    s.n = n;
    for (i = 0; i < (int)((flags >> 3) % (MAXH + 1)); i++) {
        fz_str(f, errs[i], 1);
        errp[i] = errs[i];
    }
    s.errors = errp;
    s.nerrors = i;
    fz_str(f, setup, 1);
    jr_frame_put_hello(&b, &s, flags & 0x80 ? setup : NULL);
    CHECK(!b.oom);
    CHECK(jr_frame_complete(b.p, b.len, &err) == (long)b.len);
    CHECK(jr_frame_open(&r, b.p) == JR_F_HELLO);
    CHECK(jr_frame_get_hello(&r, &d, &err) == 0);
    CHECK(strcmp(d.generation, s.generation) == 0);
    CHECK(d.n == s.n && d.nerrors == s.nerrors);
    for (i = 0; i < d.n; i++) {
        CHECK(strcmp(d.h[i].name, h[i].name) == 0);
        CHECK(d.h[i].max_retries == h[i].max_retries);
        CHECK(same_f64(d.h[i].timeout, h[i].timeout) &&
              same_f64(d.h[i].backoff, h[i].backoff));
        CHECK(d.h[i].inflight == h[i].inflight);
    }
    for (i = 0; i < d.nerrors; i++)
        CHECK(strcmp(d.errors[i], errs[i]) == 0);
    CHECK(same_str(d.setup_error, flags & 0x80 ? setup : NULL));
    jr_hello_free(&d);
    jr_buf_free(&b);
}

/* Settings encoded by the master and decoded by the worker: the same
 * values when in range, else refused. */
static void
settings_round_trip(fz *f)
{
    char dir[256];
    jr_settings s, d;
    jr_buf b = {0};
    jr_reader r;
    jr_err err;
    int ok;

    memset(&s, 0, sizeof s);   /* the database strings: none */
    fz_str(f, dir, 1);
    s.scripts = dir;
    s.max_retries = (int)(int32_t)fz_int(f, 4);
    s.timeout = fz_double(f);
    s.load_timeout = fz_double(f);
    s.memory_limit = (size_t)fz_int(f, 8);
    s.max_payload = (size_t)fz_int(f, 8);
    s.max_result = (size_t)fz_int(f, 8);
    s.log_level = (int)(fz_int(f, 1) % 6);
    s.log_json = (int)(fz_int(f, 1) % 2);
    s.inflight = (int)(int32_t)fz_int(f, 4);
    s.durable_steps = (int)(fz_int(f, 1) % 2);
    s.log_attempt_max = (size_t)fz_int(f, 4);
    s.log_echo = (int)(fz_int(f, 1) % 2);
    s.tracing = (int)(fz_int(f, 1) % 2);
    s.trace_sample = fz_double(f);
    ok = s.trace_sample >= 0 && s.trace_sample <= 1 && dir[0] != '\0' &&
         s.max_retries >= 0 &&
         s.log_attempt_max <= ((size_t)1 << 20) &&
         s.max_retries <= JR_RANGE_RETRIES_MAX &&
         s.timeout >= JR_RANGE_TIMEOUT_MIN &&
         s.timeout <= JR_RANGE_TIMEOUT_MAX &&
         s.load_timeout >= JR_RANGE_LOAD_MIN &&
         s.load_timeout <= JR_RANGE_LOAD_MAX &&
         s.memory_limit <= ((size_t)1 << 40) && s.max_payload >= 1 &&
         s.max_payload <= (1u << 30) && s.max_result >= 1 &&
         s.max_result <= (1u << 30) && s.log_level <= JR_LOG_ERROR &&
         s.inflight >= 1 && s.inflight <= JR_RANGE_INFLIGHT_MAX;
    jr_frame_put_settings(&b, &s);
    CHECK(!b.oom);
    CHECK(jr_frame_complete(b.p, b.len, &err) == (long)b.len);
    CHECK(jr_frame_open(&r, b.p) == JR_F_SETTINGS);
    if (jr_frame_get_settings(&r, &d, &err) == 0) {
        CHECK(ok);
        CHECK(strcmp(d.scripts, dir) == 0);
        CHECK(d.max_retries == s.max_retries);
        CHECK(same_f64(d.timeout, s.timeout) &&
              same_f64(d.load_timeout, s.load_timeout));
        CHECK(d.memory_limit == s.memory_limit &&
              d.max_payload == s.max_payload &&
              d.max_result == s.max_result);
        CHECK(d.inflight == s.inflight);
        CHECK(d.durable_steps == s.durable_steps);
        CHECK(d.log_attempt_max == s.log_attempt_max &&
              d.log_echo == s.log_echo && d.tracing == s.tracing &&
              same_f64(d.trace_sample, s.trace_sample));
        CHECK(d.db_url == NULL && d.attach == NULL && d.handler_role == NULL);
        CHECK(d.log_level == s.log_level && d.log_json == s.log_json);
    } else {
        CHECK(!ok && err.code == JR_EPROTO);
    }
    jr_settings_free(&d);
    jr_buf_free(&b);
}

/* A cancel encoded by the master and decoded by the worker: the same id,
 * or refused when it is not one (< 1). */
static void
cancel_round_trip(fz *f)
{
    int64_t id = (int64_t)fz_int(f, 8), d;
    jr_buf b = {0};
    jr_reader r;
    jr_err err;

    jr_frame_put_cancel(&b, id);
    CHECK(!b.oom);
    CHECK(jr_frame_complete(b.p, b.len, &err) == (long)b.len);
    CHECK(jr_frame_open(&r, b.p) == JR_F_CANCEL);
    d = jr_frame_get_cancel(&r, &err);
    CHECK(id >= 1 ? d == id : d == -1 && err.code == JR_EPROTO);
    jr_buf_free(&b);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz f;

    if (size == 0)
        return 0;
    if ((data[0] & 1) == 0) {
        stream(data + 1, size - 1);
        return 0;
    }
    f.p = data + 1;
    f.n = size - 1;
    if ((data[0] & 14) == 8)
        cancel_round_trip(&f);
    else if ((data[0] & 6) == 6)
        settings_round_trip(&f);
    else if (data[0] & 4)
        hello_round_trip(&f);
    else if (data[0] & 2)
        result_round_trip(&f);
    else
        job_round_trip(&f);
    return 0;
}
