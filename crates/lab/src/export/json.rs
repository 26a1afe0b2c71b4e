//! The raw JSON: the array of results exactly as the runners reported them.

use quicklite_lab_core::{ApproachName, CellResult};

use super::Exporter;
use crate::error::{LabError, Result};

/// Pretty-printed `[CellResult, …]`.
#[derive(Debug, Default, Clone, Copy)]
pub struct JsonExporter;

impl Exporter for JsonExporter {
    fn serialize(&self, results: &[CellResult], _baseline: ApproachName) -> Result<Vec<u8>> {
        let mut bytes =
            serde_json::to_vec_pretty(results).map_err(|e| LabError::Serialize(e.to_string()))?;
        bytes.push(b'\n');
        Ok(bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures;

    #[test]
    fn json_parses_back_to_the_same_results() {
        let results = fixtures::results();
        let bytes = JsonExporter
            .serialize(&results, ApproachName::TokioRusqlite)
            .unwrap();
        let back: Vec<CellResult> = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(back, results);
    }
}
