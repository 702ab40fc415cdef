/* test_result_frame.c - the result frame a worker sends: a retry or dead
 * result that carries no error still decodes with a message, so nothing
 * downstream (the log line, last_error) reads a missing one; a step's
 * record and the master's answer to a durable one; a wait's fields come
 * back, a bad signal name is refused. Each test is
 * a function; main runs them all and prints "N passed, N failed". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "worker/frame.h"
#include "base/sqlstmt.h"
#include "check.h"



/* Encodes res, decodes it into out; returns the decoder's status. */
static int
round_trip(const jr_result *res, jr_result *out, void **mem)
{
    jr_buf b = {0};
    jr_reader r;
    jr_err err;
    int rc;

    jr_frame_put_result(&b, res);
    CHECK(jr_frame_complete(b.p, b.len, &err) == (long)b.len);
    CHECK(jr_frame_open(&r, b.p) == JR_F_RESULT);
    rc = jr_frame_get_result(&r, out, mem, &err);
    jr_buf_free(&b);
    return rc;
}

static void
test_failure_without_error_gets_a_message(void)
{
    static const int kinds[] = {JR_RETRY, JR_DEAD};
    size_t i;

    for (i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        jr_result res = {0}, out;
        void *mem = NULL;
        res.id = 42;
        res.kind = kinds[i];
        res.delay = 3;
        CHECK(round_trip(&res, &out, &mem) == 0);
        CHECK(out.id == 42 && out.kind == kinds[i]);
        CHECK(out.error != NULL && strlen(out.error) > 0);
        free(mem);
    }
}

static void
test_error_and_success_unchanged(void)
{
    jr_result res = {0}, out;
    void *mem = NULL;

    res.id = 7;
    res.kind = JR_RETRY;
    res.error = "boom";
    CHECK(round_trip(&res, &out, &mem) == 0);
    CHECK(out.error != NULL && strcmp(out.error, "boom") == 0);
    free(mem);
    memset(&res, 0, sizeof res);
    res.id = 8;
    res.kind = JR_DONE;
    CHECK(round_trip(&res, &out, &mem) == 0);
    CHECK(out.error == NULL);
    free(mem);
}

/* A step's record: its list and durable number go and come back; one
 * without its list is malformed. And the master's answer to it. */
static void
test_step_result_and_answer(void)
{
    jr_result res = {0}, out;
    void *mem = NULL;
    jr_buf b = {0};
    jr_reader r;
    jr_err err;
    int seq = 0;

    res.id = 9;
    res.kind = JR_STEP;
    res.result = "[{\"name\":\"a\",\"value\":1}]";
    res.durable = 3;
    CHECK(round_trip(&res, &out, &mem) == 0);
    CHECK(out.kind == JR_STEP && out.durable == 3);
    CHECK(out.result != NULL && strcmp(out.result, res.result) == 0);
    free(mem);
    res.result = NULL;
    CHECK(round_trip(&res, &out, &mem) < 0);
    free(mem);
    jr_frame_put_stepok(&b, 9, 3);
    CHECK(jr_frame_find_step(b.p, b.len, JR_F_STEPOK, 9, 3) == 1);
    CHECK(jr_frame_find_step(b.p, b.len, JR_F_STEPOK, 9, 4) == 0);
    CHECK(jr_frame_find_step(b.p, b.len, JR_F_STEPOK, 9, 2) == 0);
    CHECK(jr_frame_find_step(b.p, b.len, JR_F_STEPOK, 8, 1) == 0);
    CHECK(jr_frame_find_step(b.p, b.len, JR_F_HANDBACK, 0, 0) == 0);
    CHECK(jr_frame_open(&r, b.p) == JR_F_STEPOK);
    CHECK(jr_frame_get_stepok(&r, &seq, &err) == 9 && seq == 3);
    jr_buf_free(&b);
}

/* A wait: its signal, date and sleep number come back; a bad signal name
 * (a worker's frame is input too) is a malformed frame. */
