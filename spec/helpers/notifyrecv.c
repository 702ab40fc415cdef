/* notifyrecv - the receiving end of systemd's notify socket, for
 * spec/systemd_spec.lua: binds a datagram socket at ADDR (a path, or @name
 * in the abstract namespace) and appends each datagram to OUT as one line,
 * its newlines shown as '|', after "1 " or "0 ": whether the file MARK
 * existed when it arrived. Creates OUT once bound; exits after SECS.
 *   notifyrecv ADDR OUT SECS [MARK] */
#define _GNU_SOURCE
#include <poll.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

int
main(int argc, char **argv)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    size_t len;
    socklen_t slen;
    char buf[4096];
    FILE *out;
    time_t end;
    int fd;

    if (argc < 4 || (len = strlen(argv[1])) >= sizeof sa.sun_path) {
        fprintf(stderr, "usage: notifyrecv ADDR OUT SECS [MARK]\n");
        return 2;
    }
    memcpy(sa.sun_path, argv[1], len);
    slen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len);
    if (argv[1][0] == '@')
        sa.sun_path[0] = '\0';
    else
        unlink(argv[1]);
    if ((fd = socket(AF_UNIX, SOCK_DGRAM, 0)) < 0 ||
        bind(fd, (struct sockaddr *)&sa, slen) < 0) {
        perror("notifyrecv: bind");
        return 1;
    }
    if ((out = fopen(argv[2], "a")) == NULL) {
        perror("notifyrecv: open");
        return 1;
    }
    end = time(NULL) + atoi(argv[3]);
    while (time(NULL) < end) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        ssize_t n;

        if (poll(&p, 1, 100) <= 0)
            continue;
        if ((n = recv(fd, buf, sizeof buf - 1, 0)) < 0)
            break;
        for (ssize_t i = 0; i < n; i++)
            if (buf[i] == '\n')
                buf[i] = '|';
        buf[n] = '\0';
        fprintf(out, "%d %s\n", argc > 4 && access(argv[4], F_OK) == 0,
                buf);
        fflush(out);
    }
    return 0;
}
