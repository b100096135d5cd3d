"""python3 table.py OUT: run.sh's outputs as the scheduler section's tables (model backend),
each point's figures from its /summary (ms unless named)."""
import h5py, json, sys
OUT = sys.argv[1] if len(sys.argv) > 1 else '/tmp/sr'

def points(n):
    h = h5py.File(f'{OUT}/{n}.h5')
    axes = [a.decode() for a in h['sweep/axes'][()]]
    idx = h['sweep/index']
    for k in range(len(h['points'])):
        key = {a: (idx[a][k].decode() if isinstance(idx[a][k], bytes) else idx[a][k]) for a in axes}
        p = h['points'][f'{k:05d}']
        yield key, p['summary'].attrs, p

def pool(p):
    """The point's KV pages as its run resolved them (sized to the GPU's memory)."""
    return f"{json.loads(p['config/resolved'][()])['serving']['kv_pages']:,}"

def ms(x):
    return f'{1e3 * x:.0f}' if x >= 0.1 else f'{1e3 * x:.2f}'

def table(title, head, rows):
    print(f'\n{title}\n\n| ' + ' | '.join(head) + ' |\n|' + '---|' * len(head))
    for r in rows: print('| ' + ' | '.join(str(c) for c in r) + ' |')

table('chunked_prefill', ['load (req/s)', 'scheduler', 'TTFT p50', 'TTFT p99', 'TPOT p50', 'TPOT p99', 'ITL p50', 'ITL p99', 'output tok/s'],
      [[k['workload.arrival.rate'], k['serving.scheduler'], ms(s['ttft_p50']), ms(s['ttft_p99']), ms(s['tpot_p50']), ms(s['tpot_p99']),
        ms(s['itl_p50']), ms(s['itl_p99']), f"{s['output_throughput']:.0f}"] for k, s, _ in sorted(points('chunked_prefill'), key=lambda x: (x[0]['workload.arrival.rate'], x[0]['serving.scheduler'] != 'prefill_first'))])
table('prefix_caching_shared', ['caching', 'prompt tokens hit', 'TTFT p50', 'TTFT p99', 'TPOT p50', 'TPOT p99', 'ITL p99'],
      [[k['serving.prefix_caching'], f"{100 * s['prefix_hit_tokens'] / s['input_tokens']:.1f}%", ms(s['ttft_p50']), ms(s['ttft_p99']), ms(s['tpot_p50']), ms(s['tpot_p99']), ms(s['itl_p99'])] for k, s, _ in points('prefix_caching_shared')])
table('prefix_caching_mooncake', ['KV pool', 'caching', 'prompt blocks hit', 'tokens hit', 'blocks evicted', 'TTFT p50', 'TTFT p99', 'TPOT p50'],
      [[pool(p), k['serving.prefix_caching'], (f"{100 * s['prefix_hit_rate']:.1f}%" if s['prefix_hit_rate'] == s['prefix_hit_rate'] else '—'), f"{100 * s['prefix_hit_tokens'] / s['input_tokens']:.1f}%", s['prefix_evictions'], ms(s['ttft_p50']), ms(s['ttft_p99']), ms(s['tpot_p50'])] for k, s, p in points('prefix_caching_mooncake')])
table('prefix_caching_multiturn', ['scheduler', 'caching', 'prompt tokens hit', 'TTFT p50', 'TTFT p99', 'TPOT p50', 'TPOT p99', 'output tok/s'],
      [[k['serving.scheduler'], k['serving.prefix_caching'], f"{100 * s['prefix_hit_tokens'] / s['input_tokens']:.1f}%", ms(s['ttft_p50']), ms(s['ttft_p99']), ms(s['tpot_p50']), ms(s['tpot_p99']), f"{s['output_throughput']:.0f}"] for k, s, _ in points('prefix_caching_multiturn')])
table('swap_pressure', ['KV pool', 'preemption', 'preemptions', 'pages copied', 'copy time predicted', 'TTFT p50', 'TTFT p99', 'TPOT p50', 'TPOT p99', 'output tok/s'],
      [[int(k['serving.kv_pages']), k['serving.preemption'], s['preemptions'], s['swap_pages'], ms(s['swap_predicted_s']), ms(s['ttft_p50']), ms(s['ttft_p99']), ms(s['tpot_p50']), ms(s['tpot_p99']), f"{s['output_throughput']:.0f}"] for k, s, _ in sorted(points('swap_pressure'), key=lambda x: (x[0]['serving.kv_pages'], x[0]['serving.preemption']))])
import numpy as np
def ttft(req, m):
    t = (req['t_first_token'][()] - req['t_arrival'][()])[m]
    return f'{1e3 * np.percentile(t, 50):.0f} / {1e3 * np.percentile(t, 99):.0f}'
rows = []
for k, s, p in points('slo_classes'):  # class 0 chat, 1 batch (the file's order)
    req = p['requests']
    c = req['slo_class'][()]
    rows.append([k['serving.admission'], ttft(req, c == 0), ttft(req, c == 1), f"{100 * s['slo_attainment_chat']:.1f}%",
                 f"{100 * s['slo_attainment_batch']:.1f}%", f"{s['request_goodput']:.2f}", f"{s['e2el_p50']:.2f}"])
table('slo_classes', ['admission', 'chat TTFT p50 / p99 ms', 'batch TTFT p50 / p99 ms', 'chat within SLOs', 'batch within SLOs', 'goodput req/s', 'E2E p50 s'], rows)
