/* helpers.c - building, loading and running programs in tests. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"

int px_run_image(const pxvm_image *prog_img, const pxvm_image *const *inputs, int ninputs, pxvm_program *prog,
                 pxvm_executor **ex, pxvm_error *err)
{
    pxvm_limits lim;
    pxvm_limits_default(&lim);
    *ex = NULL;
    if (pxvm_program_from_copy(prog_img, &lim, prog, err) < 0)
        return -1;
    pxvm_open_options oo = {0, 0};
    if (pxvm_cpu_executor.open(ex, &oo, err) < 0 || pxvm_cpu_executor.load(*ex, prog, 1, err) < 0)
        goto fail;
    int k = 0;
    for (int s = 1; s < prog->nslots && k < ninputs; s++)
        if (prog->slots[s].role == PXI_ROLE_INPUT && pxvm_bind_image(&pxvm_cpu_executor, *ex, s, inputs[k++], err) < 0)
            goto fail;
    pxvm_run_options ro = {.max_steps = lim.max_steps};
    if (pxvm_cpu_executor.run(*ex, &ro, err) < 0)
        goto fail;
    return 0;
fail:
    px_close(prog, *ex);
    *ex = NULL;
    return -1;
}

int px_run_builder(pxvm_builder *b, const pxvm_image *const *inputs, int ninputs, pxvm_program *prog,
                   pxvm_executor **ex, pxvm_error *err)
{
    pxvm_image img;
    int rc = pxvm_build_finish(b, &img, err);
    pxvm_build_free(b);
    if (rc < 0)
        return -1;
    rc = px_run_image(&img, inputs, ninputs, prog, ex, err);
    pxvm_image_free(&img);
    return rc;
}

void px_close(pxvm_program *prog, pxvm_executor *ex)
{
    if (ex)
        pxvm_cpu_executor.close(ex);
    pxvm_program_free(prog);
}

pxvm_image px_read(const pxvm_program *prog, pxvm_executor *ex, int slot, int level)
{
    pxvm_image img = {0, 0, NULL};
    pxvm_error err;
    if (pxvm_read_image(&pxvm_cpu_executor, ex, prog, slot, level, 0, &img, &err) < 0)
        px_test_fail(__FILE__, __LINE__, "read slot %d level %d: %s", slot, level, err.msg);
    return img;
}

pxvm_error px_load_error(pxvm_builder *b)
{
    pxvm_error err;
    memset(&err, 0, sizeof err);
    pxvm_image img;
    pxvm_limits lim;
    pxvm_limits_default(&lim);
    if (pxvm_build_finish(b, &img, &err) == 0) {
        pxvm_program prog;
        if (pxvm_program_from_image(&img, &lim, &prog, &err) == 0) {
            pxvm_program_free(&prog);
            memset(&err, 0, sizeof err);
        }
    }
    pxvm_build_free(b);
    return err;
}

int px_build_program(pxvm_builder *b, pxvm_program *prog)
{
    pxvm_image img;
    pxvm_error err;
    pxvm_limits lim;
    pxvm_limits_default(&lim);
    int rc = pxvm_build_finish(b, &img, &err);
    pxvm_build_free(b);
    if (rc < 0 || pxvm_program_from_image(&img, &lim, prog, &err) < 0) {
        px_test_fail(__FILE__, __LINE__, "%s", err.msg);
        return -1;
    }
    return 0;
}

uint32_t px_px(const pxvm_image *img, int x, int y)
{
    const uint8_t *p = img->px + ((size_t)y * (size_t)img->w + (size_t)x) * 4u;
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

void px_set(pxvm_image *img, int x, int y, uint32_t v)
{
    if (x < 0 || y < 0 || x >= img->w || y >= img->h) { /* a twin's store past its slot: the test's failure */
        fprintf(stderr, "px_set: (%d,%d) outside the %dx%d image\n", x, y, img->w, img->h);
        abort();
    }
    uint8_t *p = img->px + ((size_t)y * (size_t)img->w + (size_t)x) * 4u;
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

