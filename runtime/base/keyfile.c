/* keyfile.c - the key file of encrypted values: its lines read and
 * checked (the file's mode first), and a fresh key written at its top.
 * See keyfile.h. */
#define _DEFAULT_SOURCE         /* realpath, flock */
#include "base/keyfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <limits.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#define FILE_MAX    (1 << 20)   /* bytes of a key file */

typedef jr_keyfile_key key;

int
jr_keyfile_id_char(int c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.';
}

/* base64 (RFC 4648, padded) of n bytes into out, which holds 4 * ((n +
 * 2) / 3) + 1 bytes. Returns the length. */
size_t
jr_keyfile_b64_enc(const unsigned char *p, size_t n, char *out)
{
    return (size_t)EVP_EncodeBlock((unsigned char *)out, p, (int)n);
}

/* Decodes the n characters of s (padded base64) into out (3 * n / 4
 * bytes): the length, or -1 when it is not base64. */
long
jr_keyfile_b64_dec(const char *s, size_t n, unsigned char *out)
{
    int len, pad = 0;

    if (n == 0 || n % 4 != 0 || n > (1u << 30))
        return -1;
    if (s[n - 1] == '=')
        pad = s[n - 2] == '=' ? 2 : 1;
    len = EVP_DecodeBlock(out, (const unsigned char *)s, (int)n);
    return len < 0 ? -1 : (long)len - pad;
}

void
jr_keyfile_clear(key *v, int n)
{
    if (v != NULL)
        OPENSSL_cleanse(v, (size_t)n * sizeof *v);
    free(v);
}

/* The bytes of a UTF-8 byte order mark at the start of text: 3 or 0 (an
 * editor's, allowed as CRLF line ends are). */
static size_t
bom(const char *text)
{
    return strncmp(text, "\xEF\xBB\xBF", 3) == 0 ? 3 : 0;
}

/* Parses the text of the key file at path into *v, *n. */
static int
parse(const char *path, char *text, key **v, int *n, jr_err *err)
{
    char *line = text, *next;
    int lineno = 0, cap = 0;

    *v = NULL;
    *n = 0;
    line += bom(line);
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
            if (!jr_keyfile_id_char((unsigned char)line[i]))
                goto bad_id;
        if (bn > 64 ||
            (got = jr_keyfile_b64_dec(b64, bn, raw)) != JR_KEY_BYTES) {
            OPENSSL_cleanse(raw, sizeof raw);
            jr_keyfile_clear(*v, cap);
            *v = NULL;
            return jr_fail(err, JR_ECONFIG, "%s:%d: the key of '%.*s' is "
                           "not 32 bytes in base64", path, lineno,
                           (int)idn, line);
        }
        for (int i = 0; i < *n; i++)
            if (strlen((*v)[i].id) == idn &&
                memcmp((*v)[i].id, line, idn) == 0) {
                OPENSSL_cleanse(raw, sizeof raw);
                jr_keyfile_clear(*v, cap);
                *v = NULL;
                return jr_fail(err, JR_ECONFIG, "%s:%d: key id '%.*s' "
                               "given twice", path, lineno, (int)idn, line);
            }
        if (*n == cap) {
            int nc = cap ? cap * 2 : 4;

            if ((nv = calloc((size_t)nc, sizeof *nv)) == NULL) {
                OPENSSL_cleanse(raw, sizeof raw);
                jr_keyfile_clear(*v, cap);
                *v = NULL;
                return jr_fail(err, JR_ENOMEM, "out of memory");
            }
            if (*v != NULL)
                memcpy(nv, *v, (size_t)*n * sizeof *nv);
            jr_keyfile_clear(*v, cap);
            *v = nv;
            cap = nc;
        }
        memcpy((*v)[*n].id, line, idn);
        (*v)[*n].id[idn] = '\0';
        memcpy((*v)[*n].k, raw, JR_KEY_BYTES);
        OPENSSL_cleanse(raw, sizeof raw);
        (*n)++;
    }
    return 0;
bad_shape:
    jr_keyfile_clear(*v, cap);
    *v = NULL;
    return jr_fail(err, JR_ECONFIG, "%s:%d: a key line is 'ID BASE64'",
                   path, lineno);
bad_id:
    jr_keyfile_clear(*v, cap);
    *v = NULL;
    return jr_fail(err, JR_ECONFIG, "%s:%d: a key id is 1 to %d of "
                   "A-Z a-z 0-9 - _ .", path, lineno, JR_KEYID_MAX);
}

/* Reads the file at path (its mode checked) into a malloc'd text. */
static char *
read_keyfile(const char *path, struct stat *st, jr_err *err)
{
    /* O_NONBLOCK: a FIFO at path is refused below, not waited on */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK), e;
    char *text;
    size_t got = 0;

    if (fd < 0 && errno == ELOOP)   /* a symlink: follow it, check the file */
        fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
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

/* Whether id is one of v[0..n)'s. */
static int
taken(const key *v, int n, const char *id)
{
    for (int i = 0; i < n; i++)
        if (strcmp(v[i].id, id) == 0)
            return 1;
    return 0;
}

