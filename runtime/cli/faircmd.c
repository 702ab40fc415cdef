/* faircmd.c - `jobrunner fair set QUEUE KEY WEIGHT`: a fair queue's key
 * weight for every runner's claim, stored in the database over the
 * config's (docs/queues.md, "Fair share"); `fair set --name NAME KEY
 * WEIGHT`: the same for a key in a job name's own fair scope, over its
 * handler's weights ("A name's own weights"). Uses commands.h,
 * backend.h, fairpick.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "cli/commands.h"
#include "base/esc.h"
#include "base/job.h"
#include "base/jsontext.h"
#include "base/util.h"
#include "fairpick.h"

/* 1 if s is UTF-8 throughout. */
static int
utf8(const char *s)
{
    size_t n = strlen(s), u = 1;

    for (; n && u; s += u, n -= u)
        u = jr_jsontext_utf8_len((const unsigned char *)s, n);
    return n == 0;
}

/* key (UTF-8) capped at its first JR_FAIR_KEY_CAP characters into out,
 * as the engines cap a job's key (fairpick.h), so a KEY as long as a
 * payload's value names the key its jobs have. */
static void
key_cap(const char *key, char *out)
{
    size_t n = strlen(key), at = 0, u;
    int chars;

    for (chars = 0; chars < JR_FAIR_KEY_CAP && at < n; chars++, at += u)
        u = jr_jsontext_utf8_len((const unsigned char *)key + at, n - at);
    memcpy(out, key, at);
    out[at] = '\0';
}

/* 1 if the config makes queue fair (limits["queue:NAME"].fair). */
static int
fair_here(const jr_config *c, const char *queue)
{
    int i;

    for (i = 0; i < c->limits.n; i++)
        if (c->limits.l[i].fair_path &&
            strncmp(c->limits.l[i].scope, "queue:", 6) == 0 &&
            strcmp(c->limits.l[i].scope + 6, queue) == 0)
            return 1;
    return 0;
}

/* fair set --name NAME KEY WEIGHT, checked. */
static int
name_set(jr_cli *cli, const char *name, const char *key, double w)
{
    jr_config c;
    jr_db db = {0};
    jr_err err;
    jr_fair_names names = {0};
    char k[300];
    int rc, i;

    if ((rc = jr_cmd_config(cli, &c)) != 0)
        return rc;
    if ((rc = jr_cmd_open_reader(&c, &db, 0)) == 0) {
        if (db.ops->fair_name_set(db.b, name, key, w, &err) < 0 ||
            db.ops->fair_name_list(db.b, 1, jr_fair_names_add, &names,
                                   &err) < 0)
            rc = jr_cmd_die(JR_EXIT_FAIL, err.msg);
        else {
            printf("job name '%s': fair key '%s' weighs %g\n", name,
                   jr_esc_str(k, sizeof k, key), w);
            for (i = 0; i < names.n && strcmp(names.name[i], name); i++)
                ;
            if (i == names.n)                /* a misspelt name? */
                fprintf(stderr, "jobrunner: fair set: note: job name '%s' "
                        "has no fair weights of its own (no runner loaded "
                        "a handler of it whose fair is a table): the "
                        "weight counts once one does\n", name);
        }
    }
    jr_db_close(&db);
    jr_config_free(&c);
    return rc;
}

int
jr_cmd_fair(jr_cli *cli)
{
    jr_config c;
    jr_db db = {0};
    jr_err err;
    char k[300], *end, capped[JR_FAIR_KEY_CAP * 4 + 1];
    const char *scope, *key, *weight;
    double w;
    int rc, named;

    if (cli->argc < 1 || strcmp(cli->argv[0], "set") != 0)
        return jr_cmd_usage("fair: expected 'fair set QUEUE KEY WEIGHT' or "
                            "'fair set --name NAME KEY WEIGHT'");
    named = cli->argc > 1 && strcmp(cli->argv[1], "--name") == 0;
    if (cli->argc != 4 + named)
        return jr_cmd_usage(named ? "fair set --name: expected NAME KEY "
                            "WEIGHT" : "fair set: expected QUEUE KEY WEIGHT");
    scope = cli->argv[1 + named];
    key = cli->argv[2 + named];
    weight = cli->argv[3 + named];
    if (jr_name_check(scope, named ? "job name" : "queue name", &err) < 0)
        return jr_cmd_usage("fair set: %s", err.msg);
    if (key[0] == '\0')
        return jr_cmd_usage("fair set: the KEY must not be empty");
    if (!utf8(key))                          /* no payload holds such a key */
        return jr_cmd_usage("fair set: the KEY must be UTF-8 text");
    key_cap(key, capped);
    key = capped;
    w = strtod(weight, &end);
    if (end == weight || *end || !(w >= 1 && w <= 1000))
        return jr_cmd_usage("fair set: the WEIGHT must be a number from 1 "
                            "to 1000, got '%.40s'", weight);
    if (named)
        return name_set(cli, scope, key, w);
    if ((rc = jr_cmd_config(cli, &c)) != 0)
        return rc;
    if ((rc = jr_cmd_open_reader(&c, &db, 0)) == 0) {
        if (db.ops->fair_set(db.b, cli->argv[1], key, w, &err) < 0)
            rc = jr_cmd_die(JR_EXIT_FAIL, err.msg);
        else
        {
            printf("queue '%s': fair key '%s' weighs %g\n", cli->argv[1],
                   jr_esc_str(k, sizeof k, key), w);
            if (!fair_here(&c, cli->argv[1]))    /* a misspelt queue? */
                fprintf(stderr, "jobrunner: fair set: note: queue '%s' is "
                        "not fair in this config: the weight counts only "
                        "where a runner's config makes it fair\n",
                        cli->argv[1]);
        }
    }
    jr_db_close(&db);
    jr_config_free(&c);
    return rc;
}
