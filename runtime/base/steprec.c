/* steprec.c - a job's steps' records read back for people: the walk over
 * the list and its JSON for show and the API. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/keyring.h"
#include "base/jsondom.h"
#include "base/steprec.h"

static double
num(const jr_jdoc *d, int o, const char *key)
{
    int v = jr_jdoc_get(d, o, key);

    return v >= 0 && d->n[v].type == JR_JSON_NUMBER ? strtod(d->n[v].at, NULL)
                                                    : 0;
}

int
jr_steprec_each(const char *text, jr_steprec_fn fn, void *arg, jr_err *err)
{
    jr_jdoc d;
    jr_steprec r;
    int o, v, nm, n = 0, stop = 0;
    char *name;

    if (jr_jdoc_parse(&d, text, strlen(text), "steps", err) < 0)
        return -1;
    if (d.n[0].type != JR_JSON_ARRAY) {
        jr_jdoc_free(&d);
        return jr_fail(err, JR_EINPUT, "steps: not a list");
    }
    for (o = d.n[0].first; o >= 0 && !stop; o = d.n[o].next) {
        if (d.n[o].type != JR_JSON_OBJECT ||
            (nm = jr_jdoc_get(&d, o, "name")) < 0 ||
            d.n[nm].type != JR_JSON_STRING)
            continue;
        r.done = (v = jr_jdoc_get(&d, o, "value")) >= 0;
        if (v < 0 && (v = jr_jdoc_get(&d, o, "cursor")) < 0)
            continue;
        if ((name = jr_jdoc_str(&d, nm)) == NULL) {
            jr_jdoc_free(&d);
            return jr_fail(err, JR_ENOMEM, "steps: out of memory");
        }
        r.name = name;
        r.value = d.n[v].at;
        r.len = d.n[v].len;
        r.at = num(&d, o, "at");
        r.secs = num(&d, o, "secs");
        r.attempt = (int)num(&d, o, "attempt");
        stop = fn(&r, arg);
        free(name);
        n++;
    }
    jr_jdoc_free(&d);
    return n;
}

int
jr_steprec_cut(const char *text, const char *name, char **out, jr_err *err)
{
    jr_jdoc d;
    int o, nm, last = -1;
    size_t n;

    *out = NULL;
    if (text == NULL)
        return jr_fail(err, JR_EINPUT, "no step '%s' recorded (the job has "
                       "no steps)", name);
    if (jr_seal_any(text, strlen(text)))
        return jr_fail(err, JR_EINPUT, "the job's steps are encrypted: "
                       "they cannot be cut at step '%s' (run it again "
                       "whole)", name);
    if (jr_jdoc_parse(&d, text, strlen(text), "steps", err) < 0)
        return -1;
    for (o = d.n[0].type == JR_JSON_ARRAY ? d.n[0].first : -1; o >= 0;
         last = o, o = d.n[o].next)
        if (d.n[o].type == JR_JSON_OBJECT &&
            (nm = jr_jdoc_get(&d, o, "name")) >= 0 &&
            jr_jdoc_is(&d, nm, name) &&
            (jr_jdoc_get(&d, o, "value") >= 0 ||     /* not a place kept */
             jr_jdoc_get(&d, o, "cursor") >= 0))     /* by a failure */
            break;
    if (o < 0) {
        jr_jdoc_free(&d);
        return jr_fail(err, JR_EINPUT, "no step '%s' recorded", name);
    }
    if (last >= 0) {
        n = (size_t)(d.n[last].at + d.n[last].len - text);
        if ((*out = malloc(n + 2)) == NULL) {
            jr_jdoc_free(&d);
            return jr_fail(err, JR_ENOMEM, "steps: out of memory");
        }
        memcpy(*out, text, n);
        memcpy(*out + n, "]", 2);
    }
    jr_jdoc_free(&d);
    return 0;
}

static int
put_json(const jr_steprec *r, void *arg)
{
    jr_buf *b = arg;
    char buf[160], iso[40];

    /* a name is a job name's characters (jrsteps.c checks): no escapes */
    snprintf(buf, sizeof buf, "%s{\"name\":\"%s\",\"state\":\"%s\",\"%s\":",
             b->p[b->len - 1] == '[' ? "" : ",", r->name,
             r->done ? "done" : "checkpoint", r->done ? "value" : "cursor");
    jr_buf_put(b, buf, strlen(buf));
    jr_buf_put(b, r->value, r->len);
    snprintf(buf, sizeof buf, ",\"at\":\"%s\",\"duration\":%.6f,"
             "\"attempt\":%d}", jr_time_iso(r->at, iso, sizeof iso),
             r->secs, r->attempt);
    jr_buf_put(b, buf, strlen(buf));
    return 0;
}

void
jr_steprec_json(jr_buf *b, const char *text)
{
    size_t at = b->len;
    jr_err err;

    if (text == NULL) {
        jr_buf_put(b, "null", 4);
        return;
    }
    jr_buf_put(b, "[", 1);
    if (jr_steprec_each(text, put_json, b, &err) < 0) {
        b->len = at;
        jr_buf_put(b, "null", 4);
        return;
    }
    jr_buf_put(b, "]", 1);
}
