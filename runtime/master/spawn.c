/* spawn.c - starting a worker process: its socket and output
 * descriptors, fork and exec of `jobrunner __worker 3[:4]` in its own
 * process group; and whether workers can start at all (the reason they
 * cannot, logged once and kept for the readers of the runner's state).
 * What the master then does with it (its settings frame, its events, its
 * death) is pool.c's. Uses master_int.h. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/log.h"
#include "master/master_int.h"
#include "worker/worker.h"

/* Puts descriptor from at number to in a child before exec. dup2 onto
 * itself would keep close-on-exec set, so that case clears it instead. */
static int
move_fd(int from, int to)
{
    if (from == to)
        return fcntl(to, F_SETFD, 0);
    return dup2(from, to) < 0 ? -1 : 0;
}

/* The descriptors of a worker being started: the master's end of its
 * socket, the child's (to become 3) and its output (to become 4, or -1);
 * out and rd as jr_output_fd returned them. */
typedef struct spawn_fds {
    int mine, c3, c4, out, rd;
    int c5;                     /* the shared page's memfd, or -1 */
    jr_share *share;            /* its mapping here, or NULL */
} spawn_fds;

/* Closes what open_fds opened, after a failure. */
static void
close_fds(spawn_fds *f)
{
    if (f->mine >= 0)
        close(f->mine);
    if (f->c3 >= 0)
        close(f->c3);
    if (f->c4 >= 0)
        close(f->c4);
    if (f->rd >= 0) {
        close(f->rd);
        close(f->out);
    }
    if (f->c5 >= 0)
        close(f->c5);
    if (f->share != NULL)
        munmap(f->share, sizeof *f->share);
}

/* The page the worker shares with the master (worker.h). Without it (no
 * memfd) the worker runs as before: a warning, no failure. */
static void
open_share(spawn_fds *f)
{
    int fd = memfd_create("jobrunner-worker", MFD_CLOEXEC);
    void *p;

    f->c5 = -1;
    f->share = NULL;
    if (fd < 0 || ftruncate(fd, sizeof(jr_share)) < 0 ||
        (p = mmap(NULL, sizeof(jr_share), PROT_READ | PROT_WRITE,
                  MAP_SHARED, fd, 0)) == MAP_FAILED) {
        jr_log(JR_LOG_WARN, "worker page: %s; a dead worker's last results "
               "may be lost", strerror(errno));
        if (fd >= 0)
            close(fd);
        return;
    }
    f->share = p;
    /* above 5, so that moving 3 and 4 into place cannot overwrite it */
    f->c5 = fcntl(fd, F_DUPFD_CLOEXEC, 6);
    close(fd);
    if (f->c5 < 0) {
        munmap(f->share, sizeof(jr_share));
        f->share = NULL;
    }
}

void
jr_spawn_unshare(wk *w)
{
    if (w->share != NULL)
        munmap(w->share, sizeof *w->share);
    w->share = NULL;
}

/* Opens a new worker's socket and output. Returns 0, or -1 (err set, all
 * closed). */
static int
open_fds(master *m, spawn_fds *f, jr_err *err)
{
    int sv[2];

    f->mine = f->c3 = f->c4 = f->c5 = -1;
    f->share = NULL;
    if ((f->out = jr_output_fd(m, &f->rd, err)) == -2)
        return -1;
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
        jr_fail(err, JR_ESYS, "cannot start a worker: socketpair: %s",
                strerror(errno));
        close_fds(f);
        return -1;
    }
    f->mine = sv[0];
    /* above 4, so that moving one to 3 cannot overwrite the other */
    f->c3 = fcntl(sv[1], F_DUPFD_CLOEXEC, 5);
    close(sv[1]);
    f->c4 = f->out >= 0 ? fcntl(f->out, F_DUPFD_CLOEXEC, 5) : -1;
    if (f->c3 < 0 || (f->out >= 0 && f->c4 < 0)) {
        jr_fail(err, JR_ESYS, "cannot start a worker: fcntl: %s",
                strerror(errno));
        close_fds(f);
        return -1;
    }
    open_share(f);
    return 0;
}

/* In the child between fork and exec: every caught signal back to its
 * default, then the mask the master had. Async-signal-safe calls only. */
