/* config.h - the runner's settings: defaults, then jobrunner.lua, then the
 * command line. Owns the config file's Lua state (hooks and backoff live
 * there). Uses script.h for the state and protected calls. Its key
 * readers (keys.c) check the hooks table with hooks.h. */
#ifndef JR_CONFIG_H
#define JR_CONFIG_H

#include <stddef.h>

#include "base/err.h"
#include "base/ranges.h"
#include "config/limitcfg.h"
#include "config/queues.h"
#include "base/retry.h"
#include "config/schedules.h"

typedef struct lua_State lua_State;

#define JR_HTTP_CONNS      256     /* http.max_connections by default */
#define JR_HTTP_CONNS_MAX  65536   /* and at most */
#define JR_HTTP_TOKEN_MIN  16      /* characters of http.token at least */
#define JR_HTTP_TOKEN_MAX  4096    /* and at most (it goes in a header) */
#define JR_VACUUM_EVERY        50000    /* vacuum_every's default */
#define JR_HTTP_TOKENS_MAX 64      /* entries of http.tokens at most */

/* What an HTTP token may do, each scope more than the one before: read
 * (every GET under /api/, and /metrics), push (read, and POST /api/jobs
 * and /api/flows to its queues only), write (everything: every action,
 * bulk action, control and delete, to any queue). http.token is a write
 * token. */
enum { JR_TOKEN_READ, JR_TOKEN_PUSH, JR_TOKEN_WRITE };

typedef struct jr_token {       /* one entry of http.tokens */
    char      *name;            /* what logs and the dashboard show */
    char      *secret;          /* from its token_file or token_env */
    int        scope;           /* JR_TOKEN_* */
    char     **queues;          /* push: the queues it may push to */
    int        nqueues;
    int        decrypt;         /* read, push: sees encrypted values
                                   decrypted (decrypt = true) */
} jr_token;

typedef struct jr_config {
    char      *file;            /* config file read, or NULL */
    char      *backend;         /* backend URL */
    char      *scripts;         /* handler directory */
    int        conc_min;        /* workers at least */
    int        conc_max;        /* workers at most */
    int        max_retries;     /* defaults.max_retries */
    double     timeout;         /* defaults.timeout, seconds */
    int        inflight;        /* defaults.inflight: jobs a worker runs
                                   at once (1: one, no coroutine) */
    int        durable_steps;   /* defaults.durable_steps: a handler's
                                   steps wait for their commit */
    double     lease;           /* seconds a claim holds without renewal */
    double     poll_interval;   /* seconds between fallback polls */
    double     shutdown_timeout;/* seconds running jobs get on SIGTERM */
    int        log_level;       /* JR_LOG_* */
    int        log_json;        /* log.format == "json" */
    int        sync_normal;     /* synchronous = "normal" */
    int        on_parent_failure; /* JR_OPF_* of pushes that give none */
    double     busy_timeout;    /* SQLite lock wait, seconds */
    char      *schema;          /* PostgreSQL schema */
    char      *handler_role;    /* PostgreSQL: jobrunner.sql's role */
    char      *attach;          /* SQLite: file attached as app */
    size_t     max_payload;     /* bytes */
    size_t     max_result;      /* bytes of a handler's result (JSON) */
    double     result_ttl;      /* seconds a succeeded job with a result
                                 * (or waited on) stays completed */
    double     tick_interval;   /* seconds between on_tick hooks */
    double     idle_timeout;    /* seconds before an idle worker retires */
    double     load_timeout;    /* seconds a new worker has to say hello */
    int        max_snoozes;     /* snoozes of one job before it fails; 0: no limit */
    char      *pid_file;        /* for `jobrunner reload`; NULL: derived */
    int        watch;           /* reload when scripts change */
    size_t     memory_limit;    /* bytes a worker's Lua may hold; 0: none */
    long       max_jobs_per_worker; /* recycle after this many; 0: never */
    long       vacuum_every;    /* PostgreSQL: vacuum jobs after this many
                                 * finished here; 0: never */
    double     keep_completed;  /* retention.completed, seconds; 0: none */
    double     keep_cancelled;  /* retention.cancelled, seconds */
    double     keep_dead;       /* retention.dead, seconds; <0: forever */
    double     keep_queues;     /* retention.queues: seconds an idle queue
                                 * keeps its row */
    double     wait_for_db;     /* seconds to retry at start; <0: forever */
    char      *handler_output;  /* "log", "inherit" or a file; NULL: "log" */
    jr_queues  queues;          /* `queues`, `serve_queues` (or --queues) */
    jr_schedules schedules;     /* `schedules` and `timezone` */
    char      *http_listen;     /* http.listen (or run --http); NULL: off */
    char      *http_token;      /* http.token; NULL: none */
    int        http_max_conns;  /* http.max_connections; 0: the default */
    jr_limits  limits;          /* `limits`: per name or queue, per key */
    lua_State *L;               /* the config's state; holds the table */
    int        ref;             /* registry ref of the returned table */
    int        owns_L;          /* L is closed by jr_config_free */
    jr_token  *http_tokens;     /* http.tokens (cfgtokens.c); NULL: none */
    int        http_ntokens;
    size_t     log_attempt_max; /* log.attempt_max: bytes of a handler's
                                   log kept a run; 0: none kept */
    int        log_echo;        /* log.echo: and to the runner's log */
    char      *key_file;        /* encryption.key_file; NULL: none */
    struct jr_keyring *keys;    /* the runner's, read at its start from
                                 * key_file (jr_config_free frees it);
                                 * NULL: none */
    /* `tracing` (docs/tracing.md): NULL endpoint: off */
    char      *trace_endpoint;  /* tracing.endpoint, "http(s)://host:port"
                                 * (spans go to its /v1/traces) */
    double     trace_sample;    /* tracing.sample, 0 to 1; 1 by default */
    char     **trace_headers;   /* tracing.headers as "Name: value", */
    int        trace_nheaders;  /* sorted by name */
    int        trace_queue;     /* tracing.queue: spans waiting for the
                                 * collector at most; 0: the default */
    int        trace_protocol;  /* tracing.protocol: JR_OTLP_* */
} jr_config;

