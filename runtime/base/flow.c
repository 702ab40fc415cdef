/* flow.c - the flow reader of flow.h: the document's jobs and batch into
 * pushes, the local names resolved, the graph ordered parents first
 * (Kahn's), a cycle found and named. Owns the pushes and their strings;
 * uses jsondom.h and job.h. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/flow.h"
#include "base/jsondom.h"

/* One job as read, before the order is known. */
typedef struct fjob {
    jr_push  p;
    int      node;              /* its object in the document */
    int     *local;             /* parents in the flow: read order */
    int      nlocal;
    int64_t *ext;               /* parents already pushed: ids */
    int      next;
    int      order;             /* its place once sorted, or -1 */
} fjob;

typedef struct reader {
    jr_flow     *f;
    jr_jdoc      doc;
    fjob        *j;
    int          n;
    jr_err      *err;
} reader;

/* Keeps s (may be NULL: out of memory) for jr_flow_free. */
static char *
own(reader *r, char *s)
{
    jr_flow *f = r->f;
    char **grown;

    if (s == NULL)
        return NULL;
    if (f->nowned == f->capowned) {
        int cap = f->capowned ? f->capowned * 2 : 64;
        if ((grown = realloc(f->owned, (size_t)cap * sizeof *grown)) == NULL) {
            free(s);
            return NULL;
        }
        f->owned = grown;
        f->capowned = cap;
    }
    return f->owned[f->nowned++] = s;
}

/* The text of node v (a string: decoded; else as written), kept. */
static const char *
text_of(reader *r, int v)
{
    const jr_jnode *n = &r->doc.n[v];

    if (n->type == JR_JSON_STRING)
        return own(r, jr_jdoc_str(&r->doc, v));
    return own(r, strndup(n->at, n->len));
}

/* 1 if string node v holds \u0000: C would read its text cut short
 * ("step\u0000x" was the job "step"). */
static int
has_nul(const reader *r, int v)
{
    const jr_jnode *n = &r->doc.n[v];
    const char *p = n->at + 1, *end = n->at + n->len - 1;

    for (; p < end; p++)
        if (*p == '\\' && *++p == 'u' && end - p > 4 &&
            strncmp(p + 1, "0000", 4) == 0)
            return 1;
    return 0;
}

static int
oom(reader *r)
{
    return jr_fail(r->err, JR_ENOMEM, "flow: out of memory");
}

/* A number option of job i into *out, in [lo, hi]. */
static int
number(reader *r, int i, int v, const char *key, double lo, double hi,
       double *out)
{
    if (r->doc.n[v].type != JR_JSON_NUMBER)
        return jr_fail(r->err, JR_EINPUT, "flow: job %d: '%s' must be a "
                       "number", i + 1, key);
    *out = strtod(text_of(r, v) ? r->f->owned[r->f->nowned - 1] : "x",
                  NULL);
    if (!(*out >= lo && *out <= hi))
        return jr_fail(r->err, JR_EINPUT, "flow: job %d: '%s' %g is out of "
                       "range", i + 1, key, *out);
    return 0;
}

/* A whole number option of job i into *out, in [lo, hi]: a fraction is
 * refused, not cut. */
static int
whole(reader *r, int i, int v, const char *key, int lo, int hi, int *out)
{
    double d;

    if (number(r, i, v, key, lo, hi, &d) < 0)
        return -1;
    if (d != floor(d))
        return jr_fail(r->err, JR_EINPUT, "flow: job %d: '%s' %g is not a "
                       "whole number", i + 1, key, d);
    *out = (int)d;
    return 0;
}

/* A string option of job i. */
static int
string(reader *r, int i, int v, const char *key, const char **out)
{
    if (r->doc.n[v].type != JR_JSON_STRING)
        return jr_fail(r->err, JR_EINPUT, "flow: job %d: '%s' must be a "
                       "string", i + 1, key);
    if (has_nul(r, v))
        return jr_fail(r->err, JR_EINPUT, "flow: job %d: '%s' holds a NUL "
                       "character (\\u0000)", i + 1, key);
    if ((*out = text_of(r, v)) == NULL)
        return oom(r);
    return 0;
}

