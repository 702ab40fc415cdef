/* tzfile.h - a zone of the tz database read from its TZif file
 * (RFC 8536: /usr/share/zoneinfo, or TZDIR) by our own code: its
 * transitions, then the POSIX TZ rule of its footer for the instants after
 * the last one. The UTC offset at an instant without TZ, tzset or
 * localtime_r: no environment written, nothing shared, any thread. Also
 * the civil calendar (days since 1970-01-01) that cron.c searches in. */
#ifndef JR_TZFILE_H
#define JR_TZFILE_H

#include <stddef.h>
#include <stdint.h>

typedef struct jr_tzfile jr_tzfile;     /* opaque; fields in tzfile.c */

/* Reads zone name ("Europe/Paris"; "UTC" needs no file). NULL when the
 * name is not a zone of the tz database (or a file we cannot read as
 * TZif), or out of memory. */
jr_tzfile *jr_tzfile_open(const char *name);
void       jr_tzfile_free(jr_tzfile *z);        /* NULL is a no-op */
/* The UTC offset (seconds east) of z at instant t (epoch seconds), and its
 * abbreviation ("CEST") into abbr (abbrsz bytes) when not NULL. */
long       jr_tzfile_offset(const jr_tzfile *z, int64_t t, char *abbr,
                            size_t abbrsz);

/* Days since 1970-01-01 of a civil date (proleptic Gregorian), and back
 * (H. Hinnant's algorithms). */
int64_t    jr_tzfile_days(int64_t y, int m, int d);
void       jr_tzfile_civil(int64_t days, int64_t *y, int *m, int *d);

#endif
