//! The results directory of one run: every file rewritten after every cell, atomically.
//!
//! hyperfine's lesson: a run that dies late — a crash, Ctrl-C, a machine going to sleep — keeps everything
//! measured up to that point, and no file is ever left half-written.

use std::path::{Path, PathBuf};

use quicklite_lab_core::{ApproachName, CellResult};

use crate::atomic::write_atomically;
use crate::error::{LabError, Result};
use crate::export::ExportFormat;

/// The results of a run so far, and where they go.
#[derive(Debug)]
pub struct ResultStore {
    /// The results directory.
    dir: PathBuf,
    /// The approach report ratios are against.
    baseline: ApproachName,
    /// Every result so far, in run order.
    results: Vec<CellResult>,
}

impl ResultStore {
    /// Creates `dir` (and its parents) and checks that a file can be written there, so an unwritable
    /// directory is reported before the first cell runs rather than after it.
    pub fn create(dir: &Path, baseline: ApproachName) -> Result<Self> {
        let fail = |source| LabError::OutputDir {
            path: dir.to_owned(),
            source,
        };
        std::fs::create_dir_all(dir).map_err(fail)?;
        tempfile::Builder::new()
            .prefix(".quicklite-probe-")
            .tempfile_in(dir)
            .map_err(fail)?;
        Ok(Self {
            dir: dir.to_owned(),
            baseline,
            results: Vec::new(),
        })
    }

    /// The results directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The results so far.
    pub fn results(&self) -> &[CellResult] {
        &self.results
    }

    /// Records `result` and rewrites every file in the directory.
    pub fn push(&mut self, result: CellResult) -> Result<()> {
        self.results.push(result);
        self.write_all()
    }

    /// Path of one format's file in the directory.
    pub fn path(&self, format: ExportFormat) -> PathBuf {
        self.dir.join(format.file_name())
    }

    fn write_all(&self) -> Result<()> {
        for format in ExportFormat::ALL {
            let bytes = format.serialize(&self.results, self.baseline)?;
            write_atomically(&self.path(format), &bytes)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures;

    #[test]
    fn every_push_rewrites_every_file() {
        let dir = tempfile::tempdir().unwrap();
        let mut store =
            ResultStore::create(&dir.path().join("run"), ApproachName::TokioRusqlite).unwrap();
        let results = fixtures::results();
        store.push(results[0].clone()).unwrap();
        store.push(results[1].clone()).unwrap();
        let json = std::fs::read(store.path(ExportFormat::Json)).unwrap();
        let back: Vec<CellResult> = serde_json::from_slice(&json).unwrap();
        assert_eq!(back.len(), 2);
        let names: Vec<String> = std::fs::read_dir(store.dir())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names.len(), 5, "{names:?}");
    }

    #[test]
    fn an_unwritable_directory_is_an_error_up_front() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("not-a-dir");
        std::fs::write(&file, b"x").unwrap();
        let err = ResultStore::create(&file.join("run"), ApproachName::TokioRusqlite).unwrap_err();
        assert!(err.to_string().contains("not writable"), "{err}");
    }
}
