/* What this process may still allocate: the least of the machine's available memory,
 * the address-space and data-size limits (ulimit -v, -d) less what the process holds,
 * and its cgroup's memory limit less the cgroup's use. */
#ifndef PKV_MEM_H
#define PKV_MEM_H

/* Bytes (0 where nothing is left); *which names the limit that gives them. */
double pkv_mem_allowed(const char **which);

#include <stddef.h>

/* The array whose pointer is at `array` (a T **) resized to n elements of size bytes,
 * as realloc resizes: 0, or -1 (out of memory, or n * size past size_t) with the array
 * as it was. */
int pkv_resize(void *array, size_t n, size_t size);

#endif
