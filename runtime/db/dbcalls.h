/* dbcalls.h - the backend calls the master's own parts make on a database
 * thread (a jr_dbthread request's run function): the lane's second claim,
 * the count of names no handler takes, the vacuum. master/ and services/
 * reach storage through db/ only; this is their door to it, and shows
 * them none of backend.h: only the jobs and results of job.h. Each is
 * the backend op of the same name on db's connection. Uses err.h, job.h,
 * dbthread.h. */
#ifndef JR_DBCALLS_H
#define JR_DBCALLS_H
#include "base/err.h"
#include "base/job.h"
#include "db/dbthread.h"

/* Records r[0..nr) and claims in one transaction (complete_claim): a
 * plain claim of at most max jobs named one of names[0..nnames), at most
 * max from any queue. */
int jr_dbcall_complete_claim(jr_db *db, const char *token, const jr_result *r,
                             int nr, int *applied, double lease,
                             const char *const *names, int nnames, int max,
                             jr_job **out, jr_err *err);
/* Calls cb for each job name with its queued jobs (ready and scheduled),
 * ordered by name (stats); a non-zero return from cb stops the walk. */
typedef int (*jr_dbcall_queued_cb)(const char *name, long queued,
                                   void *arg);
int jr_dbcall_queued(jr_db *db, jr_dbcall_queued_cb cb, void *arg,
                     jr_err *err);
int jr_dbcall_vacuum(jr_db *db, jr_err *err);
int jr_dbcall_can_vacuum(const jr_db *db);   /* the backend has vacuum */
#endif
