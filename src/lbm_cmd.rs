//! `bespoke lbm CASE …`: a thin adapter over bespoke-lbm's cases.

use std::path::PathBuf;

use bespoke::Error;
use bespoke::bench::{probe_options, progress_bar};
use bespoke::comm::{Comm, launched_size};
use bespoke::gpu::Gpu;
use bespoke::lbm::cases::{
    Case, CaseOptions, CollisionKind, Frames, VtkSeries, check_across, run_case,
};
use bespoke::lbm::distributed::Ranks;
use bespoke::lbm::output::{Quantity, write_outputs};
use bespoke::lbm::{Storage, Streaming};
use bespoke::report::adapter_json;
use clap::Args;
use serde_json::json;

use crate::json_out::{check_output, open_json, stop_on_signals, write_json};
use crate::ranks::RankSpec;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

#[derive(Args, Debug)]
pub struct LbmArgs {
    /// shear-wave, taylor-green, poiseuille, cavity, cylinder or mask.
    case: String,
    /// Lattice size, e.g. 256x256 (each case has a default).
    #[arg(long, value_name = "NXxNY")]
    size: Option<String>,
    /// Steps in all, counted from the case's start (steady-state cases: the most to run). A run resumed from a
    /// checkpoint at step s does the steps that remain, so rerunning a stopped command with --resume ends where
    /// it would have; a checkpoint at or past the end is refused.
    #[arg(long)]
    steps: Option<u64>,
    /// Relaxation rate ω ∈ (0, 2).
    #[arg(long, conflicts_with = "re", allow_negative_numbers = true)]
    omega: Option<f64>,
    /// Reynolds number (cavity, cylinder, mask): sets ω from the case's velocity and length.
    #[arg(long, allow_negative_numbers = true)]
    re: Option<f64>,
    /// The case's characteristic lattice velocity: shear-wave 0.01 and taylor-green 0.03 (amplitude), poiseuille
    /// 0.02 (centreline), cavity 0.1 (lid), cylinder and mask 0.05 (mean inflow). Lower is less compressible
    /// (errors ∝ Mach²) and takes proportionally more steps at a given --re.
    #[arg(long, allow_negative_numbers = true)]
    u: Option<f64>,
    /// bgk or trt (default per case).
    #[arg(long)]
    collision: Option<CollisionKind>,
    /// f32, or f16 (populations as (f − w)·2¹⁴: half the bytes). Default f32; a resumed run: the checkpoint's
    /// (another value is refused).
    #[arg(long)]
    storage: Option<Storage>,
    /// ab (two lattices) or inplace (AA pattern, half the memory). Default ab; a resumed run: the checkpoint's.
    #[arg(long)]
    streaming: Option<Streaming>,
    /// Obstacle mask for the `mask` case (dark pixels are walls).
    #[arg(long, value_name = "PNG")]
    mask: Option<PathBuf>,
    /// Mask case: walls where the mask's interpolated lightness crosses 50 %, with interpolated bounce-back
    /// (smooth walls from an anti-aliased image) instead of a staircase of dark pixels.
    #[arg(long)]
    interpolated_mask: bool,
    /// Smagorinsky subgrid (LES) model with this constant (typically 0.1–0.2): the viscosity grows with the local
    /// shear, ν = ν₀ + C² |S|, for flows the lattice does not resolve. The case's reference figures assume none.
    #[arg(long, value_name = "C", allow_negative_numbers = true)]
    smagorinsky: Option<f64>,
    /// Write the final velocity magnitude (or --png-quantity vorticity) as a PNG.
    #[arg(long, value_name = "FILE")]
    png: Option<PathBuf>,
    /// speed or vorticity, for --png and --frames.
    #[arg(long, default_value = "speed")]
    png_quantity: Quantity,
    /// Write a PNG frame into this folder every --frame-every steps (frame_<step>.png).
    #[arg(long, value_name = "DIR")]
    frames: Option<PathBuf>,
    #[arg(long, default_value_t = 1000)]
    frame_every: u64,
    /// Write the final fields (ρ, velocity, vorticity, cell type) for ParaView, as the name's extension says:
    /// `.pvti` a parallel XML image, each rank writing its own piece beside it (FILE_p0.vti, …; nothing is
    /// gathered: for runs across ranks), `.vti` one XML image, anything else a legacy `.vtk` file (the last two
    /// gathered onto rank 0).
    #[arg(long, value_name = "FILE")]
    vtk: Option<PathBuf>,
    /// Also write the fields every N steps as a time series beside --vtk (flow.pvti → flow_00000200.pvti …)
    /// with ParaView's collection flow.pvd listing every frame in the folder (a resumed run's join the earlier).
    #[arg(long, value_name = "N", requires = "vtk")]
    vtk_every: Option<u64>,
    /// Save the final state here (written to a temporary file, then renamed: a crash never leaves a torn
    /// checkpoint). SIGINT or SIGTERM stops the run after the step batch in flight and saves the state here.
    #[arg(long, value_name = "FILE")]
    checkpoint: Option<PathBuf>,
    /// Also save the state to --checkpoint every N steps (of the run's total count), keeping the latest.
    #[arg(long, value_name = "N", requires = "checkpoint")]
    checkpoint_every: Option<u64>,
    /// Continue from a checkpoint of the same case, to the same end (--steps counts from the case's start).
    #[arg(long, value_name = "FILE")]
    resume: Option<PathBuf>,
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Run across ranks: a count (slabs across the longer axis) or blocks along x and y (2x2). Without mpirun the
    /// ranks are threads of this process, each with its own device; under `mpirun -np N` (built with
    /// `--features mpi`) they are MPI ranks and this may give the blocks (their product must be N).
    #[arg(long, value_name = "N|PXxPY")]
    ranks: Option<String>,
    /// With ranks: exchange halos, then update every cell, instead of updating the inner cells while the halos
    /// travel (to measure what overlap gains).
    #[arg(long)]
    no_overlap: bool,
}

