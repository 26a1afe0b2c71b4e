//! Power loss: a test VFS wraps SQLite's default one and keeps, for every file, its contents as of the last
//! `fsync`. A "power cut" makes every later write and sync fail, then puts every file back to its last synced
//! contents (a file never synced disappears) — what a disk that lost its cache would hold.
//!
//! Under `Durable` (`synchronous=FULL`) every acknowledged write survives. Under `Server` (`synchronous=NORMAL`)
//! the database is consistent and loses at most the commits acknowledged since the last sync: every write
//! acknowledged before the last `fsync` began is there.
//!
//! The VFS is registered as the process's default, so that a registry's databases (opened by name, without a URI
//! to choose a VFS) go through it as well as standalone ones.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

mod common;

use common::{Backend, PAIRED_TABLES, both_backends, whole_writes, write_pair};
use quicklite::{Profile, rusqlite};

mod vfs {
    //! The power-cut VFS. Files are tracked by path; the main database, journal and WAL all go through
    //! `xOpen`. The `-shm` file (SQLite's WAL index, rebuilt from the WAL after a crash) is not tracked and is
    //! deleted by [`restore`].

    use std::collections::{HashMap, HashSet};
    use std::ffi::{CStr, c_char, c_int, c_void};
    use std::ptr::null_mut;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::sync::{LazyLock, Mutex, OnceLock};

    use quicklite::rusqlite::ffi;

    /// Set by [`cut`]: every write, truncate, sync and delete fails from then on.
    static CUT: AtomicBool = AtomicBool::new(false);
    /// Writes acknowledged so far, counted by the test.
    pub static ACKS: AtomicU64 = AtomicU64::new(0);
    /// `ACKS` when the last successful sync of a WAL (`-wal` file) began: every write acknowledged before it is on
    /// "disk". In WAL mode under `synchronous=NORMAL` a commit becomes durable when the WAL holding it is synced
    /// (at the start of a checkpoint, which covers every frame written so far; or when a restarted WAL's header is
    /// synced, by which time everything committed is in the database file, synced by the checkpoint that let the
    /// WAL restart). A sync of the database file covers nothing that the WAL sync before it did not: it can begin
    /// after commits made during the checkpoint, which are only in the unsynced end of the WAL.
    pub static SYNCED_ACKS: AtomicU64 = AtomicU64::new(0);

    #[derive(Default)]
    struct Disk {
        /// Contents as of the last sync, by path (absent: never synced since it was created).
        durable: HashMap<String, Vec<u8>>,
        /// Every path opened or deleted through the VFS.
        touched: HashSet<String>,
    }

    static DISK: LazyLock<Mutex<Disk>> = LazyLock::new(|| Mutex::new(Disk::default()));

    /// Our file: the wrapped file lives in the same allocation, after this header.
    #[repr(C)]
    struct ShimFile {
        base: ffi::sqlite3_file,
        real: *mut ffi::sqlite3_file,
        /// The file's path (boxed), or null for a temporary file.
        path: *mut String,
    }

    /// Where the wrapped file starts in a [`ShimFile`] allocation (8-byte aligned).
    const REAL_OFFSET: usize = std::mem::size_of::<ShimFile>().next_multiple_of(8);

    static BASE: OnceLock<usize> = OnceLock::new();

    fn base() -> *mut ffi::sqlite3_vfs {
        *BASE.get().expect("registered") as *mut ffi::sqlite3_vfs
    }

    /// Registers the VFS as the default one (once per process).
    pub fn register() {
        static DONE: OnceLock<()> = OnceLock::new();
        DONE.get_or_init(|| unsafe {
            let base = ffi::sqlite3_vfs_find(std::ptr::null());
            assert!(!base.is_null());
            BASE.set(base as usize).unwrap();
            let mut vfs = *base;
            vfs.pNext = null_mut();
            vfs.zName = c"powercut".as_ptr();
            vfs.szOsFile = (REAL_OFFSET + (*base).szOsFile as usize) as c_int;
            vfs.xOpen = Some(open);
            vfs.xDelete = Some(delete);
            let rc = ffi::sqlite3_vfs_register(Box::leak(Box::new(vfs)), 1);
            assert_eq!(rc, ffi::SQLITE_OK);
        });
    }

    /// Cuts the power: nothing written from now on reaches the disk.
    pub fn cut() {
        CUT.store(true, Ordering::SeqCst);
    }

    /// Switches the power back on without touching the files: the failures were transient I/O errors.
    pub fn resume() {
        CUT.store(false, Ordering::SeqCst);
    }

    /// Stops tracking every file seen so far (their test is over).
    pub fn forget() {
        let mut disk = DISK.lock().unwrap();
        disk.touched.clear();
        disk.durable.clear();
    }

