/* output.c - what the workers' handlers print, per handler_output: "log"
 * reads each worker's stdout+stderr pipe and logs it line by line with the
 * job it belongs to, within per-job bounds; "inherit" and a file need no
 * reading. Kept apart from pool.c, whose workers it serves, so that both
 * stay short. Uses master_int.h. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "base/log.h"
#include "master/master_int.h"

#define OUT_JOB       65536     /* bytes of handler output logged per job */
#define OUT_JOB_LINES 1000      /* and lines */
#define OUT_READS     16        /* reads of 8 KiB per output event at most */

/* handler_output: "log" (default), "inherit" or a file opened here once,
 * appended to by every worker. */
int
jr_output_open(master *m, jr_err *err)
{
    const char *v = m->cfg->handler_output;

    if (v == NULL || strcmp(v, "log") == 0) {
        m->out_mode = OUT_LOG;
        return 0;
    }
    if (strcmp(v, "inherit") == 0) {
        m->out_mode = OUT_INHERIT;
        return 0;
    }
    m->out_mode = OUT_FILE;
    m->out_file = open(v, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
    if (m->out_file < 0)
        return jr_fail_errno(err, JR_ECONFIG, errno, "handler_output: "
                             "cannot open '%s'", v);
    return 0;
}

/* Logs one line of a worker's output with the job it is running; past
 * OUT_JOB bytes for a job, says once that the rest is dropped. */
static void
output_line(wk *w, const char *s, size_t n, int cut)
{
    const jr_job *j = w->njobs > 0 ? w->jobs[0] : NULL;
    int64_t id = j ? j->id : 0;
    char line[OUT_LINE + 1];
    size_t i;

    if (id != w->ojob) {
        w->ojob = id;
        w->obytes = 0;
        w->olines = 0;
    }
    if (w->obytes > OUT_JOB || w->olines > OUT_JOB_LINES)
        return;
    if ((w->obytes += n + 1) > OUT_JOB || ++w->olines > OUT_JOB_LINES) {
        w->obytes = OUT_JOB + 1;
        if (j)
            jr_log(JR_LOG_WARN, "job %lld (%s): output over %d bytes or %d "
                   "lines; the rest of it is dropped", (long long)id,
                   j->name, OUT_JOB, OUT_JOB_LINES);
        else
            jr_log(JR_LOG_WARN, "worker %d: output over %d bytes or %d lines "
                   "between jobs; the rest of it is dropped", w->id, OUT_JOB,
                   OUT_JOB_LINES);
        return;
    }
    for (i = 0; i < n; i++)     /* jr_log escapes the rest; not a C string's end */
        line[i] = s[i] == '\0' ? '?' : s[i];
    if (j)
        jr_log(JR_LOG_INFO, "job %lld (%s) output: %.*s%s", (long long)id,
               j->name, (int)n, line, cut ? " [line cut]" : "");
    else
        jr_log(JR_LOG_INFO, "worker %d output: %.*s%s", w->id, (int)n, line,
               cut ? " [line cut]" : "");
}

static void
output_feed(wk *w, const char *p, size_t n)
{
    for (; n > 0; p++, n--) {
        if (*p == '\n') {
            output_line(w, w->oline, w->olen, w->ocut);
            w->olen = 0;
            w->ocut = 0;
        } else if (w->olen < sizeof w->oline) {
            w->oline[w->olen++] = *p;
        } else {
            w->ocut = 1;
        }
    }
}

/* Reads what is in the pipe, at most reads times 8 KiB. */
static void
output_read(wk *w, int reads)
{
    char buf[8192];
    ssize_t n = 0;

    while (w->out_fd >= 0 && reads-- > 0 &&
           (n = read(w->out_fd, buf, sizeof buf)) > 0)
        output_feed(w, buf, (size_t)n);
    if (n == 0 && w->ev_out != NULL)
        event_del(w->ev_out);   /* every writer closed it */
}

void
jr_output_readable(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    output_read(arg, OUT_READS);
}

/* A job ended (or its worker): what it printed before is in the pipe
 * already; log it, and its last line even without a newline. */
void
jr_output_done(wk *w)
{
    output_read(w, 64);
    if (w->olen > 0 || w->ocut)
        output_line(w, w->oline, w->olen, w->ocut);
    w->olen = 0;
    w->ocut = 0;
}

void
jr_output_close(wk *w)
{
    if (w->ev_out != NULL)
        event_free(w->ev_out);
    w->ev_out = NULL;
    if (w->out_fd >= 0)
        close(w->out_fd);
    w->out_fd = -1;
}

/* The worker's output descriptor per handler_output: the write end of a
 * new pipe the master reads (its read end in *rd), the output file, or -1
 * to inherit the runner's. */
int
jr_output_fd(master *m, int *rd, jr_err *err)
{
    int p[2];

    *rd = -1;
    if (m->out_mode == OUT_FILE)
        return m->out_file;
    if (m->out_mode != OUT_LOG)
        return -1;
    if (pipe2(p, O_CLOEXEC) < 0) {
        jr_fail(err, JR_ESYS, "cannot start a worker: pipe: %s",
                strerror(errno));
        return -2;
    }
    *rd = p[0];
    return p[1];
}
