/* fuzz_pxbatch: pxbatch's file handling (tools/pxbatch.h) from bytes. The first byte picks
 * the parser, the rest is its input: 0 a list file, 1 a shard marker (its names hashed, its job
 * compared with itself), 2 an .npy header, 3 a file name written as JSON and read back, which must
 * parse as strict JSON and give the same bytes. */
#define _GNU_SOURCE /* fmemopen, open_memstream, strndup */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../tools/pxbatch.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    int mode = data[0] % 4;
    data++, size--;
    char why[512];
    if (mode == 0) {
        char *copy = size ? malloc(size) : NULL;
        FILE *f = copy ? fmemopen(memcpy(copy, data, size), size, "r") : NULL;
        if (f) {
            pxb_names l = {0};
            if (pxb_list_read(f, &l, why, sizeof why) == 0)
                for (size_t i = 0; i < l.n; i++)
                    if (!l.v[i][0])
                        abort(); /* empty lines are skipped */
            pxb_names_free(&l);
            fclose(f);
        }
        free(copy);
    } else if (mode == 1) {
        pxb_marker m;
        if (pxb_marker_parse((const char *)data, size, -1, &m, why, sizeof why) == 0) {
            pxb_sha256 c;
            pxb_sha256_init(&c);
            char buf[256];
            if (pxb_marker_hash_names(&m, &c) < 0 || pxb_job_diff(m.job, m.job, buf, sizeof buf) != 0 ||
                m.first + m.count > m.inputs || m.nrows + m.nerrors != m.count)
                abort();
            pxb_marker_free(&m);
        }
    } else if (mode == 2) {
        int ndim;
        uint64_t shape[8];
        size_t off;
        if (pxb_npy_header(data, size, &ndim, shape, &off, why, sizeof why) == 0 && (off > size || ndim > 8))
            abort();
    } else {
        char *name = strndup((const char *)data, size);
        char *text = NULL;
        size_t len = 0;
        FILE *f = name ? open_memstream(&text, &len) : NULL;
        if (f) {
            fputc('{', f);
            pxb_json_name(f, "file", name);
            fputc('}', f);
            fclose(f);
            json_error_t jerr;
            json_t *obj = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
            if (!obj)
                abort(); /* any bytes make valid JSON */
            char *back = pxb_json_get_name(obj, "file");
            if (name[0] ? !back || strcmp(back, name) : back != NULL)
                abort(); /* and come back as the same bytes */
            free(back);
            json_decref(obj);
        }
        free(text);
        free(name);
    }
    return 0;
}
