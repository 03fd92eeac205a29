//! A SQLite VFS shim that writes each transaction's WAL frames with one `write`.
//!
//! Owns: the `svc-walbuf` VFS, registered once over the platform's default VFS. Only
//! write-ahead-log files are wrapped; every other file is the default VFS's own object.
//!
//! Why: SQLite writes a WAL frame as two `pwrite`s, its 24-byte header and then its page, so a
//! commit touching four pages made eight system calls under the store's writer lock (about a
//! third of the time a run's create or start held it, on ext4 in a VM). Here the frames of a
//! transaction are gathered in memory, contiguous as SQLite lays them out, and written with
//! one call when the commit frame's page arrives, inside the `xWrite` call of that page.
//! So the commit's frames are in the file (the OS page cache, as before) before SQLite
//! publishes them to readers in the WAL index, and before `COMMIT` returns; a failed write is
//! the failed `xWrite` of the commit frame, and SQLite aborts the commit as it would have.
//! Any other use of the file (read, sync, truncate, size, lock, close, ...) writes what is
//! gathered first, and more than [`MAX_GATHER`] bytes are written early, as SQLite would have.
//!
//! Must not touch: anything but the bytes and offsets SQLite hands the WAL file.

use rusqlite::ffi;
use std::ffi::{c_int, c_void, CStr};
use std::sync::OnceLock;

/// The name connections open with to get the shim.
pub(crate) const VFS_NAME: &CStr = c"svc-walbuf";

/// Gathered bytes beyond this are written at once (a huge transaction spills as usual).
const MAX_GATHER: usize = 1 << 20;

/// The largest write handed to the real file: the unix VFS masks a write's length to 17
/// bits (`seekAndWriteFd`), so a longer one would be cut short and reported as a full disk.
const MAX_WRITE: usize = 64 * 1024;

/// A WAL frame header: page number, then the database size in pages for a commit frame
/// (0 otherwise), then salts and checksums.
const FRAME_HEADER: usize = 24;

/// Registers the shim (once per process). Returns false when SQLite has no default VFS to
/// wrap or refuses the registration; callers then open with the default VFS.
pub(crate) fn register() -> bool {
    static REGISTERED: OnceLock<bool> = OnceLock::new();
    *REGISTERED.get_or_init(|| {
        // SAFETY: sqlite3_vfs_find(NULL) returns the default VFS, which lives for the whole
        // process. The copy we register is leaked, so it does too, as SQLite requires.
        unsafe {
            let real = ffi::sqlite3_vfs_find(std::ptr::null());
            if real.is_null() {
                return false;
            }
            let mut vfs: ffi::sqlite3_vfs = std::ptr::read(real);
            vfs.zName = VFS_NAME.as_ptr();
            vfs.pNext = std::ptr::null_mut();
            vfs.szOsFile += std::mem::size_of::<WalFile>() as c_int;
            vfs.xOpen = Some(open);
            let vfs = Box::leak(Box::new(vfs));
            if REAL.set(Real(real)).is_err() {
                return false;
            }
            ffi::sqlite3_vfs_register(vfs, 0) == ffi::SQLITE_OK
        }
    })
}

/// The wrapped default VFS.
struct Real(*mut ffi::sqlite3_vfs);
// SAFETY: a registered VFS is immutable and process-wide; SQLite calls it from any thread.
unsafe impl Send for Real {}
unsafe impl Sync for Real {}
static REAL: OnceLock<Real> = OnceLock::new();

/// A WAL file: SQLite's `sqlite3_file` header, our state, then the real file's object.
#[repr(C)]
struct WalFile {
    base: ffi::sqlite3_file,
    /// The real file, stored right after this struct in the same allocation.
    inner: *mut ffi::sqlite3_file,
    /// Bytes gathered for `gathered_at` onwards.
    gathered: Vec<u8>,
    gathered_at: i64,
    /// The last write was a commit frame's header: its page completes the transaction.
    commit_next: bool,
}

// The real file object is placed right after a `WalFile`: keep that offset 8-aligned.
const _: () = assert!(std::mem::size_of::<WalFile>().is_multiple_of(8));

