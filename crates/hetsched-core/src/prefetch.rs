//! A cache prefetch hint. Loops over thousands of threads (a policy's pass over the running
//! threads, the simulator's tick over the cores) are made of cache misses; asking for the memory a
//! few iterations ahead overlaps them. A hint only: it reads nothing into the program, cannot
//! fault, and changes no result.

/// Ask the CPU to bring `r`'s first cache line into every cache level.
#[inline(always)]
pub fn prefetch<T>(r: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint; it reads nothing into the program and cannot fault.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
            (r as *const T).cast::<i8>(),
        );
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = r;
}
