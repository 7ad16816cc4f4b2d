//! The `bespoke` command line: thin adapters over the crates' public APIs.
#![deny(clippy::print_stdout)] // stdout through `bespoke::say!` (src/out.rs): a closed pipe must not panic

mod fv_cmd;
mod json_out;
mod lbm_cmd;
mod mm_cmd;
mod ranks;
mod scale_cmd;

use std::path::PathBuf;
use std::process::ExitCode;

use bespoke::Error;
use bespoke::bench::{check_sections, format_seconds, format_table, probe_options, run_all};
use bespoke::gpu::{Gpu, GpuOptions};
use bespoke::report::{adapter_json, capabilities_json, probe_json};
use clap::{Parser, Subcommand};
use serde_json::json;

/// A count that must be at least one (repetitions, rounds, steps per batch): zero is refused by name instead of
/// timing nothing or being raised silently.
pub(crate) fn count<T: std::str::FromStr + From<u8> + PartialOrd>(s: &str) -> Result<T, String> {
    match s.trim().parse::<T>() {
        Ok(n) if n >= T::from(1) => Ok(n),
        Ok(_) => Err("must be at least 1".into()),
        Err(_) => Err(format!("`{s}` is not a whole number")),
    }
}

#[derive(Parser, Debug)]
#[command(
    name = "bespoke",
    version,
    about = "Portable GPU compute kernels on wgpu, measured against the copy bandwidth"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Adapter, backend, features, limits and the measured copy bandwidth.
    Info {
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Matrix multiplication: kernels specialised to constant operators (PyFR's), the dense GEMM and its tile model,
    /// and the popcount GEMM (linkage disequilibrium).
    Mm {
        #[command(subcommand)]
        cmd: mm_cmd::MmCommand,
    },
    /// Finite volume on tetrahedral meshes: diffusion runs and ordering × kernel benchmarks.
    Fv {
        #[command(subcommand)]
        cmd: fv_cmd::FvCommand,
    },
    /// D2Q9 lattice Boltzmann cases: validation against analytic and published results, and throughput.
    Lbm(Box<lbm_cmd::LbmArgs>),
    /// Weak and strong scaling of the lattice across ranks (--ranks N threads, or under mpirun).
    Scale(scale_cmd::ScaleArgs),
    /// List every adapter wgpu can see (honours WGPU_BACKEND), best first, with its PCI bus id: ranks on a machine take its GPUs in bus order.
    Adapters,
    /// Run every benchmark section and print one table.
    Bench {
        /// Smaller problems and fewer repetitions.
        #[arg(long)]
        quick: bool,
        /// Also write the results as JSON to this file.
        #[arg(long, value_name = "FILE")]
        json: Option<PathBuf>,
        /// Run only this section (repeatable; default: all but `lab`).
        #[arg(long, value_name = "NAME")]
        section: Vec<String>,
    },
    /// The lab: every bandwidth-bound kernel under its candidate launch shapes and ablations, one table with each
    /// row's fraction of copy and ratio to the default (`bespoke bench --section lab`).
    Lab {
        /// Smaller problems and fewer repetitions (CI on lavapipe).
        #[arg(long)]
        quick: bool,
        /// Also write the results as JSON to this file.
        #[arg(long, value_name = "FILE")]
        json: Option<PathBuf>,
    },
}

pub(crate) fn open_gpu() -> Result<Gpu, Error> {
    Ok(Gpu::with_options(GpuOptions {
        persist_pipeline_cache: true,
        ..bespoke::gpu_options()
    })?)
}

fn info(json_out: bool) -> Result<(), Error> {
    let gpu = open_gpu()?;
    let probe = gpu.copy_bandwidth(&probe_options(false))?;
    // How the device's pack2x16float rounds (the f16 lattices' stores: rounded explicitly where not to nearest);
    // a backend without the pack says why.
    let pack = gpu.rounds_f16_to_nearest_even();
    if json_out {
        let mut v = json!({
            "adapter": adapter_json(&gpu),
            "copy_gbps": probe.gbps,
            "copy_probe": probe_json(&probe),
            "f16_pack_to_nearest_even": pack.as_ref().ok(),
        });
        if let (Some(o), Some(c)) = (v.as_object_mut(), capabilities_json(&gpu).as_object()) {
            o.extend(c.clone());
        }
        bespoke::say!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        let i = gpu.info();
        let l = &i.limits;
        bespoke::say!("adapter        {}", i.name);
        bespoke::say!("backend        {} ({})", i.backend, i.device_type);
        bespoke::say!("driver         {} / {}", i.driver, i.driver_info);
        if !i.pci_bus_id.is_empty() {
            bespoke::say!("pci bus        {}", i.pci_bus_id);
        }
        bespoke::say!("features       {}", i.features.join(" "));
        if !gpu.emulation().is_empty() {
            bespoke::say!("emulating      {}", gpu.emulation());
        }
        bespoke::say!(
            "buffer         max {} B, storage binding max {} B",
            l.max_buffer_size,
            l.max_storage_buffer_binding_size
        );
        bespoke::say!(
            "workgroup      {} invocations, size {:?}, {} B shared, {} per dimension",
            l.max_compute_invocations_per_workgroup,
            l.max_compute_workgroup_size,
            l.max_compute_workgroup_storage_size,
            l.max_compute_workgroups_per_dimension
        );
        bespoke::say!(
            "subgroup       {}..{}",
            l.subgroup_min_size,
            l.subgroup_max_size
        );
        bespoke::say!(
            "f16 pack       {}",
            match &pack {
                Ok(true) => "rounds to nearest even".to_string(),
                Ok(false) =>
                    "rounds otherwise (f16 lattices round each store themselves)".to_string(),
                Err(e) => format!("not measured: {e}"),
            }
        );
        bespoke::say!(
            "copy bandwidth {:.2} GB/s ({} MiB copied, {} MiB read+written, median {} over {} runs, {}, {})",
            probe.gbps,
            probe.bytes >> 20,
            (2 * probe.bytes) >> 20,
            format_seconds(probe.median_seconds),
            probe.reps,
            probe.variant,
            probe.timing.as_str()
        );
    }
    gpu.save_pipeline_cache()?;
    Ok(())
}

fn bench(quick: bool, json_path: Option<PathBuf>, only: &[String]) -> Result<(), Error> {
    // Check the output first: a bad path should fail now, not after minutes of benchmarking.
    let json = json_out::open_json(json_path.as_deref())?;
    check_sections(only)?;
    let gpu = open_gpu()?;
    let (rows, report) = run_all(&gpu, quick, only)?;
    let info = gpu.info();
    bespoke::say!(
        "adapter: {} ({}, {}), copy bandwidth {:.2} GB/s",
        info.name,
        info.backend,
        info.driver_info,
        report["copy_gbps"]
    );
    bespoke::out::write(format_args!("{}", format_table(&rows)));
    json_out::write_json(json, &report)?;
    gpu.save_pipeline_cache()?;
    Ok(())
}

/// Set (to anything): the command line is parsed and its device-free names checked (bench sections), then the
/// process ends without running anything. `benches/gpu/check_session.sh` runs every `bespoke` command of the
/// GPU session's planned calls through it, so that a renamed or refused argument fails in CI, not on a lent GPU.
const ARGS_ONLY: &str = "BESPOKE_ARGS_ONLY";

fn main() -> ExitCode {
    let cli = Cli::parse();
    if std::env::var_os(ARGS_ONLY).is_some() {
        let checked = match &cli.command {
            Command::Bench { section, .. } => check_sections(section),
            _ => Ok(()),
        };
        return match checked {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::FAILURE
            }
        };
    }
    let result = match cli.command {
        Command::Info { json } => info(json),
        Command::Mm { cmd } => mm_cmd::run(cmd),
        Command::Fv { cmd } => fv_cmd::run(cmd),
        Command::Lbm(args) => lbm_cmd::run(*args),
        Command::Scale(args) => scale_cmd::run(args),
        Command::Adapters => {
            for a in bespoke::gpu::list_adapters() {
                let bus = if a.pci_bus_id.is_empty() {
                    "-"
                } else {
                    &a.pci_bus_id
                };
                bespoke::say!(
                    "{:<8} {:<14} {:<14} {} ({})",
                    a.backend,
                    a.device_type,
                    bus,
                    a.name,
                    a.driver
                );
            }
            Ok(())
        }
        Command::Bench {
            quick,
            json,
            section,
        } => bench(quick, json, &section),
        Command::Lab { quick, json } => bench(quick, json, &["lab".to_owned()]),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            let mut src = e.source();
            while let Some(s) = src {
                eprintln!("  caused by: {s}");
                src = s.source();
            }
            ExitCode::FAILURE
        }
    }
}