unsafe extern "C" fn open(
    _vfs: *mut ffi::sqlite3_vfs,
    name: ffi::sqlite3_filename,
    file: *mut ffi::sqlite3_file,
    flags: c_int,
    out_flags: *mut c_int,
) -> c_int {
    let Some(Real(real)) = REAL.get() else {
        return ffi::SQLITE_ERROR;
    };
    let real = *real;
    let Some(real_open) = (*real).xOpen else {
        return ffi::SQLITE_ERROR;
    };
    if flags & ffi::SQLITE_OPEN_WAL == 0 {
        // Not a WAL: the real object takes the whole allocation, with its own methods.
        return real_open(real, name, file, flags, out_flags);
    }
    // SAFETY: SQLite allocated `szOsFile` bytes (ours plus the real object's) at `file`,
    // aligned for any object; `WalFile` is a multiple of 8 bytes, so the real object after
    // it is aligned too.
    let inner = file
        .cast::<u8>()
        .add(std::mem::size_of::<WalFile>())
        .cast::<ffi::sqlite3_file>();
    (*inner).pMethods = std::ptr::null();
    let rc = real_open(real, name, inner, flags, out_flags);
    if rc != ffi::SQLITE_OK {
        if let Some(close) = (*inner).pMethods.as_ref().and_then(|m| m.xClose) {
            close(inner);
        }
        (*file).pMethods = std::ptr::null();
        return rc;
    }
    std::ptr::write(
        file.cast::<WalFile>(),
        WalFile {
            base: ffi::sqlite3_file {
                pMethods: &WAL_METHODS,
            },
            inner,
            gathered: Vec::new(),
            gathered_at: 0,
            commit_next: false,
        },
    );
    ffi::SQLITE_OK
}

static WAL_METHODS: ffi::sqlite3_io_methods = ffi::sqlite3_io_methods {
    iVersion: 3,
    xClose: Some(close),
    xRead: Some(read),
    xWrite: Some(write),
    xTruncate: Some(truncate),
    xSync: Some(sync),
    xFileSize: Some(file_size),
    xLock: Some(lock),
    xUnlock: Some(unlock),
    xCheckReservedLock: Some(check_reserved_lock),
    xFileControl: Some(file_control),
    xSectorSize: Some(sector_size),
    xDeviceCharacteristics: Some(device_characteristics),
    xShmMap: Some(shm_map),
    xShmLock: Some(shm_lock),
    xShmBarrier: Some(shm_barrier),
    xShmUnmap: Some(shm_unmap),
    xFetch: Some(fetch),
    xUnfetch: Some(unfetch),
};

/// Our state of a WAL file object SQLite hands back.
///
/// # Safety
/// `file` must be an object `open` initialised as a [`WalFile`] (its methods are ours).
unsafe fn wal<'a>(file: *mut ffi::sqlite3_file) -> &'a mut WalFile {
    &mut *file.cast::<WalFile>()
}

/// The real file's methods.
///
/// # Safety
/// `w.inner` must be the open real file.
unsafe fn methods(w: &WalFile) -> &ffi::sqlite3_io_methods {
    &*(*w.inner).pMethods
}

/// Writes what was gathered, with one call; the gather is emptied whatever the outcome.
///
/// # Safety
/// `w.inner` must be the open real file.
unsafe fn flush(w: &mut WalFile) -> c_int {
    if w.gathered.is_empty() {
        return ffi::SQLITE_OK;
    }
    let Some(xwrite) = methods(w).xWrite else {
        return ffi::SQLITE_IOERR_WRITE;
    };
    let mut rc = ffi::SQLITE_OK;
    let mut at = w.gathered_at;
    for chunk in w.gathered.chunks(MAX_WRITE) {
        // A chunk is at most MAX_WRITE bytes, so its length fits a c_int.
        rc = xwrite(
            w.inner,
            chunk.as_ptr().cast::<c_void>(),
            chunk.len() as c_int,
            at,
        );
        if rc != ffi::SQLITE_OK {
            break;
        }
        at += chunk.len() as i64;
    }
    w.gathered.clear();
    if w.gathered.capacity() > MAX_GATHER {
        w.gathered = Vec::new();
    }
    rc
}

unsafe extern "C" fn write(
    file: *mut ffi::sqlite3_file,
    data: *const c_void,
    amount: c_int,
    offset: i64,
) -> c_int {
    let w = wal(file);
    let Ok(len) = usize::try_from(amount) else {
        return ffi::SQLITE_IOERR_WRITE;
    };
    let bytes = std::slice::from_raw_parts(data.cast::<u8>(), len);
    let contiguous = w.gathered_at + w.gathered.len() as i64 == offset;
    if !w.gathered.is_empty() && !contiguous {
        let rc = flush(w);
        if rc != ffi::SQLITE_OK {
            return rc;
        }
    }
    if w.gathered.is_empty() {
        w.gathered_at = offset;
    }
    w.gathered.extend_from_slice(bytes);
    let completes_commit = std::mem::take(&mut w.commit_next);
    if len == FRAME_HEADER {
        // Bytes 4..8: the database size after a commit frame, zero on other frames.
        w.commit_next = bytes[4..8] != [0, 0, 0, 0];
    }
    if completes_commit || w.gathered.len() > MAX_GATHER {
        return flush(w);
    }
    ffi::SQLITE_OK
}

