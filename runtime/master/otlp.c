/* otlp.c - the export of spans (docs/tracing.md): the workers' spans
 * (JR_F_SPANS: one compact record an attempt, spanrec.h) go into a
 * bounded queue as they came, and a thread of the runner turns them into
 * OTLP/protobuf (spanpb.h), or OTLP/JSON with tracing.protocol = "json",
 * and posts them in batches to the collector's /v1/traces with
 * libcurl. The loop only appends under a mutex: it never encodes, nor
 * waits on the collector. A full queue (the collector slow or down) drops the new
 * spans, counted; a request that fails (no answer in time, not 2xx)
 * drops its batch, counted; no job ever waits for either. Uses
 * master_int.h, frame.h, config.h, log.h, version.h. */
#define _GNU_SOURCE             /* syscall, SCHED_BATCH */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/resource.h>
#include <sys/syscall.h>

#include <curl/curl.h>

#include "master/master_int.h"
#include "base/jsontext.h"
#include "base/log.h"
#include "base/spanpb.h"
#include "base/spanrec.h"
#include "base/trace.h"
#include "base/version.h"

#define JR_OTLP_SVC 255         /* OTEL_SERVICE_NAME's bytes at most */

#define SPAN_BYTES   2048u      /* bytes a queued span may take, on
                                   average (tracing.queue's of them) */
#define BATCH_SPANS  512        /* a batch goes at once with this many */
#define BATCH_DELAY  0.2        /* else this long after its first span */
#define POST_TIMEOUT 5000L      /* ms a request may take */
#define WARN_EVERY   60.0       /* seconds between warnings of failures */
#define BG_NICE      10         /* the export thread's nice over the
                                   runner's */

struct jr_otlp {
    pthread_t          th;
    pthread_mutex_t    mu;
    pthread_cond_t     cv;
    jr_buf             q;       /* records (spanrec.h), one after
                                   another */
    int                qn;      /* spans in q */
    int                cap;     /* tracing.queue */
    int                stop;
    char              *url;
    char              *shown;   /* url for the log, its user:password
                                   masked */
    struct curl_slist *headers;
    char               service[JR_OTLP_SVC * 6 + 64]; /* its attribute,
                                                        as JSON */
    char               svc[JR_OTLP_SVC + 1];           /* service.name */
    int                proto;           /* JR_OTLP_* */
    atomic_long        exported;
    atomic_long        dropped;
    atomic_long        failed;  /* requests */
    double             warned;  /* mono time of the last warning */
    _Atomic double     stop_at; /* mono time of the stop, 0: running */
    atomic_long        full;    /* of dropped: the queue was full */
    long               full_told;   /* of full: said in the log */
    double             full_warned; /* mono time it was said last */
};

#define STOP_GRACE   1.0        /* seconds a request may go on at a stop */

/* libcurl's progress callback: a request still out STOP_GRACE after the
 * stop is abandoned (a silent collector must not hold the exit). */
static int
on_progress(void *arg, curl_off_t dt, curl_off_t dn, curl_off_t ut,
            curl_off_t un)
{
    jr_otlp *x = arg;
    double at = atomic_load(&x->stop_at);

    (void)dt, (void)dn, (void)ut, (void)un;
    return at > 0 && jr_mono() > at + STOP_GRACE;
}

static size_t
discard(char *p, size_t size, size_t n, void *arg)
{
    (void)p;
    (void)arg;
    return size * n;
}

/* The request's body: the records (take) as OTLP/JSON spans, written
 * straight into it. 0, or -1 (a malformed record, or out of memory). */
static int
body_of(const jr_otlp *x, const jr_buf *take, int n, jr_buf *body)
{
    static const char head[] =
        "{\"resourceSpans\":[{\"resource\":{\"attributes\":[";
    static const char scope[] = "]},\"scopeSpans\":[{\"scope\":{\"name\":"
        "\"jobrunner\",\"version\":\"" JR_VERSION "\"},\"spans\":[";

    jr_buf_reset(body);
    jr_buf_put(body, head, sizeof head - 1);
    jr_buf_put(body, x->service, strlen(x->service));
    jr_buf_put(body, scope, sizeof scope - 1);
    if (jr_spanrec_json(take->p, take->len, body, 0) < 0) {
        jr_log(JR_LOG_ERROR, "tracing: %d spans dropped: a malformed "
               "record (a bug: report it)", n);
        return -1;
    }
    jr_buf_put(body, "]}]}]}", 6);
    if (body->oom) {            /* a next batch may fit */
        jr_buf_free(body);
        return -1;
    }
    return 0;
}

#define PB_ROOM (JR_OTLP_SVC + 256) /* bytes kept before the spans for the
                                   request's head */

/* a length-delimited field's tag and length at p */
static char *
pb_field(char *p, unsigned num, size_t len)
{
    return jr_spanpb_varint(jr_spanpb_varint(p, (uint64_t)num << 3 | 2), len);
}

/* The request's body as OTLP/protobuf: the spans written after PB_ROOM
 * bytes, then the ExportTraceServiceRequest's head (its ResourceSpans,
 * the Resource's service.name, the ScopeSpans and its scope) put right
 * before them; *at is where the body starts. 0, or -1. */
static int
pb_body_of(const jr_otlp *x, const jr_buf *take, int n, jr_buf *body,
           size_t *at)
{
    char head[PB_ROOM], res[JR_OTLP_SVC + 64], scope[64], *p;
    size_t spans, sl = strlen(x->svc), nres, nscope, nss, nrs;
    static const char name[] = "jobrunner", ver[] = JR_VERSION;

    jr_buf_reset(body);
    if (jr_buf_room(body, PB_ROOM) == NULL)
        return -1;
    body->len = PB_ROOM;
    if (jr_spanpb_recs(take->p, take->len, body) < 0) {
        if (!body->oom)
            jr_log(JR_LOG_ERROR, "tracing: %d spans dropped: a malformed "
                   "record (a bug: report it)", n);
        if (body->oom)          /* a next batch may fit */
            jr_buf_free(body);
        return -1;
    }
    spans = body->len - PB_ROOM;
    /* Resource { attributes: KeyValue { key, value { stringValue } } } */
    p = pb_field(res, 1, 1 + 1 + 12 + 1 + jr_spanpb_vlen(1 + jr_spanpb_vlen(sl) + sl)
                 + 1 + jr_spanpb_vlen(sl) + sl);
    p = pb_field(p, 1, 12);
    memcpy(p, "service.name", 12), p += 12;
    p = pb_field(p, 2, 1 + jr_spanpb_vlen(sl) + sl);
    p = pb_field(p, 1, sl);
    memcpy(p, x->svc, sl), p += sl;
    nres = (size_t)(p - res);
    /* InstrumentationScope { name, version } */
    p = pb_field(scope, 1, sizeof name - 1);
    memcpy(p, name, sizeof name - 1), p += sizeof name - 1;
    p = pb_field(p, 2, sizeof ver - 1);
    memcpy(p, ver, sizeof ver - 1), p += sizeof ver - 1;
    nscope = (size_t)(p - scope);
    nss = 1 + jr_spanpb_vlen(nscope) + nscope + spans;
    nrs = 1 + jr_spanpb_vlen(nres) + nres + 1 + jr_spanpb_vlen(nss) + nss - spans;
    p = pb_field(head, 1, nrs + spans);         /* resource_spans */
    p = pb_field(p, 1, nres);                   /* resource */
    memcpy(p, res, nres), p += nres;
    p = pb_field(p, 2, nss);                    /* scope_spans */
    p = pb_field(p, 1, nscope);                 /* scope */
    memcpy(p, scope, nscope), p += nscope;
    *at = PB_ROOM - (size_t)(p - head);
    memcpy(body->p + *at, head, (size_t)(p - head));
    return 0;
}

/* Posts the request's body (n spans, from at) in one request; 0 if the
 * collector took them. */
static int
post(jr_otlp *x, CURL *h, const jr_buf *body, size_t at, int n)
{
    char status[300];
    long code = 0;
    CURLcode rc;

    curl_easy_setopt(h, CURLOPT_POSTFIELDS, body->p + at);
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE,
                     (curl_off_t)(body->len - at));
    rc = curl_easy_perform(h);
    if (rc == CURLE_OK)
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
    if (rc == CURLE_OK && code >= 200 && code < 300)
        return 0;
    if (jr_mono() - x->warned >= WARN_EVERY || x->warned == 0) {
        x->warned = jr_mono();
        if (rc != CURLE_OK)
            snprintf(status, sizeof status, "%s", curl_easy_strerror(rc));
        else
            snprintf(status, sizeof status, "HTTP status %ld", code);
        jr_log(JR_LOG_WARN, "tracing: %d span%s dropped: the collector at "
               "%s: %s (counted in jobrunner_spans_dropped_total; warned "
               "once a minute)", n, n == 1 ? "" : "s", x->shown, status);
    }
    return -1;
}

