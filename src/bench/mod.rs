//! `bespoke bench`: every registered section runs against one device and one copy-bandwidth figure measured in
//! the same process, and the results print as one table and one JSON object.

mod copy;
mod dense;
mod fv;
mod lab;
mod lbm;
mod mm;
mod scale;
mod sizes;

pub use mm::MATRICES as MM_MATRICES;
pub use scale::{default_memory_budget, scale_rows};
pub use sizes::{MM_OPERATORS, Sizes};

use std::io::IsTerminal;

use bespoke_gpu::{CopyProbe, Gpu, Launch, ProbeOptions, Timing};
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::{Map, Value, json};

use crate::Error;
use crate::report::{adapter_json, probe_json};

/// A precision `section` cannot run on this adapter (f64 where it has no SHADER_F64: Metal, some Intel GPUs), said
/// rather than left out: a line on stderr and the section's JSON entry naming what the adapter lacks.
fn dtype_not_run(section: &str, dtype: bespoke_mm::DType, e: &dyn std::fmt::Display) -> Value {
    eprintln!("{section} {dtype}: not run: {e}");
    json!({ "dtype": dtype.wgsl(), "not_run": e.to_string() })
}

/// One line of the bench table.
#[derive(Clone, Debug)]
pub struct Row {
    pub section: &'static str,
    pub case: String,
    pub seconds: f64,
    /// Throughput in `unit`.
    pub rate: f64,
    pub unit: &'static str,
    /// Fraction of the copy bandwidth (or of a peak, for compute-bound kernels).
    pub fraction: Option<f64>,
    pub note: String,
}

/// What a section hands back: table rows and its JSON value (stored under its name).
#[derive(Debug)]
pub struct SectionOutput {
    pub rows: Vec<Row>,
    pub json: Value,
}

/// Shared state for sections: the device, the copy figure measured at the start, and the mode.
#[derive(Debug)]
pub struct BenchContext<'a> {
    pub gpu: &'a Gpu,
    pub copy_gbps: f64,
    /// The probe `copy_gbps` came from, so no section has to measure it again.
    pub probe: CopyProbe,
    pub quick: bool,
}

