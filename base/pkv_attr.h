/* A named scalar (number or text) that one layer hands another to record, so that
 * the recorder needs no other layer's types (the calibration's constants, say). */
#ifndef PKV_ATTR_H
#define PKV_ATTR_H

#include <stdint.h>

typedef enum pkv_attr_kind { PKV_ATTR_F64 = 0, PKV_ATTR_U64, PKV_ATTR_STR } pkv_attr_kind;

typedef struct pkv_attr {
    char name[64];
    pkv_attr_kind kind;
    double f64;
    uint64_t u64;
    const char *str; /* not owned */
} pkv_attr;

#endif
