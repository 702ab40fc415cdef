/* inspect.c - the commands that look into the queue and tend the dead:
 * stats (counts per state and job name, which names have a handler
 * file, and what the runner says of itself beside its pid file) and dead
 * (list, retry, purge). Both go through the producer library, as every
 * command that only touches jobs does. Uses commands.h, jobrunner.h,
 * job.h (the states), script.h (handler names), reload.h (the pid file),
 * util.h. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "config/config.h"
#include "client/jobrunner.h"
#include "lua/script.h"
#include "master/reload.h"
#include "base/esc.h"
#include "base/job.h"
#include "base/util.h"

/* --- stats ------------------------------------------------------------ */

typedef struct stat_row {       /* one job name's counts */
    char        *name;          /* owned */
    long         n[JR_NSTATES]; /* by jr_state (job.h) */
} stat_row;

typedef struct stat_acc {
    stat_row    *rows;
    int          n, cap;
    long         total[JR_NSTATES];
} stat_acc;

static int
stat_collect(const char *name, const jr_client_counts *n, void *arg)
{
    stat_acc *a = arg;
    stat_row *row;

    if (a->n == a->cap) {
        int cap = a->cap ? a->cap * 2 : 16;
        stat_row *v = realloc(a->rows, (size_t)cap * sizeof *v);
        if (v == NULL)
            return 1;
        a->rows = v;
        a->cap = cap;
    }
    row = &a->rows[a->n];
    if ((row->name = strdup(name)) == NULL)
        return 1;
    /* the library's named counts, mapped to the states once */
    memset(row->n, 0, sizeof row->n);
    row->n[JR_STATE_QUEUED] = n->queued;
    row->n[JR_STATE_READY] = n->ready;
    row->n[JR_STATE_SCHEDULED] = n->scheduled;
    row->n[JR_STATE_RUNNING] = n->running;
    row->n[JR_STATE_DEAD] = n->dead;
    row->n[JR_STATE_WAITING] = n->waiting;
    row->n[JR_STATE_EXPIRED] = n->expired;
    for (int s = 0; s < JR_NSTATES; s++)
        a->total[s] += row->n[s];
    a->n++;
    return 0;
}

static int
has_handler(const jr_scripts *s, const char *name)
{
    int i;

    for (i = 0; i < s->n; i++)
        if (strcmp(s->h[i].name, name) == 0)
            return 1;
    return 0;
}

#define NOSTART "workers cannot start: "

/* The runner's state line (reload.h), when the pid file of config c
 * names a live runner that wrote one; else "". */
static void
runner_state(const jr_config *c, char *buf, size_t size)
{
    char path[4096];
    jr_err err;

    buf[0] = '\0';
    jr_pidfile_path(c, path, sizeof path);
    if (jr_pidfile_read(path, &err) < 0 ||
        jr_pidfile_state_read(path, buf, size) < 0)
        buf[0] = '\0';
}

/* "state":n[s],... of the states counted per job name (JR_ST_NAME),
 * their sums too unless parts. */
static void
counts_json(const long *n, int parts)
{
    const char *sep = "";

    for (int s = 0; s < JR_NSTATES; s++) {
        int f = jr_state_flags(s);

        if (!(f & JR_ST_NAME) || (parts && (f & JR_ST_SUM)))
            continue;
        printf("%s\"%s\":%ld", sep, jr_state_name(s), n[s]);
        sep = ",";
    }
}

static void
stats_json(const stat_acc *a, const jr_scripts *scripts, const char *state)
{
    int i, first = 1;

    printf("{");
    counts_json(a->total, 0);
    printf(",\"names\":{");
    for (i = 0; i < a->n; i++) {
        const stat_row *r = &a->rows[i];
        printf("%s", i ? "," : "");
        jr_json_str(stdout, r->name);
        printf(":{");
        counts_json(r->n, 1);
        printf(",\"handler\":%s}",
               has_handler(scripts, r->name) ? "true" : "false");
    }
    printf("},\"unhandled\":[");
    for (i = 0; i < a->n; i++)
        if (!has_handler(scripts, a->rows[i].name)) {
            printf("%s", first ? "" : ",");
            jr_json_str(stdout, a->rows[i].name);
            first = 0;
        }
    printf("],\"workers_cannot_start\":");
    if (strncmp(state, NOSTART, strlen(NOSTART)) == 0)
        jr_json_str(stdout, state + strlen(NOSTART));
    else
        printf("null");
}

