/* jrbench.c - the measuring half of `make bench` (bench/run drives it).
 * Pushes through libjobrunner (jobrunner.h), starts the runner and watches
 * it drain, samples CPU time and RSS from /proc. Prints one line of
 * "key=value" pairs per command, for bench/report.lua.
 *
 *   jrbench push URL N BATCH          jobs/s; BATCH 0: one push per call
 *   jrbench pushu URL N BATCH         the same, each job with its own
 *                                     unique_key (the cost of the check)
 *   jrbench fill URL N NAME           queue N jobs NAME (batches of 5000)
 *   jrbench fillq URL N NAME Q1,Q2    N jobs spread over the queues
 *   jrbench fillk URL N NAME K        N jobs spread over K limit keys
 *   jrbench fills URL N NAME K        N jobs spread over K sequences
 *   jrbench fillp URL N NAME B KEYS   N jobs with a payload of B bytes,
 *                                     encrypted with the key file KEYS
 *                                     ("-": in clear)
 *   jrbench fillt URL N NAME Q K      N jobs into queue Q, payload
 *                                     {"tenant": "t<i mod K>"}
 *   jrbench latq URL N MS NAME Q      latency's pushes into queue Q,
 *                                     each of tenant "b"
 *   jrbench latency URL N MS NAME     N single pushes MS milliseconds apart,
 *                                     each with payload {"t": the wall
 *                                     clock in seconds before its push};
 *                                     each push's round trip (ms) to the
 *                                     file $JRBENCH_LATPUSH, if set
 *   jrbench drain URL BIN CONFIG LOG  start BIN -c CONFIG run, time until
 *                                     the jobs table is empty, then stop it
 *   jrbench idle BIN CONFIG LOG SECS  CPU% of the runner and its workers
 *   jrbench first URL BIN CONFIG LOG  start BIN -c CONFIG run with a job
 *                                     queued: seconds until it is claimed
 *   jrbench empty URL                 wait (30 s at most) for an empty table
 *   jrbench warm URL BIN CONFIGS LOG N NAME WORKERS
 *                                     N jobs NAME queued in the paused
 *                                     queue "default", one runner per config
 *                                     (comma-separated) started and given
 *                                     WORKERS workers each; then the queue
 *                                     resumed and timed until empty: the
 *                                     drain without start-up
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <libpq-fe.h>
#include <sqlite3.h>

#include "client/jobrunner.h"

#define FILL_BATCH 5000
#define MAX_KIDS   256

static double
mono(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void
sleep_s(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};

    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

static void
die(const char *what, const char *msg)
{
    fprintf(stderr, "jrbench: %s: %s\n", what, msg);
    exit(1);
}

static jr_client *
open_client(const char *url)
{
    jr_client *c;

    if (jr_client_open(&c, url, NULL) != JR_CLIENT_OK)
        die(url, jr_client_errmsg(c));
    return c;
}

/* --- push ----------------------------------------------------------- */

static void
push_n(jr_client *c, long n, long batch, const char *name)
{
    static const jr_client_opts init = JR_CLIENT_OPTS_INIT;
    jr_client_job *jobs;
    long i, k;

    if (batch == 0) {
        for (i = 0; i < n; i++)
            if (jr_client_push(c, name, "{\"n\":1}", NULL, NULL) !=
                JR_CLIENT_OK)
                die("push", jr_client_errmsg(c));
        return;
    }
    if ((jobs = calloc((size_t)batch, sizeof *jobs)) == NULL)
        die("push", "out of memory");
    for (k = 0; k < batch; k++) {
        jobs[k].name = name;
        jobs[k].payload = "{\"n\":1}";
        jobs[k].opts = init;
    }
    for (i = 0; i < n; i += batch) {
        k = n - i < batch ? n - i : batch;
        if (jr_client_push_many(c, jobs, (size_t)k, NULL) != JR_CLIENT_OK)
            die("push_many", jr_client_errmsg(c));
    }
    free(jobs);
}

/* pushu URL N BATCH: batches of jobs each with a unique key of its own,
 * so every push looks up its key and inserts (no duplicates). */
