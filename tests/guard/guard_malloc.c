/* guard_malloc.c - an LD_PRELOAD allocator for `make test` (tests/run-tests): every block ends
 * flush against a page that cannot be read or written, so that a read or write past its end faults
 * at once. ASan cannot see such accesses in SIMD intrinsics' unaligned forms or in AMX's tile
 * loads (inline instructions it does not instrument), which is where EMBED's CPU kernels read
 * their packs and tokens. Slow (two mappings a block): run over the tests that need it only. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

typedef struct {
    void *base;        /* the mapping */
    size_t span, size; /* its bytes, the block's */
} guard_head;

/* n bytes aligned to `align` (a power of two, at least 16), ending at most 15 bytes (the rounding
 * that 16-byte alignment needs) before a PROT_NONE page; the head just before the block. */
static void *guard_alloc(size_t n, size_t align)
{
    if (align < 16)
        align = 16;
    size_t page = (size_t)sysconf(_SC_PAGESIZE), rounded = (n + 15u) & ~(size_t)15u;
    size_t span = (rounded + sizeof(guard_head) + align + page + page - 1u) / page * page;
    uint8_t *m = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        return NULL;
    if (mprotect(m + span - page, page, PROT_NONE) != 0) {
        munmap(m, span);
        return NULL;
    }
    uintptr_t p = ((uintptr_t)(m + span - page) - rounded) & ~(uintptr_t)(align - 1u);
    guard_head *h = (guard_head *)p - 1;
    h->base = m, h->span = span, h->size = n;
    return (void *)p;
}

void *malloc(size_t n) { return guard_alloc(n, 16); }
void free(void *p)
{
    if (p) {
        guard_head *h = (guard_head *)p - 1;
        munmap(h->base, h->span);
    }
}
void *calloc(size_t a, size_t b)
{
    if (b && a > SIZE_MAX / b)
        return errno = ENOMEM, NULL;
    return guard_alloc(a * b, 16); /* fresh anonymous pages are zero */
}
void *realloc(void *p, size_t n)
{
    void *q = guard_alloc(n, 16);
    if (p && q) {
        size_t old = ((guard_head *)p - 1)->size;
        memcpy(q, p, old < n ? old : n);
        free(p);
    }
    return q;
}
int posix_memalign(void **out, size_t align, size_t n) { return (*out = guard_alloc(n, align)) ? 0 : ENOMEM; }
void *aligned_alloc(size_t align, size_t n) { return guard_alloc(n, align); }
void *memalign(size_t align, size_t n) { return guard_alloc(n, align); }
size_t malloc_usable_size(void *p) { return p ? ((guard_head *)p - 1)->size : 0; }
