/* keyring.c - the keys of a key file (read by keyfile.c) and the
 * envelope: AES-256-GCM through OpenSSL's EVP interface. See keyring.h. */
#define _GNU_SOURCE             /* memmem */
#include "base/keyring.h"
#include "base/keyfile.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#define KEY_BYTES   JR_KEY_BYTES
#define NONCE_BYTES 12
#define TAG_BYTES   16
#define PAD_BLOCK   32          /* the plaintext's length shows to this */

typedef jr_keyfile_key key;

struct jr_keyring {
    EVP_CIPHER *gcm;            /* fetched once: an implicit fetch a value
                                   cost more than the cipher */
    char  *path;
    key   *v;
    int    n;
    jr_keyfile_stamp stamp;     /* the file as read */
};

static int
load_into(jr_keyring *k, jr_err *err)
{
    key *v;
    int n;

    if (jr_keyfile_read(k->path, &v, &n, &k->stamp, err) < 0)
        return -1;
    jr_keyfile_clear(k->v, k->n);
    k->v = v;
    k->n = n;
    return 0;
}

jr_keyring *
jr_keyring_load(const char *path, jr_err *err)
{
    jr_keyring *k = calloc(1, sizeof *k);

    if (k == NULL || (k->path = strdup(path)) == NULL) {
        free(k);
        jr_fail(err, JR_ENOMEM, "out of memory");
        return NULL;
    }
    if ((k->gcm = EVP_CIPHER_fetch(NULL, "AES-256-GCM", NULL)) == NULL) {
        jr_keyring_free(k);
        jr_fail(err, JR_ESYS, "libcrypto has no AES-256-GCM");
        return NULL;
    }
    if (load_into(k, err) < 0) {
        jr_keyring_free(k);
        return NULL;
    }
    return k;
}

void
jr_keyring_free(jr_keyring *k)
{
    if (k == NULL)
        return;
    jr_keyfile_clear(k->v, k->n);
    EVP_CIPHER_free(k->gcm);
    free(k->path);
    free(k);
}

int
jr_keyring_reload(jr_keyring *k, jr_err *err)
{
    if (!jr_keyfile_changed(k->path, &k->stamp))
        return 0;
    return load_into(k, err) < 0 ? -1 : 1;
}

const char *
jr_keyring_path(const jr_keyring *k)
{
    return k->path;
}

const char *
jr_keyring_first(const jr_keyring *k)
{
    return k->v[0].id;
}

static const key *
find(const jr_keyring *k, const char *id, size_t idn)
{
    for (int i = 0; i < k->n; i++)
        if (strlen(k->v[i].id) == idn && memcmp(k->v[i].id, id, idn) == 0)
            return &k->v[i];
    return NULL;
}

int
jr_keyring_has(const jr_keyring *k, const char *id)
{
    return find(k, id, strlen(id)) != NULL;
}

/* The associated data of an envelope: its version and key id. */
static int
aad(char *buf, size_t size, const char *id, size_t idn)
{
    return snprintf(buf, size, "jobrunner v1 %.*s", (int)idn, id);
}

int
jr_keyring_seal(const jr_keyring *k, const char *plain, size_t n,
                jr_buf *out, jr_err *err)
{
    const key *ky = &k->v[0];
    size_t padded = (n / PAD_BLOCK + 1) * PAD_BLOCK;
    size_t raw_n = NONCE_BYTES + padded + TAG_BYTES;
    unsigned char *raw = malloc(raw_n), *pt = malloc(padded);
    char *b64 = malloc(4 * ((raw_n + 2) / 3) + 1), ad[64];
    EVP_CIPHER_CTX *c = EVP_CIPHER_CTX_new();
    int len, adn, ok = 0;
    size_t bn;

    if (raw == NULL || pt == NULL || b64 == NULL || c == NULL ||
        n > (1u << 30)) {
        jr_fail(err, JR_ENOMEM, "out of memory sealing a value");
        goto done;
    }
    memcpy(pt, plain, n);   /* ISO/IEC 7816-4: 0x80, then zeros */
    pt[n] = 0x80;
    memset(pt + n + 1, 0, padded - n - 1);
    adn = aad(ad, sizeof ad, ky->id, strlen(ky->id));
    if (RAND_bytes(raw, NONCE_BYTES) != 1 ||
        EVP_EncryptInit_ex(c, k->gcm, NULL, NULL, NULL) != 1 ||
        EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_SET_IVLEN, NONCE_BYTES, NULL)
            != 1 ||
        EVP_EncryptInit_ex(c, NULL, NULL, ky->k, raw) != 1 ||
        EVP_EncryptUpdate(c, NULL, &len, (unsigned char *)ad, adn) != 1 ||
        EVP_EncryptUpdate(c, raw + NONCE_BYTES, &len, pt, (int)padded)
            != 1 ||
        EVP_EncryptFinal_ex(c, raw + NONCE_BYTES + len, &len) != 1 ||
        EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_GET_TAG, TAG_BYTES,
                            raw + NONCE_BYTES + padded) != 1) {
        jr_fail(err, JR_ESYS, "AES-256-GCM encryption failed (key '%s')",
                ky->id);
        goto done;
    }
    bn = jr_keyfile_b64_enc(raw, raw_n, b64);
    jr_buf_put(out, "{\"$jr_enc\":\"v1:", 15);
    jr_buf_put(out, ky->id, strlen(ky->id));
    jr_buf_put(out, ":", 1);
    jr_buf_put(out, b64, bn);
    jr_buf_put(out, "\"}", 2);
    if (out->oom)
        jr_fail(err, JR_ENOMEM, "out of memory sealing a value");
    else
        ok = 1;