unsafe extern "C" fn close(file: *mut ffi::sqlite3_file) -> c_int {
    let w = wal(file);
    let flushed = flush(w);
    let closed = match methods(w).xClose {
        Some(f) => f(w.inner),
        None => ffi::SQLITE_OK,
    };
    // SAFETY: the state was written by `open` and is dropped once; SQLite never uses the
    // object after xClose.
    std::ptr::drop_in_place(&mut w.gathered);
    (*file).pMethods = std::ptr::null();
    if flushed != ffi::SQLITE_OK {
        flushed
    } else {
        closed
    }
}

/// Writes the gather, then calls the real method `$m` with the remaining arguments.
macro_rules! flush_then {
    ($file:ident, $m:ident, $missing:expr $(, $arg:expr)*) => {{
        let w = wal($file);
        let rc = flush(w);
        if rc != ffi::SQLITE_OK {
            return rc;
        }
        match methods(w).$m {
            Some(f) => f(w.inner $(, $arg)*),
            None => $missing,
        }
    }};
}

unsafe extern "C" fn read(
    file: *mut ffi::sqlite3_file,
    data: *mut c_void,
    amount: c_int,
    offset: i64,
) -> c_int {
    flush_then!(file, xRead, ffi::SQLITE_IOERR_READ, data, amount, offset)
}

unsafe extern "C" fn truncate(file: *mut ffi::sqlite3_file, size: i64) -> c_int {
    flush_then!(file, xTruncate, ffi::SQLITE_IOERR_TRUNCATE, size)
}

unsafe extern "C" fn sync(file: *mut ffi::sqlite3_file, flags: c_int) -> c_int {
    flush_then!(file, xSync, ffi::SQLITE_IOERR_FSYNC, flags)
}

unsafe extern "C" fn file_size(file: *mut ffi::sqlite3_file, size: *mut i64) -> c_int {
    flush_then!(file, xFileSize, ffi::SQLITE_IOERR_FSTAT, size)
}

unsafe extern "C" fn lock(file: *mut ffi::sqlite3_file, level: c_int) -> c_int {
    flush_then!(file, xLock, ffi::SQLITE_IOERR_LOCK, level)
}

unsafe extern "C" fn unlock(file: *mut ffi::sqlite3_file, level: c_int) -> c_int {
    flush_then!(file, xUnlock, ffi::SQLITE_IOERR_UNLOCK, level)
}

unsafe extern "C" fn check_reserved_lock(file: *mut ffi::sqlite3_file, out: *mut c_int) -> c_int {
    flush_then!(
        file,
        xCheckReservedLock,
        ffi::SQLITE_IOERR_CHECKRESERVEDLOCK,
        out
    )
}

unsafe extern "C" fn file_control(
    file: *mut ffi::sqlite3_file,
    op: c_int,
    arg: *mut c_void,
) -> c_int {
    flush_then!(file, xFileControl, ffi::SQLITE_NOTFOUND, op, arg)
}

unsafe extern "C" fn sector_size(file: *mut ffi::sqlite3_file) -> c_int {
    let w = wal(file);
    methods(w).xSectorSize.map_or(4096, |f| f(w.inner))
}

unsafe extern "C" fn device_characteristics(file: *mut ffi::sqlite3_file) -> c_int {
    let w = wal(file);
    methods(w).xDeviceCharacteristics.map_or(0, |f| f(w.inner))
}

unsafe extern "C" fn shm_map(
    file: *mut ffi::sqlite3_file,
    region: c_int,
    size: c_int,
    extend: c_int,
    out: *mut *mut c_void,
) -> c_int {
    if methods(wal(file)).iVersion < 2 {
        return ffi::SQLITE_IOERR_SHMMAP;
    }
    flush_then!(
        file,
        xShmMap,
        ffi::SQLITE_IOERR_SHMMAP,
        region,
        size,
        extend,
        out
    )
}

unsafe extern "C" fn shm_lock(
    file: *mut ffi::sqlite3_file,
    offset: c_int,
    n: c_int,
    flags: c_int,
) -> c_int {
    if methods(wal(file)).iVersion < 2 {
        return ffi::SQLITE_IOERR_SHMLOCK;
    }
    flush_then!(file, xShmLock, ffi::SQLITE_IOERR_SHMLOCK, offset, n, flags)
}

unsafe extern "C" fn shm_barrier(file: *mut ffi::sqlite3_file) {
    let w = wal(file);
    let _ = flush(w);
    if methods(w).iVersion >= 2 {
        if let Some(f) = methods(w).xShmBarrier {
            f(w.inner);
        }
    }
}

