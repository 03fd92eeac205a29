//! File tools: `read_file`, `write_file`, `edit_file`. Every path goes through
//! [`Sandbox::resolve`]. Must not run processes.

use serde_json::Value;

use super::{arg_bool, arg_str, arg_u64, ToolError};
use crate::sandbox::Sandbox;

const DEFAULT_LIMIT: u64 = 2000;
const MAX_LINE: usize = 2000;

/// `read_file(file_path, offset (1-based), limit=2000)`: numbered lines like `cat -n`.
pub fn read_file(sb: &Sandbox, args: &Value) -> Result<String, ToolError> {
    let path = arg_str(args, "file_path")?.ok_or(ToolError::Missing("file_path"))?;
    let p = sb.resolve(path)?;
    if p.is_dir() {
        return Err(ToolError::Failed(format!(
            "{} is a directory; use list_dir to see its entries",
            sb.display(&p)
        )));
    }
    let bytes = std::fs::read(&p)
        .map_err(|e| ToolError::Failed(format!("cannot read {}: {e}", sb.display(&p))))?;
    if bytes.is_empty() {
        return Ok(format!("({} is empty)", sb.display(&p)));
    }
    let text = String::from_utf8_lossy(&bytes);
    let offset = arg_u64(args, "offset")?.unwrap_or(1).max(1) as usize;
    let limit = arg_u64(args, "limit")?.unwrap_or(DEFAULT_LIMIT).max(1) as usize;
    let total = text.lines().count();
    if offset > total {
        return Err(ToolError::Failed(format!(
            "offset {offset} is past the end of {} ({total} lines)",
            sb.display(&p)
        )));
    }
    let mut out = String::with_capacity(text.len().min(1 << 20) + 16 * limit.min(total));
    for (i, line) in text.lines().enumerate().skip(offset - 1).take(limit) {
        let line = if line.len() > MAX_LINE {
            let mut cut = MAX_LINE;
            while !line.is_char_boundary(cut) {
                cut -= 1;
            }
            format!("{}… [line truncated]", &line[..cut])
        } else {
            line.to_string()
        };
        out.push_str(&format!("{:>6}\t{line}\n", i + 1));
    }
    let shown_end = (offset - 1 + limit).min(total);
    if shown_end < total {
        out.push_str(&format!(
            "[showing lines {offset}-{shown_end} of {total}; use offset={} to read more]\n",
            shown_end + 1
        ));
    }
    Ok(out)
}

/// `write_file(file_path, content)`: creates parent directories; replaces the file.
pub fn write_file(sb: &Sandbox, args: &Value) -> Result<(String, String), ToolError> {
    let path = arg_str(args, "file_path")?.ok_or(ToolError::Missing("file_path"))?;
    let content = arg_str(args, "content")?.ok_or(ToolError::Missing("content"))?;
    let p = sb.resolve(path)?;
    if p.is_dir() {
        return Err(ToolError::Failed(format!(
            "{} is a directory",
            sb.display(&p)
        )));
    }
    if let Some(parent) = p.parent() {
        std::fs::create_dir_all(parent)
            .map_err(|e| ToolError::Failed(format!("cannot create {}: {e}", sb.display(parent))))?;
    }
    std::fs::write(&p, content)
        .map_err(|e| ToolError::Failed(format!("cannot write {}: {e}", sb.display(&p))))?;
    let shown = sb.display(&p);
    Ok((format!("Wrote {} bytes to {shown}", content.len()), shown))
}

/// `edit_file(file_path, old_string, new_string, replace_all=false)`: exact replacement;
/// `old_string` must occur exactly once unless `replace_all`.
pub fn edit_file(sb: &Sandbox, args: &Value) -> Result<(String, String), ToolError> {
    let path = arg_str(args, "file_path")?.ok_or(ToolError::Missing("file_path"))?;
    let old = arg_str(args, "old_string")?.ok_or(ToolError::Missing("old_string"))?;
    let new = arg_str(args, "new_string")?.ok_or(ToolError::Missing("new_string"))?;
    let all = arg_bool(args, "replace_all")?.unwrap_or(false);
    if old.is_empty() {
        return Err(ToolError::BadArgs(
            "old_string is empty; use write_file to create a file".into(),
        ));
    }
    if old == new {
        return Err(ToolError::BadArgs(
            "old_string and new_string are identical".into(),
        ));
    }
    let p = sb.resolve(path)?;
    let shown = sb.display(&p);
    let text = std::fs::read_to_string(&p)
        .map_err(|e| ToolError::Failed(format!("cannot read {shown}: {e}")))?;
    let count = text.matches(old).count();
    if count == 0 {
        return Err(ToolError::Failed(format!(
            "old_string was not found in {shown}; read the file and copy the text exactly, \
             including whitespace"
        )));
    }
    if count > 1 && !all {
        return Err(ToolError::Failed(format!(
            "old_string occurs {count} times in {shown}; add surrounding lines to make it \
             unique, or set replace_all"
        )));
    }
    let updated = if all {
        text.replace(old, new)
    } else {
        text.replacen(old, new, 1)
    };
    std::fs::write(&p, updated)
        .map_err(|e| ToolError::Failed(format!("cannot write {shown}: {e}")))?;
    Ok((
        format!(
            "Replaced {count} occurrence{} in {shown}",
            if count == 1 { "" } else { "s" }
        ),
        shown,
    ))
}
