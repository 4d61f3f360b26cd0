/* Part of `just bench` (bench/creation.sh compiles and runs it): the
 * latency of one file creation, seen from inside the process that makes it.
 *
 *     creat-lat DIR PROCS FILES [TOUCH]
 *
 * PROCS processes, started together, each create FILES new files in a
 * directory of their own under DIR (open with O_CREAT|O_EXCL, then close);
 * each times its open() alone with CLOCK_MONOTONIC. Prints the median and
 * the 99th percentile of all PROCS x FILES latencies and their mean, in
 * nanoseconds.
 *
 * With TOUCH, each process first fills a 64 MB heap and, before each
 * creation, writes one byte in each of TOUCH of its pages (a different
 * stretch every time): work between the files it makes, as git inflating
 * objects or tar reading its archive do. Then the whole round (the
 * touches, the open and the close) is timed, so that what a creation costs
 * the work around it is counted too: a caller moved to another CPU finds
 * its caches cold there, and a CPU left idle long enough halts. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static long long now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000LL + t.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
    unsigned x = *(const unsigned *)a, y = *(const unsigned *)b;
    return (x > y) - (x < y);
}

#define HEAP_PAGES ((64L << 20) / 4096)

static void child(const char *dir, int p, int files, long touch, unsigned *out, int go)
{
    char path[4096], c;
    volatile char *heap = NULL;
    long page = 0;
    snprintf(path, sizeof path, "%s/p%d", dir, p);
    if (mkdir(path, 0755) != 0) { perror(path); _exit(1); }
    if (touch > 0) {
        heap = malloc(HEAP_PAGES * 4096);
        if (!heap) { perror("creat-lat: heap"); _exit(1); }
        memset((char *)heap, 1, HEAP_PAGES * 4096);
    }
    if (read(go, &c, 1) < 0) _exit(1); /* EOF when the parent has forked all */
    for (int i = 0; i < files; i++) {
        snprintf(path, sizeof path, "%s/p%d/f%d", dir, p, i);
        long long s = now_ns();
        for (long k = 0; k < touch; k++, page += 7)
            heap[(page % HEAP_PAGES) * 4096]++;
        int fd = open(path, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
        long long e = now_ns();
        if (fd < 0) { perror(path); _exit(1); }
        close(fd);
        if (touch > 0) e = now_ns();
        out[i] = (unsigned)(e - s);
    }
    _exit(0);
}

int main(int argc, char **argv)
{
    if (argc != 4 && argc != 5) { fprintf(stderr, "usage: creat-lat DIR PROCS FILES [TOUCH]\n"); return 2; }
    int procs = atoi(argv[2]), files = atoi(argv[3]);
    long touch = argc == 5 ? atol(argv[4]) : 0;
    if (procs < 1 || files < 1) { fprintf(stderr, "creat-lat: PROCS and FILES must be positive\n"); return 2; }
    if (touch < 0 || touch > HEAP_PAGES) { fprintf(stderr, "creat-lat: TOUCH must be 0 to %ld pages\n", HEAP_PAGES); return 2; }
    size_t n = (size_t)procs * files;
    unsigned *lat = mmap(NULL, n * sizeof *lat, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    int go[2];
    if (lat == MAP_FAILED || pipe(go) != 0) { perror("creat-lat"); return 1; }
    for (int p = 0; p < procs; p++) {
        pid_t pid = fork();
        if (pid < 0) { perror("fork"); return 1; }
        if (pid == 0) { close(go[1]); child(argv[1], p, files, touch, lat + (size_t)p * files, go[0]); }
    }
    close(go[0]);
    usleep(100000); /* let every child reach its read */
    close(go[1]);
    int failed = 0, st;
    while (wait(&st) > 0) failed |= !WIFEXITED(st) || WEXITSTATUS(st) != 0;
    if (failed) { fprintf(stderr, "creat-lat: a creating process failed\n"); return 1; }
    double sum = 0;
    for (size_t i = 0; i < n; i++) sum += lat[i];
    qsort(lat, n, sizeof *lat, cmp);
    printf("%u %u %.0f\n", lat[n / 2], lat[(n * 99) / 100], sum / n);
    return 0;
}
