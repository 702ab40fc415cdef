/* control.c - the commands that act on one job or look at many: cancel
 * (per id: cancelled, cancel requested, already finished, unknown), show
 * (every field of one job) and list (jobs newest first, filtered). All go
 * through the producer library, as every command that only touches jobs
 * does. Text from handlers and producers is printed escaped (esc.h).
 * Uses commands.h, jobrunner.h, esc.h, util.h. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "config/config.h"
#include "client/jobrunner.h"
#include "base/esc.h"
#include "base/jsontext.h"
#include "base/steprec.h"
#include "base/util.h"

#define LIST_LIMIT 100          /* jobs list prints unless --limit */

/* Parses argv[0..argc) as job ids into a new array (free it). Returns the
 * exit status, 0 when all are ids. */
static int
parse_ids(const char *cmd, int argc, char **argv, int64_t **ids)
{
    jr_err err;
    long v;
    int i;

    if (argc <= 0)
        return jr_cmd_usage("%s: give one or more job ids", cmd);
    if ((*ids = calloc((size_t)argc, sizeof **ids)) == NULL)
        return jr_cmd_die(JR_EXIT_FAIL, "out of memory");
    for (i = 0; i < argc; i++) {
        if (jr_parse_int(argv[i], "job id", 1, 0x7fffffffffffffffL, &v,
                         &err) < 0) {
            free(*ids);
            return jr_cmd_die(JR_EXIT_USAGE, err.msg);
        }
        (*ids)[i] = v;
    }
    return 0;
}

/* --- cancel ------------------------------------------------------------ */

static int
note_state(const jr_client_job_info *job, void *arg)
{
    snprintf(arg, 32, "%s", job->state);
    return 0;
}

/* Says what cancel did to id. Returns 1 for an unknown id. */
static int
cancel_say(jr_client *db, int64_t id, int outcome)
{
    char state[32] = "finished";

    switch (outcome) {
    case JR_CLIENT_CANCELLED:
        printf("job %lld: cancelled\n", (long long)id);
        return 0;
    case JR_CLIENT_CANCEL_REQUESTED:
        printf("job %lld: cancel requested (running: its runner stops it)\n",
               (long long)id);
        return 0;
    case JR_CLIENT_CANCEL_FINISHED:
        jr_client_show(db, id, note_state, state);
        printf("job %lld: already %s, nothing changed\n", (long long)id,
               state);
        return 0;
    default:
        fprintf(stderr, "jobrunner: cancel: no job with id %lld\n",
                (long long)id);
        return 1;
    }
}

static int
cancel_ids(jr_client *db, const int64_t *ids, int n)
{
    int *out = calloc((size_t)n, sizeof *out), i, unknown = 0;

    if (out == NULL)
        return jr_cmd_die(JR_EXIT_FAIL, "out of memory");
    if (jr_client_cancel(db, ids, (size_t)n, out) != JR_CLIENT_OK) {
        free(out);
        return jr_cmd_client_fail(db);
    }
    for (i = 0; i < n; i++)
        unknown += cancel_say(db, ids[i], out[i]);
    free(out);
    return unknown ? JR_EXIT_NOTFOUND : JR_EXIT_OK;
}

int
jr_cmd_cancel(jr_cli *cli)
{
    jr_client *client;
    int64_t *ids = NULL;
    jr_config c;
    int rc;

    if (cli->argc > 0 && cli->optend > 0 &&
        strcmp(cli->argv[0], "--batch") == 0)
        return jr_cmd_cancel_batch(cli);
    if ((rc = parse_ids("cancel", cli->argc, cli->argv, &ids)) != 0)
        return rc;
    if ((rc = jr_cmd_config(cli, &c)) != 0) {
        free(ids);
        return rc;
    }
    if ((rc = jr_cmd_reader(&c, &client)) == 0) {     /* creates none */
        rc = cancel_ids(client, ids, cli->argc);
        jr_client_close(client);
    }
    jr_config_free(&c);
    free(ids);
    return rc;
}

/* --- show and list: one writer per format ------------------------------ */

typedef struct job_out {
    int json;
    int n;                      /* jobs written so far */
    int full;                   /* show: every field, payload too */
    const char *links;          /* show: jr_cmd_links' text, or NULL */
    const jr_limits *limits;    /* show: the config's, for priority aging */
} job_out;

/* The aging period of the job's queue in o's limits (0: none) when the
 * job is ready, waiting to be claimed; *eff gets its effective priority
 * (the priority when it does not age). */
