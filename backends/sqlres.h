/* sqlres.h - what both engines do around a job's jobrunner.sql
 * statements (job.h's jr_result.sql): which results carry some, a copy
 * of a batch of results the engine may change, and a success whose
 * statement failed made a failed attempt. Pure C, no database. Uses
 * job.h, sqlstmt.h. */
#ifndef JR_SQLRES_H
#define JR_SQLRES_H

#include "base/job.h"

/* 1 when a result of r[0..n) is a success with statements. */
int        jr_sqlres_any(const jr_result *r, int n);

/* Empties the sql_error of r[0..n)'s successes with statements (a batch
 * tried again starts afresh). */
void       jr_sqlres_clear(const jr_result *r, int n);

/* Returns a new copy of r[0..n) (free with free()), or NULL when out of
 * memory. Strings stay borrowed from r; the successes' sql_error are
 * emptied (shared with r: a batch tried again starts afresh). */
jr_result *jr_sqlres_copy(const jr_result *r, int n);

/* Makes the success r, whose statement index (1, 2, ...) failed with
 * why, a failed attempt: r->sql_kind with r->sql_delay, its error
 * "jobrunner.sql statement N of 'handler' failed: why" in r->sql_error
 * (handler: r->sql_handler), no pushes, no result. */
void       jr_sqlres_fail(jr_result *r, int index, const char *why);

/* why, for a success whose statements a stopping runner did not run
 * (backend.h's interrupt): its attempt fails, and the job runs again */
#define JR_SQLRES_CUT "not run: the runner is stopping and cuts its " \
                      "handlers' statements short"

#endif
