/* test_goldens.c - every program in tests/golden/programs.txt, run on the CPU executor, gives
 * exactly the hashes in tests/golden/goldens.txt (every level of every slot). */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>

#include "test.h"

/* Runs one "PROGRAM [--in SLOT=IMAGE]..." line and returns its hash report (caller frees). */
static char *px__report(const char *line)
{
    char buf[1024], *save = NULL;
    snprintf(buf, sizeof buf, "%s", line);
    char *path = strtok_r(buf, " \n", &save);
    pxvm_limits lim;
    pxvm_limits_default(&lim);
    pxvm_program prog;
    pxvm_error err;
    if (pxvm_program_load(path, &lim, &prog, &err) < 0) {
        px_test_fail(__FILE__, __LINE__, "%s: %s", path, err.msg);
        return NULL;
    }
    pxvm_executor *ex;
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    CHECK(pxvm_cpu_executor.open(&ex, NULL, &err) == 0 && pxvm_cpu_executor.load(ex, &prog, &err) == 0);
    for (char *tok; (tok = strtok_r(NULL, " \n", &save));) {
        char *arg = strtok_r(NULL, " \n", &save);
        char *eq = arg ? strchr(arg, '=') : NULL;
        CHECK(!strcmp(tok, "--in") && eq);
        if (!eq)
            break;
        *eq = 0;
        pxvm_image img;
        CHECK(pxvm_png_load(eq + 1, &lim, &img, &err) == 0);
        CHECK(pxvm_cpu_executor.bind(ex, pxvm_slot_lookup(&prog, arg), &img, &err) == 0);
        pxvm_image_free(&img);
    }
    pxvm_run_options ro = {lim.max_steps, NULL, NULL};
    if (pxvm_cpu_executor.run(ex, &ro, &err) < 0)
        px_test_fail(__FILE__, __LINE__, "%s: %s", path, err.msg);
    else
        CHECK(pxvm_hash_report(&pxvm_cpu_executor, ex, &prog, mem, &err) == 0);
    fclose(mem);
    pxvm_cpu_executor.close(ex);
    pxvm_program_free(&prog);
    return text;
}

TEST(goldens_every_output_of_every_program)
{
    uint8_t *data;
    size_t len;
    pxvm_error err;
    if (pxvm_read_file("tests/golden/goldens.txt", 1 << 24, &data, &len, &err) < 0) {
        px_test_fail(__FILE__, __LINE__, "%s", err.msg);
        return;
    }
    char *text = realloc(data, len + 1);
    text[len] = 0;
    int programs = 0;
    /* sections: "== LINE" followed by its hash lines */
    for (char *sec = strstr(text, "\n== "); sec; sec = strstr(sec + 1, "\n== ")) {
        char *line = sec + 4, *eol = strchr(line, '\n');
        char *next = strstr(line, "\n== ");
        size_t body_len = next ? (size_t)(next + 1 - (eol + 1)) : strlen(eol + 1);
        char cmd[1024];
        snprintf(cmd, sizeof cmd, "%.*s", (int)(eol - line), line);
        char *got = px__report(cmd);
        if (got && (strlen(got) != body_len || memcmp(got, eol + 1, body_len)))
            px_test_fail(__FILE__, __LINE__, "%s: outputs differ from the goldens:\n%s", cmd, got);
        free(got);
        programs++;
    }
    CHECK_EQ(programs, 3);
    free(text);
}
