/* pushcmd.c - `jobrunner push NAME [JSON]`: its options as a table of
 * setters, the checks before anything is written, the push through the
 * producer library and the line it prints (with the warning of a name no
 * handler here takes). The other subcommands are commands.c. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "config/config.h"
#include "client/jobrunner.h"
#include "lua/script.h"
#include "base/trace.h"
#include "base/util.h"

/* The options of push, as keys.c's key table: each setter parses its
 * value into the push. A setter returns 0, -1 with err set (an invalid
 * value), or BOTH_GIVEN when the option excludes one already given. */
#define BOTH_GIVEN (-2)

typedef int (*push_setter)(jr_push *p, const char *val, jr_err *err);

static int
set_in(jr_push *p, const char *val, jr_err *err)
{
    if (p->run_at > 0)
        return BOTH_GIVEN;
    return jr_parse_duration(val, "--in", &p->run_in, err);
}

static int
set_at(jr_push *p, const char *val, jr_err *err)
{
    if (p->run_in > 0)
        return BOTH_GIVEN;
    return jr_parse_time(val, "--at", &p->run_at, err);
}

static int
set_priority(jr_push *p, const char *val, jr_err *err)
{
    long v;

    if (jr_parse_int(val, "--priority", -1000000, 1000000, &v, err) < 0)
        return -1;
    p->priority = (int)v;
    return 0;
}

static int
set_max_retries(jr_push *p, const char *val, jr_err *err)
{
    long v;

    if (jr_parse_int(val, "--max-retries", 0, 1000000, &v, err) < 0)
        return -1;
    p->max_retries = (int)v;
    return 0;
}

static int
set_queue(jr_push *p, const char *val, jr_err *err)
{
    (void)err;
    p->queue = val;             /* checked with the push (jr_push_check) */
    return 0;
}

static int
set_unique_key(jr_push *p, const char *val, jr_err *err)
{
    (void)err;
    p->unique_key = val;        /* checked with the push (jr_push_check) */
    return 0;
}

static int
set_unique_for(jr_push *p, const char *val, jr_err *err)
{
    return jr_parse_duration(val, "--unique-for", &p->unique_for, err);
}

static int
set_result_ttl(jr_push *p, const char *val, jr_err *err)
{
    return jr_parse_duration(val, "--result-ttl", &p->result_ttl, err);
}

static int
set_cost(jr_push *p, const char *val, jr_err *err)
{
    long v;

    if (jr_parse_int(val, "--cost", 1, JR_COST_MAX, &v, err) < 0)
        return -1;
    p->cost = v;
    return 0;
}

static int
set_on_conflict(jr_push *p, const char *val, jr_err *err)
{
    int c = jr_conflict_parse(val);

    if (c >= 0) {
        p->on_conflict = c;
        return 0;
    }
    return jr_fail(err, JR_EUSAGE, "invalid --on-conflict '%s': expected "
                   "keep, replace or cancel_running", val);
}

static int
set_key(jr_push *p, const char *val, jr_err *err)
{
    (void)err;
    p->key = val;               /* checked with the push (jr_push_check) */
    return 0;
}

/* --after ID[,ID...]: the parents (the CLI pushes one job a run) */
static int64_t after_ids[JR_AFTER_MAX];

static int
set_after(jr_push *p, const char *val, jr_err *err)
{
    const char *at = val;
    char *end;
    long long v;

    p->after = after_ids;
    while (*at != '\0') {
        v = strtoll(at, &end, 10);
        if (end == at || v <= 0 || (*end != ',' && *end != '\0'))
            return jr_fail(err, JR_EUSAGE, "invalid --after '%s': expected "
                           "job ids separated by commas", val);
        if (p->nafter == JR_AFTER_MAX)
            return jr_fail(err, JR_EUSAGE, "--after: at most %d ids",
                           JR_AFTER_MAX);
        after_ids[p->nafter++] = v;
        at = *end == ',' ? end + 1 : end;
    }
    return 0;
}