/* One key k (value v) of job i. */
static int
job_key(reader *r, int i, int k, int v)
{
    fjob *j = &r->j[i];
    const char *s;

    if (jr_jdoc_is(&r->doc, k, "name"))
        return string(r, i, v, "name", &j->p.name);
    if (jr_jdoc_is(&r->doc, k, "ref"))
        return string(r, i, v, "ref", &r->f->refs[i]);
    if (jr_jdoc_is(&r->doc, k, "payload"))
        return (j->p.payload = text_of(r, v)) ? 0 : oom(r);
    if (jr_jdoc_is(&r->doc, k, "after"))   /* {}: Lua's empty table */
        return r->doc.n[v].type == JR_JSON_ARRAY ||
               (r->doc.n[v].type == JR_JSON_OBJECT &&
                r->doc.n[v].count == 0) ? 0 :
               jr_fail(r->err, JR_EINPUT, "flow: job %d: 'after' must be "
                       "an array", i + 1);
    if (jr_jdoc_is(&r->doc, k, "queue"))
        return string(r, i, v, "queue", &j->p.queue);
    if (jr_jdoc_is(&r->doc, k, "key"))
        return string(r, i, v, "key", &j->p.key);
    if (jr_jdoc_is(&r->doc, k, "on_parent_failure")) {
        if (string(r, i, v, "on_parent_failure", &s) < 0)
            return -1;
        if ((j->p.on_parent_failure = jr_opf_parse(s)) < 0)
            return jr_fail(r->err, JR_EINPUT, "flow: job %d: "
                           "on_parent_failure '%s' is not one of cancel, "
                           "run, dead", i + 1, s);
        return 0;
    }
    if (jr_jdoc_is(&r->doc, k, "priority"))
        return whole(r, i, v, "priority", INT_MIN, INT_MAX, &j->p.priority);
    if (jr_jdoc_is(&r->doc, k, "max_retries"))
        return whole(r, i, v, "max_retries", 0, INT_MAX, &j->p.max_retries);
    if (jr_jdoc_is(&r->doc, k, "run_in"))
        return number(r, i, v, "run_in", -JR_DELAY_MAX, JR_DELAY_MAX,
                      &j->p.run_in);
    if (jr_jdoc_is(&r->doc, k, "run_at"))
        return number(r, i, v, "run_at", 0, JR_TIME_MAX, &j->p.run_at);
    if (jr_jdoc_is(&r->doc, k, "expires_in"))
        return number(r, i, v, "expires_in", 0, JR_DELAY_MAX,
                      &j->p.expires_in);
    if (jr_jdoc_is(&r->doc, k, "expires_at"))
        return number(r, i, v, "expires_at", 0, JR_TIME_MAX,
                      &j->p.expires_at);
    if (jr_jdoc_is(&r->doc, k, "deadline"))
        return number(r, i, v, "deadline", 0, JR_DELAY_MAX, &j->p.deadline);
    if (jr_jdoc_is(&r->doc, k, "traceparent"))  /* checked with the push */
        return string(r, i, v, "traceparent", &j->p.traceparent);
    if (jr_jdoc_is(&r->doc, k, "tracestate"))
        return string(r, i, v, "tracestate", &j->p.tracestate);
    s = text_of(r, k);
    return jr_fail(r->err, JR_EINPUT, "flow: job %d: unknown key '%s' "
                   "(valid: ref, name, payload, after, queue, priority, "
                   "max_retries, run_in, run_at, key, on_parent_failure, "
                   "expires_in, expires_at, deadline, traceparent, "
                   "tracestate)", i + 1, s ? s : "?");
}

/* The keys of job i (object node o). */
static int
job_read(reader *r, int i, int o)
{
    int k;

    if (r->doc.n[o].type != JR_JSON_OBJECT)
        return jr_fail(r->err, JR_EINPUT, "flow: job %d is not an object",
                       i + 1);
    r->j[i].node = o;
    r->j[i].p.max_retries = -1;
    r->j[i].order = -1;
    for (k = r->doc.n[o].first; k >= 0; k = r->doc.n[r->doc.n[k].next].next)
        if (job_key(r, i, k, r->doc.n[k].next) < 0)
            return -1;
    if (r->j[i].p.name == NULL)
        return jr_fail(r->err, JR_EINPUT, "flow: job %d has no name", i + 1);
    if (r->f->refs[i] == NULL)
        r->f->refs[i] = r->j[i].p.name;
    return 0;
}

