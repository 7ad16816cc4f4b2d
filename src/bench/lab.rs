//! `bespoke lab` (the `lab` section, run only when named): one run that answers the bandwidth questions of a GPU
//! at once (docs/gpu.md, "The lab"). Each kernel runs under the candidate launch shapes and under ablations that
//! take one cost out, each row with its fraction of the copy probe and its ratio to the default's time:
//! - copy: each copy variant at the probe's size (which walk the adapter likes);
//! - lbm: the bench lattice (f32 and f16, two lattices and in place) at every step workgroup, with several cells
//!   per invocation, with one buffer for all directions, without collision, without pulls, with the wrap by mask,
//!   and with a flag field read (channel walls);
//! - mm: the shipped operators at the lab's N (2^19 on a GPU), f32 and f64: the tuner's choice against its access floor (its
//!   loads and stores alone, the operator as a copy of its bytes) and the copy floor;
//! - fv: the `fv` section's mesh, METIS-ordered: every gather layout at every workgroup size and without the
//!   gather (its values, indices, x and y streamed, no neighbour read), and the block-cached kernel.

use bespoke_fv::bench::{CONFIGS as FV_CONFIGS, time_shapes};
use bespoke_fv::kernel::{KernelKind, Shape as FvShape, WG as FV_WG};
use bespoke_fv::ordering::{OrderingKind, order};
use bespoke_gpu::rng::{Rng, seeded};
use bespoke_gpu::{CopyVariant, GridLayout, Launch};
use bespoke_lbm::bench::{StepVariant, bench_step_variants};
use bespoke_lbm::kernel::{Ablation, WG};
use bespoke_lbm::{Storage, Streaming};
use bespoke_mm::DType;
use bespoke_mm::specialise::{Operator, Panel, TuneOptions, bench_operator, parse_mtx};
use serde_json::{Value, json};

use super::mm::MATRICES;
use super::sizes::Sizes;
use super::{BenchContext, Row, Section, SectionOutput};
use crate::Error;

/// The lab, or one of its groups (`lab-copy`, `lab-lbm`, `lab-mm`, `lab-fv`: a GPU session runs them as stages of
/// their own, each under its own time limit, so that one group's overrun does not cost the others' rows).
#[derive(Debug)]
pub struct LabSection {
    name: &'static str,
    groups: &'static [&'static str],
}

/// The lab's groups, in the order the whole lab runs them.
pub const LAB_GROUPS: [&str; 4] = ["copy", "lbm", "mm", "fv"];

impl LabSection {
    /// Every group.
    pub fn all() -> Self {
        Self {
            name: "lab",
            groups: &LAB_GROUPS,
        }
    }
    /// The sections of one group each.
    pub fn groups() -> Vec<Self> {
        vec![
            Self {
                name: "lab-copy",
                groups: &["copy"],
            },
            Self {
                name: "lab-lbm",
                groups: &["lbm"],
            },
            Self {
                name: "lab-mm",
                groups: &["mm"],
            },
            Self {
                name: "lab-fv",
                groups: &["fv"],
            },
        ]
    }
}

/// The operators' panel width in the lab on a GPU (the goal size).
pub const LAB_MM_N_GPU: usize = 1 << 19;

impl Section for LabSection {
    fn name(&self) -> &'static str {
        self.name
    }

    fn by_default(&self) -> bool {
        false
    }

    fn run(&self, ctx: &BenchContext<'_>) -> Result<SectionOutput, Error> {
        let mut lab = Lab::default();
        for group in self.groups {
            match *group {
                "copy" => copy_rows(ctx, &mut lab)?,
                "lbm" => lbm_rows(ctx, &mut lab)?,
                "mm" => mm_rows(ctx, &mut lab)?,
                _ => fv_rows(ctx, &mut lab)?,
            }
        }
        Ok(SectionOutput {
            rows: lab.rows,
            json: json!({ "runs": lab.runs }),
        })
    }
}

#[derive(Default)]
struct Lab {
    rows: Vec<Row>,
    runs: Vec<Value>,
}

