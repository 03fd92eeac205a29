//! Random bytes from the kernel: the one source of randomness for ids, tokens and secrets.
//! Must not touch: anything else (no user-space generator lives here).

use std::io::{self, Read};

/// Fills `buf` from the kernel CSPRNG (`getrandom(2)`, falling back to `/dev/urandom`).
pub fn fill_random(buf: &mut [u8]) -> io::Result<()> {
    let mut filled = 0;
    while filled < buf.len() {
        // SAFETY: the pointer and length describe the unfilled tail of `buf`.
        let n = unsafe {
            libc::getrandom(
                buf[filled..].as_mut_ptr().cast::<libc::c_void>(),
                buf.len() - filled,
                0,
            )
        };
        if n < 0 {
            let err = io::Error::last_os_error();
            if err.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return std::fs::File::open("/dev/urandom")?.read_exact(&mut buf[filled..]);
        }
        filled += n as usize;
    }
    Ok(())
}

/// Random bytes read from `/dev/urandom` itself (the dev token's documented source).
pub fn urandom(buf: &mut [u8]) -> io::Result<()> {
    std::fs::File::open("/dev/urandom")?.read_exact(buf)
}
