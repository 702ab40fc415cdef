/* clientwait.c - jr_client_wait: waits on jobs' outcomes without polling
 * the database in a loop. One read marks the jobs that have not ended
 * (kept after success for result_ttl) and says where each stands; then it
 * sleeps on the backend's finished descriptor (PostgreSQL's LISTEN,
 * SQLite's WAL watch) and reads the jobs again only when one of them may
 * have ended. A lost connection is opened again, the jobs read again for
 * the ends it missed. Owns the outcomes of the last wait. Uses
 * client_int.h, backend.h, keyring.h. */
#include <assert.h>
#include <math.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/job.h"
#include "base/keyring.h"
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
#define RETRY 1.0               /* seconds between tries after a loss */
#define GIVE_UP 60.0            /* seconds a loss may last (jobrunner.h) */
#define GONE (-2)               /* outs' state: no row, but an id given */

/* One id of the wait and its index in c->outs; c->byid is sorted by id. */
struct jr_waitidx {
    int64_t id;
    int     i;
};

void
jr_clientint_wait_free(jr_client *c)
{
    int i;

    for (i = 0; i < c->nouts; i++) {
        free(c->outs[i].result);
        free(c->outs[i].error);
    }
    free(c->outs);
    free(c->byid);
    c->outs = NULL;
    c->byid = NULL;
    c->nouts = 0;
}

static int
ended(int state)
{
    return state == JR_STATE_COMPLETED || state == JR_STATE_DEAD ||
           state == JR_STATE_CANCELLED || state == JR_STATE_EXPIRED ||
           state == GONE;
}

/* Takes fresh, where the job of o stands now, into o (a row gone is
 * GONE, an id never given an error). Returns 0 or -1. */
static int
take(jr_client *c, jr_outcome *o, jr_outcome *fresh, int64_t last)
{
    assert(fresh->id == o->id);     /* the backend's out[i] is ids[i] */
    free(o->result);
    free(o->error);
    *o = *fresh;
    memset(fresh, 0, sizeof *fresh);
    if (o->state >= 0)
        return 0;
    if (o->id > 0 && o->id <= last) {
        /* given, and no row: ended and deleted (a plain success, pruned
         * or purged), or a push rolled back (PostgreSQL); nothing says
         * which */
        o->state = GONE;
        return 0;
    }
    return jr_fail(&c->err, E_NOJOB, "job %lld: no such job",
                   (long long)o->id);
}

/* Reads the outcomes of the jobs of c->outs that have not ended (all of
 * them the first time, marking them with keep). Returns how many have
 * not ended, or -1. */
static int
reread(jr_client *c, double keep)
{
    jr_outcome *o = c->outs, *fresh = NULL;
    int64_t *ids = NULL, last = 0;
    int i, j, k = 0, left = 0, rc = 0;

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
        k = rc = -1;
    /* fresh[j] is ids[j]: the jobs not ended, in their order */
    for (i = j = 0; j < k && i < c->nouts; i++) {
        if (ended(o[i].state))
            continue;
        if (rc == 0 && take(c, &o[i], &fresh[j], last) < 0)
            rc = -1;
        free(fresh[j].result);      /* what a failure left untaken */
        free(fresh[j].error);
        j++;
        left += !ended(o[i].state);
    }
    free(fresh);
    free(ids);
    return rc < 0 ? -1 : left;
}

static int
idx_cmp(const void *a, const void *b)
{
    const struct jr_waitidx *x = a, *y = b;

    return (x->id > y->id) - (x->id < y->id);
}

/* Sorts the ids of c->outs into c->byid. Returns 0 or -1. */
static int
index_ids(jr_client *c)
{
    int i;

    c->byid = calloc(c->nouts ? (size_t)c->nouts : 1, sizeof *c->byid);
    if (c->byid == NULL)
        return jr_fail(&c->err, JR_ENOMEM, "wait: out of memory");
    for (i = 0; i < c->nouts; i++)
        c->byid[i] = (struct jr_waitidx){c->outs[i].id, i};
    qsort(c->byid, (size_t)c->nouts, sizeof *c->byid, idx_cmp);
    return 0;
}

