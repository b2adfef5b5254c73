/* golden.c - see golden.h. */
#define _GNU_SOURCE /* asprintf, open_memstream */
#include "golden.h"

#include <stdlib.h>
#include <string.h>

#include "../../isa/px_sem.h"

int px_golden_state_report(const pxvm_executor_ops *ops, pxvm_executor *ex, const pxvm_program *prog, FILE *out,
                           pxvm_error *err)
{
    if (!prog->uses_fixation)
        return 0;
    int32_t fix[PX_FIX_REGS * 2];
    if (ops->read_state(ex, PXVM_STATE_FIXATIONS, 0, 0, 1, fix, -1, err) < 0)
        return -1;
    fprintf(out, "FIX %016llx\n", (unsigned long long)pxvm_hash64(fix, sizeof fix));
    char lb[16];
    for (int k = 0; k < prog->nslots; k++) {
        if (prog->geom_base[k] < 0)
            continue;
        size_t n = (size_t)prog->slots[k].patch_count * PX_GEOM_INTS;
        int32_t *g = malloc(sizeof(int32_t) * n);
        if (!g || ops->read_state(ex, PXVM_STATE_GEOMETRY, k, 0, 1, g, -1, err) < 0) {
            free(g);
            return g ? -1 : pxvm_fail(err, PXE_NOMEM, -1, -1, 0ull);
        }
        fprintf(out, "GEOM %s %016llx\n", pxvm_slot_label(prog, k, lb), (unsigned long long)pxvm_hash64(g, sizeof(int32_t) * n));
        free(g);
    }
    return 0;
}

char *px_golden_run(const pxvm_executor_ops *ops, pxvm_executor *ex, const pxvm_program *prog, const int *slots,
                    const pxvm_image *const *inputs, int ninputs, const int32_t *fix, px_golden_stats *stats)
{
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    if (!out)
        return NULL;
    pxvm_error err;
    memset(&err, 0, sizeof err);
    pxvm_limits lim;
    pxvm_limits_default(&lim);
    pxvm_run_options ro = {.max_steps = lim.max_steps};
    int rc = ops->load(ex, prog, 1, &err);
    for (int i = 0; rc == 0 && i < ninputs; i++)
        rc = pxvm_bind_image(ops, ex, slots[i], inputs[i], &err);
    if (rc == 0 && fix)
        rc = ops->set_fixations(ex, 0, 1, 0, PX_FIX_REGS, fix, -1, &err);
    if (rc == 0)
        rc = ops->run(ex, &ro, &err);
    if (rc == 0)
        rc = pxvm_hash_report(ops, ex, prog, out, &err);
    if (rc == 0)
        rc = px_golden_state_report(ops, ex, prog, out, &err);
    if (rc < 0) {
        char buf[1024];
        pxvm_error_format(&err, buf, sizeof buf);
        fprintf(out, "error: %s\n", buf);
    } else if (stats) {
        for (int k = 0; k < prog->nslots; k++)
            for (int l = 0; l < prog->slots[k].levels; l++) {
                stats->outputs++;
                stats->bytes += 4ull * (unsigned long long)px_mip_dim(prog->slots[k].w, l) *
                                (unsigned long long)px_mip_dim(prog->slots[k].h, l);
            }
    }
    fclose(out);
    if (stats)
        stats->programs++;
    return text;
}

char *px_golden_run_line(const pxvm_executor_ops *ops, pxvm_executor *ex, const char *line, px_golden_stats *stats)
{
    char buf[2048], *save = NULL;
    snprintf(buf, sizeof buf, "%s", line);
    char *path = strtok_r(buf, " \n", &save);
    pxvm_limits lim;
    pxvm_limits_default(&lim);
    pxvm_program prog;
    pxvm_error err;
    pxvm_image images[8];
    const pxvm_image *inputs[8];
    int slots[8], n = 0;
    char *text = NULL;
    if (!path || pxvm_program_load(path, &lim, &prog, &err) < 0) {
        char msg[1200];
        pxvm_error_format(&err, msg, sizeof msg);
        if (asprintf(&text, "error: %s\n", path ? msg : "empty line") < 0)
            text = NULL;
        return text;
    }
    for (char *tok; n < 8 && (tok = strtok_r(NULL, " \n", &save));) {
        char *arg = strtok_r(NULL, " \n", &save), *eq = arg ? strchr(arg, '=') : NULL;
        if (strcmp(tok, "--in") || !eq)
            break;
        *eq = 0;
        slots[n] = pxvm_slot_lookup(&prog, arg);
        if (slots[n] < 0 || pxvm_png_load(eq + 1, &lim, &images[n], &err) < 0)
            break;
        inputs[n] = &images[n];
        n++;
    }
    text = px_golden_run(ops, ex, &prog, slots, inputs, n, NULL, stats);
    for (int i = 0; i < n; i++)
        pxvm_image_free(&images[i]);
    pxvm_program_free(&prog);
    return text;
}

int px_golden_check(const char *path, px_golden_producer produce, void *ctx, px_golden_stats *stats, FILE *log)
{
    uint8_t *data;
    size_t len;
    pxvm_error err;
    if (pxvm_read_file(path, 1u << 26, &data, &len, &err) < 0) {
        if (log)
            fprintf(log, "%s\n", err.msg);
        return -1;
    }
    char *text = realloc(data, len + 1);
    text[len] = 0;
    for (char *sec = strstr(text, "== "); sec; sec = strstr(sec + 1, "\n== ")) {
        char *name = sec[0] == '\n' ? sec + 4 : sec + 3, *eol = strchr(name, '\n');
        if (!eol)
            break;
        char *next = strstr(eol, "\n== ");
        size_t body = next ? (size_t)(next + 1 - (eol + 1)) : strlen(eol + 1);
        char section[1024];
        snprintf(section, sizeof section, "%.*s", (int)(eol - name), name);
        char *got = produce(section, ctx, stats);
        stats->sections++;
        if (!got || strlen(got) != body || memcmp(got, eol + 1, body)) {
            stats->differences++;
            if (log) {
                fprintf(log, "DIFFERENT: %s\n  expected:\n%.*s  got:\n%s", section, (int)body, eol + 1,
                        got ? got : "(no such case)\n");
            }
        }
        free(got);
    }
    free(text);
    return 0;
}