/* The spans dropped with the queue full since the log last said so, said
 * once a minute, and at the stop (a short run's are in its log too). */
static void
warn_full(jr_otlp *x, int stop)
{
    long n = atomic_load(&x->full) - x->full_told;

    if (n <= 0 || (!stop && x->full_warned != 0 &&
                   jr_mono() - x->full_warned < WARN_EVERY))
        return;
    x->full_told += n;
    x->full_warned = jr_mono();
    jr_log(JR_LOG_WARN, "tracing: %ld span%s dropped: the export queue was "
           "full (tracing.queue = %d; counted in "
           "jobrunner_spans_dropped_total; warned once a minute)", n,
           n == 1 ? "" : "s", x->cap);
}

/* The export is the runner's background work: its thread runs below the
 * loop, the database thread and the workers (BG_NICE: about a tenth of
 * their weight on a core they all want) and does not preempt them when
 * it wakes (SCHED_BATCH: a full batch or the collector's answer waits
 * for a core's next turn). A drain is a pipeline of those threads with
 * idle gaps; a request of 512 spans (a quarter of a millisecond with
 * its loopback copies) woken at once had taken a core from one of them
 * and its step waited behind the request. The spans go in the gaps
 * instead; on a machine with no core to spare they wait in the queue,
 * and past tracing.queue are dropped, counted, as before. */