    /// Puts every file back to its last synced contents, deletes the files never synced and the WAL indexes, and
    /// switches the power back on. Call with every connection closed.
    pub fn restore() {
        let mut disk = DISK.lock().unwrap();
        let touched: Vec<String> = disk.touched.drain().collect();
        for path in touched {
            match disk.durable.get(&path) {
                Some(bytes) => {
                    std::fs::write(&path, bytes).unwrap_or_else(|e| panic!("{path}: {e}"))
                }
                None => match std::fs::remove_file(&path) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => panic!("{path}: {e}"),
                },
            }
            let _ = std::fs::remove_file(format!("{path}-shm"));
        }
        disk.durable.clear();
        ACKS.store(0, Ordering::SeqCst);
        SYNCED_ACKS.store(0, Ordering::SeqCst);
        CUT.store(false, Ordering::SeqCst);
    }

    fn track_open(path: &str) {
        let mut disk = DISK.lock().unwrap();
        if disk.touched.insert(path.to_string())
            && let Ok(bytes) = std::fs::read(path)
        {
            // It existed before we saw it: what is there now is on disk.
            disk.durable.insert(path.to_string(), bytes);
        }
    }

    unsafe fn shim<'a>(f: *mut ffi::sqlite3_file) -> &'a mut ShimFile {
        unsafe { &mut *(f as *mut ShimFile) }
    }

    unsafe fn real(
        f: *mut ffi::sqlite3_file,
    ) -> (*mut ffi::sqlite3_file, &'static ffi::sqlite3_io_methods) {
        unsafe {
            let real = shim(f).real;
            (real, &*(*real).pMethods)
        }
    }

    unsafe extern "C" fn open(
        _vfs: *mut ffi::sqlite3_vfs,
        name: ffi::sqlite3_filename,
        file: *mut ffi::sqlite3_file,
        flags: c_int,
        out_flags: *mut c_int,
    ) -> c_int {
        unsafe {
            let s = shim(file);
            s.base.pMethods = std::ptr::null();
            s.real = (file as *mut u8).add(REAL_OFFSET) as *mut ffi::sqlite3_file;
            s.path = null_mut();
            let path =
                (!name.is_null()).then(|| CStr::from_ptr(name).to_string_lossy().into_owned());
            if let Some(p) = &path {
                track_open(p);
            }
            let base = base();
            let rc = ((*base).xOpen.unwrap())(base, name, s.real, flags, out_flags);
            if rc != ffi::SQLITE_OK {
                return rc;
            }
            if let Some(p) = path {
                s.path = Box::into_raw(Box::new(p));
            }
            s.base.pMethods = &METHODS;
            rc
        }
    }

    unsafe extern "C" fn delete(
        _vfs: *mut ffi::sqlite3_vfs,
        name: *const c_char,
        sync_dir: c_int,
    ) -> c_int {
        if CUT.load(Ordering::SeqCst) {
            return ffi::SQLITE_IOERR_DELETE;
        }
        unsafe {
            let base = base();
            let rc = ((*base).xDelete.unwrap())(base, name, sync_dir);
            if rc == ffi::SQLITE_OK {
                let path = CStr::from_ptr(name).to_string_lossy().into_owned();
                let mut disk = DISK.lock().unwrap();
                disk.durable.remove(&path);
                disk.touched.insert(path);
            }
            rc
        }
    }

    static METHODS: ffi::sqlite3_io_methods = ffi::sqlite3_io_methods {
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

    unsafe extern "C" fn close(f: *mut ffi::sqlite3_file) -> c_int {
        unsafe {
            let (r, m) = real(f);
            let rc = (m.xClose.unwrap())(r);
            let s = shim(f);
            if !s.path.is_null() {
                drop(Box::from_raw(s.path));
                s.path = null_mut();
            }
            rc
        }
    }

    unsafe extern "C" fn write(
        f: *mut ffi::sqlite3_file,
        buf: *const c_void,
        n: c_int,
        at: i64,
    ) -> c_int {
        if CUT.load(Ordering::SeqCst) {
            return ffi::SQLITE_IOERR_WRITE;
        }
        unsafe {
            let (r, m) = real(f);
            (m.xWrite.unwrap())(r, buf, n, at)
        }
    }

    unsafe extern "C" fn truncate(f: *mut ffi::sqlite3_file, size: i64) -> c_int {
        if CUT.load(Ordering::SeqCst) {
            return ffi::SQLITE_IOERR_TRUNCATE;
        }
        unsafe {
            let (r, m) = real(f);
            (m.xTruncate.unwrap())(r, size)
        }
    }

    unsafe extern "C" fn sync(f: *mut ffi::sqlite3_file, flags: c_int) -> c_int {
        if CUT.load(Ordering::SeqCst) {
            return ffi::SQLITE_IOERR_FSYNC;
        }
        let acks = ACKS.load(Ordering::SeqCst);
        unsafe {
            let (r, m) = real(f);
            let rc = (m.xSync.unwrap())(r, flags);
            if CUT.load(Ordering::SeqCst) {
                // The power went out while this sync ran: it did not complete.
                return ffi::SQLITE_IOERR_FSYNC;
            }
            let s = shim(f);
            if rc == ffi::SQLITE_OK && !s.path.is_null() {
                // What the file holds now is on disk. Read it back and record it under the lock: the writer and the
                // checkpoint thread sync the same WAL through connections of their own, and a copy read before
                // another sync's must not be recorded after it (it would put back a WAL without the frames of
                // commits acknowledged meanwhile). Under the lock, the last copy recorded is the last one read.
                let mut disk = DISK.lock().unwrap();
                let mut size = 0_i64;
                assert_eq!((m.xFileSize.unwrap())(r, &mut size), ffi::SQLITE_OK);
                let mut bytes = vec![0_u8; size as usize];
                if size > 0 {
                    let rc = (m.xRead.unwrap())(r, bytes.as_mut_ptr().cast(), size as c_int, 0);
                    assert_eq!(rc, ffi::SQLITE_OK);
                }
                if (*s.path).ends_with("-wal") {
                    SYNCED_ACKS.fetch_max(acks, Ordering::SeqCst);
                }
                disk.durable.insert((*s.path).clone(), bytes);
            }
            rc
        }
    }

    /// The io methods that only pass the call on to the wrapped file.
    macro_rules! pass_through {
        ($($name:ident => $method:ident($($arg:ident: $ty:ty),*) -> $ret:ty;)*) => {$(
            unsafe extern "C" fn $name(f: *mut ffi::sqlite3_file, $($arg: $ty),*) -> $ret {
                unsafe {
                    let (r, m) = real(f);
                    (m.$method.unwrap())(r, $($arg),*)
                }
            }
        )*};
    }

    pass_through! {
        read => xRead(buf: *mut c_void, n: c_int, at: i64) -> c_int;
        file_size => xFileSize(size: *mut i64) -> c_int;
        lock => xLock(level: c_int) -> c_int;
        unlock => xUnlock(level: c_int) -> c_int;
        check_reserved_lock => xCheckReservedLock(out: *mut c_int) -> c_int;
        file_control => xFileControl(op: c_int, arg: *mut c_void) -> c_int;
        sector_size => xSectorSize() -> c_int;
        device_characteristics => xDeviceCharacteristics() -> c_int;
        shm_map => xShmMap(page: c_int, size: c_int, extend: c_int, out: *mut *mut c_void) -> c_int;
        shm_lock => xShmLock(offset: c_int, n: c_int, flags: c_int) -> c_int;
        shm_barrier => xShmBarrier() -> ();
        shm_unmap => xShmUnmap(delete: c_int) -> c_int;
        fetch => xFetch(at: i64, n: c_int, out: *mut *mut c_void) -> c_int;
        unfetch => xUnfetch(at: i64, p: *mut c_void) -> c_int;
    }
}

