//! The house rules of `src/` as tests (rust-analyzer's `xtask/src/tidy.rs` is the model): module
//! docs with an owning first sentence and a "Must not" line, SQL only in the store, the layer
//! table of `ARCHITECTURE.md` obeyed and acyclic, a code-map entry for every `src/*`
//! directory, test hooks behind the `test-support` feature, inline test modules under 300
//! lines, the crate root's types documented and `#[non_exhaustive]`. Each failure lists every
//! offender
//! as `file:line: what is wrong`.
//!
//! The checks read the source as text: comments and string literals are blanked before imports
//! are looked for, and test code (`tests.rs` files, `#[cfg(test)]` items) may import anything.
//! Must not: build or run the crate (plain file reads, so it costs nothing in any feature set).

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// One file of `src/`: its path from the crate root, its raw lines, and the same lines with
/// comments and literals blanked (`code`), and which lines are test code.
struct Source {
    path: String,
    raw: Vec<String>,
    code: Vec<String>,
    test: Vec<bool>,
}

impl Source {
    /// The top-level module the file belongs to (`src/engine/walker/mod.rs` -> `engine`), or
    /// `None` for the crate roots `lib.rs` and `main.rs` and for `internal.rs`, which only
    /// declares the top-level modules (`crate::internal::engine` is `engine`).
    fn top(&self) -> Option<&str> {
        let rest = self.path.strip_prefix("src/")?;
        match rest.split_once('/') {
            Some((dir, _)) => Some(dir),
            None if rest == "lib.rs" || rest == "main.rs" || rest == "internal.rs" => None,
            None => rest.strip_suffix(".rs"),
        }
    }

    /// How many `super::` reach the crate root from this file's module.
    fn depth(&self) -> usize {
        let rest = self.path.trim_start_matches("src/");
        let parts: Vec<&str> = rest.split('/').collect();
        let last = parts[parts.len() - 1];
        if last == "mod.rs" || last == "lib.rs" || last == "main.rs" {
            parts.len() - 1
        } else {
            parts.len()
        }
    }

    fn at(&self, line: usize) -> String {
        format!("{}:{}", self.path, line + 1)
    }
}

/// Every file of `src/`, read and blanked once for all the checks.
fn sources() -> &'static [Source] {
    static SOURCES: OnceLock<Vec<Source>> = OnceLock::new();
    SOURCES.get_or_init(read_sources)
}

