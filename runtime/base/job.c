/* job.c - the job model's functions: name and push checks, the job
 * allocation, the claim order, the names of the states (the one list of
 * them) and of the results. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/esc.h"
#include "base/job.h"
#include "base/jsontext.h"
#include "base/keyring.h"
#include "base/ranges.h"
#include "base/trace.h"

int
jr_name_check(const char *name, const char *what, jr_err *err)
{
    return jr_name_check_len(name, name ? strlen(name) : 0, what, err);
}

/* The first max bytes of the len of s, escaped (esc.h) into out. */
static const char *
esc_cut(char *out, size_t size, const char *s, size_t len, size_t max)
{
    jr_esc_text(out, size, s, len < max ? len : max);
    return out;
}

int
jr_name_check_len(const char *name, size_t len, const char *what,
                  jr_err *err)
{
    char b[64 * 4 + 1];
    size_t n;

    if (name == NULL || len == 0)
        return jr_fail(err, JR_EINPUT, "empty %s", what);
    for (n = 0; n < len; n++) {
        unsigned char c = (unsigned char)name[n];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              (c >= '0' && c <= '9') || c == '_' || c == '.' || c == ':' ||
              c == '-'))
            return jr_fail(err, JR_EINPUT, "invalid %s '%s': character "
                           "%zu is not one of [A-Za-z0-9_.:-]", what,
                           esc_cut(b, sizeof b, name, len, 64), n + 1);
    }
    if (n > 128)
        return jr_fail(err, JR_EINPUT, "invalid %s '%s...': %zu "
                       "characters, at most 128", what,
                       esc_cut(b, sizeof b, name, len, 32), n);
    return 0;
}

int
jr_conflict_alone(const char *name, jr_err *err)
{
    return jr_fail(err, JR_EINPUT, "job '%s': on_conflict needs a "
                   "unique_key or a sequence", name);
}

static const char *const conflict_names[] = {"keep", "replace",
                                             "cancel_running"};

int
jr_conflict_parse(const char *name)
{
    int v;

    for (v = JR_CONFLICT_KEEP; name != NULL && v <= JR_CONFLICT_CANCEL_RUNNING;
         v++)
        if (strcmp(name, conflict_names[v]) == 0)
            return v;
    return -1;
}

const char *
jr_conflict_name(int v)
{
    return v >= JR_CONFLICT_KEEP && v <= JR_CONFLICT_CANCEL_RUNNING ?
           conflict_names[v] : NULL;
}

const char *
jr_outcome_name(int v)
{
    static const char *const names[] = {"new", "duplicate", "replaced",
                                        "superseded"};

    return v >= JR_PUSH_NEW && v <= JR_PUSH_SUPERSEDED ? names[v] : "new";
}

/* The rules every push follows, whichever way it comes (CLI, C library,
 * Lua module, handler push, backend): checked here, once, before anything
 * reaches a database. */
/* The unique options of jr_push_check. */
static int
unique_check(const jr_push *p, jr_err *err)
{
    if (p->unique_key == NULL && p->unique_for != 0)
        return jr_fail(err, JR_EINPUT, "job '%s': unique_for needs a "
                       "unique_key", p->name);
    if (jr_conflict_name(p->on_conflict) == NULL)
        return jr_fail(err, JR_EINPUT, "job '%s': on_conflict %d is not "
                       "one of keep, replace, cancel_running", p->name,
                       p->on_conflict);
    if (p->unique_key == NULL && p->sequence == NULL &&
        p->on_conflict != JR_CONFLICT_KEEP)
        return jr_conflict_alone(p->name, err);
    if (p->unique_key == NULL)
        return 0;
    if (jr_unique_key_check(p->name, p->unique_key, strlen(p->unique_key),
                            err) < 0)
        return -1;
    if (!isfinite(p->unique_for) || p->unique_for < 0 ||
        p->unique_for > JR_DELAY_MAX)
        return jr_fail(err, JR_EINPUT, "job '%s': unique_for %g is not a "
                       "duration (seconds, finite, from 0 to %.0f)", p->name,
                       p->unique_for, JR_DELAY_MAX);
    return 0;
}

