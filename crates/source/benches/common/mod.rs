//! Helpers shared by the source benchmarks: timing, reports, deterministic content (the test
//! servers and tool checks come from `capstan-testkit`).

#![allow(dead_code)] // Each benchmark uses a subset of the helpers.

use std::fmt::Write as _;
use std::process::Command;
use std::time::{Duration, Instant};

/// Runs per measurement; the median is reported.
pub const RUNS: usize = 3;

/// Runs `program` with `args`, panicking with its stderr on failure.
pub fn run(program: &str, args: &[&str]) {
    let output = Command::new(program).args(args).output().unwrap();
    assert!(
        output.status.success(),
        "{program} {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Wall time of `f`.
pub fn time<T>(f: impl FnOnce() -> T) -> (Duration, T) {
    let started = Instant::now();
    let value = f();
    (started.elapsed(), value)
}

/// The median of `samples` (sorted in place).
pub fn median(samples: &mut [Duration]) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

/// Milliseconds with one decimal.
pub fn ms(duration: Duration) -> String {
    format!("{:.1} ms", duration.as_secs_f64() * 1000.0)
}

/// One line: label, every run and the median.
pub fn report(label: &str, samples: &mut [Duration]) -> Duration {
    let runs: Vec<String> = samples.iter().map(|d| ms(*d)).collect();
    let median = median(samples);
    println!(
        "{label:<44} median {:>10}   runs [{}]",
        ms(median),
        runs.join(", ")
    );
    median
}

/// `capstan / other`, printed as `ratio capstan/<name> = X.XX`.
pub fn ratio(name: &str, capstan: Duration, other: Duration) -> f64 {
    let ratio = capstan.as_secs_f64() / other.as_secs_f64();
    println!("ratio capstan/{name} = {ratio:.2}");
    ratio
}

/// A deterministic pseudo-random generator (xorshift64*), so every run benchmarks the same
/// content.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed.max(1))
    }

    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// YAML-like text of about `len` bytes: realistic manifests compress well but not
    /// perfectly.
    pub fn manifest(&mut self, index: usize, len: usize) -> String {
        const WORDS: [&str; 16] = [
            "apiVersion",
            "kind",
            "metadata",
            "name",
            "namespace",
            "labels",
            "spec",
            "replicas",
            "image",
            "containers",
            "ports",
            "resources",
            "limits",
            "cpu",
            "memory",
            "env",
        ];
        let mut text = format!("# file {index}\napiVersion: v1\nkind: ConfigMap\ndata:\n");
        while text.len() < len {
            let word = WORDS[usize::try_from(self.next() % 16).unwrap()];
            let value = self.next() % 100_000;
            let hash = self.next();
            writeln!(text, "  {word}-{value}: \"{hash:x}\"").expect("writing to a String");
        }
        text
    }
}
