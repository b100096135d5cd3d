/* Internal to sim/config*.c: the model section (a preset, its own keys, the shape's
 * rules, a mixture of experts' keys), the model's context as workload.max_context's bound,
 * and serving.speculative's draft model. */
#ifndef PKV_CONFIG_MODEL_H
#define PKV_CONFIG_MODEL_H

#include <cjson/cJSON.h>

#include "config.h"

/* The model: its rows' defaults (the study layer), then a preset's file, then the
 * experiment's own keys; the shape checked. */
int pkv_config_parse_model(pkv_config *c, const cJSON *root, pkv_err *e);
/* workload.max_context within model.max_model_len (w: the workload section). */
int pkv_config_model_context(pkv_config *c, const cJSON *w, pkv_err *e);
/* serving.speculative (parsed): its rules, and a draft's preset resolved into c->spec. */
int pkv_config_parse_speculative(pkv_config *c, pkv_err *e);

#endif
