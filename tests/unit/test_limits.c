/* test_limits.c - resource limits: a tiny PNG that declares a huge image is rejected from its
 * header, before anything is allocated or inflated; the limits are the ones users set. */
#include <stdlib.h>
#include <sys/resource.h>
#include <zlib.h>

#include "test.h"

static void px__chunk(uint8_t **p, const char *type, const uint8_t *data, uint32_t len)
{
    uint8_t *q = *p;
    q[0] = (uint8_t)(len >> 24), q[1] = (uint8_t)(len >> 16), q[2] = (uint8_t)(len >> 8), q[3] = (uint8_t)len;
    memcpy(q + 4, type, 4);
    if (len)
        memcpy(q + 8, data, len);
    uint32_t crc = (uint32_t)crc32(0, q + 4, len + 4);
    q[8 + len] = (uint8_t)(crc >> 24), q[9 + len] = (uint8_t)(crc >> 16), q[10 + len] = (uint8_t)(crc >> 8);
    q[11 + len] = (uint8_t)crc;
    *p = q + 12 + len;
}

/* A PNG whose header says w x h RGBA at `depth` bits, with one small IDAT of compressed zeros
 * (it would inflate to far more than its size if anything tried). */
static size_t px__bomb(uint8_t *out, uint32_t w, uint32_t h, int depth)
{
    uint8_t *p = out;
    memcpy(p, "\x89PNG\r\n\x1a\n", 8);
    p += 8;
    uint8_t ihdr[13] = {(uint8_t)(w >> 24), (uint8_t)(w >> 16), (uint8_t)(w >> 8), (uint8_t)w,
                        (uint8_t)(h >> 24), (uint8_t)(h >> 16), (uint8_t)(h >> 8), (uint8_t)h,
                        (uint8_t)depth, 6, 0, 0, 0};
    px__chunk(&p, "IHDR", ihdr, 13);
    static uint8_t zeros[1 << 20];
    uint8_t z[4096];
    uLongf zl = sizeof z;
    compress2(z, &zl, zeros, sizeof zeros, 9); /* 1 MiB of zeros in about 1 KiB */
    px__chunk(&p, "IDAT", z, (uint32_t)zl);
    px__chunk(&p, "IEND", NULL, 0);
    return (size_t)(p - out);
}

static long px__rss_kb(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

TEST(limits_png_bomb_rejected_before_allocation)
{
    static uint8_t buf[8192];
    pxvm_limits lim;
    pxvm_limits_default(&lim);
    pxvm_image img;
    pxvm_error err;
    long before = px__rss_kb();
    /* 16384 x 16384 16-bit RGBA: 2 GiB of raw samples, 1 GiB decoded, in about 1 KiB */
    size_t n = px__bomb(buf, 16384, 16384, 16);
    CHECK(n < 2048);
    lim.max_memory = 256u << 20;
    CHECK(pxvm_png_decode(buf, n, "bomb.png", &lim, &img, &err) < 0);
    CHECK_EQ(err.code, PXE_IMAGE_MEMORY);
    CHECK_STR(err.msg, "'bomb.png' is 16384x16384, 1073741824 bytes decoded; the limit is 268435456");
    /* a side beyond the limit: rejected the same way, whatever the memory limit */
    n = px__bomb(buf, 100000, 100000, 8);
    lim.max_memory = 1ull << 40;
    CHECK(pxvm_png_decode(buf, n, "wide.png", &lim, &img, &err) < 0);
    CHECK_EQ(err.code, PXE_IMAGE_SIDE);
    CHECK_STR(err.msg, "'wide.png' is 100000x100000; sides must be 1..16384");
    /* nothing big was allocated on the way */
    CHECK(px__rss_kb() - before < 64 * 1024);
    /* within the limits, the same tiny file is decoded as far as its data goes, then rejected
     * as truncated, cleanly */
    n = px__bomb(buf, 600, 400, 16);
    lim.max_memory = 1u << 30;
    CHECK(pxvm_png_decode(buf, n, "short.png", &lim, &img, &err) < 0);
    CHECK_EQ(err.cls, PXVM_MALFORMED);
}

TEST(limits_every_limit_has_a_flag)
{
    /* the defaults stated in docs/cli.md and isa/SPEC.md */
    pxvm_limits lim;
    pxvm_limits_default(&lim);
    CHECK_EQ(lim.max_side, 16384u);
    CHECK_EQ(lim.max_memory, 1ull << 30);
    CHECK_EQ(lim.max_insns, 1u << 20);
    CHECK_EQ(lim.max_steps, 1ull << 24);
    /* and pxrun takes each of them */
    char out[4096];
    const char *bin = getenv("PXVM_BIN");
    char cmd[512];
    snprintf(cmd, sizeof cmd,
             "%s/pxrun programs/foveate273.pxi --in image=programs/data/chelsea.png --max-side 400 2>&1",
             bin && *bin ? bin : "bin");
    FILE *p = popen(cmd, "r");
    size_t n = p ? fread(out, 1, sizeof out - 1, p) : 0;
    out[n] = 0;
    if (p)
        pclose(p);
    CHECK_STR(out, "slot 1 ('image') is 451x300; sides must be 1..400 (see --max-side)");
    snprintf(cmd, sizeof cmd, "%s/pxrun programs/foveate273.pxi --max-memory 100000 2>&1", bin && *bin ? bin : "bin");
    p = popen(cmd, "r");
    n = p ? fread(out, 1, sizeof out - 1, p) : 0;
    out[n] = 0;
    if (p)
        pclose(p);
    CHECK_STR(out, "the limit is 100000 (see --max-memory)");
}
