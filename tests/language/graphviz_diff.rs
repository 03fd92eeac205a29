//! Differential test against Graphviz: random workflows inside the part of our DOT subset
//! that Graphviz also accepts must give the same node and edge counts as
//!     gvpr 'BEG_G{printf("%d %d\n",nNodes($G),nEdges($G))}'
//! and so must the corpus files SOURCES.md marks `graphviz: yes`.
//!
//! Both tests need Graphviz: where the build found no `gvpr` they are reported as ignored
//! with the install command; under `SVC_REQUIRE_GVPR=1` (`.ci/run` sets it after installing
//! `graphviz`) they run, and a missing `gvpr` fails them (`svc::internal::test_tools`).

use std::path::{Path, PathBuf};
use std::process::Command;
use svc::internal::test_tools::{require, Tool};

const GVPR_PROG: &str = r#"BEG_G{printf("%d %d\n",nNodes($G),nEdges($G))}"#;
const GRAPHS: usize = 300;

/// Counts by Graphviz, or its complaint when it rejects the file.
fn gvpr_counts(path: &Path) -> Result<(usize, usize), String> {
    let out = match Command::new("gvpr").arg(GVPR_PROG).arg(path).output() {
        Ok(o) => o,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => panic!(
            "`gvpr` not found: this test compares the parser with Graphviz. \
             Install graphviz (Debian/Ubuntu: `apt-get install -y graphviz`) and re-run."
        ),
        Err(e) => panic!("cannot run gvpr: {e}"),
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    // gvpr reports syntax errors on stderr and may still exit 0 after printing nothing.
    if !out.status.success() || stderr.contains("rror") {
        return Err(format!(
            "gvpr rejected {} ({}): {stderr}",
            path.display(),
            out.status
        ));
    }
    let mut it = stdout.split_whitespace().map(str::parse::<usize>);
    match (it.next(), it.next(), it.next()) {
        (Some(Ok(n)), Some(Ok(e)), None) => Ok((n, e)),
        _ => Err(format!(
            "unexpected gvpr output for {}: {stdout:?} {stderr}",
            path.display()
        )),
    }
}

fn our_counts(src: &str) -> Result<(usize, usize), String> {
    svc::internal::dot::parse(src)
        .map(|g| (g.nodes.len(), g.edges.len()))
        .map_err(|e| e.to_string())
}

// ---------------------------------------------------------------------------------------
// A small seeded PRNG (SplitMix64) and the random workflow generator
// ---------------------------------------------------------------------------------------

/// The engine's SplitMix64, so the inputs are the same on every run.
struct Rng(svc::internal::engine::prng::Prng);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0.next_u64()
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }
    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// Graphviz keywords are case-insensitive (`Node` is a keyword there), ours are not: keep
/// generated ids clear of all of them.
fn is_keyword(id: &str) -> bool {
    ["node", "edge", "graph", "digraph", "subgraph", "strict"]
        .contains(&id.to_ascii_lowercase().as_str())
}

struct Gen {
    rng: Rng,
    out: String,
    /// Ids used so far, so that later statements mention existing nodes again.
    ids: Vec<String>,
    depth: usize,
}

const FIRST: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_";
const REST: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_0123456789";

impl Gen {
    fn ident(&mut self) -> String {
        loop {
            let len = 1 + self.rng.below(8);
            let mut s = String::new();
            s.push(*self.rng.pick(FIRST) as char);
            for _ in 1..len {
                s.push(*self.rng.pick(REST) as char);
            }
            if !is_keyword(&s) {
                return s;
            }
        }
    }

    /// A node id: usually one seen before (edges between existing nodes, re-mentions).
    fn node_id(&mut self) -> String {
        if !self.ids.is_empty() && self.rng.chance(55) {
            let i = self.rng.below(self.ids.len());
            return self.ids[i].clone();
        }
        let id = match self.rng.below(6) {
            0 => ["start", "exit", "Start", "End", "end", "Exit"][self.rng.below(6)].to_string(),
            _ => self.ident(),
        };
        self.ids.push(id.clone());
        id
    }

    /// Whitespace and comments between tokens.
    fn sep(&mut self) {
        let s = match self.rng.below(12) {
            0 => "\n",
            1 => "\t",
            2 => "  ",
            3 => " /* block -> comment { } ; */ ",
            4 => " // line comment with \"quotes\" and -> arrows\n",
            5 => "\r\n",
            6 => "/**/",
            7 => " /* multi\n line * comment */\n",
            _ => " ",
        };
        self.out.push_str(s);
    }