impl Lab {
    /// A row that did not run (`e` says why: a shape the adapter cannot bind or launch), printed as it happens
    /// and kept in the JSON with its reason.
    fn not_run(
        &mut self,
        group: &'static str,
        case: String,
        variant: String,
        e: &dyn std::fmt::Display,
    ) {
        eprintln!("lab: {group} {case} {variant}: not run: {e}");
        self.runs.push(json!({
            "group": group, "case": case, "variant": variant, "not_run": e.to_string(),
        }));
        self.rows.push(Row {
            section: group,
            case: format!("{case} {variant}"),
            seconds: f64::NAN,
            rate: f64::NAN,
            unit: "GB/s",
            fraction: None,
            note: format!("not run: {e}"),
        });
    }

    /// One measurement: `bytes` moved in `seconds`, against the default's seconds.
    #[allow(clippy::too_many_arguments)]
    fn push(
        &mut self,
        ctx: &BenchContext<'_>,
        group: &'static str,
        case: String,
        variant: String,
        seconds: f64,
        bytes: f64,
        default_seconds: f64,
        note: &str,
    ) {
        let gbps = bytes / seconds / 1e9;
        let fraction = gbps / ctx.copy_gbps;
        let ratio = seconds / default_seconds;
        // Each row as it is measured, so that a run cut short (a GPU session's time limit) keeps what it had.
        eprintln!(
            "lab: {group} {case} {variant}: {:.4} ms, {gbps:.1} GB/s, {fraction:.3} of copy, ×{ratio:.3} the \
             default's time{note}",
            seconds * 1e3
        );
        self.rows.push(Row {
            section: group,
            case: format!("{case} {variant}"),
            seconds,
            rate: gbps,
            unit: "GB/s",
            fraction: Some(fraction),
            note: format!("×{ratio:.3} the default's time{note}"),
        });
        self.runs.push(json!({
            "group": group, "case": case, "variant": variant, "seconds": seconds, "bytes": bytes,
            "gbps": gbps, "copy_fraction": fraction, "ratio_to_default": ratio, "note": note,
        }));
    }
}

fn copy_rows(ctx: &BenchContext<'_>, lab: &mut Lab) -> Result<(), Error> {
    let gpu = ctx.gpu;
    let n = (ctx.probe.bytes / 16) as usize;
    let src = gpu.alloc_filled::<[f32; 4]>(n, [1.0, 2.0, 3.0, 4.0])?;
    let dst = gpu.alloc::<[f32; 4]>(n)?;
    let mut times = Vec::new();
    for v in CopyVariant::CANDIDATES {
        let launches = gpu.copy_launches(&src, &dst, v)?;
        let refs: Vec<&Launch> = launches.iter().collect();
        times.push((v, gpu.time(&refs, 2, reps(ctx))?.median()));
    }
    let default = ctx.probe.median_seconds;
    for (v, t) in times {
        lab.push(
            ctx,
            "copy",
            format!("{} MiB", ctx.probe.bytes >> 20),
            v.name(),
            t,
            2.0 * ctx.probe.bytes as f64,
            default,
            &format!(" (the probe's {})", ctx.probe.variant),
        );
    }
    Ok(())
}

fn reps(ctx: &BenchContext<'_>) -> usize {
    if ctx.quick { 3 } else { 10 }
}

/// The lattice variants the lab times: every step workgroup the adapter launches, 2 and 4 cells per invocation
/// at the default workgroup and at 256, one buffer for all directions (bound once, as a CUDA code indexes one
/// allocation) at the default workgroup and at 256, then the default workgroup without collision, without pulls
/// (every population from the cell's own slots), with the mask wrap, reading a flag field, and in the split 1-D grid (a dispatch per 65 535 workgroups, each a barrier apart,
/// as every step ran until 2026-11-26) instead of one 2-D dispatch, (f16 only) with every store rounded
/// explicitly to its nearest f16 (`exact-f16`), and with every other step walking the lattice backwards
/// (`alternate`, `StepShape::alternate`) at the default workgroup and at 512, the latter also with one buffer.
pub fn lbm_variants(workgroups: &[u32]) -> Vec<StepVariant> {
    let mut v: Vec<StepVariant> = workgroups.iter().map(|&w| plain_variant(w)).collect();
    for workgroup in [WG, 256].into_iter().filter(|w| workgroups.contains(w)) {
        for cells in bespoke_lbm::shape::CELL_CANDIDATES
            .into_iter()
            .filter(|&c| c > 1)
        {
            v.push(StepVariant {
                cells,
                ..plain_variant(workgroup)
            });
        }
    }
    for workgroup in [WG, 256].into_iter().filter(|w| workgroups.contains(w)) {
        v.push(StepVariant {
            one_buffer: true,
            ..plain_variant(workgroup)
        });
    }
    for ablation in [Ablation::NoCollision, Ablation::NoPull, Ablation::MaskWrap] {
        v.push(StepVariant {
            ablation: Some(ablation),
            ..plain_variant(WG)
        });
    }
    v.push(StepVariant {
        walls: true,
        ..plain_variant(WG)
    });
    v.push(StepVariant {
        grid: GridLayout::Split,
        ..plain_variant(WG)
    });
    // f16 only: each stored value rounded to its nearest f16 before the pack, as on a device whose pack rounds
    // otherwise (toward zero, as AMD's pack instruction does): what such a device pays, here where the bits are the default's.
    v.push(StepVariant {
        exact_f16: true,
        ..plain_variant(WG)
    });
    for workgroup in [WG, 512].into_iter().filter(|w| workgroups.contains(w)) {
        v.push(StepVariant {
            alternate: true,
            ..plain_variant(workgroup)
        });
    }
    if workgroups.contains(&512) {
        v.push(StepVariant {
            alternate: true,
            one_buffer: true,
            ..plain_variant(512)
        });
    }
    v
}

