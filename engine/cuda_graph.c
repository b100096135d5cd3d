/* The cuda backend's CUDA graphs (run.cuda_graph): a full model's, one per (route, rows
 * bucket, merge), captured at first use and replayed after, kept here; the study layer's
 * one, captured every step (backend_cuda.c), freed here (cuda_parts.h). */
#include "cuda_parts.h"

#include <stdlib.h>

int32_t cuda_graph_rows(int32_t rows, int32_t cap) {
    int32_t r = rows <= 1 ? 1 : rows <= 2 ? 2 : rows <= 4 ? 4 : (rows + 7) / 8 * 8;
    return r < cap ? r : cap;
}

static int graph_buckets(int32_t cap) {
    return 3 + (cap + 7) / 8;
}

/* Room for the routes a fixed grid runs (the ones pkv_backend_graph_routes names for a
 * full model), with and without merge. */
static int graph_slots(int32_t cap) {
    return __builtin_popcount(pkv_routes_in_graph(PKV_GRAPH_FIXED)) * 2 * graph_buckets(cap);
}

pkvk_graph **cuda_graph_slot(cuda_backend *b, const pkvk_plan *plan, int32_t rows) {
    const unsigned fixed = pkv_routes_in_graph(PKV_GRAPH_FIXED);
    if (!(fixed >> plan->route & 1)) return NULL;
    const int r = __builtin_popcount(fixed & ((1u << plan->route) - 1));
    const int k = rows == 1 ? 0 : rows == 2 ? 1 : rows <= 4 ? 2 : 2 + (rows + 7) / 8;
    return &b->graphs[(r * graph_buckets(b->cap_rows) + k) * 2 + pkvk_plan_merges(plan)];
}

int cuda_graphs_make(cuda_backend *b) {
    b->graphs = calloc((size_t)graph_slots(b->cap_rows), sizeof *b->graphs);
    return b->graphs ? 0 : -1;
}

void cuda_graphs_free(cuda_backend *b) {
    pkvk_graph_destroy(b->graph);
    for (int k = 0; b->graphs && k < graph_slots(b->cap_rows); k++)
        pkvk_graph_destroy(b->graphs[k]);
    free(b->graphs);
}