fn parse_size(s: &str) -> Result<(usize, usize), Error> {
    let bad = || format!("--size `{s}` is not like 256x128");
    let (a, b) = s.split_once(['x', 'X']).ok_or_else(bad)?;
    Ok((
        a.trim().parse().map_err(|_| bad())?,
        b.trim().parse().map_err(|_| bad())?,
    ))
}

/// Runs an `lbm` case: arguments, the mask image and a checkpoint to resume are checked first (bespoke-lbm's
/// `cases::check`), the devices are opened after.
pub fn run(a: LbmArgs) -> Result<(), Error> {
    let spec = a.ranks.as_deref().map(RankSpec::parse).transpose()?;
    if a.no_overlap && spec.is_none() && launched_size().is_none_or(|n| n < 2) {
        return Err("--no-overlap applies to runs across ranks (--ranks, or mpirun)".into());
    }
    if a.checkpoint_every == Some(0) {
        return Err("--checkpoint-every must be at least 1".into());
    }
    if a.vtk_every == Some(0) {
        return Err("--vtk-every must be at least 1".into());
    }
    let case = Case::parse(&a.case, a.mask.as_deref())?;
    if a.interpolated_mask && !matches!(case, Case::Mask(_)) {
        return Err("--interpolated-mask applies to the mask case only".into());
    }
    check_output("PNG", a.png.as_deref())?;
    check_output("VTK file", a.vtk.as_deref())?;
    if let Some(dir) = &a.frames {
        if a.frame_every == 0 {
            return Err("--frame-every must be at least 1".into());
        }
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create the frame folder {}: {e}", dir.display()))?;
    }
    // SIGINT and SIGTERM raise the flag; the run stops after the batch in flight, saving to --checkpoint.
    let stop = Arc::new(AtomicBool::new(false));
    let opts = case_options(&a, &stop)?;
    // The lattice must cut into the ranks' blocks: refused here, before any rank opens a device.
    check_across(&case, &opts, crate::ranks::planned(spec)?)?;
    stop_on_signals(&stop)?;
    crate::ranks::run(spec, |gpu, comm| run_on(gpu, &a, &case, &stop, spec, comm))
}