fn read_sources() -> Vec<Source> {
    let mut files = Vec::new();
    collect(&root().join("src"), &mut files);
    files.sort();
    let mut out: Vec<Source> = files
        .iter()
        .map(|file| {
            let text = fs::read_to_string(file).unwrap_or_else(|e| panic!("{file:?}: {e}"));
            let path = file
                .strip_prefix(root())
                .expect("under the crate root")
                .to_string_lossy()
                .replace('\\', "/");
            let raw: Vec<String> = text.lines().map(str::to_string).collect();
            let code = blank_comments_and_literals(&text);
            let test = vec![path.ends_with("/tests.rs"); raw.len()];
            Source {
                path,
                raw,
                code,
                test,
            }
        })
        .collect();
    // Files declared as `#[cfg(test)] mod name;` are test code as a whole.
    let test_files: BTreeSet<String> = out.iter().flat_map(test_module_files).collect();
    for s in &mut out {
        if test_files.contains(&s.path) {
            s.test = vec![true; s.raw.len()];
        } else {
            let spans = cfg_test_items(&s.code);
            for (from, to) in spans {
                for t in &mut s.test[from..=to] {
                    *t = true;
                }
            }
        }
    }
    out
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap_or_else(|e| panic!("{dir:?}: {e}")) {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            collect(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

fn top_level_dirs() -> Vec<String> {
    let mut dirs: Vec<String> = fs::read_dir(root().join("src"))
        .expect("src/")
        .filter_map(|e| e.ok())
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    dirs.sort();
    dirs
}

/// The text with every comment and every string or character literal replaced by spaces,
/// line for line, so that what is left is code.
fn blank_comments_and_literals(text: &str) -> Vec<String> {
    let c: Vec<char> = text.chars().collect();
    let ident = |ch: char| ch.is_alphanumeric() || ch == '_';
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < c.len() {
        let rest = &c[i..];
        let starts = |p: &str| rest.iter().take(p.len()).copied().eq(p.chars());
        let after_ident = i > 0 && ident(c[i - 1]);
        // A byte literal's `b` does not make its quote a lifetime.
        let byte_prefix = i > 0 && c[i - 1] == 'b' && !(i > 1 && ident(c[i - 2]));
        let blank = if starts("//") {
            rest.iter().position(|&ch| ch == '\n').unwrap_or(rest.len())
        } else if starts("/*") {
            block_comment_len(rest)
        } else if !after_ident && (starts("r\"") || starts("r#") || starts("br\"") || starts("br#"))
        {
            raw_string_len(rest)
        } else if rest[0] == '"' {
            let mut j = 1;
            while j < rest.len() && rest[j] != '"' {
                j += if rest[j] == '\\' { 2 } else { 1 };
            }
            j + 1
        } else if rest[0] == '\'' && (!after_ident || byte_prefix) {
            // A character literal ('x', '\n', '\'', '\u{7f}'), not a lifetime ('a).
            if rest.get(1) == Some(&'\\') {
                rest.iter()
                    .skip(3)
                    .position(|&ch| ch == '\'')
                    .map_or(0, |p| p + 4)
            } else if rest.get(2) == Some(&'\'') {
                3
            } else {
                0
            }
        } else {
            0
        };
        if blank == 0 {
            out.push(rest[0]);
            i += 1;
        } else {
            let end = blank.min(rest.len());
            for ch in &rest[..end] {
                out.push(if *ch == '\n' { '\n' } else { ' ' });
            }
            i += end;
        }
    }
    out.lines().map(str::to_string).collect()
}

fn block_comment_len(rest: &[char]) -> usize {
    let (mut depth, mut j) = (0, 0);
    while j < rest.len() {
        if rest[j..].starts_with(&['/', '*']) {
            depth += 1;
            j += 2;
        } else if rest[j..].starts_with(&['*', '/']) {
            depth -= 1;
            j += 2;
            if depth == 0 {
                return j;
            }
        } else {
            j += 1;
        }
    }
    j
}

/// The length of the raw string at the start of `rest` (`r"…"`, `r#"…"#`, `br"…"`), or 0
/// when it is not one (an identifier starting with `r`).
fn raw_string_len(rest: &[char]) -> usize {
    let skip = if rest[0] == 'b' { 2 } else { 1 };
    let hashes = rest[skip..].iter().take_while(|&&ch| ch == '#').count();
    if rest.get(skip + hashes) != Some(&'"') {
        return 0;
    }
    let close: Vec<char> = std::iter::once('"')
        .chain(std::iter::repeat_n('#', hashes))
        .collect();
    (skip + hashes + 1..rest.len())
        .find(|&j| rest[j..].starts_with(&close))
        .map_or(rest.len(), |j| j + close.len())
}

/// `(first, last)` line spans of the items under a `#[cfg(test)]` attribute.
fn cfg_test_items(code: &[String]) -> Vec<(usize, usize)> {
    let mut spans = Vec::new();
    let mut i = 0;
    while i < code.len() {
        if code[i].trim() != "#[cfg(test)]" {
            i += 1;
            continue;
        }
        let (mut depth, mut opened) = (0i64, false);
        let mut j = i + 1;
        'item: while j < code.len() {
            for ch in code[j].chars() {
                match ch {
                    '{' => {
                        depth += 1;
                        opened = true;
                    }
                    '}' => depth -= 1,
                    ';' if !opened => break 'item,
                    _ => {}
                }
                if opened && depth == 0 {
                    break 'item;
                }
            }
            j += 1;
        }
        let last = j.min(code.len() - 1);
        spans.push((i, last));
        i = last + 1;
    }
    spans
}

/// The files that `#[cfg(test)] mod name;` lines of `s` declare.
fn test_module_files(s: &Source) -> Vec<String> {
    let dir = match s.path.rsplit_once('/') {
        Some((dir, file)) if file == "mod.rs" || file == "lib.rs" => dir.to_string(),
        _ => s.path.trim_end_matches(".rs").to_string(),
    };
    let mut files = Vec::new();
    for (i, line) in s.code.iter().enumerate() {
        if line.trim() != "#[cfg(test)]" {
            continue;
        }
        let Some(next) = s.code.get(i + 1) else {
            continue;
        };
        let next = next.trim();
        let name = next
            .strip_prefix("mod ")
            .or_else(|| next.strip_prefix("pub(crate) mod "))
            .and_then(|n| n.strip_suffix(';'));
        if let Some(name) = name {
            files.push(format!("{dir}/{name}.rs"));
            files.push(format!("{dir}/{name}/mod.rs"));
        }
    }
    files
}

fn report(rule: &str, offenders: Vec<String>) {
    assert!(
        offenders.is_empty(),
        "{rule}\n{} offender(s):\n  {}\n",
        offenders.len(),
        offenders.join("\n  ")
    );
}

#[test]
fn every_source_file_opens_with_what_it_owns_and_a_must_not_line() {
    let mut offenders = Vec::new();
    for s in sources() {
        let header: Vec<&str> = s
            .raw
            .iter()
            .take_while(|l| l.starts_with("//!"))
            .map(|l| l.trim_start_matches("//!").trim())
            .collect();
        let first_paragraph: Vec<&str> = header
            .iter()
            .take_while(|l| !l.is_empty())
            .copied()
            .collect();
        if header.is_empty() {
            offenders.push(format!(
                "{}: does not open with a `//!` module doc",
                s.at(0)
            ));
            continue;
        }
        if first_paragraph.is_empty() || !first_paragraph.join(" ").contains(['.', ':']) {
            offenders.push(format!(
                "{}: the module doc's first paragraph is not a sentence saying what the module owns",
                s.at(0)
            ));
        }
        if !header.iter().any(|l| l.to_lowercase().contains("must not")) {
            offenders.push(format!(
                "{}: the module doc ({} lines) has no \"Must not\" line",
                s.at(0),
                header.len()
            ));
        }
    }
    report(
        "Every src/**/*.rs opens with a `//!` doc: a first sentence saying what it owns, and a \
         \"Must not\" line (ARCHITECTURE.md, \"Code map\").",
        offenders,
    );
}

#[test]
fn rusqlite_is_named_only_under_src_store() {
    let mut offenders = Vec::new();
    for s in sources() {
        if s.path.starts_with("src/store/") {
            continue;
        }
        for (i, line) in s.code.iter().enumerate() {
            if has_word(line, "rusqlite") {
                offenders.push(format!("{}: `rusqlite` outside src/store/", s.at(i)));
            }
        }
    }
    report(
        "SQL lives only under src/store/: no other module names `rusqlite`.",
        offenders,
    );
}

fn has_word(line: &str, word: &str) -> bool {
    line.match_indices(word).any(|(at, _)| {
        let before = line[..at].chars().next_back();
        let after = line[at + word.len()..].chars().next();
        let ident = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
        !ident(before) && !ident(after)
    })
}

/// ARCHITECTURE.md's layer table: `| module | may import |` rows, each a backticked module and
/// the backticked modules it may import (or a cell without backticks for none).
fn layer_table() -> (BTreeMap<String, BTreeSet<String>>, BTreeMap<String, usize>) {
    let doc = fs::read_to_string(root().join("ARCHITECTURE.md")).expect("ARCHITECTURE.md");
    let mut allowed = BTreeMap::new();
    let mut lines = BTreeMap::new();
    let mut in_table = false;
    for (i, line) in doc.lines().enumerate() {
        if line.replace(' ', "").starts_with("|module|mayimport|") {
            in_table = true;
            continue;
        }
        if !in_table {
            continue;
        }
        if !line.starts_with('|') {
            break;
        }
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        if cells.len() < 3 || cells[1].starts_with("---") {
            continue;
        }
        let Some(module) = backticked(cells[1]).into_iter().next() else {
            panic!("ARCHITECTURE.md:{}: a layer row without a `module`", i + 1)
        };
        lines.insert(module.clone(), i + 1);
        allowed.insert(module, backticked(cells[2]).into_iter().collect());
    }
    assert!(
        !allowed.is_empty(),
        "ARCHITECTURE.md has no `| module | may import |` table"
    );
    (allowed, lines)
}

fn backticked(cell: &str) -> Vec<String> {
    cell.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

/// Every top-level module named by a non-test path in `s`: `crate::x`, `crate::{x, y::z}`,
/// and `super::` chains that climb to the crate root, with the line they are on.
fn imports(s: &Source) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    let flat: String = s.code.join("\n");
    let starts: Vec<usize> = std::iter::once(0)
        .chain(flat.match_indices('\n').map(|(at, _)| at + 1))
        .collect();
    let line_of = |at: usize| starts.partition_point(|&start| start <= at) - 1;
    let ident_at = |at: usize| -> String {
        flat[at..]
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect()
    };
    for (at, _) in flat.match_indices("crate::") {
        let before = flat[..at].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$') {
            continue;
        }
        let line = line_of(at);
        if s.test[line] {
            continue;
        }
        let mut after = at + "crate::".len();
        // `crate::internal::x` is the long spelling of `crate::x`.
        if flat[after..].starts_with("internal::") {
            after += "internal::".len();
        }
        if flat[after..].starts_with('{') {
            let mut depth = 0;
            let mut start = after + 1;
            for (k, ch) in flat[after..].char_indices() {
                match ch {
                    '{' => depth += 1,
                    '}' | ',' if depth == 1 => {
                        let name = flat[start..after + k].trim();
                        let name = name.split("::").next().unwrap_or("").trim();
                        if !name.is_empty() && name != "self" {
                            found.push((line, name.to_string()));
                        }
                        start = after + k + 1;
                        if ch == '}' {
                            break;
                        }
                    }
                    '}' => depth -= 1,
                    _ => {}
                }
            }
        } else {
            found.push((line, ident_at(after)));
        }
    }
    let depth = s.depth();
    let mut k = 0;
    while let Some(pos) = flat[k..].find("super::") {
        let at = k + pos;
        let mut end = at;
        let mut climbs = 0;
        while flat[end..].starts_with("super::") {
            climbs += 1;
            end += "super::".len();
        }
        let before = flat[..at].chars().next_back();
        let line = line_of(at);
        if climbs >= depth
            && !before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':')
            && !s.test[line]
        {
            found.push((line, ident_at(end)));
        }
        k = end;
    }
    found
}

