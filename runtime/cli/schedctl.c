/* schedctl.c - `jobrunner schedule`: pause and resume one schedule for
 * every runner, and fire one now through the runners' fire path
 * (docs/schedules.md, "Pause, resume, fire now"); `schedule list` is
 * `schedules`. The name must be one of the config's schedules. Goes
 * through the producer library. Uses commands.h, schedcmd.h,
 * jobrunner.h, util.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/schedcmd.h"
#include "backend.h"
#include "client/jobrunner.h"
#include "db/schedput.h"
#include "base/util.h"

static int
sched_pause(jr_client *db, const char *name, double at)
{
    (void)at;
    if (jr_client_schedule_pause(db, name) != JR_CLIENT_OK)
        return jr_cmd_client_fail(db);
    printf("paused schedule '%s': its fires are skipped until it is "
           "resumed\n", name);
    return JR_EXIT_OK;
}

static int
sched_resume(jr_client *db, const char *name, double at)
{
    (void)at;
    if (jr_client_schedule_resume(db, name) != JR_CLIENT_OK)
        return jr_cmd_client_fail(db);
    printf("resumed schedule '%s': it fires from its next instant on (the "
           "paused time is skipped)\n", name);
    return JR_EXIT_OK;
}

static int
sched_fire(jr_client *db, const char *name, double at)
{
    char when[40];

    if (jr_client_schedule_fire(db, name, &at) != JR_CLIENT_OK)
        return jr_cmd_client_fail(db);
    printf("asked for a fire of schedule '%s' at %s: a runner inserts its "
           "job (once) within a second or so\n", name,
           jr_time_iso(at, when, sizeof when));
    return JR_EXIT_OK;
}

static const struct sched_sub {
    const char *name;
    int       (*fn)(jr_client *db, const char *name, double at);
} subs[] = {
    {"pause", sched_pause},
    {"resume", sched_resume},
    {"fire", sched_fire},
    {NULL, NULL}
};

/* Whether name is a schedule added at run time (schedule add). */
static int
runtime_one(jr_config *c, const char *name)
{
    jr_db db = {0};
    jr_err err;
    char *def = NULL;
    int found;

    if (jr_cmd_open_reader(c, &db, 1) != 0)
        return 0;
    found = jr_schedput_get(db.ops, db.b, name, &def, &err) == 0;
    free(def);
    jr_db_close(&db);
    return found;
}

/* The name given is a schedule of c or one added at run time: 0, else a
 * usage error said. */
static int
known(jr_config *c, const char *name)
{
    char names[512] = "";
    size_t len = 0;
    int i;

    for (i = 0; i < c->schedules.n; i++) {
        if (strcmp(c->schedules.s[i].name, name) == 0)
            return 0;
        if (len < sizeof names - 1)
            len += (size_t)snprintf(names + len, sizeof names - len, "%s%s",
                                    i ? ", " : "", c->schedules.s[i].name);
    }
    if (runtime_one(c, name))
        return 0;
    fprintf(stderr, "jobrunner: schedule '%s' is not in %s (schedules: "
            "%s) nor added at run time\n", name, c->file ? c->file :
            "the config", c->schedules.n ? names : "none");
    return JR_EXIT_USAGE;
}

/* fire's options: [--at TIME]; 0 (the current second) when not given. */
static int
fire_at(jr_cli *cli, double *at)
{
    jr_err err;

    *at = 0;
    if (cli->argc == 2)
        return 0;
    if (strcmp(cli->argv[0], "fire") != 0 || cli->argc != 4 ||
        strcmp(cli->argv[2], "--at") != 0)
        return jr_cmd_usage("schedule %s: unexpected argument '%s'",
                            cli->argv[0], cli->argv[2]);
    if (jr_parse_time(cli->argv[3], "--at", at, &err) < 0)
        return jr_cmd_die(JR_EXIT_USAGE, err.msg);
    return 0;
}

int
jr_cmd_schedule(jr_cli *cli)
{
    const struct sched_sub *s;
    jr_client *client;
    jr_config c;
    double at;
    int rc;

    if (cli->argc >= 1 && strcmp(cli->argv[0], "list") == 0) {
        cli->argc--;            /* `schedule list` is `schedules` */
        cli->argv++;
        return jr_cmd_schedules(cli);
    }
    if (cli->argc == 0)
        return jr_cmd_usage("schedule: missing the subcommand (list, "
                            "pause, resume, fire, add, set, remove, "
                            "backfill)");
    if (strcmp(cli->argv[0], "add") == 0 || strcmp(cli->argv[0], "set") == 0
        || strcmp(cli->argv[0], "remove") == 0 ||
        strcmp(cli->argv[0], "backfill") == 0)
        return jr_cmd_schedule_rt(cli);
    for (s = subs; s->name && strcmp(s->name, cli->argv[0]) != 0; s++)
        ;
    if (s->name == NULL)
        return jr_cmd_usage("schedule: unknown subcommand '%s' (list, "
                            "pause, resume, fire, add, set, remove, "
                            "backfill)", cli->argv[0]);
    if (cli->argc < 2)
        return jr_cmd_usage("schedule %s: missing the schedule NAME",
                            s->name);
    if ((rc = fire_at(cli, &at)) != 0)
        return rc;
    if ((rc = jr_cmd_config(cli, &c)) != 0)
        return rc;
    if ((rc = known(&c, cli->argv[1])) == 0 &&
        (rc = jr_cmd_client(&c, &client)) == 0) {
        rc = s->fn(client, cli->argv[1], at);
        jr_client_close(client);
    }
    jr_config_free(&c);
    return rc;
}
