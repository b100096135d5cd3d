#include "pkv_heap.h"

#include <stdlib.h>

static int before(const pkv_event *a, const pkv_event *b) {
    return a->t < b->t || (a->t == b->t && a->seq < b->seq);
}

void pkv_heap_init(pkv_heap *h) {
    *h = (pkv_heap){0};
}

void pkv_heap_free(pkv_heap *h) {
    free(h->ev);
    *h = (pkv_heap){0};
}

int pkv_heap_push(pkv_heap *h, double t, int kind, int64_t arg) {
    if (h->n == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : 64;
        pkv_event *ev = realloc(h->ev, cap * sizeof *ev);
        if (!ev) return -1;
        h->ev = ev;
        h->cap = cap;
    }
    pkv_event e = {t, h->next_seq++, kind, arg};
    size_t i = h->n++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!before(&e, &h->ev[parent])) break;
        h->ev[i] = h->ev[parent];
        i = parent;
    }
    h->ev[i] = e;
    return 0;
}

int pkv_heap_pop(pkv_heap *h, pkv_event *out) {
    if (h->n == 0) return -1;
    *out = h->ev[0];
    pkv_event last = h->ev[--h->n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= h->n) break;
        if (c + 1 < h->n && before(&h->ev[c + 1], &h->ev[c])) c++;
        if (!before(&h->ev[c], &last)) break;
        h->ev[i] = h->ev[c];
        i = c;
    }
    if (h->n > 0) h->ev[i] = last;
    return 0;
}

const pkv_event *pkv_heap_top(const pkv_heap *h) {
    return h->n ? &h->ev[0] : NULL;
}