static int
cmd_pushu(char **argv)
{
    static const jr_client_opts init = JR_CLIENT_OPTS_INIT;
    jr_client *c = open_client(argv[0]);
    long n = atol(argv[1]), batch = atol(argv[2]), i, k;
    jr_client_job *jobs;
    jr_client_unique *u;
    char (*keys)[32];
    double t0, secs;

    if (batch <= 0)
        batch = 1;
    jobs = calloc((size_t)batch, sizeof *jobs);
    u = calloc((size_t)batch, sizeof *u);
    keys = calloc((size_t)batch, sizeof *keys);
    if (jobs == NULL || u == NULL || keys == NULL)
        die("pushu", "out of memory");
    t0 = mono();
    for (i = 0; i < n; i += batch) {
        for (k = 0; k < batch; k++) {
            snprintf(keys[k], sizeof keys[k], "k%ld", i + k);
            jobs[k].name = "noop";
            jobs[k].payload = "{\"n\":1}";
            jobs[k].opts = init;
            u[k].key = keys[k];
        }
        k = n - i < batch ? n - i : batch;
        if (jr_client_push_many_unique(c, jobs, u, (size_t)k, NULL, NULL)
            != JR_CLIENT_OK)
            die("push_many_unique", jr_client_errmsg(c));
    }
    secs = mono() - t0;
    free(jobs);
    free(u);
    free(keys);
    jr_client_close(c);
    printf("jobs=%ld secs=%.6f rate=%.1f\n", n, secs, (double)n / secs);
    return 0;
}

static int
cmd_push(char **argv)
{
    jr_client *c = open_client(argv[0]);
    long n = atol(argv[1]), batch = atol(argv[2]);
    double t0 = mono(), secs;

    push_n(c, n, batch, "noop");
    secs = mono() - t0;
    jr_client_close(c);
    printf("jobs=%ld secs=%.6f rate=%.1f\n", n, secs, (double)n / secs);
    return 0;
}

/* fillp URL N NAME BYTES KEYS: N jobs, each with the payload
 * {"d":"xx...x"} of BYTES bytes, sealed with the key file KEYS unless it
 * is "-" (bench/run crypt_case). */
static int
cmd_fillp(char **argv)
{
    static const jr_client_opts init = JR_CLIENT_OPTS_INIT;
    jr_client_config cfg = {0};
    jr_client *c;
    long n = atol(argv[1]), size = atol(argv[3]), i, k, batch = 1000;
    jr_client_job *jobs = calloc((size_t)batch, sizeof *jobs);
    char *pay = malloc((size_t)(size > 9 ? size : 9) + 1);

    if (jobs == NULL || pay == NULL || size < 9)
        die("fillp", "out of memory or BYTES under 9");
    memcpy(pay, "{\"d\":\"", 6);
    memset(pay + 6, 'x', (size_t)size - 8);
    memcpy(pay + size - 2, "\"}", 3);
    cfg.key_file = strcmp(argv[4], "-") == 0 ? NULL : argv[4];
    if (jr_client_open(&c, argv[0], &cfg) != JR_CLIENT_OK)
        die(argv[0], jr_client_errmsg(c));
    for (k = 0; k < batch; k++) {
        jobs[k].name = argv[2];
        jobs[k].payload = pay;
        jobs[k].opts = init;
    }
    for (i = 0; i < n; i += batch) {
        k = n - i < batch ? n - i : batch;
        if (jr_client_push_many(c, jobs, (size_t)k, NULL) != JR_CLIENT_OK)
            die("fillp", jr_client_errmsg(c));
    }
    jr_client_close(c);
    free(jobs);
    free(pay);
    return 0;
}

/* fillq URL N NAME Q1,Q2,...: N jobs, job k in queue k mod the count. */
static int
cmd_fillq(char **argv)
{
    static const jr_client_opts init = JR_CLIENT_OPTS_INIT;
    jr_client *c = open_client(argv[0]);
    long n = atol(argv[1]), i, k;
    char *list = strdup(argv[3]), *q[64], *save = NULL, *t;
    int nq = 0;
    jr_client_job *jobs = calloc(FILL_BATCH, sizeof *jobs);

    if (list == NULL || jobs == NULL)
        die("fillq", "out of memory");
    for (t = strtok_r(list, ",", &save); t && nq < 64;
         t = strtok_r(NULL, ",", &save))
        q[nq++] = t;
    if (nq == 0)
        die("fillq", "no queue");
    for (i = 0; i < n; i += k) {
        for (k = 0; k < FILL_BATCH && i + k < n; k++) {
            jobs[k].name = argv[2];
            jobs[k].payload = "{\"n\":1}";
            jobs[k].opts = init;
            jobs[k].opts.queue = q[(i + k) % nq];
        }
        if (jr_client_push_many(c, jobs, (size_t)k, NULL) != JR_CLIENT_OK)
            die("push_many", jr_client_errmsg(c));
    }
    free(jobs);
    free(list);
    jr_client_close(c);
    return 0;
}

