/* test_keyring.c - the envelope of an encrypted value (keyring.c): a round
 * trip, the length shown only to 32 bytes, a value tampered with or its
 * key id changed fails, an unknown key id and another key of the same id
 * fail naming the id, envelopes inside a larger text (as PostgreSQL's
 * jsonb writes them back, with spaces) open in place; the key file:
 * created 0600, a new key on top, refused when open to others, a
 * malformed line named by file:line, never a key's text in a message;
 * an envelope attacked in the database (each bit flipped, cut at each
 * length, another version, another key's id, garbage) never opens; the
 * stored form (a stub and the bytes) joins back to the same envelope,
 * and only an envelope as seal writes it splits.
 * Prints "N passed, N failed". */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/keyfile.h"
#include "base/keyring.h"
#include "check.h"

static char dir[] = "/tmp/test_keyring.XXXXXX";
static char path1[256], path2[256];

static int
seal(jr_keyring *k, const char *s, jr_buf *b)
{
    jr_err err = {0};

    jr_buf_reset(b);
    CHECK_OK(jr_keyring_seal(k, s, strlen(s), b, &err), err);
    jr_buf_put(b, "", 1);
    b->len--;
    return 0;
}

static int
check_round_trip(void)
{
    jr_err err = {0};
    jr_keyring *k = jr_keyring_load(path1, &err);
    jr_buf b = {0};
    const char *plain = "{\"card\":\"4111-1111-1111-1111\",\"n\":1}";
    char *out, id[JR_KEYID_MAX + 1];
    size_t outn, len1;

    CHECK(k != NULL);
    if (k == NULL)
        return -1;
    seal(k, plain, &b);
    CHECK(strstr(b.p, "4111") == NULL);
    CHECK(strncmp(b.p, "{\"$jr_enc\":\"v1:", 15) == 0);
    CHECK(jr_seal_id(b.p, b.len, id) == 1);
    CHECK(strcmp(id, jr_keyring_first(k)) == 0);
    CHECK(jr_keyring_open(k, b.p, b.len, &out, &outn, &err) == 1);
    CHECK(out != NULL && outn == strlen(plain) && strcmp(out, plain) == 0);
    free(out);
    /* a fresh nonce each: the same value seals to another text */
    {
        char *first = strdup(b.p);

        seal(k, plain, &b);
        CHECK(strcmp(first, b.p) != 0);
        free(first);
    }
    /* lengths within one 32-byte block seal to one length */
    seal(k, "\"a\"", &b);
    len1 = b.len;
    seal(k, "\"aaaaaaaaaaaaaaaaaaaaaaaaaa\"", &b);
    CHECK(b.len == len1);
    seal(k, "\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"", &b);
    CHECK(b.len > len1);
    /* a text with none is left alone */
    CHECK(jr_keyring_open(k, plain, strlen(plain), &out, &outn, &err) == 0);
    CHECK(out == NULL);
    jr_buf_free(&b);
    jr_keyring_free(k);
    return 0;
}

static int
check_tamper(void)
{
    jr_err err = {0};
    jr_keyring *k = jr_keyring_load(path1, &err);
    jr_buf b = {0};
    char *out = NULL, *p;
    size_t outn;

    if (k == NULL)
        return -1;
    seal(k, "{\"secret\":42}", &b);
    /* flip one bit of the ciphertext (a base64 character in the middle) */
    p = b.p + b.len / 2;
    *p = *p == 'A' ? 'B' : 'A';
    CHECK(jr_keyring_open(k, b.p, b.len, &out, &outn, &err) == -1);
    CHECK(out == NULL);
    CHECK(strstr(err.msg, jr_keyring_first(k)) != NULL);
    CHECK(strstr(err.msg, "tampered") != NULL);
    /* the key id changed to another key's: the associated data differs */
    seal(k, "{\"secret\":42}", &b);
    jr_keyring_free(k);
    jr_buf_free(&b);
    return 0;
}

static int
check_wrong_key(void)
{
    jr_err err = {0};
    jr_keyring *k1 = jr_keyring_load(path1, &err), *k2;
    jr_buf b = {0}, w = {0};
    char *out = NULL, id[JR_KEYID_MAX + 1], *nl;
    size_t outn;
    FILE *f;

    if (k1 == NULL)
        return -1;
    seal(k1, "{\"secret\":42}", &b);
    /* a key of its own: the id is unknown to it */
    CHECK_OK(jr_keyring_new_key(path2, id, &err), err);
    k2 = jr_keyring_load(path2, &err);
    CHECK(k2 != NULL);
    if (k2 == NULL)
        return -1;
    CHECK(jr_keyring_open(k2, b.p, b.len, &out, &outn, &err) == -1);
    CHECK(strstr(err.msg, jr_keyring_first(k1)) != NULL);
    CHECK(strstr(err.msg, "not in the key file") != NULL);
    jr_keyring_free(k2);
    /* another key under the same id: it does not open */
    f = fopen(path2, "w");
    fprintf(f, "%s QUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUE=\n",
            jr_keyring_first(k1));
    fclose(f);
    k2 = jr_keyring_load(path2, &err);
    CHECK(k2 != NULL);
    if (k2 != NULL) {
        CHECK(jr_keyring_open(k2, b.p, b.len, &out, &outn, &err) == -1);
        CHECK(strstr(err.msg, "does not open") != NULL);
        CHECK(strstr(err.msg, "QUFB") == NULL);
    }
    jr_keyring_free(k2);
    /* nested, as jsonb writes it: {"$jr_enc": "..."} inside an object */
    nl = strchr(b.p, ':');
    jr_buf_put(&w, "{\"r\": {\"a\": ", 12);
    jr_buf_put(&w, "{\"$jr_enc\": ", 12);
    jr_buf_put(&w, nl + 1, strlen(nl + 1));
    jr_buf_put(&w, ", \"b\": 2}}", 10);
    CHECK(jr_keyring_open(k1, w.p, w.len, &out, &outn, &err) == 1);
    CHECK(out != NULL && strcmp(out, "{\"r\": {\"a\": {\"secret\":42}, "
                                "\"b\": 2}}") == 0);
    free(out);
    jr_buf_free(&w);
    jr_buf_free(&b);
    jr_keyring_free(k1);
    return 0;
}

static int
check_key_file(void)
{
    jr_err err = {0};
    char id1[JR_KEYID_MAX + 1], id2[JR_KEYID_MAX + 1], bad[300];
    struct stat st;
    jr_keyring *k;
    FILE *f;
    mode_t old = umask(0);

    /* created 0600 whatever the umask; a second key on top */
    unlink(path1);
    CHECK_OK(jr_keyring_new_key(path1, id1, &err), err);
    umask(old);
    CHECK(stat(path1, &st) == 0 && (st.st_mode & 0777) == 0600);
    CHECK_OK(jr_keyring_new_key(path1, id2, &err), err);
    CHECK(strcmp(id1, id2) != 0);
    k = jr_keyring_load(path1, &err);
    CHECK(k != NULL && strcmp(jr_keyring_first(k), id2) == 0);
    CHECK(k != NULL && jr_keyring_has(k, id1));
    jr_keyring_free(k);
    /* open to others: refused, naming the file and its mode */
    chmod(path1, 0644);
    CHECK(jr_keyring_load(path1, &err) == NULL);
    CHECK(strstr(err.msg, path1) != NULL && strstr(err.msg, "0644"));
    chmod(path1, 0600);
    /* a malformed line, by file:line, without the key's text */
    snprintf(bad, sizeof bad, "%s/bad", dir);
    f = fopen(bad, "w");
    fprintf(f, "# keys\nk1 QUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUE=\n"
               "k2 c2VjcmV0LXNob3J0\n");
    fclose(f);
    chmod(bad, 0600);
    CHECK(jr_keyring_load(bad, &err) == NULL);
    {
        char want[320];

        snprintf(want, sizeof want, "%s:3:", bad);
        CHECK(strstr(err.msg, want) != NULL);
        CHECK(strstr(err.msg, "c2VjcmV0") == NULL);
    }
    /* missing */
    snprintf(bad, sizeof bad, "%s/none", dir);
    CHECK(jr_keyring_load(bad, &err) == NULL);
    CHECK(strstr(err.msg, bad) != NULL);
    return 0;
}

/* The body of the envelope in b (after "v1:ID:") as raw bytes in raw:
 * their count. */
static long
body_raw(const jr_buf *b, unsigned char *raw, const char **b64, size_t *n)
{
    const char *p = strchr(b->p + 15, ':') + 1;
    const char *e = strrchr(b->p, '"');

    *b64 = p;
    *n = (size_t)(e - p);
    return jr_keyfile_b64_dec(p, *n, raw);
}

/* The envelope attacked in the database: every bit of the nonce, the
 * ciphertext and the tag flipped one at a time, the body cut at every
 * length, the version changed, the key id swapped for another key's of
 * the file (the associated data), garbage and an empty body: none opens,
 * none crashes, the message never has the value's text. */
static int
check_attacks(void)
{
    jr_err err = {0};
    jr_keyring *k;
    jr_buf b = {0}, t = {0};
    unsigned char raw[256];
    char b64[400], *out = NULL, id[JR_KEYID_MAX + 1], other[JR_KEYID_MAX + 1];
    const char *body;
    size_t bn, outn;
    long rn;

    CHECK_OK(jr_keyring_new_key(path1, other, &err), err);
    CHECK_OK(jr_keyring_new_key(path1, id, &err), err);
    k = jr_keyring_load(path1, &err);
    CHECK(k != NULL);
    if (k == NULL)
        return -1;
    seal(k, "{\"secret\":\"tiger\"}", &b);
    rn = body_raw(&b, raw, &body, &bn);
    CHECK(rn == 12 + 32 + 16);
    for (long i = 0; i < rn * 8; i++) {
        raw[i / 8] ^= (unsigned char)(1u << (i % 8));
        jr_buf_reset(&t);
        jr_buf_put(&t, b.p, (size_t)(body - b.p));
        jr_buf_put(&t, b64, jr_keyfile_b64_enc(raw, (size_t)rn, b64));
        jr_buf_put(&t, "\"}", 3);
        raw[i / 8] ^= (unsigned char)(1u << (i % 8));
        if (jr_keyring_open(k, t.p, t.len - 1, &out, &outn, &err) != -1 ||
            strstr(err.msg, "tiger") != NULL) {
            fprintf(stderr, "bit %ld of the body opened\n", i);
            CHECK(0);
            free(out);
            break;
        }
    }
    for (size_t cut = 0; cut < bn; cut++) {
        jr_buf_reset(&t);
        jr_buf_put(&t, b.p, (size_t)(body - b.p) + cut);
        jr_buf_put(&t, "\"}", 3);
        CHECK(jr_keyring_open(k, t.p, t.len - 1, &out, &outn, &err) == -1);
    }
    /* v2, garbage, an empty id or body, the id of the file's other key */
    {
        char bad[6][600];

        snprintf(bad[0], sizeof bad[0], "{\"$jr_enc\":\"v2:%s:%.*s\"}", id,
                 (int)bn, body);
        snprintf(bad[1], sizeof bad[1], "{\"$jr_enc\":\"v1:%s:%.*s\"}", other,
                 (int)bn, body);
        snprintf(bad[2], sizeof bad[2], "{\"$jr_enc\":\"v1:%s:\"}", id);
        snprintf(bad[3], sizeof bad[3], "{\"$jr_enc\":\"v1::%.*s\"}", (int)bn,
                 body);
        snprintf(bad[4], sizeof bad[4], "{\"$jr_enc\":\"v1:%s:%s\"}", id,
                 "!!!!@@@@====AAAA");
        snprintf(bad[5], sizeof bad[5], "{\"$jr_enc\":\"v1:%s:%.*s==\"}", id,
                 (int)bn, body);
        for (int i = 0; i < 6; i++) {
            CHECK(jr_keyring_open(k, bad[i], strlen(bad[i]), &out, &outn,
                                  &err) == -1);
            CHECK(strstr(err.msg, "tiger") == NULL);
        }
    }
    jr_buf_free(&t);
    jr_buf_free(&b);
    jr_keyring_free(k);
    return 0;
}

/* An envelope split into its stub and bytes joins back to the same text;
 * any other text does not split; the stub alone does not open. */
static int
check_split(void)
{
    jr_err err = {0};
    jr_keyring *k = jr_keyring_load(path1, &err);
    jr_buf b = {0}, raw = {0}, back = {0};
    char stub[JR_SEAL_STUB_MAX], *out, *t;
    size_t outn;
    const char *not_one[] = {
        "{}", "{\"$jr_enc\":\"v1:k:AAAA\"}", "{\"$jr_enc\": \"v1:k:AAAA\"}",
        "{\"$jr_enc\":\"v2:k:AAAA\"}", "{\"$jr_enc\":\"v1:k:sealed\"}",
        "{\"$jr_enc\":\"v1::AAAA\"}", NULL};
    int i;

    CHECK(k != NULL);
    if (k == NULL)
        return -1;
    seal(k, "{\"card\":\"4111\"}", &b);
    CHECK(jr_seal_split(b.p, b.len, stub, &raw) == 1);
    CHECK(raw.len == 12 + 32 + 16);
    CHECK(jr_seal_is_stub(stub, strlen(stub)));
    CHECK(strstr(stub, ":sealed\"}") != NULL);
    CHECK(jr_seal_join(stub, strlen(stub), raw.p, raw.len, &back) == 0);
    CHECK(back.len == b.len && memcmp(back.p, b.p, b.len) == 0);
    CHECK(jr_keyring_open(k, stub, strlen(stub), &out, &outn, &err) < 0);
    CHECK(jr_seal_join("{}", 2, raw.p, raw.len, &back) < 0);
    for (i = 0; not_one[i] != NULL; i++)
        CHECK(jr_seal_split(not_one[i], strlen(not_one[i]), stub, &raw)
              == 0);
    t = malloc(b.len + 2);              /* a space inside: kept as text */
    CHECK(t != NULL);
    if (t != NULL) {
        memcpy(t, b.p, 11);
        t[11] = ' ';
        memcpy(t + 12, b.p + 11, b.len - 11);
        CHECK(jr_seal_split(t, b.len + 1, stub, &raw) == 0);
        free(t);
    }
    jr_buf_free(&b);
    jr_buf_free(&raw);
    jr_buf_free(&back);
    jr_keyring_free(k);
    return 0;
}

int
main(void)
{
    jr_err err = {0};
    char id[JR_KEYID_MAX + 1];
    int rc;

    if (mkdtemp(dir) == NULL)
        return 1;
    snprintf(path1, sizeof path1, "%s/keys", dir);
    snprintf(path2, sizeof path2, "%s/other", dir);
    if (jr_keyring_new_key(path1, id, &err) < 0) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    check_report("key file", check_key_file());
    check_report("round trip", check_round_trip());
    check_report("tamper", check_tamper());
    check_report("wrong key", check_wrong_key());
    check_report("attacks", check_attacks());
    check_report("stored as bytes", check_split());
    rc = check_report(NULL, 0);

    {
        char cmd[300];

        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
        if (system(cmd) != 0)
            return 1;
    }
    return rc;
}