static void
background(void)
{
#if defined(__linux__) && defined(SCHED_BATCH)
    struct sched_param sp = {0};
    id_t tid = (id_t)syscall(SYS_gettid);
    int nice;

    (void)pthread_setschedparam(pthread_self(), SCHED_BATCH, &sp);
    errno = 0;
    nice = getpriority(PRIO_PROCESS, tid);
    if (errno == 0 && nice < 19)    /* Linux: the thread's own nice */
        (void)setpriority(PRIO_PROCESS, tid,
                          nice + BG_NICE > 19 ? 19 : nice + BG_NICE);
#endif
}

static void *
run(void *arg)
{
    jr_otlp *x = arg;
    jr_buf take = {0}, body = {0};
    CURL *h = curl_easy_init();
    struct timespec until;
    size_t at;
    int n, stop;

    background();
    if (h != NULL) {
        curl_easy_setopt(h, CURLOPT_URL, x->url);
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, x->headers);
        curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, POST_TIMEOUT);
        curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, 2000L);
        curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, discard);
        curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
        curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
        curl_easy_setopt(h, CURLOPT_XFERINFODATA, x);
        curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
    }
    pthread_mutex_lock(&x->mu);
    for (;;) {
        while (!x->stop && x->qn == 0)
            pthread_cond_wait(&x->cv, &x->mu);
        if (!x->stop && x->qn < BATCH_SPANS) {  /* company, a while */
            clock_gettime(CLOCK_REALTIME, &until);
            until.tv_nsec += (long)(BATCH_DELAY * 1e9);
            if (until.tv_nsec >= 1000000000L) {
                until.tv_sec++;
                until.tv_nsec -= 1000000000L;
            }
            while (!x->stop && x->qn < BATCH_SPANS &&
                   pthread_cond_timedwait(&x->cv, &x->mu, &until) == 0)
                ;
        }
        jr_buf_reset(&take);
        {                       /* swap: the loop appends to a new one */
            jr_buf t = take;
            take = x->q;
            x->q = t;
        }
        n = x->qn;
        x->qn = 0;
        stop = x->stop;
        pthread_mutex_unlock(&x->mu);
        if (n > 0) {            /* the body made here, in batches */
            at = 0;
            if (h != NULL &&
                (x->proto == JR_OTLP_JSON ? body_of(x, &take, n, &body)
                 : pb_body_of(x, &take, n, &body, &at)) == 0 &&
                post(x, h, &body, at, n) == 0)
                atomic_fetch_add(&x->exported, n);
            else
                atomic_fetch_add(&x->dropped, n), atomic_fetch_add(&x->failed,
                                                                   1);
        }
        warn_full(x, 0);
        pthread_mutex_lock(&x->mu);
        if (stop && x->qn == 0)
            break;
    }
    pthread_mutex_unlock(&x->mu);
    warn_full(x, 1);
    if (h != NULL)
        curl_easy_cleanup(h);
    jr_buf_free(&take);
    jr_buf_free(&body);
    return NULL;
}

