/* steprec.h - a job's steps' records read back (the list jrsteps.c
 * writes, docs/handlers.md "Steps and cursors"): for show, the HTTP API
 * and the dashboard, each record with its name, its state (done: the step
 * returned; else its last checkpoint), its value or cursor as JSON text,
 * when it was recorded, how long the step ran and in which attempt. No
 * Lua. Uses jsondom.h, util.h. */
#ifndef JR_STEPREC_H
#define JR_STEPREC_H

#include <stddef.h>

#include "base/err.h"
#include "base/util.h"

typedef struct jr_steprec {
    const char *name;           /* NUL-terminated, valid during the call */
    int         done;           /* 1: returned (value); 0: a checkpoint */
    const char *value;          /* its value or cursor, JSON text */
    size_t      len;
    double      at;             /* recorded at, epoch seconds */
    double      secs;           /* the step ran so long when recorded */
    int         attempt;        /* the attempt that recorded it */
} jr_steprec;

typedef int (*jr_steprec_fn)(const jr_steprec *r, void *arg);

/* Calls fn for each record of the list text, in order (a nonzero return
 * stops the walk). Returns how many were read, or -1 with err set when
 * text is not such a list. */
int jr_steprec_each(const char *text, jr_steprec_fn fn, void *arg,
                    jr_err *err);

/* The list text without its records from the one named name on, into
 * *out: a new string (free with free()), or NULL when no record stays.
 * Returns 0, or -1 with err set: JR_EINPUT when text holds no record
 * named name (or is no list), JR_ENOMEM. */
int  jr_steprec_cut(const char *text, const char *name, char **out,
                    jr_err *err);

/* Appends the list as show --json and the API give it: an array of
 * {"name","state" ("done" or "checkpoint"),"value" or "cursor","at" (ISO
 * 8601),"duration","attempt"}; null when text is NULL or no such list. */
void jr_steprec_json(jr_buf *b, const char *text);

#endif