/* fillk URL N NAME K: N jobs, job i with limit key "k<i mod K>". */
/* fills URL N NAME K: N jobs, job i in sequence "s<i mod K>". */
static int
cmd_fills(char **argv)
{
    static const jr_client_opts init = JR_CLIENT_OPTS_INIT;
    jr_client *c = open_client(argv[0]);
    long n = atol(argv[1]), nk = atol(argv[3]), i, k;
    jr_client_job *jobs = calloc(FILL_BATCH, sizeof *jobs);
    jr_client_seq *seqs = calloc(FILL_BATCH, sizeof *seqs);
    char (*keys)[24] = calloc(FILL_BATCH, sizeof *keys);

    if (jobs == NULL || seqs == NULL || keys == NULL || nk <= 0)
        die("fills", "out of memory or no sequences");
    for (i = 0; i < n; i += k) {
        for (k = 0; k < FILL_BATCH && i + k < n; k++) {
            snprintf(keys[k], sizeof keys[k], "s%ld", (i + k) % nk);
            jobs[k].name = argv[2];
            jobs[k].payload = "{\"n\":1}";
            jobs[k].opts = init;
            seqs[k].key = keys[k];
        }
        if (jr_client_push_many_seq(c, jobs, seqs, (size_t)k, NULL) !=
            JR_CLIENT_OK)
            die("push_many_seq", jr_client_errmsg(c));
    }
    free(keys);
    free(seqs);
    free(jobs);
    jr_client_close(c);
    return 0;
}

static int
cmd_fillk(char **argv)
{
    static const jr_client_opts init = JR_CLIENT_OPTS_INIT;
    jr_client *c = open_client(argv[0]);
    long n = atol(argv[1]), nk = atol(argv[3]), i, k;
    jr_client_job *jobs = calloc(FILL_BATCH, sizeof *jobs);
    char (*keys)[24] = calloc(FILL_BATCH, sizeof *keys);

    if (jobs == NULL || keys == NULL || nk <= 0)
        die("fillk", "out of memory or no keys");
    for (i = 0; i < n; i += k) {
        for (k = 0; k < FILL_BATCH && i + k < n; k++) {
            snprintf(keys[k], sizeof keys[k], "k%ld", (i + k) % nk);
            jobs[k].name = argv[2];
            jobs[k].payload = "{\"n\":1}";
            jobs[k].opts = init;
            jobs[k].opts.key = keys[k];
        }
        if (jr_client_push_many(c, jobs, (size_t)k, NULL) != JR_CLIENT_OK)
            die("push_many", jr_client_errmsg(c));
    }
    free(keys);
    free(jobs);
    jr_client_close(c);
    return 0;
}

/* fillt URL N NAME Q K: N jobs into queue Q, job i of tenant "t<i mod
 * K>" (a fair queue's key, docs/queues.md). */
static int
cmd_fillt(char **argv)
{
    static const jr_client_opts init = JR_CLIENT_OPTS_INIT;
    jr_client *c = open_client(argv[0]);
    long n = atol(argv[1]), nk = atol(argv[4]), i, k;
    jr_client_job *jobs = calloc(FILL_BATCH, sizeof *jobs);
    char (*pay)[48] = calloc(FILL_BATCH, sizeof *pay);

    if (jobs == NULL || pay == NULL || nk <= 0)
        die("fillt", "out of memory or no tenants");
    for (i = 0; i < n; i += k) {
        for (k = 0; k < FILL_BATCH && i + k < n; k++) {
            snprintf(pay[k], sizeof pay[k], "{\"tenant\":\"t%ld\"}",
                     (i + k) % nk);
            jobs[k].name = argv[2];
            jobs[k].payload = pay[k];
            jobs[k].opts = init;
            jobs[k].opts.queue = argv[3];
        }
        if (jr_client_push_many(c, jobs, (size_t)k, NULL) != JR_CLIENT_OK)
            die("push_many", jr_client_errmsg(c));
    }
    free(pay);
    free(jobs);
    jr_client_close(c);
    return 0;
}

/* latq URL N MS NAME Q: N single pushes MS ms apart into queue Q, of
 * tenant "b". */
static int
cmd_latq(char **argv)
{
    jr_client_opts o = JR_CLIENT_OPTS_INIT;
    jr_client *c = open_client(argv[0]);
    long n = atol(argv[1]), i;
    double gap = atof(argv[2]) / 1000, next = mono();

    o.queue = argv[4];
    for (i = 0; i < n; i++) {
        double now = mono();
        if (next > now)
            sleep_s(next - now);
        next += gap;
        if (jr_client_push(c, argv[3], "{\"tenant\":\"b\"}", &o, NULL) !=
            JR_CLIENT_OK)
            die("push", jr_client_errmsg(c));
    }
    jr_client_close(c);
    return 0;
}