uint64_t px_rand(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

pxvm_image px_random_image(int w, int h, uint64_t *state)
{
    pxvm_image img;
    pxvm_image_alloc(&img, w, h, NULL);
    for (size_t i = 0; i < (size_t)w * (size_t)h * 4u; i++)
        img.px[i] = (uint8_t)px_rand(state);
    return img;
}

int px_gather_video_program(int incremental, int at, uint32_t lod0, pxvm_program *prog)
{
    pxvm_builder b;
    pxvm_build_init(&b, 16);
    int frame = pxvm_build_slot(&b, PXI_ROLE_INPUT, "frame", 64, 64);
    int cur = pxvm_build_slot(&b, PXI_ROLE_SCRATCH, "cur", 64, 64);
    int mask = pxvm_build_slot(&b, PXI_ROLE_SCRATCH, "mask", 4, 4);
    int atlas = pxvm_build_slot(&b, PXI_ROLE_OUTPUT, "atlas", 2, 1);
    pxvm_build_persist(&b, cur);
    pxvm_build_persist(&b, atlas);
    pxvm_build_patches(&b, atlas, 2, 1, 1);
    pxvm_image t;
    pxvm_image_alloc(&t, 6, 1, NULL);
    for (int e = 0; e < 2; e++) {
        pxi_write_le(t.px + 12 * e, 0, 0, 4, (uint32_t)(at * 65536 + 32768));
        pxi_write_le(t.px + 12 * e, 1, 0, 4, (uint32_t)(at * 65536 + 32768));
        pxi_write_le(t.px + 12 * e, 2, 0, 4, e ? 0u : lod0);
    }
    int tab = pxvm_build_data_slot(&b, "tab", &t);
    pxvm_image_free(&t);
    int32_t f[PXI_MAX_FIELDS] = {0};
    f[PX_FI(DIFF, frame)] = frame, f[PX_FI(DIFF, cur)] = cur, f[PX_FI(DIFF, mask)] = mask;
    pxvm_build_insn(&b, PX_OP_DIFF, f);
    pxvm_build_insn(&b, PX_OP_UPDATE, f); /* UPDATE's operands are DIFF's, threshold aside */
    memset(f, 0, sizeof f);
    f[PX_FI(PYRAMID, slot)] = cur, f[PX_FI(PYRAMID, mask)] = incremental ? mask : 0;
    pxvm_build_insn(&b, PX_OP_PYRAMID, f);
    memset(f, 0, sizeof f);
    f[PX_FI(GATHER, src)] = cur, f[PX_FI(GATHER, dst)] = atlas, f[PX_FI(GATHER, w)] = 2, f[PX_FI(GATHER, h)] = 1;
    f[PX_FI(GATHER, table)] = tab, f[PX_FI(GATHER, mask)] = incremental ? mask : 0;
    pxvm_build_insn(&b, PX_OP_GATHER, f);
    pxvm_build_insn(&b, PX_OP_HALT, NULL);
    if (px_build_program(&b, prog) < 0)
        return -1;
    return 0;
}

/* The length of the ID at s: prefix + digits, or (prefix NULL) a letter of MVUT, '-', capitals,
 * '-', digits; not inside a longer word. 0 where none starts. */
static size_t px__spec_id_at(const char *text, const char *s, const char *prefix)
{
    if (s > text && (isalnum((unsigned char)s[-1]) || s[-1] == '-' || s[-1] == '_'))
        return 0;
    const char *p = s;
    if (prefix) {
        size_t k = strlen(prefix);
        if (strncmp(s, prefix, k))
            return 0;
        p += k;
    } else {
        if (!*p || !strchr("MVUT", *p) || p[1] != '-' || !isupper((unsigned char)p[2]))
            return 0;
        for (p += 2; isupper((unsigned char)*p); p++)
            ;
        if (*p++ != '-')
            return 0;
    }
    if (!isdigit((unsigned char)*p))
        return 0;
    while (isdigit((unsigned char)*p))
        p++;
    return isalnum((unsigned char)*p) ? 0 : (size_t)(p - s);
}

int px_spec_ids_check(const px_spec_ids *t)
{
    uint8_t *data = NULL;
    size_t len = 0;
    pxvm_error err;
    if (pxvm_read_file("isa/SPEC.md", 1 << 22, &data, &len, &err) < 0) {
        px_test_fail(__FILE__, __LINE__, "%s", err.msg);
        return 0;
    }
    char *text = realloc(data, len + 1);
    int *defined = calloc(t->n + 1, sizeof(int)), *indexed = calloc(t->n + 1, sizeof(int)), found = 0;
    if (!text || !defined || !indexed) {
        px_test_fail(__FILE__, __LINE__, "out of memory");
        if (text)
            free(text);
        else
            free(data);
        free(defined), free(indexed);
        return 0;
    }
    text[len] = 0;
    for (const char *s = text; *s; s++) {
        size_t n = px__spec_id_at(text, s, t->prefix), r = 0;
        if (!n)
            continue;
        while (r < t->n && !(strlen(t->id(r)) == n && !strncmp(t->id(r), s, n)))
            r++;
        if (r == t->n) {
            px_test_fail(__FILE__, __LINE__, "SPEC.md names %.*s, which has no edge pair in %s", (int)n, s, t->file);
        } else if (s > text && s[-1] == '[' && s[n] == ']') {
            defined[r]++, found++;
        } else if (s >= text + 2 && s[-1] == ' ' && s[-2] == '|' && (s - 2 == text || s[-3] == '\n')) {
            indexed[r]++;
            if (t->row)
                t->row(r, s + n);
        }
        s += n - 1;
    }
    for (size_t r = 0; r < t->n; r++) {
        if (defined[r] != 1)
            px_test_fail(__FILE__, __LINE__, "%s (its pair in %s) is defined %d times in SPEC.md (1 wanted)", t->id(r), t->file,
                         defined[r]);
        if (indexed[r] != 1)
            px_test_fail(__FILE__, __LINE__, "%s (its pair in %s) has %d index rows in SPEC.md (1 wanted)", t->id(r), t->file,
                         indexed[r]);
    }
    free(text), free(defined), free(indexed);
    return found;
}

int px_spec_row_is(const char *id, const char *rest, const char *cls, const char *code)
{
    char c[32] = "", k[64] = "";
    int got = sscanf(rest, " | %31[a-z] | `%63[A-Z_0-9]`", c, k);
    if (got < 1 || strcmp(c, cls) || (code && (got < 2 || strcmp(k, code)))) {
        px_test_fail(__FILE__, __LINE__, "SPEC.md: the index row of %s gives '%s', `%s`; its pair shows '%s', `%s`", id, c, k,
                     cls, code ? code : "(any)");
        return -1;
    }
    return 0;
}

const pxvm_executor_ops *px_test_executor(void)
{
    const char *name = getenv("PXVM_TEST_EXECUTOR");
    pxvm_error err;
    const pxvm_executor_ops *ops = pxvm_executor_find(name && *name ? name : "cpu", &err);
    if (!ops)
        px_test_fail(__FILE__, __LINE__, "%s", err.msg);
    return ops;
}