static int
set_on_parent_failure(jr_push *p, const char *val, jr_err *err)
{
    if ((p->on_parent_failure = jr_opf_parse(val)) < 0)
        return jr_fail(err, JR_EUSAGE, "invalid --on-parent-failure '%s': "
                       "expected cancel, run or dead", val);
    return 0;
}

static int
set_batch(jr_push *p, const char *val, jr_err *err)
{
    long v;

    if (jr_parse_int(val, "--batch", 1, LONG_MAX, &v, err) < 0)
        return -1;
    p->batch = v;
    return 0;
}

static int
set_sequence(jr_push *p, const char *val, jr_err *err)
{
    (void)err;
    p->sequence = val;          /* checked with the push */
    return 0;
}

static int
set_on_failure(jr_push *p, const char *val, jr_err *err)
{
    if ((p->seq_fail = jr_seq_fail_parse(val)) < 0)
        return jr_fail(err, JR_EUSAGE, "invalid --on-failure '%s': "
                       "expected block, skip or dead", val);
    return 0;
}

static int
set_expires_in(jr_push *p, const char *val, jr_err *err)
{
    if (p->expires_at > 0)
        return jr_fail(err, JR_EUSAGE, "give --expires-in or --expires-at, "
                       "not both");
    if (jr_parse_duration(val, "--expires-in", &p->expires_in, err) < 0)
        return -1;
    if (!(p->expires_in > 0))
        return jr_fail(err, JR_EUSAGE, "invalid --expires-in '%s': expected "
                       "a duration above 0", val);
    return 0;
}

static int
set_expires_at(jr_push *p, const char *val, jr_err *err)
{
    if (p->expires_in > 0)
        return jr_fail(err, JR_EUSAGE, "give --expires-in or --expires-at, "
                       "not both");
    if (jr_parse_time(val, "--expires-at", &p->expires_at, err) < 0)
        return -1;
    /* 0 is "no expiry" to the library: the time 0 would be none */
    if (p->expires_at <= 0)
        return jr_fail(err, JR_EUSAGE, "invalid --expires-at '%s': a time "
                       "after 1970-01-01T00:00:00Z (leave it out for no "
                       "expiry)", val);
    return 0;
}

static int
set_deadline(jr_push *p, const char *val, jr_err *err)
{
    if (jr_parse_duration(val, "--deadline", &p->deadline, err) < 0)
        return -1;
    if (!(p->deadline > 0))
        return jr_fail(err, JR_EUSAGE, "invalid --deadline '%s': expected "
                       "a duration above 0", val);
    return 0;
}

static const struct push_option {
    const char  *name;
    int          takes;         /* takes a value: the next argument */
    push_setter  set;
} push_options[] = {
    {"--in",          1, set_in},
    {"--at",          1, set_at},
    {"--priority",    1, set_priority},
    {"--queue",       1, set_queue},
    {"--max-retries", 1, set_max_retries},
    {"--unique-key",  1, set_unique_key},
    {"--unique-for",  1, set_unique_for},
    {"--on-conflict", 1, set_on_conflict},
    {"--key",         1, set_key},
    {"--result-ttl",  1, set_result_ttl},
    {"--cost",        1, set_cost},
    {"--after",       1, set_after},
    {"--on-parent-failure", 1, set_on_parent_failure},
    {"--batch",       1, set_batch},
    {"--sequence",    1, set_sequence},
    {"--on-failure",  1, set_on_failure},
    {"--expires-in",  1, set_expires_in},
    {"--expires-at",  1, set_expires_at},
    {"--deadline",    1, set_deadline},
    {NULL, 0, NULL}
};

/* The trace context of the environment (docs/tracing.md): TRACEPARENT
 * and TRACESTATE, as OpenTelemetry's environment carriers name them;
 * empty is unset. A malformed one is refused, naming the variable. */
