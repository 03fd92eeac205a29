//! Random identifiers: request ids (UUID v4 text) and raw random bytes from the kernel.
//!
//! Owns: access to the kernel's random source for the server and settings (dev token).
//! Must not touch: anything else.

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

pub use crate::store::hex;

/// A fresh UUID version 4 (random) in its 8-4-4-4-12 text form.
pub fn request_id() -> String {
    let mut b = [0u8; 16];
    if fill_random(&mut b).is_err() {
        // Never fail a request for want of randomness: fall back to time and a counter.
        use std::sync::atomic::{AtomicU64, Ordering};
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        b[..8].copy_from_slice(&t.to_le_bytes());
        b[8..].copy_from_slice(&COUNTER.fetch_add(1, Ordering::Relaxed).to_le_bytes());
    }
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h = hex(&b);
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuid_v4_shape() {
        let id = request_id();
        assert_eq!(id.len(), 36);
        let parts: Vec<&str> = id.split('-').collect();
        assert_eq!(
            parts.iter().map(|p| p.len()).collect::<Vec<_>>(),
            [8, 4, 4, 4, 12]
        );
        assert!(parts[2].starts_with('4'));
        assert!(matches!(&parts[3][..1], "8" | "9" | "a" | "b"));
        assert_ne!(id, request_id());
    }
}
