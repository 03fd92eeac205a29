//! The process's descriptor limit and the connection cap derived from it.
//!
//! At start the server raises its soft `RLIMIT_NOFILE` to the hard limit, then keeps a share of
//! the descriptors for everything that is not a client connection and divides the rest among
//! connections. Owns: the limit and the arithmetic. Must not touch: sockets or settings.

use std::io;

/// Connections never get fewer than this many slots, however low the limit.
const MIN_CONNECTIONS: usize = 16;

/// Nor more than this: every open connection holds a reading thread.
const MAX_CONNECTIONS: usize = 4096;

/// Descriptors one connection holds: tiny_http keeps a read and a write duplicate of its
/// socket.
const FDS_PER_CONNECTION: u64 = 2;

/// Raises the soft descriptor limit to the hard one (at most 2^20) and returns the soft limit
/// now in force.
pub fn raise_soft_limit() -> io::Result<u64> {
    let mut rl = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `rl` is a valid rlimit for getrlimit to fill.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut rl) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // RLIM_INFINITY is refused for RLIMIT_NOFILE beyond fs.nr_open; 2^20 is its default.
    let want = rl.rlim_max.min(1 << 20);
    if rl.rlim_cur < want {
        let raised = libc::rlimit {
            rlim_cur: want,
            rlim_max: rl.rlim_max,
        };
        // SAFETY: `raised` is a valid rlimit; the soft limit stays within the hard one.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } != 0 {
            let e = io::Error::last_os_error();
            log::warn!("cannot raise the descriptor limit to {want}: {e}");
            return Ok(rl.rlim_cur);
        }
        return Ok(want);
    }
    Ok(rl.rlim_cur)
}

/// The connection cap for a soft descriptor limit of `soft`: a quarter of the descriptors (at
/// least 64) stay for the store (the database, its WAL and shared memory for the writer and
/// every reader connection), the settings watch, logs, and the pipes, files and sandboxes of
/// running stages; connections share the rest, two descriptors each, between 16 and 4,096.
pub fn connection_cap(soft: u64) -> usize {
    let reserve = (soft / 4).max(64);
    let cap = soft.saturating_sub(reserve) / FDS_PER_CONNECTION;
    usize::try_from(cap)
        .unwrap_or(MAX_CONNECTIONS)
        .clamp(MIN_CONNECTIONS, MAX_CONNECTIONS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cap_leaves_room_and_stays_in_bounds() {
        assert_eq!(connection_cap(1024), 384);
        assert_eq!(connection_cap(256), 96);
        assert_eq!(connection_cap(64), MIN_CONNECTIONS);
        assert_eq!(connection_cap(1 << 20), MAX_CONNECTIONS);
    }

    #[test]
    fn raising_never_lowers_the_limit() {
        let mut before = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: `before` is a valid rlimit to fill.
        assert_eq!(
            unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut before) },
            0
        );
        let now = raise_soft_limit().unwrap();
        assert!(now >= before.rlim_cur);
        assert!(now <= before.rlim_max);
    }
}