done:
    EVP_CIPHER_CTX_free(c);
    if (pt != NULL)
        OPENSSL_cleanse(pt, padded);
    free(pt);
    free(raw);
    free(b64);
    return ok ? 0 : -1;
}

int
jr_keyring_seal_pushes(const jr_keyring *k, jr_push *p, int n,
                       jr_buf *store, jr_err *err)
{
    size_t *at = malloc((size_t)(n > 0 ? n : 1) * sizeof *at);
    char id[JR_KEYID_MAX + 1];
    int i;

    if (at == NULL)
        return jr_fail(err, JR_ENOMEM, "out of memory sealing payloads");
    jr_buf_reset(store);
    for (i = 0; i < n; i++) {
        const char *pl = p[i].payload != NULL ? p[i].payload : "{}";

        at[i] = (size_t)-1;
        if (jr_seal_id(pl, strlen(pl), id)) {
            /* sealed already (a value read raw, pushed again): kept only
             * when it opens, else the job would fail at each attempt */
            char *clear = NULL;
            size_t cn = 0;

            if (jr_keyring_open(k, pl, strlen(pl), &clear, &cn, err) < 0) {
                free(at);
                if (err->code != JR_ENOMEM)
                    err->code = JR_EINPUT;
                return jr_err_prefix(err, "job '%s': its payload is an "
                                     "encrypted value ({\"$jr_enc\": ...)"
                                     " that does not open", p[i].name);
            }
            if (clear != NULL)
                OPENSSL_cleanse(clear, cn);
            free(clear);
            continue;
        }
        at[i] = store->len;
        if (jr_keyring_seal(k, pl, strlen(pl), store, err) < 0 ||
            jr_buf_put(store, "", 1) < 0) {
            free(at);
            return jr_err_prefix(err, "job '%s': its payload cannot be "
                                 "encrypted", p[i].name);
        }
    }
    for (i = 0; i < n; i++)
        if (at[i] != (size_t)-1)
            p[i].payload = store->p + at[i];
    free(at);
    return 0;
}

static const char *
skip_ws(const char *p, const char *end)
{
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
        p++;
    return p;
}

/* An envelope around the mark at m in [s, end): its span [*from, *to)
 * and its body "v1:ID:B64" [*b, *be). 1, or 0 when it is not one. */
static int
envelope_at(const char *s, const char *end, const char *m,
            const char **from, const char **to, const char **b,
            const char **be)
{
    const char *p = m, *q;

    while (p > s && (p[-1] == ' ' || p[-1] == '\t' || p[-1] == '\n' ||
                     p[-1] == '\r'))
        p--;
    if (p == s || p[-1] != '{')
        return 0;
    *from = p - 1;
    q = skip_ws(m + sizeof JR_SEAL_MARK - 1, end);
    if (q >= end || *q != ':')
        return 0;
    q = skip_ws(q + 1, end);
    if (q >= end || *q != '"')
        return 0;
    *b = ++q;
    if ((q = memchr(q, '"', (size_t)(end - q))) == NULL)
        return 0;
    *be = q;
    q = skip_ws(q + 1, end);
    if (q >= end || *q != '}')
        return 0;
    *to = q + 1;
    return 1;
}

