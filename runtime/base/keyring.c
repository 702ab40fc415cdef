/* keyring.c - the key file and the envelope: AES-256-GCM through OpenSSL's
 * EVP interface. See keyring.h. */
#define _GNU_SOURCE             /* memmem */
#include "base/keyring.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#define KEY_BYTES   32
#define NONCE_BYTES 12
#define TAG_BYTES   16
#define PAD_BLOCK   32          /* the plaintext's length shows to this */
#define FILE_MAX    (1 << 20)   /* bytes of a key file */

typedef struct key {
    char          id[JR_KEYID_MAX + 1];
    unsigned char k[KEY_BYTES];
} key;

struct jr_keyring {
    EVP_CIPHER *gcm;            /* fetched once: an implicit fetch a value
                                   cost more than the cipher */
    char  *path;
    key   *v;
    int    n;
    struct timespec mtime;
    long long size, ino;
};

static int
id_char(int c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.';
}

/* base64 (RFC 4648, padded) of n bytes into out, which holds 4 * ((n +
 * 2) / 3) + 1 bytes. Returns the length. */
static size_t
b64_enc(const unsigned char *p, size_t n, char *out)
{
    return (size_t)EVP_EncodeBlock((unsigned char *)out, p, (int)n);
}

/* Decodes the n characters of s (padded base64) into out (3 * n / 4
 * bytes): the length, or -1 when it is not base64. */
static long
b64_dec(const char *s, size_t n, unsigned char *out)
{
    int len, pad = 0;

    if (n == 0 || n % 4 != 0 || n > (1u << 30))
        return -1;
    if (s[n - 1] == '=')
        pad = s[n - 2] == '=' ? 2 : 1;
    len = EVP_DecodeBlock(out, (const unsigned char *)s, (int)n);
    return len < 0 ? -1 : (long)len - pad;
}

static void
keys_clear(key *v, int n)
{
    if (v != NULL)
        OPENSSL_cleanse(v, (size_t)n * sizeof *v);
    free(v);
}

/* Parses the text of the key file at path into *v, *n. */
static int
parse(const char *path, char *text, key **v, int *n, jr_err *err)
{
    char *line = text, *next;
    int lineno = 0, cap = 0;

    *v = NULL;
    *n = 0;
    for (; line != NULL && *line != '\0'; line = next) {
        char *sp, *b64, *end;
        size_t idn, bn;
        unsigned char raw[64];
        long got;
        key *nv;

        lineno++;
        if ((next = strchr(line, '\n')) != NULL)
            *next++ = '\0';
        end = line + strlen(line);
        while (end > line && (end[-1] == '\r' || end[-1] == ' ' ||
                              end[-1] == '\t'))
            *--end = '\0';
        if (*line == '\0' || *line == '#')
            continue;
        if ((sp = strpbrk(line, " \t")) == NULL)
            goto bad_shape;
        idn = (size_t)(sp - line);
        for (b64 = sp; *b64 == ' ' || *b64 == '\t'; b64++)
            ;
        bn = strlen(b64);
        if (idn == 0 || idn > JR_KEYID_MAX)
            goto bad_id;
        for (size_t i = 0; i < idn; i++)
            if (!id_char((unsigned char)line[i]))
                goto bad_id;
        if (bn > 64 || (got = b64_dec(b64, bn, raw)) != KEY_BYTES) {
            OPENSSL_cleanse(raw, sizeof raw);
            keys_clear(*v, cap);
            *v = NULL;
            return jr_fail(err, JR_ECONFIG, "%s:%d: the key of '%.*s' is "
                           "not 32 bytes in base64", path, lineno,
                           (int)idn, line);
        }
        for (int i = 0; i < *n; i++)
            if (strlen((*v)[i].id) == idn &&
                memcmp((*v)[i].id, line, idn) == 0) {
                OPENSSL_cleanse(raw, sizeof raw);
                keys_clear(*v, cap);
                *v = NULL;
                return jr_fail(err, JR_ECONFIG, "%s:%d: key id '%.*s' "
                               "given twice", path, lineno, (int)idn, line);
            }
        if (*n == cap) {
            int nc = cap ? cap * 2 : 4;

            if ((nv = calloc((size_t)nc, sizeof *nv)) == NULL) {
                OPENSSL_cleanse(raw, sizeof raw);
                keys_clear(*v, cap);
                *v = NULL;
                return jr_fail(err, JR_ENOMEM, "out of memory");
            }
            if (*v != NULL)
                memcpy(nv, *v, (size_t)*n * sizeof *nv);
            keys_clear(*v, cap);
            *v = nv;
            cap = nc;
        }
        memcpy((*v)[*n].id, line, idn);
        (*v)[*n].id[idn] = '\0';
        memcpy((*v)[*n].k, raw, KEY_BYTES);
        OPENSSL_cleanse(raw, sizeof raw);
        (*n)++;
    }
    return 0;
bad_shape:
    keys_clear(*v, cap);
    *v = NULL;
    return jr_fail(err, JR_ECONFIG, "%s:%d: a key line is 'ID BASE64'",
                   path, lineno);
bad_id:
    keys_clear(*v, cap);
    *v = NULL;
    return jr_fail(err, JR_ECONFIG, "%s:%d: a key id is 1 to %d of "
                   "A-Z a-z 0-9 - _ .", path, lineno, JR_KEYID_MAX);
}

