/* fairpick.h - fair share inside a queue (docs/queues.md, "Fair share"),
 * shared by the engines: whose turn it is among the keys of a queue's
 * ready jobs, by weight (stride scheduling: each start of a key adds
 * 1/weight to its pass; the key with the lowest pass goes next; a key
 * that was idle starts from the queue's clock, so it banks no turns).
 * Pure C, no database: the engines read the keys and write the passes
 * back in the claim's transaction. Uses limit.h. */
#ifndef JR_FAIRPICK_H
#define JR_FAIRPICK_H

#include <stdint.h>

#include "base/limit.h"

/* A fair key's value is capped at its first JR_FAIR_KEY_CAP characters,
 * alike on both engines and in `fair set` (docs/queues.md, "Fair
 * share"): an index entry holds a key (PostgreSQL's btree, about 2,700
 * bytes: 512 UTF-8 characters are 2,048 bytes at most, beside a queue
 * and a name of 128). Neither engine's SQL has a hash a trigger of the
 * other's could compute, so keys alike in their first 512 characters are
 * one key. The text form is for the SQL; the two must agree. */
#define JR_FAIR_KEY_CAP  512
#define JR_FAIR_KEY_CAPS "512"

typedef struct jr_fair_key {
    double  weight;             /* > 0 */
    double  pass;               /* stored; below the clock: the clock */
    int     njobs;              /* ready jobs read for it, in claim order */
    int     next;               /* the next of them to take (order's) */
    int     priority;           /* its first job's, for ties: the one */
    double  run_at;             /* pushed first goes first */
    int64_t id;
} jr_fair_key;

/* The clock of a queue whose keys k[0..nk) have ready jobs: the lowest
 * pass among them, and never below the stored clock. */
double jr_fair_clock(const jr_fair_key *k, int nk, double clock);
/* Fills order[0..) with the key index of each of up to max starts in
 * turn (a key at most njobs times) and returns how many. k's pass and
 * next are advanced. */
int    jr_fair_order(jr_fair_key *k, int nk, double clock, int max,
                     int *order);

/* The clock after a claim that ranked every key with ready jobs: the
 * lowest pass (as jr_fair_order left it) of the keys that took all the
 * turns planned for them (planned[i]; next: the jobs they got), so still
 * have ready jobs, and never below clock; when every key ran out, the
 * highest pass one reached. A key that comes next starts level with
 * them, not behind the turns one key took alone. */
double jr_fair_after(const jr_fair_key *k, int nk, const int *planned,
                     double clock);

/* The fair limits (queue, path, weights, default) an engine's connection
 * recorded in the database (its fair_paths), hashed: each is written
 * once a connection and again when it changes (jobrunner.limits.set
 * from a hook). */
typedef struct jr_fair_seen {
    uint64_t h[16];
    int      n;
} jr_fair_seen;
/* The hash of fair limit f's queue, path, weights and default. */
uint64_t jr_fair_limit_hash(const jr_limit *f);
/* Whether h is in s. */
int      jr_fair_seen_has(const jr_fair_seen *s, uint64_t h);
/* Adds h to s; a full s starts again empty. */
void     jr_fair_seen_add(jr_fair_seen *s, uint64_t h);

/* The one limit of spec when it is a fair queue's with no cap, rate,
 * key or aging, and no queue is capped or left out: each engine then
 * claims the queue in one read, as one queue (its fairclaim.c); else
 * NULL. */
struct jr_claim_spec;
const jr_limit *jr_fair_alone(const struct jr_claim_spec *spec);

/* Top keys of a fair queue for stats and /metrics: the JR_FAIR_TOP with
 * most ready jobs, of how many keys have some, and each one's share of
 * the starts while they all have (its weight over the sum of the weights
 * of the keys with ready jobs). Fed by jr_fair_top_add (a backend's
 * fair_use callback), then jr_fair_top_done. */
#define JR_FAIR_TOP 10
typedef struct jr_fair_top {
    struct {
        char   key[260];        /* cut at 256 bytes */
        long   waiting, running;
        double weight, share;
    } top[JR_FAIR_TOP];
    int    n;                   /* in top */
    long   keys;                /* with ready jobs */
    double weights;             /* their weights' sum */
} jr_fair_top;
int  jr_fair_top_add(const char *key, long waiting, long running,
                     double weight, void *arg);
void jr_fair_top_done(jr_fair_top *t);

/* Names (a fair_name_list callback's arg): each one copied, cut at 128
 * bytes, JR_FAIR_NAMES at most. */
#define JR_FAIR_NAMES 64
typedef struct jr_fair_names {
    char name[JR_FAIR_NAMES][130];
    int  n;
} jr_fair_names;
int  jr_fair_names_add(const char *name, void *arg);

#endif