/// A benchmark section of `bespoke bench`. Later crates add theirs to [`sections`].
pub trait Section {
    fn name(&self) -> &'static str;
    fn run(&self, ctx: &BenchContext<'_>) -> Result<SectionOutput, Error>;
    /// Whether `bespoke bench` runs it when no section is named (the lab runs only when asked for).
    fn by_default(&self) -> bool {
        true
    }
}

/// Every registered section, in the order they run.
pub fn sections() -> Vec<Box<dyn Section>> {
    let mut v: Vec<Box<dyn Section>> = vec![
        Box::new(copy::CopySection),
        Box::new(dense::DenseSection),
        Box::new(mm::MmSection),
        Box::new(lbm::LbmSection),
        Box::new(fv::FvSection),
        Box::new(scale::ScaleSection),
        Box::new(lab::LabSection::all()),
    ];
    // The lab's groups one by one (a GPU session's stages).
    for s in lab::LabSection::groups() {
        v.push(Box::new(s));
    }
    v
}

/// Probe settings for a run: the full 256 MiB (or the adapter's largest) unless `quick`.
pub fn probe_options(quick: bool) -> ProbeOptions {
    if quick {
        ProbeOptions {
            bytes: 64 << 20,
            warmup: 1,
            reps: 5,
        }
    } else {
        ProbeOptions::default()
    }
}

/// A progress bar on stderr when it is a terminal, hidden otherwise (logs stay clean).
pub fn progress_bar(len: u64) -> ProgressBar {
    let bar = if std::io::stderr().is_terminal() {
        ProgressBar::new(len)
    } else {
        ProgressBar::hidden()
    };
    bar.set_style(
        ProgressStyle::with_template("{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar
}

/// Device time of `iters` repetitions of `launches` (batches of up to 1024 timed runs): what criterion's
/// `iter_custom` wants from every GPU bench; `Duration::MAX` if a batch fails, so a broken run cannot look fast.
pub fn device_time(gpu: &Gpu, launches: &[&Launch], iters: u64) -> std::time::Duration {
    device_time_by(iters, |reps| gpu.time(launches, 0, reps))
}

/// [`device_time`] for anything that times `reps` repetitions itself (e.g. a lattice's step pairs).
pub fn device_time_by<E>(
    iters: u64,
    mut time: impl FnMut(usize) -> Result<Timing, E>,
) -> std::time::Duration {
    let mut total = 0.0;
    let mut left = iters as usize;
    while left > 0 {
        let reps = left.min(1024);
        total += time(reps)
            .map(|t| t.samples.iter().sum::<f64>())
            .unwrap_or(f64::NAN);
        left -= reps;
    }
    std::time::Duration::try_from_secs_f64(total).unwrap_or(std::time::Duration::MAX)
}

/// Err naming the first of `only` that is not a section (checked before a device is opened).
pub fn check_sections(only: &[String]) -> Result<(), Error> {
    let all = sections();
    if let Some(bad) = only
        .iter()
        .find(|n| !all.iter().any(|s| s.name() == n.as_str()))
    {
        let names: Vec<&str> = all.iter().map(|s| s.name()).collect();
        return Err(format!("no bench section `{bad}` (sections: {})", names.join(", ")).into());
    }
    Ok(())
}

/// Runs the copy probe, then every section (or those named in `only`); returns the table rows and the report.
pub fn run_all(gpu: &Gpu, quick: bool, only: &[String]) -> Result<(Vec<Row>, Value), Error> {
    check_sections(only)?;
    let mut all = sections();
    if only.is_empty() {
        all.retain(|s| s.by_default());
    } else {
        all.retain(|s| only.iter().any(|n| n == s.name()));
    }
    let bar = progress_bar(all.len() as u64 + 1);
    bar.set_message("copy-bandwidth probe");
    let probe = gpu.copy_bandwidth(&probe_options(quick))?;
    bar.inc(1);

    let ctx = BenchContext {
        gpu,
        copy_gbps: probe.gbps,
        probe: probe.clone(),
        quick,
    };
    let mut report = Map::new();
    report.insert("adapter".into(), adapter_json(gpu));
    report.insert("copy_gbps".into(), json!(probe.gbps));
    report.insert("copy_probe".into(), probe_json(&probe));
    report.insert("quick".into(), json!(quick));
    let mut rows = Vec::new();
    for s in &all {
        bar.set_message(s.name());
        let started = std::time::Instant::now();
        let out = s
            .run(&ctx)
            .map_err(|e| format!("bench section `{}`: {e}", s.name()))?;
        // Each section's rows as it ends (stderr; the whole table still goes to stdout at the end), so a run
        // stopped part-way still says what it measured and how long each section took.
        bar.suspend(|| {
            eprint!(
                "bench: section `{}` took {:.1} s\n{}",
                s.name(),
                started.elapsed().as_secs_f64(),
                format_table(&out.rows)
            )
        });
        rows.extend(out.rows);
        report.insert(s.name().into(), out.json);
        bar.inc(1);
    }
    bar.finish_and_clear();
    Ok((rows, Value::Object(report)))
}

/// The table `bespoke bench` prints.
pub fn format_table(rows: &[Row]) -> String {
    let mut s = format!(
        "{:<8} {:<36} {:>12} {:>12} {:<8} {:>9}  {}\n",
        "section", "case", "time", "rate", "unit", "fraction", "note"
    );
    for r in rows {
        let frac = r.fraction.map_or("-".into(), |f| format!("{:.3}", f));
        s += &format!(
            "{:<8} {:<36} {:>12} {:>12.3} {:<8} {:>9}  {}\n",
            r.section,
            r.case,
            format_seconds(r.seconds),
            r.rate,
            r.unit,
            frac,
            r.note
        );
    }
    s
}

/// Seconds with a unit that keeps three significant digits readable.
pub fn format_seconds(s: f64) -> String {
    if s >= 1.0 {
        format!("{s:.3} s")
    } else if s >= 1e-3 {
        format!("{:.3} ms", s * 1e3)
    } else {
        format!("{:.3} us", s * 1e6)
    }
}
