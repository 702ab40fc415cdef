/* schedcmd.c - `jobrunner schedules [--json]`: each schedule of the
 * config with its zone, its last fire (from the database's fires table)
 * and its next three fires in its zone and in UTC; and the warnings of
 * `check` for a schedule that never fires or whose job has no handler.
 * Uses the config, cron.h,
 * backend.h (last_fires). */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend.h"
#include "cli/commands.h"
#include "base/cron.h"
#include "cli/schedcmd.h"
#include "config/scheddef.h"
#include "base/util.h"

#define NEXT_SHOWN 3

typedef struct last {
    char    *name;
    double   at;
    int64_t  id;
} last;

typedef struct lasts {
    last *v;
    int   n;
    last *paused;               /* the paused schedules (at: since) */
    int   npaused;
} lasts;

static int
collect_paused(const char *schedule, int paused, double since, double asked,
               void *arg)
{
    lasts *l = arg;
    last *more;

    (void)asked;
    if (!paused)
        return 0;
    if ((more = realloc(l->paused, (size_t)(l->npaused + 1) * sizeof *more))
        == NULL)
        return 1;
    l->paused = more;
    if ((more[l->npaused].name = strdup(schedule)) == NULL)
        return 1;
    more[l->npaused].at = since;
    more[l->npaused++].id = 0;
    return 0;
}

static int
collect(const char *schedule, double at, int64_t id, void *arg)
{
    lasts *l = arg;
    last *more = realloc(l->v, (size_t)(l->n + 1) * sizeof *more);

    if (more == NULL)
        return 1;
    l->v = more;
    if ((more[l->n].name = strdup(schedule)) == NULL)
        return 1;
    more[l->n].at = at;
    more[l->n++].id = id;
    return 0;
}

/* Reads the last fires; a database that does not exist yet has none. */
static int
read_lasts(const jr_config *c, lasts *l)
{
    jr_err err;
    jr_db db;
    int rc = jr_cmd_open_reader(c, &db, 1);

    if (rc != 0)                /* none: no fires yet */
        return rc == JR_EXIT_NODB ? 0 : JR_EXIT_FAIL;
    if ((db.ops->last_fires(db.b, collect, l, &err) < 0 ||
         db.ops->sched_states(db.b, collect_paused, l, &err) < 0) &&
        err.code != JR_ENOTFOUND) {
        fprintf(stderr, "jobrunner: %s\n", err.msg);
        rc = JR_EXIT_FAIL;
    }
    jr_db_close(&db);
    return rc;
}

/* "2026-11-24T06:00:00+01:00" and the zone's abbreviation. */
static void
local_time(const char *tz, double t, char *buf, size_t size, char *abbr,
           size_t abbrsz)
{
    long off = jr_cron_offset(tz, t, abbr, abbrsz);
    time_t secs = (time_t)floor(t) + off;
    int a = (int)(off < 0 ? -off : off) % 86400;
    struct tm tm;

    gmtime_r(&secs, &tm);
    snprintf(buf, size, "%04d-%02d-%02dT%02d:%02d:%02d%c%02d:%02d",
             tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
             tm.tm_min, tm.tm_sec, off < 0 ? '-' : '+', a / 3600,
             a % 3600 / 60);
}

static const last *
find_in(const last *v, int n, const char *name)
{
    int i;

    for (i = 0; i < n; i++)
        if (strcmp(v[i].name, name) == 0)
            return &v[i];
    return NULL;
}

/* The next fires of s after now into t[]; returns how many. */
static int
nexts(const jr_schedule *s, double now, double *t)
{
    int n;

    if (s->start_at > 0 && now < s->start_at)
        now = s->start_at - 0.001;      /* start_at itself may fire */
    for (n = 0; n < NEXT_SHOWN; n++)
        if (jr_cron_next(&s->cron, s->tz, n ? t[n - 1] : now, &t[n]) < 0 ||
            (s->end_at > 0 && t[n] > s->end_at))
            break;
    return n;
}

