//! Private files and directories: the state directory and everything holding run data or
//! secrets is readable by the owner only, whatever the umask or the mode it was found with.
//!
//! Owns: creating directories 0700 and files 0600, and tightening existing ones. Must not
//! touch: what the files contain.

use std::io;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// Creates `dir` (and its parents) if needed and sets its mode to 0700.
pub fn private_dir(dir: &Path) -> io::Result<()> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    set_mode(dir, 0o700)
}

/// Creates `path` empty if it does not exist (never truncates) and sets its mode to 0600.
pub fn private_file(path: &Path) -> io::Result<()> {
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(path)?;
    set_mode(path, 0o600)
}

/// Sets an existing file's mode to 0600; a missing file is fine.
pub fn tighten_file(path: &Path) -> io::Result<()> {
    match set_mode(path, 0o600) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        other => other,
    }
}

fn set_mode(path: &Path, mode: u32) -> io::Result<()> {
    let current = std::fs::metadata(path)?.permissions().mode() & 0o7777;
    if current == mode {
        return Ok(());
    }
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(p: &Path) -> u32 {
        std::fs::metadata(p).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn existing_dirs_and_files_are_tightened_and_contents_kept() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("state");
        std::fs::create_dir(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        private_dir(&dir).unwrap();
        assert_eq!(mode(&dir), 0o700);
        let f = dir.join("db");
        std::fs::write(&f, "keep").unwrap();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o666)).unwrap();
        private_file(&f).unwrap();
        assert_eq!(
            (mode(&f), std::fs::read_to_string(&f).unwrap().as_str()),
            (0o600, "keep")
        );
        let new = dir.join("a/b");
        private_dir(&new).unwrap();
        assert_eq!(mode(&new), 0o700);
        tighten_file(&dir.join("missing")).unwrap();
    }
}