static int
cmd_fill(char **argv)
{
    jr_client *c = open_client(argv[0]);

    push_n(c, atol(argv[1]), FILL_BATCH, argv[2]);
    jr_client_close(c);
    return 0;
}

/* latency: with JRBENCH_LATPUSH set, each push's own round trip (its
 * commit included) in ms, a line each, appended to that file: the
 * producer's share of the push->start latency the handler records. */
static int
cmd_latency(char **argv)
{
    jr_client *c = open_client(argv[0]);
    long n = atol(argv[1]), i;
    double gap = atof(argv[2]) / 1000, next = mono();
    const char *path = getenv("JRBENCH_LATPUSH");
    FILE *out = path != NULL && *path ? fopen(path, "a") : NULL;

    if (path != NULL && *path && out == NULL)
        die(path, strerror(errno));
    for (i = 0; i < n; i++) {
        double now = mono(), t0;
        struct timespec ts;
        char payload[64];
        if (next > now)
            sleep_s(next - now);
        next += gap;
        clock_gettime(CLOCK_REALTIME, &ts);
        snprintf(payload, sizeof payload, "{\"t\":%lld.%09ld}",
                 (long long)ts.tv_sec, ts.tv_nsec);
        t0 = mono();
        if (jr_client_push(c, argv[3], payload, NULL, NULL) != JR_CLIENT_OK)
            die("push", jr_client_errmsg(c));
        if (out != NULL)
            fprintf(out, "%.6f\n", (mono() - t0) * 1000);
    }
    if (out != NULL)
        fclose(out);
    jr_client_close(c);
    return 0;
}

/* --- is the queue empty? ---------------------------------------------- */

typedef struct watcher {
    sqlite3 *db;
    PGconn  *pg;
    char     at[2][4][64];  /* PostgreSQL: where each probe last found a job */
} watcher;

/* PostgreSQL: where the first queued job was found (its jobs_claim key)
 * and the first running one (its jobs_lease key), to look there first at
 * the next poll. A claimed or deleted job leaves its entries in both
 * indexes while a snapshot older than it is open (bench/run's snapshot
 * case): an EXISTS from the front stepped over all of them at every poll
 * and cost the database a core. The answer "empty" comes from WATCH_SQL
 * only, so a job queued before a place is never missed. */
#define PROBE_QUEUED(schema)                                               \
    "SELECT queue, priority, run_at::text AS at, id FROM " schema "jobs"    \
    " WHERE state = 'queued' AND (queue, priority, run_at, id) >="          \
    " ($1::text, $2::int, $3::timestamptz, $4::bigint)"                     \
    " ORDER BY queue, priority, run_at, id LIMIT 1"
#define PROBE_RUNNING(schema)                                              \
    "SELECT locked_until::text AS at FROM " schema "jobs"                  \
    " WHERE state = 'running'"                                              \
    " AND locked_until >= $1::timestamptz ORDER BY locked_until LIMIT 1"
static const char probe_from[2][4][64] = {
    {"", "-2147483648", "-infinity", "0"}, {"-infinity"}};

/* Whether any job is queued or running, one EXISTS per state so that each
 * reads its partial index (jobs_claim, jobs_lease). It was one scan of the
 * whole table every few ms, which cost PostgreSQL a core once the table
 * held a few drains' dead rows, and slowed every figure measured after. */
#define WATCH_SQL(schema)                                                   \
    "SELECT EXISTS (SELECT 1 FROM " schema "jobs WHERE state = 'queued')"  \
    " OR EXISTS (SELECT 1 FROM " schema "jobs WHERE state = 'running')"