/* Opens the body "v1:ID:B64" [b, be) into out (appended). */
static int
open_body(const jr_keyring *k, const char *b, const char *be, jr_buf *out,
          jr_err *err)
{
    const char *id, *ide, *p;
    const key *ky;
    unsigned char *raw = NULL, *pt = NULL;
    EVP_CIPHER_CTX *c = NULL;
    long raw_n;
    int len, adn, ok = 0;
    size_t ptn;
    char ad[64];

    if (be - b < 4 || memcmp(b, "v1:", 3) != 0)
        return jr_fail(err, JR_EINPUT, "an encrypted value of an unknown "
                       "version");
    id = b + 3;
    for (ide = id; ide < be && *ide != ':'; ide++)
        if (!jr_keyfile_id_char((unsigned char)*ide))
            break;
    if (ide >= be || *ide != ':' || ide == id || ide - id > JR_KEYID_MAX)
        return jr_fail(err, JR_EINPUT, "a malformed encrypted value");
    if ((ky = find(k, id, (size_t)(ide - id))) == NULL)
        return jr_fail(err, JR_ENOTFOUND, "encrypted with key '%.*s', "
                       "which is not in the key file '%s'",
                       (int)(ide - id), id, k->path);
    p = ide + 1;
    raw = malloc((size_t)(be - p) / 4 * 3 + 3);
    c = EVP_CIPHER_CTX_new();
    if (raw == NULL || c == NULL) {
        jr_fail(err, JR_ENOMEM, "out of memory opening a value");
        goto done;
    }
    raw_n = jr_keyfile_b64_dec(p, (size_t)(be - p), raw);
    if (raw_n < NONCE_BYTES + PAD_BLOCK + TAG_BYTES ||
        (raw_n - NONCE_BYTES - TAG_BYTES) % PAD_BLOCK != 0) {
        jr_fail(err, JR_EINPUT, "a malformed encrypted value (key '%s')",
                ky->id);
        goto done;
    }
    ptn = (size_t)raw_n - NONCE_BYTES - TAG_BYTES;
    if ((pt = malloc(ptn)) == NULL) {
        jr_fail(err, JR_ENOMEM, "out of memory opening a value");
        goto done;
    }
    adn = aad(ad, sizeof ad, ky->id, strlen(ky->id));
    if (EVP_DecryptInit_ex(c, k->gcm, NULL, NULL, NULL) != 1 ||
        EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_SET_IVLEN, NONCE_BYTES, NULL)
            != 1 ||
        EVP_DecryptInit_ex(c, NULL, NULL, ky->k, raw) != 1 ||
        EVP_DecryptUpdate(c, NULL, &len, (unsigned char *)ad, adn) != 1 ||
        EVP_DecryptUpdate(c, pt, &len, raw + NONCE_BYTES, (int)ptn) != 1 ||
        EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_SET_TAG, TAG_BYTES,
                            raw + NONCE_BYTES + ptn) != 1 ||
        EVP_DecryptFinal_ex(c, pt + len, &len) != 1) {
        jr_fail(err, JR_EINPUT, "an encrypted value does not open with key "
                "'%s' (tampered with, or another key of that id)", ky->id);
        goto done;
    }
    while (ptn > 0 && pt[ptn - 1] == 0)
        ptn--;
    if (ptn == 0 || pt[ptn - 1] != 0x80) {
        jr_fail(err, JR_EINPUT, "an encrypted value of key '%s' has no "
                "padding mark", ky->id);
        goto done;
    }
    jr_buf_put(out, pt, ptn - 1);
    ok = 1;
done:
    EVP_CIPHER_CTX_free(c);
    if (pt != NULL)
        OPENSSL_cleanse(pt, ptn);
    free(pt);
    free(raw);
    return ok ? 0 : -1;
}

int
jr_keyring_open(const jr_keyring *k, const char *s, size_t n, char **out,
                size_t *outn, jr_err *err)
{
    const char *end = s + n, *p = s, *m, *from, *to, *b, *be;
    jr_buf o = {0};
    int found = 0;

    *out = NULL;
    *outn = 0;
    while ((m = memmem(p, (size_t)(end - p), JR_SEAL_MARK,
                       sizeof JR_SEAL_MARK - 1)) != NULL) {
        if (!envelope_at(s, end, m, &from, &to, &b, &be) || from < p) {
            p = m + 1;
            continue;
        }
        found = 1;
        jr_buf_put(&o, p, (size_t)(from - p));
        if (open_body(k, b, be, &o, err) < 0) {
            if (o.p != NULL)
                OPENSSL_cleanse(o.p, o.len);
            jr_buf_free(&o);
            return -1;
        }
        p = to;
    }
    if (!found)
        return 0;
    jr_buf_put(&o, p, (size_t)(end - p));
    jr_buf_put(&o, "", 1);
    if (o.oom) {
        jr_buf_free(&o);
        return jr_fail(err, JR_ENOMEM, "out of memory opening a value");
    }
    *out = o.p;
    *outn = o.len - 1;
    return 1;
}

