//! What changed between two commits of a workspace: the file list with line counts
//! (`git diff --raw --numstat`, one process), the summary (SPEC 2.3 DiffSummary) and the
//! old/new contents of a page of files (`git cat-file --batch`, one process per page).
//!
//! Must not: write the repository (it only reads commits).

use super::git::{Git, GitError};
use serde::Serialize;

/// How a file changed. Renames are listed as a deletion and an addition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ChangeKind {
    Added,
    Modified,
    Deleted,
}

/// One changed path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileChange {
    pub path: String,
    pub kind: ChangeKind,
    pub old_blob: Option<String>,
    pub new_blob: Option<String>,
    /// git found binary content (numstat `-`): counted, no line figures, no contents.
    pub binary: bool,
    pub additions: u64,
    pub deletions: u64,
}

/// SPEC 2.3 DiffSummary.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct DiffSummary {
    pub files_changed: u64,
    pub additions: u64,
    pub deletions: u64,
}

impl DiffSummary {
    pub fn of(changes: &[FileChange]) -> DiffSummary {
        DiffSummary::count(changes.iter().map(|c| (c.additions, c.deletions)))
    }

    /// One changed file per `(additions, deletions)`.
    fn count(files: impl Iterator<Item = (u64, u64)>) -> DiffSummary {
        files.fold(DiffSummary::default(), |s, (a, d)| DiffSummary {
            files_changed: s.files_changed + 1,
            additions: s.additions + a,
            deletions: s.deletions + d,
        })
    }
}

/// One side's contents larger than this are sent empty (like binary files): a diff view has
/// no use for them and one file must not make a page unbounded.
pub const MAX_CONTENTS: u64 = 1024 * 1024;

const NULL_SHA: &str = "0000000000000000000000000000000000000000";

/// The changes from `from` to `to` (commits), sorted by path.
pub fn changes(git: &Git, from: &str, to: &str) -> Result<Vec<FileChange>, GitError> {
    let out = git.run(&[
        "diff",
        "--no-renames",
        "--no-ext-diff",
        "--raw",
        "--numstat",
        "-z",
        "--abbrev=40",
        from,
        to,
    ])?;
    Ok(parse(&out))
}

/// Line counts of one changed file (a binary file changes no lines).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Lines {
    pub additions: u64,
    pub deletions: u64,
}

/// One pair's changed paths (as git wrote them) and their line counts.
pub type PairFiles = Vec<(Vec<u8>, Lines)>;

/// The DiffSummary of one pair's files.
pub fn summary_of(files: &[(Vec<u8>, Lines)]) -> DiffSummary {
    DiffSummary::count(files.iter().map(|(_, l)| (l.additions, l.deletions)))
}

/// The changed files of several `(from, to)` TREE pairs (ids, not commits: `diff-tree
/// --stdin` reads two commits as a commit and its parent) with one process, in order; the
/// same files and figures as [`changes`] gives for the commits holding those trees. Only
/// under `limit` (work-tree paths, files or folders, taken literally) when it
/// is not empty.
pub fn pair_files(
    git: &Git,
    pairs: &[(&str, &str)],
    limit: &[&std::path::Path],
) -> Result<Vec<PairFiles>, GitError> {
    let mut input = String::new();
    for (from, to) in pairs {
        input.push_str(&format!("{from} {to}\n"));
    }
    let mut args: Vec<&std::ffi::OsStr> = [
        "--literal-pathspecs",
        "diff-tree",
        "--stdin",
        "-r",
        "--always",
        "--no-renames",
        "--no-ext-diff",
        "--numstat",
        "-z",
    ]
    .iter()
    .map(std::ffi::OsStr::new)
    .collect();
    if !limit.is_empty() {
        args.push(std::ffi::OsStr::new("--"));
        args.extend(limit.iter().map(|p| p.as_os_str()));
    }
    let out = git.run_with_input(&args, input.as_bytes())?;
    Ok(parse_pair_files(&out))
}