/* cfgtrace.c: reads the `tracing` table on top of L into c. Returns 0,
 * or -1 with the key at fault ("tracing.sample") in key and what is wrong
 * in what. */
int  jr_config_tracing(lua_State *L, jr_config *c, char *key, size_t keysize,
                       char *what, size_t whatsize);
#define JR_TRACE_HEADERS_MAX 32 /* tracing.headers entries */
#define JR_TRACE_QUEUE       4096       /* tracing.queue by default */
#define JR_TRACE_QUEUE_MAX   1000000
/* tracing.protocol: OTLP/HTTP's two encodings of a request */
enum { JR_OTLP_PROTOBUF, JR_OTLP_JSON };

/* Fills c with the defaults. */
void jr_config_defaults(jr_config *c);
/* Loads file (NULL: ./jobrunner.lua if it exists, else defaults only) over
 * the defaults, in L (borrowed; NULL: a new state c owns). Errors name
 * file:line and the key. Returns 0 or -1. */
int  jr_config_load(jr_config *c, const char *file, lua_State *L,
                    jr_err *err);
/* Replaces a string setting (takes a copy). */
int  jr_config_set(char **slot, const char *value, jr_err *err);
/* The config's retry delay for job j after error: its backoff(job,
 * attempt, err) function, else defaults.backoff (seconds, or a function of
 * attempt and err). job.max_retries is max_retries, the one in force
 * (jr_retry_max), as handlers see it. Returns -1 when the config sets
 * none or it fails (logged). */
struct jr_job;
double jr_config_backoff(const jr_config *c, const struct jr_job *j,
                         int max_retries, const char *error);
/* Calls the backoff function below nargs arguments on top of L for job j,
 * expecting seconds >= 0; returns them, or -1 (logged) when it fails or
 * returns something else. [-(nargs+1), +0, -] */
double jr_config_backoff_call(lua_State *L, int nargs,
                              const struct jr_job *j);
/* cfghttp.c: reads the `http` table on top of L into c. Returns 0, or -1
 * with the key at fault ("http.token") in key and what is wrong in
 * what. [-0, +0, m] */
int  jr_config_http(lua_State *L, jr_config *c, char *key, size_t keysize,
                    char *what, size_t whatsize);
void jr_config_free(jr_config *c);   /* frees members; c itself is the
                                        caller's */
/* cfgtokens.c: frees the n tokens of t and their strings, the secrets
 * wiped first (NULL is a no-op). */
void jr_tokens_free(jr_token *t, int n);
#endif
