/* clientwait.c - jr_client_wait: waits on jobs' outcomes without polling
 * the database in a loop. One read marks the jobs that have not ended
 * (kept after success for result_ttl) and says where each stands; then it
 * sleeps on the backend's finished descriptor (PostgreSQL's LISTEN,
 * SQLite's WAL watch) and reads the jobs again only when one of them may
 * have ended. Owns the outcomes of the last wait. Uses client_int.h,
 * backend.h. */
#include <math.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/job.h"
#include "base/util.h"
#include "client/client_int.h"
#include "client/jobrunner.h"

#define NOTES 256               /* ended ids read from one wake-up */
#define SAFETY 60.0             /* seconds between reads when nothing woke */
#define NOFD_EVERY 1.0          /* seconds between reads without a
                                   descriptor (SQLite off Linux) */
#define MIN_GAP 0.02            /* seconds between two reads (SQLite wakes
                                   at every commit) */
#define SETTLE 0.02             /* after a wake-up that showed no change,
                                   looks again after this, doubling up */
#define SETTLE_MAX 0.7          /* to this */

void
jr_clientint_wait_free(jr_client *c)
{
    int i;

    for (i = 0; i < c->nouts; i++) {
        free(c->outs[i].result);
        free(c->outs[i].error);
    }
    free(c->outs);
    c->outs = NULL;
    c->nouts = 0;
}

static int
ended(int state)
{
    return state == JR_STATE_COMPLETED || state == JR_STATE_DEAD ||
           state == JR_STATE_CANCELLED;
}

/* Reads the outcomes of the jobs of c->outs that have not ended (all of
 * them the first time, marking them with keep). Returns how many have
 * not ended, or -1. */
static int
reread(jr_client *c, double keep)
{
    jr_outcome *o = c->outs, *fresh = NULL;
    int64_t *ids = NULL, last = 0;
    int i, k = 0, left = 0;

    if ((ids = calloc((size_t)c->nouts, sizeof *ids)) == NULL ||
        (fresh = calloc((size_t)c->nouts, sizeof *fresh)) == NULL) {
        free(ids);
        return jr_fail(&c->err, JR_ENOMEM, "wait: out of memory");
    }
    for (i = 0; i < c->nouts; i++)
        if (!ended(o[i].state))
            ids[k++] = o[i].id;
    if (c->db.ops->outcomes(c->db.b, ids, k, keep, fresh, &last,
                            &c->err) < 0)
        k = -1;
    for (i = 0; k > 0 && i < c->nouts; i++) {
        jr_outcome *f;

        if (ended(o[i].state))
            continue;
        for (f = fresh; f < fresh + k && f->id != o[i].id; f++)
            ;
        free(o[i].result);
        free(o[i].error);
        o[i] = *f;
        memset(f, 0, sizeof *f);
        if (o[i].state < 0 && o[i].id > 0 && o[i].id <= last)
            o[i].state = JR_STATE_COMPLETED;    /* deleted at success */
        else if (o[i].state < 0) {
            free(fresh);
            free(ids);
            return jr_fail(&c->err, E_NOJOB, "job %lld: no such job",
                           (long long)o[i].id);
        }
        left += !ended(o[i].state);
    }
    free(fresh);
    free(ids);
    return k < 0 ? -1 : left;
}

/* 1 if one of notes[0..n) is a job of c->outs that has not ended. */
static int
concerns(const jr_client *c, const int64_t *notes, int n)
{
    int i, k;

    for (i = 0; i < c->nouts; i++)
        for (k = 0; !ended(c->outs[i].state) && k < n; k++)
            if (notes[k] == c->outs[i].id)
                return 1;
    return 0;
}

/* Sleeps on fd until a job of c may have ended or until deadline (0:
 * none); settle > 0: looks first after that long even if nothing wakes
 * it (the read it follows may have come between a commit's WAL write and
 * its showing). Returns 1 to read again, 0 at the deadline, -1 on
 * error. */
