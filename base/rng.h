/* Independent random streams: one GSL generator per purpose, seeded from
 * (experiment seed, stream name), so that changing one consumer (the route, the
 * admission policy) never changes what another stream draws. */
#ifndef PKV_RNG_H
#define PKV_RNG_H

#include <stdint.h>
#include <gsl/gsl_rng.h>

/* Stream names used by the simulator. */
#define PKV_STREAM_ARRIVALS    "arrivals"
#define PKV_STREAM_PROMPT      "prompt_lengths"
#define PKV_STREAM_DECODE      "decode_lengths"
#define PKV_STREAM_PAGES       "page_placement"
#define PKV_STREAM_TENSORS     "tensor_contents"
#define PKV_STREAM_PREFIX      "prefix_groups"
#define PKV_STREAM_CLASSES     "slo_classes"
#define PKV_STREAM_SESSIONS    "sessions"
#define PKV_STREAM_EXPERTS     "expert_routing"
#define PKV_STREAM_SPECULATIVE "speculative"

/* FNV-1a of text continued from h (PKV_TEXT_HASH_START to begin): fixed across
 * platforms; a fingerprint, not a defence against a chosen collision. */
#define PKV_TEXT_HASH_START 1469598103934665603ull
uint64_t pkv_text_hash(uint64_t h, const char *text);
/* The seed of stream `name` under experiment seed `seed`. */
unsigned long pkv_stream_seed(uint64_t seed, const char *name);
/* A new MT19937 generator for the stream (caller frees with gsl_rng_free); NULL on
 * allocation failure. */
gsl_rng *pkv_stream_create(uint64_t seed, const char *name);

#endif
