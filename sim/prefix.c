#include "prefix.h"
#include "pkv_assert.h"

#include <stdlib.h>

/* The table's slots for a pool's blocks: a power of two, at most half full. */
static int64_t slots_for(int64_t max_blocks) {
    int64_t cap = 16;
    while (cap < 2 * max_blocks + 16) cap *= 2;
    return cap;
}

double pkv_prefix_bytes(int32_t pool_pages, int32_t pages_per_block) {
    const int64_t blocks = pool_pages / pages_per_block;
    return (double)slots_for(blocks) * sizeof(pkv_prefix_block) +
           4.0 * (double)(blocks * pages_per_block + blocks + 2);
}

int pkv_prefix_init(pkv_prefix *c, int32_t pool_pages, int32_t pages_per_block) {
    *c = (pkv_prefix){.pages_per_block = pages_per_block, .lru_head = -1, .lru_tail = -1};
    c->max_blocks = pool_pages / pages_per_block;
    const int64_t cap = slots_for(c->max_blocks);
    if (cap > INT32_MAX) return -1;
    c->cap = (int32_t)cap;
    c->slot = calloc((size_t)c->cap, sizeof *c->slot);
    c->pages = malloc(sizeof(int32_t) * ((size_t)c->max_blocks * pages_per_block + 1));
    c->free_groups = malloc(sizeof(int32_t) * ((size_t)c->max_blocks + 1));
    if (!c->slot || !c->pages || !c->free_groups) {
        pkv_prefix_free(c);
        return -1;
    }
    for (int32_t g = 0; g < c->max_blocks; g++) c->free_groups[g] = c->max_blocks - 1 - g;
    c->n_free_groups = c->max_blocks;
    return 0;
}

void pkv_prefix_free(pkv_prefix *c) {
    free(c->slot), free(c->pages), free(c->free_groups), free(c->seen);
    *c = (pkv_prefix){0};
}

static uint64_t mix(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    return x ^ (x >> 33);
}

uint64_t pkv_prefix_chain(uint64_t prev, uint64_t token_id) {
    return mix(prev * 0x9E3779B97F4A7C15ull ^ mix(token_id + 1));
}

/* The slot holding hash, or -1. */
static int32_t find(const pkv_prefix *c, uint64_t hash) {
    for (uint32_t i = (uint32_t)mix(hash) & (uint32_t)(c->cap - 1), n = 0; n < (uint32_t)c->cap;
         i = (i + 1) & (uint32_t)(c->cap - 1), n++) {
        if (c->slot[i].used == 0) return -1;
        if (c->slot[i].used == 1 && c->slot[i].hash == hash) return (int32_t)i;
    }
    return -1;
}

static void lru_unlink(pkv_prefix *c, int32_t b) {
    pkv_prefix_block *k = &c->slot[b];
    if (k->prev >= 0)
        c->slot[k->prev].next = k->next;
    else
        c->lru_head = k->next;
    if (k->next >= 0)
        c->slot[k->next].prev = k->prev;
    else
        c->lru_tail = k->prev;
    k->prev = k->next = -1;
}

/* The slot of hash in the open-addressed set t of cap slots (a power of two): its own,
 * or the empty one where it would go. */
static size_t seen_slot(const uint64_t *t, size_t cap, uint64_t hash) {
    size_t i = mix(hash) & (cap - 1);
    while (t[i] && t[i] != hash) i = (i + 1) & (cap - 1);
    return i;
}

int pkv_prefix_seen(const pkv_prefix *c, uint64_t hash) {
    return c->seen_cap && c->seen[seen_slot(c->seen, c->seen_cap, hash)] == hash;
}

int pkv_prefix_see(pkv_prefix *c, uint64_t hash) {
    if (!hash || pkv_prefix_seen(c, hash)) return 0; /* 0: a block of unknown identity */
    if (2 * (c->n_seen + 1) > c->seen_cap) {         /* at most half full: grow and rehash */
        const size_t cap = c->seen_cap ? 2 * c->seen_cap : 1024;
        uint64_t *t = calloc(cap, sizeof *t);
        if (!t) return -1;
        for (size_t k = 0; k < c->seen_cap; k++)
            if (c->seen[k]) t[seen_slot(t, cap, c->seen[k])] = c->seen[k];
        free(c->seen);
        c->seen = t, c->seen_cap = cap;
    }
    c->seen[seen_slot(c->seen, c->seen_cap, hash)] = hash, c->n_seen++;
    return 0;
}

int32_t pkv_prefix_acquire(pkv_prefix *c, uint64_t hash) {
    c->lookups++;
    int32_t b = find(c, hash);
    if (b < 0) return -1;
    pkv_prefix_block *k = &c->slot[b];
    if (k->refs++ == 0) {
        lru_unlink(c, b);
        c->n_free_pages -= c->pages_per_block;
    }
    c->hits++;
    return b;
}

int pkv_prefix_contains(const pkv_prefix *c, uint64_t hash) {
    return find(c, hash) >= 0;
}

int32_t pkv_prefix_insert(pkv_prefix *c, uint64_t hash, const int32_t *pages) {
    PKV_ASSERT(find(c, hash) < 0);
    if (c->n_free_groups == 0) return -1;
    uint32_t i = (uint32_t)mix(hash) & (uint32_t)(c->cap - 1);
    while (c->slot[i].used == 1) i = (i + 1) & (uint32_t)(c->cap - 1);
    const int32_t g = c->free_groups[--c->n_free_groups];
    c->slot[i] = (pkv_prefix_block){.hash = hash,
                                    .refs = 1,
                                    .prev = -1,
                                    .next = -1,
                                    .first_page = g * c->pages_per_block,
                                    .used = 1};
    for (int32_t p = 0; p < c->pages_per_block; p++)
        c->pages[g * c->pages_per_block + p] = pages[p];
    c->n_blocks++;
    return (int32_t)i;
}

const int32_t *pkv_prefix_pages(const pkv_prefix *c, int32_t b) {
    return c->pages + c->slot[b].first_page;
}

void pkv_prefix_release(pkv_prefix *c, int32_t b) {
    pkv_prefix_block *k = &c->slot[b];
    PKV_ASSERT(k->used == 1 && k->refs > 0); /* a reference count never goes negative */
    if (--k->refs > 0) return;
    k->prev = c->lru_tail, k->next = -1;
    if (c->lru_tail >= 0)
        c->slot[c->lru_tail].next = b;
    else
        c->lru_head = b;
    c->lru_tail = b;
    c->n_free_pages += c->pages_per_block;
}

int pkv_prefix_evict(pkv_prefix *c, int32_t *out) {
    const int32_t b = c->lru_head;
    if (b < 0) return -1;
    pkv_prefix_block *k = &c->slot[b];
    PKV_ASSERT(k->refs == 0); /* a referenced block is never evicted */
    lru_unlink(c, b);
    for (int32_t p = 0; p < c->pages_per_block; p++) out[p] = c->pages[k->first_page + p];
    c->free_groups[c->n_free_groups++] = k->first_page / c->pages_per_block;
    c->n_free_pages -= c->pages_per_block;
    k->used = -1; /* a tombstone: later probes go past it */
    c->n_blocks--;
    c->evictions++;
    return 0;
}