int
jr_keyfile_read(const char *path, jr_keyfile_key **v, int *n,
                jr_keyfile_stamp *stamp, jr_err *err)
{
    struct stat st;
    char *text = read_keyfile(path, &st, err);
    int rc;

    *v = NULL;
    *n = 0;
    if (text == NULL)
        return -1;
    rc = parse(path, text, v, n, err);
    OPENSSL_cleanse(text, strlen(text));
    free(text);
    if (rc < 0)
        return -1;
    if (*n == 0)
        return jr_fail(err, JR_ECONFIG, "%s: no key in the key file "
                       "(add one with 'jobrunner keys new %s')", path, path);
    stamp->mtime_s = (long long)st.st_mtim.tv_sec;
    stamp->mtime_ns = (long long)st.st_mtim.tv_nsec;
    stamp->size = (long long)st.st_size;
    stamp->ino = (long long)st.st_ino;
    return 0;
}

int
jr_keyfile_changed(const char *path, const jr_keyfile_stamp *stamp)
{
    struct stat st;

    return stat(path, &st) != 0 ||
           (long long)st.st_mtim.tv_sec != stamp->mtime_s ||
           (long long)st.st_mtim.tv_nsec != stamp->mtime_ns ||
           (long long)st.st_size != stamp->size ||
           (long long)st.st_ino != stamp->ino;
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


/* Opens and locks (flock, exclusive) the directory of path: its fd, or
 * -1 with err set. A file system without flock on directories: the fd
 * unlocked; a directory its user may write but not read: -2, no lock. */
static int
lock_dir(const char *path, jr_err *err)
{
    char dir[PATH_MAX];
    const char *slash = strrchr(path, '/');
    int fd;

    if (slash == NULL)
        snprintf(dir, sizeof dir, ".");
    else if (slash == path)
        snprintf(dir, sizeof dir, "/");
    else
        snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    if ((fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0 &&
        errno == EACCES)
        return -2;
    if (fd < 0)
        return jr_fail_errno(err, JR_ESYS, errno, "key file '%s': its "
                             "directory", path);
    while (flock(fd, LOCK_EX) < 0 && errno == EINTR)
        ;
    return fd;
}

int
jr_keyring_new_key(const char *path, char *id, jr_err *err)
{
    unsigned char raw[JR_KEY_BYTES + 4];
    const unsigned char *r = raw + JR_KEY_BYTES;    /* the id's bytes */
    char line[JR_KEYID_MAX + 64], tmp[PATH_MAX + 8], *old = NULL;
    char real[PATH_MAX];
    const char *target = path;
    struct stat st;
    key *v = NULL;
    int n = 0, fd, e, exists, rc = -1, dfd;
    size_t ln;

    /* a symlink: the file it points at gets the key, the link stays */
    if (lstat(path, &st) == 0 && S_ISLNK(st.st_mode)) {
        if (realpath(path, real) == NULL)
            return jr_fail_errno(err, errno == ENOENT ? JR_ENOTFOUND :
                                 JR_ESYS, errno, "key file '%s'", path);
        target = real;
    }
    /* its directory locked: two 'keys new' at once both add their key */
    if ((dfd = lock_dir(target, err)) == -1)
        return -1;
    exists = access(target, F_OK) == 0;
    if (exists) {
        if ((old = read_keyfile(target, &st, err)) == NULL)
            goto done;
        {
            char *copy = strdup(old);

            if (copy == NULL) {
                jr_fail(err, JR_ENOMEM, "out of memory");
                goto done;
            }
            e = parse(target, copy, &v, &n, err);
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
        snprintf(id, JR_KEYID_MAX + 1, "k%02x%02x%02x%02x", r[0], r[1],
                 r[2], r[3]);
    } while (taken(v, n, id));
    ln = (size_t)snprintf(line, sizeof line, "%s ", id);
    ln += jr_keyfile_b64_enc(raw, JR_KEY_BYTES, line + ln);
    line[ln++] = '\n';
    if (!exists) {
        fd = open(target, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd < 0) {
            jr_fail_errno(err, JR_ESYS, errno, "cannot create key file '%s'",
                          path);
            goto done;
        }
        if (fchmod(fd, 0600) < 0 || write_all(fd, line, ln) < 0 ||
            fsync(fd) < 0) {
            e = errno;
            close(fd);
            unlink(target);
            jr_fail_errno(err, JR_ESYS, e, "cannot write key file '%s'",
                          path);
            goto done;
        }
        close(fd);
        rc = 0;
        goto synced;
    }
    /* a new file beside it, renamed over it: a crash leaves the old */
    snprintf(tmp, sizeof tmp, "%s.new", target);
    unlink(tmp);
    fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
        jr_fail_errno(err, JR_ESYS, errno, "cannot create '%s'", tmp);
        goto done;
    }
    if (fchmod(fd, 0600) < 0 ||
        (fchown(fd, st.st_uid, st.st_gid) < 0 && errno != EPERM) ||
        write_all(fd, line, ln) < 0 ||
        write_all(fd, old + bom(old), strlen(old + bom(old))) < 0 ||
        fsync(fd) < 0 ||
        rename(tmp, target) < 0) {
        e = errno;
        close(fd);
        unlink(tmp);
        jr_fail_errno(err, JR_ESYS, e, "cannot write key file '%s'", path);
        goto done;
    }
    close(fd);
    rc = 0;
synced:
    if (dfd >= 0)
        fsync(dfd); /* the new name lasts a crash: a key in use is kept */
done:
    if (dfd >= 0)
        close(dfd); /* the lock with it */
    OPENSSL_cleanse(raw, sizeof raw);
    OPENSSL_cleanse(line, sizeof line);
    if (old != NULL)
        OPENSSL_cleanse(old, strlen(old));
    free(old);
    jr_keyfile_clear(v, n);
    return rc;
}