jr_otlp *
jr_otlp_new(const jr_config *c, jr_err *err)
{
    jr_otlp *x;
    const char *svc = getenv("OTEL_SERVICE_NAME");
    size_t n;
    int i;

    if (c->trace_endpoint == NULL)
        return NULL;
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK ||
        (x = calloc(1, sizeof *x)) == NULL) {
        jr_fail(err, JR_ENOMEM, "tracing: cannot start the export");
        return NULL;
    }
    x->cap = c->trace_queue > 0 ? c->trace_queue : JR_TRACE_QUEUE;
    n = strlen(c->trace_endpoint);
    while (n > 0 && c->trace_endpoint[n - 1] == '/')
        n--;
    if ((x->url = malloc(n + 16)) != NULL)
        snprintf(x->url, n + 16, "%.*s/v1/traces", (int)n, c->trace_endpoint);
    if (x->url != NULL && (x->shown = malloc(n + 20)) != NULL) {
        const char *host = strstr(x->url, "://") + 3;
        const char *at = strchr(host, '@'), *slash = strchr(host, '/');
        if (at != NULL && (slash == NULL || at < slash))  /* user:password@ */
            snprintf(x->shown, n + 20, "%.*s***%s", (int)(host - x->url),
                     x->url, at);
        else
            snprintf(x->shown, n + 20, "%s", x->url);
    }
    x->proto = c->trace_protocol;
    x->headers = curl_slist_append(NULL, x->proto == JR_OTLP_JSON ?
                                   "Content-Type: application/json" :
                                   "Content-Type: application/x-protobuf");
    if (x->headers != NULL) {   /* the body at once: libcurl waits for a
                                   "100 Continue" before a body over 1 MiB
                                   (a backlog taken at once) */
        struct curl_slist *l = curl_slist_append(x->headers, "Expect:");
        if (l == NULL)
            curl_slist_free_all(x->headers);
        x->headers = l;
    }
    for (i = 0; x->headers != NULL && i < c->trace_nheaders; i++) {
        struct curl_slist *l = curl_slist_append(x->headers,
                                                 c->trace_headers[i]);
        if (l == NULL) {
            curl_slist_free_all(x->headers);
            x->headers = NULL;
        } else {
            x->headers = l;
        }
    }
    {
        jr_span s = {0};        /* the resource's attribute, escaped */
        if (svc != NULL && strlen(svc) > JR_OTLP_SVC) {
            jr_log(JR_LOG_WARN, "tracing: OTEL_SERVICE_NAME has %zu bytes, "
                   "over %d: service.name is 'jobrunner'", strlen(svc),
                   JR_OTLP_SVC);
            svc = NULL;
        }
        jr_span_str(&s, "service.name", svc && *svc ? svc : "jobrunner");
        if (!s.attrs.oom && s.attrs.len < sizeof x->service)
            snprintf(x->service, sizeof x->service, "%.*s",
                     (int)s.attrs.len - 1, s.attrs.p + 1);
        jr_span_free(&s);
        snprintf(x->svc, sizeof x->svc, "%s", svc && *svc ? svc : "jobrunner");
        for (n = 0; x->svc[n] != '\0';) {  /* protobuf's: UTF-8 as it
                                               is, as in the JSON */
            size_t k = jr_jsontext_utf8_len((unsigned char *)x->svc + n,
                                            strlen(x->svc + n));
            if (k == 0)
                x->svc[n] = '?', k = 1;
            n += k;
        }
    }
    pthread_mutex_init(&x->mu, NULL);
    pthread_cond_init(&x->cv, NULL);
    if (x->url == NULL || x->shown == NULL || x->headers == NULL ||
        pthread_create(&x->th, NULL, run, x) != 0) {
        pthread_mutex_destroy(&x->mu);
        pthread_cond_destroy(&x->cv);
        curl_slist_free_all(x->headers);
        free(x->url);
        free(x->shown);
        free(x);
        jr_fail(err, JR_ENOMEM, "tracing: cannot start the export thread");
        return NULL;
    }
    jr_log(JR_LOG_INFO, "tracing: spans go to %s (sample %g, OTLP/%s)",
           x->shown, c->trace_sample, x->proto == JR_OTLP_JSON ? "JSON" :
           "protobuf");
    return x;
}

