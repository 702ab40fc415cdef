/* notify.c - sd_notify(3)'s protocol, written out: a SOCK_DGRAM unix
 * socket connected to $NOTIFY_SOCKET ("@" for the abstract namespace), one
 * datagram per message, and a libevent timer sending WATCHDOG=1 at half
 * the watchdog's interval. Sends never block the loop (non-blocking
 * socket: a full queue drops the message and says so once). */
#define _GNU_SOURCE
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "base/log.h"
#include "master/notify.h"

struct jr_notify {
    int           fd;           /* connected datagram socket */
    struct event *watchdog;     /* sends WATCHDOG=1; NULL when not asked */
    int           warned;       /* a failed send was logged */
};

/* Fills sa with the address in path; returns its length, or -1 with why. */
static int
make_addr(const char *path, struct sockaddr_un *sa, const char **why)
{
    size_t len = strlen(path);

    memset(sa, 0, sizeof *sa);
    sa->sun_family = AF_UNIX;
    if (path[0] != '/' && path[0] != '@') {
        *why = "not an absolute path nor @name (abstract)";
        return -1;
    }
    if (len >= sizeof sa->sun_path || len < 2) {
        *why = len < 2 ? "empty name" : "longer than a socket address";
        return -1;
    }
    memcpy(sa->sun_path, path, len);
    if (path[0] == '@') {
        sa->sun_path[0] = '\0';     /* abstract: no trailing NUL counted */
        return (int)(offsetof(struct sockaddr_un, sun_path) + len);
    }
    return (int)(offsetof(struct sockaddr_un, sun_path) + len + 1);
}

static void
on_watchdog(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    jr_notify_send(arg, "WATCHDOG=1");
}

/* The watchdog's interval in microseconds, when it is meant for us. */
static long long
watchdog_usec(void)
{
    const char *us = getenv("WATCHDOG_USEC"), *pid = getenv("WATCHDOG_PID");
    char *end;
    long long v;

    if (us == NULL)
        return 0;
    if (pid != NULL && strtol(pid, NULL, 10) != (long)getpid())
        return 0;
    v = strtoll(us, &end, 10);
    if (*end != '\0' || v <= 0) {
        jr_log(JR_LOG_WARN, "WATCHDOG_USEC '%s' is not a positive number of "
               "microseconds; no watchdog keep-alives", us);
        return 0;
    }
    return v;
}

static void
arm_watchdog(jr_notify *n, struct event_base *base, long long usec)
{
    struct timeval tv;

    usec /= 2;
    tv.tv_sec = (long)(usec / 1000000);
    tv.tv_usec = (long)(usec % 1000000);
    if ((n->watchdog = event_new(base, -1, EV_PERSIST, on_watchdog, n)) ==
        NULL || event_add(n->watchdog, &tv) < 0)
        jr_log(JR_LOG_WARN, "cannot arm the systemd watchdog timer");
}

jr_notify *
jr_notify_open(struct event_base *base)
{
    const char *path = getenv("NOTIFY_SOCKET"), *why = NULL;
    long long usec = watchdog_usec();
    struct sockaddr_un sa;
    jr_notify *n = NULL;
    int len, fd = -1;

    if (path == NULL)
        goto out;
    if ((len = make_addr(path, &sa, &why)) < 0) {
        jr_log(JR_LOG_WARN, "NOTIFY_SOCKET '%s': %s; no systemd "
               "notifications", path, why);
        goto out;
    }
    if ((fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK,
                     0)) < 0 ||
        connect(fd, (struct sockaddr *)&sa, (socklen_t)len) < 0) {
        int e = errno;

        jr_log(JR_LOG_WARN, "NOTIFY_SOCKET '%s': %s; no systemd "
               "notifications", path, strerror(e));
        goto out;
    }
    if ((n = calloc(1, sizeof *n)) == NULL) {
        jr_log(JR_LOG_WARN, "out of memory; no systemd notifications");
        goto out;
    }
    n->fd = fd;
    fd = -1;
    if (usec > 0)
        arm_watchdog(n, base, usec);
out:
    if (fd >= 0)
        close(fd);
    unsetenv("NOTIFY_SOCKET");
    unsetenv("WATCHDOG_USEC");
    unsetenv("WATCHDOG_PID");
    return n;
}

void
jr_notify_send(jr_notify *n, const char *msg)
{
    char buf[512];
    struct timespec ts;
    int len;

    if (n == NULL)
        return;
    if (strncmp(msg, "RELOADING=1", 11) == 0 &&
        clock_gettime(CLOCK_MONOTONIC, &ts) == 0)
        len = snprintf(buf, sizeof buf, "%s\nMONOTONIC_USEC=%lld", msg,
                       (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000);
    else
        len = snprintf(buf, sizeof buf, "%s", msg);
    if (len < 0 || (size_t)len >= sizeof buf)
        len = (int)strlen(buf);
    if (send(n->fd, buf, (size_t)len, MSG_NOSIGNAL) < 0 && !n->warned) {
        int e = errno;

        n->warned = 1;
        jr_log(JR_LOG_WARN, "systemd notification '%.*s' not sent: %s",
               (int)strcspn(msg, "\n"), msg, strerror(e));
    }
}

void
jr_notify_close(jr_notify *n)
{
    if (n == NULL)
        return;
    if (n->watchdog != NULL)
        event_free(n->watchdog);
    close(n->fd);
    free(n);
}
