# b1_table.py H5...: the study layer's B=1 32K steps of each file, per sweep point (FP16, FP8
# KV): device and wall time percentiles past the first 8 steps, in us.
import h5py, sys, numpy as np
for fn in sys.argv[1:]:
    f = h5py.File(fn)
    out = []
    for k in sorted(f['points']):
        s = f['points'][k]['steps']
        d, w = 1e6 * s['t_device'][()][8:], 1e6 * s['t_wall'][()][8:]
        out.append('dev p10/50/90 %.2f/%.2f/%.2f mean %.2f | wall p50 %.2f mean %.2f' %
                   (*np.percentile(d, [10, 50, 90]), d.mean(), np.median(w), w.mean()))
    print(fn.split('/')[-1].ljust(28), ' || '.join(out))
