//! Project memory (engine.md §5.4): `AGENTS.md` plus the provider's own file (`CLAUDE.md`,
//! `.codex/instructions.md`, `GEMINI.md`), collected from the git root down to the working
//! directory within a 32 KiB budget. Reads files only; must not write or run anything.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use super::provider::Provider;

/// The byte budget for all memory files together.
pub const MEMORY_BUDGET: usize = 32 * 1024;

const TRUNCATED: &str = "\n[... project memory truncated: 32 KiB budget reached ...]";

/// The directories to read, outermost first: the git root (nearest ancestor with `.git`)
/// down to `cwd`; just `cwd` outside a repository.
fn dirs(cwd: &Path) -> Vec<PathBuf> {
    let cwd = cwd.canonicalize().unwrap_or_else(|_| cwd.to_path_buf());
    let root = cwd.ancestors().find(|d| d.join(".git").exists());
    let mut out: Vec<PathBuf> = Vec::new();
    match root {
        Some(root) => {
            for d in cwd.ancestors() {
                out.push(d.to_path_buf());
                if d == root {
                    break;
                }
            }
            out.reverse();
        }
        None => out.push(cwd),
    }
    out
}

/// The memory text for a provider, or an empty string when there is none. Each file is
/// introduced by a `# <relative path>` heading; empty files and files whose content was
/// already included are skipped; the file that overflows the budget is cut with a marker
/// and later files are skipped.
pub fn project_memory(cwd: &Path, provider: Provider) -> String {
    let dirs = dirs(cwd);
    let base = dirs.first().cloned().unwrap_or_else(|| cwd.to_path_buf());
    let mut seen: HashSet<String> = HashSet::new();
    let mut out = String::new();
    let mut used = 0usize;
    for d in &dirs {
        for name in ["AGENTS.md", provider.memory_file()] {
            let path = d.join(name);
            let Ok(text) = std::fs::read_to_string(&path) else {
                continue;
            };
            let trimmed = text.trim();
            if trimmed.is_empty() || !seen.insert(trimmed.to_string()) {
                continue;
            }
            let rel = path.strip_prefix(&base).unwrap_or(&path);
            let header = format!("# {}\n\n", rel.display());
            if !out.is_empty() {
                out.push_str("\n\n");
            }
            out.push_str(&header);
            let room = MEMORY_BUDGET.saturating_sub(used);
            if trimmed.len() <= room {
                out.push_str(trimmed);
                used += trimmed.len();
            } else {
                let mut cut = room;
                while cut > 0 && !trimmed.is_char_boundary(cut) {
                    cut -= 1;
                }
                out.push_str(&trimmed[..cut]);
                out.push_str(TRUNCATED);
                return out;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn walks_from_git_root_and_skips_duplicates() -> std::io::Result<()> {
        let t = tempfile::tempdir()?;
        let root = t.path();
        std::fs::create_dir(root.join(".git"))?;
        std::fs::create_dir_all(root.join("a/b/.codex"))?;
        std::fs::write(root.join("AGENTS.md"), "root rules")?;
        std::fs::write(root.join("CLAUDE.md"), "claude rules")?;
        std::fs::write(root.join("a/AGENTS.md"), "root rules")?; // duplicate
        std::fs::write(root.join("a/b/AGENTS.md"), "   ")?; // empty
        std::fs::write(root.join("a/b/.codex/instructions.md"), "codex rules")?;
        let m = project_memory(&root.join("a/b"), Provider::Anthropic);
        assert!(m.contains("root rules") && m.contains("claude rules"));
        assert_eq!(m.matches("root rules").count(), 1);
        assert!(!m.contains("codex rules"));
        let o = project_memory(&root.join("a/b"), Provider::OpenAi);
        assert!(o.contains("codex rules") && !o.contains("claude rules"));
        assert!(o.find("root rules") < o.find("codex rules"));
        Ok(())
    }

    #[test]
    fn budget_truncates_then_skips() -> std::io::Result<()> {
        let t = tempfile::tempdir()?;
        let root = t.path();
        std::fs::create_dir(root.join(".git"))?;
        std::fs::create_dir(root.join("sub"))?;
        std::fs::write(root.join("AGENTS.md"), "x".repeat(30_000))?;
        std::fs::write(root.join("GEMINI.md"), "y".repeat(5_000))?;
        std::fs::write(root.join("sub/AGENTS.md"), "never")?;
        let m = project_memory(&root.join("sub"), Provider::Gemini);
        assert!(m.contains("truncated"));
        assert!(!m.contains("never"));
        let ys = m.matches('y').count() - TRUNCATED.matches('y').count();
        assert_eq!(ys, MEMORY_BUDGET - 30_000);
        Ok(())
    }
}
