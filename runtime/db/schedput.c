/* schedput.c - a schedule managed at run time added, changed, removed,
 * read back and backfilled over a backend (schedput.h). A set merges the
 * change into the definition read and writes it only if that is still
 * the one stored, else reads again. Uses schedput.h, backend.h, cron.h. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "base/cron.h"
#include "base/util.h"
#include "db/schedput.h"

#define SET_TRIES 20            /* a set read again after a change between */

static const jr_schedule *
in_config(const jr_schedput_cfg *cfg, const char *name)
{
    int i;

    for (i = 0; cfg != NULL && cfg->schedules != NULL &&
         i < cfg->schedules->n; i++)
        if (!cfg->schedules->s[i].runtime &&
            strcmp(cfg->schedules->s[i].name, name) == 0)
            return &cfg->schedules->s[i];
    return NULL;
}

typedef struct getarg {
    const char *name;
    char       *def;
    int         oom;
} getarg;

static int
get_one(const char *name, const char *def, double created, double updated,
        void *arg)
{
    getarg *g = arg;

    (void)created;
    (void)updated;
    if (strcmp(name, g->name) != 0)
        return 0;
    g->oom = (g->def = strdup(def)) == NULL;
    return 1;
}

int
jr_schedput_get(const jr_backend_ops *ops, jr_backend *b, const char *name,
                char **def, jr_err *err)
{
    getarg g = {name, NULL, 0};
    int64_t rev = -1;

    *def = NULL;
    if (ops->sched_defs(b, &rev, get_one, &g, err) < 0)
        return -1;
    if (g.oom)
        return jr_fail(err, JR_ENOMEM, "out of memory");
    if (g.def == NULL)
        return jr_fail(err, JR_ENOTFOUND, "no schedule '%s' added at run "
                       "time", name);
    *def = g.def;
    return 0;
}

/* Checks def as the config's reader does; -1 with err set. */
static int
check(const jr_schedput_cfg *cfg, const char *name, const char *def,
      jr_err *err)
{
    jr_schedules one;

    if (jr_scheddef_read(name, def, cfg ? cfg->timezone : NULL,
                         cfg && cfg->max_payload ? cfg->max_payload :
                         JR_SCHEDDEF_MAX, &one, err) < 0)
        return -1;
    jr_schedules_free(&one);
    return 0;
}

static int
set(const jr_backend_ops *ops, jr_backend *b, const jr_schedput_cfg *cfg,
    const char *name, const char *change, char **out, jr_err *err)
{
    char *old = NULL, *def = NULL;
    int tries, rc = 0;

    for (tries = 0; rc == 0 && tries < SET_TRIES; tries++) {
        free(old);
        free(def);
        def = NULL;
        if (jr_schedput_get(ops, b, name, &old, err) < 0 ||
            jr_scheddef_merge(name, old, change, &def, err) < 0 ||
            check(cfg, name, def, err) < 0 ||
            (rc = ops->sched_def_put(b, name, def, old, err)) < 0)
            rc = -1;
    }
    free(old);
    if (rc == 0)
        rc = jr_fail(err, JR_EDB, "schedule '%s': changed by others %d "
                     "times while this change was made; try again", name,
                     SET_TRIES);
    if (rc < 0 || out == NULL)
        free(def);
    else
        *out = def;
    return rc < 0 ? -1 : 0;
}

