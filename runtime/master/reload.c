/* reload.c - reload triggers: an inotify watch over the scripts tree that
 * fires once writes have settled, and the pid file. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/inotify.h>
#endif

#include <event2/event.h>

#include "base/log.h"
#include "master/reload.h"
#include "caps.h"
#include "base/util.h"

struct jr_watch {
    int           fd;           /* inotify descriptor */
    struct event *ev;           /* readable */
    struct event *timer;        /* debounce */
    double        debounce;
    void        (*fn)(void *);
    void         *arg;
    char         *dir;
};

#ifdef __linux__
#define WATCH_MASK (IN_CREATE | IN_DELETE | IN_MODIFY | IN_CLOSE_WRITE | \
                    IN_MOVED_FROM | IN_MOVED_TO | IN_DELETE_SELF)

/* Adds a watch on dir and its subdirectories (new ones are added when
 * they appear, by walking again). Follows a symlink to a directory only
 * inside the tree and only to a directory not watched yet, as the loader
 * does (script.c, which warns about the ones it skips). */
static void
add_dir(int fd, jr_dirset *seen, const char *dir)
{
    char path[4096], why[4352];
    struct dirent *e;
    struct stat st;
    DIR *d;

    if (inotify_add_watch(fd, dir, WATCH_MASK) < 0 || (d = opendir(dir)) == NULL)
        return;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (stat(path, &st) < 0 || !S_ISDIR(st.st_mode))
            continue;
        if (jr_dirset_enter(seen, path, why, sizeof why))
            add_dir(fd, seen, path);
        else
            jr_log(JR_LOG_DEBUG, "%s: not watched: %s", path, why);
    }
    closedir(d);
}

static void
add_tree(int fd, const char *dir)
{
    jr_dirset seen;
    jr_err err;

    if (jr_dirset_init(&seen, dir, &err) < 0)
        return;
    add_dir(fd, &seen, dir);
    jr_dirset_free(&seen);
}

static void
on_settled(evutil_socket_t fd, short what, void *arg)
{
    jr_watch *w = arg;

    (void)fd;
    (void)what;
    add_tree(w->fd, w->dir);    /* new subdirectories */
    w->fn(w->arg);
}

static void
on_change(evutil_socket_t fd, short what, void *arg)
{
    jr_watch *w = arg;
    char buf[8192];
    struct timeval tv;
    int changed = 0;
    ssize_t n;

    (void)what;
    while ((n = read(fd, buf, sizeof buf)) > 0) {
        char *p = buf;
        while (p < buf + n) {
            struct inotify_event *ev = (struct inotify_event *)p;
            /* editors' swap and backup files are not scripts */
            if (ev->len == 0 || (ev->name[0] != '.' &&
                                 ev->name[strlen(ev->name) - 1] != '~'))
                changed = 1;
            p += sizeof *ev + ev->len;
        }
    }
    if (!changed)
        return;
    tv.tv_sec = (long)w->debounce;
    tv.tv_usec = (long)((w->debounce - (double)tv.tv_sec) * 1e6);
    event_add(w->timer, &tv);   /* re-arming pushes the deadline back */
}
#endif

jr_watch *
jr_watch_new(struct event_base *base, const char *dir, double debounce,
             void (*fn)(void *), void *arg, jr_err *err)
{
#ifdef __linux__
    jr_watch *w = calloc(1, sizeof *w);

    if (w == NULL || (w->dir = strdup(dir)) == NULL) {
        free(w);
        jr_fail(err, JR_ENOMEM, "out of memory");
        return NULL;
    }
    w->fn = fn;
    w->arg = arg;
    w->debounce = debounce;
    if ((w->fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC)) < 0) {
        jr_fail_errno(err, JR_ESYS, errno, "watching '%s'", dir);
        free(w->dir);
        free(w);
        return NULL;
    }
    add_tree(w->fd, dir);
    w->ev = event_new(base, w->fd, EV_READ | EV_PERSIST, on_change, w);
    w->timer = event_new(base, -1, 0, on_settled, w);
    event_add(w->ev, NULL);
    return w;
#else
    (void)base; (void)debounce; (void)fn; (void)arg;
    jr_fail(err, JR_ESYS, "watching '%s': no inotify on this system; use "
            "SIGHUP or 'jobrunner reload'", dir);
    return NULL;
#endif
}

