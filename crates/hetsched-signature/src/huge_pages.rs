//! Large tables probed at random, in huge pages where the kernel gives them for the asking
//! (`madvise`): megabytes read at random in 4 KiB pages miss the TLB on most reads. A hint: the
//! contents are the same either way.

/// `len` copies of `value`, the allocation's whole 2 MiB pages advised huge before they are first
/// written (no advice for less than two huge pages, or off Linux).
pub(crate) fn filled<T: Clone>(len: usize, value: T) -> Vec<T> {
    let mut v: Vec<T> = Vec::with_capacity(len);
    #[cfg(target_os = "linux")]
    {
        const HUGE_PAGE: usize = 2 << 20;
        let bytes = len * size_of::<T>();
        if bytes >= 2 * HUGE_PAGE {
            let start = v.as_ptr() as usize;
            let aligned = start.next_multiple_of(4096);
            // SAFETY: madvise on whole pages inside the allocation just made, before they are
            // written; it changes how they are backed, never their contents, and failure is
            // harmless.
            unsafe {
                libc::madvise(
                    aligned as *mut libc::c_void,
                    (start + bytes - aligned) & !4095,
                    libc::MADV_HUGEPAGE,
                );
            }
        }
    }
    v.resize(len, value);
    v
}
