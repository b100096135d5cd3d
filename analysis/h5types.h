/* Internal to analysis/: the HDF5 type of each record column kind, shared by the
 * writer (h5rec.c) and the readers (h5read.c, report.c), and reading text. */
#ifndef PKV_H5TYPES_H
#define PKV_H5TYPES_H

#include <hdf5.h>

#include "pkv_record.h"

/* A new type for the column kind (caller closes it). */
hid_t pkv_h5_col_type(pkv_col_kind k);
/* A UTF-8 string dataset at path (attribute 0) or attribute attr of the object at path
 * (attribute 1), into *out (caller frees); -1 when absent. */
int pkv_h5_text(hid_t f, const char *path, int attribute, const char *attr, char **out);

#endif