/* The index of the job whose ref is name, or -1. */
static int
find_ref(reader *r, const char *name)
{
    int i;

    for (i = 0; i < r->n; i++)
        if (strcmp(r->f->refs[i], name) == 0)
            return i;
    return -1;
}

/* Job i's after list into its local and ext parents. */
static int
job_after(reader *r, int i)
{
    fjob *j = &r->j[i];
    int a = jr_jdoc_get(&r->doc, j->node, "after"), v, m, nl = 0, ne = 0;
    const char *ref;

    if (a < 0)
        return 0;
    m = r->doc.n[a].count;
    if (m > JR_AFTER_MAX)
        return jr_fail(r->err, JR_EINPUT, "flow: job '%s': %d parents (at "
                       "most %d)", r->f->refs[i], m, JR_AFTER_MAX);
    j->local = calloc((size_t)m + 1, sizeof *j->local);
    j->ext = calloc((size_t)m + 1, sizeof *j->ext);
    if (j->local == NULL || j->ext == NULL)
        return oom(r);
    for (v = r->doc.n[a].first; v >= 0; v = r->doc.n[v].next) {
        if (r->doc.n[v].type == JR_JSON_NUMBER) {
            const jr_jnode *n = &r->doc.n[v];
            char *end;
            errno = 0;
            j->ext[ne++] = strtoll(n->at, &end, 10);
            if (end != n->at + n->len ||  /* 1.5, 2e3: not cut to an id */
                errno == ERANGE)          /* 2^63: not made 2^63 - 1 */
                return jr_fail(r->err, JR_EINPUT, "flow: job '%s': after: "
                               "%.*s is not a job id (a whole number)",
                               r->f->refs[i], (int)n->len, n->at);
            continue;
        }
        if (r->doc.n[v].type != JR_JSON_STRING || has_nul(r, v) ||
            (ref = text_of(r, v)) == NULL)
            return jr_fail(r->err, JR_EINPUT, "flow: job '%s': after: "
                           "each is a job's ref or an id", r->f->refs[i]);
        if ((j->local[nl++] = find_ref(r, ref)) < 0)
            return jr_fail(r->err, JR_EINPUT, "flow: job '%s': after: "
                           "unknown job '%s'", r->f->refs[i], ref);
    }
    j->nlocal = nl;
    j->p.after = j->ext;
    j->p.nafter = ne;
    return 0;
}

/* Names a cycle among the jobs not ordered (each has a parent among
 * them): follows the first such parent from one until a job comes back,
 * then once more around from there. */
static int
cycle(reader *r)
{
    char msg[400];
    char *seen = calloc((size_t)r->n, 1);
    int i, at, k;
    size_t len;

    if (seen == NULL)
        return oom(r);
    for (i = 0; r->j[i].order >= 0; i++)
        ;
    for (; !seen[i]; i = r->j[i].local[k]) {
        seen[i] = 1;
        for (k = 0; r->j[r->j[i].local[k]].order >= 0; k++)
            ;
    }
    free(seen);
    snprintf(msg, sizeof msg, "%s", r->f->refs[i]);
    at = i;
    do {
        for (k = 0; r->j[r->j[at].local[k]].order >= 0; k++)
            ;
        at = r->j[at].local[k];
        len = strlen(msg);
        snprintf(msg + len, sizeof msg - len, " -> %s", r->f->refs[at]);
    } while (at != i);
    return jr_fail(r->err, JR_EINPUT, "flow: cycle: %s (each waits for the "
                   "next)", msg);
}