void
jr_otlp_add(jr_otlp *x, const char *recs, size_t len, int n)
{
    if (x == NULL)
        return;
    pthread_mutex_lock(&x->mu);
    if (x->qn + n > x->cap ||
        x->q.len + len > (size_t)x->cap * SPAN_BYTES) {
        pthread_mutex_unlock(&x->mu);
        atomic_fetch_add(&x->dropped, n);
        atomic_fetch_add(&x->full, n);
        return;
    }
    jr_buf_put(&x->q, recs, len);
    if (x->q.oom) {             /* the queue is unusable: start again */
        jr_buf_free(&x->q);
        atomic_fetch_add(&x->dropped, x->qn + n);
        x->qn = 0;
    } else if ((x->qn += n) == n ||
               (x->qn >= BATCH_SPANS && x->qn - n < BATCH_SPANS)) {
        /* told once each: the thread reads qn before it waits, and
         * while it waits for a core the adds go on, not signalling */
        pthread_cond_signal(&x->cv);
    }
    pthread_mutex_unlock(&x->mu);
}

void
jr_otlp_metrics(const jr_otlp *x, jr_buf *b)
{
    char line[512];
    int n;

    n = snprintf(line, sizeof line,
                 "# HELP jobrunner_spans_exported_total Spans the collector "
                 "took.\n# TYPE jobrunner_spans_exported_total counter\n"
                 "jobrunner_spans_exported_total %ld\n"
                 "# HELP jobrunner_spans_dropped_total Spans dropped: the "
                 "export queue full, or the collector down or refusing.\n"
                 "# TYPE jobrunner_spans_dropped_total counter\n"
                 "jobrunner_spans_dropped_total %ld\n",
                 x ? atomic_load(&x->exported) : 0L,
                 x ? atomic_load(&x->dropped) : 0L);
    jr_buf_put(b, line, (size_t)n);
    n = snprintf(line, sizeof line,
                 "# HELP jobrunner_span_exports_failed_total Export requests "
                 "that failed (their spans are dropped).\n"
                 "# TYPE jobrunner_span_exports_failed_total counter\n"
                 "jobrunner_span_exports_failed_total %ld\n",
                 x ? atomic_load(&x->failed) : 0L);
    jr_buf_put(b, line, (size_t)n);
}

void
jr_otlp_free(jr_otlp *x)
{
    if (x == NULL)
        return;
    atomic_store(&x->stop_at, jr_mono());
    pthread_mutex_lock(&x->mu);
    x->stop = 1;
    pthread_cond_signal(&x->cv);
    pthread_mutex_unlock(&x->mu);
    pthread_join(x->th, NULL);
    pthread_mutex_destroy(&x->mu);
    pthread_cond_destroy(&x->cv);
    curl_slist_free_all(x->headers);
    jr_buf_free(&x->q);
    free(x->url);
    free(x->shown);
    free(x);
}
