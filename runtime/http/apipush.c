/* apipush.c - the body of POST /api/jobs: one job object, or an array of
 * them pushed in one transaction, read into jr_push rows (job.h) by one
 * table of fields (`fields[]`: a key, the setter of its value), checked
 * as every push is (jr_push_check) before anything is pushed; an error
 * names the job's index and the field. Owns the request's block of
 * pushes, outcomes and decoded strings (jr_apireq.mem). Uses api.h,
 * job.h, jsontext.h, util.h. */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/api.h"
#include "base/job.h"
#include "base/jsontext.h"
#include "base/ranges.h"

typedef struct jv {             /* one JSON value of the body */
    char        type;           /* 's' string, 'n' number, 'o' object,
                                   'a' array, 'b' boolean, 'z' null */
    const char *s;              /* 's': decoded, NUL-terminated */
    double      num;            /* 'n' */
    const char *raw;            /* 'o', 'a': its text, NUL-terminated */
    char      **arena;          /* the reader's, for a setter's copies */
} jv;

typedef struct rd {             /* the reader */
    const char *p, *end, *start;
    char       *arena;          /* decoded strings and copied values */
    char        why[300];
} rd;

typedef int (*field_fn)(jr_push *p, const jv *v, char *why, size_t size);

static int fail(char *why, size_t size, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int
fail(char *why, size_t size, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(why, size, fmt, ap);
    va_end(ap);
    return -1;
}

/* --- the fields: one setter each -------------------------------------- */

static int
text_of(const jv *v, const char **out, char *why, size_t size)
{
    if (v->type == 'z') {
        *out = NULL;
        return 0;
    }
    if (v->type != 's')
        return fail(why, size, "must be a string");
    *out = v->s;
    return 0;
}

static int
f_name(jr_push *p, const jv *v, char *why, size_t size)
{
    return v->type != 's' ? fail(why, size, "must be a string") :
           (p->name = v->s, 0);
}

static int
f_payload(jr_push *p, const jv *v, char *why, size_t size)
{
    if (v->type != 'o' && v->type != 'z')
        return fail(why, size, "must be an object");
    p->payload = v->type == 'o' ? v->raw : NULL;
    return 0;
}

static int
f_queue(jr_push *p, const jv *v, char *why, size_t size)
{
    return text_of(v, &p->queue, why, size);
}

static int
f_unique_key(jr_push *p, const jv *v, char *why, size_t size)
{
    return text_of(v, &p->unique_key, why, size);
}

static int
f_key(jr_push *p, const jv *v, char *why, size_t size)
{
    return text_of(v, &p->key, why, size);
}

static int
integer(const jv *v, double lo, double hi, int *out, char *why, size_t size)
{
    if (v->type != 'n' || v->num != floor(v->num) || v->num < lo ||
        v->num > hi)
        return fail(why, size, "must be a whole number from %.0f to %.0f",
                    lo, hi);
    *out = (int)v->num;
    return 0;
}

static int
f_priority(jr_push *p, const jv *v, char *why, size_t size)
{
    return integer(v, INT_MIN, INT_MAX, &p->priority, why, size);
}

static int
f_cost(jr_push *p, const jv *v, char *why, size_t size)
{
    int cost = 0;

    if (integer(v, 1, (double)JR_COST_MAX, &cost, why, size) < 0)
        return -1;
    p->cost = cost;
    return 0;
}

static int
f_max_retries(jr_push *p, const jv *v, char *why, size_t size)
{
    if (v->type == 'z')
        return p->max_retries = -1, 0;
    return integer(v, 0, INT_MAX, &p->max_retries, why, size);
}

/* Seconds: a number, or a duration string ("30s", "2h"). */
static int
seconds(const jv *v, double *out, char *why, size_t size)
{
    jr_err err;

    if (v->type == 'n')
        return *out = v->num, 0;
    if (v->type == 's' && jr_parse_duration(v->s, "it", out, &err) == 0)
        return 0;
    return fail(why, size, "must be seconds or a duration such as \"30s\"");
}

static int
f_run_in(jr_push *p, const jv *v, char *why, size_t size)
{
    return seconds(v, &p->run_in, why, size);
}

static int
f_unique_for(jr_push *p, const jv *v, char *why, size_t size)
{
    return seconds(v, &p->unique_for, why, size);
}

static int
f_result_ttl(jr_push *p, const jv *v, char *why, size_t size)
{
    return seconds(v, &p->result_ttl, why, size);
}

/* Epoch seconds, or a time string ("2026-11-22T10:00:00Z"). */
static int
f_run_at(jr_push *p, const jv *v, char *why, size_t size)
{
    jr_err err;

    if (v->type == 'n')
        return p->run_at = v->num, 0;
    if (v->type == 's' && jr_parse_time(v->s, "run_at", &p->run_at,
                                        &err) == 0)
        return 0;
    return fail(why, size, "must be epoch seconds or a time such as "
                "\"2026-11-22T10:00:00Z\"");
}

static int
f_expires_in(jr_push *p, const jv *v, char *why, size_t size)
{
    return seconds(v, &p->expires_in, why, size);
}

static int
f_expires_at(jr_push *p, const jv *v, char *why, size_t size)
{
    jr_err err;

    if (v->type == 'n')
        return p->expires_at = v->num, 0;
    if (v->type == 's' && jr_parse_time(v->s, "expires_at", &p->expires_at,
                                        &err) == 0) {
        /* 0 is "no expiry" to the library: the time 0 would be none */
        if (p->expires_at <= 0)
            return fail(why, size, "must be a time after "
                        "1970-01-01T00:00:00Z (leave it out for no expiry)");
        return 0;
    }
    return fail(why, size, "must be epoch seconds or a time such as "
                "\"2026-11-22T10:00:00Z\"");
}

static int
f_deadline(jr_push *p, const jv *v, char *why, size_t size)
{
    return seconds(v, &p->deadline, why, size);
}

static int
f_on_conflict(jr_push *p, const jv *v, char *why, size_t size)
{
    int c = v->type == 's' ? jr_conflict_parse(v->s) : -1;

    if (c >= 0)
        return p->on_conflict = c, 0;
    return fail(why, size, "must be \"keep\", \"replace\" or "
                "\"cancel_running\"");
}

/* after: an array of job ids, copied into the arena (8-byte aligned;
 * alloc_block leaves room for one id per 2 bytes of body). */
static int
f_after(jr_push *p, const jv *v, char *why, size_t size)
{
    const char *at;
    char *e;
    int64_t *ids;
    long long id;
    int n = 0;

    if (v->type != 'a')
        return fail(why, size, "must be an array of job ids");
    *v->arena += (8 - ((uintptr_t)*v->arena & 7)) & 7;
    ids = (int64_t *)(void *)*v->arena;
    for (at = v->raw + 1; *at != '\0'; at = e + 1) {
        while (*at == ' ' || *at == '\t' || *at == '\n' || *at == '\r')
            at++;
        if (*at == ']' && n == 0)
            break;
        errno = 0;
        id = strtoll(at, &e, 10);
        if (n == JR_AFTER_MAX)
            return fail(why, size, "must be an array of at most %d job ids",
                        JR_AFTER_MAX);
        if (e == at || errno != 0 || id <= 0)   /* -1, 2^63: said so */
            return fail(why, size, "%.*s is not a job id (a whole number "
                        "from 1 to 9223372036854775807)",
                        (int)strcspn(at, ",] \t\r\n"), at);
        ids[n++] = id;
        while (*e == ' ' || *e == '\t' || *e == '\n' || *e == '\r')
            e++;
        if (*e == ']')
            break;
        if (*e != ',')
            return fail(why, size, "must be an array of job ids");
    }
    *v->arena += (size_t)n * sizeof *ids;
    p->after = ids;
    p->nafter = n;
    return 0;
}

static int
f_on_parent_failure(jr_push *p, const jv *v, char *why, size_t size)
{
    if (v->type != 's' || (p->on_parent_failure = jr_opf_parse(v->s)) < 0)
        return fail(why, size, "must be \"cancel\", \"run\" or \"dead\"");
    return 0;
}

static int
f_batch(jr_push *p, const jv *v, char *why, size_t size)
{
    if (v->type != 'n' || v->num != floor(v->num) || v->num < 1 ||
        v->num > 9007199254740992.0)
        return fail(why, size, "must be a batch id");
    p->batch = (int64_t)v->num;
    return 0;
}

static int
f_sequence(jr_push *p, const jv *v, char *why, size_t size)
{
    return text_of(v, &p->sequence, why, size);
}

static int
f_on_failure(jr_push *p, const jv *v, char *why, size_t size)
{
    if (v->type != 's' || (p->seq_fail = jr_seq_fail_parse(v->s)) < 0)
        return fail(why, size, "must be \"block\", \"skip\" or \"dead\"");
    return 0;
}

/* Every key a job object may have: a new push option is one row here. */
static const struct field {
    const char *key;
    field_fn    set;
} fields[] = {
    {"name", f_name},
    {"payload", f_payload},
    {"queue", f_queue},
    {"priority", f_priority},
    {"run_at", f_run_at},
    {"delay", f_run_in},
    {"max_retries", f_max_retries},
    {"unique_key", f_unique_key},
    {"unique_for", f_unique_for},
    {"on_conflict", f_on_conflict},
    {"key", f_key},
    {"result_ttl", f_result_ttl},
    {"after", f_after},
    {"on_parent_failure", f_on_parent_failure},
    {"batch", f_batch},
    {"sequence", f_sequence},
    {"on_failure", f_on_failure},
    {"expires_in", f_expires_in},
    {"expires_at", f_expires_at},
    {"deadline", f_deadline},
    {"cost", f_cost},
    {NULL, NULL}
};

/* --- the JSON reader ------------------------------------------------- */

static int
bad(rd *r, const char *what)
{
    snprintf(r->why, sizeof r->why, "invalid JSON body at byte %d: %s",
             (int)(r->p - r->start) + 1, what);
    return -1;
}

static void
ws(rd *r)
{
    while (r->p < r->end && isspace((unsigned char)*r->p))
        r->p++;
}

static int
hex4(const char *s, unsigned *out)
{
    unsigned v = 0;
    int i;

    for (i = 0; i < 4; i++) {
        int c = (unsigned char)s[i];
        v = v * 16 + (unsigned)(isdigit(c) ? c - '0' : isxdigit(c) ?
                                (tolower(c) - 'a' + 10) : 99);
        if (!isxdigit(c))
            return -1;
    }
    *out = v;
    return 0;
}

/* Writes code point u as UTF-8 at *d. */
static void
utf8(char **d, unsigned u)
{
    char *o = *d;

    if (u < 0x80) {
        *o++ = (char)u;
    } else if (u < 0x800) {
        *o++ = (char)(0xC0 | (u >> 6));
        *o++ = (char)(0x80 | (u & 0x3F));
    } else if (u < 0x10000) {
        *o++ = (char)(0xE0 | (u >> 12));
        *o++ = (char)(0x80 | ((u >> 6) & 0x3F));
        *o++ = (char)(0x80 | (u & 0x3F));
    } else {
        *o++ = (char)(0xF0 | (u >> 18));
        *o++ = (char)(0x80 | ((u >> 12) & 0x3F));
        *o++ = (char)(0x80 | ((u >> 6) & 0x3F));
        *o++ = (char)(0x80 | (u & 0x3F));
    }
    *d = o;
}

/* One escape after '\\' at r->p into *d. */
static int
escape(rd *r, char **d)
{
    static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
    const char *k = r->p < r->end ? strchr(from, *r->p) : NULL;
    unsigned u, lo;

    if (k != NULL && *k)
        return *(*d)++ = to[k - from], r->p++, 0;
    if (r->p >= r->end || *r->p != 'u' || r->end - r->p < 5 ||
        hex4(r->p + 1, &u) < 0)
        return bad(r, "bad escape in a string");
    r->p += 5;
    if (u >= 0xD800 && u < 0xDC00 && r->end - r->p >= 6 && r->p[0] == '\\'
        && r->p[1] == 'u' && hex4(r->p + 2, &lo) == 0 && lo >= 0xDC00 &&
        lo < 0xE000) {
        u = 0x10000 + ((u - 0xD800) << 10) + (lo - 0xDC00);
        r->p += 6;
    } else if ((u >= 0xD800 && u < 0xE000) || u == 0) {
        return bad(r, "a lone surrogate or \\u0000 in a string");
    }
    utf8(d, u);
    return 0;
}

/* A string at r->p (after its '"'), decoded into the arena. */
static int
string(rd *r, const char **out)
{
    char *d = r->arena;
    size_t n;

    *out = d;
    while (r->p < r->end && *r->p != '"') {
        if ((unsigned char)*r->p < 0x20)
            return bad(r, "a control character in a string");
        if (*r->p == '\\') {
            r->p++;
            if (escape(r, &d) < 0)
                return -1;
            continue;
        }
        if ((n = jr_jsontext_utf8_len((const unsigned char *)r->p,
                                      (size_t)(r->end - r->p))) == 0)
            return bad(r, "a string that is not UTF-8");
        memcpy(d, r->p, n);
        d += n;
        r->p += n;
    }
    if (r->p++ >= r->end)
        return bad(r, "unterminated string");
    *d++ = '\0';
    r->arena = d;
    return 0;
}

/* Skips an object or array at r->p (at its '{' or '['), strings included;
 * its text goes to the arena as v->raw (checked as a payload later). */
static int
nested(rd *r, jv *v)
{
    const char *from = r->p;
    int depth = 0;

    v->type = *r->p == '{' ? 'o' : 'a';
    do {
        if (*r->p == '"') {
            for (r->p++; r->p < r->end && *r->p != '"'; r->p++)
                if (*r->p == '\\')
                    r->p++;
            if (r->p >= r->end)
                return bad(r, "unterminated string");
        } else if (*r->p == '{' || *r->p == '[') {
            if (++depth > JR_JSONTEXT_DEPTH)
                return bad(r, "nested too deep");
        } else if (*r->p == '}' || *r->p == ']') {
            depth--;
        }
        r->p++;
    } while (depth > 0 && r->p < r->end);
    if (depth > 0)
        return bad(r, "unterminated object or array");
    memcpy(r->arena, from, (size_t)(r->p - from));
    v->raw = r->arena;
    r->arena += r->p - from;
    *r->arena++ = '\0';
    return 0;
}

static int
word(rd *r, const char *w)
{
    size_t n = strlen(w);

    if ((size_t)(r->end - r->p) < n || memcmp(r->p, w, n) != 0)
        return 0;
    r->p += n;
    return 1;
}

/* Any value at r->p into v. */
static int
value(rd *r, jv *v)
{
    char tmp[64], *e;
    size_t n = 0;

    ws(r);
    memset(v, 0, sizeof *v);
    v->arena = &r->arena;
    if (r->p >= r->end)
        return bad(r, "expected a value");
    if (*r->p == '"')
        return r->p++, v->type = 's', string(r, &v->s);
    if (*r->p == '{' || *r->p == '[')
        return nested(r, v);
    if (word(r, "true") || word(r, "false"))
        return v->type = 'b', 0;
    if (word(r, "null"))
        return v->type = 'z', 0;
    while (r->p + n < r->end && n < sizeof tmp - 1 &&
           strchr("0123456789+-.eE", r->p[n]) != NULL)
        n++;
    memcpy(tmp, r->p, n);
    tmp[n] = '\0';
    errno = 0;
    v->num = strtod(tmp, &e);
    if (n == 0 || e != tmp + n || errno != 0 || !isfinite(v->num))
        return bad(r, "expected a value");
    r->p += n;
    v->type = 'n';
    return 0;
}

static int
lit(rd *r, char c)
{
    ws(r);
    if (r->p < r->end && *r->p == c)
        return r->p++, 1;
    return 0;
}

/* The job object at r->p into p; where names it in messages. */
static int
job(rd *r, jr_push *p, const char *where)
{
    const struct field *f;
    const char *k;
    char why[200];
    jr_err err;
    int conflict = 0;
    jv v;

    memset(p, 0, sizeof *p);
    p->max_retries = -1;
    if (!lit(r, '{'))
        return bad(r, "expected a job object");
    if (lit(r, '}'))
        return snprintf(r->why, sizeof r->why, "%s: 'name' is missing",
                        where), -1;
    do {
        if (!lit(r, '"') || string(r, &k) < 0 || !lit(r, ':'))
            return r->why[0] ? -1 : bad(r, "expected \"key\": value");
        if (value(r, &v) < 0)
            return -1;
        for (f = fields; f->key && strcmp(f->key, k) != 0; f++)
            ;
        if (f->key == NULL)
            return snprintf(r->why, sizeof r->why, "%s: unknown key '%.40s' "
                            "(name, payload, queue, priority, run_at, delay, "
                            "max_retries, unique_key, unique_for, "
                            "on_conflict, key, result_ttl, after, "
                            "on_parent_failure, batch, sequence, "
                            "on_failure, expires_in, expires_at, "
                            "deadline)", where, k), -1;
        if (f->set(p, &v, why, sizeof why) < 0)
            return snprintf(r->why, sizeof r->why, "%s.%s: %s", where, k,
                            why), -1;
        conflict |= f->set == f_on_conflict;
    } while (lit(r, ','));
    if (!lit(r, '}'))
        return bad(r, "expected ',' or '}'");
    if (p->name == NULL)
        return snprintf(r->why, sizeof r->why, "%s: 'name' is missing",
                        where), -1;
    if (conflict && p->unique_key == NULL && p->sequence == NULL) {
        /* keep too, as the CLI */
        int one = strcmp(where, "job") == 0;  /* as jr_apipush_parse says */
        jr_conflict_alone(p->name, &err);
        return snprintf(r->why, sizeof r->why, "%s%s%.250s", one ? "" :
                        where, one ? "" : ": ", err.msg), -1;
    }
    return 0;
}

/* The block of q->mem: pushes, their outcomes, the arena. */
static int
alloc_block(jr_apireq *q, size_t len, size_t nmax, rd *r)
{
    size_t head = nmax * (sizeof(jr_push) + sizeof(int));

    /* strings and copied values: twice the body; after's ids: 8 bytes
     * for each 2 of body at most, 4 times */
    if ((q->mem = malloc(head + len * 6 + 16 + 8 * nmax)) == NULL)
        return -1;
    q->pushes = q->mem;
    q->outcomes = (int *)(q->pushes + nmax);
    r->arena = (char *)q->mem + head;
    return 0;
}

int
jr_apipush_parse(const char *body, size_t len, size_t max_payload,
                 jr_apireq *q, char *why, size_t size)
{
    rd r = {body, body + len, body, NULL, ""};
    char where[32];
    jr_err err;
    int many, i;

    if (alloc_block(q, len, JR_API_IDS_MAX, &r) < 0)
        return fail(why, size, "out of memory");
    ws(&r);
    if ((many = lit(&r, '[')) && lit(&r, ']'))
        return fail(why, size, "the array has no job");
    do {
        if (q->npushes == JR_API_IDS_MAX)
            return fail(why, size, "more than %d jobs in one push",
                        JR_API_IDS_MAX);
        snprintf(where, sizeof where, many ? "jobs[%d]" : "job",
                 q->npushes);
        if (job(&r, &q->pushes[q->npushes], where) < 0)
            return fail(why, size, "%s", r.why);
        q->npushes++;
    } while (many && lit(&r, ','));
    if (many && !lit(&r, ']'))
        return bad(&r, "expected ',' or ']'"), fail(why, size, "%s", r.why);
    ws(&r);
    if (r.p != r.end)
        return bad(&r, "unexpected text after the jobs"),
               fail(why, size, "%s", r.why);
    for (i = 0; i < q->npushes; i++) {
        q->pushes[i].outcome = &q->outcomes[i];
        if (jr_push_check(&q->pushes[i], max_payload, &err) < 0)
            return many ? fail(why, size, "jobs[%d]: %s", i, err.msg) :
                          fail(why, size, "%s", err.msg);
    }
    q->many = many;
    return 0;
}
