/* listen.c - wake-ups: a second connection, opened on demand, LISTENs on
 * the schema's channel; its socket for the loop, and whether anything was
 * notified since the last look (asked by claims too, before they trust
 * their place: claim.c). Uses conn.c. */

#include <poll.h>
#include <stdio.h>

#include "postgres/pg_int.h"

/* Opens the LISTEN connection if there is none. */
static int
listen_open(jr_backend *b, jr_err *err)
{
    char sql[112], msg[300];
    PGresult *res;

    if (b->listen != NULL)
        return 0;
    if ((b->listen = jr_pg_connect(b, err)) == NULL)
        return -1;
    snprintf(sql, sizeof sql, "LISTEN \"%s\"", b->channel);
    res = PQexec(b->listen, sql);
    if (PQresultStatus(res) != PGRES_COMMAND_OK) {
        jr_pg_oneline(msg, sizeof msg, PQresultErrorMessage(res));
        PQclear(res);
        PQfinish(b->listen);
        b->listen = NULL;
        return jr_fail(err, JR_EDB, "postgres: LISTEN on '%s' failed: %s",
                       b->channel, msg);
    }
    PQclear(res);
    return 0;
}

int
jr_pg_wake_fd(jr_backend *b)
{
    if (b->listen == NULL && listen_open(b, NULL) < 0)
        return -1;
    return PQsocket(b->listen);
}

/* Reads what the server sent. A server that ends the session sends an
 * error and then closes; libpq sees the close only on a further read, so
 * read until the socket is drained. Returns 0, or -1 if the connection died. */
static int
listen_read(PGconn *c)
{
    struct pollfd p = {.fd = PQsocket(c), .events = POLLIN};
    int i;

    for (i = 0; i < 16; i++) {
        if (!PQconsumeInput(c) || PQstatus(c) != CONNECTION_OK)
            return -1;
        if (poll(&p, 1, 0) != 1)
            break;
    }
    return 0;
}

int
jr_pg_changed(jr_backend *b, jr_err *err)
{
    PGnotify *note;
    char msg[300];
    int any = b->woken;

    b->woken = 0;
    if (b->listen == NULL) {
        /* first call, or after a loss: wake-ups may have been missed */
        b->place_queue[0] = '\0';
        b->fplace_on = 0;
        return listen_open(b, err) < 0 ? -1 : 1;
    }
    if (listen_read(b->listen) < 0) {
        b->place_queue[0] = '\0';
        b->fplace_on = 0;
        jr_pg_oneline(msg, sizeof msg, PQerrorMessage(b->listen));
        PQfinish(b->listen);
        b->listen = NULL;
        return jr_fail(err, JR_EDB, "postgres: LISTEN connection to '%s' "
                       "lost (%s); will reconnect on the next call",
                       b->masked, msg);
    }
    while ((note = PQnotifies(b->listen)) != NULL) {
        any = 1;
        PQfreemem(note);
    }
    if (any) {                  /* a job may be queued before them */
        b->place_queue[0] = '\0';
        b->fplace_on = 0;
    }
    return any;
}

/* Whether a wake-up came since the last look, read now without waiting
 * (a claim asks before it trusts its place: claim.c): 1 if one came, or
 * if the LISTEN connection was not open to tell (it is opened now); 0 if
 * none. What it reads, jr_pg_changed reports still (the runner's second
 * connection never asks it: its wake-ups are read here only); a lost
 * connection is left to it. */
int
jr_pg_woken(jr_backend *b)
{
    PGnotify *note;
    int any = 0;

    if (b->listen == NULL) {
        if (listen_open(b, NULL) == 0)
            b->woken = 1;       /* wake-ups may have been missed */
        return 1;
    }
    if (listen_read(b->listen) < 0)
        return 1;
    while ((note = PQnotifies(b->listen)) != NULL) {
        any = 1;
        PQfreemem(note);
    }
    if (any) {
        b->woken = 1;
        b->place_queue[0] = '\0';
        b->fplace_on = 0;
    }
    return any;
}
