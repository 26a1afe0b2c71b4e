//! The run order of repetitions: one table's cells in rounds (A B C, A B C), its rounds back to back.

use quicklite_lab_core::Cell;

/// Every table's cells `repeat` times, in rounds: the cells of one table (the same load, see
/// [`crate::Summary`]) run A B C, A B C, … with their repetition numbered, and one table's rounds run back to
/// back, so the rows compared with each other are measured close together and alike under drift.
pub fn interleave(cells: Vec<Cell>, repeat: u32) -> Vec<Cell> {
    let mut tables: Vec<(Cell, Vec<Cell>)> = Vec::new();
    for cell in cells {
        let key = crate::summary::load_key(&cell);
        match tables.iter_mut().find(|(k, _)| *k == key) {
            Some((_, members)) => members.push(cell),
            None => tables.push((key, vec![cell])),
        }
    }
    let mut out = Vec::new();
    for (_, members) in tables {
        for repetition in 0..repeat.max(1) {
            out.extend(members.iter().map(|cell| Cell {
                repetition,
                ..cell.clone()
            }));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use quicklite_lab_core::ApproachName;

    use super::*;
    use crate::matrix::build_matrix;
    use crate::matrix::tests::once;
    use crate::options::BenchOptions;

    #[test]
    fn repetitions_run_in_rounds_within_each_table() {
        let options = BenchOptions {
            workloads: vec!["point-read".into(), "insert".into()],
            approaches: vec![ApproachName::Quicklite, ApproachName::TokioRusqlite],
            memstatus: vec![false, true],
            concurrency: vec![64, 1],
            repeat: 2,
            ..once()
        };
        let cells = build_matrix(&options).unwrap();
        let order: Vec<String> = cells
            .iter()
            .map(|c| {
                format!(
                    "{} {} {} {} #{}",
                    c.workload,
                    c.concurrency,
                    c.approach,
                    crate::row::on_off(c.memstatus),
                    c.repetition
                )
            })
            .collect();
        let table = |workload: &str, tasks: u32| -> Vec<String> {
            let round = |repetition: u32| {
                ["off", "on"].into_iter().flat_map(move |memstatus| {
                    ["quicklite", "tokio-rusqlite"]
                        .into_iter()
                        .map(move |approach| {
                            format!("{workload} {tasks} {approach} {memstatus} #{repetition}")
                        })
                })
            };
            round(0).chain(round(1)).collect()
        };
        let expected: Vec<String> = [
            table("point-read", 64),
            table("point-read", 1),
            table("insert", 64),
            table("insert", 1),
        ]
        .concat();
        assert_eq!(order, expected);
        // The runner is never told: a first repetition is not written at all, a later one is.
        let json = |c: &Cell| serde_json::to_string(c).unwrap();
        assert!(!json(&cells[0]).contains("repetition"));
        assert!(json(&cells[4]).contains("\"repetition\":1"));
        let zero = BenchOptions {
            repeat: 0,
            ..options
        };
        assert!(
            build_matrix(&zero)
                .unwrap_err()
                .to_string()
                .contains("--repeat")
        );
    }
}