static void
watch_open(watcher *w, const char *url)
{
    PGresult *r;

    memset(w, 0, sizeof *w);
    if (strncmp(url, "sqlite:", 7) == 0) {
        if (sqlite3_open_v2(url + 7, &w->db, SQLITE_OPEN_READONLY, NULL) !=
            SQLITE_OK)
            die(url, sqlite3_errmsg(w->db));
        sqlite3_busy_timeout(w->db, 5000);
    } else {
        w->pg = PQconnectdb(url);
        if (PQstatus(w->pg) != CONNECTION_OK)
            die(url, PQerrorMessage(w->pg));
        /* the planner, seeing a small table, would scan it whole; and the
         * statement is prepared once, not planned at every poll. Bitmap
         * scans off too, as the runner's claims have them: on statistics
         * taken before a fill (an estimate of one queued row) probe0 read
         * every entry of jobs_claim through a bitmap and sorted them, 4
         * to 8 ms a poll (40,000 entries after a fair queue's fill of
         * 20,000, whose tags make a second version of each row): 745 ms
         * of the server's time in a drain of 60,000 that took 1.16 s,
         * against 17 ms in a plain one */
        PQclear(PQexec(w->pg, "SET enable_seqscan = off;"
                              " SET enable_bitmapscan = off"));
        r = PQprepare(w->pg, "watch", WATCH_SQL("jobrunner."), 0, NULL);
        if (PQresultStatus(r) != PGRES_COMMAND_OK)
            die("prepare", PQerrorMessage(w->pg));
        PQclear(r);
        r = PQprepare(w->pg, "probe0", PROBE_QUEUED("jobrunner."), 0, NULL);
        if (PQresultStatus(r) != PGRES_COMMAND_OK)
            die("prepare", PQerrorMessage(w->pg));
        PQclear(r);
        r = PQprepare(w->pg, "probe1", PROBE_RUNNING("jobrunner."), 0, NULL);
        if (PQresultStatus(r) != PGRES_COMMAND_OK)
            die("prepare", PQerrorMessage(w->pg));
        PQclear(r);
        memcpy(w->at, probe_from, sizeof w->at);
    }
}

/* PostgreSQL: 1 if probe k (0 queued, 1 running) finds a job at its
 * place or after, which becomes its place; 0 if not. */
static int
watch_probe(watcher *w, int k)
{
    const char *p[4] = {w->at[k][0], w->at[k][1], w->at[k][2], w->at[k][3]};
    PGresult *r = PQexecPrepared(w->pg, k ? "probe1" : "probe0", k ? 1 : 4,
                                 p, NULL, NULL, 0);
    int i, found;

    if (PQresultStatus(r) != PGRES_TUPLES_OK)
        die("poll", PQerrorMessage(w->pg));
    if ((found = PQntuples(r) > 0))
        for (i = 0; i < PQnfields(r); i++)
            snprintf(w->at[k][i], sizeof w->at[k][i], "%s",
                     PQgetvalue(r, 0, i));
    PQclear(r);
    return found;
}

/* 1 if no job is left (queued or running), 0 if some are. */
static int
watch_empty(watcher *w)
{
    int empty = 0;

    if (w->db != NULL) {
        sqlite3_stmt *s;
        if (sqlite3_prepare_v2(w->db, WATCH_SQL(""), -1, &s, NULL) !=
            SQLITE_OK)
            die("poll", sqlite3_errmsg(w->db));
        if (sqlite3_step(s) == SQLITE_ROW)
            empty = sqlite3_column_int(s, 0) == 0;
        sqlite3_finalize(s);
    } else {
        PGresult *r;
        if (watch_probe(w, 0) || watch_probe(w, 1))
            return 0;
        r = PQexecPrepared(w->pg, "watch", 0, NULL, NULL, NULL, 0);
        if (PQresultStatus(r) != PGRES_TUPLES_OK)
            die("poll", PQerrorMessage(w->pg));
        empty = strcmp(PQgetvalue(r, 0, 0), "f") == 0;
        PQclear(r);
        memcpy(w->at, probe_from, sizeof w->at); /* from the front again */
    }
    return empty;
}

/* 1 while a job is queued (not yet claimed), 0 once none is. */
static int
watch_queued(watcher *w)
{
    static const char sql[] = "SELECT EXISTS (SELECT 1 FROM %sjobs WHERE "
                              "state = 'queued')";
    char q[160];
    int queued = 1;

    snprintf(q, sizeof q, sql, w->db != NULL ? "" : "jobrunner.");
    if (w->db != NULL) {
        sqlite3_stmt *s;
        if (sqlite3_prepare_v2(w->db, q, -1, &s, NULL) != SQLITE_OK)
            die("poll", sqlite3_errmsg(w->db));
        if (sqlite3_step(s) == SQLITE_ROW)
            queued = sqlite3_column_int(s, 0) != 0;
        sqlite3_finalize(s);
    } else {
        PGresult *r = PQexec(w->pg, q);
        if (PQresultStatus(r) != PGRES_TUPLES_OK)
            die("poll", PQerrorMessage(w->pg));
        queued = strcmp(PQgetvalue(r, 0, 0), "t") == 0;
        PQclear(r);
    }
    return queued;
}