static double
job_aging(const jr_client_job_info *j, const job_out *o, long long *eff)
{
    char scope[300];
    const jr_limit *l;
    double now = jr_now();

    *eff = j->priority;
    if (o->limits == NULL || strcmp(j->state, "queued") != 0 ||
        j->run_at > now)
        return 0;
    snprintf(scope, sizeof scope, "%s%s", JR_LIMIT_QPREFIX, j->queue);
    if ((l = jr_limits_find(o->limits, scope)) == NULL || !(l->aging > 0))
        return 0;
    *eff = jr_aged_priority(j->priority, j->run_at, now, l->aging);
    return l->aging;
}

static void
json_time(const char *key, double t)
{
    char buf[40];

    printf(",\"%s\":", key);
    if (t > 0)
        printf("\"%s\"", jr_time_iso(t, buf, sizeof buf));
    else
        printf("null");
}

static void
json_num(const char *key, double v)
{
    printf(",\"%s\":", key);
    if (isnan(v))
        printf("null");
    else
        printf("%.17g", v);
}

static void
json_progress(const jr_client_job_info *j)
{
    if (isnan(j->progress_done) && j->progress_note == NULL) {
        printf(",\"progress\":null");
        return;
    }
    printf(",\"progress\":{\"note\":");
    jr_json_str(stdout, j->progress_note);
    json_num("done", j->progress_done);
    json_num("total", j->progress_total);
    printf("}");
}

/* show --json's "attempts": the failed attempts, oldest first, times as
 * the other times are written. */
static void
json_history(const jr_client_job_info *j)
{
    int i;

    printf(",\"attempts\":[");
    for (i = 0; i < j->nhistory; i++) {
        const jr_client_attempt *a = &j->history[i];
        printf("%s{\"attempt\":%d,\"error\":", i ? "," : "", a->attempt);
        jr_json_str(stdout, a->error);
        json_time("at", a->at);
        json_num("duration", a->duration);
        printf(",\"runner\":");
        jr_json_str(stdout, a->runner);
        printf(",\"worker\":");
        if (a->worker > 0)
            printf("%d", a->worker);
        else
            printf("null");
        printf(",\"generation\":");
        jr_json_str(stdout, a->generation);
        printf("}");
    }
    printf("]");
}

/* show --json's "steps": steprec.h's form, null when none. */
static void
json_steps(const jr_client_job_info *j)
{
    jr_buf b = {0};

    jr_steprec_json(&b, j->steps);
    printf(",\"steps\":%.*s", b.oom ? 4 : (int)b.len, b.oom ? "null" : b.p);
    jr_buf_free(&b);
}

/* One line of show's steps: name, state, when, how long, which attempt,
 * then the value or cursor (escaped, cut). */
static int
text_step(const jr_steprec *r, void *arg)
{
    char at[40], v[200];

    (void)arg;
    printf("  %-20s %-10s %s  %8.3fs  attempt %-3d %s ", r->name,
           r->done ? "recorded" : "checkpoint", jr_time_iso(r->at, at,
           sizeof at), r->secs, r->attempt, r->done ? "value" : "cursor");
    snprintf(v, sizeof v, "%.*s", (int)r->len, r->value);
    jr_esc_put(stdout, v);
    putchar('\n');
    return 0;
}

static void
text_steps(const jr_client_job_info *j)
{
    jr_err err;

    if (j->steps == NULL)
        return;
    printf("steps:\n");
    if (jr_steprec_each(j->steps, text_step, NULL, &err) < 0)
        printf("  (unreadable: %s)\n", err.msg);
}