static int
sleep_on(jr_client *c, int fd, double deadline, double settle)
{
    int64_t notes[NOTES];
    double span;
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int n, rc;

    for (;;) {
        span = fd < 0 ? NOFD_EVERY : settle > 0 ? settle : SAFETY;
        if (deadline > 0 && deadline - jr_mono() < span)
            span = deadline - jr_mono();
        if (span <= 0)
            return 0;
        rc = poll(&p, fd < 0 ? 0 : 1, (int)ceil(span * 1000));
        if (rc <= 0 && settle == 0) /* the safety read, or the deadline */
            return deadline > 0 && jr_mono() >= deadline ? 0 : 1;
        if ((n = c->db.ops->finished(c->db.b, notes, NOTES, &c->err)) == -1)
            return -1;
        if (n == JR_FINISHED_SOME || (n > 0 && concerns(c, notes, n)))
            return 1;
        /* woken with nothing to see: SQLite's WAL is written before the
         * commit shows (an fsync apart), so look again a little later */
        settle = rc > 0 ? SETTLE : settle * 2 > SETTLE_MAX ? 0 : settle * 2;
    }
}

/* Copies c->outs to the caller's out. */
static void
give(const jr_client *c, jr_client_outcome *out)
{
    int i;

    for (i = 0; i < c->nouts; i++) {
        out[i].id = c->outs[i].id;
        out[i].state = jr_state_name(c->outs[i].state);
        out[i].result = c->outs[i].result;
        out[i].error = c->outs[i].error;
    }
}

static int
wait_loop(jr_client *c, double timeout)
{
    double deadline = timeout > 0 ? jr_mono() + timeout : 0, last, settle;
    int fd, left, rc;

    /* the descriptor first: an end between the read and the LISTEN
     * would not wake us */
    fd = c->db.ops->finished_fd ? c->db.ops->finished_fd(c->db.b) : -1;
    if (fd >= 0 && c->db.ops->finished(c->db.b, NULL, 0, &c->err) == -1)
        return -1;
    if ((left = reread(c, c->result_ttl)) <= 0)
        return left;
    for (settle = 0;; settle = SETTLE) {
        last = jr_mono();
        if ((rc = sleep_on(c, fd, deadline, settle)) <= 0)
            break;
        if (jr_mono() - last < MIN_GAP)
            nanosleep(&(struct timespec){0, (long)(MIN_GAP * 1e9)}, NULL);
        if ((left = reread(c, 0)) <= 0)
            return left;
        fd = c->db.ops->finished_fd(c->db.b);  /* may be a new one */
    }
    if (rc < 0)
        return -1;
    return jr_fail(&c->err, E_TIMEOUT, "wait: timed out after %gs with %d "
                   "job%s not ended", timeout, left, left == 1 ? "" : "s");
}

int
jr_client_wait(jr_client *c, const int64_t *ids, size_t n, double timeout,
               jr_client_outcome *out)
{
    size_t i;
    int rc;

    if (c == NULL)
        return JR_CLIENT_EUSAGE;
    if (jr_clientint_begin(c) < 0)
        return jr_clientint_finish(c, -1);
    jr_clientint_wait_free(c);
    if ((n > 0 && (ids == NULL || out == NULL)) || n > 100000 ||
        isnan(timeout))
        return jr_clientint_finish(c, jr_fail(&c->err, JR_EUSAGE, "wait: "
                                "ids, out and n (at most 100000) and a "
                                "timeout in seconds are needed"));
    if ((c->outs = calloc(n ? n : 1, sizeof *c->outs)) == NULL)
        return jr_clientint_finish(c, jr_fail(&c->err, JR_ENOMEM, "wait: out "
                                           "of memory"));
    c->nouts = (int)n;
    for (i = 0; i < n; i++) {
        c->outs[i].id = ids[i];
        c->outs[i].state = -1;
    }
    rc = wait_loop(c, timeout);
    give(c, out);
    return jr_clientint_finish(c, rc);
}
