/* engines.h - runs a C test's table on both engines: SQLite in a temp dir,
 * then PostgreSQL at the URL given as argv[1] (spec/run passes the
 * throwaway cluster's) in a schema of its own, dropped before and after.
 * The tests read `engine`, `url` and `schema`. Uses check.h, libpq. */
#ifndef JR_SPEC_ENGINES_H
#define JR_SPEC_ENGINES_H

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <libpq-fe.h>

#include "check.h"

static const char *engine;      /* "sqlite" or "postgres", for messages */
static char url[4096];          /* the engine's URL */
static char schema[64];         /* PostgreSQL schema of this run */

typedef struct check_test {
    const char *name;
    void      (*fn)(void);
} check_test;

static void
check_run_all(const check_test *t, size_t n, int *pass, int *fail)
{
    size_t i;

    for (i = 0; i < n; i++) {
        failed = 0;
        t[i].fn();
        printf("%s %s: %s\n", failed ? "FAIL" : "ok  ", engine, t[i].name);
        if (failed)
            (*fail)++;
        else
            (*pass)++;
    }
}

static void
check_pg_exec(const char *pgurl, const char *sql)
{
    PGconn *c = PQconnectdb(pgurl);

    if (PQstatus(c) == CONNECTION_OK)
        PQclear(PQexec(c, sql));
    PQfinish(c);
}

/* Runs t[0..n) on each engine; name prefixes the temp dir and schema.
 * Returns main's exit status. */
static int
check_engines(int argc, char **argv, const check_test *t, size_t n,
              const char *name)
{
    char dir[64], drop[256];
    int pass = 0, fail = 0;

    snprintf(dir, sizeof dir, "/tmp/%s.XXXXXX", name);
    if (mkdtemp(dir) == NULL) {
        perror("mkdtemp");
        return 2;
    }
    engine = check_where = "sqlite";
    snprintf(url, sizeof url, "sqlite:%s/jobs.db", dir);
    check_run_all(t, n, &pass, &fail);
    snprintf(drop, sizeof drop, "rm -rf '%s'", dir);
    if (system(drop) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    if (argc > 1 && argv[1][0] != '\0') {
        engine = check_where = "postgres";
        snprintf(url, sizeof url, "%s", argv[1]);
        snprintf(schema, sizeof schema, "%s_%d", name, (int)getpid());
        snprintf(drop, sizeof drop, "SET client_min_messages = warning; "
                 "DROP SCHEMA IF EXISTS %s CASCADE", schema);
        check_pg_exec(url, drop);
        check_run_all(t, n, &pass, &fail);
        check_pg_exec(url, drop);
    } else {
        printf("skip postgres: no URL given\n");
    }
    printf("%d passed, %d failed\n", pass, fail);
    return fail ? 1 : 0;
}

#endif
