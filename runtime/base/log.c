/* log.c - log lines on stderr. One write per line so lines of several
 * processes sharing the descriptor do not interleave; what a line says
 * is escaped (esc.h, or JSON's escapes), so no text a handler or a
 * payload put in it can move the cursor or start a line of its own. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/esc.h"
#include "base/jsontext.h"
#include "base/log.h"
#include "base/util.h"

static int  log_level = JR_LOG_INFO;
static int  log_json;
static char log_who[32] = "jobrunner";
static int  log_out = STDERR_FILENO;

static const char *const level_names[] = {"debug", "info", "warn", "error"};

void
jr_log_setup(int level, int json, const char *who)
{
    log_level = level;
    log_json = json;
    snprintf(log_who, sizeof log_who, "%s", who);
}

void
jr_log_fd(int fd)
{
    log_out = fd;
}

int
jr_log_level(const char *name)
{
    int i;

    for (i = 0; i <= JR_LOG_ERROR; i++)
        if (strcmp(name, level_names[i]) == 0)
            return i;
    return -1;
}

/* Appends s to buf as the inside of a JSON string (jr_jsontext_escape_char;
 * a byte that is not UTF-8 as U+FFFD), leaving room for the closing. */
static size_t
json_escape(char *buf, size_t size, size_t n, const char *s)
{
    size_t left = strlen(s), k, used;
    char out[6];

    for (; left > 0 && n + 7 < size; s += used, left -= used) {
        if ((k = jr_jsontext_escape_char(s, left, out, &used)) == 0) {
            k = sizeof JR_JSONTEXT_BADBYTE - 1;
            memcpy(out, JR_JSONTEXT_BADBYTE, k);
        }
        memcpy(buf + n, out, k);
        n += k;
    }
    buf[n] = '\0';
    return n;
}

int
jr_log_on(int level)
{
    return level >= log_level;
}

void
jr_log(int level, const char *fmt, ...)
{
    char msg[2048], esc[4 * sizeof msg], line[sizeof esc + 200], ts[40];
    va_list ap;
    size_t n;

    if (level < log_level)
        return;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    jr_time_iso(jr_now(), ts, sizeof ts);
    if (log_json) {
        n = (size_t)snprintf(line, sizeof line, "{\"time\":\"%s\",\"level\":"
                             "\"%s\",\"process\":\"%s\",\"pid\":%d,\"msg\":\"",
                             ts, level_names[level], log_who, (int)getpid());
        n = json_escape(line, sizeof line, n, msg);
        n += (size_t)snprintf(line + n, sizeof line - n, "\"}\n");
    } else {
        jr_esc_text(esc, sizeof esc, msg, strlen(msg));
        n = (size_t)snprintf(line, sizeof line, "%s %-5s [%s] %s\n", ts,
                             level_names[level], log_who, esc);
    }
    if (n >= sizeof line)
        n = sizeof line - 1;
    if (write(log_out, line, n) < 0) {
        /* nowhere left to report it */
    }
}