/* The workflow options of jr_push_check (docs/workflows.md). */
static int
flow_check(const jr_push *p, jr_err *err)
{
    const jr_batch_spec *b = p->batch_new;
    int i, flow = p->nafter > 0 || p->nafter_local > 0 || p->batch != 0 ||
                  b != NULL;

    if (p->nafter < 0 || p->nafter_local < 0 ||
        p->nafter + p->nafter_local > JR_AFTER_MAX)
        return jr_fail(err, JR_EINPUT, "job '%s': %d parents (after: at "
                       "most %d)", p->name, p->nafter + p->nafter_local,
                       JR_AFTER_MAX);
    for (i = 0; i < p->nafter; i++)
        if (p->after[i] <= 0)
            return jr_fail(err, JR_EINPUT, "job '%s': after: %lld is not "
                           "a job id", p->name, (long long)p->after[i]);
    if (p->on_parent_failure < JR_OPF_DEFAULT ||
        p->on_parent_failure > JR_OPF_DEAD)
        return jr_fail(err, JR_EINPUT, "job '%s': on_parent_failure %d is "
                       "not one of cancel, run, dead", p->name,
                       p->on_parent_failure);
    if (p->batch < 0 || (p->batch != 0 && b != NULL))
        return jr_fail(err, JR_EINPUT, "job '%s': batch %lld is not a "
                       "batch id", p->name, (long long)p->batch);
    if (flow && p->unique_key != NULL)
        return jr_fail(err, JR_EINPUT, "job '%s': a unique job cannot have "
                       "after or batch", p->name);
    if (b == NULL)
        return 0;
    if (b->on_complete == NULL && b->on_success == NULL)
        return jr_fail(err, JR_EINPUT, "job '%s': its batch has neither "
                       "on_complete nor on_success", p->name);
    if ((b->on_complete &&
         jr_name_check(b->on_complete, "batch on_complete", err) < 0) ||
        (b->on_success &&
         jr_name_check(b->on_success, "batch on_success", err) < 0) ||
        (b->queue && jr_name_check(b->queue, "batch queue", err) < 0))
        return -1;
    if (b->payload != NULL) {
        char why[200];
        if (jr_jsontext_check(b->payload, strlen(b->payload), why,
                              sizeof why) < 0)
            return jr_fail(err, JR_EINPUT, "job '%s': invalid JSON batch "
                           "payload: %s", p->name, why);
    }
    return 0;
}

/* The sequence options of jr_push_check (docs/queues.md). */
static int
seq_check(const jr_push *p, jr_err *err)
{
    size_t len;

    if (p->sequence == NULL && p->seq_fail != JR_SEQ_BLOCK)
        return jr_fail(err, JR_EINPUT, "job '%s': on_failure goes with a "
                       "sequence", p->name);
    if (p->sequence == NULL)
        return 0;
    len = strlen(p->sequence);
    if (len == 0 || len > JR_SEQ_KEY_MAX)
        return jr_fail(err, JR_EINPUT, "job '%s': sequence key of %zu bytes "
                       "(sequence: 1 to %d bytes)", p->name, len,
                       JR_SEQ_KEY_MAX);
    if (jr_seq_fail_name(p->seq_fail) == NULL)
        return jr_fail(err, JR_EINPUT, "job '%s': on_failure %d is not one "
                       "of block, skip, dead", p->name, p->seq_fail);
    if (p->nafter > 0 || p->nafter_local > 0 || p->unique_key != NULL)
        return jr_fail(err, JR_EINPUT, "job '%s': a job in a sequence "
                       "cannot have after nor a unique_key", p->name);
    if (p->on_conflict != JR_CONFLICT_KEEP &&
        (p->batch != 0 || p->batch_new != NULL))
        return jr_fail(err, JR_EINPUT, "job '%s': a job in a sequence with "
                       "on_conflict %s cannot join a batch", p->name,
                       jr_conflict_name(p->on_conflict));
    return 0;
}

