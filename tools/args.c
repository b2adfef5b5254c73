/* args.c - the command-line tools' values of options (args.h). */
#include "args.h"

#include <errno.h>
#include <stdlib.h>

int px_parse_u64(const char *s, uint64_t *v)
{
    char *end;
    errno = 0;
    unsigned long long x = strtoull(s, &end, 10);
    if (!*s || *end || errno || s[0] == '-')
        return -1;
    *v = x;
    return 0;
}
