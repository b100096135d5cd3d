/* pkvk: the served model's forward, written once: the GPU's model and its CPU mirror,
 * a decode step, a mixed iteration and a prefill alike.
 *
 * The embedding of the decode rows (each row's last sampled token) and of the prompt
 * pieces' tokens; then for every layer the norm and QKV, RoPE with the K/V append
 * into the layer's pages, the rows' attention (the step's route: the caller's hook),
 * the pieces' attention (causal, over their prompts' pages), the dense part after
 * attention (output projection, norm, MLP); then the final norm, the LM head and
 * sampling (the rows, then the pieces that end their prompts). A model fills a table
 * of these operations (pkvk_model_forward, pkvk_cpu_model_forward); an operation left
 * NULL is not run, so the study layer (its attention alone) is the empty table. The
 * caller's marks between the parts are its timing hooks (events per layer, the
 * benchmarks' probes). */
#ifndef PKVK_FORWARD_H
#define PKVK_FORWARD_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* At most this many prompt pieces in one forward (the GPU's travel as launch
 * parameters). */
enum { PKVK_MAX_PIECES = 64 };

/* A piece of a prompt in a forward. */
typedef struct pkvk_piece {
    int t0;       /* its first token among the pieces' tokens (they follow the rows) */
    int len;      /* tokens */
    int q0;       /* the position of its first token in its prompt */
    int page_off; /* its prompt's first page in the forward's page list */
    int req;      /* its prompt's number (its synthetic tokens: pkvk_prompt_token) */
    int last;     /* 1: it ends its prompt (its last token samples) */
} pkvk_piece;

typedef struct pkvk_pieces {
    int n;
    pkvk_piece s[PKVK_MAX_PIECES];
} pkvk_pieces;

/* One forward's input: decode rows, prompt pieces, or both (a mixed iteration). */
typedef struct pkvk_fwd_in {
    int rows;                          /* decode rows */
    const int32_t *lens, *block_table; /* theirs, with the new token (the model's memory:
                                          the device for the GPU's) */
    int bt_stride;
    /* the rows' query tokens each (0 or 1: one, a decode step's; a verify step's k + 1): row
     * r's token j at position lens[r] - q_len + j, the rows' tokens first, row by row, then
     * the pieces'; a model whose forward has `verify` only */
    int q_len;
    uint16_t *q;          /* the GPU's: the rows' Q [rows][hq][d] for the route */
    const uint16_t *o;    /* the GPU's: the route's output [rows][hq][d] */
    const int32_t *pages; /* the pieces' page list (host; the GPU's model staged it) */
    int T, heads;         /* the pieces' tokens; the pieces that sample */
    pkvk_pieces p;
} pkvk_fwd_in;

/* Where the caller's mark hook is called: before each part of layer l, after it
 * (PKVK_AT_LAYER_END), before the head (l = layers). The parts a forward can fail in
 * are these too, with the page list's staging and the embedding. */
typedef enum {
    PKVK_AT_STAGE,
    PKVK_AT_BEGIN,
    PKVK_AT_QKV,
    PKVK_AT_ROPE,
    PKVK_AT_ATTEND,
    PKVK_AT_PIECES,
    PKVK_AT_POST,
    PKVK_AT_LAYER_END,
    PKVK_AT_HEAD
} pkvk_fwd_at;

/* A model's operations; self is the model. Each returns a pkvk status. */
typedef struct pkvk_fwd_ops {
    /* a forward's page list (its pieces' prompts' pages), once per step or prefill */
    int (*stage)(void *self, int n, const int32_t *lens, const int32_t *starts,
                 const int32_t *pages);
    int (*begin)(void *self, const pkvk_fwd_in *in); /* the embedding */
    int (*qkv)(void *self, int l, const pkvk_fwd_in *in);
    int (*rope)(void *self, int l, const pkvk_fwd_in *in);
    int (*pieces)(void *self, int l, const pkvk_fwd_in *in);
    int (*post)(void *self, int l, const pkvk_fwd_in *in);
    int (*head)(void *self, const pkvk_fwd_in *in);
} pkvk_fwd_ops;

/* A model as the forward sees it. */
typedef struct pkvk_fwd_model {
    const pkvk_fwd_ops *ops;
    void *self;
    int layers, page_size;
    int cap_tokens; /* rows and pieces' tokens of one forward at most */
    int verify;     /* it takes rows of several query tokens (pkvk_fwd_in.q_len): the CPU
                       mirror's and the GPU's model's (not the study layer's) */
} pkvk_fwd_model;

/* The caller's part: the rows' attention of layer l (NULL: none) and the marks (NULL:
 * none). */
typedef struct pkvk_fwd_hooks {
    void *ctx;
    int (*attend)(void *ctx, int l);
    int (*mark)(void *ctx, pkvk_fwd_at at, int l);
} pkvk_fwd_hooks;

/* "prompt pieces", "embedding", "layer before attention", "attention", ... */
const char *pkvk_fwd_at_name(pkvk_fwd_at at);

/* One forward of in (its pieces set and staged). *failed (may be NULL) receives the
 * part that failed. */
int pkvk_forward(const pkvk_fwd_model *m, const pkvk_fwd_in *in, const pkvk_fwd_hooks *h,
                 pkvk_fwd_at *failed);

/* A step: in's rows, and n prompt pieces (a mixed iteration; 0: a decode step; host
 * lens [n], starts [n] (NULL: 0), last [n] (NULL: all end their prompts), pages: each
 * piece's prompt's first ceil((start + len) / page_size) pages, concatenated) staged
 * and set in *in, then one forward. A decode step stages nothing. */
int pkvk_forward_step(const pkvk_fwd_model *m, pkvk_fwd_in *in, int n, const int32_t *lens,
                      const int32_t *pages, const int32_t *starts, const uint8_t *last,
                      const pkvk_fwd_hooks *h, pkvk_fwd_at *failed);

/* A prefill of n prompt pieces (arguments as pkvk_forward_step's): staged once, then
 * forwards of at most cap_tokens tokens and PKVK_MAX_PIECES pieces (a piece split
 * where a chunk fills), each sampling its ending prompts from row 0 on. */
int pkvk_forward_prefill(const pkvk_fwd_model *m, int n, const int32_t *lens, const int32_t *pages,
                         const int32_t *starts, const uint8_t *last, const pkvk_fwd_hooks *h,
                         pkvk_fwd_at *failed);

#ifdef __cplusplus
}
#endif

#endif