int
jr_keyring_reseal(const jr_keyring *k, const char *s, size_t n,
                  int also_plain, char **out, jr_err *err)
{
    const char *end = s + n, *p = s, *m, *from, *to, *b, *be;
    const char *first = k->v[0].id;
    size_t fn = strlen(first);
    jr_buf o = {0}, plain = {0};
    int changed = 0, found = 0;

    *out = NULL;
    while ((m = memmem(p, (size_t)(end - p), JR_SEAL_MARK,
                       sizeof JR_SEAL_MARK - 1)) != NULL) {
        if (!envelope_at(s, end, m, &from, &to, &b, &be) || from < p) {
            p = m + 1;
            continue;
        }
        found = 1;
        jr_buf_put(&o, p, (size_t)(from - p));
        if ((size_t)(be - b) > 4 + fn && memcmp(b + 3, first, fn) == 0 &&
            b[3 + fn] == ':') {
            jr_buf_put(&o, from, (size_t)(to - from));
        } else {
            jr_buf_reset(&plain);
            if (open_body(k, b, be, &plain, err) < 0 ||
                jr_keyring_seal(k, plain.p ? plain.p : "", plain.len, &o,
                                err) < 0)
                goto fail;
            changed = 1;
        }
        p = to;
    }
    if (!found && also_plain) {
        if (jr_keyring_seal(k, s, n, &o, err) < 0)
            goto fail;
        changed = 1;
        p = end;
    }
    if (!changed) {
        jr_buf_free(&o);
        jr_buf_free(&plain);
        return 0;
    }
    jr_buf_put(&o, p, (size_t)(end - p));
    jr_buf_put(&o, "", 1);
    if (plain.p != NULL)
        OPENSSL_cleanse(plain.p, plain.len);
    jr_buf_free(&plain);
    if (o.oom) {
        jr_buf_free(&o);
        return jr_fail(err, JR_ENOMEM, "out of memory sealing a value");
    }
    *out = o.p;
    return 1;
fail:
    if (plain.p != NULL)
        OPENSSL_cleanse(plain.p, plain.len);
    jr_buf_free(&plain);
    jr_buf_free(&o);
    return -1;
}

int
jr_seal_ids(const char *s, size_t n,
            void (*cb)(const char *id, void *arg), void *arg)
{
    const char *end = s + n, *p = s, *m, *from, *to, *b, *be, *ide;
    char id[JR_KEYID_MAX + 1];
    int found = 0;

    while ((m = memmem(p, (size_t)(end - p), JR_SEAL_MARK,
                       sizeof JR_SEAL_MARK - 1)) != NULL) {
        if (!envelope_at(s, end, m, &from, &to, &b, &be) || from < p) {
            p = m + 1;
            continue;
        }
        p = to;
        if (be - b < 4 || memcmp(b, "v1:", 3) != 0)
            continue;
        for (ide = b + 3; ide < be && *ide != ':'; ide++)
            ;
        if (ide >= be || ide == b + 3 || ide - (b + 3) > JR_KEYID_MAX)
            continue;
        memcpy(id, b + 3, (size_t)(ide - (b + 3)));
        id[ide - (b + 3)] = '\0';
        cb(id, arg);
        found++;
    }
    return found;
}

int
jr_seal_id(const char *s, size_t n, char *id)
{
    const char *end = s + n, *m, *from, *to, *b, *be, *ide;

    m = memmem(s, n, JR_SEAL_MARK, sizeof JR_SEAL_MARK - 1);
    if (m == NULL || !envelope_at(s, end, m, &from, &to, &b, &be) ||
        skip_ws(s, end) != from || skip_ws(to, end) != end ||
        be - b < 4 || memcmp(b, "v1:", 3) != 0)
        return 0;
    for (ide = b + 3; ide < be && *ide != ':'; ide++)
        ;
    if (ide >= be || ide - (b + 3) > JR_KEYID_MAX || ide == b + 3)
        return 0;
    memcpy(id, b + 3, (size_t)(ide - (b + 3)));
    id[ide - (b + 3)] = '\0';
    return 1;
}

