/* Part of `just bench` (bench/creation.sh compiles and runs it): the floor
 * under the creation guard's cost per call, with no guard at all. A child
 * sends every openat(2) to a minimal supervisor (one thread, the listener
 * flagged SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP, as the guard's is) that does
 * no work, and times 20,000 of them:
 *
 *     notif-floor send   the supervisor answers with an error (NOTIF_SEND):
 *                        what a refused call or a mkdir's answer costs
 *     notif-floor addfd  it answers with a descriptor it holds
 *                        (NOTIF_ADDFD with FLAG_SEND): what every
 *                        open(O_CREAT) costs, before any checking
 *     notif-floor warm   addfd, and a SCHED_IDLE thread spinning in the
 *                        supervisor meanwhile (what the guard had until
 *                        docs/benchmarks-history.md's 2026-11-26 11:00-12:15 entry:
 *                        the wake-up of a CPU that is not halted)
 *
 * Prints "MODE MEDIAN-NS P99-NS". */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <sched.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef SECCOMP_IOCTL_NOTIF_SET_FLAGS
#define SECCOMP_IOCTL_NOTIF_SET_FLAGS SECCOMP_IOW(4, __u64)
#endif
#define SYNC_WAKE_UP 1ULL
#define CALLS 20000

static long long now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000LL + t.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
    long long x = *(const long long *)a, y = *(const long long *)b;
    return (x > y) - (x < y);
}

static void pass_fd(int sock, int fd)
{
    char byte = 0, ctl[CMSG_SPACE(sizeof(int))];
    struct iovec io = {&byte, 1};
    struct msghdr m = {.msg_iov = &io, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof ctl};
    struct cmsghdr *h = CMSG_FIRSTHDR(&m);
    h->cmsg_level = SOL_SOCKET;
    h->cmsg_type = SCM_RIGHTS;
    h->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(h), &fd, sizeof(int));
    if (sendmsg(sock, &m, 0) < 0) { perror("sendmsg"); exit(1); }
}

static int take_fd(int sock)
{
    char byte, ctl[CMSG_SPACE(sizeof(int))];
    struct iovec io = {&byte, 1};
    struct msghdr m = {.msg_iov = &io, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof ctl};
    int fd;
    if (recvmsg(sock, &m, 0) <= 0 || !CMSG_FIRSTHDR(&m)) { fprintf(stderr, "notif-floor: no listener\n"); exit(1); }
    memcpy(&fd, CMSG_DATA(CMSG_FIRSTHDR(&m)), sizeof(int));
    return fd;
}

/* The child: every openat goes to the supervisor; time CALLS of them. */
static void caller(int sock, const char *mode)
{
    struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_openat, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_USER_NOTIF),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = {sizeof f / sizeof f[0], f};
    static long long lat[CALLS];
    char go;
    prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
    int listener = syscall(__NR_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER, &prog);
    if (listener < 0) { perror("seccomp"); exit(1); }
    pass_fd(sock, listener);
    close(listener);
    if (read(sock, &go, 1) != 1) exit(1);
    for (int i = 0; i < CALLS; i++) {
        long long t = now_ns();
        int fd = syscall(__NR_openat, AT_FDCWD, "/dev/null", O_RDONLY);
        lat[i] = now_ns() - t;
        if (fd >= 0) close(fd);
    }
    qsort(lat, CALLS, sizeof lat[0], cmp);
    printf("%s %lld %lld\n", mode, lat[CALLS / 2], lat[CALLS * 99 / 100]);
    exit(0);
}

static void *spin(void *unused)
{
    struct sched_param p = {0};
    (void)unused;
    if (sched_setscheduler(0, SCHED_IDLE, &p) != 0) return NULL;
    for (;;) __asm__ volatile("pause");
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    int addfd = strcmp(mode, "send") != 0;
    if (strcmp(mode, "send") && strcmp(mode, "addfd") && strcmp(mode, "warm")) {
        fprintf(stderr, "usage: notif-floor send|addfd|warm\n");
        return 2;
    }
    int sp[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sp) < 0) { perror("socketpair"); return 1; }
    pid_t child = fork();
    if (child == 0) caller(sp[0], mode);
    int listener = take_fd(sp[1]);
    __u64 flags = SYNC_WAKE_UP;
    if (ioctl(listener, SECCOMP_IOCTL_NOTIF_SET_FLAGS, flags) < 0) perror("notif-floor: sync wake-up");
    if (!strcmp(mode, "warm")) {
        pthread_t t;
        pthread_create(&t, NULL, spin, NULL);
    }
    int null = open("/dev/null", O_RDONLY);
    if (write(sp[1], "g", 1) != 1) return 1;
    for (;;) {
        struct seccomp_notif req;
        memset(&req, 0, sizeof req);
        if (ioctl(listener, SECCOMP_IOCTL_NOTIF_RECV, &req) < 0) {
            int st;
            if (errno == EINTR) continue;
            if (errno == ENOENT && waitpid(child, &st, WNOHANG) == 0) continue;
            break;
        }
        if (addfd) {
            struct seccomp_notif_addfd a = {.id = req.id, .flags = SECCOMP_ADDFD_FLAG_SEND, .srcfd = null};
            ioctl(listener, SECCOMP_IOCTL_NOTIF_ADDFD, &a);
        } else {
            struct seccomp_notif_resp r = {.id = req.id, .error = -EPERM};
            ioctl(listener, SECCOMP_IOCTL_NOTIF_SEND, &r);
        }
    }
    int st;
    waitpid(child, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
}
