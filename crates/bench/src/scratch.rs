//! A scratch directory a bench run creates for its own files (sockets, an API socket) and
//! removes when dropped, named `vecplane-<tag>-<pid>-<n>` so two runs never share one. It owns
//! that directory only.

use anyhow::{Context, Result};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

/// A directory removed with everything in it when dropped.
pub(crate) struct ScratchDir(PathBuf);

impl ScratchDir {
    /// Create a fresh directory under the system's temporary directory.
    pub(crate) fn create(tag: &str) -> Result<ScratchDir> {
        static N: AtomicU32 = AtomicU32::new(0);
        let d = std::env::temp_dir().join(format!(
            "vecplane-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&d).with_context(|| format!("cannot create {}", d.display()))?;
        Ok(ScratchDir(d))
    }

    /// Its path.
    pub(crate) fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
