import glob
def load(f):
    rows={}
    for l in open(f):
        c=[x.strip() for x in l.split('|')[1:-1]]
        if len(c)==10 and c[0] not in('loop','---'):
            rows[(c[0],c[1],c[2])]=float(c[7])
    return rows
B={n:[load(f) for f in sorted(glob.glob(f'bench_sim_{n}_[0-9].txt'))] for n in ['d9o','d9fix','head']}
keys=list(B['head'][0].keys())
print('| loop | rows | record | d9090c7 (1, 2, 3) | d9090c7 + the draw fix (1, 2, 3) | HEAD (1, 2, 3) | HEAD / d9090c7 | HEAD / (d9090c7 + fix) |')
print('|---|---|---|---|---|---|---|---|')
for k in keys:
    m={n:min(r[k] for r in B[n]) for n in B}
    al={n:', '.join('%.3f'%r[k] for r in B[n]) for n in B}
    print(f"| {k[0]} | {k[1]} | {k[2]} | {al['d9o']} | {al['d9fix']} | {al['head']} | {m['head']/m['d9o']:.2f}x | {m['head']/m['d9fix']:.2f}x |")