static void
print_text(const jr_schedule *s, const last *l, const last *p, double now)
{
    char loc[96], utc[40], abbr[16];
    double t[NEXT_SHOWN];
    int i, n = nexts(s, now, t);

    printf("%s: %s, zone %s, job %s, queue %s, catch_up %s\n", s->name,
           s->spec, s->tz, s->job, s->queue ? s->queue : "default",
           jr_catchup_name(s->catch_up));
    if (p != NULL)
        printf("  paused since %s: these fires are skipped until resumed\n",
               jr_time_iso(p->at, utc, sizeof utc));
    if (l != NULL) {
        local_time(s->tz, l->at, loc, sizeof loc, abbr, sizeof abbr);
        printf("  last fire: %s %s (%s), ", loc, abbr,
               jr_time_iso(l->at, utc, sizeof utc));
        if (l->id > 0)
            printf("job %lld\n", (long long)l->id);
        else
            printf("no job (a resume: the paused time is skipped)\n");
    } else {
        printf("  last fire: never\n");
    }
    for (i = 0; i < n; i++) {
        local_time(s->tz, t[i], loc, sizeof loc, abbr, sizeof abbr);
        printf("  %s %s %s (%s)\n", i ? "           " : "next fires:", loc,
               abbr, jr_time_iso(t[i], utc, sizeof utc));
    }
    if (n == 0)
        printf("  next fires: none\n");
}

static void
print_json(const jr_schedule *s, const last *l, const last *p, double now,
           int first)
{
    char loc[96], utc[40], abbr[16];
    double t[NEXT_SHOWN];
    int i, n = nexts(s, now, t);

    printf("%s{\"name\":", first ? "" : ",");
    jr_json_str(stdout, s->name);
    printf(",\"job\":");
    jr_json_str(stdout, s->job);
    printf(",\"%s\":", s->cron.every > 0 ? "every" : "cron");
    if (s->cron.every > 0)
        printf("%.0f", s->cron.every);
    else
        jr_json_str(stdout, s->spec);
    printf(",\"tz\":");
    jr_json_str(stdout, s->tz);
    printf(",\"queue\":");
    jr_json_str(stdout, s->queue ? s->queue : "default");
    printf(",\"catch_up\":\"%s\",\"paused\":%s,\"last_fire\":",
           jr_catchup_name(s->catch_up), p ? "true" : "false");
    if (l != NULL) {
        local_time(s->tz, l->at, loc, sizeof loc, abbr, sizeof abbr);
        printf("{\"local\":\"%s\",\"utc\":\"%s\",\"job_id\":", loc,
               jr_time_iso(l->at, utc, sizeof utc));
        printf(l->id > 0 ? "%lld}" : "null}", (long long)l->id);
    } else {
        printf("null");
    }
    printf(",\"next\":[");
    for (i = 0; i < n; i++) {
        local_time(s->tz, t[i], loc, sizeof loc, abbr, sizeof abbr);
        printf("%s{\"local\":\"%s\",\"zone\":\"%s\",\"utc\":\"%s\"}",
               i ? "," : "", loc, abbr, jr_time_iso(t[i], utc, sizeof utc));
    }
    printf("]}");
}

typedef struct defs {           /* the run-time schedules read */
    jr_config *c;
    int        oom;
} defs;

/* Appends a run-time schedule to the config's list (owned by it); one
 * the config's reader refuses is said and left out. */
static int
add_def(const char *name, const char *def, double created, double updated,
        void *arg)
{
    defs *d = arg;
    jr_schedules one;
    jr_schedule *more;
    jr_err err;

    (void)created;
    (void)updated;
    if (jr_scheddef_read(name, def, d->c->schedules.timezone,
                         d->c->max_payload, &one, &err) < 0) {
        fprintf(stderr, "jobrunner: run-time %s\n", err.msg);
        return 0;
    }
    more = realloc(d->c->schedules.s, (size_t)(d->c->schedules.n + 1) *
                   sizeof *more);
    if (more == NULL) {
        jr_schedules_free(&one);
        return d->oom = 1;
    }
    d->c->schedules.s = more;
    more[d->c->schedules.n++] = one.s[0];       /* its strings move */
    free(one.s);
    free(one.timezone);
    return 0;
}

