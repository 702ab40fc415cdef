/* fuzz.h - what the fuzz targets in spec/fuzz share. Each target defines
 * LLVMFuzzerTestOneInput; built with clang -fsanitize=fuzzer it is a
 * libFuzzer program (make fuzz), linked with replay.c it is a plain program
 * that runs every file of its corpus once (make test). A small byte
 * consumer turns fuzz input into structured values. */
#ifndef JR_FUZZ_H
#define JR_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct fz {
    const uint8_t *p;
    size_t         n;
} fz;

/* Up to bytes little-endian bytes; missing ones are 0. */
static inline uint64_t
fz_int(fz *f, int bytes)
{
    uint64_t v = 0;
    int i;

    for (i = 0; i < bytes && f->n > 0; i++, f->p++, f->n--)
        v |= (uint64_t)f->p[0] << (8 * i);
    return v;
}

static inline double
fz_double(fz *f)
{
    uint64_t u = fz_int(f, 8);
    double d;

    memcpy(&d, &u, sizeof d);
    return d;
}

/* A string of length given by one byte (at most what is left), copied into
 * buf (size at least 256) and NUL-terminated; returns its length. With
 * nul_free, stops at the first NUL byte, as a C string would. */
static inline size_t
fz_str(fz *f, char *buf, int nul_free)
{
    size_t n = (size_t)fz_int(f, 1);

    if (n > f->n)
        n = f->n;
    memcpy(buf, f->p, n);
    buf[n] = '\0';
    f->p += n;
    f->n -= n;
    return nul_free ? strlen(buf) : n;
}

#endif
