/* dbcalls.h - the backend calls the master's own parts make on a database
 * thread (a jr_dbthread request's run function): the lane's second claim,
 * the count of names no handler takes, the vacuum. master/ and services/
 * reach storage through db/ only; this is their door to backend.h.
 * Each is the backend op of the same name on db's connection. */
#ifndef JR_DBCALLS_H
#define JR_DBCALLS_H
#include "backend.h"
#include "db/dbthread.h"

int jr_dbcall_complete_claim(jr_db *db, const char *token, const jr_result *r,
                             int nr, int *applied, double lease,
                             const jr_claim_spec *spec, jr_job **out,
                             jr_err *err);
int jr_dbcall_stats(jr_db *db, jr_stat_cb cb, void *arg, jr_err *err);
int jr_dbcall_vacuum(jr_db *db, jr_err *err);
int jr_dbcall_can_vacuum(const jr_db *db);   /* the backend has vacuum */
#endif
