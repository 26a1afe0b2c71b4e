use std::time::Instant;
#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> quicklite::Result<()> {
    let db = quicklite::Database::temporary().await?;
    db.execute_batch("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT); WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHERE x < 10000) INSERT INTO t SELECT x, 'v' || x FROM c;").await?;
    for round in 0..5 {
        let start = Instant::now();
        let n = 100_000;
        for i in 0..n {
            let _v: String = db
                .query_row("SELECT v FROM t WHERE id = ?1", [i % 10000 + 1], |r| {
                    r.get(0)
                })
                .await?;
        }
        let m = db.metrics();
        println!(
            "round {round}: {:.0} reads/s, inline {} of {}",
            n as f64 / start.elapsed().as_secs_f64(),
            m.inline_reads,
            m.reads
        );
    }
    Ok(())
}
