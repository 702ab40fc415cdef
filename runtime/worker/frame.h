/* frame.h - the messages between the master and its workers: a 4-byte
 * little-endian length, a type byte, then typed fields (integers little
 * endian, strings as a length and bytes). Owns the codec only; reading and
 * writing descriptors is the caller's. Uses job.h for jobs and results,
 * script.h for the handlers a hello lists, util.h for the buffer frames
 * are written into. */
#ifndef JR_FRAME_H
#define JR_FRAME_H

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "base/job.h"
#include "lua/script.h"
#include "base/util.h"

#define JR_FRAME_MAX (64u << 20)    /* largest frame accepted, bytes */

enum {
    JR_F_HELLO = 1,     /* worker -> master: loaded handlers and errors */
    JR_F_JOB,           /* master -> worker: run this job */
    JR_F_RESULT,        /* worker -> master: what became of it */
    JR_F_STOP,          /* master -> worker: exit when idle */
    JR_F_SETTINGS,      /* master -> worker, first: what to run with */
    JR_F_CANCEL,        /* master -> worker: stop this job (cancelled) */
    JR_F_STEPOK,        /* master -> worker: this job's durable step is
                           committed */
    JR_F_HANDBACK,      /* master -> worker: the runner stops or reloads:
                           hand jobs back at their next checkpoint */
    JR_F_SPANS,         /* worker -> master: finished spans to export
                           (OTLP/JSON Span objects, comma-separated) */
    JR_F_LINES          /* master -> worker: what became of successes
                           whose lines it holds (jr_result.held): an i32
                           count, then each one's i64 id and u8 want (1:
                           the row stayed, send the lines as a result of
                           held 2; 0: drop them) */
};

/* Writing (into util.h's jr_buf: its oom set means the frame is unusable): jr_frame_begin, then puts, then jr_frame_end fills the length. */
size_t jr_frame_begin(jr_buf *b, int type);    /* returns the frame start */
void   jr_frame_end(jr_buf *b, size_t start);
void   jr_put_u8(jr_buf *b, unsigned v);
void   jr_put_i32(jr_buf *b, int32_t v);
void   jr_put_i64(jr_buf *b, int64_t v);
void   jr_put_f64(jr_buf *b, double v);
void   jr_put_str(jr_buf *b, const char *s);   /* NULL is kept as NULL */
void   jr_put_strn(jr_buf *b, const char *s, size_t n);

/* Reading one frame body. Every get returns a zero value once the body is
 * overrun and sets bad; check bad once at the end. */
typedef struct jr_reader {
    const char *p;
    size_t      n;
    int         bad;
} jr_reader;

unsigned    jr_get_u8(jr_reader *r);
int32_t     jr_get_i32(jr_reader *r);
int64_t     jr_get_i64(jr_reader *r);
double      jr_get_f64(jr_reader *r);
/* Returns a pointer into the body, NUL-terminated in place is not possible,
 * so the length is returned through len; NULL for a NULL string. */
const char *jr_get_str(jr_reader *r, size_t *len);

/* Looks at data[0..n): returns the whole frame's length (header included)
 * when a complete frame is there, 0 when more bytes are needed, -1 with err
 * set when the length is impossible. */
long jr_frame_complete(const char *data, size_t n, jr_err *err);

/* Sets up r on the body of the complete frame at data and returns its
 * type. */
int  jr_frame_open(jr_reader *r, const char *data);

/* Spans: n OTLP/JSON Span objects, comma-separated (trace.h's
 * jr_span_encode). jr_frame_get_spans points *text into the body and
 * returns n, or -1 with err set for a malformed body. */
void jr_frame_put_spans(jr_buf *b, const char *text, size_t len, int n);
int  jr_frame_get_spans(jr_reader *r, const char **text, size_t *len,
                        jr_err *err);

/* Jobs and results. */
void jr_frame_put_job(jr_buf *b, const jr_job *j);
/* Returns a new job from a JR_F_JOB body, or NULL with err set. */
jr_job *jr_frame_get_job(jr_reader *r, jr_err *err);

/* A JR_PROGRESS result also carries done, total and note; a JR_STEP
 * result its steps' JSON text (in result) and durable; the other kinds
 * do not. */
void jr_frame_put_result(jr_buf *b, const jr_result *res);
/* Decodes a JR_F_RESULT body into res. Strings are copied into one new
 * allocation returned through *mem (free it when done with res, also on
 * failure); res->pushes points into it. Returns 0 or -1 with err set. */