size_t
jr_seal_size(size_t max, const char *s)
{
    char id[JR_KEYID_MAX + 1];
    size_t raw;

    if (max > (1u << 30) || !jr_seal_id(s, strlen(s), id))
        return max;
    raw = NONCE_BYTES + (max / PAD_BLOCK + 1) * PAD_BLOCK + TAG_BYTES;
    return 15 + JR_KEYID_MAX + 1 + 4 * ((raw + 2) / 3) + 2;
}

int
jr_seal_any(const char *s, size_t n)
{
    return s != NULL &&
           memmem(s, n, JR_SEAL_MARK, sizeof JR_SEAL_MARK - 1) != NULL;
}


/* The stub's text after the key id, and the envelope's before it. */
#define STUB_TAIL ":sealed\"}"
#define SEAL_HEAD "{\"$jr_enc\":\"v1:"

/* Room for n more bytes in b: 0, or -1 out of memory (b->oom set). */
static int
room(jr_buf *b, size_t n)
{
    size_t cap = b->cap ? b->cap : 256;
    char *p;

    if (b->oom)
        return -1;
    if (b->len + n <= b->cap)
        return 0;
    while (cap < b->len + n)
        cap *= 2;
    if ((p = realloc(b->p, cap)) == NULL) {
        b->oom = 1;
        return -1;
    }
    b->p = p;
    b->cap = cap;
    return 0;
}

int
jr_seal_split(const char *s, size_t n, char *stub, jr_buf *raw)
{
    size_t hn = sizeof SEAL_HEAD - 1;
    const char *id = s + hn, *ide, *b, *be;
    long got;

    if (n < hn + 4 || memcmp(s, SEAL_HEAD, hn) != 0 ||
        memcmp(s + n - 2, "\"}", 2) != 0)
        return 0;
    be = s + n - 2;
    for (ide = id; ide < be && jr_keyfile_id_char((unsigned char)*ide);
         ide++)
        ;
    if (ide == id || ide >= be || *ide != ':' || ide - id > JR_KEYID_MAX)
        return 0;
    for (b = ide + 1; b < be; b++)
        if (!((*b >= 'A' && *b <= 'Z') || (*b >= 'a' && *b <= 'z') ||
              (*b >= '0' && *b <= '9') || *b == '+' || *b == '/' ||
              *b == '='))
            return 0;
    b = ide + 1;
    jr_buf_reset(raw);
    if (room(raw, (size_t)(be - b) / 4 * 3 + 3) < 0)
        return -1;
    got = jr_keyfile_b64_dec(b, (size_t)(be - b), (unsigned char *)raw->p);
    if (got < NONCE_BYTES + PAD_BLOCK + TAG_BYTES ||
        (got - NONCE_BYTES - TAG_BYTES) % PAD_BLOCK != 0 ||
        4 * (((size_t)got + 2) / 3) != (size_t)(be - b))
        return 0;
    raw->len = (size_t)got;
    snprintf(stub, JR_SEAL_STUB_MAX, "%.*s" STUB_TAIL, (int)(ide - s), s);
    return 1;
}

int
jr_seal_is_stub(const char *s, size_t n)
{
    size_t hn = sizeof SEAL_HEAD - 1, tn = sizeof STUB_TAIL - 1;

    return n > hn + tn && n <= JR_SEAL_STUB_MAX &&
           memcmp(s, SEAL_HEAD, hn) == 0 &&
           memcmp(s + n - tn, STUB_TAIL, tn) == 0;
}

int
jr_seal_join(const char *s, size_t n, const void *raw, size_t rawn,
             jr_buf *out)
{
    size_t at = out->len, tn = sizeof STUB_TAIL - 1;

    if (!jr_seal_is_stub(s, n) || rawn > (1u << 30))
        return -1;
    jr_buf_put(out, s, n - tn + 1);             /* up to the id's ':' */
    if (room(out, 4 * ((rawn + 2) / 3) + 3) < 0)
        return -1;
    out->len += jr_keyfile_b64_enc(raw, rawn, out->p + out->len);
    jr_buf_put(out, "\"}", 2);
    if (out->oom) {
        out->len = at;
        return -1;
    }
    return 0;
}
