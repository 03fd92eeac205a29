//! Shell scripts that are one external program with literal words (`cargo test --release`,
//! `python3 tools/check.py -q`, `make -j2 all`), which a command stage starts directly, as
//! GNU make does for such recipe lines, instead of starting `sh` to start them: Debian's
//! `sh` (dash) forks once more to run an external program, so every such stage paid for two
//! process starts (2.2 ms against 0.9 ms for `/bin/true` on the 2-core machine).
//!
//! A script qualifies only when `sh` would do nothing with it but look the first word up on
//! `PATH` and exec it with the words as they are: no quoting, expansion, globbing,
//! redirection, assignment, comment, control operator or line break, and a first word that
//! is not one of the shell's keywords or built-in commands (those run in the shell, where
//! their meaning is the shell's). `true` and `false` are not on that list, as in make: the
//! programs do exactly what the built-ins do.
//!
//! Owns: deciding that a script is such a command and splitting it into its words.
//! Must not touch: starting the process or what its exit means (`script`, `wait`).

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

/// Words that mean something to the shell before any `PATH` lookup: POSIX and dash keywords
/// and built-ins, and bash's, in case `sh` is bash. A script starting with one runs in `sh`.
/// `echo`, `printf`, `pwd`, `kill`, `test` and `[` are here although programs of those
/// names exist: the built-ins differ from them in options and output.
const SHELL_WORDS: &[&str] = &[
    "!",
    ".",
    ":",
    "[",
    "[[",
    "]]",
    "alias",
    "bg",
    "bind",
    "break",
    "builtin",
    "caller",
    "case",
    "cd",
    "command",
    "compgen",
    "complete",
    "continue",
    "declare",
    "dirs",
    "disown",
    "do",
    "done",
    "echo",
    "elif",
    "else",
    "enable",
    "esac",
    "eval",
    "exec",
    "exit",
    "export",
    "fc",
    "fg",
    "fi",
    "for",
    "function",
    "getopts",
    "hash",
    "help",
    "history",
    "if",
    "in",
    "jobs",
    "kill",
    "let",
    "local",
    "logout",
    "mapfile",
    "popd",
    "printf",
    "pushd",
    "pwd",
    "read",
    "readarray",
    "readonly",
    "return",
    "select",
    "set",
    "shift",
    "shopt",
    "source",
    "suspend",
    "test",
    "then",
    "time",
    "times",
    "trap",
    "type",
    "typeset",
    "ulimit",
    "umask",
    "unalias",
    "unset",
    "until",
    "wait",
    "while",
];

/// A byte that means only itself to the shell inside a word.
fn literal(b: u8) -> bool {
    b.is_ascii_alphanumeric()
        || matches!(
            b,
            b'_' | b'-' | b'.' | b'/' | b',' | b':' | b'@' | b'+' | b'%' | b'='
        )
}

/// The words of `script` when `sh -c script` would exec them as they are (see the module
/// doc), else `None`. Blanks and tabs separate words; surrounding white space is ignored.
pub fn simple_words(script: &str) -> Option<Vec<&str>> {
    let script = script.trim_matches([' ', '\t', '\n']);
    let words: Vec<&str> = script
        .split([' ', '\t'])
        .filter(|w| !w.is_empty())
        .collect();
    let first = *words.first()?;
    let plain = words.iter().all(|w| w.bytes().all(literal));
    // `NAME=value` first is an assignment, not a program.
    if !plain || first.contains('=') || SHELL_WORDS.contains(&first) {
        return None;
    }
    Some(words)
}

/// The `PWD` that `sh` exports to what it runs in `workdir`, given the `PWD` it inherited:
/// that one when it is absolute and names `workdir` (a path through a symlink is kept),
/// else the physical path. `None` when `workdir` cannot be resolved (the shell then
/// reports it).
pub fn shell_pwd(inherited: Option<&OsStr>, workdir: &Path) -> Option<OsString> {
    use std::os::unix::fs::MetadataExt;
    let same = |a: &Path, b: &Path| match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    };
    if let Some(pwd) = inherited.map(Path::new) {
        if pwd.is_absolute() && same(pwd, workdir) {
            return Some(pwd.as_os_str().to_owned());
        }
    }
    std::fs::canonicalize(workdir)
        .ok()
        .map(PathBuf::into_os_string)
}

#[cfg(test)]
mod tests {
    use super::{shell_pwd, simple_words};
    use std::ffi::OsStr;

    #[test]
    fn programs_with_literal_words_are_split() {
        assert_eq!(
            simple_words("cargo test --release"),
            Some(vec!["cargo", "test", "--release"])
        );
        assert_eq!(
            simple_words("  python3\ttools/check.py  -q \n"),
            Some(vec!["python3", "tools/check.py", "-q"])
        );
        assert_eq!(
            simple_words("make -j2 CC=gcc all"),
            Some(vec!["make", "-j2", "CC=gcc", "all"])
        );
        assert_eq!(simple_words("./build.sh"), Some(vec!["./build.sh"]));
        assert_eq!(simple_words("true"), Some(vec!["true"]));
    }

    #[test]
    fn anything_the_shell_would_interpret_runs_in_the_shell() {
        for script in [
            "",
            "   ",
            "echo hi",
            "cd sub",
            "exit 3",
            "test -f x",
            "[ -f x ]",
            ": ok",
            ". ./env.sh",
            "if true",
            "FOO=1 make",
            "ls *.rs",
            "cat a > b",
            "a | b",
            "a && b",
            "a; b",
            "a &",
            "echo $HOME",
            "ls ~",
            "say 'hi there'",
            "say \"hi\"",
            "a\\ b",
            "make # build",
            "one\ntwo",
            "ls {a,b}",
            "ls (x)",
            "!cmd",
            "cat `x`",
            "naïve",
        ] {
            assert_eq!(simple_words(script), None, "{script:?}");
        }
    }

    #[test]
    fn pwd_is_the_inherited_one_when_it_names_the_directory_else_the_physical_path() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real");
        std::fs::create_dir(&real).unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let physical = std::fs::canonicalize(&real).unwrap().into_os_string();
        // Inherited and naming the directory (through a symlink): kept, as sh keeps it.
        assert_eq!(
            shell_pwd(Some(link.as_os_str()), &real),
            Some(link.clone().into_os_string())
        );
        // Inherited but naming another directory, relative, or absent: the physical path.
        assert_eq!(
            shell_pwd(Some(OsStr::new("/")), &link),
            Some(physical.clone())
        );
        assert_eq!(
            shell_pwd(Some(OsStr::new("link")), &link),
            Some(physical.clone())
        );
        assert_eq!(shell_pwd(None, &link), Some(physical));
        assert_eq!(shell_pwd(None, &dir.path().join("missing")), None);
    }
}