/* Orders the jobs parents first (Kahn's): order[i] is job i's place. */
static int
sort_jobs(reader *r)
{
    size_t n = (unsigned)r->n;
    int *left = calloc(n, sizeof *left);
    int *start = calloc(n + 1, sizeof *start);
    int *kids = NULL, *queue = calloc(n, sizeof *queue);
    int i, k, head = 0, tail = 0;
    size_t edges = 0;

    for (i = 0; i < r->n; i++)
        edges += (unsigned)r->j[i].nlocal;
    kids = calloc(edges + 1, sizeof *kids);
    if (left == NULL || start == NULL || kids == NULL || queue == NULL) {
        free(left), free(start), free(kids), free(queue);
        return oom(r);
    }
    for (i = 0; i < r->n; i++)
        for (k = 0; k < r->j[i].nlocal; k++)
            start[r->j[i].local[k] + 1]++;
    for (i = 0; i < r->n; i++)
        start[i + 1] += start[i];
    for (i = 0; i < r->n; i++)      /* queue counts the kids placed */
        for (k = 0; k < r->j[i].nlocal; k++) {
            int p = r->j[i].local[k];
            kids[start[p] + queue[p]++] = i;
        }
    memset(queue, 0, n * sizeof *queue);
    for (i = 0; i < r->n; i++)
        if ((left[i] = r->j[i].nlocal) == 0)
            queue[tail++] = i;
    while (head < tail) {
        i = queue[head];
        r->j[i].order = head++;
        for (k = start[i]; k < start[i + 1]; k++)
            if (--left[kids[k]] == 0)
                queue[tail++] = kids[k];
    }
    free(left), free(start), free(kids), free(queue);
    return tail == r->n ? 0 : cycle(r);
}

/* The batch object b, as the flow's batch. */
static int
batch_read(reader *r, int b)
{
    jr_batch_spec *s = &r->f->batch;
    int k, v;

    if (r->doc.n[b].type != JR_JSON_OBJECT)
        return jr_fail(r->err, JR_EINPUT, "flow: 'batch' must be an "
                       "object");
    for (k = r->doc.n[b].first; k >= 0; k = r->doc.n[v].next) {
        const char **out = NULL;
        v = r->doc.n[k].next;
        if (jr_jdoc_is(&r->doc, k, "on_complete"))
            out = &s->on_complete;
        else if (jr_jdoc_is(&r->doc, k, "on_success"))
            out = &s->on_success;
        else if (jr_jdoc_is(&r->doc, k, "queue"))
            out = &s->queue;
        else if (jr_jdoc_is(&r->doc, k, "payload"))
            s->payload = text_of(r, v);
        else if (jr_jdoc_is(&r->doc, k, "results"))
            s->results = r->doc.n[v].type == JR_JSON_TRUE;
        else
            return jr_fail(r->err, JR_EINPUT, "flow: batch: unknown key "
                           "'%s' (valid: on_complete, on_success, payload, "
                           "queue, results)", text_of(r, k) ?
                           r->f->owned[r->f->nowned - 1] : "?");
        if (out != NULL && (r->doc.n[v].type != JR_JSON_STRING ||
                            has_nul(r, v) ||
                            (*out = text_of(r, v)) == NULL))
            return jr_fail(r->err, JR_EINPUT, "flow: batch: '%s' must be "
                           "a job name", text_of(r, k) ?
                           r->f->owned[r->f->nowned - 1] : "?");
    }
    r->f->has_batch = 1;
    return 0;
}

/* A job's push check failed: its message named with the job's ref, once
 * (the check's own "job 'NAME': " is the ref's when they are alike). */
static int
check_fail(reader *r, const char *ref)
{
    char head[300];

    snprintf(head, sizeof head, "job '%s': ", ref);
    if (strncmp(r->err->msg, head, strlen(head)) == 0)
        return jr_err_prefix(r->err, "flow");
    return jr_err_prefix(r->err, "flow: job '%s'", ref);
}

/* The jobs, in sorted order, into f->jobs; refs follow. */
static int
place(reader *r)
{
    jr_flow *f = r->f;
    const char **refs = calloc((size_t)r->n, sizeof *refs);
    int i, k, *local;

    if ((f->jobs = calloc((size_t)r->n, sizeof *f->jobs)) == NULL ||
        refs == NULL) {
        free(refs);
        return oom(r);
    }
    for (i = 0; i < r->n; i++) {
        fjob *j = &r->j[i];
        jr_push *p = &f->jobs[j->order];
        *p = j->p;
        refs[j->order] = f->refs[i];
        for (k = 0, local = j->local; k < j->nlocal; k++)
            local[k] = r->j[local[k]].order;
        p->after_local = local;
        p->nafter_local = j->nlocal;
        p->batch_new = f->has_batch ? &f->batch : NULL;
    }
    free(f->refs);
    f->refs = refs;
    f->n = r->n;
    for (i = 0; i < r->n; i++)
        if (jr_push_check(&f->jobs[i], 0, r->err) < 0)
            return check_fail(r, refs[i]);
    return 0;
}

