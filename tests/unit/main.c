/* main.c - the test runner. */
#include <stdarg.h>
#include <stdlib.h>

#include "test.h"

#define PX_MAX_TESTS 512
static struct {
    const char *name;
    px_test_fn fn;
} px__tests[PX_MAX_TESTS];
static int px__ntests, px__failed_checks;

void px_test_register(const char *name, px_test_fn fn)
{
    if (px__ntests < PX_MAX_TESTS) {
        px__tests[px__ntests].name = name;
        px__tests[px__ntests].fn = fn;
        px__ntests++;
    }
}

void px_test_fail(const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "  %s:%d: ", file, line);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    px__failed_checks++;
}

static int px__cmp(const void *a, const void *b)
{
    return strcmp(((const char *const *)a)[0], ((const char *const *)b)[0]);
}

int main(int argc, char **argv)
{
    const char *filter = argc > 1 ? argv[1] : NULL;
    int passed = 0, failed = 0;
    /* constructors run in link order; sort for a stable report */
    qsort(px__tests, (size_t)px__ntests, sizeof px__tests[0], px__cmp);
    for (int i = 0; i < px__ntests; i++) {
        if (filter && !strstr(px__tests[i].name, filter))
            continue;
        int before = px__failed_checks;
        px__tests[i].fn();
        if (px__failed_checks == before) {
            passed++;
            printf("ok   %s\n", px__tests[i].name);
        } else {
            failed++;
            printf("FAIL %s\n", px__tests[i].name);
        }
        fflush(stdout);
    }
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