/* The schedules managed at run time, after the config's; a database that
 * does not exist yet has none. */
static int
read_defs(jr_config *c)
{
    defs d = {c, 0};
    int64_t rev = -1;
    jr_err err;
    jr_db db;
    int rc = jr_cmd_open_reader(c, &db, 1);

    if (rc != 0)
        return rc == JR_EXIT_NODB ? 0 : JR_EXIT_FAIL;
    if (db.ops->sched_defs(db.b, &rev, add_def, &d, &err) < 0) {
        fprintf(stderr, "jobrunner: %s\n", err.msg);
        rc = JR_EXIT_FAIL;
    } else if (d.oom) {
        fprintf(stderr, "jobrunner: out of memory\n");
        rc = JR_EXIT_FAIL;
    }
    jr_db_close(&db);
    return rc;
}

int
jr_cmd_schedules(jr_cli *cli)
{
    lasts l = {0};
    jr_config c;
    double now = jr_now();
    int json = 0, i, rc;

    for (i = 0; i < cli->argc; i++) {
        if (strcmp(cli->argv[i], "--json") == 0)
            json = 1;
        else
            return jr_cmd_usage("schedules: unexpected argument '%s'",
                               cli->argv[i]);
    }
    if ((rc = jr_cmd_config(cli, &c)) != 0)
        return rc;
    if ((rc = read_defs(&c)) != 0 ||
        (c.schedules.n > 0 && (rc = read_lasts(&c, &l)) != 0)) {
        jr_config_free(&c);
        return rc;
    }
    if (json)
        printf("{\"schedules\":[");
    else if (c.schedules.n == 0)
        printf("no schedules in %s nor added at run time\n",
               c.file ? c.file : "the config");
    for (i = 0; i < c.schedules.n; i++) {
        const jr_schedule *s = &c.schedules.s[i];
        const last *at = find_in(l.v, l.n, s->name),
                   *p = find_in(l.paused, l.npaused, s->name);
        if (json)
            print_json(s, at, p, now, i == 0);
        else
            print_text(s, at, p, now);
    }
    if (json)
        printf("]}\n");
    for (i = 0; i < l.n; i++)
        free(l.v[i].name);
    for (i = 0; i < l.npaused; i++)
        free(l.paused[i].name);
    free(l.v);
    free(l.paused);
    jr_config_free(&c);
    return JR_EXIT_OK;
}

/* A schedule that never fires: a cron no date matches (30 February), as
 * the runner finds it at start. 1 if said. */
static int
warn_never(const jr_config *c, const jr_schedule *s, double now)
{
    double next;

    if (jr_cron_next(&s->cron, s->tz, now, &next) == 0)
        return 0;
    fprintf(stderr, "%s:%d: warning: schedule '%s': '%s' never fires (no "
            "time matches it in the next %d years)\n",
            c->file ? c->file : "config", s->line, s->name, s->spec,
            JR_CRON_YEARS);
    return 1;
}

int
jr_schedcmd_warn(const jr_config *c, const jr_handler *h, int n)
{
    double now = jr_now();
    int i, j, count = 0;

    for (i = 0; i < c->schedules.n; i++) {
        const jr_schedule *s = &c->schedules.s[i];
        count += warn_never(c, s, now);
        for (j = 0; j < n && strcmp(h[j].name, s->job) != 0; j++)
            ;
        if (j < n)
            continue;
        fprintf(stderr, "%s:%d: warning: schedule '%s': no handler for job "
                "'%s' in %s; its jobs will wait until one is loaded\n",
                c->file ? c->file : "config", s->line, s->name, s->job,
                c->scripts);
        count++;
    }
    return count;
}