/// The case options the arguments ask for, on one domain (each rank adds its communicator).
fn case_options(a: &LbmArgs, stop: &Arc<AtomicBool>) -> Result<CaseOptions, Error> {
    Ok(CaseOptions {
        size: a.size.as_deref().map(parse_size).transpose()?,
        steps: a.steps,
        omega: a.omega,
        re: a.re,
        u: a.u,
        collision: a.collision,
        storage: a.storage,
        streaming: a.streaming,
        resume: a.resume.clone(),
        interpolated_mask: a.interpolated_mask,
        smagorinsky: a.smagorinsky,
        vtk_series: a
            .vtk
            .clone()
            .zip(a.vtk_every)
            .map(|(path, every)| VtkSeries { path, every }),
        frames: a.frames.clone().map(|dir| Frames {
            dir,
            every: a.frame_every,
            quantity: a.png_quantity,
        }),
        checkpoint: a.checkpoint.clone(),
        checkpoint_every: a.checkpoint_every,
        stop: Some(stop.clone()),
        ranks: None,
    })
}

fn run_on(
    gpu: &Gpu,
    a: &LbmArgs,
    case: &Case,
    stop: &Arc<AtomicBool>,
    spec: Option<RankSpec>,
    comm: Option<Rc<dyn Comm>>,
) -> Result<(), Error> {
    let root = comm.as_ref().is_none_or(|c| c.rank() == 0);
    let quantity = a.png_quantity;
    let opts = CaseOptions {
        ranks: comm.map(|comm| Ranks {
            grid: spec.and_then(|s| s.grid),
            overlap: !a.no_overlap,
            ..Ranks::new(comm)
        }),
        ..case_options(a, stop)?
    };
    let json_file = if root {
        open_json(a.json.as_deref())?
    } else {
        None
    };
    let rank = opts
        .ranks
        .as_ref()
        .map_or(String::new(), |r| format!("rank {}: ", r.comm.rank()));
    // The yardstick the root prints and writes; the other ranks print nothing and need none (their probes would
    // only compete with the root's for the one device, and cost each rank a second or more).
    let probe = if root {
        Some(bespoke::phase(format!("{rank}the copy probe"), || {
            gpu.copy_bandwidth(&probe_options(true))
        })?)
    } else {
        None
    };
    let bar = if root {
        progress_bar(1)
    } else {
        indicatif::ProgressBar::hidden()
    };
    bar.set_message(case.name());
    let mut started = false;
    let set_up = std::time::Instant::now();
    let mut r = run_case(gpu, case, &opts, &mut |done, total| {
        if !started {
            bespoke::phase_since(
                format!("{rank}set-up (lattice, launch shape, state)"),
                set_up,
            );
        }
        if !started && root && a.resume.is_some() {
            // Printed beside the bar, which may be hidden (not a terminal).
            bar.suspend(|| {
                eprintln!(
                    "resuming at step {done} of {total}: {} steps remain",
                    total - done
                )
            });
        }
        started = true;
        bar.set_length(total);
        bar.set_position(done);
    })?;
    bar.finish_and_clear();

    if let Some(p) = &a.checkpoint {
        // Every rank takes part (the state is gathered); rank 0 writes.
        r.lattice.checkpoint(p, &r.checkpoint_meta())?;
    }
    // Every rank takes part: the fields read from the device once for both files, a parallel image's pieces
    // or the whole domain gathered onto rank 0 (which alone writes the PNG and a one-file image).
    if a.vtk.is_some() || a.png.is_some() {
        let own = r.lattice.own_fields()?;
        write_outputs(
            &mut r.lattice,
            own,
            a.png.as_deref().map(|p| (p, quantity)),
            a.vtk.as_deref(),
        )?;
    }
    let Some(probe) = probe else {
        return Ok(()); // not the root
    };
    let cfg = r.lattice.config().clone();
    let bytes_per_cell = r.lattice.bytes_per_cell();
    let mlups = r.mlups();
    let gbps = mlups * 1e6 * bytes_per_cell as f64 / 1e9;
    let les = if cfg.smagorinsky > 0.0 {
        format!(", Smagorinsky C = {}", cfg.smagorinsky)
    } else {
        String::new()
    };
    bespoke::say!(
        "{} {}x{} {} {} {} (ω = {}{les}, u = {}): {} steps in {:.2} s, {:.1} MLUPS, {:.2} GB/s at {} B/cell ({:.2} of copy {:.2} GB/s)",
        r.case,
        cfg.nx,
        cfg.ny,
        cfg.storage.name(),
        cfg.streaming.name(),
        cfg.collision.name(),
        cfg.collision.omega(),
        r.u,
        r.steps,
        r.seconds,
        mlups,
        gbps,
        bytes_per_cell,
        gbps / probe.gbps,
        probe.gbps
    );
    bespoke::say!(
        "  step {}{}",
        r.lattice.step_shape().describe(),
        if r.lattice.rounds_f16_explicitly() {
            ", f16 stores rounded by the kernel (the device's own conversion does not round to nearest)"
        } else {
            ""
        }
    );
    let dist = r.lattice.decomposition().map(|d| {
        let x = r.lattice.exchange_stats().unwrap_or_default();
        let per = |v: f64| {
            if x.exchanges > 0 {
                v / x.exchanges as f64
            } else {
                0.0
            }
        };
        json!({
            "ranks": d.ranks(),
            "decomposition": d.describe(),
            "overlap": r.lattice.overlapped(),
            "transport": r.lattice.comm().map(|c| c.kind()),
            "exchange_bytes_per_step_rank0": per(x.bytes_sent as f64),
            "exchange_seconds_per_step_rank0": per(x.seconds),
        })
    });
    if let Some(d) = &dist {
        bespoke::say!(
            "  ranks {} ({} blocks, {}, overlap {}): rank 0 exchanges {:.0} B per step in {:.3} ms",
            d["ranks"],
            d["decomposition"].as_str().unwrap_or(""),
            d["transport"].as_str().unwrap_or(""),
            d["overlap"],
            d["exchange_bytes_per_step_rank0"].as_f64().unwrap_or(0.0),
            1e3 * d["exchange_seconds_per_step_rank0"].as_f64().unwrap_or(0.0)
        );
    }
    for (k, v) in &r.metrics {
        bespoke::say!("  {k} = {v}");
    }
    for n in &r.notes {
        bespoke::say!("  note: {n}");
    }
    write_json(
        json_file,
        &json!({
            "case": r.case,
            "nx": cfg.nx,
            "ny": cfg.ny,
            "steps": r.steps,
            "steps_total": r.lattice.steps_done(),
            "step_shape": r.lattice.step_shape(),
            "f16_rounded_explicitly": r.lattice.rounds_f16_explicitly(),
            "storage": cfg.storage.name(),
            "streaming": cfg.streaming.name(),
            "collision": cfg.collision.name(),
            "omega": cfg.collision.omega(),
            "smagorinsky": cfg.smagorinsky,
            "u": r.u,
            "seconds": r.seconds,
            "mlups": mlups,
            "bytes_per_cell": bytes_per_cell,
            "gbps": gbps,
            "copy_gbps": probe.gbps,
            "copy_fraction": gbps / probe.gbps,
            "metrics": r.metrics,
            "notes": r.notes,
            "adapter": adapter_json(gpu),
            "ranks": dist,
        }),
    )
}