static void
stats_text(const stat_acc *a, const jr_scripts *scripts, const char *state)
{
    char name[200];
    const long *t = a->total;
    int i;

    if (state[0] != '\0') {
        jr_esc_put(stdout, state);
        putchar('\n');
    }

    printf("queued %ld (ready %ld, scheduled %ld), running %ld, dead %ld%s",
           t[JR_STATE_QUEUED], t[JR_STATE_READY], t[JR_STATE_SCHEDULED],
           t[JR_STATE_RUNNING], t[JR_STATE_DEAD],
           t[JR_STATE_WAITING] ? ", " : "\n");
    if (t[JR_STATE_WAITING])
        printf("waiting %ld\n", t[JR_STATE_WAITING]);
    if (t[JR_STATE_EXPIRED])
        printf("expired %ld\n", t[JR_STATE_EXPIRED]);
    if (a->n == 0)
        return;
    printf("\n%-32s %9s %9s %9s %9s\n", "NAME", "READY", "SCHEDULED",
           "RUNNING", "DEAD");
    for (i = 0; i < a->n; i++) {
        const stat_row *r = &a->rows[i];
        printf("%-32s %9ld %9ld %9ld %9ld%s\n",
               jr_esc_str(name, sizeof name, r->name), r->n[JR_STATE_READY],
               r->n[JR_STATE_SCHEDULED], r->n[JR_STATE_RUNNING],
               r->n[JR_STATE_DEAD],
               has_handler(scripts, r->name) ? "" : "  (no handler file)");
    }
}

/* The running jobs that reported progress: one line each, or a JSON
 * array "progress" of {id, name, done, total, note}. */
typedef struct prog_out {
    int json, n;
} prog_out;

static int
prog_print(const jr_client_job_info *j, void *arg)
{
    prog_out *o = arg;
    char name[200];

    if (isnan(j->progress_done) && j->progress_note == NULL)
        return 0;
    if (!o->json) {
        printf("%s%-10lld %-24s %g", o->n ? "" : "\nRUNNING WITH "
               "PROGRESS\n", (long long)j->id, jr_esc_str(name, sizeof name, j->name),
               j->progress_done);
        if (!isnan(j->progress_total))
            printf("/%g", j->progress_total);
        putchar(' ');
        if (j->progress_note)
            jr_esc_put(stdout, j->progress_note);
        putchar('\n');
        o->n++;
        return 0;
    }
    printf("%s{\"id\":%lld,\"name\":", o->n++ ? "," : "",
           (long long)j->id);
    jr_json_str(stdout, j->name);
    if (isnan(j->progress_done))
        printf(",\"done\":null");
    else
        printf(",\"done\":%.17g", j->progress_done);
    if (isnan(j->progress_total))
        printf(",\"total\":null");
    else
        printf(",\"total\":%.17g", j->progress_total);
    printf(",\"note\":");
    jr_json_str(stdout, j->progress_note);
    printf("}");
    return 0;
}

static int
seq_count(const char *key, int64_t head, const char *state, long jobs,
          int blocked, void *arg)
{
    long *n = arg;

    (void)key, (void)head, (void)state, (void)jobs;
    n[0]++;
    n[1] += blocked != 0;
    return 0;
}

/* Prints how many sequences are held and blocked (docs/queues.md). */
static int
stats_sequences(jr_client *client, int json)
{
    long n[2] = {0, 0};

    if (jr_client_sequences(client, 0, 0, seq_count, n) != JR_CLIENT_OK)
        return -1;
    if (json)
        printf(",\"sequences\":{\"held\":%ld,\"blocked\":%ld}", n[0], n[1]);
    else if (n[0] > 0)
        printf("sequences %ld (blocked %ld: jobrunner sequences "
               "--blocked)\n", n[0], n[1]);
    return 0;
}

