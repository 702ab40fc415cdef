/* wcapture.c - a handler's descriptors 1 and 2 kept with its attempt
 * (the handler option output = "keep", docs/handlers.md "Each attempt's
 * logs"): while one of its jobs runs, the worker's descriptors 1 and 2
 * are two files in memory, so that what the programs it starts and C
 * code write there is read back at the job's end and kept as its
 * lines of stdout and stderr, then passed on where handler_output says
 * when log.echo does. A plain job's only (inflight 1): jobs run at once
 * share the descriptors. Handlers without the option pay one test. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/joblog.h"
#include "base/log.h"
#include "worker/worker_int.h"

static int mem[2] = {-1, -1};   /* the files 1 and 2 become */
static int real[2] = {-1, -1};  /* 1 and 2 as they were */
static FILE *echo[2];           /* on real[], for jrlog's echo */
static int on;                  /* 1 between begin and end */

/* A file in memory for stream k, close-on-exec (dup2 gives 1 and 2
 * copies without the flag). -1 with errno set on failure. */
static int
mem_file(int k)
{
#ifdef __linux__
    return memfd_create(k ? "jobrunner-stderr" : "jobrunner-stdout",
                        MFD_CLOEXEC);
#else
    FILE *f = tmpfile();
    int fd = f ? fcntl(fileno(f), F_DUPFD_CLOEXEC, 3) : -1;

    (void)k;
    if (f != NULL)
        fclose(f);
    return fd;
#endif
}

/* Makes the files and keeps 1 and 2 once. 0, or -1 (logged once). */
static int
setup(void)
{
    static int failed;
    int k;

    if (mem[1] >= 0)
        return 0;
    if (failed)
        return -1;
    for (k = 0; k < 2; k++) {
        if ((mem[k] = mem_file(k)) < 0 ||
            (real[k] = fcntl(k + 1, F_DUPFD_CLOEXEC, 3)) < 0 ||
            (echo[k] = fdopen(real[k], "w")) == NULL) {
            jr_log(JR_LOG_ERROR, "worker: output = \"keep\": %s; the "
                   "output goes where handler_output says",
                   strerror(errno));
            failed = 1;
            return -1;
        }
        setvbuf(echo[k], NULL, _IOLBF, 0);
    }
    return 0;
}

void
jr_capture_begin(worker *w)
{
    int k;

    if (!w->info->keep_output || setup() < 0)
        return;
    fflush(stdout);
    fflush(stderr);
    for (k = 0; k < 2; k++)
        dup2(mem[k], k + 1);
    jr_jrlog_echo_to(echo[0], echo[1]);
    on = 1;
}

/* Keeps what stream k's file got, passes it on when log.echo says, and
 * empties the file. */
static void
drain(worker *w, int k)
{
    char buf[16384];
    off_t at = 0, end = lseek(mem[k], 0, SEEK_END);
    ssize_t n;
    int pass = 1;

    while (at < end &&
           (n = pread(mem[k], buf, sizeof buf, at)) > 0) {
        pass = jr_jrlog_keep(&w->ctx, k ? JR_JOBLOG_STDERR :
                             JR_JOBLOG_STDOUT, buf, (size_t)n);
        if (pass)
            fwrite(buf, 1, (size_t)n, echo[k]);
        at += n;
    }
    if (end > 0) {
        if (ftruncate(mem[k], 0) < 0)
            jr_log(JR_LOG_WARN, "worker: output = \"keep\": %s",
                   strerror(errno));
        lseek(mem[k], 0, SEEK_SET);
    }
    fflush(echo[k]);
}

void
jr_capture_end(worker *w)
{
    int k;

    if (!on)
        return;
    on = 0;
    fflush(stdout);
    fflush(stderr);
    for (k = 0; k < 2; k++)
        dup2(real[k], k + 1);
    jr_jrlog_echo_to(NULL, NULL);
    for (k = 0; k < 2; k++)
        drain(w, k);
}
