/* notify.h - systemd's service notifications without libsystemd: one
 * datagram per state change to the socket named by $NOTIFY_SOCKET (a path,
 * or @name in the abstract namespace), as sd_notify(3) sends them, and the
 * watchdog's keep-alive every half of $WATCHDOG_USEC. Uses libevent for the
 * watchdog's timer; log.h for what it cannot do. */
#ifndef JR_NOTIFY_H
#define JR_NOTIFY_H

struct event_base;
typedef struct jr_notify jr_notify;

/* Reads NOTIFY_SOCKET, WATCHDOG_USEC and WATCHDOG_PID, then removes them
 * from the environment (the worker processes must not answer for the
 * runner). Arms the watchdog's timer on base when asked for this process.
 * Returns a new notifier, free with jr_notify_close(); NULL when not run
 * by systemd, or when the socket is unusable (logged: the runner goes on
 * without notifications). */
jr_notify *jr_notify_open(struct event_base *base);
/* Sends msg ("READY=1", "STOPPING=1", lines joined by '\n'); a message
 * starting with "RELOADING=1" gets the MONOTONIC_USEC systemd wants with
 * it. n NULL is a no-op; a failed send is logged once. */
void       jr_notify_send(jr_notify *n, const char *msg);
void       jr_notify_close(jr_notify *n);   /* NULL is a no-op */

#endif
