/* heldlines.c - successes whose lines their worker holds (jr_result.held;
 * the worker's jrloglazy.c): a plain success the master said it deletes
 * comes back without its lines, and is recorded as a success with
 * statements is, its end told once recorded. Its row deleted, the worker
 * hears it drops the lines; its row left running for them (a wait's
 * mark, jr_result.lines_wanted), the job is kept here and the worker
 * asked for them (JR_F_LINES, a frame a worker a cycle): they come as
 * the job's result again (held 2), recorded with the success. A worker
 * gone by then took the lines with it: the success is recorded without
 * them. Uses master_int.h, frame.h. */
#include <stdlib.h>
#include <string.h>

#include <event2/bufferevent.h>

#include "base/log.h"
#include "master/master_int.h"
#include "worker/frame.h"

typedef struct asked {          /* a kept success whose lines are asked */
    int64_t id;
    int     worker;
    jr_job *job;                /* owned */
    double  secs;
} asked;

typedef struct word {           /* what a worker hears of a held success */
    int64_t id;
    int     worker;
    int     want;               /* 1: send the lines; 0: drop them */
    int     sent;
} word;

struct jr_heldq {
    asked *a;
    int    na, capa;
    word  *w;
    int    nw, capw;
};

static struct jr_heldq *
queue(master *m)
{
    if (m->held == NULL)
        m->held = calloc(1, sizeof *m->held);
    return m->held;
}

/* Makes room for one more of n (cap *cap, size each) in *p. -1: out of
 * memory. */
static int
room(void *pp, int n, int *cap, size_t size)
{
    void **p = pp, *q;
    int c;

    if (n < *cap)
        return 0;
    c = *cap ? *cap * 2 : 16;
    if ((q = realloc(*p, (size_t)c * size)) == NULL)
        return -1;
    *p = q;
    *cap = c;
    return 0;
}

/* Records the success of job (owned; its seconds secs) without lines:
 * its worker is gone with them. */
static void
without_lines(master *m, int64_t id, jr_job *job, double secs,
              const char *why)
{
    jr_result r;

    memset(&r, 0, sizeof r);
    r.id = id;
    r.kind = JR_DONE;
    r.secs = secs;
    jr_log(JR_LOG_WARN, "job %lld: %s before it sent the lines of its "
           "kept success; recorded without them", (long long)id, why);
    m->flow_ended = job->flow != 0;
    if (!jr_pending_job(m, &r, NULL, job, secs))
        free(job);
}

void
jr_held_recorded(master *m, pending *p)
{
    struct jr_heldq *q = queue(m);
    int want = p->r.lines_wanted != NULL && *p->r.lines_wanted;

    if (q == NULL || room(&q->w, q->nw, &q->capw, sizeof *q->w) < 0 ||
        (want && room(&q->a, q->na, &q->capa, sizeof *q->a) < 0)) {
        jr_log(JR_LOG_ERROR, "job %lld: out of memory keeping the word on "
               "its lines", (long long)p->r.id);
        if (want) {             /* its row stays running: recorded bare */
            without_lines(m, p->r.id, p->job, p->secs,
                          "out of memory");
            p->job = NULL;
        } else {
            jr_pending_recorded(m, p);
        }
        return;
    }
    q->w[q->nw].id = p->r.id;
    q->w[q->nw].worker = p->r.worker;
    q->w[q->nw].want = want;
    q->w[q->nw++].sent = 0;
    if (!want) {
        jr_pending_recorded(m, p);      /* deleted: its end told now */
        return;
    }
    q->a[q->na].id = p->r.id;
    q->a[q->na].worker = p->r.worker;
    q->a[q->na].job = p->job;
    q->a[q->na++].secs = p->secs;
    p->job = NULL;
}

/* The index of the asked success id, or -1. */
static int
asked_at(const struct jr_heldq *q, int64_t id)
{
    int i;

    for (i = 0; i < q->na; i++)
        if (q->a[i].id == id)
            return i;
    return -1;
}

static void
unask(struct jr_heldq *q, int i)
{
    q->a[i] = q->a[--q->na];
}

static wk *
worker_of(master *m, int id)
{
    wk *w;

    for (w = m->workers; w != NULL; w = w->next)
        if (w->id == id)
            return w->bev != NULL ? w : NULL;
    return NULL;
}

void
jr_held_send(master *m)
{
    struct jr_heldq *q = m->held;
    int i, k, n, at, who;
    size_t start;
    wk *w;

    if (q == NULL || q->nw == 0)
        return;
    for (i = 0; i < q->nw; i++) {
        if (q->w[i].sent)
            continue;
        who = q->w[i].worker;
        if ((w = worker_of(m, who)) == NULL) {
            for (k = i; k < q->nw; k++) {
                if (q->w[k].sent || q->w[k].worker != who)
                    continue;
                q->w[k].sent = 1;
                if (q->w[k].want && (at = asked_at(q, q->w[k].id)) >= 0) {
                    without_lines(m, q->a[at].id, q->a[at].job,
                                  q->a[at].secs, "its worker left");
                    unask(q, at);
                }
            }
            continue;
        }
        for (n = 0, k = i; k < q->nw; k++)
            n += !q->w[k].sent && q->w[k].worker == who;
        jr_buf_reset(&m->out);
        start = jr_frame_begin(&m->out, JR_F_LINES);
        jr_put_i32(&m->out, n);
        for (k = i; k < q->nw; k++)     /* in the order they came */
            if (!q->w[k].sent && q->w[k].worker == who) {
                jr_put_i64(&m->out, q->w[k].id);
                jr_put_u8(&m->out, (unsigned)q->w[k].want);
                q->w[k].sent = 1;
            }
        jr_frame_end(&m->out, start);
        if (!m->out.oom)
            bufferevent_write(w->bev, m->out.p, m->out.len);
    }
    q->nw = 0;
}

void
jr_held_reply(master *m, wk *w, jr_result *res, void *mem)
{
    struct jr_heldq *q = m->held;
    int at = q != NULL ? asked_at(q, res->id) : -1;
    asked a;

    if (at < 0) {
        jr_log(JR_LOG_WARN, "worker %d: lines of job %lld, not asked for",
               w->id, (long long)res->id);
        free(mem);
        return;
    }
    a = q->a[at];
    unask(q, at);
    res->held = 0;
    res->lines_wanted = NULL;
    res->worker = w->id;
    res->secs = a.secs;
    m->flow_ended = a.job->flow != 0;
    if (!jr_pending_job(m, res, mem, a.job, a.secs))
        free(a.job);
    jr_master_kick(m);
}

int
jr_held_asked(const master *m)
{
    int i, n = m->held != NULL ? m->held->na : 0;

    for (i = 0; i < m->nres; i++)       /* a held success not recorded */
        n += m->res[i].r.held == 1;
    for (i = 0; i < m->ninflight; i++)
        n += m->inflight[i].r.held == 1;
    return n;
}

void
jr_held_abandon(master *m)
{
    struct jr_heldq *q = m->held;
    int i;

    if (q == NULL)
        return;
    for (i = 0; i < q->na; i++)
        without_lines(m, q->a[i].id, q->a[i].job, q->a[i].secs,
                      "the runner stopped");
    q->na = 0;
}

void
jr_held_free(master *m)
{
    struct jr_heldq *q = m->held;
    int i;

    if (q == NULL)
        return;
    for (i = 0; i < q->na; i++)
        free(q->a[i].job);
    free(q->a);
    free(q->w);
    free(q);
    m->held = NULL;
}