    /// A double-quoted string with escapes, comment markers, braces, unicode, continuations.
    fn quoted(&mut self) -> String {
        const PIECES: &[&str] = &[
            "word",
            " ",
            "Stage 1",
            "\\\"",
            "\\\\",
            "\\n",
            "\\t",
            "//",
            "/*",
            "*/",
            "->",
            "{",
            "}",
            ";",
            ",",
            "=",
            "[",
            "]",
            "#",
            "héllo",
            "日本",
            "\\\n",
            "\n",
            "'",
            "$goal",
            "outcome=succeeded",
            "a && b",
            "x.y-z",
            "900s",
            "-1",
        ];
        let mut s = String::from("\"");
        for _ in 0..self.rng.below(6) {
            let piece = *self.rng.pick(PIECES);
            s.push_str(piece);
        }
        // A string must not end in a lone backslash (it would escape the closing quote).
        s.push('"');
        s
    }

    fn value(&mut self) -> String {
        match self.rng.below(10) {
            0..=3 => self.quoted(),
            4 => format!("{}", self.rng.below(1000)),
            5 => format!("-{}", self.rng.below(100)),
            6 => format!("{}.{}", self.rng.below(100), self.rng.below(1000)),
            7 => format!("-.{}", 1 + self.rng.below(99)),
            8 => self.rng.pick(&["true", "false"]).to_string(),
            _ => self
                .rng
                .pick(&[
                    "LR", "box", "Mdiamond", "Msquare", "diamond", "hexagon", "wait_all", "x_1",
                ])
                .to_string(),
        }
    }

    fn key(&mut self) -> String {
        if self.rng.chance(70) {
            self.rng
                .pick(&[
                    "label",
                    "shape",
                    "prompt",
                    "condition",
                    "weight",
                    "timeout",
                    "max_retries",
                    "class",
                    "goal",
                    "model",
                    "goal_gate",
                    "retry_target",
                    "fidelity",
                    "script",
                    "type",
                    "loop_restart",
                ])
                .to_string()
        } else {
            // Graphviz keywords are not attribute names either.
            self.ident()
        }
    }

    fn attr_list(&mut self) {
        self.out.push('[');
        let n = self.rng.below(5);
        for i in 0..n {
            self.sep();
            let k = self.key();
            let v = self.value();
            self.out.push_str(&k);
            if self.rng.chance(20) {
                self.sep();
            }
            self.out.push('=');
            if self.rng.chance(20) {
                self.sep();
            }
            self.out.push_str(&v);
            let last = i + 1 == n;
            match self.rng.below(4) {
                0 => self.out.push(';'),
                1 if !last => self.out.push(' '),
                _ if last && self.rng.chance(70) => {}
                _ => self.out.push(','),
            }
        }
        self.sep();
        self.out.push(']');
    }

    fn stmt(&mut self) {
        match self.rng.below(20) {
            0..=6 => {
                // node statement
                let id = self.node_id();
                self.out.push_str(&id);
                if self.rng.chance(70) {
                    self.sep();
                    self.attr_list();
                }
            }
            7..=13 => {
                // edge chain
                let len = 2 + self.rng.below(4);
                for i in 0..len {
                    if i > 0 {
                        self.sep();
                        self.out.push_str("->");
                        self.sep();
                    }
                    let id = self.node_id();
                    self.out.push_str(&id);
                }
                if self.rng.chance(50) {
                    self.sep();
                    self.attr_list();
                }
            }
            14 => {
                let target = *self.rng.pick(&["node", "edge", "graph"]);
                self.out.push_str(target);
                self.sep();
                self.attr_list();
            }
            15 => {
                let k = self.key();
                let v = self.value();
                self.out.push_str(&format!("{k}={v}"));
            }
            16..=18 if self.depth < 3 => self.subgraph(),
            _ => {
                let id = self.node_id();
                self.out.push_str(&id);
            }
        }
        if self.rng.chance(40) {
            self.out.push(';');
        }
        self.sep();
    }

    fn subgraph(&mut self) {
        match self.rng.below(4) {
            0 => {}
            1 => self.out.push_str("subgraph "),
            _ => {
                let name = format!("cluster_{}", self.ident());
                self.out.push_str(&format!("subgraph {name} "));
            }
        }
        self.out.push('{');
        self.sep();
        self.depth += 1;
        if self.rng.chance(60) {
            let label = self.quoted();
            if self.rng.chance(50) {
                self.out.push_str(&format!("label={label}; "));
            } else {
                self.out.push_str(&format!("graph [label={label}] "));
            }
        }
        for _ in 0..self.rng.below(6) {
            self.stmt();
        }
        self.depth -= 1;
        self.out.push('}');
    }

