"""Reading pkvsim output files from Python (h5py; pandas optional). Each function takes a
path, an open file or a group (a sweep file's /points/NNNNN).

/steps and /requests are groups with one dataset per column (README.md, "Reading
the output"); this module gathers them into one table:

    import pkvh5
    steps = pkvh5.table(path, "steps")        # dict: column name -> numpy array
    df = pkvh5.frame(path, "steps")           # pandas DataFrame, route names as strings

Route and request-state columns are HDF5 enums; frame() maps them to their names.
"""
import h5py
import numpy as np


def _columns(g):
    names = g.attrs.get("columns", "")
    if isinstance(names, bytes):
        names = names.decode()
    order = [c for c in names.split(",") if c in g]
    return order or list(g.keys())


def table(path_or_file, name):
    """Every column of /name as numpy arrays, in the recorder's order."""
    f = path_or_file if isinstance(path_or_file, h5py.Group) else h5py.File(path_or_file, "r")
    g = f[name]
    return {c: g[c][:] for c in _columns(g)}


def enum_names(path_or_file, name, column):
    """{code: name} of an enum column (route, state)."""
    f = path_or_file if isinstance(path_or_file, h5py.Group) else h5py.File(path_or_file, "r")
    m = h5py.check_enum_dtype(f[name][column].dtype) or {}
    return {v: k for k, v in m.items()}


def frame(path_or_file, name):
    """/name as a pandas DataFrame; enum columns as their names (categorical)."""
    import pandas as pd

    f = path_or_file if isinstance(path_or_file, h5py.Group) else h5py.File(path_or_file, "r")
    cols = table(f, name)
    for c in list(cols):
        names = enum_names(f, name, c)
        if names:
            codes = np.asarray(cols[c])
            cols[c] = pd.Categorical.from_codes(codes.astype(np.int64),
                                                [names[i] for i in range(len(names))])
    return pd.DataFrame(cols)