static int
trace_env(jr_push *p)
{
    const char *tp = getenv("TRACEPARENT"), *ts = getenv("TRACESTATE");
    char what[200];
    jr_err err;

    p->traceparent = tp != NULL && *tp != '\0' ? tp : NULL;
    p->tracestate = ts != NULL && *ts != '\0' ? ts : NULL;
    snprintf(what, sizeof what, "push: job '%.128s' (TRACEPARENT, "
             "TRACESTATE)", p->name);
    if (jr_trace_check(p->traceparent, p->tracestate, what, &err) < 0)
        return jr_cmd_die(JR_EXIT_USAGE, err.msg);
    return 0;
}

/* Parses push's arguments (NAME [JSON] and the options) into p, whose
 * strings then borrow argv. Returns 0, or the exit status after saying
 * what is wrong. */
static int
push_args(jr_cli *cli, jr_push *p)
{
    const struct push_option *o;
    unsigned given = 0;         /* bit k: push_options[k] seen */
    jr_err err;
    int i, rc, conflict = 0;

    for (i = 0; i < cli->argc; i++) {
        const char *a = cli->argv[i];
        for (o = push_options; o->name && (i >= cli->optend ||
                                           strcmp(o->name, a) != 0); o++)
            ;
        if (o->name == NULL) {
            if (i < cli->optend && a[0] == '-' && a[1] != '\0')
                return jr_cmd_usage("push: unknown option '%s' (a job name "
                                    "starting with '-' goes after '--')", a);
            if (p->name != NULL && p->payload != NULL)
                return jr_cmd_usage("push: unexpected argument '%s'", a);
            *(p->name == NULL ? &p->name : &p->payload) = a;
            continue;
        }
        if (given & (1u << (o - push_options)))
            return jr_cmd_usage("push: option '%s' given twice (give it "
                                "once)", a);
        given |= 1u << (o - push_options);
        conflict |= o->set == set_on_conflict;
        if (o->takes && i + 1 >= cli->argc)
            return jr_cmd_usage("push: option '%s' needs a value", a);
        rc = o->set(p, o->takes ? cli->argv[i + 1] : NULL, &err);
        if (rc == BOTH_GIVEN)
            return jr_cmd_usage("push: give --in or --at, not both");
        if (rc < 0)
            return jr_cmd_die(JR_EXIT_USAGE, err.msg);
        i += o->takes;
    }
    if (p->name == NULL)
        return jr_cmd_usage("push: missing the job %s", "NAME");
    if ((rc = trace_env(p)) != 0)
        return rc;
    if (conflict && p->unique_key == NULL && p->sequence == NULL)
        /* keep too: as if not given */
        return jr_conflict_alone(p->name, &err),
               jr_cmd_die(JR_EXIT_USAGE, err.msg);
    return 0;
}

/* Checks p (its JSON, the config's max_payload) before anything is
 * written. Returns 0, or the exit status after saying why. */
static int
push_check(const jr_config *c, const jr_push *p)
{
    jr_err err;

    if (jr_push_check(p, c->max_payload, &err) < 0)
        return jr_cmd_die(JR_EXIT_USAGE, err.msg);
    return 0;
}

/* Warns on stderr when the scripts directory this command sees exists and
 * has no handler for name: its jobs wait until one is loaded (a deploy may
 * bring it), for ever if the name is misspelt. No directory here: a
 * producer on another machine, no warning. */
static void
warn_unhandled(const jr_config *c, const char *name)
{
    jr_scripts s;
    jr_err err;
    int i;

    if (jr_scripts_names(c->scripts, &s, &err) < 0)
        return;
    for (i = 0; i < s.n && strcmp(s.h[i].name, name) != 0; i++)
        ;
    if (i == s.n)
        fprintf(stderr, "jobrunner: warning: job '%s': no handler for it in "
                "%s; it waits until one is loaded ('jobrunner stats' lists "
                "the names no handler takes)\n", name, c->scripts);
    jr_scripts_free(&s);
}

