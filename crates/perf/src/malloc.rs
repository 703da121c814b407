//! glibc's allocator told to give large blocks back as soon as they are
//! freed: the one process-wide allocator setting a profkit binary makes
//! (`profreport`, first thing in `main`). It is here because this is the
//! one crate with `unsafe`.

/// The size from which glibc maps each allocation on its own: glibc's own
/// starting threshold (`M_MMAP_THRESHOLD`'s default), kept fixed.
pub const MAPPED_APART_FROM: usize = 128 * 1024;

/// Has glibc map every allocation of [`MAPPED_APART_FROM`] bytes or more
/// on its own, for the rest of the process, so that freeing one gives its
/// memory back to the system at once. Returns whether glibc took the
/// setting (`false` with another C library, where it does nothing).
///
/// Left alone, glibc raises that threshold to the largest block freed so
/// far (up to 32 MiB) and from then on keeps up to twice as much free
/// memory in each thread's heap. A report frees its largest blocks early
/// (the count maps, 3.2 MB for a cargo build's `-l`), so every later
/// phase ran in heaps that kept what the phases before had freed: that
/// `-l` peaked at 16.8 to 18.1 MiB left alone, 14.7 to 15.0 MiB with the
/// threshold fixed. The cost is a page fault per page of each large
/// block made afresh (8 to 10 % of a `-c` report's time;
/// docs/PERFORMANCE.md, issue 32).
pub fn return_freed_blocks() -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY:
        // - mallopt takes no pointers and only sets an allocator parameter;
        //   glibc allows it at any time, from any thread (it takes the
        //   arena lock).
        unsafe { libc::mallopt(libc::M_MMAP_THRESHOLD, MAPPED_APART_FROM as libc::c_int) == 1 }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        false
    }
}

#[cfg(all(test, target_os = "linux", target_env = "gnu"))]
mod tests {
    use super::*;

    /// Whether glibc mapped `v`'s block on its own: a mapped block's usable
    /// size is its whole pages less the two words of its header.
    fn mapped_apart(v: &[u8]) -> bool {
        // SAFETY:
        // - the pointer is that of a live block of the global allocator
        //   (glibc's malloc: no other is set in this crate's tests).
        let usable = unsafe { libc::malloc_usable_size(v.as_ptr() as *mut libc::c_void) };
        (usable + 16) % crate::page_size() == 0
    }

    /// Once set, a block freed after a larger one is still mapped apart:
    /// the threshold no longer rises to the largest block freed.
    #[test]
    fn blocks_above_the_threshold_stay_mapped_apart_after_a_larger_one_is_freed() {
        assert!(return_freed_blocks(), "glibc refused M_MMAP_THRESHOLD");
        let big = vec![1u8; 8 << 20];
        assert!(mapped_apart(&big));
        drop(big);
        let next = vec![1u8; 512 << 10];
        assert!(
            mapped_apart(&next),
            "a 512 KiB block after an 8 MiB one freed"
        );
        let small = vec![1u8; 64 << 10];
        assert!(
            !mapped_apart(&small),
            "a 64 KiB block is below the threshold"
        );
    }
}
