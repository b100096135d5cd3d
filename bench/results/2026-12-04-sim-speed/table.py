# python3 table.py DIR BEFORE AFTER: the us/step of DIR/bench_sim_{BEFORE,AFTER}_{1,2}.md
# (`pkvsim bench sim` tables, two builds run alternately twice) side by side.
import sys
def rows(f):
    out=[]
    for l in open(f):
        if l.startswith('|') and not l.startswith('|---') and 'loop' not in l:
            c=[x.strip() for x in l.strip().strip('|').split('|')]
            out.append((c[0],c[1],c[2],float(c[7])))
    return out
d, pre, post = sys.argv[1], sys.argv[2], sys.argv[3]
a1,a2,b1,b2=[rows(f'{d}/bench_sim_{b}_{i}.md') for b in (pre,post) for i in (1,2)]
print('| loop | rows | record | us/step before (run 1, 2) | after (run 1, 2) |')
print('|---|---|---|---|---|')
for x,y,z,w in zip(a1,a2,b1,b2):
    print(f'| {x[0]} | {x[1]} | {x[2]} | {x[3]:.3f}, {y[3]:.3f} | {z[3]:.3f}, {w[3]:.3f} |')