    fn graph(seed: u64) -> String {
        let mut g = Gen {
            rng: Rng(svc::internal::engine::prng::Prng::new(seed)),
            out: String::new(),
            ids: Vec::new(),
            depth: 0,
        };
        if g.rng.chance(20) {
            g.out.push_str("// leading comment\n");
        }
        let name = if g.rng.chance(30) {
            g.quoted()
        } else {
            g.ident()
        };
        g.out.push_str(&format!("digraph {name} {{"));
        g.sep();
        for _ in 0..g.rng.below(25) {
            g.stmt();
        }
        g.out.push('}');
        if g.rng.chance(20) {
            g.out.push_str("\n/* trailing comment */\n");
        }
        g.out
    }
}

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/corpus")
}

#[test]
#[cfg_attr(
    not(has_gvpr),
    ignore = "needs Graphviz's gvpr: apt-get install graphviz"
)]
fn random_workflows_count_like_graphviz() {
    require(Tool::Gvpr);
    let dir = tempfile::tempdir().expect("temp dir");
    let mut failures = Vec::new();
    let (mut total_nodes, mut total_edges) = (0, 0);
    for i in 0..GRAPHS {
        let seed = 0x5eed_0000 + i as u64;
        let src = Gen::graph(seed);
        let path = dir.path().join(format!("g{i}.dot"));
        std::fs::write(&path, &src).expect("write generated graph");
        let theirs = gvpr_counts(&path);
        let ours = our_counts(&src);
        if let Ok((n, e)) = ours {
            total_nodes += n;
            total_edges += e;
        }
        if ours != theirs {
            failures.push(format!(
                "seed {seed:#x}: svc {ours:?}, graphviz {theirs:?}\n{src}\n"
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {GRAPHS} generated graphs differ from Graphviz:\n{}",
        failures.len(),
        failures.join("\n")
    );
    // The generator must produce real graphs, not a run of empty ones.
    assert!(
        total_nodes > GRAPHS * 5 && total_edges > GRAPHS * 3,
        "{total_nodes} nodes, {total_edges} edges"
    );
}

/// Corpus files Graphviz accepts: Graphviz's counts equal SOURCES.md's and ours. Files
/// marked `no` use Attractor extensions (dotted keys, bare `gpt-5.2`): Graphviz must reject
/// them and we must accept them. `yes (n/e)` marks the diagram only Graphviz accepts.
#[test]
#[cfg_attr(
    not(has_gvpr),
    ignore = "needs Graphviz's gvpr: apt-get install graphviz"
)]
fn corpus_counts_match_graphviz() {
    require(Tool::Gvpr);
    let table = std::fs::read_to_string(corpus_dir().join("SOURCES.md"))
        .expect("testdata/corpus/SOURCES.md");
    let mut checked = 0;
    let mut failures = Vec::new();
    for line in table.lines().filter(|l| l.starts_with("| `")) {
        let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
        let file = cells[0].trim_matches('`');
        let (listed, graphviz) = (cells[6], cells[7]);
        let path = corpus_dir().join(file);
        let src = std::fs::read_to_string(&path).expect("corpus file");
        let theirs = gvpr_counts(&path);
        let ours = our_counts(&src);
        checked += 1;
        match graphviz {
            "yes" => {
                let want = listed
                    .split_once('/')
                    .map(|(n, e)| (n.parse().ok(), e.parse().ok()));
                let want = match want {
                    Some((Some(n), Some(e))) => (n, e),
                    _ => panic!("{file}: bad counts `{listed}`"),
                };
                if theirs != Ok(want) || ours != Ok(want) {
                    failures.push(format!(
                        "{file}: listed {want:?}, graphviz {theirs:?}, svc {ours:?}"
                    ));
                }
            }
            "no" => {
                if theirs.is_ok() || ours.is_err() {
                    failures.push(format!("{file}: want graphviz to reject and svc to accept: graphviz {theirs:?}, svc {ours:?}"));
                }
            }
            g => {
                let inner = g.trim_start_matches("yes (").trim_end_matches(')');
                let want = inner
                    .split_once('/')
                    .and_then(|(n, e)| Some((n.parse().ok()?, e.parse().ok()?)));
                if want.is_none() || theirs != Ok(want.unwrap_or_default()) || ours.is_ok() {
                    failures.push(format!("{file}: `{g}`: graphviz {theirs:?}, svc {ours:?}"));
                }
            }
        }
    }
    assert_eq!(checked, 60);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