int  jr_frame_get_result(jr_reader *r, jr_result *res, void **mem,
                         jr_err *err);

/* A cancel: the id of the job to stop. jr_frame_get_cancel returns the id,
 * or -1 with err set for a malformed body (an id < 1, trailing bytes). */
void    jr_frame_put_cancel(jr_buf *b, int64_t id);
int64_t jr_frame_get_cancel(jr_reader *r, jr_err *err);

/* A durable step's record committed: the job's id and the record's
 * number (jr_result.durable). jr_frame_get_stepok returns the id and
 * fills *seq, or -1 with err set for a malformed body. */
void    jr_frame_put_stepok(jr_buf *b, int64_t id, int seq);
int64_t jr_frame_get_stepok(jr_reader *r, int *seq, jr_err *err);
/* 1 if a JR_F_STEPOK frame for job id and record seq is among the
 * frames at data[0..n); with type JR_F_HANDBACK (id, seq unused), 1 if
 * one of those is. */
int     jr_frame_find_step(const char *data, size_t n, int type, int64_t id,
                           int seq);

/* 1 if a complete JR_F_CANCEL frame for job id is among the frames at
 * data[0..n) (a worker looks ahead while it runs a job); *any (may be
 * NULL) is set to whether there is a cancel frame for any job. */
int     jr_frame_find_cancel(const char *data, size_t n, int64_t id,
                             int *any);

/* A worker's hello: what it loaded, what failed, and whether its set-up
 * (config, libraries) failed before any handler could load. */
typedef struct jr_hello {
    char        generation[17]; /* hex content hash of the scripts */
    jr_handler *h;              /* n handlers, names owned */
    int         n;
    char      **errors;         /* nerrors "file:line: message", owned */
    int         nerrors;
    char       *setup_error;    /* owned; NULL when set-up went fine */
} jr_hello;

/* Encodes a hello. s borrowed; setup_error NULL when there is none. */
void jr_frame_put_hello(jr_buf *b, const jr_scripts *s,
                        const char *setup_error);
/* Decodes a JR_F_HELLO body into a new hello (free with jr_hello_free,
 * also after a failure). Returns 0, or -1 with err set for any malformed
 * body: bad counts, a NULL or invalid name, out-of-range options, trailing
 * bytes. */
int  jr_frame_get_hello(jr_reader *r, jr_hello *out, jr_err *err);
void jr_hello_free(jr_hello *h);    /* NULL is a no-op */

/* The settings a worker runs with: the master's effective config (file and
 * command line), sent as the worker's first frame, so a worker never reads
 * jobrunner.lua. The config's backoff stays in the master (retry.c). */
typedef struct jr_settings {
    char   *scripts;            /* handler directory; owned */
    int     max_retries;        /* defaults.max_retries */
    double  timeout;            /* defaults.timeout, seconds */
    double  load_timeout;       /* seconds loading the handlers may take */
    size_t  memory_limit;       /* bytes a worker's Lua may hold; 0: none */
    size_t  max_payload;        /* bytes of a handler's push */
    size_t  max_result;         /* bytes of a handler's result (JSON) */
    int     log_level;          /* JR_LOG_* */
    int     log_json;           /* 1: JSON log lines */
    int     inflight;           /* defaults.inflight: jobs at once */
    char   *db_url;             /* the backend URL jobrunner.query reads;
                                   owned, NULL: none */
    char   *attach;             /* the config's attach; owned or NULL */
    char   *handler_role;       /* the config's handler_role; owned or NULL */
    int     durable_steps;      /* defaults.durable_steps: 0 or 1 */
    size_t  log_attempt_max;    /* log.attempt_max: bytes a run's logs
                                   keep; 0: none kept */
    int     log_echo;           /* log.echo: 0 or 1 */
    char   *key_file;           /* encryption.key_file; owned or NULL */
    int     tracing;            /* 1: tracing.endpoint is set: spans are
                                   made and sent (JR_F_SPANS) */
    double  trace_sample;       /* tracing.sample: 0 to 1 */
} jr_settings;

/* Encodes settings. s borrowed. */
void jr_frame_put_settings(jr_buf *b, const jr_settings *s);
/* Decodes a JR_F_SETTINGS body into out (free with jr_settings_free, also
 * after a failure). Returns 0, or -1 with err set for a malformed body: a
 * missing scripts dir, a value out of the config's range, trailing bytes. */
int  jr_frame_get_settings(jr_reader *r, jr_settings *out, jr_err *err);
void jr_settings_free(jr_settings *s);   /* NULL is a no-op */

#endif
