/* Validation files (experiments/validation/): each an experiment with a `validation`
 * section that replays one published measurement of a real serving engine: its source
 * (where the figures were published, by which client, the engine and its settings,
 * what was assumed), its role (fitted by an engine profile, or held out of every fit)
 * and the published figures it expects, each within a band. Loaded to run on the model
 * backend; `pkvsim validate` and `pkvsim fit --engine` run them. */
#ifndef PKV_VFILE_H
#define PKV_VFILE_H

#include "config.h"
#include "summary.h"

enum { PKV_VFILES_MAX = 256, PKV_VFILE_ROWS = 16 };

typedef struct pkv_vrow {
    char figure[48], unit[16], label[64];
    const pkv_summary_figure *f;
    double value, scale, band; /* published; the figure's value times scale is in unit */
    double pred, base;         /* with the profile; with pkvsim's loop (NaN: not run) */
    double floor; /* a TTFT's least on the run's GPU for the requests the run drew (floor.h:
                     the dense FLOPs at the calibration's top GEMM rate), in unit; NaN: none
                     (another figure, a fleet of several replicas) */
    bool tail;    /* a 99th percentile: checked and reported, never fitted */
} pkv_vrow;

/* What a figure measures, as validate's means and a plan's margins group it: TTFT,
 * TPOT (and ITL), E2E, throughput, and the 99th percentiles of the first three apart
 * (a tail: checked and reported, never fitted). */
enum {
    PKV_FIG_TTFT,
    PKV_FIG_TPOT,
    PKV_FIG_E2E,
    PKV_FIG_THROUGHPUT,
    PKV_FIG_TTFT_P99,
    PKV_FIG_TPOT_P99,
    PKV_FIG_E2E_P99,
    PKV_FIG_KINDS
};
extern const char *const pkv_vfile_kind_names[PKV_FIG_KINDS];
int pkv_vfile_figure_kind(const char *figure);

/* TTFT taken apart (pkv_summary's ttft_parts_s), in this order. */
enum { PKV_TTFT_PARTS = 4 };
extern const char *const pkv_ttft_part_names[PKV_TTFT_PARTS];

typedef struct pkv_vfile {
    const char *path;
    pkv_config cfg;
    char engine[32], gpu[32], version[64];
    char source[96]; /* validation.source.id (else its url): files of one source share it */
    char client[48]; /* validation.source.client: the benchmark tool that measured */
    bool held_out;
    bool fits_engine; /* validation.fits_engine: its figures may fit an engine's constants */
    bool floors;      /* pkv_vfile_run gives the TTFT rows their floors (validate sets it) */
    int n;
    pkv_vrow rows[PKV_VFILE_ROWS];
    double ttft_parts[PKV_TTFT_PARTS]; /* seconds, means over the requests the profile's
                                          run counted (NaN: none) */
} pkv_vfile;

/* Load the validation file at path into v (its experiment on the model backend): 0, or
 * -1 with an error naming the file and nothing left allocated. */
int pkv_vfile_load(pkv_vfile *v, const char *path, pkv_err *e);
/* Run v's experiment with its profile's constants as they are now; each row's
 * prediction into pred (or, with base, base), the TTFT's parts (with the profile), and
 * where v->floors asks, the TTFT rows' floors. */
int pkv_vfile_run(pkv_vfile *v, bool base, pkv_err *e);
/* With the profile, then with pkvsim's own loop (the profile's serving defaults kept). */
int pkv_vfile_run_both(pkv_vfile *v, pkv_err *e);
/* (pred - published) / published */
double pkv_vfile_err(double pred, double pub);
/* Command cmd's files: FILES|DIR... (argc of them; a folder stands for its *.json in name
 * order, a file named twice counts once) into names[PKV_VFILES_MAX] (malloc'ed, *n of
 * them), `out` (NULL: none; opt names its option) checked to be none of them, each
 * loaded. NULL (printed, nothing left allocated) with *status the exit status. */
pkv_vfile *pkv_vfile_open(const char *cmd, int argc, char **argv, const char *out, const char *opt,
                          char **names, int *n, int *status);
/* The first nv files' experiments, the array, and the n names. */
void pkv_vfile_free(pkv_vfile *v, int nv, char **names, int n);
/* The file name of a path. */
const char *pkv_vfile_stem(const char *path);
/* Write a JSON document to out (whole, or nothing: pkv_write_atomic) and free it; -1
 * with the message printed (cmd and opt name the command and its option). */
int pkv_vfile_write_doc(cJSON *root, const char *out, const char *cmd, const char *opt);

/* Fit the host-work constants (pkv_vfit_names: iteration_us, per_request_us,
 * gpu.prefill_token_us, client_us, per_output_token_us, eager_allreduce_us, multi_gpu_us,
 * exposed_us) of the n files v, which share one profile, on the files whose use[i] is set:
 * GSL's Nelder-Mead on the mean squared log error of their figures, from the profile's
 * constants, the simplex restarted where it ended until that no longer improves. overlap: the
 * host work overlaps the GPU, or is added to it. gpu.prefill_token_us is fitted only where the
 * profile gives it (above 0: the engine's prefill costs more a prompt token than the GPU's
 * calibration prices; at 0 a fold must not invent such a cost), per_output_token_us only where
 * the profile gives it (above 0: outputs processed in series), client_us only where a used file
 * was measured through a server on one GPU, multi_gpu_us where one was over several,
 * eager_allreduce_us only where a used file's model runs over several GPUs, exposed_us only
 * where a used file schedules windows of several decode steps (only there is each step's own
 * host work told apart from the window's). The constants found go into every file's profile;
 * us receives them, *rms the fit's rms log error. */
enum { PKV_VFIT_PARAMS = 8 };
typedef struct pkv_vfit {
    int max_iter; /* simplex iterations per start */
    int restarts; /* starts at most */
    bool overlap;
    double us[PKV_VFIT_PARAMS]; /* out: the constants, µs */
    double rms;                 /* out: rms log error over the used files' figures */
    bool prefill;               /* out: gpu.prefill_token_us was fitted */
    bool client;                /* out: client_us was fitted */
    bool tp;                    /* out: eager_allreduce_us was fitted (a used file's model
                                   runs over several GPUs) */
    bool multi;                 /* out: multi_gpu_us was fitted */
    bool exposed;               /* out: exposed_us was fitted (a used file schedules windows) */
    int evals;                  /* out: runs of the objective */
} pkv_vfit;
extern const char *const pkv_vfit_names[PKV_VFIT_PARAMS];
int pkv_vfit_run(pkv_vfile *v, int n, const bool *use, pkv_vfit *f, pkv_err *e);
/* Set the constants us (µs) into the n files' profiles (client_us: 0 offline). */
void pkv_vfit_set(pkv_vfile *v, int n, const double *us, bool overlap);

#endif
