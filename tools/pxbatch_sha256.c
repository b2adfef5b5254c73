/* pxbatch_sha256.c - SHA-256 (FIPS 180-4) for pxbatch's markers: the hash of a shard's .npy and of
 * a job's program and input names. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "pxbatch_files.h"

/* ---- SHA-256 -------------------------------------------------------------------------------- */

static const uint32_t px__k[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5, 0xd807aa98, 0x12835b01,
    0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc,
    0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147,
    0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116, 0x1e376c08,
    0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208,
    0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

#define PX_ROR(x, n) (((x) >> (n)) | ((x) << (32 - (n))))

static void px__sha_block(uint32_t h[8], const uint8_t *p)
{
    uint32_t w[64];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 | (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = PX_ROR(w[i - 15], 7) ^ PX_ROR(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = PX_ROR(w[i - 2], 17) ^ PX_ROR(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], k = h[7];
    for (int i = 0; i < 64; i++) {
        uint32_t t1 = k + (PX_ROR(e, 6) ^ PX_ROR(e, 11) ^ PX_ROR(e, 25)) + ((e & f) ^ (~e & g)) + px__k[i] + w[i];
        uint32_t t2 = (PX_ROR(a, 2) ^ PX_ROR(a, 13) ^ PX_ROR(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
        k = g, g = f, f = e, e = d + t1, d = c, c = b, b = a, a = t1 + t2;
    }
    h[0] += a, h[1] += b, h[2] += c, h[3] += d, h[4] += e, h[5] += f, h[6] += g, h[7] += k;
}

/* n blocks with the x86 SHA extensions (Intel's SHA-NI: sha256rnds2 does two rounds, msg1 and
 * msg2 the message schedule; about 5x the portable rounds): the .npy of a shard is hashed whole,
 * on the worker, and was a sixth of a dynamic pxbatch run's time. The same bits as px__sha_block
 * (tests/python/test_pxbatch_dynamic.py checks a shard's hash against hashlib's). */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#include <immintrin.h>
#define PX_SHA_NI 1
__attribute__((target("sha,sse4.1,ssse3"))) static void px__sha_blocks_ni(uint32_t h[8], const uint8_t *p, size_t n)
{
    const __m128i bswap = _mm_set_epi64x(0x0c0d0e0f08090a0bLL, 0x0405060700010203LL);
    __m128i t = _mm_loadu_si128((const __m128i *)(const void *)&h[0]);
    __m128i s1 = _mm_loadu_si128((const __m128i *)(const void *)&h[4]);
    t = _mm_shuffle_epi32(t, 0xB1);           /* CDAB */
    s1 = _mm_shuffle_epi32(s1, 0x1B);         /* EFGH */
    __m128i s0 = _mm_alignr_epi8(t, s1, 8);   /* ABEF */
    s1 = _mm_blend_epi16(s1, t, 0xF0);        /* CDGH */
    for (; n; n--, p += 64) {
        __m128i abef = s0, cdgh = s1, w[4];
        for (int i = 0; i < 16; i++) { /* rounds 4i .. 4i + 3 */
            __m128i m;
            if (i < 4)
                m = w[i] = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(const void *)(p + 16 * i)), bswap);
            else { /* W[t] = s1(W[t-2]) + W[t-7] + s0(W[t-15]) + W[t-16], four at a time */
                m = _mm_sha256msg1_epu32(w[i & 3], w[(i + 1) & 3]);
                m = _mm_add_epi32(m, _mm_alignr_epi8(w[(i + 3) & 3], w[(i + 2) & 3], 4));
                m = w[i & 3] = _mm_sha256msg2_epu32(m, w[(i + 3) & 3]);
            }
            m = _mm_add_epi32(m, _mm_loadu_si128((const __m128i *)(const void *)&px__k[4 * i]));
            s1 = _mm_sha256rnds2_epu32(s1, s0, m);
            s0 = _mm_sha256rnds2_epu32(s0, s1, _mm_shuffle_epi32(m, 0x0E));
        }
        s0 = _mm_add_epi32(s0, abef);
        s1 = _mm_add_epi32(s1, cdgh);
    }
    t = _mm_shuffle_epi32(s0, 0x1B);          /* FEBA */
    s1 = _mm_shuffle_epi32(s1, 0xB1);         /* DCHG */
    s0 = _mm_blend_epi16(t, s1, 0xF0);        /* DCBA */
    s1 = _mm_alignr_epi8(s1, t, 8);           /* HGFE */
    _mm_storeu_si128((__m128i *)(void *)&h[0], s0);
    _mm_storeu_si128((__m128i *)(void *)&h[4], s1);
}
#endif

/* n whole blocks: with the SHA extensions where the CPU has them, else the portable rounds. */
static void px__sha_blocks(uint32_t h[8], const uint8_t *p, size_t n)
{
#ifdef PX_SHA_NI
    static int have = -1; /* a benign race: every thread finds the same answer */
    if (have < 0) { /* CPUID: leaf 7 EBX bit 29 (SHA), leaf 1 ECX bits 19 (SSE4.1) and 9 (SSSE3); by
                     * hand, as clang 14 knows no "sha" for __builtin_cpu_supports */
        unsigned a, b, c, d;
        int sha = __get_cpuid_count(7, 0, &a, &b, &c, &d) && (b >> 29 & 1u);
        have = sha && __get_cpuid(1, &a, &b, &c, &d) && (c >> 19 & 1u) && (c >> 9 & 1u) ? 1 : 0;
    }
    if (have) {
        px__sha_blocks_ni(h, p, n);
        return;
    }
#endif
    for (; n; n--, p += 64)
        px__sha_block(h, p);
}

void pxb_sha256_init(pxb_sha256 *c)
{
    static const uint32_t h0[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    memcpy(c->h, h0, sizeof h0);
    c->bytes = 0;
    c->fill = 0;
}

void pxb_sha256_update(pxb_sha256 *c, const void *data, size_t len)
{
    const uint8_t *p = data;
    c->bytes += len;
    if (c->fill) {
        size_t take = 64 - c->fill < len ? 64 - c->fill : len;
        memcpy(c->buf + c->fill, p, take);
        c->fill += take, p += take, len -= take;
        if (c->fill < 64)
            return;
        px__sha_blocks(c->h, c->buf, 1);
        c->fill = 0;
    }
    px__sha_blocks(c->h, p, len / 64);
    p += len / 64 * 64, len %= 64;
    memcpy(c->buf, p, len);
    c->fill = len;
}

void pxb_sha256_hex(pxb_sha256 *c, char hex[65])
{
    uint64_t bits = c->bytes * 8u;
    uint8_t pad[72] = {0x80};
    size_t n = (c->fill < 56 ? 56 : 120) - c->fill;
    for (int i = 0; i < 8; i++)
        pad[n + (size_t)i] = (uint8_t)(bits >> (56 - 8 * i));
    pxb_sha256_update(c, pad, n + 8);
    for (int i = 0; i < 8; i++)
        snprintf(hex + 8 * i, 9, "%08" PRIx32, c->h[i]);
}

void pxb_sha256_of(const void *data, size_t len, char hex[65])
{
    pxb_sha256 c;
    pxb_sha256_init(&c);
    pxb_sha256_update(&c, data, len);
    pxb_sha256_hex(&c, hex);
}