/// One round: 8 tasks write (each write puts its id in two tables) until the power is cut `after` the start;
/// returns each acknowledged id with its acknowledgement number, and the acknowledgements synced at the cut.
async fn power_cut_round(
    backend: Backend,
    dir: &Path,
    profile: Profile,
    after: Duration,
) -> (BTreeMap<i64, u64>, u64) {
    let db = common::open_in(backend, dir, move |b| b.profile(profile)).await;
    db.execute_batch(PAIRED_TABLES).await.unwrap();
    // Registry: the neighbour keeps closing the database's connections, until and after the cut.
    let churn = db.churn();
    let acked = Arc::new(std::sync::Mutex::new(BTreeMap::new()));
    let mut tasks = Vec::new();
    for t in 0..8_i64 {
        let (db, acked) = (db.clone(), acked.clone());
        tasks.push(tokio::spawn(async move {
            for i in 0.. {
                let id = t * 1_000_000 + i;
                let written = write_pair(&db, id).await;
                if written.is_err() {
                    // The power is out: nothing more can be written.
                    return;
                }
                let seq = vfs::ACKS.fetch_add(1, Ordering::SeqCst);
                acked.lock().unwrap().insert(id, seq);
            }
        }));
    }
    tokio::time::sleep(after).await;
    vfs::cut();
    let synced = vfs::SYNCED_ACKS.load(Ordering::SeqCst);
    for t in tasks {
        t.await.unwrap();
    }
    churn.stop().await;
    // Closing fails to checkpoint (the disk is gone) but closes every connection.
    db.close().await;
    vfs::restore();
    let acked = acked.lock().unwrap().clone();
    (acked, synced)
}

