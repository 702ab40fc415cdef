/* roquery.h - jobrunner.query's reads (docs/handlers.md, "Reads before
 * writes"): a read-only connection of a worker's own to the queue's
 * database, opened on its first query and kept, outside the transaction
 * that records a job. PostgreSQL: a connection of its own with
 * default_transaction_read_only on (SET ROLE to handler_role when one is
 * given); SQLite: the queue's file opened with SQLITE_OPEN_READONLY and
 * a busy timeout (the attach file attached as app). The one part of
 * backends/ a worker's handler module reaches: it shows no backend.h.
 * Uses sqlstmt.h for the statement and its values. */
#ifndef JR_ROQUERY_H
#define JR_ROQUERY_H

#include <stddef.h>

#include "base/sqlstmt.h"

#define JR_QUERY_ROWS_MAX  10000        /* rows one query returns */
#define JR_QUERY_BYTES_MAX (4u << 20)   /* bytes of its values and names */

typedef struct jr_roq jr_roq;           /* opaque; fields in roquery.c */

/* What a query returned, owned by its handle until its next query or
 * its close. vals is row-major, nrows * ncols; a value of a column
 * that is NULL has type JR_SQLV_NULL. Integer columns (PostgreSQL's
 * int2, int4, int8, oid; SQLite's INTEGER) are JR_SQLV_INT, exact;
 * floats JR_SQLV_FLOAT; PostgreSQL's bool JR_SQLV_BOOL; the rest
 * (numeric, text, json, dates, ...) JR_SQLV_TEXT in the database's
 * text form, and SQLite's blobs JR_SQLV_TEXT of their bytes. */
typedef struct jr_roq_result {
    int              ncols;
    int              nrows;
    const char     **names;
    const jr_sqlval *vals;
} jr_roq_result;

/* A handle for url (the runner's backend URL); attach (SQLite: a file
 * attached as app) and role (PostgreSQL: handler_role) may be NULL.
 * Connects nothing yet: NULL only when out of memory. */
jr_roq *jr_roq_new(const char *url, const char *attach, const char *role);
void    jr_roq_free(jr_roq *q);         /* NULL is a no-op */

/* Runs st (one statement, its parameters bound) on q's connection,
 * opening it first when it has none. Returns 0 with *out set, or -1
 * with why set: the database's message (its SQLSTATE on PostgreSQL), a
 * failed connection, or a result over JR_QUERY_ROWS_MAX rows or
 * JR_QUERY_BYTES_MAX bytes. A connection found broken is closed, to be
 * opened again by the next query. */
int     jr_roq_run(jr_roq *q, const jr_sqlstmt *st, const jr_roq_result **out,
                   char *why, size_t size);

#endif
