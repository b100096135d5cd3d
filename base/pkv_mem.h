/* What this process may still allocate: the least of the machine's available memory,
 * the address-space and data-size limits (ulimit -v, -d) less what the process holds,
 * and its cgroup's memory limit less the cgroup's use. */
#ifndef PKV_MEM_H
#define PKV_MEM_H

/* Bytes (0 where nothing is left); *which names the limit that gives them. */
double pkv_mem_allowed(const char **which);

#endif