/* Prints the progress of running jobs after the counts. */
static int
stats_progress(jr_client *client, int json)
{
    jr_client_filter f = {.state = "running"};
    prog_out o = {.json = json};
    int rc;

    if (json)
        printf(",\"progress\":[");
    rc = jr_client_list(client, &f, prog_print, &o);
    if (json)
        printf("]}\n");
    return rc == JR_CLIENT_OK ? 0 : -1;
}

int
jr_cmd_stats(jr_cli *cli)
{
    stat_acc a = {0};
    jr_scripts s;
    jr_err err;
    jr_client *client;
    jr_client_counts total;
    jr_config c;
    char state[512];
    int json = 0, i, rc;

    for (i = 0; i < cli->argc; i++) {
        if (strcmp(cli->argv[i], "--json") == 0)
            json = 1;
        else
            return jr_cmd_usage("stats: unexpected argument '%s'",
                               cli->argv[i]);
    }
    if ((rc = jr_cmd_config(cli, &c)) != 0)
        return rc;
    if ((rc = jr_cmd_reader(&c, &client)) != 0) {
        jr_config_free(&c);
        return rc;
    }
    /* names with a handler file that compiles: stats runs no handler
     * code, which could loop or block */
    if (jr_scripts_names(c.scripts, &s, &err) < 0)
        memset(&s, 0, sizeof s);    /* no scripts dir: nothing handled */
    runner_state(&c, state, sizeof state);
    if (jr_client_stats(client, &total, stat_collect, &a) != JR_CLIENT_OK)
        rc = jr_cmd_client_fail(client);
    else {
        if (json)
            stats_json(&a, &s, state);
        else
            stats_text(&a, &s, state);
        if (stats_sequences(client, json) < 0)
            rc = jr_cmd_client_fail(client);
        else if ((rc = jr_cmd_stats_fair(&c, json)) == 0 &&
                 (rc = jr_cmd_stats_aging(&c, json)) == 0 &&
                 stats_progress(client, json) < 0)
            rc = jr_cmd_client_fail(client);
    }
    jr_scripts_free(&s);
    for (i = 0; i < a.n; i++)
        free(a.rows[i].name);
    free(a.rows);
    jr_client_close(client);
    jr_config_free(&c);
    return rc;
}

/* --- dead ------------------------------------------------------------- */

typedef struct dead_out {
    int json;
    int n;
} dead_out;

static int
dead_print(const jr_client_dead *r, void *arg)
{
    dead_out *o = arg;
    char died[40], created[40], first[120], name[200];

    jr_time_iso(r->died_at, died, sizeof died);
    jr_time_iso(r->created_at, created, sizeof created);
    if (o->json) {
        printf("%s{\"id\":%lld,\"name\":", o->n ? "," : "", (long long)r->id);
        jr_json_str(stdout, r->name);
        printf(",\"queue\":");
        jr_json_str(stdout, r->queue);
        printf(",\"attempts\":%d,\"last_error\":", r->attempts);
        jr_json_str(stdout, r->last_error);
        printf(",\"generation\":");
        jr_json_str(stdout, r->generation);
        printf(",\"died_at\":\"%s\",\"created_at\":\"%s\"}", died, created);
    } else {
        if (o->n == 0)
            printf("%-10s %-24s %8s  %-24s %s\n", "ID", "NAME", "ATTEMPTS",
                   "DIED AT", "LAST ERROR");
        printf("%-10lld %-24s %8d  %-24s %s\n", (long long)r->id,
               jr_esc_str(name, sizeof name, r->name), r->attempts, died,
               jr_esc_first(first, sizeof first, r->last_error));
    }
    o->n++;
    return 0;
}

static int
dead_list(jr_client *db, int argc, char **argv)
{
    dead_out o = {0};
    jr_err err;
    long limit = 100;
    int i;

    for (i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0)
            o.json = 1;
        else if (strcmp(argv[i], "--limit") == 0 && i + 1 < argc) {
            if (jr_cmd_once("dead list", argv[i], argv, i) < 0)
                return JR_EXIT_USAGE;
            if (jr_parse_int(argv[++i], "--limit", 0, 1000000000, &limit,
                             &err) < 0)
                return jr_cmd_die(JR_EXIT_USAGE, err.msg);
        } else
            return jr_cmd_usage("dead list: unexpected argument '%s'",
                               argv[i]);
    }
    if (o.json)
        printf("[");
    if (jr_client_dead_list(db, (int)limit, dead_print, &o) != JR_CLIENT_OK)
        return jr_cmd_client_fail(db);
    if (o.json)
        printf("]\n");
    else if (o.n == 0)
        printf("no dead jobs\n");
    return JR_EXIT_OK;
}