#[test]
fn each_top_level_module_imports_only_what_the_layer_table_allows() {
    let (allowed, rows) = layer_table();
    let sources = sources();
    let modules: BTreeSet<String> = sources
        .iter()
        .filter_map(|s| s.top().map(str::to_string))
        .collect();
    let mut offenders = Vec::new();
    for m in &modules {
        if !allowed.contains_key(m) {
            offenders.push(format!(
                "ARCHITECTURE.md: the layer table has no row for `{m}` (src/{m})"
            ));
        }
    }
    for (m, line) in &rows {
        if !modules.contains(m) {
            offenders.push(format!(
                "ARCHITECTURE.md:{line}: the layer table's row `{m}` is not a module of src/"
            ));
        }
    }
    let mut used: BTreeSet<(String, String)> = BTreeSet::new();
    for s in sources {
        let Some(top) = s.top() else { continue };
        for (line, target) in imports(s) {
            if target == top || !modules.contains(&target) {
                continue;
            }
            used.insert((top.to_string(), target.clone()));
            if !allowed.get(top).is_some_and(|a| a.contains(&target)) {
                offenders.push(format!(
                    "{}: `{top}` imports `{target}`, which ARCHITECTURE.md's layer table does not allow",
                    s.at(line)
                ));
            }
        }
    }
    for (m, targets) in &allowed {
        for t in targets {
            if !used.contains(&(m.clone(), t.clone())) {
                offenders.push(format!(
                    "ARCHITECTURE.md:{}: `{m}` may import `{t}` but does not: drop it from the row",
                    rows[m]
                ));
            }
        }
    }
    if let Some(cycle) = find_cycle(&allowed) {
        offenders.push(format!(
            "ARCHITECTURE.md:{}: the layer table has a cycle: {}",
            rows[&cycle[0]],
            cycle.join(" -> ")
        ));
    }
    report(
        "Each top-level module imports only the modules its row of ARCHITECTURE.md's layer table \
         names (test code may import anything), and the table has no cycle.",
        offenders,
    );
}

