//! A guest's memory as the frontend shared it (SET_MEM_TABLE / ADD_MEM_REGION): each region's
//! file mapped into vecplane, and the two translations a vhost-user backend needs: guest
//! physical addresses (descriptors) and the frontend's own virtual addresses (ring locations)
//! to pointers into those mappings.
//!
//! It owns the mappings (unmapped when the last `Arc<GuestMemory>` goes away, which the device
//! arranges to happen only once no worker can read them). It never hands out a pointer to a
//! range that is not wholly inside one region, whatever the guest wrote.

use crate::fault_guard;
use std::fs::File;
use vm_memory::{FileOffset, MmapRegion};

/// One region: where it is for the guest, for the frontend, and here.
pub(crate) struct Region {
    /// Guest physical address of its first byte.
    gpa: u64,
    /// The frontend's virtual address of its first byte.
    uva: u64,
    /// Length in bytes.
    len: u64,
    /// Where its first byte is mapped here.
    host: *mut u8,
    /// Guards the mapping against its file shrinking; dropped (released) before the unmap.
    guard: fault_guard::Guard,
    /// The mapping (file offset 0 to `mmap_offset + len`; `host` points `mmap_offset` into it).
    _map: MmapRegion,
}

/// What the frontend described, before it is mapped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RegionSpec {
    /// Guest physical address.
    pub gpa: u64,
    /// Length in bytes.
    pub len: u64,
    /// Frontend's virtual address.
    pub uva: u64,
    /// Offset of the region in its file.
    pub mmap_offset: u64,
}

/// Why a memory table was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum MemoryError {
    /// More regions than a backend keeps.
    #[error("{0} memory regions; accepted: 1 to {MAX_REGIONS}")]
    TooManyRegions(usize),
    /// A region of length zero, or one whose end overflows.
    #[error("memory region at guest address {gpa:#x} has an impossible length {len:#x}")]
    BadRegion {
        /// Its guest address.
        gpa: u64,
        /// Its length.
        len: u64,
    },
    /// Two regions overlap in guest physical or frontend virtual addresses.
    #[error("memory regions at guest addresses {0:#x} and {1:#x} overlap")]
    Overlap(u64, u64),
    /// The region's file could not be mapped.
    #[error("cannot map the memory region at guest address {gpa:#x}: {why}")]
    Map {
        /// Its guest address.
        gpa: u64,
        /// The error.
        why: String,
    },
    /// A file per region was expected.
    #[error("{regions} memory regions came with {files} file descriptors")]
    FileCount {
        /// Regions described.
        regions: usize,
        /// Files attached.
        files: usize,
    },
}

/// Most regions kept (QEMU sends at most 8 in SET_MEM_TABLE; more arrive one by one).
pub const MAX_REGIONS: usize = 32;

/// A guest's mapped memory. Immutable once built; a new table is a new `GuestMemory`.
pub struct GuestMemory {
    regions: Vec<Region>,
}

// SAFETY: the raw pointers point into mappings the struct owns; they are only turned into
// accesses by the ring code, which goes through the bounds checks below; sharing the table
// between the control thread and a worker shares read-only metadata.
unsafe impl Send for GuestMemory {}
// SAFETY: as above: nothing in the table is mutated after construction.
unsafe impl Sync for GuestMemory {}

impl GuestMemory {
    /// An empty table (no region: every translation fails).
    pub fn empty() -> GuestMemory {
        GuestMemory {
            regions: Vec::new(),
        }
    }

    /// Map `specs[i]` from `files[i]`; all or nothing.
    pub fn map(specs: &[RegionSpec], files: Vec<File>) -> Result<GuestMemory, MemoryError> {
        if specs.len() > MAX_REGIONS {
            return Err(MemoryError::TooManyRegions(specs.len()));
        }
        if specs.len() != files.len() {
            return Err(MemoryError::FileCount {
                regions: specs.len(),
                files: files.len(),
            });
        }
        check_layout(specs)?;
        let mut regions = Vec::with_capacity(specs.len());
        for (s, file) in specs.iter().zip(files) {
            let total = s
                .mmap_offset
                .checked_add(s.len)
                .and_then(|t| usize::try_from(t).ok())
                .ok_or(MemoryError::BadRegion {
                    gpa: s.gpa,
                    len: s.len,
                })?;
            // A mapping past the end of its file faults (SIGBUS) on first touch: refuse it.
            let file_len = file.metadata().map(|m| m.len()).unwrap_or(0);
            if (total as u64) > file_len {
                return Err(MemoryError::Map {
                    gpa: s.gpa,
                    why: format!(
                        "the region ends at byte {total} of its file, which has {file_len}"
                    ),
                });
            }
            let map = MmapRegion::from_file(FileOffset::new(file, 0), total).map_err(|e| {
                MemoryError::Map {
                    gpa: s.gpa,
                    why: e.to_string(),
                }
            })?;
            // `mmap_offset + len == map.size()`, so the offset is inside the mapping.
            let host = map.as_ptr().wrapping_add(s.mmap_offset as usize);
            // If the frontend shrinks the file later, an access past its end must not kill
            // the process: the guard answers it (see `fault_guard`).
            let guard =
                fault_guard::guard(map.as_ptr(), map.size()).map_err(|e| MemoryError::Map {
                    gpa: s.gpa,
                    why: e.to_string(),
                })?;
            regions.push(Region {
                gpa: s.gpa,
                uva: s.uva,
                len: s.len,
                host,
                guard,
                _map: map,
            });
        }
        Ok(GuestMemory { regions })
    }

