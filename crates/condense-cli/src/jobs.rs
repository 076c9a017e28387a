//! What the commands that work over many sessions share: how many threads
//! to start, and the percentile their figures are reported at.

/// The threads `--jobs N` starts: no more than there are files to work on
/// or cores to run them (more only wait, and a huge N would never start).
pub fn worker_threads(jobs: usize, files: usize) -> usize {
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    jobs.min(files.max(1)).min(cores).max(1)
}

/// The nearest-rank `p`-th percentile of sorted values.
pub fn percentile<T: Copy>(sorted: &[T], p: u32) -> Option<T> {
    if sorted.is_empty() {
        return None;
    }
    let rank = (u64::from(p) * sorted.len() as u64).div_ceil(100).max(1) as usize;
    Some(sorted[rank.min(sorted.len()) - 1])
}
