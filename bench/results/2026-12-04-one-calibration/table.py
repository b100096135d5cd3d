"""The table of run.sh's outputs: per experiment, the range over its points of new/old."""
import h5py,glob,os,numpy as np
OUT=os.environ.get('OUT','/tmp/eq')
def pts(f):
    h=h5py.File(f)
    if 'points' in h:
        return [(k,h['points'][k]['summary'].attrs) for k in sorted(h['points'].keys(), key=lambda x:int(x) if x.isdigit() else x)]
    return [('-',h['summary'].attrs)]
keys=['output_throughput','p50_ttft','p50_tpot']
print('| experiment | points | output tok/s, new/old | TTFT p50, new/old | TPOT p50, new/old |'); print('|---|---|---|---|---|')
for old in sorted(glob.glob(OUT+'/*.old.h5')):
    n=os.path.basename(old)[:-7]; new=old.replace('.old.','.new.')
    a,b=pts(old),pts(new)
    cells=[]
    for k in keys[:3]:
        r=[]
        for (_,x),(_,y) in zip(a,b):
            kk=[c for c in x.keys() if c==k]
            if not kk: continue
            if x[k]>0: r.append(y[k]/x[k])
        r=np.array(r); r=r[np.isfinite(r)]
        cells.append(f"{r.min():.3f}-{r.max():.3f}" if len(r) else "—")
    print(f"| {n} | {len(a)} | "+" | ".join(cells)+" |")
