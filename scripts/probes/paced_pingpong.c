/*
 * Paced 1 KiB ping-pong over loopback TCP: the floor under E1.
 *
 * A client thread sends one 1 KiB message at a fixed rate (sleeping between sends with a 1 us
 * timer slack) and waits for the echo from a server thread. Prints round-trip percentiles in us,
 * counted from the scheduled send time, and the process's CPU time per round trip: at rates
 * where each message finds both threads asleep, that is what waking them costs on this machine.
 *
 *     gcc -O2 -o paced_pingpong paced_pingpong.c -lpthread
 *     ./paced_pingpong PORT RATE SECONDS
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static int port;
static const int size = 1024;

static long long now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000LL + t.tv_nsec;
}

static int read_full(int fd, char *b, int n) {
    int got = 0;
    while (got < n) {
        int r = read(fd, b + got, n - got);
        if (r <= 0) return -1;
        got += r;
    }
    return 0;
}

static void *server(void *arg) {
    (void)arg;
    int l = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(0x7f000001);
    if (bind(l, (void *)&a, sizeof a) || listen(l, 1)) { perror("listen"); exit(1); }
    int c = accept(l, 0, 0);
    setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    char *b = malloc(size);
    while (read_full(c, b, size) == 0)
        if (write(c, b, size) != size) break;
    return 0;
}

static int cmp(const void *a, const void *b) {
    long long x = *(const long long *)a, y = *(const long long *)b;
    return x < y ? -1 : x > y;
}

static double cpu_seconds(void) {
    struct rusage r;
    getrusage(RUSAGE_SELF, &r);
    return r.ru_utime.tv_sec + r.ru_stime.tv_sec + (r.ru_utime.tv_usec + r.ru_stime.tv_usec) / 1e6;
}

int main(int argc, char **argv) {
    if (argc != 4) { fprintf(stderr, "usage: %s PORT RATE SECONDS\n", argv[0]); return 2; }
    port = atoi(argv[1]);
    int rate = atoi(argv[2]), secs = atoi(argv[3]);
    if (rate <= 0 || secs <= 0) { fprintf(stderr, "rate and seconds must be positive\n"); return 2; }
    pthread_t t;
    pthread_create(&t, 0, server, 0);
    int c = -1, one = 1;
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(0x7f000001);
    for (int i = 0; i < 200; i++) { /* the server may not listen yet */
        c = socket(AF_INET, SOCK_STREAM, 0);
        if (connect(c, (void *)&a, sizeof a) == 0) break;
        close(c);
        c = -1;
        usleep(5000);
    }
    if (c < 0) { perror("connect"); return 1; }
    setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    prctl(PR_SET_TIMERSLACK, 1000);
    long n = (long)rate * secs;
    long long *lat = malloc(n * sizeof *lat), iv = 1000000000LL / rate;
    char *b = calloc(1, size);
    double cpu0 = cpu_seconds();
    long long start = now_ns();
    for (long i = 0; i < n; i++) {
        long long at = start + i * iv, now = now_ns();
        if (at > now) {
            struct timespec d = {(at - now) / 1000000000LL, (at - now) % 1000000000LL};
            nanosleep(&d, 0);
        }
        if (write(c, b, size) != size || read_full(c, b, size)) { perror("ping"); return 1; }
        lat[i] = (now_ns() - at) / 1000;
    }
    double cpu = cpu_seconds() - cpu0;
    qsort(lat, n, sizeof *lat, cmp);
    printf("paced rate=%d n=%ld rtt_us p50=%lld p99=%lld p99.9=%lld max=%lld cpu_us_per_rt=%.2f\n", rate, n,
           lat[n / 2], lat[n * 99 / 100], lat[n * 999 / 1000], lat[n - 1], cpu * 1e6 / n);
    return 0;
}