/* Reads the file at path (its mode checked) into a malloc'd text. */
static char *
read_keyfile(const char *path, struct stat *st, jr_err *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW), e;
    char *text;
    size_t got = 0;

    if (fd < 0 && errno == ELOOP)   /* a symlink: follow it, check the file */
        fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        jr_fail_errno(err, errno == ENOENT ? JR_ENOTFOUND : JR_ESYS, errno,
                      "key file '%s'", path);
        return NULL;
    }
    if (fstat(fd, st) < 0) {
        e = errno;
        close(fd);
        jr_fail_errno(err, JR_ESYS, e, "key file '%s'", path);
        return NULL;
    }
    if (!S_ISREG(st->st_mode)) {
        close(fd);
        jr_fail(err, JR_ECONFIG, "key file '%s' is not a regular file",
                path);
        return NULL;
    }
    if ((st->st_mode & 077) != 0) {
        close(fd);
        jr_fail(err, JR_ECONFIG, "key file '%s' is open to group or others "
                "(mode %04o): chmod 600 it", path,
                (unsigned)(st->st_mode & 07777));
        return NULL;
    }
    if (st->st_size > FILE_MAX || (text = malloc((size_t)st->st_size + 1))
        == NULL) {
        close(fd);
        jr_fail(err, JR_ECONFIG, "key file '%s' is too large", path);
        return NULL;
    }
    while (got < (size_t)st->st_size) {
        ssize_t r = read(fd, text + got, (size_t)st->st_size - got);

        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            e = r < 0 ? errno : EIO;
            OPENSSL_cleanse(text, got);
            free(text);
            close(fd);
            jr_fail_errno(err, JR_ESYS, e, "key file '%s'", path);
            return NULL;
        }
        got += (size_t)r;
    }
    close(fd);
    text[got] = '\0';
    return text;
}

static int
load_into(jr_keyring *k, jr_err *err)
{
    struct stat st;
    char *text = read_keyfile(k->path, &st, err);
    key *v;
    int n, rc;

    if (text == NULL)
        return -1;
    rc = parse(k->path, text, &v, &n, err);
    OPENSSL_cleanse(text, strlen(text));
    free(text);
    if (rc < 0)
        return -1;
    if (n == 0)
        return jr_fail(err, JR_ECONFIG, "%s: no key in the key file "
                       "(add one with 'jobrunner keys new %s')", k->path,
                       k->path);
    keys_clear(k->v, k->n);
    k->v = v;
    k->n = n;
    k->mtime = st.st_mtim;
    k->size = (long long)st.st_size;
    k->ino = (long long)st.st_ino;
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
    keys_clear(k->v, k->n);
    EVP_CIPHER_free(k->gcm);
    free(k->path);
    free(k);
}

