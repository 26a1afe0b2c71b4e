//! What Litestream keeps on this machine beside a database it replicates (`.<file>-litestream/`): the transactions
//! it recorded, as LTX files.

use std::collections::{BTreeMap, HashSet};
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use super::Position;

/// The last transaction Litestream on this machine recorded for the database at `db`: the highest TXID its local
/// state (`.<file>-litestream/ltx/<level>/<min>-<max>.ltx`, beside the database) names; `None` if it has none.
pub(crate) fn local_position(db: &Path) -> Option<Position> {
    let mut max = None;
    for level in std::fs::read_dir(ltx_dir(db)?).ok()?.flatten() {
        for file in std::fs::read_dir(level.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            max = max.max(last_txid(&file.file_name()).map(Position));
        }
    }
    max
}

/// The most bytes of pages [`written`] keeps in memory for one comparison: 64 MiB, the content of 16,384 pages of
/// 4 KiB. A tenant whose transactions not yet compacted wrote more distinct pages than that is compared from the
/// LTX files instead, read again newest first (each page decompressed once more, the replica's pages read out of
/// order): slower, with the same answer, and in memory only one transaction's pages and the numbers of the pages
/// compared.
pub(crate) const KEPT_PAGES_MAX_BYTES: usize = 64 << 20;

/// What the transactions Litestream recorded here wrote, up to one of them: each page's content after the last
/// of them that wrote it, and the database's size after that one.
#[derive(Debug, Default)]
pub(crate) struct Written {
    page_size: usize,
    /// The database's size in pages after the last transaction read.
    pages_after: u32,
    /// The level-0 files of the transactions, oldest first.
    files: Vec<PathBuf>,
    /// Each page's content after the last transaction that wrote it, while they fit in the cap
    /// ([`KEPT_PAGES_MAX_BYTES`]); `None` past it: they are read from `files` again.
    pages: Option<BTreeMap<u32, Vec<u8>>>,
}

impl Written {
    /// Whether the database file at `db` holds other content than these transactions left: another size, or a page
    /// they wrote with other bytes.
    pub(crate) fn differs_from(&self, db: &Path) -> Result<bool, String> {
        let failed = |e: std::io::Error| format!("{}: {e}", db.display());
        let file = std::fs::File::open(db).map_err(failed)?;
        self.differs(&mut File {
            file,
            path: db,
            page_size: self.page_size,
        })
    }

    /// Whether `copy` holds other content than these transactions left: another size, or a page they wrote with
    /// other bytes. Reads only those pages, each once, and stops at the first that differs.
    pub(crate) fn differs(&self, copy: &mut impl PageSource) -> Result<bool, String> {
        if copy.other_size(u64::from(self.pages_after) * self.page_size as u64)? {
            return Ok(true);
        }
        let mut there = vec![0; self.page_size];
        let mut differs = |pgno: u32, page: &[u8]| -> Result<bool, String> {
            copy.read_page(pgno, &mut there)?;
            Ok(!same_page(pgno, &there, page))
        };
        if let Some(pages) = &self.pages {
            for (&pgno, page) in pages.range(..=self.pages_after) {
                if differs(pgno, page)? {
                    return Ok(true);
                }
            }
            return Ok(false);
        }
        // Past the cap: newest transaction first, each page's first sight is its last content.
        let mut compared = HashSet::new();
        for path in self.files.iter().rev() {
            let ltx = read(path, self.page_size)?;
            for (pgno, page) in ltx.pages {
                if pgno <= self.pages_after && compared.insert(pgno) && differs(pgno, &page)? {
                    return Ok(true);
                }
            }
        }
        Ok(false)
    }

    /// How many distinct pages the transactions wrote, if they are kept in memory (under the cap).
    pub(crate) fn pages_written(&self) -> Option<usize> {
        self.pages.as_ref().map(BTreeMap::len)
    }

    /// Whether the pages are kept in memory (under the cap).
    #[cfg(test)]
    fn kept(&self) -> bool {
        self.pages.is_some()
    }
}

/// A copy of the database the transactions Litestream recorded here are compared with ([`Written::differs`]),
/// read a page at a time.
pub(crate) trait PageSource {
    /// Whether the copy's size says it holds another database than one of `bytes`.
    fn other_size(&mut self, bytes: u64) -> Result<bool, String>;

