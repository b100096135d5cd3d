/* Internal to analysis/: the HDF5 type of each record column kind, shared by the
 * writer (h5rec.c) and the reader (h5read.c). */
#ifndef PKV_H5TYPES_H
#define PKV_H5TYPES_H

#include <hdf5.h>

#include "pkv_record.h"

/* A new type for the column kind (caller closes it). */
hid_t pkv_h5_col_type(pkv_col_kind k);

#endif