    /// Number of regions.
    pub fn regions(&self) -> usize {
        self.regions.len()
    }

    /// The guest address of a region whose file the frontend shrank under its mapping (its
    /// pages read as zeroes since: the guest's memory is no longer shared there), if any.
    pub fn shrunk_region(&self) -> Option<u64> {
        self.regions
            .iter()
            .find(|r| r.guard.faulted())
            .map(|r| r.gpa)
    }

    /// Bytes of guest memory mapped.
    pub fn bytes(&self) -> u64 {
        self.regions.iter().map(|r| r.len).sum()
    }

    /// A pointer to guest physical `[gpa, gpa + len)` when that range lies inside one region.
    #[inline]
    pub fn gpa(&self, gpa: u64, len: u32) -> Option<*mut u8> {
        for r in &self.regions {
            let off = gpa.wrapping_sub(r.gpa);
            if off < r.len && u64::from(len) <= r.len - off {
                return Some(r.host.wrapping_add(off as usize));
            }
        }
        None
    }

    /// A pointer to the frontend's virtual `[uva, uva + len)` when it lies inside one region.
    pub fn uva(&self, uva: u64, len: u64) -> Option<*mut u8> {
        for r in &self.regions {
            let off = uva.wrapping_sub(r.uva);
            if off < r.len && len <= r.len - off {
                return Some(r.host.wrapping_add(off as usize));
            }
        }
        None
    }
}

/// Regions must have a length, not wrap, and not overlap in either address space.
fn check_layout(specs: &[RegionSpec]) -> Result<(), MemoryError> {
    for s in specs {
        let bad = MemoryError::BadRegion {
            gpa: s.gpa,
            len: s.len,
        };
        if s.len == 0 || s.gpa.checked_add(s.len).is_none() || s.uva.checked_add(s.len).is_none() {
            return Err(bad);
        }
    }
    for (i, a) in specs.iter().enumerate() {
        for b in &specs[i + 1..] {
            let gpa_overlap = a.gpa < b.gpa + b.len && b.gpa < a.gpa + a.len;
            let uva_overlap = a.uva < b.uva + b.len && b.uva < a.uva + a.len;
            if gpa_overlap || uva_overlap {
                return Err(MemoryError::Overlap(a.gpa, b.gpa));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::fake_guest::memfd;

    fn spec(gpa: u64, len: u64, uva: u64) -> RegionSpec {
        RegionSpec {
            gpa,
            len,
            uva,
            mmap_offset: 0,
        }
    }

    #[test]
    fn translations_stay_inside_one_region() {
        let specs = [
            spec(0, 0x10000, 0x7f00_0000_0000),
            spec(0x100000, 0x10000, 0x7f00_1000_0000),
        ];
        let m = GuestMemory::map(&specs, vec![memfd(0x10000), memfd(0x10000)]).expect("map");
        assert!(m.gpa(0, 16).is_some());
        assert!(m.gpa(0xfff0, 16).is_some());
        assert!(m.gpa(0xfff1, 16).is_none(), "crosses the end");
        assert!(m.gpa(0x10000, 1).is_none(), "between regions");
        assert!(m.gpa(0x10fff0, 16).is_some());
        assert!(m.gpa(u64::MAX - 4, 16).is_none(), "wraps");
        assert!(m.uva(0x7f00_1000_0000, 0x10000).is_some());
        assert!(m.uva(0x7f00_1000_0001, 0x10000).is_none());
        assert_eq!(m.bytes(), 0x20000);
    }

    #[test]
    fn bad_tables_are_refused_whole() {
        let e = GuestMemory::map(&[spec(0, 0, 0)], vec![memfd(4096)]);
        assert!(matches!(e, Err(MemoryError::BadRegion { .. })));
        let e = GuestMemory::map(
            &[spec(0, 0x2000, 0), spec(0x1000, 0x2000, 0x10000)],
            vec![memfd(0x2000), memfd(0x2000)],
        );
        assert_eq!(e.err(), Some(MemoryError::Overlap(0, 0x1000)));
        let e = GuestMemory::map(&[spec(0, 0x1000, 0)], vec![]);
        assert!(matches!(e, Err(MemoryError::FileCount { .. })));
        // A region longer than its file would fault on first touch.
        let e = GuestMemory::map(&[spec(0, 0x2000, 0)], vec![memfd(0x1000)]);
        assert!(
            matches!(&e, Err(MemoryError::Map { why, .. }) if why.contains("which has 4096")),
            "{:?}",
            e.err()
        );
    }
}
