/* fuzz_resolve: any-size programs (SPEC "Any-size inputs") resolved at hostile sizes. The first 4
 * bytes are the size to bind (u16 w, u16 h, 0 meaning 65536), the rest the program's pixels as
 * fuzz_validate reads them; every any-size slot of a valid program is checked against its bounds
 * and, where they allow it, the program is resolved at that size (scaled operands out of int32,
 * LODs at their clamps, a resolution the validator refuses) and the resolution printed; it aborts
 * where the derived resolution (pxvm_program_resolve) and the parsed one differ. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 5)
        return 0;
    int w = data[0] | data[1] << 8, h = data[2] | data[3] << 8;
    w = w ? w : 65536;
    h = h ? h : 65536;
    pxvm_limits lim = px_fuzz_limits();
    pxvm_image img;
    pxvm_error err;
    pxvm_program prog;
    char buf[1024];
    if (px_fuzz_raw_image(data + 4, size - 4, &img) < 0)
        return 0;
    if (pxvm_program_from_image(&img, &lim, &prog, &err) < 0)
        return 0;
    static int wh[2 * (PXVM_MAX_SLOTS + 1)];
    int ok = 1;
    for (int k = 0; k < prog.nslots; k++) {
        wh[2 * k] = wh[2 * k + 1] = 0;
        if (prog.slots[k].flags & PXI_SLOT_ANYSIZE) {
            wh[2 * k] = w, wh[2 * k + 1] = h;
            if (pxvm_anysize_check(&prog, k, w, h, &err) < 0) {
                pxvm_error_format(&err, buf, sizeof buf);
                ok = 0;
            }
        }
    }
    pxvm_program res, parsed;
    pxvm_error err2;
    int rc = ok ? pxvm_program_resolve(&prog, wh, &lim, &res, &err) : -1;
    /* the derived resolution equals the parsed one: program or error */
    int rc2 = ok ? pxvm_program_resolve_parsed(&prog, wh, &lim, &parsed, &err2) : -1;
    char what[64];
    if (rc != rc2 || (rc < 0 && ok && (err.code != err2.code || strcmp(err.msg, err2.msg))) ||
        (rc == 0 && pxvm_program_diff(&res, &parsed, what, sizeof what)))
        abort();
    if (rc2 == 0)
        pxvm_program_free(&parsed);
    if (rc == 0) {
        for (uint32_t i = 0; i < res.ninsns; i++)
            pxvm_insn_format(&res, &res.insns[i], buf, sizeof buf);
        pxvm_program_free(&res);
    } else if (ok) {
        pxvm_error_format(&err, buf, sizeof buf);
    }
    pxvm_program_free(&prog);
    return 0;
}