/// The VFS's state is process-wide: its tests take turns.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

both_backends! {
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn power_cuts_lose_nothing_durable_and_only_unsynced_commits_otherwise(backend) {
    let _turn = ONE_AT_A_TIME.lock().await;
    quicklite::setup::sqlite_setup();
    vfs::register();
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    for (profile, rounds) in [(Profile::Durable, 8), (Profile::Server, 8)] {
        let (mut acked_total, mut lost_total) = (0, 0);
        for _ in 0..rounds {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let after = Duration::from_millis(30 + x % 300);
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join(format!("{}.db", common::NAME));
            let (acked, synced) = power_cut_round(backend, dir.path(), profile, after).await;
            let stored = whole_writes(&path);
            // The check's own connection went through the VFS too: its files are not the next round's.
            vfs::forget();
            let lost: Vec<(i64, u64)> = acked
                .iter()
                .filter(|(id, _)| !stored.contains(id))
                .map(|(id, seq)| (*id, *seq))
                .collect();
            match profile {
                Profile::Durable => {
                    assert!(
                        lost.is_empty(),
                        "durable: acknowledged writes lost: {lost:?}"
                    )
                }
                _ => {
                    let before_sync: Vec<_> =
                        lost.iter().filter(|(_, seq)| *seq < synced).collect();
                    assert!(
                        before_sync.is_empty(),
                        "server: writes acknowledged before the last sync were lost: {before_sync:?}"
                    );
                }
            }
            acked_total += acked.len();
            lost_total += lost.len();
        }
        println!(
            "{profile:?}: {rounds} power cuts, {acked_total} acknowledged writes, {lost_total} lost (all after the last sync)"
        );
        assert!(acked_total > 0);
    }
}
}

both_backends! {
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn injected_io_errors_fail_writes_clearly_and_the_handle_recovers(backend) {
    let _turn = ONE_AT_A_TIME.lock().await;
    quicklite::setup::sqlite_setup();
    vfs::register();
    let dir = tempfile::tempdir().unwrap();
    for profile in [Profile::Server, Profile::Durable] {
        let sub = dir.path().join(format!("ioerr-{profile:?}"));
        std::fs::create_dir(&sub).unwrap();
        let db = common::open_in(backend, &sub, move |b| b.profile(profile)).await;
        db.execute_batch(
            "CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, body BLOB NOT NULL)",
        )
        .await
        .unwrap();
        let base: i64 = db
            .query_row("SELECT count(*) FROM t", [], |r| r.get(0))
            .await
            .unwrap();
        for id in 0..50_i64 {
            db.execute(
                "INSERT INTO t VALUES (?1 + ?2, randomblob(1000))",
                (base, id),
            )
            .await
            .unwrap();
        }
        // Every write and fsync fails for a while. Under Durable each commit syncs, so it must fail; under Server
        // a commit that fits in the WAL's page cache may still need to write: the writes fail either way.
        vfs::cut();
        // Registry: the neighbour asks for the connections while the disk fails (its own writes fail too).
        let churn = db.churn();
        let mut failures = 0;
        for id in 50..60_i64 {
            match db
                .execute(
                    "INSERT INTO t VALUES (?1 + ?2, randomblob(100000))",
                    (base, id),
                )
                .await
            {
                Ok(_) => {}
                Err(e) => {
                    let code = e.sqlite_code();
                    assert!(
                        code == Some(rusqlite::ErrorCode::SystemIoFailure)
                            || matches!(e, quicklite::Error::RolledBack { .. }),
                        "{e}"
                    );
                    failures += 1;
                }
            }
        }
        assert!(
            failures > 0,
            "{profile:?}: no write failed while the disk failed"
        );
        // The disk works again: the same handle writes, reads see everything written before the errors.
        vfs::resume();
        churn.stop().await;
        db.execute("INSERT INTO t VALUES (?1 + 1000, randomblob(10))", (base,))
            .await
            .unwrap();
        // Registry: and the connections close and reopen once the disk works again.
        db.evict().await;
        let present: i64 = db
            .query_row("SELECT count(*) FROM t WHERE id - ?1 < 50", (base,), |r| {
                r.get(0)
            })
            .await
            .unwrap();
        assert_eq!(
            present, 50,
            "{profile:?}: writes acknowledged before the errors"
        );
        let integrity: String = db
            .query_row("PRAGMA integrity_check", [], |r| r.get(0))
            .await
            .unwrap();
        assert_eq!(integrity, "ok");
        println!(
            "{profile:?}: {failures} of 10 writes failed with I/O errors; the handle then served again"
        );
        db.close().await;
    }
    vfs::forget();
}
}