/* The expiry and deadline of jr_push_check (docs/queues.md). */
static int
expiry_check(const jr_push *p, jr_err *err)
{
    if (!isfinite(p->expires_at) || p->expires_at < 0 ||
        p->expires_at > JR_TIME_MAX)
        return jr_fail(err, JR_EINPUT, "job '%s': expires_at %g is not a "
                       "time (epoch seconds from 0 to %.0f, 9999-12-31)",
                       p->name, p->expires_at, JR_TIME_MAX);
    if (!isfinite(p->expires_in) || p->expires_in < 0 ||
        p->expires_in > JR_DELAY_MAX)
        return jr_fail(err, JR_EINPUT, "job '%s': expires_in %g is not a "
                       "delay (seconds, finite, from 0 to %.0f: 100 years)",
                       p->name, p->expires_in, JR_DELAY_MAX);
    if (p->expires_at != 0 && p->expires_in != 0)
        return jr_fail(err, JR_EINPUT, "job '%s': give expires_at or "
                       "expires_in, not both", p->name);
    if (!isfinite(p->deadline) || p->deadline < 0 ||
        p->deadline > JR_DELAY_MAX)
        return jr_fail(err, JR_EINPUT, "job '%s': deadline %g is not a "
                       "duration (seconds, finite, from 0 to %.0f: 100 "
                       "years)", p->name, p->deadline, JR_DELAY_MAX);
    return 0;
}

/* The payload's JSON text: one rule for every backend (jsontext.h). */
static int
payload_check(const jr_push *p, jr_err *err)
{
    char why[200];

    if (jr_jsontext_check(p->payload, strlen(p->payload), why,
                          sizeof why) < 0)
        return jr_fail(err, JR_EINPUT, "job '%s': invalid JSON payload: %s",
                       p->name, why);
    return 0;
}

int
jr_push_check(const jr_push *p, size_t max_payload, jr_err *err)
{
    if (p->cost < 0 || p->cost > JR_COST_MAX)
        return jr_fail(err, JR_EINPUT, "job '%s': cost %ld is not a whole "
                       "number from 1 to %ld", p->name ? p->name : "?",
                       p->cost, JR_COST_MAX);
    if (jr_name_check(p->name, "job name", err) < 0)
        return -1;
    if (p->queue && jr_name_check(p->queue, "queue name", err) < 0)
        return -1;
    if (max_payload && p->payload && strlen(p->payload) > max_payload &&
        strlen(p->payload) > jr_seal_size(max_payload, p->payload))
        return jr_fail(err, JR_EINPUT, "job '%s': payload of %zu bytes is "
                       "over the limit of %zu (max_payload)", p->name,
                       strlen(p->payload), max_payload);
    if (p->payload && payload_check(p, err) < 0)
        return -1;
    if (p->max_retries < -1)
        return jr_fail(err, JR_EINPUT, "job '%s': max_retries %d is "
                       "negative", p->name, p->max_retries);
    if (!(p->result_ttl >= 0 && p->result_ttl <= JR_RANGE_RETENTION_MAX))
        return jr_fail(err, JR_EINPUT, "job '%s': result_ttl %g is out of "
                       "range (0 to %g seconds)", p->name, p->result_ttl,
                       JR_RANGE_RETENTION_MAX);
    if (!isfinite(p->run_at) || p->run_at < 0 || p->run_at > JR_TIME_MAX)
        return jr_fail(err, JR_EINPUT, "job '%s': run_at %g is not a time "
                       "(epoch seconds from 0 to %.0f, 9999-12-31)", p->name,
                       p->run_at, JR_TIME_MAX);
    if (!isfinite(p->run_in) || fabs(p->run_in) > JR_DELAY_MAX)
        return jr_fail(err, JR_EINPUT, "job '%s': run_in %g is not a delay "
                       "(seconds, finite, at most %.0f either way: 100 "
                       "years)", p->name, p->run_in, JR_DELAY_MAX);
    if (p->run_at != 0 && p->run_in != 0)
        return jr_fail(err, JR_EINPUT, "job '%s': give run_at or run_in, "
                       "not both", p->name);
    if (p->key && (p->key[0] == '\0' || strlen(p->key) > JR_KEY_MAX))
        return jr_fail(err, JR_EINPUT, "job '%s': limit key of %zu bytes "
                       "(key: 1 to %d bytes)", p->name, strlen(p->key),
                       JR_KEY_MAX);
    if (expiry_check(p, err) < 0 ||
        flow_check(p, err) < 0 || seq_check(p, err) < 0)
        return -1;
    if (p->traceparent != NULL || p->tracestate != NULL) {
        char what[160];
        snprintf(what, sizeof what, "job '%.128s'", p->name);
        if (jr_trace_check(p->traceparent, p->tracestate, what, err) < 0)
            return -1;
    }
    return unique_check(p, err);
}

