//! Helpers shared by the unit tests: scratch files and small pools. Test-only; never used by the
//! library itself.

use packet::{BufferPool, PoolConfig};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};

static SEQ: AtomicU32 = AtomicU32::new(0);

/// A directory for one test's files, removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        let n = SEQ.fetch_add(1, Ordering::Relaxed);
        let dir =
            std::env::temp_dir().join(format!("vecplane-ports-{}-{}-{n}", tag, std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        TempDir(dir)
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A pool of `buffers` normal-page buffers of `data_size` bytes.
pub fn pool(buffers: u32, data_size: u16) -> BufferPool {
    BufferPool::new(PoolConfig {
        buffers,
        data_size,
        try_hugepages: false,
        ..PoolConfig::default()
    })
    .expect("pool")
}

/// Run `f` with a node context over `pool` (for calling `poll`/`process` directly).
pub fn with_cx<R>(pool: &mut BufferPool, f: impl FnOnce(&mut graph::NodeContext<'_>) -> R) -> R {
    let mut cx = graph::NodeContext {
        pool,
        now_tsc: 0,
        tsc_hz: 1,
        worker: 0,
        error_base: 0,
        errors: &[],
        error_names: &[],
    };
    f(&mut cx)
}

/// Id of node `name` in a graph's stats.
pub fn node(stats: &graph::GraphStats, name: &str) -> usize {
    stats
        .node_names
        .iter()
        .position(|n| n == name)
        .expect("node")
}
