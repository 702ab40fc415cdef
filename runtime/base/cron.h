/* cron.h - when a schedule fires: the five fields of a cron expression
 * (lists, ranges, steps, month and day names, @hourly...@yearly, Vixie
 * cron's day-of-month OR day-of-week rule) or a fixed interval, and the
 * next fire instant after a time in an IANA zone of the system's tz
 * database (its TZif files read by tzfile.c: no TZ, no tzset; any
 * thread). Pure functions otherwise. Uses err.h, tzfile.h. */
#ifndef JR_CRON_H
#define JR_CRON_H

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

#define JR_CRON_YEARS    8      /* next looks this far ahead, else none */
#define JR_EVERY_MAX     31622400.0     /* every: 366 days at most */

typedef struct jr_cron {
    uint64_t minute;            /* bit m: minute m (0-59) matches */
    uint32_t hour;              /* bit h: 0-23 */
    uint32_t mday;              /* bit d: 1-31 */
    uint32_t month;             /* bit m: 1-12 */
    uint32_t wday;              /* bit d: 0-6, Sunday 0 (7 is Sunday too) */
    int      dom_star;          /* day-of-month field began with '*' */
    int      dow_star;          /* day-of-week field began with '*' */
    double   every;             /* > 0: a fixed interval in seconds from
                                   the Unix epoch instead of the fields */
} jr_cron;

/* Parses a 5-field expression or @hourly, @daily (@midnight), @weekly,
 * @monthly, @yearly (@annually) into c. On error returns -1 with err
 * (JR_EINPUT) naming the field at fault and why: "field 'minute' (1st):
 * 61 is out of range 0-59"; when field is not NULL it receives the field's
 * name ("minute", "hour", "day-of-month", "month", "day-of-week", or
 * "expression" for a wrong number of fields). */
int  jr_cron_parse(const char *expr, jr_cron *c, const char **field,
                   jr_err *err);
/* Makes c a fixed interval of secs seconds (whole, 1 to JR_EVERY_MAX),
 * -1 with err set otherwise. */
int  jr_cron_every(double secs, jr_cron *c, jr_err *err);
/* Whether tz names a zone of the tz database ("UTC" always does). */
int  jr_cron_zone_ok(const char *tz);
/* The first fire instant (epoch seconds) strictly after `after` in zone tz
 * (NULL: UTC), into *next. Wall-clock times that a DST change skips fire
 * once, at the first valid instant after (the change itself); times that
 * it repeats fire once, at their first occurrence. A fixed interval fires
 * at whole multiples of it from the epoch, whatever the zone. Returns 0,
 * or -1 when it never fires within JR_CRON_YEARS (e.g. 30 February) or tz
 * is unknown. Reads the zone's file; touches no environment. */
int  jr_cron_next(const jr_cron *c, const char *tz, double after,
                  double *next);
/* The UTC offset (seconds east) of tz at instant t, and its abbreviation
 * into abbr (abbrsz bytes) when not NULL; 0 for an unknown zone. */
long jr_cron_offset(const char *tz, double t, char *abbr, size_t abbrsz);

#endif