int
jr_unique_key_check(const char *name, const char *key, size_t len,
                    jr_err *err)
{
    if (len == 0)
        return jr_fail(err, JR_EINPUT, "job '%s': unique_key is empty",
                       name);
    if (len > JR_UNIQUE_KEY_MAX)
        return jr_fail(err, JR_EINPUT, "job '%s': unique_key of %zu bytes "
                       "is over the limit of %d", name, len,
                       JR_UNIQUE_KEY_MAX);
    if (memchr(key, '\0', len) != NULL)
        return jr_fail(err, JR_EINPUT, "job '%s': unique_key holds a NUL "
                       "byte", name);
    return 0;
}

jr_job *
jr_job_new_full(int64_t id, const char *name, const char *queue,
                const char *payload, size_t payload_len,
                const char *parents, const char *steps, const char *waits,
                const char *trace, const char *key)
{
    size_t ln = strlen(name) + 1, lq = strlen(queue) + 1;
    size_t lp = parents != NULL ? strlen(parents) + 1 : 0;
    size_t ls = steps != NULL ? strlen(steps) + 1 : 0;
    size_t lw = waits != NULL ? strlen(waits) + 1 : 0;
    size_t lt = trace != NULL ? strlen(trace) + 1 : 0;
    size_t lk = key != NULL ? strlen(key) + 1 : 0;
    jr_job *j = malloc(sizeof *j + ln + lq + payload_len + 1 + lp + ls +
                       lw + lt + lk);
    char *p;

    if (j == NULL)
        return NULL;
    memset(j, 0, sizeof *j);
    p = (char *)(j + 1);
    j->id = id;
    j->max_retries = -1;
    j->name = memcpy(p, name, ln);
    p += ln;
    j->queue = memcpy(p, queue, lq);
    p += lq;
    memcpy(p, payload, payload_len);
    p[payload_len] = '\0';
    j->payload = p;
    j->payload_len = payload_len;
    if (parents != NULL)
        j->parents = memcpy(p + payload_len + 1, parents, lp);
    if (steps != NULL)
        j->steps = memcpy(p + payload_len + 1 + lp, steps, ls);
    if (waits != NULL)
        j->waits = memcpy(p + payload_len + 1 + lp + ls, waits, lw);
    if (trace != NULL)
        j->trace = memcpy(p + payload_len + 1 + lp + ls + lw, trace, lt);
    if (key != NULL)
        j->key = memcpy(p + payload_len + 1 + lp + ls + lw + lt, key, lk);
    return j;
}

jr_job *
jr_job_new_parents(int64_t id, const char *name, const char *queue,
                   const char *payload, size_t payload_len,
                   const char *parents)
{
    return jr_job_new_full(id, name, queue, payload, payload_len, parents,
                           NULL, NULL, NULL, NULL);
}

jr_job *
jr_job_new(int64_t id, const char *name, const char *queue,
           const char *payload, size_t payload_len)
{
    return jr_job_new_parents(id, name, queue, payload, payload_len, NULL);
}

jr_job *
jr_job_with_steps(const jr_job *o, const char *steps)
{
    jr_job *j = jr_job_new_full(o->id, o->name, o->queue, o->payload,
                                o->payload_len, o->parents, steps, o->waits,
                                o->trace, o->key);
    jr_job keep;

    if (j == NULL)
        return NULL;
    keep = *j;                  /* its strings, in its own allocation */
    *j = *o;
    j->name = keep.name;
    j->queue = keep.queue;
    j->payload = keep.payload;
    j->parents = keep.parents;
    j->steps = keep.steps;
    j->waits = keep.waits;
    j->trace = keep.trace;
    j->key = keep.key;
    return j;
}

static const char *const opf_names[] = {NULL, "cancel", "run", "dead"};

int
jr_opf_parse(const char *name)
{
    int v;

    for (v = JR_OPF_CANCEL; name != NULL && v <= JR_OPF_DEAD; v++)
        if (strcmp(name, opf_names[v]) == 0)
            return v;
    return -1;
}

const char *
jr_opf_name(int v)
{
    return v > 0 && v <= JR_OPF_DEAD ? opf_names[v] : NULL;
}

static const char *const seq_fail_names[] = {"block", "skip", "dead"};