static void
job_json(const jr_client_job_info *j, const job_out *o)
{
    printf("%s{\"id\":%lld,\"name\":", o->n && !o->full ? "," : "",
           (long long)j->id);
    jr_json_str(stdout, j->name);
    printf(",\"queue\":");
    jr_json_str(stdout, j->queue);
    printf(",\"state\":");
    jr_json_str(stdout, j->state);
    if (o->full) {      /* bytes a plain SQL insert stored: as U+FFFD */
        printf(",\"payload\":");
        jr_jsontext_write(stdout, j->payload);
    }
    printf(",\"attempt\":%d,\"max_retries\":", j->attempts);
    if (j->max_retries == JR_CLIENT_UNSET)
        printf("null");
    else
        printf("%d", j->max_retries);
    printf(",\"priority\":%d", j->priority);
    if (o->full) {
        long long eff;
        job_aging(j, o, &eff);
        printf(",\"effective_priority\":%lld", eff);
    }
    json_time("run_at", j->run_at);
    json_time("created_at", j->created_at);
    json_time("started_at", j->started_at);
    json_time("finished_at", j->finished_at);
    printf(",\"last_error\":");
    jr_json_str(stdout, j->last_error);
    printf(",\"generation\":");
    jr_json_str(stdout, j->generation);
    printf(",\"locked_by\":");
    jr_json_str(stdout, j->locked_by);
    printf(",\"cancel_requested\":%s", j->cancel_requested ? "true" :
           "false");
    if (o->full) {
        printf(",\"unique_key\":");
        jr_json_str(stdout, j->unique_key);
    }
    printf(",\"key\":");
    jr_json_str(stdout, j->limit_key);
    if (o->full) {
        printf(",\"result\":");
        jr_jsontext_write(stdout, j->result);
        json_time("keep_until", j->keep_until);
        printf(",\"wait_on\":");
        jr_json_str(stdout, j->wait_on);
        json_time("wake_at", j->wake_at);
        printf(",\"waits\":");
        jr_jsontext_write(stdout, j->waits);
        if (j->sql_statements > 0)
            printf(",\"sql_statements\":%d", j->sql_statements);
        else
            printf(",\"sql_statements\":null");
        json_time("expires_at", j->expires_at);
        if (j->deadline > 0)
            printf(",\"deadline\":%.17g", j->deadline);
        else
            printf(",\"deadline\":null");
        json_time("deadline_at", j->deadline_at);
        if (j->cost > 0)
            printf(",\"cost\":%ld", j->cost);
        else
            printf(",\"cost\":null");
    }
    json_progress(j);
    if (o->links != NULL)
        jr_cmd_links_print(o->links, 1);
    if (o->full) {
        json_history(j);
        json_steps(j);
    }
    printf("}%s", o->full ? "\n" : "");
}

/* "3/10 (30%) note", "3 note", or "-"; the note escaped. */
static const char *
progress_str(const jr_client_job_info *j, char *buf, size_t size)
{
    int n = 0;

    if (isnan(j->progress_done))
        return jr_esc_str(buf, size, j->progress_note);
    if (isnan(j->progress_total))
        n = snprintf(buf, size, "%g", j->progress_done);
    else
        n = snprintf(buf, size, "%g/%g (%.0f%%)", j->progress_done,
                     j->progress_total, j->progress_total > 0 ?
                     100 * j->progress_done / j->progress_total : 100.0);
    if (j->progress_note && n > 0 && (size_t)n + 1 < size) {
        buf[n] = ' ';
        jr_esc_str(buf + n + 1, size - (size_t)n - 1, j->progress_note);
    }
    return buf;
}

static void
text_time(const char *key, double t)
{
    char buf[40];

    printf("%-13s %s\n", key, t > 0 ? jr_time_iso(t, buf, sizeof buf) : "-");
}

/* What a waiting job waits for: a signal (until its deadline), or a
 * date (a durable sleep). */
static void
text_wait(const jr_client_job_info *j)
{
    char buf[40], name[300];

    if (j->wait_on == NULL && j->wake_at <= 0)
        return;
    printf("%-13s ", "waiting_for");
    if (j->wait_on != NULL)
        printf("signal '%s'", jr_esc_str(name, sizeof name, j->wait_on));
    if (j->wait_on != NULL && j->wake_at > 0)
        printf(" until %s", jr_time_iso(j->wake_at, buf, sizeof buf));
    else if (j->wait_on == NULL)
        printf("date %s", jr_time_iso(j->wake_at, buf, sizeof buf));
    printf("\n");
}

/* The failed attempts, oldest first: a line each, the error's first
 * line. */
static void
text_history(const jr_client_job_info *j)
{
    char at[40], dur[32], who[160], first[512];
    int i;

    printf("%-13s %s\n", "attempts", j->nhistory ? "" : "- (no failed "
           "attempt)");
    for (i = 0; i < j->nhistory; i++) {
        const jr_client_attempt *a = &j->history[i];
        const char *e = a->error ? a->error : "-";
        if (isnan(a->duration))
            snprintf(dur, sizeof dur, "-");
        else
            snprintf(dur, sizeof dur, "%.3fs", a->duration);
        if (a->worker > 0)
            snprintf(who, sizeof who, "%s worker %d", a->runner ?
                     a->runner : "-", a->worker);
        else
            snprintf(who, sizeof who, "%s", a->runner ? a->runner : "-");
        printf("  #%-3d %s  %8s  ", a->attempt,
               jr_time_iso(a->at, at, sizeof at), dur);
        jr_esc_put(stdout, who);
        printf("  gen ");
        jr_esc_put(stdout, a->generation);
        printf("  %s\n", jr_esc_first(first, sizeof first, e));
    }
}