/* Prints the pushed job's id (with a unique key, or a sequence and
 * --on-conflict: and new, duplicate, replaced or superseded), then the
 * warning of a name no handler here takes. */
static void
push_said(const jr_config *c, const jr_push *p, int64_t id, int outcome)
{
    if (p->unique_key == NULL &&
        (p->sequence == NULL || p->on_conflict == JR_CONFLICT_KEEP))
        printf("%lld\n", (long long)id);
    else
        printf("%lld %s\n", (long long)id, jr_outcome_name(outcome));
    fflush(stdout);
    warn_unhandled(c, p->name);
}

int
jr_cmd_push(jr_cli *cli)
{
    jr_push p = {.max_retries = -1};
    jr_client_opts opts = JR_CLIENT_OPTS_INIT;
    jr_client_unique u;
    jr_client *client;
    jr_config c;
    int64_t id;
    int rc, outcome;

    if ((rc = push_args(cli, &p)) != 0 || (rc = jr_cmd_config(cli, &c)) != 0)
        return rc;
    if ((rc = push_check(&c, &p)) != 0 ||
        (rc = jr_cmd_client(&c, &client)) != 0) {
        jr_config_free(&c);
        return rc;
    }
    opts.run_at = p.run_at;
    opts.run_in = p.run_in;
    opts.priority = p.priority;
    opts.queue = p.queue;
    opts.max_retries = p.max_retries;
    opts.key = p.key;
    opts.result_ttl = p.result_ttl;
    opts.expires_at = p.expires_at;
    opts.expires_in = p.expires_in;
    opts.deadline = p.deadline;
    opts.traceparent = p.traceparent;
    opts.tracestate = p.tracestate;
    opts.cost = p.cost;
    u.key = p.unique_key;
    u.unique_for = p.unique_for;
    u.on_conflict = p.on_conflict;
    outcome = JR_CLIENT_PUSHED;
    if (p.sequence == NULL && p.seq_fail != JR_SEQ_BLOCK) {
        rc = jr_cmd_usage("push: --on-failure goes with --sequence");
    } else if (p.nafter == 0 && p.on_parent_failure != 0) {
        /* what a parent's failure does to a job with no parent */
        rc = jr_cmd_usage("push: --on-parent-failure goes with --after");
    } else if (p.sequence != NULL) {
        jr_client_seq sq = {p.sequence, p.seq_fail, p.on_conflict,
                            &outcome};
        if (p.unique_key != NULL || p.nafter > 0 || p.batch != 0)
            rc = jr_cmd_usage("push: --sequence cannot go with "
                              "--unique-key, --after or --batch");
        else if (jr_client_push_seq(client, p.name, p.payload, &opts, &sq,
                                    &id) != JR_CLIENT_OK)
            rc = jr_cmd_client_fail(client);
        else
            push_said(&c, &p, id, outcome);
    } else if (p.nafter > 0 || p.batch != 0 || p.on_parent_failure != 0) {
        jr_client_after a = {p.after, (size_t)p.nafter, p.on_parent_failure,
                             p.batch};
        if (p.unique_key != NULL)
            rc = jr_cmd_usage("push: --unique-key cannot go with --after "
                              "or --batch");
        else if (jr_client_push_after(client, p.name, p.payload, &opts, &a,
                                      &id) != JR_CLIENT_OK)
            rc = jr_cmd_client_fail(client);
        else
            push_said(&c, &p, id, outcome);
    } else if (jr_client_push_unique(client, p.name, p.payload, &opts, &u,
                                     &id, &outcome) != JR_CLIENT_OK)
        rc = jr_cmd_client_fail(client);
    else
        push_said(&c, &p, id, outcome);
    jr_client_close(client);
    jr_config_free(&c);
    return rc;
}