int
jr_schedput(const jr_backend_ops *ops, jr_backend *b,
            const jr_schedput_cfg *cfg, int what, const char *name,
            const char *def, char **out, jr_err *err)
{
    if (out != NULL)
        *out = NULL;
    if (jr_name_check(name, "schedule name", err) < 0) {
        err->code = JR_EINPUT;
        return -1;
    }
    /* a name in both: its run-time copy may go (the way out the runner's
     * log names), nothing else */
    if (in_config(cfg, name) != NULL && what == JR_SCHEDPUT_REMOVE) {
        int rc = ops->sched_def_put(b, name, NULL, NULL, err);
        if (rc == 0 || err->code != JR_ENOTFOUND)
            return rc < 0 ? -1 : 0;
    }
    if (in_config(cfg, name) != NULL)
        return jr_fail(err, JR_EINPUT, "schedule '%s' is in the config "
                       "file: it is read-only here (change the config and "
                       "reload)%s", name, what == JR_SCHEDPUT_ADD ?
                       "; choose another name" : "");
    if (what == JR_SCHEDPUT_REMOVE)
        return ops->sched_def_put(b, name, NULL, NULL, err) < 0 ? -1 : 0;
    if (def == NULL)
        def = "{}";
    if (what == JR_SCHEDPUT_SET)
        return set(ops, b, cfg, name, def, out, err);
    if (check(cfg, name, def, err) < 0 ||
        ops->sched_def_put(b, name, def, NULL, err) < 0)
        return -1;
    if (out != NULL && (*out = strdup(def)) == NULL)
        return jr_fail(err, JR_ENOMEM, "out of memory");
    return 0;
}

int
jr_schedput_find(const jr_backend_ops *ops, jr_backend *b,
                 const jr_schedput_cfg *cfg, const char *name,
                 jr_schedules *own, const jr_schedule **s, jr_err *err)
{
    char *def;
    int rc;

    memset(own, 0, sizeof *own);
    if ((*s = in_config(cfg, name)) != NULL)
        return 0;
    if (jr_schedput_get(ops, b, name, &def, err) < 0)
        return -1;
    rc = jr_scheddef_read(name, def, cfg ? cfg->timezone : NULL,
                          JR_SCHEDDEF_MAX, own, err);
    free(def);
    if (rc < 0)
        return -1;
    *s = &own->s[0];
    return 0;
}

long
jr_schedput_backfill(const jr_backend_ops *ops, jr_backend *b,
                     const jr_schedule *s, double from, double to,
                     jr_err *err)
{
    jr_fire *f;
    double t, now = jr_now();
    long n = 0, i;
    int rc;

    if (!isfinite(from) || !isfinite(to) || from < 0 || to < 0)
        return jr_fail(err, JR_EINPUT, "schedule '%s': backfill: FROM and "
                       "TO must be epoch seconds", s->name);
    if (!(from <= to))
        return jr_fail(err, JR_EINPUT, "schedule '%s': backfill: FROM is "
                       "after TO", s->name);
    if (to > now)
        return jr_fail(err, JR_EINPUT, "schedule '%s': backfill: TO is in "
                       "the future (the runners fire from now on)", s->name);
    /* within start_at and end_at first: the instants outside them are
     * not counted, and a window of years before a start would be walked
     * second by second */
    if (s->start_at > 0 && from < s->start_at)
        from = s->start_at;
    if (s->end_at > 0 && to > s->end_at)
        to = s->end_at;
    if (from > to)
        return 0;
    if ((f = calloc(JR_BACKFILL_MAX, sizeof *f)) == NULL)
        return jr_fail(err, JR_ENOMEM, "out of memory");
    for (t = from - 0.001; jr_cron_next(&s->cron, s->tz, t, &t) == 0 &&
         t <= to; ) {
        if ((s->start_at > 0 && t < s->start_at) ||
            (s->end_at > 0 && t > s->end_at))
            continue;
        if (n == JR_BACKFILL_MAX) {
            free(f);
            return jr_fail(err, JR_EINPUT, "schedule '%s': backfill: the "
                           "window holds more than %d fires; backfill it in "
                           "parts", s->name, JR_BACKFILL_MAX);
        }
        f[n].schedule = s->name;
        f[n].at = t;
        f[n].job.name = s->job;
        f[n].job.payload = s->payload;
        f[n].job.queue = s->queue;
        f[n].job.priority = s->priority;
        f[n].job.max_retries = s->max_retries;
        f[n].delay = jr_schedule_jitter(s, t);
        f[n++].backfill = 1;
    }
    rc = n > 0 ? ops->fire(b, f, (int)n, JR_FIRES_KEEP, err) : 0;
    for (i = 0, n = 0; rc >= 0 && f != NULL && i < JR_BACKFILL_MAX; i++)
        n += f[i].inserted > 0;
    free(f);
    return rc < 0 ? -1 : n;
}
