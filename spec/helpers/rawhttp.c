/* rawhttp - a loopback HTTP server that records the bytes it receives, for
 * spec/io_input_spec.lua: every byte read from any connection is appended
 * to OUT as it arrives, unparsed, so that a header or a request injected
 * into another shows there. Each request head (up to a blank line; bodies
 * are not read as such) gets 200 and "ok\n", and the connection stays open,
 * so a second request smuggled behind the first is read and answered too.
 * Prints "port N" once it listens on 127.0.0.1; exits after SECS.
 *   rawhttp OUT SECS */
#define _GNU_SOURCE
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define CONNS 64

static const char reply[] =
    "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Type: text/plain\r\n"
    "\r\nok\n";

typedef struct conn {
    int  fd;                    /* -1: a free slot */
    char tail[4];               /* the last bytes read: a split "\r\n\r\n" */
    int  ntail;
} conn;

/* Answers each blank line that ends a head in what c just read. */
static void
answer_heads(conn *c, const char *buf, ssize_t n)
{
    ssize_t i;

    for (i = 0; i < n; i++) {
        if (c->ntail == 4)
            memmove(c->tail, c->tail + 1, (size_t)--c->ntail);
        c->tail[c->ntail++] = buf[i];
        if (c->ntail == 4 && memcmp(c->tail, "\r\n\r\n", 4) == 0) {
            if (write(c->fd, reply, sizeof reply - 1) < 0)
                return;
            c->ntail = 0;
        }
    }
}

static int
listen_any(void)
{
    struct sockaddr_in sa = {.sin_family = AF_INET};
    socklen_t len = sizeof sa;
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0 ||
        listen(fd, 64) < 0 ||
        getsockname(fd, (struct sockaddr *)&sa, &len) < 0) {
        perror("rawhttp");
        exit(1);
    }
    printf("port %d\n", ntohs(sa.sin_port));
    fflush(stdout);
    return fd;
}

int
main(int argc, char **argv)
{
    struct pollfd pfd[CONNS + 1];
    conn c[CONNS];
    char buf[65536];
    time_t end;
    FILE *out;
    int lfd, i;

    if (argc != 3 || (out = fopen(argv[1], "ab")) == NULL) {
        fprintf(stderr, "usage: rawhttp OUT SECS\n");
        return 2;
    }
    end = time(NULL) + atoi(argv[2]);
    lfd = listen_any();
    for (i = 0; i < CONNS; i++)
        c[i].fd = -1;
    while (time(NULL) < end) {
        pfd[0] = (struct pollfd){.fd = lfd, .events = POLLIN};
        for (i = 0; i < CONNS; i++)
            pfd[i + 1] = (struct pollfd){.fd = c[i].fd, .events = POLLIN};
        if (poll(pfd, CONNS + 1, 1000) <= 0)
            continue;
        if (pfd[0].revents & POLLIN) {
            int fd = accept(lfd, NULL, NULL);
            for (i = 0; fd >= 0 && i < CONNS && c[i].fd >= 0; i++)
                ;
            if (fd >= 0 && i == CONNS)
                close(fd);
            else if (fd >= 0)
                c[i] = (conn){.fd = fd};
        }
        for (i = 0; i < CONNS; i++) {
            ssize_t n;
            if (c[i].fd < 0 || !(pfd[i + 1].revents & (POLLIN | POLLHUP)))
                continue;
            if ((n = read(c[i].fd, buf, sizeof buf)) <= 0) {
                close(c[i].fd);
                c[i].fd = -1;
                continue;
            }
            fwrite(buf, 1, (size_t)n, out);
            fflush(out);
            answer_heads(&c[i], buf, n);
        }
    }
    return 0;
}