    /// Reads page `pgno` (numbered from 1) into `page`, which is a page long.
    fn read_page(&mut self, pgno: u32, page: &mut [u8]) -> Result<(), String>;
}

/// A copy in a file of its own: a restored database.
struct File<'a> {
    file: std::fs::File,
    path: &'a Path,
    page_size: usize,
}

impl PageSource for File<'_> {
    fn other_size(&mut self, bytes: u64) -> Result<bool, String> {
        let len = self
            .file
            .metadata()
            .map_err(|e| format!("{}: {e}", self.path.display()))?
            .len();
        Ok(len != bytes)
    }

    fn read_page(&mut self, pgno: u32, page: &mut [u8]) -> Result<(), String> {
        self.file
            .seek(SeekFrom::Start(u64::from(pgno - 1) * self.page_size as u64))
            .and_then(|_| self.file.read_exact(page))
            .map_err(|e| format!("{}: {e}", self.path.display()))
    }
}

/// Whether page `pgno` of a copy, `there`, holds what the transactions left, `page`. The first page's file format
/// versions (bytes 18 and 19: rollback journal or WAL) and file change counter (bytes 24–27) are left out: Litestream
/// rewrites them as it serves a replica (its VFS presents the database as one in rollback-journal mode, with a
/// counter of its own), and WAL mode does not keep the counter; a transaction of another machine shows in the rest.
fn same_page(pgno: u32, there: &[u8], page: &[u8]) -> bool {
    if pgno != 1 || page.len() < 28 || there.len() != page.len() {
        return there == page;
    }
    there[..18] == page[..18] && there[20..24] == page[20..24] && there[28..] == page[28..]
}

/// What the transactions up to `upto` that Litestream still keeps here wrote to the database at `db`, from its
/// level-0 LTX files (one per transaction; it keeps each until the replica has compacted it, so every transaction it
/// never uploaded is there). `None` if it keeps none up to `upto`. Keeps the pages in memory up to `kept_max` bytes
/// ([`KEPT_PAGES_MAX_BYTES`]), then only the files' names (and says so in the log).
pub(crate) fn written(
    db: &Path,
    upto: Position,
    kept_max: usize,
) -> Result<Option<Written>, String> {
    let Some(level0) = ltx_dir(db).map(|dir| dir.join("0")) else {
        return Ok(None);
    };
    let mut files: Vec<(u64, PathBuf)> = match std::fs::read_dir(&level0) {
        Ok(dir) => dir
            .flatten()
            .filter_map(|file| Some((last_txid(&file.file_name())?, file.path())))
            .filter(|&(txid, _)| txid <= upto.txid())
            .collect(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("{}: {e}", level0.display())),
    };
    files.sort();
    let mut written: Option<Written> = None;
    for (_, path) in files {
        let written = written.get_or_insert_with(|| Written {
            pages: Some(BTreeMap::new()),
            ..Written::default()
        });
        let expected = (written.page_size != 0).then_some(written.page_size);
        match &mut written.pages {
            Some(pages) => {
                let ltx = read(&path, expected.unwrap_or(0))?;
                written.page_size = ltx.page_size;
                written.pages_after = ltx.pages_after;
                pages.extend(ltx.pages);
                if pages.len().saturating_mul(written.page_size) > kept_max {
                    tracing::info!(
                        db = %db.display(),
                        pages = pages.len(),
                        kept_max,
                        "the pages this machine's transactions wrote pass the cap on those kept in memory: the \
                         replica is compared with them from Litestream's files, read again"
                    );
                    written.pages = None;
                }
            }
            None => {
                let header = read_header(&path, written.page_size)?;
                written.pages_after = header.pages_after;
            }
        }
        written.files.push(path);
    }
    Ok(written)
}

/// The LTX file at `path`, read whole; an error names it. With `page_size` other than 0, its pages must be that
/// size.
fn read(path: &Path, page_size: usize) -> Result<Ltx, String> {
    let failed = |e: String| format!("{}: {e}", path.display());
    let bytes = std::fs::read(path).map_err(|e| failed(e.to_string()))?;
    let ltx = decode(&bytes).map_err(failed)?;
    same_page_size(path, ltx.page_size, page_size)?;
    Ok(ltx)
}