fn find_cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        state: &mut BTreeMap<String, u8>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        match state.get(node) {
            Some(2) => return None,
            Some(1) => {
                let from = path.iter().position(|p| p == node).unwrap_or(0);
                let mut cycle = path[from..].to_vec();
                cycle.push(node.to_string());
                return Some(cycle);
            }
            _ => {}
        }
        state.insert(node.to_string(), 1);
        path.push(node.to_string());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(c) = visit(next, graph, state, path) {
                return Some(c);
            }
        }
        path.pop();
        state.insert(node.to_string(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for node in graph.keys() {
        if let Some(c) = visit(node, graph, &mut state, &mut Vec::new()) {
            return Some(c);
        }
    }
    None
}

#[test]
fn every_src_directory_has_a_code_map_entry() {
    let doc = fs::read_to_string(root().join("ARCHITECTURE.md")).expect("ARCHITECTURE.md");
    let map: String = doc
        .split("\n## ")
        .filter(|section| section.starts_with("Code map"))
        .collect();
    assert!(
        !map.is_empty(),
        "ARCHITECTURE.md has no \"## Code map\" section"
    );
    // One `### `src/<dir>/`` heading per directory (a heading may name several paths), with
    // a "**Must not:**" line before the next heading.
    let entries: Vec<&str> = map
        .split("\n### ")
        .skip(1)
        .filter(|e| e.starts_with('`'))
        .collect();
    let mut offenders: Vec<String> = top_level_dirs()
        .into_iter()
        .filter(|d| {
            let path = format!("`src/{d}/`");
            !entries
                .iter()
                .any(|e| e.lines().next().is_some_and(|h| h.contains(&path)))
        })
        .map(|d| format!("src/{d}/: no `### `src/{d}/`` heading in ARCHITECTURE.md's code map"))
        .collect();
    for e in &entries {
        if !e.contains("**Must not:**") {
            let heading = e.lines().next().unwrap_or_default();
            offenders.push(format!(
                "ARCHITECTURE.md: `### {heading}` has no \"**Must not:**\" line"
            ));
        }
    }
    report(
        "Every src/* directory has its heading in ARCHITECTURE.md's \"Code map\", saying what \
         the module owns and what it must not touch.",
        offenders,
    );
}

#[test]
fn test_hooks_are_behind_the_test_support_feature() {
    let mut offenders = Vec::new();
    for s in sources() {
        for (i, line) in s.code.iter().enumerate() {
            let Some(at) = line.find("fn ") else { continue };
            let name: String = line[at + 3..]
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if !name.ends_with("_for_tests") || s.test[i] {
                continue;
            }
            let attrs: Vec<&str> = s.raw[..i]
                .iter()
                .rev()
                .map(|l| l.trim())
                .take_while(|l| l.starts_with("#[") || l.starts_with("///"))
                .filter(|l| l.starts_with("#["))
                .collect();
            if !attrs
                .iter()
                .any(|a| a.contains("feature = \"test-support\""))
            {
                offenders.push(format!(
                    "{}: `{name}` is not behind #[cfg(any(test, feature = \"test-support\"))]",
                    s.at(i)
                ));
            }
            if attrs.iter().any(|a| a.contains("doc(hidden)")) {
                offenders.push(format!(
                    "{}: `{name}` is #[doc(hidden)]: gate it behind the feature instead",
                    s.at(i)
                ));
            }
        }
    }
    report(
        "Test hooks (`*_for_tests`) exist only under the `test-support` feature, never as \
         #[doc(hidden)] pub (ARCHITECTURE.md, \"Testing\").",
        offenders,
    );
}

#[test]
fn inline_test_modules_stay_under_300_lines() {
    let mut offenders = Vec::new();
    for s in sources() {
        for (from, to) in cfg_test_items(&s.code) {
            let opens_a_module = s.code.get(from + 1).is_some_and(|l| {
                let l = l.trim_start();
                l.starts_with("mod ") && l.contains('{')
            });
            if opens_a_module && to - from > 300 {
                offenders.push(format!(
                    "{}: an inline test module of {} lines: move it to a sibling tests.rs",
                    s.at(from),
                    to - from + 1
                ));
            }
        }
    }
    report(
        "Inline #[cfg(test)] modules stay under 300 lines; longer ones live in a sibling \
         tests.rs (ARCHITECTURE.md, \"Testing\").",
        offenders,
    );
}

/// The names `src/lib.rs` re-exports at the crate root, each with the top-level module its
/// definition lives under (`embed` for the front door's own types).
fn root_exports() -> Vec<(String, String)> {
    let by_path = |file: &str| {
        sources()
            .iter()
            .find(|s| s.path == file)
            .unwrap_or_else(|| panic!("{file} is missing"))
    };
    // `pub use a::b::{C, D};` statements, joined across lines: (module path, names).
    let statements = |s: &Source| -> Vec<(String, Vec<String>)> {
        let mut out = Vec::new();
        let mut current: Option<String> = None;
        for line in &s.code {
            let t = line.trim();
            if current.is_none() && t.starts_with("pub use ") {
                current = Some(String::new());
            }
            if let Some(text) = current.as_mut() {
                text.push_str(t);
                text.push(' ');
                if t.ends_with(';') {
                    let body = text
                        .trim()
                        .trim_start_matches("pub use ")
                        .trim_end_matches(';');
                    let (path, names) = match body.split_once('{') {
                        Some((path, names)) => (path, names.trim_end_matches('}')),
                        None => body.rsplit_once("::").unwrap_or(("", body)),
                    };
                    let names = names
                        .split(',')
                        .map(|n| n.trim().to_string())
                        .filter(|n| !n.is_empty())
                        .collect();
                    out.push((path.trim_end_matches("::").to_string(), names));
                    current = None;
                }
            }
        }
        out
    };
    let embed_sources: BTreeMap<String, String> = statements(by_path("src/embed.rs"))
        .into_iter()
        .flat_map(|(path, names)| {
            let top = path.trim_start_matches("crate::");
            let top = top.split("::").next().unwrap_or(top).to_string();
            names.into_iter().map(move |n| (n, top.clone()))
        })
        .collect();
    statements(by_path("src/lib.rs"))
        .into_iter()
        .flat_map(|(path, names)| {
            let embed_sources = &embed_sources;
            names.into_iter().map(move |n| {
                let top = match path.as_str() {
                    "embed" => embed_sources.get(&n).cloned().unwrap_or("embed".into()),
                    other => other.split("::").next().unwrap_or(other).to_string(),
                };
                (n, top)
            })
        })
        .collect()
}

/// The line above `at` that is not an attribute: a doc comment when the item is documented.
fn doc_above(s: &Source, at: usize) -> bool {
    s.raw[..at]
        .iter()
        .rev()
        .map(|l| l.trim())
        .find(|l| !l.starts_with("#["))
        .is_some_and(|l| l.starts_with("///"))
}

/// The attribute lines right above `at`.
fn attributes_above(s: &Source, at: usize) -> Vec<&str> {
    s.raw[..at]
        .iter()
        .rev()
        .map(|l| l.trim())
        .take_while(|l| l.starts_with("#[") || l.starts_with("///"))
        .filter(|l| l.starts_with("#["))
        .collect()
}

/// The lines of the `{ ... }` block opened on or after line `from`, each with its brace
/// depth before the line (1 = directly inside the block).
fn block_lines(s: &Source, from: usize) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut depth = 0usize;
    let mut opened = false;
    for (i, line) in s.code.iter().enumerate().skip(from) {
        if opened {
            out.push((i, depth));
        }
        for c in line.chars() {
            match c {
                '{' => {
                    depth += 1;
                    opened = true;
                }
                '}' => depth = depth.saturating_sub(1),
                ';' if !opened => return out,
                _ => {}
            }
        }
        if opened && depth == 0 {
            break;
        }
    }
    out
}

