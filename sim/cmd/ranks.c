/* One fleet over the ranks of an MPI job (`mpirun -n N pkvsim run fleet.json`): MPI
 * started, and the exchange the fleet's view and the runner's merge use (sim/fleet.h's
 * pkv_ranks) made of MPI's collectives. */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef PKV_HAVE_MPI
#include <mpi.h>

static pkv_ranks g_ranks;
static int g_started;

static int allgather(void *ctx, const void *mine, size_t bytes, void *all) {
    (void)ctx;
    return MPI_Allgather(mine, (int)bytes, MPI_BYTE, all, (int)bytes, MPI_BYTE, MPI_COMM_WORLD) ==
                   MPI_SUCCESS
               ? 0
               : -1;
}

static int gather(void *ctx, const void *mine, size_t bytes, void **all, size_t *lens) {
    (void)ctx;
    const int size = g_ranks.size, root = g_ranks.rank == 0;
    int len = (int)bytes, *ls = root ? calloc((size_t)size, sizeof *ls) : NULL,
        *at = root ? calloc((size_t)size, sizeof *at) : NULL;
    int ok = !root || (ls && at);
    if (MPI_Gather(&len, 1, MPI_INT, ls, 1, MPI_INT, 0, MPI_COMM_WORLD) != MPI_SUCCESS) ok = 0;
    size_t sum = 0;
    for (int r = 0; root && ok && r < size; r++) at[r] = (int)sum, sum += (size_t)ls[r];
    char *buf = root && ok ? malloc(sum ? sum : 1) : NULL;
    if (root && !buf) ok = 0;
    /* everyone takes part in the gather whatever its own state, then hears the outcome */
    if (MPI_Gatherv(mine, len, MPI_BYTE, buf, ls, at, MPI_BYTE, 0, MPI_COMM_WORLD) != MPI_SUCCESS)
        ok = 0;
    int all_ok = 0;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    for (int r = 0; root && all_ok && r < size; r++) lens[r] = (size_t)ls[r];
    *all = all_ok && root ? buf : NULL;
    if (!all_ok || !root) free(buf);
    free(ls), free(at);
    return all_ok ? 0 : -1;
}

int pkv_cli_ranks_start(const pkv_ranks **r) {
    *r = NULL;
    if (MPI_Init(NULL, NULL) != MPI_SUCCESS) {
        fputs("pkvsim: MPI_Init failed\n", stderr);
        return -1;
    }
    g_started = 1;
    g_ranks = (pkv_ranks){.allgather = allgather, .gather = gather};
    MPI_Comm_rank(MPI_COMM_WORLD, &g_ranks.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_ranks.size);
    *r = &g_ranks;
    return 0;
}

void pkv_cli_ranks_end(int status) {
    if (!g_started) return;
    if (status) MPI_Abort(MPI_COMM_WORLD, status); /* the others wait in an exchange */
    MPI_Finalize();
}
#else
int pkv_cli_ranks_start(const pkv_ranks **r) {
    *r = NULL;
    fputs("pkvsim run: this build has no MPI (Open MPI's headers were not found): every rank "
          "would run the whole fleet\n",
          stderr);
    return -1;
}

void pkv_cli_ranks_end(int status) {
    (void)status;
}
#endif