static void
test_wait(void)
{
    jr_result res = {0}, out;
    void *mem = NULL;

    res.id = 9;
    res.kind = JR_WAIT;
    res.wait_on = "approved";
    res.wake_at = 1800000000.5;
    CHECK(round_trip(&res, &out, &mem) == 0);
    CHECK(out.kind == JR_WAIT && out.wait_on != NULL &&
          strcmp(out.wait_on, "approved") == 0 &&
          out.wake_at == 1800000000.5 && out.sleep_n == 0);
    free(mem);
    mem = NULL;
    res.wait_on = NULL;
    res.sleep_n = 3;
    CHECK(round_trip(&res, &out, &mem) == 0);
    CHECK(out.wait_on == NULL && out.sleep_n == 3);
    free(mem);
    mem = NULL;
    res.wait_on = "bad name";
    CHECK(round_trip(&res, &out, &mem) < 0);
    free(mem);
}

/* A success's statements travel whole: text, every parameter type,
 * exact integers; the backend's message room comes empty. A count that
 * does not match the encoding is a malformed frame. */
static void
test_statements(void)
{
    jr_sqlval v[5] = {
        {.type = JR_SQLV_INT, .i = 9007199254740993LL},
        {.type = JR_SQLV_FLOAT, .f = 0.1},
        {.type = JR_SQLV_TEXT, .s = "é", .len = 2},
        {.type = JR_SQLV_BOOL, .i = 1},
        {.type = JR_SQLV_NULL}};
    jr_result res = {0}, out;
    jr_sqlstmt st;
    jr_buf s = {0};
    void *mem = NULL;
    size_t pos = 0;
    int i;

    jr_sql_put_text(&s, "INSERT INTO t VALUES ($1,$2,$3,$4,$5)", 37, 5);
    for (i = 0; i < 5; i++)
        jr_sql_put_param(&s, &v[i]);
    res.id = 9;
    res.kind = JR_DONE;
    res.sql = s.p;
    res.sql_len = s.len;
    res.nsql = 1;
    CHECK(round_trip(&res, &out, &mem) == 0);
    CHECK(out.nsql == 1 && out.sql_len == s.len && out.sql_error != NULL &&
          out.sql_error[0] == '\0' && out.sql_handler != NULL);
    CHECK(jr_sql_next(out.sql, out.sql_len, &pos, &st) == 1);
    CHECK(st.nparams == 5 && strcmp(st.text, "INSERT INTO t VALUES "
                                    "($1,$2,$3,$4,$5)") == 0);
    CHECK(st.params[0].type == JR_SQLV_INT &&
          st.params[0].i == 9007199254740993LL);
    CHECK(st.params[1].type == JR_SQLV_FLOAT && st.params[1].f == 0.1);
    CHECK(st.params[2].type == JR_SQLV_TEXT &&
          strcmp(st.params[2].s, "é") == 0);
    CHECK(st.params[3].type == JR_SQLV_BOOL && st.params[3].i == 1);
    CHECK(st.params[4].type == JR_SQLV_NULL);
    CHECK(jr_sql_next(out.sql, out.sql_len, &pos, &st) == 0);
    free(mem);
    res.nsql = 2;               /* says two, holds one */
    CHECK(round_trip(&res, &out, &mem) < 0);
    free(mem);
    CHECK(jr_sql_text_check("  -- c\n /* x */ commit", 22) != NULL);
    CHECK(jr_sql_text_check("SELECT 1", 8) == NULL);
    CHECK(jr_sql_text_check("a\0b", 3) != NULL);
    jr_buf_free(&s);
}

int
main(void)
{
    static const struct {
        const char *name;
        void      (*fn)(void);
    } tests[] = {
        {"failure_without_error_gets_a_message",
         test_failure_without_error_gets_a_message},
        {"error_and_success_unchanged", test_error_and_success_unchanged},
        {"step_result_and_answer", test_step_result_and_answer},
        {"wait", test_wait},
        {"statements", test_statements},
    };
    int passed = 0, nfailed = 0;
    size_t i;

    for (i = 0; i < sizeof tests / sizeof tests[0]; i++) {
        failed = 0;
        tests[i].fn();
        if (failed) {
            fprintf(stderr, "FAIL %s\n", tests[i].name);
            nfailed++;
        } else {
            passed++;
        }
    }
    printf("%d passed, %d failed\n", passed, nfailed);
    return nfailed > 0;
}
