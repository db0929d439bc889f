/*
 * twwarm: touch and free BYTES of anonymous memory, so that the process
 * run.sh starts next finds memory the host still backs.
 *
 * Why: this machine's guest returns freed memory to the host (virtio-balloon
 * free page reporting, a couple of seconds after it is freed). The first
 * large allocation after a pause then pays the host's fault on every page:
 * twfloor's first_touch measured 13 us a 4 KiB page against 1.2 us when the
 * host backs it. WL2 arms 10M timers in a fresh process, so its figure hung
 * on what ran before it: the same binary did 13.1M schedules/s after 6 s
 * idle and 34.5M right after another 10M run (2026-11-29). run.sh runs this
 * before every WL2 process, of every column alike, with BYTES above what any
 * of them takes, so that each starts on memory just freed and not yet
 * reported. The kernel hands out the pages it has not reported first
 * (reported ones go to the tail of the free lists).
 *
 * Usage: twwarm BYTES. Prints nothing; exits 1 on a bad argument or a
 * failed mmap.
 */
#define _DEFAULT_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

static int parse_bytes(const char *s, size_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v == 0)
        return -1;
    *out = (size_t)v;
    return 0;
}

/* One write a page: the fault is what backs it; the rest of the page costs
 * nothing more. */
static void touch_pages(unsigned char *p, size_t bytes, size_t page)
{
    for (size_t off = 0; off < bytes; off += page)
        p[off] = 1;
}

int main(int argc, char **argv)
{
    size_t bytes;
    if (argc != 2 || parse_bytes(argv[1], &bytes) != 0) {
        fprintf(stderr, "usage: twwarm BYTES (a positive integer)\n");
        return 1;
    }
    long page = sysconf(_SC_PAGESIZE);
    if (page <= 0)
        page = 4096;
    unsigned char *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        perror("twwarm: mmap");
        return 1;
    }
#ifdef MADV_HUGEPAGE
    (void)madvise(p, bytes, MADV_HUGEPAGE); /* as the records ask (src/segments.c) */
#endif
    touch_pages(p, bytes, (size_t)page);
    munmap(p, bytes);
    return 0;
}
