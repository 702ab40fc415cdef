/* log.h - the runner's log: one line per event on stderr, text or JSON,
 * filtered by level. Never given payloads. A message's control bytes and
 * bytes that are not UTF-8 are escaped (text: esc.h's rule; JSON: its
 * string escapes). Uses esc.h, jsontext.h. */
#ifndef JR_LOG_H
#define JR_LOG_H

enum { JR_LOG_DEBUG, JR_LOG_INFO, JR_LOG_WARN, JR_LOG_ERROR };

/* Sets the level and format ("text" or "json"); who names the process in
 * each line ("master", "worker 3"). */
void jr_log_setup(int level, int json, const char *who);
/* Writes log lines to fd instead of stderr (a worker whose stderr is its
 * handlers' output). */
void jr_log_fd(int fd);
/* Returns the level for "debug".."error", or -1. */
int  jr_log_level(const char *name);
void jr_log(int level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* 1 if a line of level is written (not filtered out by the level). */
int  jr_log_on(int level);

#endif
