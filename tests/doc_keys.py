#!/usr/bin/env python3
"""experiments/README.md documents exactly the keys the parsers take, with their
defaults: the key tables of `pkvsim keys` (experiment and calibration files) against
the README's tables. Usage: doc_keys.py PKVSIM README"""
import re
import subprocess
import sys

pkvsim, readme = sys.argv[1], sys.argv[2]
text = open(readme, encoding="utf-8").read()


def keys(which):
    out = subprocess.run([pkvsim, "keys", which], check=True, capture_output=True, text=True)
    return [tuple(line.split("\t")) for line in out.stdout.splitlines()]


def section(title):
    """The text of a '## title' section, up to the next '## '."""
    m = re.search(r"^## " + re.escape(title) + r"\n(.*?)(?=^## |\Z)", text, re.S | re.M)
    if not m:
        sys.exit(f"FAIL README has no section '## {title}'")
    return m.group(1)


def rows(body):
    """(keys of the first cell, default cell) of each table row that names keys."""
    for line in body.splitlines():
        if not line.startswith("| `"):
            continue
        cells = [c.strip().replace("\0", "|")
                 for c in line.replace("\\|", "\0").strip().strip("|").split("|")]
        yield re.findall(r"`([^`]+)`", cells[0]), cells


def same_default(doc, want):
    """The README's default cell agrees with the table's (where it is one plain value)."""
    doc = doc.replace("`", "").replace('"', "").strip()
    m = re.match(r"^(-?[\d.]+)(\s|$)", doc)
    if m and re.match(r"^-?[\d.]+(e[-+]?\d+)?$", want):
        return float(m.group(1)) == float(want)
    if want in ("true", "false") or re.match(r"^[a-z_0-9]+$", doc):
        return doc.split()[0] == want if doc else False
    return True  # prose ("required", "NAME.h5", ...) is not compared


fails = []
# The experiment file's main table: full paths.
main = text.split("\n## ")[0]  # the main table, before the first section
documented = {}
for ks, cells in rows(main):
    parent = ""
    for k in ks:
        full = k if "." in k or not parent else parent + "." + k
        parent = full.rsplit(".", 1)[0] if "." in full else ""
        documented[full] = cells
exp = keys("experiment")
table = {p: (kind, d) for p, kind, d, _ in exp}
for p, kind, d, applies in exp:
    if p.startswith("("):
        continue
    if kind != "object" and p not in documented:
        fails.append(f"experiment key {p} is not in experiments/README.md")
    if p in documented and d != "-" and len(documented[p]) > 2:
        cell = documented[p][2]
        if cell and not cell.startswith("—") and not same_default(cell, d):
            fails.append(f"{p}: README says default {cell!r}, the parser {d!r}")
    # A key of one kind of model (pkvsim keys' fourth column) says so: "served model only".
    for k in (applies.split(",") if applies != "-" else []):
        said = k.replace("_", " ") + " only"
        if p in documented and said not in " ".join(documented[p]):
            fails.append(f"{p}: applies to the {k} only; README's row does not say '{said}'")
for p in documented:
    if p not in table:
        fails.append(f"README documents {p}, which the parser does not take")

# Length objects, traces and their columns: the rows that serve several places.
for obj, title in (("(length)", "Length objects"), ("(trace)", "Traces"),
                   ("(columns)", "Traces"), ("(axis)", "Sweeps"), ("(range)", "Sweeps"),
                   ("(slo target)", "Plans"), ("(plan replicas)", "Plans")):
    body = section(title)
    tokens = set(re.findall(r"`([^`]+)`", body)) | set(re.findall(r'"([a-z_]+)"', body))
    for p, kind, d, _ in exp:
        if p.startswith(obj + ".") and p.split(".", 1)[1] not in tokens:
            fails.append(f"{p} is not documented under '## {title}'")
trace_doc = {k for ks, _ in rows(section("Traces")) for k in ks[:1]}
for k in trace_doc:
    if f"(trace).{k}" not in table:
        fails.append(f"README documents trace key {k}, which the parser does not take")

# Calibration files.
cal = keys("calibration")
ctable = {p: d for p, kind, d in cal}
cdoc = {}
for ks, cells in rows(section("Calibration files")):
    for k in ks:
        cdoc[k] = cells
for p, d in ctable.items():
    if p not in cdoc:
        fails.append(f"calibration key {p} is not in experiments/README.md")
    elif d != "-" and d and not same_default(cdoc[p][1], d):
        fails.append(f"calibration {p}: README says default {cdoc[p][1]!r}, the parser {d!r}")
for k in cdoc:
    if k not in ctable:
        fails.append(f"README documents calibration key {k}, which the parser does not take")

for f in fails:
    print("FAIL", f)
if fails:
    sys.exit(1)
print(f"ok: {len(table)} experiment keys, {len(ctable)} calibration keys documented")