/// The lattice step at `workgroup`, in every other respect the default.
fn plain_variant(workgroup: u32) -> StepVariant {
    StepVariant {
        workgroup,
        cells: 1,
        grid: GridLayout::Rows,
        ablation: None,
        walls: false,
        one_buffer: false,
        exact_f16: false,
        alternate: false,
    }
}

fn lbm_rows(ctx: &BenchContext<'_>, lab: &mut Lab) -> Result<(), Error> {
    let gpu = ctx.gpu;
    // A power of two, so the mask wrap applies.
    let side = Sizes::of(gpu.is_cpu(), ctx.quick)
        .lbm_side
        .next_power_of_two();
    let variants = lbm_variants(&bespoke_lbm::shape::candidates(gpu));
    for storage in [Storage::F32, Storage::F16] {
        let variants: Vec<StepVariant> = variants
            .iter()
            .copied()
            .filter(|v| !v.exact_f16 || storage == Storage::F16)
            .collect();
        for streaming in [Streaming::Ab, Streaming::InPlace] {
            lbm_case(ctx, lab, side, storage, streaming, &variants)?;
            // Where one buffer for all directions does not fit at the lab's side (f32 at 8192² past a 2 GiB
            // binding), it is compared with the default at the largest side where it fits.
            let one: Vec<StepVariant> = variants.iter().copied().filter(|v| v.one_buffer).collect();
            match bespoke_lbm::bench::one_buffer_side(gpu, side, storage) {
                Some(s) if s < side && !one.is_empty() => {
                    let plain = StepVariant {
                        one_buffer: false,
                        alternate: false,
                        ..one[0]
                    };
                    let at: Vec<StepVariant> = std::iter::once(plain).chain(one).collect();
                    lbm_case(ctx, lab, s, storage, streaming, &at)?;
                }
                _ => {}
            }
            // At a quarter of the side (2048² on a GPU, the LBM tuner's own size), where a step's reads are a
            // few times a GPU's L2 cache: the default against every other step walking backwards
            // (`StepShape::alternate`), which begins each step on what the step before left in the cache.
            let small: Vec<StepVariant> = std::iter::once(plain_variant(WG))
                .chain(variants.iter().copied().filter(|v| v.alternate))
                .collect();
            lbm_case(ctx, lab, side / 4, storage, streaming, &small)?;
        }
    }
    Ok(())
}

/// The lab's rows of one lattice: each of `variants` at `side`, against the first.
fn lbm_case(
    ctx: &BenchContext<'_>,
    lab: &mut Lab,
    side: usize,
    storage: Storage,
    streaming: Streaming,
    variants: &[StepVariant],
) -> Result<(), Error> {
    let gpu = ctx.gpu;
    let case = format!("{side}² {} {}", storage.name(), streaming.name());
    // The first variant's time; where it did not run (nine bindings a side past the adapter's storage buffers
    // per kernel), the first that did, named in each row's note.
    let mut default: Option<(f64, String)> = None;
    bench_step_variants(
        gpu,
        side,
        storage,
        streaming,
        variants,
        reps(ctx),
        &mut |v, b| match b {
            Ok(b) => {
                let (base, base_name) = default
                    .get_or_insert_with(|| (b.seconds_per_step, v.name()))
                    .clone();
                let bytes = (b.nx * b.ny * b.bytes_per_cell) as f64;
                let against = if base_name == variants[0].name() {
                    String::new()
                } else {
                    format!(", against {base_name}: {} did not run", variants[0].name())
                };
                lab.push(
                    ctx,
                    "lbm",
                    case.clone(),
                    v.name(),
                    b.seconds_per_step,
                    bytes,
                    base,
                    &format!(", {:.0} MLUPS{against}", b.mlups),
                );
            }
            Err(e) => lab.not_run("lbm", case.clone(), v.name(), &e),
        },
    );
    Ok(())
}