static void
watch_close(watcher *w)
{
    if (w->db)
        sqlite3_close(w->db);
    if (w->pg)
        PQfinish(w->pg);
}

/* --- /proc ---------------------------------------------------------- */

static int
children(pid_t pid, pid_t *kids, int max)
{
    char path[64], buf[4096];
    DIR *d;
    struct dirent *e;
    int n = 0;

    snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
    if ((d = opendir(path)) == NULL)
        return 0;
    while ((e = readdir(d)) != NULL && n < max) {
        FILE *f;
        char *p, *end;
        if (e->d_name[0] == '.')
            continue;
        snprintf(buf, sizeof buf, "/proc/%d/task/%s/children", (int)pid,
                 e->d_name);
        if ((f = fopen(buf, "r")) == NULL)
            continue;
        if (fgets(buf, sizeof buf, f) != NULL)
            for (p = buf; n < max; p = end) {
                long k = strtol(p, &end, 10);
                if (end == p)
                    break;
                kids[n++] = (pid_t)k;
            }
        fclose(f);
    }
    closedir(d);
    return n;
}

/* utime+stime (+cutime+cstime when with_c) in clock ticks; -1 if gone */
static long
cpu_ticks(pid_t pid, int with_c)
{
    char path[64], buf[1024], *p;
    unsigned long ut, st;
    long cut, cst;
    FILE *f;
    int ok;

    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    if ((f = fopen(path, "r")) == NULL)
        return -1;
    p = fgets(buf, sizeof buf, f);
    fclose(f);
    if (p == NULL || (p = strrchr(buf, ')')) == NULL)
        return -1;
    /* after ") ": state ppid pgrp session tty tpgid flags minflt cminflt
     * majflt cmajflt utime stime cutime cstime */
    ok = sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu "
                "%ld %ld", &ut, &st, &cut, &cst);
    if (ok != 4)
        return -1;
    return (long)(ut + st) + (with_c ? cut + cst : 0);
}

/* The CPU time every thread of pid has run, in ns (the first field of
 * each task's schedstat: the scheduler's own clock, where utime and
 * stime are sampled at the tick and charge a whole 10 ms to whichever
 * thread a tick finds running); 0 if gone. */
static long long
cpu_ns(pid_t pid)
{
    char path[300], buf[128];
    struct dirent *e;
    long long t = 0;
    DIR *d;
    FILE *f;

    snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
    if ((d = opendir(path)) == NULL)
        return 0;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof path, "/proc/%d/task/%.200s/schedstat",
                 (int)pid, e->d_name);
        if ((f = fopen(path, "r")) == NULL)
            continue;
        if (fgets(buf, sizeof buf, f) != NULL)
            t += atoll(buf);
        fclose(f);
    }
    closedir(d);
    return t;
}

/* VmRSS counts the shared library pages every process of the runner
 * maps; RssAnon is what one process costs on its own. */
static long
status_kib(pid_t pid, const char *field)
{
    char path[64], line[256];
    size_t n = strlen(field);
    long kib = -1;
    FILE *f;

    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    if ((f = fopen(path, "r")) == NULL)
        return -1;
    while (fgets(line, sizeof line, f) != NULL)
        if (strncmp(line, field, n) == 0 && line[n] == ':' &&
            sscanf(line + n + 1, "%ld", &kib) == 1)
            break;
    fclose(f);
    return kib;
}

static long
rss_kib(pid_t pid)
{
    return status_kib(pid, "VmRSS");
}

static long worker_anon_kib;    /* largest RssAnon of a worker seen */

/* runner (master + workers): total ticks, and the largest RSS of each */
static long
sample(pid_t master, long *mrss, long *wrss)
{
    pid_t kids[MAX_KIDS];
    int n = children(master, kids, MAX_KIDS), i;
    long t = cpu_ticks(master, 1), r;

    if ((r = rss_kib(master)) > *mrss)
        *mrss = r;
    for (i = 0; i < n; i++) {
        long k = cpu_ticks(kids[i], 0);
        if (k > 0)
            t += k;
        if ((r = rss_kib(kids[i])) > *wrss)
            *wrss = r;
        if ((r = status_kib(kids[i], "RssAnon")) > worker_anon_kib)
            worker_anon_kib = r;
    }
    return t;
}

/* The CPU time of the runner's processes (master and workers) and all
 * their threads, in ns: an idle runner takes a few ms in 10 s, less than
 * the ticks' resolution. */
static long long
runner_ns(pid_t master)
{
    pid_t kids[MAX_KIDS];
    int n = children(master, kids, MAX_KIDS), i;
    long long t = cpu_ns(master);

    for (i = 0; i < n; i++)
        t += cpu_ns(kids[i]);
    return t;
}

