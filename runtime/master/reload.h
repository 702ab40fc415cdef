/* reload.h - what starts a reload from outside the master: a watch on the
 * scripts directory (inotify on Linux, debounced so an editor's burst of
 * writes is one reload) and the pid file that `jobrunner reload` reads.
 * Uses libevent for the watch; config.h for where the pid file lives. */
#ifndef JR_RELOAD_H
#define JR_RELOAD_H

#include <stddef.h>

#include "config/config.h"
#include "base/err.h"

struct event_base;
typedef struct jr_watch jr_watch;

/* Watches dir and every directory below it; calls fn(arg) once changes
 * have been quiet for debounce seconds. Returns NULL with err set when
 * the watch cannot be made (the runner goes on without it). */
jr_watch *jr_watch_new(struct event_base *base, const char *dir,
                       double debounce, void (*fn)(void *), void *arg,
                       jr_err *err);
void      jr_watch_free(jr_watch *w);       /* NULL is a no-op */

/* The pid file of the runner for cfg: pid_file, else next to the SQLite
 * database (the path parsed from its URL, plus ".pid"), else
 * "jobrunner.pid". */
void jr_pidfile_path(const jr_config *cfg, char *out, size_t size);
/* Creates the pid file without following a symlink, or takes over the pid
 * file of a process that is gone, writes our pid and holds a lock on it
 * while we run. Refuses (JR_ECONFIG) a symlink, a file that is not a pid
 * file, one naming a live process, and one locked by a running runner
 * (then -2 instead of -1). */
int  jr_pidfile_write(const char *path, jr_err *err);
/* Removes the pid file only if it is still the one we wrote (same inode),
 * and drops the lock. */
void jr_pidfile_remove(const char *path);
/* Returns the pid in the file if that process is alive and holds the
 * file's lock (a runner), or -1 with err set. */
long jr_pidfile_read(const char *path, jr_err *err);
/* The runner's state beside its pid file (path + ".state"), for readers
 * such as `jobrunner stats`: one line of text, or NULL to remove it.
 * Written only by the process that holds the pid file; never through a
 * symlink. Returns 0 or -1 (errno set). */
int  jr_pidfile_state(const char *path, const char *text);
/* Reads that line into buf (size bytes, the newline dropped): 0, or -1
 * when there is none, or what is there is no regular file (a symlink or
 * a FIFO is neither followed nor waited on). */
int  jr_pidfile_state_read(const char *path, char *buf, size_t size);

#endif