/* "key           value", the value (NULL as "-") escaped. */
static void
text_field(const char *key, const char *v, const char *more)
{
    printf("%-13s ", key);
    jr_esc_put(stdout, v);
    printf("%s\n", more);
}

/* A text that may have lines (an error and its traceback): each line
 * escaped, the ones after the first indented under it. */
static void
text_lines(const char *key, const char *v)
{
    size_t n;

    printf("%-13s ", key);
    if (v == NULL)
        v = "-";
    for (;; v += n + 1) {
        n = strcspn(v, "\n");
        jr_esc_putn(stdout, v, n);
        if (v[n] == '\0')
            break;
        printf("\n%-13s ", "");
    }
    putchar('\n');
}

static void
job_text_full(const jr_client_job_info *j, const job_out *o)
{
    char prog[512];
    long long eff;
    double aging = job_aging(j, o, &eff);

    printf("%-13s %lld\n", "id", (long long)j->id);
    text_field("name", j->name, "");
    text_field("queue", j->queue, "");
    text_field("state", j->state, j->cancel_requested ?
               " (cancel requested)" : "");
    printf("%-13s %d\n", "attempt", j->attempts);
    if (j->max_retries == JR_CLIENT_UNSET)
        printf("%-13s - (the handler's or the config's)\n", "max_retries");
    else
        printf("%-13s %d\n", "max_retries", j->max_retries);
    if (aging > 0)
        printf("%-13s %d (effective %lld: its queue ages a level every "
               "%gs waited)\n", "priority", j->priority, eff, aging);
    else
        printf("%-13s %d\n", "priority", j->priority);
    text_field("unique_key", j->unique_key, "");
    text_time("run_at", j->run_at);
    text_time("created_at", j->created_at);
    text_time("started_at", j->started_at);
    text_time("finished_at", j->finished_at);
    text_field("generation", j->generation, "");
    text_field("locked_by", j->locked_by, "");
    printf("%-13s %s\n", "progress", progress_str(j, prog, sizeof prog));
    if (j->limit_key)
        text_field("key", j->limit_key, "");
    else
        printf("%-13s - (unkeyed: no key given, none at its name's payload "
               "path)\n", "key");
    printf("%-13s ", "payload");
    if (j->payload)
        jr_jsontext_write(stdout, j->payload);
    printf("%s\n", j->payload ? "" : "-");
    printf("%-13s ", "result");
    if (j->result)
        jr_jsontext_write(stdout, j->result);
    printf("%s\n", j->result ? "" : "-");
    if (j->keep_until > 0)
        text_time("kept_until", j->keep_until);
    text_wait(j);
    if (j->expires_at > 0)
        text_time("expires_at", j->expires_at);
    if (j->deadline > 0)
        printf("%-13s %gs from its first start\n", "deadline", j->deadline);
    if (j->deadline_at > 0)
        text_time("deadline_at", j->deadline_at);
    if (j->sql_statements > 0)
        printf("%-13s %d (jobrunner.sql, committed with its success)\n",
               "statements", j->sql_statements);
    if (j->cost > 0)
        printf("%-13s %ld (of its limits' tokens and slots)\n", "cost",
               j->cost);
    text_lines("last_error", j->last_error);
    text_history(j);
    text_steps(j);
}

static void
job_text_row(const jr_client_job_info *j, const job_out *o)
{
    char created[40], prog[512], first[120], name[200], queue[200];

    if (o->n == 0)
        printf("%-10s %-24s %-12s %-10s %7s  %-24s %-16s %s\n", "ID", "NAME",
               "QUEUE", "STATE", "ATTEMPT", "CREATED AT", "PROGRESS",
               "LAST ERROR");
    printf("%-10lld %-24s %-12s %-10s %7d  %-24s %-16s %s\n",
           (long long)j->id, jr_esc_str(name, sizeof name, j->name),
           jr_esc_str(queue, sizeof queue, j->queue), j->state, j->attempts,
           jr_time_iso(j->created_at, created, sizeof created),
           progress_str(j, prog, sizeof prog),
           jr_esc_first(first, sizeof first, j->last_error));
}

static int
job_print(const jr_client_job_info *j, void *arg)
{
    job_out *o = arg;

    if (o->json) {
        job_json(j, o);
    } else if (o->full) {
        job_text_full(j, o);
        if (o->links != NULL)
            jr_cmd_links_print(o->links, 0);
    } else {
        job_text_row(j, o);
    }
    o->n++;
    return 0;
}

/* --- show ---------------------------------------------------------------- */

