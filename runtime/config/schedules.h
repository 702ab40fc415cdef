/* schedules.h - recurring jobs as the config declares them: `schedules`
 * (a list of tables: name, cron or every, tz, payload, queue, priority,
 * max_retries, catch_up, job, overlap, jitter, start_at, end_at) and `timezone` (the default zone). Reads
 * them from Lua for keys.c and checks every field, naming file:line,
 * the schedule and the field at fault; schedset.c compares, copies and
 * frees a set once read. Uses cron.h, err.h. */
#ifndef JR_SCHEDULES_H
#define JR_SCHEDULES_H

#include "base/cron.h"
#include "base/err.h"

typedef struct lua_State lua_State;

#define JR_SCHEDULES_MAX 1000   /* schedules in one config at most */
#define JR_CATCHUP_MAX   100    /* catch_up = "all": missed fires run at
                                   most (the most recent ones) */
#define JR_FIRES_KEEP    10     /* fire rows kept per schedule */

enum { JR_CATCHUP_LAST, JR_CATCHUP_ALL, JR_CATCHUP_NONE };
/* What a fire does while the job of the schedule's previous fire is
 * still queued or running (jr_schedule.overlap, jr_fire.overlap). */
enum { JR_OVERLAP_ALLOW, JR_OVERLAP_SKIP, JR_OVERLAP_CANCEL };

#define JR_JITTER_MAX    86400.0        /* jitter at most a day */

typedef struct jr_schedule {
    char   *name;               /* unique among schedules */
    char   *job;                /* the job's name: `job`, else name */
    char   *spec;               /* the cron text, or "every N" */
    char   *tz;                 /* its zone, resolved: tz, else
                                   `timezone`, else "UTC" */
    char   *payload;            /* JSON text */
    char   *queue;              /* NULL: default */
    int     priority;
    int     max_retries;        /* -1: not set */
    int     catch_up;           /* JR_CATCHUP_* */
    int     line;               /* of its name in the config, or 0 */
    jr_cron cron;
    int     overlap;            /* JR_OVERLAP_*: allow when not set */
    double  jitter;             /* seconds: each fire's job runs up to this
                                   late (jr_schedule_jitter), 0: none */
    double  start_at;           /* no fire before (epoch seconds), 0: none */
    double  end_at;             /* no fire after, 0: none */
    int     runtime;            /* 1: from the database (schedule add), not
                                   the config: changed at run time */
} jr_schedule;

typedef struct jr_schedules {
    jr_schedule *s;
    int          n;
    char        *timezone;      /* `timezone`; NULL: UTC */
} jr_schedules;

/* Reads the `schedules` list at the top of L into ss (replacing what it
 * had). file and text (the file's contents) give the lines in messages.
 * -1 with err set (JR_ECONFIG). [-0, +0, m] */
int  jr_schedules_read(lua_State *L, jr_schedules *ss, const char *file,
                       const char *text, jr_err *err);
/* After the whole config is read: resolves each zone (`timezone` is the
 * default) and checks it is in the tz database, and each payload within
 * max_payload bytes. -1 with err set. */
int  jr_schedules_finish(jr_schedules *ss, size_t max_payload,
                         const char *file, const char *text, jr_err *err);
/* Whether a and b fire the same jobs at the same times. */
int  jr_schedule_same(const jr_schedule *a, const jr_schedule *b);
/* Copies src into dst (a new set, free with jr_schedules_free). -1 when
 * out of memory. */
int  jr_schedules_copy(jr_schedules *dst, const jr_schedules *src);
const char *jr_catchup_name(int catch_up);
const char *jr_overlap_name(int overlap);
/* The delay of s's fire at instant at: in [0, jitter), the same for
 * every runner (a hash of the name and the instant). */
double jr_schedule_jitter(const jr_schedule *s, double at);
void jr_schedules_free(jr_schedules *ss);   /* frees members; zeroes ss */

#endif
