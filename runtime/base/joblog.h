/* joblog.h - one run's logs as a job keeps them (jobs.logs, docs/handlers.md
 * "Each attempt's logs"): lines from jobrunner.log and the handler's
 * output, kept as they come (each one's text as it is, its time and
 * level) within a cap of bytes of which the tail is kept, the cap
 * counted in the bytes each line takes once stored as JSON; the run's
 * entry made of them at its end, sent so to the master, and its JSON
 * written only where it is stored (jr_joblog_json: a success deleted at
 * its end never pays it). No Lua: the worker's handler module fills it;
 * the runs of a job's stored logs picked by attempt for show and the
 * API. Uses err.h, util.h. */
#ifndef JR_JOBLOG_H
#define JR_JOBLOG_H

#include <stddef.h>
#include <string.h>

#include "base/err.h"
#include "base/util.h"

#define JR_JOBLOG_LINE  8192    /* bytes of one line's text: a log line is
                                   cut there, output split */
#define JR_JOBLOG_DEFAULT 65536 /* log.attempt_max's default */

enum { JR_JOBLOG_STDOUT, JR_JOBLOG_STDERR };

/* A run's lines. Zero-initialise; free with jr_joblog_free. Visible: the
 * job's context (jrlib.h) holds one. */
typedef struct jr_joblog {
    jr_buf    buf;              /* the lines, each a record (joblog.c) */
    size_t    start;            /* where the kept ones begin in buf */
    size_t    kept;             /* the bytes those take as JSON */
    long      lines;            /* lines added this run */
    long      dropped_lines;    /* of them, dropped for the cap */
    long long dropped_bytes;    /* the bytes those took, encoded */
    long long at;               /* epoch milliseconds of its first line */
    jr_buf    part[2];          /* stdout's, stderr's line not ended yet */
    jr_buf    entry;            /* jr_joblog_entry's bytes */
    long long sec;              /* the whole seconds of the last time */
    unsigned char sec_len;      /* their digits (0: none yet) */
    long long when;             /* > 0: the epoch milliseconds of the
                                   lines added next (a line kept as its
                                   arguments and made later, jrloglazy.c),
                                   else now */
} jr_joblog;

/* Adds one line of level ("debug" ... "error", "stdout", "stderr": a
 * literal, borrowed) and text s[0..n), cut at JR_JOBLOG_LINE bytes, then
 * drops the oldest lines while those kept take more than max bytes
 * (encoded, as stored). A byte that is not UTF-8 and a NUL are kept as
 * U+FFFD, other control characters as JSON escapes. Out of memory loses
 * the line, counted as dropped. */
void jr_joblog_add(jr_joblog *l, const char *level, const char *s, size_t n,
                   size_t max);
/* A field of a jobrunner.log line: its name and its value's text. */
typedef struct jr_joblog_field {
    const char *k, *v;
    size_t      kn, vn;
} jr_joblog_field;
#define JR_JOBLOG_FIELDS 64     /* fields of one line at most */

/* Two fields (qsort's pointers) in their order: by name, bytes compared
 * (a name may hold a NUL). */
static inline int
jr_joblog_field_cmp(const void *a, const void *b)
{
    const jr_joblog_field *x = a, *y = b;
    int c = memcmp(x->k, y->k, x->kn < y->kn ? x->kn : y->kn);

    return c != 0 ? c : (x->kn > y->kn) - (x->kn < y->kn);
}

/* Adds the line of level made of msg[0..n) and the fields f[0..nf) (as
 * " name=value", sorted by name, a value quoted when empty or with a
 * space or '=' in it) without making its text: names, values and msg
 * kept as they are, the line's text written with its JSON where it is
 * stored. Only for the plain line: every byte printable ASCII but '"'
 * and '\\', its text at most JR_JOBLOG_LINE bytes, fitting max alone.
 * Returns 0 (added, or lost out of memory), or -1 when the line is not
 * such (nothing done: the caller makes its text, jr_joblog_add). */
int  jr_joblog_add_fields(jr_joblog *l, const char *level, const char *msg,
                          size_t n, const jr_joblog_field *f, int nf,
                          size_t max);
/* Feeds n bytes a handler wrote to stream (JR_JOBLOG_STDOUT or _STDERR):
 * a line at each newline, and at each JR_JOBLOG_LINE bytes. */
void jr_joblog_write(jr_joblog *l, int stream, const char *s, size_t n,
                     size_t max);
/* The run's entry (the lines not ended yet ended first), *len bytes,
 * not text (it holds NULs): what the worker sends, jr_joblog_check's
 * and jr_joblog_json's input. NULL when nothing was written (or out of
 * memory). Valid until the next call on l. */
const char *jr_joblog_entry(jr_joblog *l, int attempt, size_t max,
                            size_t *len);
/* 0 if e[0..n) is framed as jr_joblog_entry's entries are (its head and
 * its records' lengths: what the master checks of a worker's; a line's
 * pieces jr_joblog_json checks), else -1. */
int  jr_joblog_check(const char *e, size_t n);
/* Writes to out, NUL-terminated, the JSON text of entry e[0..n) (n 0:
 * e is text), as stored: {"attempt", "at", "lines" [{"at", "level",
 * "msg"}..], "dropped_lines", "dropped_bytes"}; a text that is already
 * JSON (begins with '{') as it is. Returns out's text, or NULL for a
 * malformed entry (a line's pieces that do not add up included) or out
 * of memory. */
const char *jr_joblog_json(const char *e, size_t n, jr_buf *out);
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
