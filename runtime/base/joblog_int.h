/* joblog_int.h - private to joblog.c (a run's lines kept, its entry
 * made) and joblogjson.c (the entry checked and written as JSON where it
 * is stored): the records a run's lines travel as, and what both read
 * of a line's bytes. Uses joblog.h. */
#ifndef JR_JOBLOG_INT_H
#define JR_JOBLOG_INT_H

#include <stdint.h>
#include <string.h>

#include "base/joblog.h"

/* A line as kept and sent: a record of REC bytes, then its text, or
 * (R_FIELDS) its pieces: u16 msg's length, u16 how many fields, msg,
 * then each field's u16 name length, u16 value length, name, value.
 * Native byte order: the worker and the master are one binary on one
 * machine. */
typedef struct jr_joblog_rec {
    unsigned char level;        /* jr_joblog_levels' index */
    unsigned char flags;        /* R_CUT, R_FIELDS */
    uint16_t      len;          /* bytes after the record (its text: at
                                   most JR_JOBLOG_LINE) */
    uint32_t      enc;          /* bytes of its JSON object and '\n' */
    int64_t       ms;           /* epoch milliseconds */
} jr_joblog_rec;
#define REC ((size_t)sizeof(jr_joblog_rec))
#define R_CUT    1              /* " [line cut]" after the text */
#define R_FIELDS 2              /* its pieces, not its text */
#define NLEVELS  6

/* An entry's head, before its records. */
typedef struct jr_joblog_head {
    uint32_t magic;             /* ENTRY_MAGIC */
    int32_t  attempt;
    int64_t  at;                /* epoch milliseconds of its first line */
    int64_t  dropped_lines;
    int64_t  dropped_bytes;
} jr_joblog_head;
#define HEAD ((size_t)sizeof(jr_joblog_head))
#define ENTRY_MAGIC 0x4c524a01u

/* "debug" ... "error", "stdout", "stderr", and their lengths */
extern const char *const jr_joblog_levels[NLEVELS];
extern const unsigned char jr_joblog_level_len[NLEVELS];
/* 1 for a byte a JSON string holds as it is: printable ASCII but '"'
 * and '\\'. */
extern const unsigned char jr_joblog_plain[256];

/* Makes room for n more bytes in b: 0, or -1 and b->oom set. */
int    jr_joblog_reserve(jr_buf *b, size_t n);
/* How many bytes s[0..n) begins with that jr_joblog_plain holds. */
size_t jr_joblog_plain_run(const char *s, size_t n);
/* 1 if a plain value is quoted in its line: empty, or a space or '='
 * in it (jrlog.c's rule for any value). */
int    jr_joblog_quoted(const char *v, size_t n);

static inline size_t
jr_joblog_get16(const char *p)
{
    uint16_t x;

    memcpy(&x, p, 2);
    return x;
}

#endif