fn mm_rows(ctx: &BenchContext<'_>, lab: &mut Lab) -> Result<(), Error> {
    let gpu = ctx.gpu;
    let sizes = Sizes::of(gpu.is_cpu(), ctx.quick);
    let n = if gpu.is_cpu() || ctx.quick {
        sizes.mm_n
    } else {
        LAB_MM_N_GPU
    };
    let opts = TuneOptions {
        reps: if ctx.quick { 2 } else { 5 },
        ..Default::default()
    };
    // f64 too where the adapter has it, but in quick runs (the goals are in both precisions); where it
    // does not, a row says so.
    let dtypes = [DType::F32, DType::F64]
        .into_iter()
        .filter(|d| !(ctx.quick && *d == DType::F64));
    for dtype in dtypes {
        if let Err(e) = dtype.require(gpu, "the lab's operator rows") {
            lab.not_run("mm", dtype.to_string(), "every operator".into(), &e);
            continue;
        }
        for (name, text) in &MATRICES[..sizes.mm_operators.min(MATRICES.len())] {
            mm_operator_rows(ctx, lab, name, text, dtype, n, &opts)?;
        }
    }
    Ok(())
}

/// One operator's rows: the tuner's choice, its access floor, the copy floor, dense.
fn mm_operator_rows(
    ctx: &BenchContext<'_>,
    lab: &mut Lab,
    name: &str,
    text: &str,
    dtype: DType,
    n: usize,
    opts: &TuneOptions,
) -> Result<(), Error> {
    let gpu = ctx.gpu;
    let op: Operator = parse_mtx(text, name)?;
    let beta = op.beta_hint.unwrap_or(0.0);
    let r = match dtype {
        DType::F32 => bench_operator::<f32>(gpu, &op, beta, Panel::packed(n), opts, 1)?,
        DType::F64 => bench_operator::<f64>(gpu, &op, beta, Panel::packed(n), opts, 1)?,
    };
    let case = format!("{name} N={n} {dtype}");
    let note = format!(
        ", {:.2} of a same-size copy ({:.0} GB/s)",
        r.gbps / r.same_size_copy_gbps,
        r.same_size_copy_gbps
    );
    for (variant, seconds) in [
        (format!("choice {}", r.variant), r.seconds),
        ("access floor".to_owned(), r.floor_seconds),
        ("copy floor".to_owned(), r.copy_floor_seconds),
    ] {
        lab.push(
            ctx,
            "mm",
            case.clone(),
            variant,
            seconds,
            r.bytes,
            r.seconds,
            &note,
        );
    }
    if let Some(d) = r.dense_seconds {
        lab.push(
            ctx,
            "mm",
            case.clone(),
            "dense".into(),
            d,
            r.bytes,
            r.seconds,
            &note,
        );
    }
    Ok(())
}