/// `diff-tree --stdin --always --numstat -z` output: per input line that line (ids and a
/// space, ended by a newline even with `-z`, or by NUL for commits), then NUL-ended
/// `adds\tdels\tpath` records (`-` for binary files).
fn parse_pair_files(out: &[u8]) -> Vec<PairFiles> {
    let is_header =
        |l: &[u8]| !l.is_empty() && l.iter().all(|b| b.is_ascii_hexdigit() || *b == b' ');
    let mut list: Vec<PairFiles> = Vec::new();
    for mut field in out.split(|b| *b == 0) {
        loop {
            let line_end = field
                .iter()
                .position(|b| *b == b'\n')
                .unwrap_or(field.len());
            if !is_header(&field[..line_end]) {
                break;
            }
            list.push(PairFiles::new());
            field = field.get(line_end + 1..).unwrap_or_default();
        }
        let mut parts = field.splitn(3, |b| *b == b'\t');
        let (Some(a), Some(d), Some(path)) = (parts.next(), parts.next(), parts.next()) else {
            continue;
        };
        let Some(files) = list.last_mut() else {
            continue;
        };
        let num = |f: &[u8]| {
            std::str::from_utf8(f)
                .ok()
                .and_then(|t| t.parse::<u64>().ok())
                .unwrap_or(0)
        };
        files.push((
            path.to_vec(),
            Lines {
                additions: num(a),
                deletions: num(d),
            },
        ));
    }
    list
}

/// The run's changed files against its base, kept between checkpoints so that one which
/// staged only watched paths counts only those: the run diff then costs what the stage
/// changed, not everything the run changed so far.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct RunFiles(std::collections::BTreeMap<Vec<u8>, Lines>);

impl RunFiles {
    /// From a whole base..checkpoint diff.
    pub fn new(files: PairFiles) -> RunFiles {
        RunFiles(files.into_iter().collect())
    }

    /// Takes base..checkpoint `files` limited to `limit` (as [`pair_files`] was): what was
    /// known under those paths is replaced, the rest kept.
    pub fn update_under(&mut self, limit: &[&std::path::Path], files: PairFiles) {
        let limit: Vec<&[u8]> = limit
            .iter()
            .map(|p| p.as_os_str().as_encoded_bytes())
            .collect();
        self.0
            .retain(|path, _| !limit.iter().any(|l| is_under(path, l)));
        self.0.extend(files);
    }

    pub fn summary(&self) -> DiffSummary {
        DiffSummary::count(self.0.values().map(|l| (l.additions, l.deletions)))
    }
}

/// `path` is `dir` or inside it (whole components, as a pathspec matches).
fn is_under(path: &[u8], dir: &[u8]) -> bool {
    path.strip_prefix(dir)
        .is_some_and(|rest| rest.is_empty() || rest[0] == b'/')
}

/// Parses `--raw --numstat -z` output: raw records (`:mode mode sha sha S\0path\0`), then
/// numstat records (`adds\tdels\tpath\0`) for the same paths.
fn parse(out: &[u8]) -> Vec<FileChange> {
    let mut fields = out.split(|b| *b == 0).map(|f| String::from_utf8_lossy(f));
    let mut list: Vec<FileChange> = Vec::new();
    let mut by_path = std::collections::HashMap::new();
    while let Some(field) = fields.next() {
        if field.is_empty() {
            continue;
        }
        if let Some(raw) = field.strip_prefix(':') {
            let Some(path) = fields.next() else { break };
            let parts: Vec<&str> = raw.split(' ').collect();
            if parts.len() < 5 {
                continue;
            }
            let blob = |s: &str| (s != NULL_SHA).then(|| s.to_string());
            let kind = match parts[4].chars().next() {
                Some('A') => ChangeKind::Added,
                Some('D') => ChangeKind::Deleted,
                _ => ChangeKind::Modified,
            };
            by_path.insert(path.to_string(), list.len());
            list.push(FileChange {
                path: path.to_string(),
                kind,
                old_blob: blob(parts[2]),
                new_blob: blob(parts[3]),
                binary: false,
                additions: 0,
                deletions: 0,
            });
        } else {
            let mut it = field.splitn(3, '\t');
            let (Some(a), Some(d), Some(path)) = (it.next(), it.next(), it.next()) else {
                continue;
            };
            if let Some(&i) = by_path.get(path) {
                let c = &mut list[i];
                c.binary = a == "-";
                c.additions = a.parse().unwrap_or(0);
                c.deletions = d.parse().unwrap_or(0);
            }
        }
    }
    list.sort_by(|a, b| a.path.cmp(&b.path));
    list
}

