# Hash every dataset and attribute of an HDF5 file, leaving out provenance, measured
# host times (t_wall, t_plan, t_choose, t_meta, t_host*) and the output path.
import h5py, hashlib, sys, numpy as np
SKIP = ('t_wall', 't_plan', 't_choose', 't_meta', 'host_s', 'wall')
def walk(f):
    out = {}
    def v(name, obj):
        if name.startswith('provenance'): return
        if isinstance(obj, h5py.Dataset):
            d = np.asarray(obj[()])
            if d.dtype.names:
                names = [n for n in d.dtype.names if not any(s in n for s in SKIP)]
                d = np.ascontiguousarray(d[names]) if names else None
            if d is not None:  # variable-length strings: their values, not their pointers
                raw = repr(d.tolist()).encode() if d.dtype == object else np.asarray(d).tobytes()
                out[name] = hashlib.md5(raw).hexdigest()[:10]
        for k, a in obj.attrs.items():
            if 'output' in k or any(s in k for s in SKIP): continue
            out[name + '@' + k] = hashlib.md5(repr(a).encode()).hexdigest()[:10]
    f.visititems(v)
    return out
a = walk(h5py.File(sys.argv[1])); b = walk(h5py.File(sys.argv[2]))
diff = [k for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k) and 'resolved' not in k and 'provenance' not in k]
print(f'{len(a)} items, {len(diff)} differ', diff[:12])
