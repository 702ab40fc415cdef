/* util.h - small parsers and writers the CLI, config and master share:
 * durations, times, clocks, JSON string quoting, a growable buffer.
 * Uses err.h. */
#ifndef JR_UTIL_H
#define JR_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "base/err.h"

/* Parses "30", "30s", "250ms", "5m", "2h", "7d" into seconds. what names
 * the argument in the message. */
int  jr_parse_duration(const char *s, const char *what, double *out,
                       jr_err *err);
/* Parses "2026-11-22T10:00:00Z", "2026-11-22 10:00:00" (UTC), or "@EPOCH"
 * into epoch seconds. */
int  jr_parse_time(const char *s, const char *what, double *out, jr_err *err);
/* Parses a whole decimal int in [lo, hi]. */
int  jr_parse_int(const char *s, const char *what, long lo, long hi,
                  long *out, jr_err *err);
/* Writes v in decimal at p (at most 20 characters, no NUL); returns how
 * many. For the engines' id lists and integer parameters, where
 * printf's "%lld" cost 740 to 900 instructions a number. */
static inline int
jr_put_int64(char *p, int64_t v)
{
    char tmp[20];
    uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
    int n = 0, k = 0;

    do
        tmp[n++] = (char)('0' + u % 10);
    while ((u /= 10) != 0);
    if (v < 0)
        p[k++] = '-';
    while (n > 0)
        p[k++] = tmp[--n];
    return k;
}
/* Writes s as a JSON string literal, quotes included (NULL as null),
 * escaped by jr_jsontext_escape_char; a byte that is not UTF-8 as
 * U+FFFD. */
void jr_json_str(FILE *f, const char *s);
/* Formats epoch seconds as "2026-11-22T10:00:00.123Z" into buf. */
const char *jr_time_iso(double t, char *buf, size_t size);
/* The one growable byte buffer: frames, payload JSON, SQL array literals.
 * Zero-initialise; free with jr_buf_free(). Visible: callers read p and
 * len; p may move on every put. */
typedef struct jr_buf {
    char   *p;
    size_t  len;
    size_t  cap;
    int     oom;        /* set when a growth failed; later puts do nothing */
} jr_buf;

void jr_buf_free(jr_buf *b);            /* and zeroes it */
void jr_buf_reset(jr_buf *b);           /* empties it, keeps the memory */
/* Appends n bytes of v (borrowed). Returns 0, or -1 once out of memory. */
int  jr_buf_put(jr_buf *b, const void *v, size_t n);
/* Room for n more bytes: where to write them (at p + len), or NULL once
 * out of memory. The caller writes at most n bytes there and adds what it
 * wrote to len: one check for many small writes (the span encoders). */
char *jr_buf_room(jr_buf *b, size_t n);

/* Seconds from a monotonic clock. */
double jr_mono(void);
/* Seconds since the epoch, from the wall clock. */
double jr_now(void);

/* The directories a walk of a tree has entered, so that it follows no
 * symlink out of the tree and enters no directory twice (a cycle). */
typedef struct jr_dirset {
    char  *root;                /* realpath of the tree's top */
    struct jr_dirid { unsigned long long dev, ino; } *v;
    int    n, cap;
} jr_dirset;
/* Starts a walk of root and enters it. -1 with err set if root cannot be
 * resolved. */
int  jr_dirset_init(jr_dirset *s, const char *root, jr_err *err);
/* Returns 1 and records path (a directory) when the walk may enter it; 0
 * with why (a short reason) when it leads out of the tree or was entered
 * before. */
int  jr_dirset_enter(jr_dirset *s, const char *path, char *why,
                     size_t size);
void jr_dirset_free(jr_dirset *s);

/* The whole of a file, NUL-terminated, malloc'd; NULL with errno set. */
char *jr_read_file(const char *file);

#endif