fn starts_with_ident(line: &str, upper: bool) -> bool {
    line.chars().next().is_some_and(|c| {
        if upper {
            c.is_ascii_uppercase()
        } else {
            c.is_ascii_lowercase() || c == '_'
        }
    })
}

/// Undocumented public parts of the stable type `name` defined at `s`:`at` (its fields,
/// variants and their fields, trait methods) and of its inherent `impl` blocks in the same
/// module tree.
fn undocumented_parts(s: &Source, at: usize, kind: &str, name: &str, out: &mut Vec<String>) {
    for (i, depth) in block_lines(s, at) {
        let t = s.code[i].trim();
        if t.is_empty() || t.starts_with("#[") || t.starts_with('}') {
            continue;
        }
        let needs_doc = match (kind, depth) {
            ("struct", 1) => t.starts_with("pub "),
            ("enum", 1) => starts_with_ident(t, true),
            ("enum", 2) => starts_with_ident(t, false) && t.contains(':'),
            ("trait", 1) => t.starts_with("fn "),
            _ => false,
        };
        if needs_doc && !doc_above(s, i) {
            out.push(format!("{}: `{name}`: `{t}` has no doc comment", s.at(i)));
        }
    }
    let top = s.top();
    for other in sources().iter().filter(|o| o.top() == top) {
        for (i, line) in other.code.iter().enumerate() {
            let t = line.trim();
            let inherent = t.strip_prefix("impl ").is_some_and(|rest| {
                rest.split(|c: char| !c.is_alphanumeric() && c != '_')
                    .next()
                    == Some(name)
                    && !rest.contains(" for ")
            });
            if !inherent || other.test[i] {
                continue;
            }
            for (j, depth) in block_lines(other, i) {
                let t = other.code[j].trim();
                if depth == 1 && t.starts_with("pub fn ") && !doc_above(other, j) {
                    out.push(format!(
                        "{}: `{name}`: `{t}` has no doc comment",
                        other.at(j)
                    ));
                }
            }
        }
    }
}