/* The jobs array a and the batch (b, or -1) of the document. */
static int
read_all(reader *r, int a, int b)
{
    int i, v;

    if (a < 0 || r->doc.n[a].type != JR_JSON_ARRAY)
        return jr_fail(r->err, JR_EINPUT, "flow: no 'jobs' array");
    if ((r->n = r->doc.n[a].count) == 0 || r->n > JR_FLOW_MAX)
        return jr_fail(r->err, JR_EINPUT, "flow: %d jobs (a flow has 1 to "
                       "%d)", r->n, JR_FLOW_MAX);
    r->j = calloc((size_t)r->n, sizeof *r->j);
    r->f->refs = calloc((size_t)r->n, sizeof *r->f->refs);
    if (r->j == NULL || r->f->refs == NULL)
        return oom(r);
    for (i = 0, v = r->doc.n[a].first; v >= 0; v = r->doc.n[v].next, i++)
        if (job_read(r, i, v) < 0)
            return -1;
    for (i = 0; i < r->n; i++)
        if (find_ref(r, r->f->refs[i]) != i)
            return jr_fail(r->err, JR_EINPUT, "flow: two jobs have the ref "
                           "'%s' (give each a ref of its own)",
                           r->f->refs[i]);
    for (i = 0; i < r->n; i++)
        if (job_after(r, i) < 0)
            return -1;
    if (b >= 0 && batch_read(r, b) < 0)
        return -1;
    return sort_jobs(r) < 0 ? -1 : place(r);
}

/* The flow object's keys are jobs and batch, each once: another
 * ("bacth") would be a batch silently dropped, a second one a part of
 * the flow. */
static int
top_keys(reader *r)
{
    int k, jobs = 0, batch = 0;

    for (k = r->doc.n[0].first; k >= 0; k = r->doc.n[r->doc.n[k].next].next)
        if (!(jr_jdoc_is(&r->doc, k, "jobs") && ++jobs) &&
            !(jr_jdoc_is(&r->doc, k, "batch") && ++batch))
            return jr_fail(r->err, JR_EINPUT, "flow: unknown key '%s' "
                           "(valid: jobs, batch)", text_of(r, k) ?
                           r->f->owned[r->f->nowned - 1] : "?");
    if (jobs > 1 || batch > 1)
        return jr_fail(r->err, JR_EINPUT, "flow: '%s' is given twice",
                       jobs > 1 ? "jobs" : "batch");
    return 0;
}

int
jr_flow_parse(jr_flow *f, const char *text, size_t len, jr_err *err)
{
    reader r = {f, {0}, NULL, 0, err};
    int a, b = -1, i, rc;

    memset(f, 0, sizeof *f);
    if (jr_jdoc_parse(&r.doc, text, len, "flow", err) < 0)
        return -1;
    a = 0;
    if (r.doc.n[0].type == JR_JSON_OBJECT) {
        a = jr_jdoc_get(&r.doc, 0, "jobs");
        b = jr_jdoc_get(&r.doc, 0, "batch");
    }
    rc = r.doc.n[0].type == JR_JSON_OBJECT ? top_keys(&r) : 0;
    if (rc == 0)
        rc = read_all(&r, a, b);
    for (i = 0; i < r.n && r.j != NULL; i++) {
        if (rc == 0)
            own(&r, (char *)r.j[i].local);  /* after_local points there */
        else
            free(r.j[i].local);
        own(&r, (char *)r.j[i].ext);
    }
    free(r.j);
    jr_jdoc_free(&r.doc);
    if (rc < 0)
        jr_flow_free(f);
    return rc;
}

void
jr_flow_free(jr_flow *f)
{
    int i;

    for (i = 0; i < f->nowned; i++)
        free(f->owned[i]);
    free(f->owned);
    free(f->jobs);
    free(f->refs);
    memset(f, 0, sizeof *f);
}