static int
dead_retry(jr_client *db, int argc, char **argv)
{
    int64_t *ids;
    jr_err err;
    long v, n, one;
    int i;

    if (argc == 0)
        return jr_cmd_usage("dead retry: give job ids or %s", "--all");
    if (argc == 1 && strcmp(argv[0], "--all") == 0) {
        if (jr_client_dead_retry(db, NULL, 0, &n) != JR_CLIENT_OK)
            return jr_cmd_client_fail(db);
        printf("requeued %ld dead job%s\n", n, n == 1 ? "" : "s");
        return JR_EXIT_OK;
    }
    if ((ids = calloc((size_t)argc, sizeof *ids)) == NULL)
        return jr_cmd_die(JR_EXIT_FAIL, "out of memory");
    for (i = 0; i < argc; i++) {
        if (jr_parse_int(argv[i], "job id", 1, 0x7fffffffffffffffL, &v,
                         &err) < 0) {
            free(ids);
            return jr_cmd_die(JR_EXIT_USAGE, err.msg);
        }
        ids[i] = v;
    }
    for (i = 0, n = 0; i < argc; i++) {
        if (jr_client_dead_retry(db, &ids[i], 1, &one) != JR_CLIENT_OK) {
            free(ids);
            return jr_cmd_client_fail(db);
        }
        if (one == 0)
            fprintf(stderr, "jobrunner: job %lld is not in the dead queue "
                    "(no such job, or not dead)\n", (long long)ids[i]);
        n += one;
    }
    free(ids);
    printf("requeued %ld dead job%s\n", n, n == 1 ? "" : "s");
    return n < argc ? JR_EXIT_FAIL : JR_EXIT_OK;
}

static int
dead_purge(jr_client *db, int argc, char **argv)
{
    double older = 0;
    jr_err err;
    long n;
    int i;

    for (i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--older-than") != 0 || i + 1 >= argc)
            return jr_cmd_usage("dead purge: unexpected argument '%s'",
                                argv[i]);
        if (jr_cmd_once("dead purge", argv[i], argv, i) < 0)
            return JR_EXIT_USAGE;
        if (jr_parse_duration(argv[++i], "--older-than", &older, &err) < 0)
            return jr_cmd_die(JR_EXIT_USAGE, err.msg);
    }
    if (jr_client_dead_purge(db, older, &n) != JR_CLIENT_OK)
        return jr_cmd_client_fail(db);
    printf("purged %ld dead job%s\n", n, n == 1 ? "" : "s");
    return JR_EXIT_OK;
}

int
jr_cmd_dead(jr_cli *cli)
{
    static const struct {
        const char *name;
        int (*fn)(jr_client *db, int argc, char **argv);
    } subs[] = {{"list", dead_list}, {"retry", dead_retry},
                {"purge", dead_purge}};
    jr_config c;
    jr_client *client;
    int argc = cli->argc, rc;
    char **argv = cli->argv;
    size_t which = 0;

    if (argc > 0 && argv[0][0] != '-') {
        for (which = 0; which < 3; which++)
            if (strcmp(subs[which].name, argv[0]) == 0)
                break;
        if (which == 3)
            return jr_cmd_usage("dead: unknown subcommand '%s' (list, retry, "
                               "purge)", argv[0]);
        argc--;
        argv++;
    }
    if ((rc = jr_cmd_config(cli, &c)) != 0)
        return rc;
    /* list, retry and purge alike: no database is created */
    if ((rc = jr_cmd_reader(&c, &client)) == 0) {
        rc = subs[which].fn(client, argc, argv);
        jr_client_close(client);
    }
    jr_config_free(&c);
    return rc;
}