/* 1 if job id is one of c->outs that has not ended. */
static int
pending(const jr_client *c, int64_t id)
{
    int lo = 0, hi = c->nouts;     /* the first at or above id: lo */

    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;

        if (c->byid[mid].id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    for (; lo < c->nouts && c->byid[lo].id == id; lo++)
        if (!ended(c->outs[c->byid[lo].i].state))
            return 1;
    return 0;
}

/* 1 if one of notes[0..n) is a job of c->outs that has not ended. */
static int
concerns(const jr_client *c, const int64_t *notes, int n)
{
    int k;

    for (k = 0; k < n; k++)
        if (pending(c, notes[k]))
            return 1;
    return 0;
}

/* Sleeps on fd until a job of c may have ended or until deadline (0:
 * none); settle > 0: looks first after that long even if nothing wakes
 * it (the read it follows may have come between a commit's WAL write and
 * its showing). Returns 1 to read again, 0 at the deadline, -1 on
 * error (the watch's connection lost). */
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

static unsigned
reconnects(const jr_client *c)
{
    return c->db.ops->reconnects ? c->db.ops->reconnects(c->db.b) : 0;
}

/* The watch first (opened again after a loss; an end between the read
 * and the watch would not wake us), then the read, which marks the jobs
 * again when the backend reopened its database since *rec (a SQLite file
 * put back at its path has not our marks). *fd gets the watch's
 * descriptor. Returns what reread does. */
static int
look(jr_client *c, double keep, int *fd, unsigned *rec)
{
    *fd = c->db.ops->finished_fd ? c->db.ops->finished_fd(c->db.b) : -1;
    if (c->db.ops->finished(c->db.b, NULL, 0, &c->err) == -1)
        return -1;
    if (reconnects(c) != *rec) {
        *rec = reconnects(c);
        keep = c->result_ttl;
    }
    if (*fd < 0 && c->db.ops->finished_fd)  /* opened by finished */
        *fd = c->db.ops->finished_fd(c->db.b);
    return reread(c, keep);
}

/* After a failed look or watch at time now, lost since *lost (0: it was
 * not lost): 0 to look again, after a pause if it failed before, or -1
 * when the failure is not a loss or has lasted GIVE_UP seconds or past
 * the deadline. */
static int
lost_for(jr_client *c, double *lost, double deadline)
{
    double now = jr_mono(), span;
    char why[sizeof c->err.msg];

    if (c->err.code != JR_EDB)      /* out of memory, no such job */
        return -1;
    if (*lost == 0) {               /* the first failure: at once */
        *lost = now;
        return 0;
    }
    span = *lost + GIVE_UP - now;
    if (deadline > 0 && deadline - now < span)
        span = deadline - now;
    if (span <= 0) {
        /* the cause is copied out: formatted into c->err, it would be
         * overwritten while it is read */
        snprintf(why, sizeof why, "%s", c->err.msg);
        return jr_fail(&c->err, E_LOST, "wait: the database could not be "
                       "read again for %.0fs after a loss, giving up: %s",
                       now - *lost, why);
    }
    span = span < RETRY ? span : RETRY;
    nanosleep(&(struct timespec){(time_t)span,
                                 (long)((span - floor(span)) * 1e9)}, NULL);
    return 0;
}

static int
wait_loop(jr_client *c, double timeout)
{
    double deadline = timeout > 0 ? jr_mono() + timeout : 0, last = 0;
    double keep = c->result_ttl, settle = 0, lost = 0;
    unsigned rec = reconnects(c);
    int fd, left, rc;

    for (;;) {
        if (jr_mono() - last < MIN_GAP)
            nanosleep(&(struct timespec){0, (long)(MIN_GAP * 1e9)}, NULL);
        last = jr_mono();
        if ((left = look(c, keep, &fd, &rec)) == 0)
            return 0;
        if (left > 0) {
            keep = lost = 0;        /* marked, and read */
            rc = sleep_on(c, fd, deadline, settle);
            settle = SETTLE;
            if (rc == 0)
                break;
            if (rc > 0)
                continue;
        }
        if (lost_for(c, &lost, deadline) < 0)
            return -1;
    }
    return jr_fail(&c->err, E_TIMEOUT, "wait: timed out after %gs with %d "
                   "job%s not ended", timeout, left, left == 1 ? "" : "s");
}

/* Copies c->outs to the caller's out: an error only for a job that ended
 * failed (dead or cancelled), not one a retry followed. */
static void
give(jr_client *c, jr_client_outcome *out)
{
    int i, s;

    for (i = 0; i < c->nouts; i++) {
        char *open;
        size_t n;
        jr_err err;

        /* a result sealed with the key file's key, opened for the caller
         * (one that does not open stays as stored) */
        if (c->keys != NULL && c->outs[i].result != NULL &&
            jr_keyring_open(c->keys, c->outs[i].result,
                            strlen(c->outs[i].result), &open, &n, &err) > 0) {
            free(c->outs[i].result);
            c->outs[i].result = open;
        }
        s = c->outs[i].state;
        out[i].id = c->outs[i].id;
        out[i].state = s == GONE ? "gone" : s < 0 ? "unknown" :
                       jr_state_name(s);
        out[i].result = c->outs[i].result;
        out[i].error = s == JR_STATE_DEAD || s == JR_STATE_CANCELLED ?
                       c->outs[i].error : NULL;
    }
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
    rc = index_ids(c);
    if (rc == 0)
        rc = wait_loop(c, timeout);
    give(c, out);
    return jr_clientint_finish(c, rc);
}