/// The header of the LTX file at `path`; an error names it. With `page_size` other than 0, its pages must be that
/// size.
fn read_header(path: &Path, page_size: usize) -> Result<Header, String> {
    let failed = |e: String| format!("{}: {e}", path.display());
    let mut bytes = Vec::with_capacity(HEADER_LEN);
    std::fs::File::open(path)
        .and_then(|file| file.take(HEADER_LEN as u64).read_to_end(&mut bytes))
        .map_err(|e| failed(e.to_string()))?;
    let header = decode_header(&bytes).map_err(failed)?;
    same_page_size(path, header.page_size, page_size)?;
    Ok(header)
}

/// Refuses pages of another size than the transactions' before (`expected`, unless 0).
fn same_page_size(path: &Path, page_size: usize, expected: usize) -> Result<(), String> {
    if expected != 0 && page_size != expected {
        return Err(format!(
            "{}: pages of {page_size} bytes after pages of {expected}",
            path.display()
        ));
    }
    Ok(())
}

/// Where Litestream keeps the LTX files of the database at `db`, a directory per level.
fn ltx_dir(db: &Path) -> Option<PathBuf> {
    let name = db.file_name()?.to_string_lossy();
    Some(db.with_file_name(format!(".{name}-litestream")).join("ltx"))
}

/// The last TXID of an LTX file named `<min>-<max>.ltx`.
fn last_txid(file: &std::ffi::OsStr) -> Option<u64> {
    let (_, last) = file.to_str()?.strip_suffix(".ltx")?.split_once('-')?;
    u64::from_str_radix(last, 16).ok()
}

/// One LTX file: the pages a transaction wrote (superfly/ltx's format, pages in LZ4 blocks).
struct Ltx {
    page_size: usize,
    pages_after: u32,
    pages: Vec<(u32, Vec<u8>)>,
}

/// The LTX header's length, of which the fields take the first 80 bytes.
const HEADER_LEN: usize = 100;

/// A page's header: its number (0 after the last page) and flags.
const PAGE_HEADER_LEN: usize = 6;

/// The page flag saying an LZ4 block of the length that follows holds the page.
const PAGE_IN_BLOCK: u16 = 1;

/// What an LTX file's header says of the database.
struct Header {
    page_size: usize,
    pages_after: u32,
}

/// Reads an LTX file's header.
fn decode_header(bytes: &[u8]) -> Result<Header, String> {
    if bytes.len() < HEADER_LEN || &bytes[..4] != b"LTX1" {
        return Err("not an LTX file".into());
    }
    let page_size = be32(bytes, 8).unwrap_or_default() as usize;
    let pages_after = be32(bytes, 12).unwrap_or_default();
    if !(512..=65536).contains(&page_size) || !page_size.is_power_of_two() {
        return Err(format!("a page size of {page_size} bytes"));
    }
    Ok(Header {
        page_size,
        pages_after,
    })
}

/// Reads an LTX file's header and pages (not its page index or trailer).
fn decode(bytes: &[u8]) -> Result<Ltx, String> {
    let Header {
        page_size,
        pages_after,
    } = decode_header(bytes)?;
    let truncated = || "truncated".to_string();
    let mut pages = Vec::new();
    let mut at = HEADER_LEN;
    loop {
        let pgno = be32(bytes, at).ok_or_else(truncated)?;
        let flags = bytes
            .get(at + 4..at + PAGE_HEADER_LEN)
            .map(|b| u16::from_be_bytes([b[0], b[1]]))
            .ok_or_else(truncated)?;
        at += PAGE_HEADER_LEN;
        if pgno == 0 {
            return Ok(Ltx {
                page_size,
                pages_after,
                pages,
            });
        }
        if flags & PAGE_IN_BLOCK == 0 {
            return Err("pages in LZ4 frames (an older LTX format) are not read".into());
        }
        let len = be32(bytes, at).ok_or_else(truncated)? as usize;
        at += 4;
        let block = bytes.get(at..at + len).ok_or_else(truncated)?;
        at += len;
        let mut page = vec![0; page_size];
        match lz4_flex::block::decompress_into(block, &mut page) {
            Ok(n) if n == page_size => pages.push((pgno, page)),
            Ok(n) => return Err(format!("page {pgno} holds {n} bytes, not {page_size}")),
            Err(e) => return Err(format!("page {pgno}: {e}")),
        }
    }
}

