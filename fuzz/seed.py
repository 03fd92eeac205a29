#!/usr/bin/env python3
"""Seeds the fuzz corpora from the workflow corpus in testdata/corpus (hidden files included).

    python3 fuzz/seed.py            # from the repo root

Writes fuzz/corpus/parse_dot/ and load_dot/ (every corpus file as is),
fuzz/corpus/parse_condition/ (every condition="..." value), eval_condition/ (each condition,
a newline, then a few bytes choosing the context) and fuzz/corpus/parse_stylesheet/ (every
model_stylesheet value), plus a few hand-written cases for paths the corpus does not cover.
fuzz/corpus is committed: `fuzz/run.sh` merges what each campaign finds into it, so
campaigns accumulate across machines, and `tests/language/fuzz_replay.rs` replays it on stable.
"""
import hashlib, os, re, sys

here = os.path.dirname(os.path.abspath(__file__))
shared = os.path.join(here, "..", "testdata", "corpus")
if len(sys.argv) > 1:
    shared = sys.argv[1]
out = os.path.join(here, "corpus")

def put(target, data):
    d = os.path.join(out, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    name = hashlib.sha1(data).hexdigest()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)

def unescape(s):
    # Enough of the DOT string escapes for seeds.
    return s.replace('\\\n', '').replace('\\"', '"').replace('\\n', '\n').replace('\\\\', '\\')

QUOTED = r'"((?:[^"\\]|\\.)*)"'
counts = {"parse_dot": 0, "load_dot": 0, "parse_condition": 0, "eval_condition": 0, "parse_stylesheet": 0}
for root, _dirs, files in os.walk(shared):
    for name in files:  # os.walk lists hidden files too
        if name.endswith(".md"):
            continue
        text = open(os.path.join(root, name), encoding="utf-8").read()
        put("parse_dot", text); counts["parse_dot"] += 1
        put("load_dot", text); counts["load_dot"] += 1
        for m in re.finditer(r'condition\s*=\s*' + QUOTED, text, re.S):
            put("parse_condition", unescape(m.group(1))); counts["parse_condition"] += 1
            for tail in (b"", bytes(range(0, 64, 3)), bytes(range(255, 128, -5))):
                put("eval_condition", unescape(m.group(1)).encode() + b"\n" + tail)
                counts["eval_condition"] += 1
        for m in re.finditer(r'model_stylesheet\s*=\s*' + QUOTED, text, re.S):
            put("parse_stylesheet", unescape(m.group(1))); counts["parse_stylesheet"] += 1

for c in ['outcome=succeeded', 'outcome!=failed && context.n >= 3', '!context.flag || preferred_label=Yes',
          'context.out matches "^ok\\\\d+$"', 'context.x contains "a b"', 'context.t < 2.5 && context.u > -1',
          'outcome=success', 'key=', '!!!!a', 'a.b-c <= "x\\"y"']:
    put("parse_condition", c)
    put("eval_condition", c.encode() + b"\n" + bytes(range(1, 40, 2)))
for s in ['* { model: gpt-5.2; }', '.fast { model: "a;b"; reasoning_effort: low }',
          '#review { provider: anthropic; } box { model: m }', '/* c */ * { model: x; ; }',
          'a, b { model: x }', '* { model: }']:
    put("parse_stylesheet", s)
for d in ['digraph G { a -> b -> c [weight=-1, timeout=900s, f=.5] }',
          'digraph "x y" { subgraph { graph [label="L"] node [shape=box] a } a -> b }',
          'digraph G { a [label="x\\\ny \\"q\\" \\\\"] // c\n /* b */ }']:
    put("parse_dot", d)
    put("load_dot", d)
print(counts)
