/* The model backend: nothing runs and nothing is measured; the engine's cost model
 * gives every time. Beside it, every backend kind's name and what `auto` resolves to
 * (what each can run: backend_caps.c). */
#include "backends.h"

#include <stdio.h>
#include <stdlib.h>

const char *const pkv_backend_names[] = {"auto", "model", "cpu", "cuda", NULL};

pkv_backend_kind pkv_backend_resolve(pkv_backend_kind k) {
    if (k != PKV_BACKEND_AUTO) return k;
    return pkvk_device_count() > 0 ? PKV_BACKEND_CUDA : PKV_BACKEND_MODEL;
}

void pkv_backend_device_name(pkv_backend_kind k, char *name, size_t n) {
    pkvk_device_info dev = {.name = "none"};
    if (pkv_backend_resolve(k) == PKV_BACKEND_CUDA) pkvk_device_info_get(&dev);
    snprintf(name, n, "%s", dev.name);
}

static int model_prepare(pkv_backend *b, const pkv_batch_view *v, pkv_err *e) {
    return 0;
}

static int model_run(pkv_backend *b, const pkv_batch_view *v, const pkvk_plan *plan, int check,
                     pkv_step_rec *rec, pkv_err *e) {
    return 0; /* the engine already filled the predicted time and counters */
}

static void model_destroy(pkv_backend *b) {
    free(b);
}

pkv_backend *pkv_backend_model_create(void) {
    pkv_backend *b = malloc(sizeof *b);
    if (b)
        *b = (pkv_backend){.name = "model",
                           .measures = 0,
                           .prepare = model_prepare,
                           .run = model_run,
                           .destroy = model_destroy};
    return b;
}