int
jr_keyring_reload(jr_keyring *k, jr_err *err)
{
    struct stat st;

    if (stat(k->path, &st) == 0 && st.st_mtim.tv_sec == k->mtime.tv_sec &&
        st.st_mtim.tv_nsec == k->mtime.tv_nsec &&
        (long long)st.st_size == k->size && (long long)st.st_ino == k->ino)
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
    bn = b64_enc(raw, raw_n, b64);
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
        if (jr_seal_id(pl, strlen(pl), id))
            continue;
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
        if (!id_char((unsigned char)*ide))
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
    raw_n = b64_dec(p, (size_t)(be - p), raw);
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

static int
write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);

        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

int
jr_keyring_new_key(const char *path, char *id, jr_err *err)
{
    unsigned char raw[KEY_BYTES + 4];
    char line[JR_KEYID_MAX + 64], tmp[4096], *old = NULL;
    struct stat st;
    key *v = NULL;
    int n = 0, fd, e, exists, rc = -1;
    size_t ln;

    exists = access(path, F_OK) == 0;
    if (exists) {
        if ((old = read_keyfile(path, &st, err)) == NULL)
            return -1;
        {
            char *copy = strdup(old);

            if (copy == NULL) {
                jr_fail(err, JR_ENOMEM, "out of memory");
                goto done;
            }
            e = parse(path, copy, &v, &n, err);
            OPENSSL_cleanse(copy, strlen(copy));
            free(copy);
            if (e < 0)
                goto done;
        }
    }
    do {
        if (RAND_bytes(raw, sizeof raw) != 1) {
            jr_fail(err, JR_ESYS, "no random bytes for a key");
            goto done;
        }
        snprintf(id, JR_KEYID_MAX + 1, "k%02x%02x%02x%02x", raw[KEY_BYTES],
                 raw[KEY_BYTES + 1], raw[KEY_BYTES + 2], raw[KEY_BYTES + 3]);
    } while (find(&(jr_keyring){.v = v, .n = n}, id, strlen(id)) != NULL);
    ln = (size_t)snprintf(line, sizeof line, "%s ", id);
    ln += b64_enc(raw, KEY_BYTES, line + ln);
    line[ln++] = '\n';
    if (!exists) {
        fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd < 0) {
            jr_fail_errno(err, JR_ESYS, errno, "cannot create key file '%s'",
                          path);
            goto done;
        }
        if (fchmod(fd, 0600) < 0 || write_all(fd, line, ln) < 0 ||
            fsync(fd) < 0) {
            e = errno;
            close(fd);
            unlink(path);
            jr_fail_errno(err, JR_ESYS, e, "cannot write key file '%s'",
                          path);
            goto done;
        }
        close(fd);
        rc = 0;
        goto done;
    }
    /* a new file beside it, renamed over it: a crash leaves the old */
    snprintf(tmp, sizeof tmp, "%s.new", path);
    unlink(tmp);
    fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
        jr_fail_errno(err, JR_ESYS, errno, "cannot create '%s'", tmp);
        goto done;
    }
    if (fchmod(fd, 0600) < 0 ||
        (fchown(fd, st.st_uid, st.st_gid) < 0 && errno != EPERM) ||
        write_all(fd, line, ln) < 0 ||
        write_all(fd, old, strlen(old)) < 0 || fsync(fd) < 0 ||
        rename(tmp, path) < 0) {
        e = errno;
        close(fd);
        unlink(tmp);
        jr_fail_errno(err, JR_ESYS, e, "cannot write key file '%s'", path);
        goto done;
    }
    close(fd);
    rc = 0;
done:
    OPENSSL_cleanse(raw, sizeof raw);
    OPENSSL_cleanse(line, sizeof line);
    if (old != NULL)
        OPENSSL_cleanse(old, strlen(old));
    free(old);
    keys_clear(v, n);
    return rc;
}