void
jr_watch_free(jr_watch *w)
{
    if (w == NULL)
        return;
    event_free(w->ev);
    event_free(w->timer);
    close(w->fd);
    free(w->dir);
    free(w);
}

void
jr_pidfile_path(const jr_config *cfg, char *out, size_t size)
{
    const char *file;

    if (cfg->pid_file != NULL)
        snprintf(out, size, "%s", cfg->pid_file);
    else if ((file = jr_url_file(cfg->backend)) != NULL)
        snprintf(out, size, "%s.pid", file);
    else
        snprintf(out, size, "jobrunner.pid");
}

/* The pid file this process wrote and holds locked, to remove only that. */
static struct {
    int   fd;                   /* -1: none */
    dev_t dev;
    ino_t ino;
} own = {-1, 0, 0};

/* The pid in a pid file's text ("1234\n"), or 0 when the text is not
 * that. */
static long
pid_of(const char *text)
{
    char *end;
    long pid;

    if (*text < '1' || *text > '9')
        return 0;
    errno = 0;
    pid = strtol(text, &end, 10);
    if (errno != 0 || pid <= 0 || pid > 0x7fffffff ||
        (*end != '\0' && strcmp(end, "\n") != 0))
        return 0;
    return pid;
}

/* Opens the pid file at path without following a symlink, blocking on a
 * FIFO or truncating anything, and fills st. Returns the descriptor, or
 * -1 with err set (closed). */
static int
pidfile_open(const char *path, struct stat *st, jr_err *err)
{
    int fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK |
                  O_CLOEXEC, 0644);

    if (fd < 0 && errno == ELOOP)
        return jr_fail(err, JR_ECONFIG, "pid file '%s' is a symlink: "
                       "refusing to write through it (remove it, or set "
                       "pid_file)", path);
    if (fd < 0)
        return jr_fail_errno(err, JR_ESYS, errno, "writing pid file '%s'",
                             path);
    if (fstat(fd, st) < 0 || !S_ISREG(st->st_mode)) {
        close(fd);
        return jr_fail(err, JR_ECONFIG, "pid file '%s' is not a regular "
                       "file: refusing to use it", path);
    }
    return fd;
}

/* Takes the lock on the pid file fd. Returns 0, -2 with err set when a
 * running runner holds it, -1 with err set on another failure; fd is
 * closed on failure. */
static int
pidfile_lock(int fd, const char *path, jr_err *err)
{
    char buf[64];
    ssize_t got;
    int e;

    if (flock(fd, LOCK_EX | LOCK_NB) == 0)
        return 0;
    e = errno;
    got = pread(fd, buf, sizeof buf - 1, 0);
    buf[got > 0 ? got : 0] = '\0';
    close(fd);
    if (e == EWOULDBLOCK) {
        jr_fail(err, JR_ECONFIG, "a runner is already running with pid "
                "file '%s' (pid %ld): stop it first, or give this one its "
                "own database or pid_file", path, pid_of(buf));
        return -2;
    }
    return jr_fail_errno(err, JR_ESYS, e, "locking pid file '%s'", path);
}

/* Whether the locked pid file fd (of st) may be taken over: empty, or
 * naming this process or one that is gone. Returns 0, or -1 with err set
 * and fd closed. */
static int
pidfile_stale(int fd, const struct stat *st, const char *path, jr_err *err)
{
    char buf[64];
    ssize_t got = pread(fd, buf, sizeof buf - 1, 0);
    long pid = 0;

    buf[got > 0 ? got : 0] = '\0';
    if (st->st_size > 0 && (st->st_size >= (off_t)sizeof buf - 1 ||
                            (pid = pid_of(buf)) == 0)) {
        close(fd);
        return jr_fail(err, JR_ECONFIG, "'%s' is not a jobrunner pid file "
                       "(it holds something else): refusing to overwrite it; "
                       "set pid_file to another path", path);
    }
    if (st->st_size > 0 && pid != (long)getpid() &&
        (kill((pid_t)pid, 0) == 0 || errno == EPERM)) {
        close(fd);
        return jr_fail(err, JR_ECONFIG, "pid file '%s' names process %ld, "
                       "which is alive: if it is not a runner, remove the "
                       "file", path, pid);
    }
    return 0;
}