#[test]
fn the_stable_root_types_are_documented_and_may_grow() {
    let exports = root_exports();
    assert!(
        exports.iter().any(|(n, _)| n == "Engine") && exports.iter().any(|(n, _)| n == "Event"),
        "the crate root's re-exports were not found: {exports:?}"
    );
    let mut offenders = Vec::new();
    for (name, top) in &exports {
        let mut found = Vec::new();
        for s in sources().iter().filter(|s| s.top() == Some(top.as_str())) {
            for (i, line) in s.code.iter().enumerate() {
                for kind in ["struct", "enum", "trait", "type"] {
                    let head = format!("pub {kind} {name}");
                    let t = line.trim();
                    let is_def = t.strip_prefix(&head).is_some_and(|rest| {
                        !rest.starts_with(|c: char| c.is_alphanumeric() || c == '_')
                    });
                    if is_def && !s.test[i] {
                        found.push((s, i, kind));
                    }
                }
            }
        }
        let [(s, at, kind)] = found.as_slice() else {
            offenders.push(format!(
                "src/lib.rs: `{name}` (from `{top}`) is defined {} times under src/{top}",
                found.len()
            ));
            continue;
        };
        if !doc_above(s, *at) {
            offenders.push(format!("{}: `{name}` has no doc comment", s.at(*at)));
        }
        let has_public_parts = *kind == "enum"
            || (*kind == "struct"
                && block_lines(s, *at)
                    .iter()
                    .any(|&(i, d)| d == 1 && s.code[i].trim().starts_with("pub ")));
        if has_public_parts
            && !attributes_above(s, *at)
                .iter()
                .any(|a| a.contains("non_exhaustive"))
        {
            offenders.push(format!(
                "{}: `{name}` has public fields or variants and is not #[non_exhaustive] \
                 (adding one would break every embedder)",
                s.at(*at)
            ));
        }
        undocumented_parts(s, *at, kind, name, &mut offenders);
    }
    report(
        "The crate root's types are the embedding API: each is documented down to its fields, \
         variants and methods, and may grow without breaking embedders (#[non_exhaustive]) \
         (ARCHITECTURE.md, \"Stability\").",
        offenders,
    );
}
