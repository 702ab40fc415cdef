/* joblog.h - one run's logs as a job keeps them (jobs.logs, docs/handlers.md
 * "Each attempt's logs"): lines from jobrunner.log and the handler's
 * output, JSON-encoded as they come, within a cap of bytes of which the
 * tail is kept, and the run's entry made of them at its end. No Lua: the
 * worker's handler module fills it; the runs of a job's stored logs
 * picked by attempt for show and the API. Uses util.h, jsondom.h. */
#ifndef JR_JOBLOG_H
#define JR_JOBLOG_H

#include <stddef.h>

#include "base/err.h"
#include "base/util.h"

#define JR_JOBLOG_LINE  8192    /* bytes of one line's text: a log line is
                                   cut there, output split */
#define JR_JOBLOG_DEFAULT 65536 /* log.attempt_max's default */

enum { JR_JOBLOG_STDOUT, JR_JOBLOG_STDERR };

/* A run's lines. Zero-initialise; free with jr_joblog_free. Visible: the
 * job's context (jrlib.h) holds one. */
typedef struct jr_joblog {
    jr_buf    buf;              /* the lines, each a JSON object and '\n' */
    size_t    start;            /* where the kept ones begin in buf */
    long      lines;            /* lines added this run */
    long      dropped_lines;    /* of them, dropped for the cap */
    long long dropped_bytes;    /* the bytes those took, encoded */
    double    at;               /* epoch seconds of its first line */
    jr_buf    part[2];          /* stdout's, stderr's line not ended yet */
    jr_buf    entry;            /* jr_joblog_entry's text */
    long long sec;              /* the whole seconds of the last time */
    char      sec_text[24];     /* written: their digits, */
    unsigned char sec_len;      /* how many (0: none yet) */
} jr_joblog;

/* Adds one line of level ("debug" ... "error", "stdout", "stderr": a
 * literal, borrowed) and text s[0..n), cut at JR_JOBLOG_LINE bytes, then
 * drops the oldest lines while those kept take more than max bytes
 * (encoded, as stored). A byte that is not UTF-8 and a NUL are kept as
 * U+FFFD, other control characters as JSON escapes. Out of memory loses
 * the line, counted as dropped. */
void jr_joblog_add(jr_joblog *l, const char *level, const char *s, size_t n,
                   size_t max);
/* Feeds n bytes a handler wrote to stream (JR_JOBLOG_STDOUT or _STDERR):
 * a line at each newline, and at each JR_JOBLOG_LINE bytes. */
void jr_joblog_write(jr_joblog *l, int stream, const char *s, size_t n,
                     size_t max);
/* The run's entry, {"attempt", "at", "lines", "dropped_lines",
 * "dropped_bytes"} (the lines not ended yet ended first), or NULL when
 * nothing was written (or out of memory). Valid until the next call on
 * l. */
const char *jr_joblog_entry(jr_joblog *l, int attempt, size_t max);
/* Writes to out the JSON array of the runs in logs (a job's stored logs,
 * borrowed) whose attempt is attempt (0: all of them), each as its
 * stored text, oldest first; out gets "[]" for none or NULL logs.
 * Returns how many, or -1 with err set when logs is not such an array
 * (or out of memory). */
int  jr_joblog_select(const char *logs, int attempt, jr_buf *out,
                      jr_err *err);
/* Forgets the run's lines, keeps the memory. */
void jr_joblog_clear(jr_joblog *l);
void jr_joblog_free(jr_joblog *l);      /* and zeroes it */

#endif