fn fv_rows(ctx: &BenchContext<'_>, lab: &mut Lab) -> Result<(), Error> {
    let gpu = ctx.gpu;
    let cubes = Sizes::of(gpu.is_cpu(), ctx.quick).fv_cubes;
    let op = super::fv::box_operator(cubes)?;
    let block = super::fv::BLOCK;
    let (perm, _) = order(
        &op,
        OrderingKind::Metis {
            block: block as usize,
        },
    )?;
    let op = perm.apply_operator(&op);
    let n = op.n();
    let mut rng = seeded(7);
    let x: Vec<f64> = (0..n).map(|_| rng.random::<f64>()).collect();
    let mesh = FvMesh { op: &op, x: &x };
    let tets = |several: bool| {
        bespoke_fv::diffusion::TET_CANDIDATES
            .into_iter()
            .filter(move |&t| t > 1 && several)
            .map(|tets| FvShape {
                tets,
                ..Default::default()
            })
    };
    for (name, layout) in FV_CONFIGS {
        let kind = if name == "gather" {
            KernelKind::Gather
        } else {
            KernelKind::BlockCached { block }
        };
        let mut shapes: Vec<FvShape> = bespoke_fv::diffusion::candidates(gpu, kind)
            .into_iter()
            .map(|workgroup| FvShape {
                workgroup,
                no_gather: false,
                ..Default::default()
            })
            .collect();
        if kind == KernelKind::Gather {
            // The ablations: no neighbour reads; no index reads (neighbours near the tet); neither.
            for (no_gather, no_index) in [(true, false), (false, true), (true, true)] {
                shapes.push(FvShape {
                    workgroup: FV_WG,
                    no_gather,
                    no_index,
                    ..Default::default()
                });
            }
            shapes.extend(tets(!layout.four_tets()));
        }
        shapes.push(FvShape {
            grid: GridLayout::Split,
            ..Default::default()
        });
        // Every other step walking the tets backwards (`Shape::alternate`): each step begins on the operator
        // rows the step before ended on, which the L2 cache still holds.
        shapes.push(FvShape {
            alternate: true,
            ..Default::default()
        });
        fv_shapes::<f32>(ctx, lab, &mesh, kind, (name, layout), &shapes)?;
    }
    // f64 (where the adapter has it): the gather kernel in each f64 layout, its default shape and the tets the
    // tuner tries, against the f64 default; the bytes are f64's.
    if let Err(e) = DType::F64.require(gpu, "the lab's FV rows") {
        lab.not_run("fv", "f64".into(), "every layout".into(), &e);
        return Ok(());
    }
    for (name, layout) in FV_CONFIGS {
        if name != "gather" || layout == bespoke_fv::kernel::Layout::Texture {
            continue;
        }
        let shapes: Vec<FvShape> = std::iter::once(FvShape::default())
            .chain(tets(!layout.four_tets()))
            .collect();
        fv_shapes::<f64>(ctx, lab, &mesh, KernelKind::Gather, (name, layout), &shapes)?;
    }
    Ok(())
}

/// The lab's FV mesh (METIS-ordered) and its state.
struct FvMesh<'a> {
    op: &'a bespoke_fv::Operator,
    x: &'a [f64],
}

/// One row per shape of `kind` in `layout` in precision `T`, each against that kernel's default shape.
fn fv_shapes<T: bespoke_fv::Real>(
    ctx: &BenchContext<'_>,
    lab: &mut Lab,
    mesh: &FvMesh<'_>,
    kind: KernelKind,
    (name, layout): (&str, bespoke_fv::kernel::Layout),
    shapes: &[FvShape],
) -> Result<(), Error> {
    let (gpu, op, x) = (ctx.gpu, mesh.op, mesh.x);
    let n = op.n();
    let size = T::DTYPE.size();
    // The layout's own least bytes (16-bit offsets and far rows in the d16 layouts).
    let bytes = layout.min_bytes_per_tet(size, layout.far_fraction(&op.indices)) * n as f64;
    let case = format!("{}k tets metis {}", n / 1000, T::DTYPE.wgsl());
    // A layout the adapter cannot bind (too many storage buffers, too large a binding): each row says so.
    if let Some(why) = layout.misfit_on(gpu, n, size) {
        for &shape in shapes {
            let row_case = format!("{case} {name} {}", layout.name());
            lab.not_run("fv", row_case, shape.name(), &why);
        }
        return Ok(());
    }
    // The default first, then every other shape, on one upload of the operator.
    let order: Vec<FvShape> = std::iter::once(FvShape::default())
        .chain(shapes.iter().copied().filter(|s| *s != FvShape::default()))
        .collect();
    let times = time_shapes::<T>(gpu, op, kind, layout, &order, x, reps(ctx))?;
    let default = match &times[0] {
        Ok(t) => *t,
        Err(e) => {
            return Err(
                format!("fv {case} {name} {}: the default shape: {e}", layout.name()).into(),
            );
        }
    };
    for &shape in shapes {
        let at = order.iter().position(|s| *s == shape).unwrap_or(0);
        let row_case = format!("{case} {name} {}", layout.name());
        match &times[at] {
            Ok(seconds) => lab.push(
                ctx,
                "fv",
                row_case,
                shape.name(),
                *seconds,
                bytes,
                default,
                "",
            ),
            Err(e) => lab.not_run("fv", row_case, shape.name(), e),
        }
    }
    Ok(())
}