/// The big-endian `u32` at `at`, if `bytes` is long enough.
fn be32(bytes: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(bytes.get(at..at + 4)?.try_into().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAGE: usize = 4096;

    /// An LTX file as Litestream writes a transaction's: the header, each page in an LZ4 block, the end of the
    /// pages, a page index and a trailer (neither read).
    fn ltx(txid: u64, pages_after: u32, pages: &[(u32, u8)]) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(b"LTX1");
        out.extend_from_slice(&2u32.to_be_bytes()); // no checksums, as Litestream's level-0 files
        out.extend_from_slice(&(PAGE as u32).to_be_bytes());
        out.extend_from_slice(&pages_after.to_be_bytes());
        out.extend_from_slice(&txid.to_be_bytes());
        out.extend_from_slice(&txid.to_be_bytes());
        out.resize(HEADER_LEN, 0);
        for &(pgno, fill) in pages {
            let block = lz4_flex::block::compress(&[fill; PAGE]);
            out.extend_from_slice(&pgno.to_be_bytes());
            out.extend_from_slice(&PAGE_IN_BLOCK.to_be_bytes());
            out.extend_from_slice(&(block.len() as u32).to_be_bytes());
            out.extend_from_slice(&block);
        }
        out.extend_from_slice(&[0; PAGE_HEADER_LEN]);
        out.extend_from_slice(&[0xAB; 24]);
        out
    }

    /// A database file of `pages` pages, page `n` filled with `fill(n)`.
    fn database(path: &Path, pages: u32, fill: impl Fn(u32) -> u8) {
        let bytes: Vec<u8> = (1..=pages).flat_map(|n| [fill(n); PAGE]).collect();
        std::fs::write(path, bytes).unwrap();
    }

    /// A transaction's level-0 file: its TXID, the database's pages after it, and the pages it wrote (number and
    /// the byte each is filled with).
    type Transaction<'a> = (u64, u32, &'a [(u32, u8)]);

    /// Litestream's state beside `db`, with level-0 files for `files`.
    fn state(db: &Path, files: &[Transaction]) {
        let level0 = ltx_dir(db).unwrap().join("0");
        std::fs::create_dir_all(&level0).unwrap();
        for &(txid, pages_after, pages) in files {
            std::fs::write(
                level0.join(format!("{txid:016x}-{txid:016x}.ltx")),
                ltx(txid, pages_after, pages),
            )
            .unwrap();
        }
    }

    #[test]
    fn the_pages_written_up_to_a_transaction_are_each_page_s_last_content() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("t.db");
        state(
            &db,
            &[
                (7, 2, &[(1, 1), (2, 1)]),
                (8, 3, &[(2, 2), (3, 2)]),
                (9, 3, &[(3, 3)]),
            ],
        );
        assert_eq!(local_position(&db), Some(Position(9)));
        let after8 = written(&db, Position(8), KEPT_PAGES_MAX_BYTES)
            .unwrap()
            .unwrap();
        assert_eq!(after8.pages_after, 3);
        let pages = after8.pages.as_ref().unwrap();
        let firsts: Vec<(u32, u8)> = pages.iter().map(|(&n, p)| (n, p[0])).collect();
        assert_eq!(firsts, [(1, 1), (2, 2), (3, 2)]);
        assert!(
            pages
                .values()
                .all(|p| p.len() == PAGE && p.iter().all(|&b| b == p[0]))
        );
        assert!(
            written(&db, Position(6), KEPT_PAGES_MAX_BYTES)
                .unwrap()
                .is_none()
        );
        assert!(
            written(
                &dir.path().join("none.db"),
                Position(9),
                KEPT_PAGES_MAX_BYTES
            )
            .unwrap()
            .is_none()
        );
    }

    #[test]
    fn a_copy_differs_by_any_page_written_or_by_its_size() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("t.db");
        state(&db, &[(4, 3, &[(1, 1), (3, 9)])]);
        let after4 = written(&db, Position(4), KEPT_PAGES_MAX_BYTES)
            .unwrap()
            .unwrap();
        let copy = dir.path().join("copy.db");
        // Pages the transactions did not write may hold anything.
        database(&copy, 3, |n| [1, 5, 9][n as usize - 1]);
        assert!(!after4.differs_from(&copy).unwrap());
        database(&copy, 3, |n| [1, 5, 8][n as usize - 1]);
        assert!(after4.differs_from(&copy).unwrap());
        database(&copy, 4, |n| [1, 5, 9, 0][n as usize - 1]);
        assert!(after4.differs_from(&copy).unwrap());
    }

    #[test]
    fn the_first_page_is_compared_without_its_format_versions_and_change_counter() {
        let page: Vec<u8> = (0..64).collect();
        let mut served = page.clone();
        // As Litestream's VFS serves it: rollback-journal versions, a counter of its own.
        served[18] = 1;
        served[19] = 1;
        served[24..28].copy_from_slice(&[9, 9, 9, 9]);
        assert!(same_page(1, &served, &page));
        assert!(!same_page(2, &served, &page), "only the first page");
        for byte in [0, 17, 20, 23, 28, 63] {
            let mut other = served.clone();
            other[byte] ^= 1;
            assert!(!same_page(1, &other, &page), "byte {byte}");
        }
    }

    #[test]
    fn past_the_cap_on_pages_kept_in_memory_a_copy_is_compared_from_the_files_with_the_same_answers()
     {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("t.db");
        // Page 2 written twice (its last content counts), page 4 written then cut off by the database shrinking.
        state(
            &db,
            &[
                (1, 4, &[(1, 1), (2, 1), (4, 4)]),
                (2, 4, &[(2, 2)]),
                (3, 3, &[(3, 3)]),
            ],
        );
        // Four distinct pages in all: a cap of three is passed by the last transaction, of none by the first.
        let cases = [
            (KEPT_PAGES_MAX_BYTES, true),
            (4 * PAGE, true),
            (3 * PAGE, false),
            (0, false),
        ];
        let copy = dir.path().join("copy.db");
        for (kept_max, kept) in cases {
            let after3 = written(&db, Position(3), kept_max).unwrap().unwrap();
            assert_eq!(after3.kept(), kept, "a cap of {kept_max} bytes");
            if let Some(pages) = &after3.pages {
                assert!(pages.len() * PAGE <= kept_max);
            }
            assert_eq!(after3.pages_after, 3);
            database(&copy, 3, |n| [1, 2, 3][n as usize - 1]);
            assert!(
                !after3.differs_from(&copy).unwrap(),
                "a cap of {kept_max} bytes"
            );
            // Page 2 as the first transaction left it: not its last content.
            database(&copy, 3, |n| [1, 1, 3][n as usize - 1]);
            assert!(
                after3.differs_from(&copy).unwrap(),
                "a cap of {kept_max} bytes"
            );
            database(&copy, 4, |n| [1, 2, 3, 4][n as usize - 1]);
            assert!(
                after3.differs_from(&copy).unwrap(),
                "a cap of {kept_max} bytes"
            );
        }
        // A file past the cap that is not an LTX file is still an error naming it.
        let level0 = ltx_dir(&db).unwrap().join("0");
        std::fs::write(
            level0.join("0000000000000003-0000000000000003.ltx"),
            b"SQLite format 3\0".repeat(10),
        )
        .unwrap();
        let error = written(&db, Position(3), 0).unwrap_err();
        assert!(
            error.contains("not an LTX file") && error.contains("0000000000000003.ltx"),
            "{error}"
        );
    }

    #[test]
    fn a_file_that_is_not_an_ltx_file_as_written_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("t.db");
        let level0 = ltx_dir(&db).unwrap().join("0");
        std::fs::create_dir_all(&level0).unwrap();
        let file = level0.join("0000000000000001-0000000000000001.ltx");
        for (bytes, says) in [
            (b"SQLite format 3\0".repeat(10), "not an LTX file"),
            (
                ltx(1, 1, &[(1, 1)])[..HEADER_LEN + 20].to_vec(),
                "truncated",
            ),
            (
                {
                    let mut old = ltx(1, 1, &[(1, 1)]);
                    old[HEADER_LEN + 4..HEADER_LEN + 6].copy_from_slice(&0u16.to_be_bytes());
                    old
                },
                "older LTX format",
            ),
        ] {
            std::fs::write(&file, bytes).unwrap();
            let error = written(&db, Position(1), KEPT_PAGES_MAX_BYTES).unwrap_err();
            assert!(
                error.contains(says) && error.contains("0000000000000001-0000000000000001.ltx"),
                "{error}"
            );
        }
    }
}
