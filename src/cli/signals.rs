//! SIGINT/SIGTERM for `svc run`: the first signal cancels the run (commands are killed,
//! `run.failed` with reason `cancelled` is recorded); a second one exits at once.
//! Must not touch: anything but the run's cancel token.

use crate::base::cancel::CancelToken;
use std::sync::atomic::{AtomicI32, Ordering};

static WRITE_FD: AtomicI32 = AtomicI32::new(-1);

extern "C" fn on_signal(_: libc::c_int) {
    let fd = WRITE_FD.load(Ordering::Relaxed);
    if fd >= 0 {
        let byte = 1u8;
        // SAFETY: write(2) is async-signal-safe; the buffer outlives the call.
        unsafe {
            libc::write(fd, (&byte as *const u8).cast(), 1);
        }
    }
}

/// Installs the handlers and a thread that cancels `token` on the first signal.
pub fn cancel_on_signals(token: &CancelToken) {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: pipe(2) fills the two descriptors we pass.
    if unsafe { libc::pipe(fds.as_mut_ptr()) } != 0 {
        return;
    }
    WRITE_FD.store(fds[1], Ordering::Relaxed);
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: installing a handler that only calls write(2).
        unsafe {
            libc::signal(sig, on_signal as *const () as libc::sighandler_t);
        }
    }
    let token = token.clone();
    let read_fd = fds[0];
    std::thread::spawn(move || {
        let mut seen = 0;
        let mut byte = 0u8;
        // SAFETY: reading one byte into a local buffer from our own pipe.
        while unsafe { libc::read(read_fd, (&mut byte as *mut u8).cast(), 1) } == 1 {
            seen += 1;
            if seen == 1 {
                eprintln!("interrupted: cancelling the run (press Ctrl-C again to exit now)");
                token.cancel("interrupted by signal");
            } else {
                std::process::exit(130);
            }
        }
    });
}