/// The contents of `blobs` (None = that side does not exist), in order; a blob that is
/// binary, not UTF-8 or over [`MAX_CONTENTS`] reads as empty.
pub fn contents(git: &Git, blobs: &[Option<&str>]) -> Result<Vec<String>, GitError> {
    let wanted: Vec<&str> = blobs.iter().flatten().copied().collect();
    if wanted.is_empty() {
        return Ok(vec![String::new(); blobs.len()]);
    }
    let mut input = String::with_capacity(wanted.len() * 41);
    for b in &wanted {
        input.push_str(b);
        input.push('\n');
    }
    let out = git.run_with_input(&["cat-file", "--batch"], input.as_bytes())?;
    let mut read = BatchReader { out: &out, at: 0 };
    let mut texts = std::collections::HashMap::new();
    for b in &wanted {
        let text = read.next().unwrap_or_default();
        texts.insert(*b, text);
    }
    Ok(blobs
        .iter()
        .map(|b| b.and_then(|b| texts.get(b).cloned()).unwrap_or_default())
        .collect())
}

/// Reads `cat-file --batch` records: `<sha> <type> <size>\n<bytes>\n` (or `<x> missing\n`).
struct BatchReader<'a> {
    out: &'a [u8],
    at: usize,
}

impl BatchReader<'_> {
    fn next(&mut self) -> Option<String> {
        let rest = &self.out[self.at..];
        let nl = rest.iter().position(|b| *b == b'\n')?;
        let header = String::from_utf8_lossy(&rest[..nl]).to_string();
        self.at += nl + 1;
        let size: usize = header.split(' ').nth(2)?.parse().ok()?;
        let body = self.out.get(self.at..self.at + size)?;
        self.at += size + 1;
        if size as u64 > MAX_CONTENTS || body.contains(&0) {
            return Some(String::new());
        }
        Some(String::from_utf8(body.to_vec()).unwrap_or_default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_files_replace_only_what_the_limit_covers() {
        let lines = |a, d| Lines {
            additions: a,
            deletions: d,
        };
        let mut run = RunFiles::new(vec![
            (b"a.txt".to_vec(), lines(1, 0)),
            (b"src/x.rs".to_vec(), lines(2, 2)),
            (b"src/y.rs".to_vec(), lines(3, 0)),
            (b"srcs/z".to_vec(), lines(4, 0)),
        ]);
        // `src` was watched: src/x.rs went back to its base, src/w.rs is new; srcs/ is not
        // under src.
        run.update_under(
            &[std::path::Path::new("src")],
            vec![
                (b"src/y.rs".to_vec(), lines(5, 1)),
                (b"src/w.rs".to_vec(), lines(1, 0)),
            ],
        );
        assert_eq!(
            run.summary(),
            DiffSummary {
                files_changed: 4,
                additions: 11,
                deletions: 1
            }
        );
        run.update_under(&[std::path::Path::new("a.txt")], vec![]);
        assert_eq!(run.summary().files_changed, 3);
    }

    #[test]
    fn parses_raw_and_numstat() {
        let a = "a".repeat(40);
        let b = "b".repeat(40);
        let out = format!(
            ":000000 100644 {NULL_SHA} {a} A\0new.txt\0:100644 100644 {a} {b} M\0m.txt\0:100644 000000 {b} {NULL_SHA} D\0bin.dat\0\
             2\t0\tnew.txt\0-\t-\tbin.dat\01\t1\tm.txt\0"
        );
        let got = parse(out.as_bytes());
        assert_eq!(got.len(), 3);
        assert_eq!(got[0].path, "bin.dat");
        assert!(got[0].binary && got[0].kind == ChangeKind::Deleted && got[0].new_blob.is_none());
        assert_eq!((got[2].additions, got[2].kind), (2, ChangeKind::Added));
        // Two tree pairs; a newline-ended header, a binary file, an empty diff.
        let out = format!("{a} {b}\n3\t1\tx.txt\0-\t-\tbin\0{a} {a}\n");
        let files = parse_pair_files(out.as_bytes());
        assert_eq!(files[0][1], (b"bin".to_vec(), Lines::default()));
        let sums: Vec<DiffSummary> = files.iter().map(|f| summary_of(f)).collect();
        assert_eq!(
            sums,
            [
                DiffSummary {
                    files_changed: 2,
                    additions: 3,
                    deletions: 1
                },
                DiffSummary::default()
            ]
        );
        assert_eq!(
            DiffSummary::of(&got),
            DiffSummary {
                files_changed: 3,
                additions: 3,
                deletions: 1
            }
        );
    }
}