/* The whole machine's busy CPU time so far (user, nice, system, irq,
 * softirq, steal of /proc/stat's "cpu" line), in ticks. */
static long
machine_busy_ticks(void)
{
    unsigned long v[8] = {0};
    char buf[512];
    FILE *f = fopen("/proc/stat", "r");
    int ok = 0;

    if (f != NULL) {
        if (fgets(buf, sizeof buf, f) != NULL)
            ok = sscanf(buf, "cpu %lu %lu %lu %lu %lu %lu %lu %lu", &v[0],
                        &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7]);
        fclose(f);
    }
    if (ok < 8)
        return -1;
    return (long)(v[0] + v[1] + v[2] + v[5] + v[6] + v[7]);
}

/* --- the runner ----------------------------------------------------- */

static pid_t
start_runner(const char *bin, const char *config, const char *log)
{
    pid_t pid = fork();

    if (pid < 0)
        die("fork", strerror(errno));
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        execl(bin, bin, "-c", config, "run", (char *)NULL);
        _exit(127);
    }
    return pid;
}

static int
stop_runner(pid_t pid)
{
    int status = 0;
    double until = mono() + 30;

    kill(pid, SIGTERM);
    while (waitpid(pid, &status, WNOHANG) == 0) {
        if (mono() > until) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            return -1;
        }
        sleep_s(0.005);
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

static int
cmd_drain(char **argv)
{
    watcher w;
    long mrss = 0, wrss = 0;
    double poll = strncmp(argv[0], "sqlite:", 7) == 0 ? 0.002 : 0.004;
    double t0, t, last_sample = 0, secs;
    long ticks;
    pid_t pid;
    int status;

    watch_open(&w, argv[0]);
    t0 = mono();
    pid = start_runner(argv[1], argv[2], argv[3]);
    for (;;) {
        sleep_s(poll);
        t = mono();
        if (watch_empty(&w))
            break;
        if (t - last_sample > 0.05) {
            sample(pid, &mrss, &wrss);
            last_sample = t;
        }
        if (waitpid(pid, &status, WNOHANG) == pid)
            die("drain", "the runner exited early (see its log)");
        if (t - t0 > 600) {
            stop_runner(pid);
            die("drain", "not drained after 600 s");
        }
    }
    secs = t - t0;
    ticks = sample(pid, &mrss, &wrss);
    stop_runner(pid);
    watch_close(&w);
    printf("secs=%.6f master_rss_kib=%ld worker_rss_kib=%ld "
           "worker_anon_kib=%ld cpu_s=%.3f\n", secs, mrss, wrss,
           worker_anon_kib, (double)ticks / (double)sysconf(_SC_CLK_TCK));
    return 0;
}

static int
cmd_idle(char **argv)
{
    long mrss = 0, wrss = 0;
    long long t1, t2;
    double secs = atof(argv[3]), a, b;
    pid_t pid = start_runner(argv[0], argv[1], argv[2]);

    /* start-up: spawning and loading workers, and the count of the
     * queued jobs per name 2 s after (services/unhandled.c), a read of
     * the whole table the earlier cases left: not rest */
    sleep_s(3.0);
    a = mono();
    sample(pid, &mrss, &wrss);
    t1 = runner_ns(pid);
    sleep_s(secs);
    t2 = runner_ns(pid);
    sample(pid, &mrss, &wrss);
    b = mono();
    stop_runner(pid);
    printf("cpu_pct=%.3f master_rss_kib=%ld worker_rss_kib=%ld\n",
           100.0 * (double)(t2 - t1) / 1e9 / (b - a), mrss, wrss);
    return 0;
}

/* The runner started with one job queued: the time until it is claimed
 * (no job queued any more), polled every millisecond. */
static int
cmd_first(char **argv)
{
    watcher w;
    double t0, t = 0;
    pid_t pid;
    int status;

    watch_open(&w, argv[0]);
    t0 = mono();
    pid = start_runner(argv[1], argv[2], argv[3]);
    for (;;) {
        t = mono();
        if (!watch_queued(&w))
            break;
        if (waitpid(pid, &status, WNOHANG) == pid)
            die("first", "the runner exited early (see its log)");
        if (t - t0 > 60) {
            stop_runner(pid);
            die("first", "no job claimed after 60 s");
        }
        sleep_s(0.001);
    }
    stop_runner(pid);
    watch_close(&w);
    printf("secs=%.6f\n", t - t0);
    return 0;
}

static int
cmd_empty(char **argv)
{
    watcher w;
    double until = mono() + 30;

    watch_open(&w, argv[0]);
    while (!watch_empty(&w)) {
        if (mono() > until)
            die("empty", "jobs still queued after 30 s");
        sleep_s(0.01);
    }
    watch_close(&w);
    return 0;
}

/* --- warm: runners started first, then the jobs released ------------ */

#define MAX_RUNNERS 8

static int
cmd_warm(char **argv)
{
    pid_t pids[MAX_RUNNERS], kids[MAX_KIDS];
    char configs[4096], *cfg, *save = NULL;
    long n = atol(argv[4]), mrss = 0, wrss = 0;
    int want = atoi(argv[6]), nr = 0, i, status;
    double poll = strncmp(argv[0], "sqlite:", 7) == 0 ? 0.002 : 0.004;
    double until, t0, t, hz = (double)sysconf(_SC_CLK_TCK);
    long busy0, run0 = 0, run1 = 0;
    jr_client *c = open_client(argv[0]);
    watcher w;

    if (jr_client_queue_pause(c, "default") != JR_CLIENT_OK)
        die("pause", jr_client_errmsg(c));
    push_n(c, n, FILL_BATCH, argv[5]);
    snprintf(configs, sizeof configs, "%s", argv[2]);
    for (cfg = strtok_r(configs, ",", &save); cfg && nr < MAX_RUNNERS;
         cfg = strtok_r(NULL, ",", &save))
        pids[nr++] = start_runner(argv[1], cfg, argv[3]);
    until = mono() + 20;
    for (i = 0; i < nr; i++)
        while (children(pids[i], kids, MAX_KIDS) < want && mono() < until)
            sleep_s(0.01);
    sleep_s(0.5);               /* their hellos: handlers loaded */
    watch_open(&w, argv[0]);
    for (i = 0; i < nr; i++)
        run0 += sample(pids[i], &mrss, &wrss);
    busy0 = machine_busy_ticks();
    t0 = mono();
    if (jr_client_queue_resume(c, "default") != JR_CLIENT_OK)
        die("resume", jr_client_errmsg(c));
    for (;;) {
        sleep_s(poll);
        t = mono();
        if (watch_empty(&w))
            break;
        for (i = 0; i < nr; i++)
            if (waitpid(pids[i], &status, WNOHANG) == pids[i])
                die("warm", "a runner exited early (see its log)");
        if (t - t0 > 600)
            die("warm", "not drained after 600 s");
    }
    busy0 = machine_busy_ticks() - busy0;
    for (i = 0; i < nr; i++)
        run1 += sample(pids[i], &mrss, &wrss);
    for (i = 0; i < nr; i++)
        stop_runner(pids[i]);
    watch_close(&w);
    jr_client_close(c);
    /* cpu_s: the whole machine's busy time while the jobs ran (runners,
     * database, this poller); runner_cpu_s: the runners' own */
    printf("secs=%.6f runners=%d master_rss_kib=%ld cpu_s=%.3f "
           "runner_cpu_s=%.3f\n", t - t0, nr, mrss, (double)busy0 / hz,
           (double)(run1 - run0) / hz);
    return 0;
}

int
main(int argc, char **argv)
{
    static const struct {
        const char *name;
        int         nargs;
        int       (*fn)(char **);
    } cmds[] = {
        {"push", 3, cmd_push}, {"pushu", 3, cmd_pushu},
        {"fill", 3, cmd_fill},
        {"fillq", 4, cmd_fillq}, {"fillk", 4, cmd_fillk},
        {"fills", 4, cmd_fills}, {"fillp", 5, cmd_fillp},
        {"latency", 4, cmd_latency}, {"fillt", 5, cmd_fillt},
        {"latq", 5, cmd_latq}, {"drain", 4, cmd_drain},
        {"idle", 4, cmd_idle}, {"empty", 1, cmd_empty},
        {"first", 4, cmd_first},
        {"warm", 7, cmd_warm},
    };
    size_t i;

    setvbuf(stdout, NULL, _IOLBF, 0);
    for (i = 0; argc >= 2 && i < sizeof cmds / sizeof cmds[0]; i++)
        if (strcmp(argv[1], cmds[i].name) == 0 && argc == 2 + cmds[i].nargs)
            return cmds[i].fn(argv + 2);
    fprintf(stderr, "usage: jrbench push|fill|latency|drain|idle|first|"
            "empty|warm "
            "... "
            "(see bench/jrbench.c)\n");
    return 2;
}
