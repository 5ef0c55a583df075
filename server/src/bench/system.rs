//! What the bench states about the machine and reads from `/proc`: the CPU, cores, memory and GPU,
//! the load average, a process's peak memory, and the CPU kernels each side's llama.cpp was built
//! with (from llama.cpp's system info).

/// VmHWM: the peak resident set size of a process, in KiB.
pub fn peak_rss_kb(pid: u32) -> u64 {
    proc_status_kb(&std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default(), "VmHWM")
}

/// A `kB` field (`VmRSS`, `VmHWM`, `RssAnon`, …) of a `/proc/<pid>/status` text; 0 when absent.
pub fn proc_status_kb(status: &str, field: &str) -> u64 {
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// The 1-minute load average (0 when unreadable).
pub fn load_average() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|v| v.parse().ok()))
        .unwrap_or(0.0)
}

/// The CPU, the cores available, the memory and the GPU llama.cpp uses, in one line.
pub fn machine() -> String {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let cpu = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name").map(|v| v.trim_start_matches([' ', '\t', ':']).to_owned()))
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let mem_gib = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| m.lines().find_map(|l| l.strip_prefix("MemTotal:")).and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok()))
        .map_or(0.0, |kb| kb / 1024.0 / 1024.0);
    let gpu = match crate::model::backend::gpu_backend() {
        None => "no GPU used".to_owned(),
        Some(backend) => {
            let gpus: Vec<String> = crate::model::backend::devices()
                .into_iter()
                .filter(|d| d.gpu)
                .map(|d| format!("{} ({:.0} GiB)", d.description, d.memory_total as f64 / (1u64 << 30) as f64))
                .collect();
            format!("GPU through {backend}: {}", if gpus.is_empty() { "none found".to_owned() } else { gpus.join(", ") })
        }
    };
    format!("{cpu}, {cores} cores available, {mem_gib:.0} GiB, {gpu}")
}

pub use crate::model::backend::kernels;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernels_lists_what_is_on_per_backend() {
        let ours = "CPU : SSE3 = 1 | SSSE3 = 1 | AVX = 1 | AVX2 = 1 | F16C = 1 | FMA = 1 | AVX512 = 0 | OPENMP = 1 | REPACK = 1 | ";
        assert_eq!(kernels(ours), "CPU: SSE3 SSSE3 AVX AVX2 F16C FMA OPENMP REPACK");
        let logged = "main: system_info: n_threads = 2 (n_threads_batch = 2) / 2 | CUDA : ARCHS = 900 | USE_GRAPHS = 1 | CPU : AVX = 1 | AVX512 = 0 | ";
        assert_eq!(kernels(logged), "CUDA: ARCHS=900 USE_GRAPHS; CPU: AVX");
        assert_eq!(kernels("version: 1 (abc)"), "");
    }

    #[test]
    fn proc_status_fields() {
        let status = "Name:\tghostline\nVmHWM:\t  123456 kB\nVmRSS:\t   100 kB\n";
        assert_eq!(proc_status_kb(status, "VmHWM"), 123456);
        assert_eq!(proc_status_kb(status, "VmRSS"), 100);
        assert_eq!(proc_status_kb(status, "RssAnon"), 0);
    }
}