static void
default_signals(const sigset_t *mask)
{
    struct sigaction sa, cur;
    int s;

    memset(&sa, 0, sizeof sa);
    sa.sa_handler = SIG_DFL;
    for (s = 1; s < NSIG; s++)
        if (sigaction(s, NULL, &cur) == 0 && cur.sa_handler != SIG_DFL &&
            cur.sa_handler != SIG_IGN)
            sigaction(s, &sa, NULL);
    sigprocmask(SIG_SETMASK, mask, NULL);
}

/* Forks and execs `jobrunner __worker 3[:4]`; closes the child's ends in
 * the master. Returns the pid, or -1 (err set, all closed). The worker's
 * settings follow on its socket (send_settings): argv carries none. */
static pid_t
start_process(master *m, spawn_fds *f, jr_err *err)
{
    char prog[] = "jobrunner", cmd[] = "__worker", fds[] = "3:4";
    char share[] = "5";
    char *argv[] = {prog, cmd, fds, f->c5 >= 0 ? share : NULL, NULL};
    sigset_t all, old;
    pid_t pid;
    int e;

    if (f->out < 0)
        fds[1] = '\0';                 /* "3" */
    /* No handler of the master's may run in the child: libevent's would
     * write the signal to the master's own signal socket and so swallow
     * it (a SIGTERM sent by a stop between fork and exec left a worker
     * that never exited, and the master waiting for it). Signals stay
     * blocked across fork; the child puts caught ones back to their
     * defaults before unblocking, so one already sent acts as it would
     * on the exec'd worker. */
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    pid = fork();
    e = errno;
    if (pid != 0)
        pthread_sigmask(SIG_SETMASK, &old, NULL);

    if (pid < 0) {
        jr_fail(err, JR_ESYS, "cannot start a worker: fork: %s",
                strerror(e));
        close_fds(f);
        return -1;
    }
    if (pid == 0) {
        /* only async-signal-safe calls until exec. The worker leads its
         * own process group, so killing the group kills all it started */
        setpgid(0, 0);
        default_signals(&old);
        if (move_fd(f->c3, 3) < 0 || (f->c4 >= 0 && move_fd(f->c4, 4) < 0) ||
            (f->c5 >= 0 && move_fd(f->c5, 5) < 0))
            _exit(127);
        execv(m->self, argv);
        _exit(127);
    }
    setpgid(pid, pid);          /* also here: whichever runs first */
    close(f->c3);
    if (f->c4 >= 0)
        close(f->c4);
    if (f->c5 >= 0)
        close(f->c5);
    if (f->rd >= 0)
        close(f->out);
    return pid;
}

int
jr_spawn_worker(master *m, jr_spawned *out, jr_err *err)
{
    spawn_fds f;
    pid_t pid;

    if (open_fds(m, &f, err) < 0 || (pid = start_process(m, &f, err)) < 0)
        return -1;
    out->mine = f.mine;
    out->rd = f.rd;
    out->pid = pid;
    out->share = f.share;
    return 0;
}

/* The runner's state line for readers (`jobrunner stats`), beside its
 * pid file; text NULL removes it. */
static void
put_state(master *m, const char *text)
{
    if (m->pidfile[0] && jr_pidfile_state(m->pidfile, text) < 0)
        jr_log(JR_LOG_WARN, "state file beside pid file '%s': %s",
               m->pidfile, strerror(errno));
}

void
jr_spawn_cannot(master *m, wk *w, const char *why)
{
    char reason[sizeof m->nostart], line[512];

    w->nostart = 1;
    snprintf(reason, sizeof reason, "%s", why);
    if (strcmp(reason, m->nostart) == 0) {
        jr_log(JR_LOG_DEBUG, "worker %d (pid %d) could not start either",
               w->id, (int)w->pid);
        return;
    }
    memcpy(m->nostart, reason, sizeof reason);
    jr_log(JR_LOG_ERROR, "workers cannot start (each is replaced with "
           "backoff; logged again when the reason changes), %s: %s",
           m->gen ? "the running generation goes on" :
           "no handlers until one starts", why);
    snprintf(line, sizeof line, "workers cannot start: %.*s",
             (int)strcspn(why, "\n"), why);
    put_state(m, line);
}

void
jr_spawn_started(master *m)
{
    if (m->nostart[0] == '\0')
        return;
    jr_log(JR_LOG_INFO, "workers start again");
    m->nostart[0] = '\0';
    put_state(m, NULL);
}
