#!/usr/bin/env python3
"""The layering holds: every quoted #include in a layer's folder names a header of a
layer it may use (DESIGN.md's data flow), headers include no cycle, and a probe
that includes upward fails to compile in the build. Usage: layers.py SRC BUILD"""
import os
import re
import subprocess
import sys

src, build = sys.argv[1], sys.argv[2]
# What each folder may include (its own headers always). The simulator (sim) reaches
# the GPU only through the engine; the program (sim/cmd) is the one place besides the
# engine's backends that calls the kernels directly (its GPU tools).
ALLOWED = {
    "base": set(),
    "kernels": {"base"},
    "workloads": {"base"},
    "engine": {"kernels", "base"},
    "analysis": {"base"},
    "sim": {"engine", "workloads", "analysis", "base"},
    "sim/cmd": {"sim", "engine", "kernels", "workloads", "analysis", "base"},
}
# Nor does the simulator name a kernel function: sim/*.c calls no pkvk_ function.
KERNEL_CALL = re.compile(r"\bpkvk_[a-z0-9_]+\s*\(")
GENERATED = {"pkv_gitrev.h"}  # build/gen, included by analysis and the program

home = {}
for layer in ALLOWED:
    for f in os.listdir(os.path.join(src, layer)):
        if f.endswith((".h", ".cuh")):
            if f in home:
                sys.exit(f"FAIL header {f} in both {home[f]} and {layer}")
            home[f] = layer

inc = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
fails, edges = [], {}
for layer, ok in ALLOWED.items():
    for f in sorted(os.listdir(os.path.join(src, layer))):
        if not f.endswith((".c", ".h", ".cu", ".cuh")):
            continue
        text = open(os.path.join(src, layer, f), encoding="utf-8").read()
        if layer == "sim" and KERNEL_CALL.search(text):
            fails.append(f"sim/{f} calls the kernels ({KERNEL_CALL.search(text).group(0)}...): "
                         "only the engine and the program (sim/cmd) may")
        for h in inc.findall(text):
            if h in GENERATED:
                continue
            where = home.get(h)
            if where is None:
                fails.append(f"{layer}/{f} includes \"{h}\", which no layer holds")
            elif where != layer and where not in ok:
                fails.append(f"{layer}/{f} includes {where}/{h}: {layer} may not use {where}")
            if f.endswith((".h", ".cuh")) and where:
                edges.setdefault(f, set()).add(h)

# No include cycle among the headers.
state = {}


def visit(h, path):
    if state.get(h) == 1:
        fails.append("include cycle: " + " -> ".join(path + [h]))
        return
    if state.get(h) == 2:
        return
    state[h] = 1
    for n in sorted(edges.get(h, ())):
        visit(n, path + [h])
    state[h] = 2


for h in sorted(edges):
    visit(h, [])

# The build enforces it: the engine's target cannot see sim/.
p = subprocess.run(["cmake", "--build", build, "--target", "pkv_layer_probe"],
                   capture_output=True, text=True)
out = p.stdout + p.stderr
if p.returncode == 0 or "sim.h" not in out:
    fails.append("the upward-include probe (tests/layer_probe.c) compiled, or failed for "
                 "another reason:\n" + out[-2000:])

for f in fails:
    print("FAIL", f)
print(f"{len(home)} headers checked, {len(fails)} failed")
sys.exit(1 if fails else 0)
