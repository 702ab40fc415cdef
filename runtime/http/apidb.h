/* apidb.h - what the files of the HTTP API's database reader share,
 * private to them: apidb.c runs a request and calls apidbsched.c for the
 * schedules, limits and the operator's actions (apidbflow.c's calls are
 * in api.h). All run on the database thread. Uses api.h, backend.h. */
#ifndef JR_APIDB_H
#define JR_APIDB_H

#include "http/api.h"
#include "backend.h"

/* GET /api/schedules (jr_apiop_schedules) or one schedule's control
 * (jr_apiop_sched_ctl): q->body gets the reply. 0, or -1 with e set. */
int jr_apidb_schedule(jr_db *db, jr_apireq *q, jr_err *e);
/* GET /api/limits. 0, or -1 with e set. */
int jr_apidb_limits(jr_db *db, jr_apireq *q, jr_err *e);
/* A bulk action (jr_apiop_bulk_*) on what list filter f selects; f is
 * changed (its state, limit and cursors). 0, or -1 with e set. */
int jr_apidb_bulk(jr_db *db, jr_apireq *q, jr_list_filter *f, jr_err *e);
/* A queue's pause and resume (q->queue); the retry of dead ids, and the
 * purge of dead ids or, with none, of those older_than. 0, or -1 with e
 * set. */
int jr_apidb_pause(jr_db *db, jr_apireq *q, jr_err *e);
int jr_apidb_resume(jr_db *db, jr_apireq *q, jr_err *e);
int jr_apidb_retry(jr_db *db, jr_apireq *q, jr_err *e);
int jr_apidb_purge(jr_db *db, jr_apireq *q, jr_err *e);

#endif