unsafe extern "C" fn shm_unmap(file: *mut ffi::sqlite3_file, delete: c_int) -> c_int {
    if methods(wal(file)).iVersion < 2 {
        return ffi::SQLITE_OK;
    }
    flush_then!(file, xShmUnmap, ffi::SQLITE_OK, delete)
}

unsafe extern "C" fn fetch(
    file: *mut ffi::sqlite3_file,
    offset: i64,
    amount: c_int,
    out: *mut *mut c_void,
) -> c_int {
    let w = wal(file);
    let rc = flush(w);
    if rc != ffi::SQLITE_OK {
        return rc;
    }
    match methods(w).xFetch {
        Some(f) if methods(w).iVersion >= 3 => f(w.inner, offset, amount, out),
        _ => {
            *out = std::ptr::null_mut();
            ffi::SQLITE_OK
        }
    }
}

unsafe extern "C" fn unfetch(
    file: *mut ffi::sqlite3_file,
    offset: i64,
    page: *mut c_void,
) -> c_int {
    let w = wal(file);
    match methods(w).xUnfetch {
        Some(f) if methods(w).iVersion >= 3 => f(w.inner, offset, page),
        _ => ffi::SQLITE_OK,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rusqlite::{Connection, OpenFlags};

    fn open_shim(path: &std::path::Path) -> Connection {
        assert!(register());
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE;
        let c = Connection::open_with_flags_and_vfs(path, flags, VFS_NAME).unwrap();
        let mode: String = c
            .query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))
            .unwrap();
        assert_eq!(mode, "wal");
        // A tiny page cache makes big transactions spill frames before their commit, and
        // rewrite frames they already wrote.
        c.execute_batch(
            "PRAGMA synchronous=NORMAL; PRAGMA cache_size=10; PRAGMA wal_autocheckpoint=0;",
        )
        .unwrap();
        c
    }

    fn count_and_check(path: &std::path::Path) -> i64 {
        // A second connection on the default VFS sees exactly what was committed.
        let r = Connection::open(path).unwrap();
        let ok: String = r
            .query_row("PRAGMA integrity_check", [], |x| x.get(0))
            .unwrap();
        assert_eq!(ok, "ok");
        r.query_row("SELECT COUNT(*) FROM t", [], |x| x.get(0))
            .unwrap()
    }

    /// 300 rows of 8,000 bytes (2.4 MB): more than the gather limit and the page cache.
    fn insert_big(tx: &rusqlite::Transaction<'_>, byte: u8) {
        for _ in 0..300 {
            tx.execute("INSERT INTO t (v) VALUES (?1)", [vec![byte; 8000]])
                .unwrap();
        }
    }

    #[test]
    fn commits_small_and_huge_rolled_back_and_rewritten_transactions_intact() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("w.db");
        let mut c = open_shim(&path);
        c.execute_batch("CREATE TABLE t (id INTEGER PRIMARY KEY, v BLOB)")
            .unwrap();
        for i in 0..50 {
            c.execute("INSERT INTO t (v) VALUES (?1)", [vec![i as u8; 100]])
                .unwrap();
        }
        assert_eq!(count_and_check(&path), 50);

        // Larger than the gather limit and than one write: spilled frames, chunked writes.
        let tx = c.transaction().unwrap();
        insert_big(&tx, 9);
        tx.commit().unwrap();
        assert_eq!(count_and_check(&path), 350);

        // A spilled transaction that rolls back leaves nothing.
        let tx = c.transaction().unwrap();
        insert_big(&tx, 1);
        tx.rollback().unwrap();
        assert_eq!(count_and_check(&path), 350);

        // Pages rewritten within one transaction after they spilled.
        let tx = c.transaction().unwrap();
        for round in 0..5u8 {
            tx.execute("UPDATE t SET v = ?1", [vec![round; 3000]])
                .unwrap();
        }
        tx.commit().unwrap();
        assert_eq!(count_and_check(&path), 350);
        let r = Connection::open(&path).unwrap();
        let v: Vec<u8> = r
            .query_row("SELECT v FROM t WHERE id = 7", [], |x| x.get(0))
            .unwrap();
        assert_eq!(v, vec![4u8; 3000]);

        // Small commits after all that, and a checkpoint that reads the WAL back.
        for _ in 0..20 {
            c.execute("INSERT INTO t (v) VALUES (x'00')", []).unwrap();
        }
        c.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
            .unwrap();
        assert_eq!(count_and_check(&path), 370);
        drop(c);
        assert_eq!(count_and_check(&path), 370);
    }
}
