/* A tiny DNS client for the real-client matrix (tests/e2e/test_clients.py), built at test time against
 * glibc (gcc) and against musl (musl-gcc -static):
 *
 *   dnsclient addr NAME    the addresses getaddrinfo(AF_UNSPEC) finds, one per line
 *   dnsclient srv NAME     the SRV records res_search finds: "priority weight port target"
 *
 * Exit status 2 when the name does not resolve (the reason on stderr), 3 on a reply it cannot read.
 * musl's res_search is res_query (no search list), as on Alpine.
 */
#include <arpa/inet.h>
#include <arpa/nameser.h>
#include <netdb.h>
#include <netinet/in.h>
#include <resolv.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

static int
addr(const char *name)
{
    struct addrinfo hints, *res, *ai;
    char text[INET6_ADDRSTRLEN];
    int rc;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    rc = getaddrinfo(name, NULL, &hints, &res);
    if (rc != 0) {
        fprintf(stderr, "%s: %s\n", name, gai_strerror(rc));
        return 2;
    }
    for (ai = res; ai; ai = ai->ai_next) {
        const void *a = ai->ai_family == AF_INET ? (const void *)&((struct sockaddr_in *)ai->ai_addr)->sin_addr
                                                 : (const void *)&((struct sockaddr_in6 *)ai->ai_addr)->sin6_addr;
        if (inet_ntop(ai->ai_family, a, text, sizeof text))
            puts(text);
    }
    freeaddrinfo(res);
    return 0;
}

static int
srv(const char *name)
{
    static unsigned char buf[65536];
    const unsigned char *p, *end;
    char target[NS_MAXDNAME];
    int n, qd, an, len, type, rdlen;
    n = res_search(name, C_IN, T_SRV, buf, sizeof buf);
    if (n < 0) {
        fprintf(stderr, "%s: no SRV records (h_errno %d)\n", name, h_errno);
        return 2;
    }
    if (n > (int)sizeof buf)
        n = (int)sizeof buf;
    end = buf + n;
    p = buf + 12;
    qd = buf[4] << 8 | buf[5];
    an = buf[6] << 8 | buf[7];
    while (qd-- > 0) {
        if ((len = dn_skipname(p, end)) < 0 || p + len + 4 > end)
            return 3;
        p += len + 4;
    }
    while (an-- > 0) {
        if ((len = dn_skipname(p, end)) < 0 || p + len + 10 > end)
            return 3;
        p += len;
        type = p[0] << 8 | p[1];
        rdlen = p[8] << 8 | p[9];
        p += 10;
        if (p + rdlen > end)
            return 3;
        if (type == T_SRV && rdlen >= 7) {
            if (dn_expand(buf, end, p + 6, target, sizeof target) < 0)
                return 3;
            printf("%d %d %d %s\n", p[0] << 8 | p[1], p[2] << 8 | p[3], p[4] << 8 | p[5], target);
        }
        p += rdlen;
    }
    return 0;
}

int
main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "addr") == 0)
        return addr(argv[2]);
    if (argc == 3 && strcmp(argv[1], "srv") == 0)
        return srv(argv[2]);
    fprintf(stderr, "usage: dnsclient addr|srv NAME\n");
    return 64;
}
