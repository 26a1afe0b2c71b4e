//! Opening a [`Database`]: on threads of its own ([`Builder::open`](crate::Builder::open)), or on a registry's
//! pool, where its connections open on first use.

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use crate::changes::Changes;
use crate::config::Config;
use crate::database::{Database, Inner};
use crate::engine::Shared;
use crate::engine::seat::WriterSeat;
use crate::gate::Gate;
use crate::permits::Permits;
use crate::queue;
use crate::sched::Backend;
use crate::sched::inline::Inline;
use crate::sched::pool::Pool;
use crate::sched::pool::actor::Actor;
use crate::sched::threads::Threads;
use crate::util::companion;
use crate::{Error, Result};

impl Database {
    /// A database served by threads of its own, open once its writer and readers are.
    pub(crate) async fn start(
        path: PathBuf,
        config: Config,
        temporary: Option<tempfile::TempDir>,
    ) -> Result<Database> {
        crate::setup::sqlite_setup();
        // What the connections open: the file, or a replica through Litestream's VFS (`path` then only names it).
        let opened = match &config.replica {
            Some(replica) => {
                replica.load_vfs().map_err(Error::InvalidConfig)?;
                PathBuf::from(replica.uri(&path))
            }
            None => path.clone(),
        };
        let gate = match &config.replicated_acks {
            Some(socket) => Some(Gate::start(socket.clone(), 1)?),
            None => None,
        };
        let gated = gate
            .as_ref()
            .map(|gate| gate.track(config.write_queue_capacity));
        let shared = Arc::new(Shared::new(
            Changes::new(config.subscription_capacity, config.change_rowids),
            gated,
        ));
        let (write_tx, write_rx) = queue::bounded(config.write_queue_capacity);
        let (read_tx, read_rx) = queue::bounded(config.read_queue_capacity);
        // On failure the senders are dropped: the queues close and the threads already started exit.
        // Reads on callers' threads may take the writer's connection while the writer waits.
        let seat = config.inline_reads.then(|| Arc::new(WriterSeat::new()));
        let started = Threads::start(&opened, &config, &shared, write_rx, read_rx, seat.clone())
            .await
            .map_err(|e| match (&config.replica, e) {
                (Some(replica), Error::Sqlite(e)) => Error::Litestream(format!(
                    "the replica {} could not be opened through Litestream's VFS ({e}); the VFS gives no \
                     reason: check the replica's URL and credentials, and that AWS_CA_BUNDLE is not set \
                     (Litestream 0.5.18's S3 client fails with it)",
                    replica.url()
                )),
                (_, e) => e,
            })?;
        let file = match config.replica {
            Some(_) => path.clone(),
            None => started.file.unwrap_or_else(|| path.clone()),
        };
        let inline = config
            .inline_reads
            .then(|| Inline::new(opened, config.clone(), shared.clone(), None, seat));
        Ok(Database {
            timeout: None,
            inner: Arc::new(Inner {
                write_tx,
                read_tx,
                shared,
                config,
                wal_file: companion(&file, "-wal"),
                file,
                path,
                pragmas: Arc::new(OnceLock::from(started.pragmas)),
                backend: Backend::Threads(started.threads),
                inline,
                _temporary: temporary,
                _gate: gate,
            }),
        })
    }

    /// A database served by a registry's pool, and the actor that serves it there: queues and state only; its
    /// connections open on first use. Its connections for reads on callers' threads share `inline_budget` with the
    /// registry's other databases. Under [`Acknowledge::Replicated`](crate::Acknowledge::Replicated), `gate` is the
    /// registry's, which has Litestream upload every database's commits.
    pub(crate) fn start_pooled(
        name: String,
        path: PathBuf,
        config: Config,
        pool: Arc<Pool<Actor>>,
        inline_budget: &Arc<Permits>,
        gate: Option<&Gate>,
    ) -> (Database, Arc<Actor>) {
        let gated = gate.map(|gate| gate.track(config.write_queue_capacity));
        let shared = Arc::new(Shared::new(
            Changes::new(config.subscription_capacity, config.change_rowids),
            gated,
        ));
        let (write_tx, write_rx) = queue::bounded(config.write_queue_capacity);
        let (read_tx, read_rx) = queue::bounded(config.read_queue_capacity);
        let pragmas = Arc::new(OnceLock::new());
        let actor = Actor::new(
            name,
            path.clone(),
            config.clone(),
            shared.clone(),
            pool,
            (write_rx, read_rx),
            pragmas.clone(),
        );
        let inline = config.inline_reads.then(|| {
            Inline::new(
                path.clone(),
                config.clone(),
                shared.clone(),
                Some(inline_budget.clone()),
                None,
            )
        });
        let db = Database {
            timeout: None,
            inner: Arc::new(Inner {
                write_tx,
                read_tx,
                shared,
                config,
                wal_file: companion(&path, "-wal"),
                file: path.clone(),
                path,
                pragmas,
                backend: Backend::Pool(actor.clone()),
                inline,
                _temporary: None,
                _gate: None,
            }),
        };
        (db, actor)
    }
}
