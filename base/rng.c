#include "rng.h"

uint64_t pkv_text_hash(uint64_t h, const char *text) {
    for (const unsigned char *c = (const unsigned char *)text; *c; c++) {
        h ^= *c;
        h *= 1099511628211ull;
    }
    return h;
}

/* FNV-1a over the name, then one splitmix64 finaliser over (seed ^ hash): distinct
 * names give unrelated seeds, and the mapping is fixed across platforms. */
unsigned long pkv_stream_seed(uint64_t seed, const char *name) {
    uint64_t z = seed ^ pkv_text_hash(PKV_TEXT_HASH_START, name);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    /* MT19937 takes 32 bits of seed; 0 would select GSL's default seed. */
    unsigned long s = (unsigned long)(z & 0xffffffffu);
    return s ? s : 1;
}

gsl_rng *pkv_stream_create(uint64_t seed, const char *name) {
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    if (r) gsl_rng_set(r, pkv_stream_seed(seed, name));
    return r;
}
