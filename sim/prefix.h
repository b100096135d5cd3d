/* The prefix cache: KV blocks (block_tokens of a prompt, pages_per_block pages) named by
 * a hash of the prompt up to their end, reference counted. A request whose leading
 * blocks are cached maps their pages into its block table (their reference counts go
 * up) and prefills only the rest; when its prompt is prefilled its own full blocks
 * join the cache; when it leaves (finish or preemption) its references go down. A
 * block no request references stays cached and is evicted least recently released
 * first when the pool needs its pages. */
#ifndef PKV_PREFIX_H
#define PKV_PREFIX_H

#include <stddef.h>
#include <stdint.h>

enum { PKV_PREFIX_OWNER = -2 }; /* the allocator's owner id of pages the cache holds */

typedef struct pkv_prefix_block {
    uint64_t hash;
    int32_t refs;       /* requests that map it; 0: evictable */
    int32_t prev, next; /* the LRU list of unreferenced blocks (-1: none) */
    int32_t first_page; /* into pages[]: pages_per_block page ids */
    int8_t used;        /* the slot holds a block; -1: a deleted slot (probing goes on) */
} pkv_prefix_block;

typedef struct pkv_prefix {
    int32_t pages_per_block;
    int32_t cap;                /* slots (a power of two) */
    int32_t max_blocks;         /* blocks at most (the pool's pages / pages_per_block) */
    int32_t n_blocks;           /* cached blocks */
    int32_t n_free_pages;       /* pages of unreferenced blocks (evictable) */
    int32_t lru_head, lru_tail; /* head: evicted first */
    pkv_prefix_block *slot;     /* [cap] open addressing */
    int32_t *pages;             /* [max_blocks][pages_per_block] */
    int32_t *free_groups;       /* [max_blocks] stack of free page groups */
    int32_t n_free_groups;
    uint64_t lookups, hits, evictions; /* blocks */
    /* Every block name ever cached (a set that never evicts): what an unbounded cache
     * would hold, so a run can say how far its pool's evictions cost it. */
    uint64_t *seen; /* open addressing, 0: empty (a name is never 0) */
    size_t seen_cap, n_seen;
} pkv_prefix;

int pkv_prefix_init(pkv_prefix *c, int32_t pool_pages, int32_t pages_per_block);
/* The host bytes pkv_prefix_init allocates for such a pool. */
double pkv_prefix_bytes(int32_t pool_pages, int32_t pages_per_block);
void pkv_prefix_free(pkv_prefix *c);
/* The block named hash, or -1; a hit takes a reference (and leaves the LRU list).
 * Counts as a lookup (and a hit). */
int32_t pkv_prefix_acquire(pkv_prefix *c, uint64_t hash);
/* Whether a block of this name is cached (no reference, no count). */
int pkv_prefix_contains(const pkv_prefix *c, uint64_t hash);
/* Cache a block with its pages (copied), referenced once (by its maker); returns its
 * slot, or -1 when the cache is full. */
int32_t pkv_prefix_insert(pkv_prefix *c, uint64_t hash, const int32_t *pages);
/* The pages of block b. */
const int32_t *pkv_prefix_pages(const pkv_prefix *c, int32_t b);
/* Drop a reference; an unreferenced block goes to the LRU list's tail. */
void pkv_prefix_release(pkv_prefix *c, int32_t b);
/* Evict the least recently released unreferenced block: its pages into out
 * [pages_per_block]; returns 0, or -1 when every cached block is referenced. */
int pkv_prefix_evict(pkv_prefix *c, int32_t *out);

/* An unbounded cache: whether it would hold a block of this name; note one (0 or -1:
 * out of memory). */
int pkv_prefix_seen(const pkv_prefix *c, uint64_t hash);
int pkv_prefix_see(pkv_prefix *c, uint64_t hash);

/* The name of block b of a prompt given the name of the block before it (0 for b = 0)
 * and what identifies the block's own tokens: a chain, so that equal names mean equal
 * prefixes. */
uint64_t pkv_prefix_chain(uint64_t prev, uint64_t token_id);

#endif