int
jr_pidfile_write(const char *path, jr_err *err)
{
    char buf[64];
    struct stat st;
    int fd, n, e, rc;

    /* no symlink is followed, no FIFO blocks us, no existing file is
     * truncated before it is known to be a stale pid file */
    if ((fd = pidfile_open(path, &st, err)) < 0)
        return -1;
    if ((rc = pidfile_lock(fd, path, err)) < 0)
        return rc;
    if (pidfile_stale(fd, &st, path, err) < 0)
        return -1;
    n = snprintf(buf, sizeof buf, "%d\n", (int)getpid());
    if (ftruncate(fd, 0) < 0 || pwrite(fd, buf, (size_t)n, 0) != n) {
        e = errno;
        close(fd);
        return jr_fail_errno(err, JR_ESYS, e, "writing pid file '%s'", path);
    }
    own.fd = fd;                /* open while we run: it holds the lock */
    own.dev = st.st_dev;
    own.ino = st.st_ino;
    return 0;
}

long
jr_pidfile_read(const char *path, jr_err *err)
{
    /* O_NONBLOCK: a FIFO put there must not hang us */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    FILE *f = fd < 0 ? NULL : fdopen(fd, "r");
    long pid = -1;
    int locked;

    if (f == NULL) {
        int e = errno;

        if (fd >= 0)
            close(fd);
        return jr_fail_errno(err, JR_ENOTFOUND, e, "no runner: cannot "
                             "read pid file '%s'", path);
    }
    if (fscanf(f, "%ld", &pid) != 1)
        pid = -1;
    /* a live runner holds the lock; a killed one's file names a pid that
     * another process may have been given since */
    locked = flock(fd, LOCK_SH | LOCK_NB) < 0 && errno == EWOULDBLOCK;
    fclose(f);
    if (pid <= 0)
        return jr_fail(err, JR_ENOTFOUND, "pid file '%s' holds no pid", path);
    if (!locked)
        return jr_fail(err, JR_ENOTFOUND, "no runner: process %ld from '%s' "
                       "does not hold its lock (the file of a runner that "
                       "was killed)", pid, path);
    if (kill((pid_t)pid, 0) < 0)
        return jr_fail(err, JR_ENOTFOUND, "no runner: process %ld from '%s' "
                       "is gone", pid, path);
    return pid;
}

void
jr_pidfile_remove(const char *path)
{
    struct stat st;

    if (own.fd < 0)
        return;
    /* still the file we wrote, not one put at the path since */
    if (lstat(path, &st) == 0 && S_ISREG(st.st_mode) &&
        st.st_dev == own.dev && st.st_ino == own.ino)
        unlink(path);
    close(own.fd);
    own.fd = -1;
}

int
jr_pidfile_state(const char *path, const char *text)
{
    char file[4200], tmp[4210];
    size_t len;
    int fd, e, ok;

    if (own.fd < 0)
        return 0;               /* not ours: another runner's, or none */
    snprintf(file, sizeof file, "%s.state", path);
    if (text == NULL)
        return unlink(file) < 0 && errno != ENOENT ? -1 : 0;
    snprintf(tmp, sizeof tmp, "%s.tmp", file);
    /* a new file, never one put at tmp (a hard link to another file
     * would have it truncated and written) */
    if (unlink(tmp) < 0 && errno != ENOENT)
        return -1;
    fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_NONBLOCK |
              O_CLOEXEC, 0644);
    if (fd < 0)
        return -1;
    len = strlen(text);
    ok = write(fd, text, len) == (ssize_t)len && write(fd, "\n", 1) == 1;
    e = errno;
    if (close(fd) < 0 && ok) {
        ok = 0;
        e = errno;
    }
    if (!ok) {
        unlink(tmp);
        errno = e;
        return -1;
    }
    /* a rename replaces a symlink at file itself, never its target */
    if (rename(tmp, file) < 0) {
        e = errno;
        unlink(tmp);
        errno = e;
        return -1;
    }
    return 0;
}

int
jr_pidfile_state_read(const char *path, char *buf, size_t size)
{
    char file[4200];
    struct stat st;
    ssize_t n;
    int fd;

    snprintf(file, sizeof file, "%s.state", path);
    /* the runner writes a regular file: a symlink or a FIFO put there
     * by another is not read (it could name any file, or block us) */
    fd = open(file, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY |
              O_CLOEXEC);
    if (fd < 0)
        return -1;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
        (n = read(fd, buf, size - 1)) < 0) {
        close(fd);
        return -1;
    }
    close(fd);
    buf[n] = '\0';
    buf[strcspn(buf, "\n")] = '\0';
    return 0;
}
