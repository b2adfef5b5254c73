/* policy.c - resolution policies at the API's front door: an image fitted to a size by a policy,
 * the size the dynamic policy gives, a policy's canonical text (vm/policy.c parses them). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../vm/resize.h"
#include "internal.h"

int pxvm_image_fit_channels(const uint8_t *px, int w, int h, int channels, int out_w, int out_h, const char *policy,
                            uint8_t **out)
{
    pxvm_error err;
    px_policy pol;
    if (!px || !out || w < 1 || h < 1 || out_w < 1 || out_h < 1)
        return px__refuse(PXE_FIT_ARGS);
    if (channels != 1 && channels != 3 && channels != 4) {
        return px__refuse(PXE_FIT_CHANNELS, channels);
    }
    if (px_policy_parse(policy, &pol, &err) < 0)
        return px__fail(&err);
    pol.threads = -1; /* one image at a time from the caller: a large one's resize takes the cores */
    pxvm_image dst;
    if (px_resize_policy_px(px, w, h, channels, out_w, out_h, &pol, &dst, &err) < 0)
        return px__fail(&err);
    *out = dst.px;
    return 0;
}

int pxvm_image_fit(const uint8_t *rgba, int w, int h, int out_w, int out_h, const char *policy, uint8_t **out)
{
    return pxvm_image_fit_channels(rgba, w, h, 4, out_w, out_h, policy, out);
}

int pxvm_policy_dynamic_size(const char *policy, int patch, int w, int h, int *out_w, int *out_h)
{
    pxvm_error err;
    px_policy pol;
    if (!out_w || !out_h || w < 1 || h < 1 || patch < 1 || patch > 256)
        return px__refuse(PXE_DYNAMIC_SIZE_ARGS);
    if (px_policy_parse(policy, &pol, &err) < 0)
        return px__fail(&err);
    if (pol.kind != PX_POLICY_DYNAMIC)
        return px__refuse(PXE_DYNAMIC_SIZE_KIND);
    if (px_policy_dynamic_patch(&pol, patch, &err) < 0 || px_dynamic_size(&pol, w, h, out_w, out_h, &err) < 0)
        return px__fail(&err);
    return 0;
}

int pxvm_policy_canonical(const char *policy, char *buf, size_t len)
{
    pxvm_error err;
    px_policy pol;
    char tmp[160];
    if (!buf)
        return px__refuse(PXE_CANONICAL_NULL);
    if (px_policy_parse(policy, &pol, &err) < 0)
        return px__fail(&err);
    px_policy_format(&pol, tmp, sizeof tmp);
    if (strlen(tmp) >= len)
        return px__refuse(PXE_CANONICAL_SHORT);
    memcpy(buf, tmp, strlen(tmp) + 1);
    return 0;
}