int
jr_seq_fail_parse(const char *name)
{
    int v;

    for (v = JR_SEQ_BLOCK; name != NULL && v <= JR_SEQ_DEAD; v++)
        if (strcmp(name, seq_fail_names[v]) == 0)
            return v;
    return -1;
}

const char *
jr_seq_fail_name(int v)
{
    return v >= JR_SEQ_BLOCK && v <= JR_SEQ_DEAD ? seq_fail_names[v] : NULL;
}

int
jr_job_order(const void *pa, const void *pb)
{
    const jr_job *a = *(jr_job *const *)pa, *b = *(jr_job *const *)pb;

    if (a->priority != b->priority)
        return a->priority < b->priority ? -1 : 1;
    if (a->run_at != b->run_at)
        return a->run_at < b->run_at ? -1 : 1;
    return (a->id > b->id) - (a->id < b->id);
}

static const char *const state_names[JR_NSTATES] = {
#define STATE_NAME(e, name, flags) [JR_STATE_##e] = name,
    JR_STATES(STATE_NAME)
#undef STATE_NAME
};

static const int state_flags[JR_NSTATES] = {
#define STATE_FLAGS(e, name, flags) [JR_STATE_##e] = flags,
    JR_STATES(STATE_FLAGS)
#undef STATE_FLAGS
};

int
jr_state_flags(int s)
{
    return s >= 0 && s < JR_NSTATES ? state_flags[s] : 0;
}

void
jr_state_sum(long *n)
{
    n[JR_STATE_QUEUED] = n[JR_STATE_READY] + n[JR_STATE_SCHEDULED];
}

const char *
jr_state_name(int s)
{
    return s >= 0 && s < JR_NSTATES ? state_names[s] : "";
}

int
jr_state_parse(const char *name)
{
    int s;

    for (s = 0; name != NULL && s < JR_NSTATES; s++)
        if (strcmp(state_names[s], name) == 0)
            return s;
    return -1;
}

char *
jr_state_list(char *buf, size_t size, const char *sep)
{
    size_t n = 0;
    int s, k;

    if (size == 0)
        return buf;
    buf[0] = '\0';
    for (s = 0; s < JR_NSTATES && n < size; s++) {
        k = snprintf(buf + n, size - n, "%s%s", s ? sep : "",
                     state_names[s]);
        if (k < 0)
            break;
        n += (size_t)k;
    }
    return buf;
}

const char *
jr_result_word(int kind)
{
    static const char *const word[] = {[JR_DONE] = "succeeded",
        [JR_RETRY] = "failed", [JR_SNOOZE] = "snoozed"};

    if (kind == JR_DEAD || kind == JR_EXPIRED)
        return state_names[JR_STATE_DEAD];
    if (kind == JR_CANCELLED)
        return state_names[JR_STATE_CANCELLED];
    if (kind == JR_DONE || kind == JR_RETRY || kind == JR_SNOOZE)
        return word[kind];
    return NULL;
}

int
jr_signal_check(const char *name, const char *payload, size_t max_payload,
                jr_err *err)
{
    char why[200];
    size_t len;

    if (jr_name_check(name, "signal name", err) < 0)
        return -1;
    if (payload == NULL)
        return 0;
    len = strlen(payload);
    if (max_payload > 0 && len > max_payload &&
        len > jr_seal_size(max_payload, payload))
        return jr_fail(err, JR_EINPUT, "signal '%s': payload is %zu bytes, "
                       "over max_payload (%zu)", name, len, max_payload);
    if (jr_jsontext_check(payload, len, why, sizeof why) < 0)
        return jr_fail(err, JR_EINPUT, "signal '%s': payload is not JSON: "
                       "%s", name, why);
    return 0;
}

int
jr_signal_refused(jr_err *err, int64_t id, const char *name,
                  const char *state, int timed_out)
{
    if (strcmp(state, "queued") && strcmp(state, "running") &&
        strcmp(state, "waiting"))
        return jr_fail(err, JR_EINPUT, "signal '%s' to job %lld refused: "
                       "the job is %s (finished)", name, (long long)id,
                       state);
    if (timed_out)
        return jr_fail(err, JR_EINPUT, "signal '%s' to job %lld refused: "
                       "its wait for it timed out", name, (long long)id);
    return jr_fail(err, JR_EINPUT, "signal '%s' to job %lld refused: it "
                   "was sent already (a signal is delivered once)", name,
                   (long long)id);
}