static int
show_job(jr_client *db, int64_t id, job_out *o)
{
    char *links = jr_cmd_links(db, id);
    int rc;

    o->links = links;
    rc = jr_client_show(db, id, job_print, o);
    free(links);
    if (rc == JR_CLIENT_OK)
        return JR_EXIT_OK;
    if (jr_client_errcode(db) != JR_CLIENT_ENOTFOUND)
        return jr_cmd_client_fail(db);
    fprintf(stderr, "jobrunner: show: no job with id %lld (finished jobs "
            "are kept only as long as the config's retention says)\n",
            (long long)id);
    return JR_EXIT_NOTFOUND;
}

int
jr_cmd_show(jr_cli *cli)
{
    job_out o = {.full = 1};
    jr_client *client;
    int64_t *ids = NULL;
    jr_config c;
    int i, n = 0, rc, logs = 0, attempt = 0;
    jr_err err;
    long v;

    for (i = 0; i < cli->argc; i++)
        if (i < cli->optend && strcmp(cli->argv[i], "--json") == 0)
            o.json = 1;
        else if (i < cli->optend && strcmp(cli->argv[i], "--logs") == 0)
            logs = 1;
        else if (i < cli->optend && strcmp(cli->argv[i], "--attempt") == 0) {
            if (i + 1 >= cli->argc || jr_parse_int(cli->argv[i + 1],
                    "--attempt", 1, INT32_MAX, &v, &err) < 0)
                return jr_cmd_usage("show: %s", i + 1 >= cli->argc ?
                                    "--attempt needs a number" : err.msg);
            attempt = (int)v;
            i++;
        } else
            cli->argv[n++] = cli->argv[i];
    if (attempt > 0 && !logs)
        return jr_cmd_usage("show: --attempt goes with --logs");
    if (n != 1)
        return jr_cmd_usage("show: give one job id%s", n ? " only" : "");
    if ((rc = parse_ids("show", 1, cli->argv, &ids)) != 0)
        return rc;
    if ((rc = jr_cmd_config(cli, &c)) != 0) {
        free(ids);
        return rc;
    }
    o.limits = &c.limits;
    if ((rc = jr_cmd_reader_keyed(&c, &client)) == 0) {
        rc = logs ? jr_cmd_show_logs(client, ids[0], attempt, o.json) :
                    show_job(client, ids[0], &o);
        jr_client_close(client);
    }
    jr_config_free(&c);
    free(ids);
    return rc;
}

/* --- list ---------------------------------------------------------------- */

/* Reads list's options into f and o. Returns the exit status. */
static int
list_args(jr_cli *cli, jr_client_filter *f, job_out *o)
{
    jr_err err;
    long limit;
    int i;

    f->limit = LIST_LIMIT;
    for (i = 0; i < cli->argc; i++) {
        const char *a = cli->argv[i], *v = i + 1 < cli->argc ?
                                           cli->argv[i + 1] : NULL;
        if (strcmp(a, "--json") == 0) {
            o->json = 1;
            continue;
        }
        if (v == NULL || (strcmp(a, "--state") && strcmp(a, "--name") &&
                          strcmp(a, "--queue") && strcmp(a, "--limit")))
            return jr_cmd_usage("list: %s '%s'", v == NULL && a[0] == '-' ?
                                "option needs a value:" :
                                "unexpected argument", a);
        if (jr_cmd_once("list", a, cli->argv, i) < 0)
            return JR_EXIT_USAGE;
        i++;
        if (strcmp(a, "--state") == 0)
            f->state = v;
        else if (strcmp(a, "--name") == 0)
            f->name = v;
        else if (strcmp(a, "--queue") == 0)
            f->queue = v;
        else if (jr_parse_int(v, "--limit", 0, 1000000000, &limit,
                              &err) < 0)
            return jr_cmd_die(JR_EXIT_USAGE, err.msg);
        else
            f->limit = (int)limit;
    }
    return 0;
}

int
jr_cmd_list(jr_cli *cli)
{
    jr_client_filter f = {0};
    job_out o = {0};
    jr_client *client;
    jr_config c;
    int rc;

    if ((rc = list_args(cli, &f, &o)) != 0)
        return rc;
    if ((rc = jr_cmd_config(cli, &c)) != 0)
        return rc;
    if ((rc = jr_cmd_reader(&c, &client)) == 0) {
        if (o.json)
            printf("[");
        if (jr_client_list(client, &f, job_print, &o) != JR_CLIENT_OK)
            rc = jr_cmd_client_fail(client);
        else if (o.json)
            printf("]\n");
        else if (o.n == 0)
            printf("no jobs\n");
        jr_client_close(client);
    }
    jr_config_free(&c);
    return rc;
}
