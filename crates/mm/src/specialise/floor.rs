//! The access floor of an operator: a kernel with the operator's loads and stores and none of its arithmetic.
//!
//! Each invocation sums, for its column group, the rows of B the operator uses (each loaded once) and stores the sum
//! into every row of C the operator writes (read first where β ≠ 0, and at β = 0 where it stands for a `-touch`
//! kernel): the fewest accesses any specialised kernel for the operator can make, with one add per load instead of
//! the operator's multiply-adds, laid out on the same grid and bindings as the generated kernels. Its time is what
//! the adapter charges for the accesses alone; a specialised kernel's time against it says how much is the kernel's
//! arithmetic and register traffic and how much the adapter's memory path (on llvmpipe: per-lane loads and stores),
//! which no generator can remove. A reference rather than a strict bound: it loads every row of B before it stores
//! any row of C, and a kernel that interleaves the two can run faster. Rows go through loops, so the floor compiles
//! in milliseconds however large the operator. `bespoke mm bench` times it beside every choice (docs/mm.md).

use std::fmt::Write;
use std::ops::Range;

use bespoke_gpu::{Gpu, GpuBuffer, Grid, Kernel, Launch};

use super::emit::Emit;
use super::layout::{LaunchCap, Layout, RowTerms, plan_layouts};
use super::operator::Operator;
use super::run::{Panel, bind_layout, check_args, check_buffers, row_blocks};
use super::variant::{Beta, Family, Variant, WG_X};
use crate::dense::Element;
use crate::dtype::DType;
use crate::error::{MmError, Result};

/// The floor's launches for one operator, panel, β and vector width.
#[derive(Debug)]
pub struct AccessFloor {
    dtype: DType,
    vec: u32,
    m: usize,
    k: usize,
    panel: Panel,
    /// Each launch with the rows of B it sums and the rows of C it stores.
    launches: Vec<(Layout, FloorRows, Kernel)>,
}

/// The rows one floor launch reads and writes, in runs of consecutive rows.
#[derive(Clone, Debug, PartialEq, Eq)]
struct FloorRows {
    b: Vec<Range<usize>>,
    c: Vec<Range<usize>>,
}

/// Consecutive runs of the sorted, deduplicated `rows`.
fn runs(rows: &[usize]) -> Vec<Range<usize>> {
    let mut out: Vec<Range<usize>> = Vec::new();
    for &r in rows {
        match out.last_mut() {
            Some(last) if last.end == r => last.end += 1,
            _ => out.push(r..r + 1),
        }
    }
    out
}

impl AccessFloor {
    /// The floor of `op` at `beta` on `panel`, `vec` columns per invocation (1, 2 or 4; N and the leading
    /// dimensions must be multiples of it), split into launches where B or C pass the binding limits as the
    /// specialised kernels are. With `touch` its β = 0 stores read C first, as a `-touch` kernel's do (the
    /// floor of such a kernel).
    pub fn new(
        gpu: &Gpu,
        op: &Operator,
        dtype: DType,
        beta: f64,
        panel: Panel,
        vec: u32,
        touch: bool,
    ) -> Result<Self> {
        check_args(gpu, dtype, beta, panel, "access floor")?;
        if ![1, 2, 4].contains(&vec) || !(panel.alignment() as u32).is_multiple_of(vec) {
            return Err(MmError::Shape(format!(
                "access floor at vec{vec}: N = {}, ldb = {} and ldc = {} must be multiples of 1, 2 or 4 columns",
                panel.n, panel.ldb, panel.ldc
            )));
        }
        let rows = op.rows();
        let b = row_blocks(gpu, dtype, op.k, panel.ldb)?;
        let c = row_blocks(gpu, dtype, op.m, panel.ldc)?;
        let max = gpu.limits().max_storage_buffers_per_shader_stage as usize;
        let layouts = plan_layouts(
            &rows,
            Beta::of(beta),
            &b,
            &c,
            (panel.n, panel.ldb, panel.ldc),
            max,
            LaunchCap::Terms(usize::MAX),
        )
        .map_err(MmError::Shape)?;
        let launches = layouts
            .into_iter()
            .enumerate()
            .map(|(i, l)| {
                let fr = floor_rows(&rows, &l);
                let src = floor_wgsl(&l, &fr, dtype, vec, touch);
                // SAFETY: B and C are addressed as `col + row·ld/vec` with `col < N / vec` (early return) and rows
                // inside the blocks this layout binds; `plan` refuses buffers shorter than the panels.
                let kernel = unsafe {
                    Kernel::new(format!("mm_floor_{}_{dtype}_v{vec}_{i}", op.name), src)
                        .without_bounds_checks()
                };
                (l, fr, kernel)
            })
            .collect();
        Ok(Self {
            dtype,
            vec,
            m: op.m,
            k: op.k,
            panel,
            launches,
        })
    }

    /// The generated sources, one per launch.
    pub fn sources(&self) -> Vec<&str> {
        self.launches.iter().map(|(_, _, k)| k.source()).collect()
    }

    /// Binds the launches to `b` (K×N, ldb) and `c` (M×N, ldc).
    pub fn plan<T: Element>(
        &self,
        gpu: &Gpu,
        b: &GpuBuffer<T>,
        c: &GpuBuffer<T>,
    ) -> Result<Vec<Launch>> {
        check_buffers(self.dtype, (self.m, self.k, self.panel), b, c)?;
        let grid = Grid::cover((self.panel.n / self.vec as usize) as u64, WG_X)?;
        self.launches
            .iter()
            .map(|(l, _, k)| bind_layout(gpu, l, k, b, c, grid))
            .collect()
    }

    /// What the launches compute, on the CPU in f64: for each launch in order, every row of C it writes
    /// becomes the sum of the rows of B it reads, plus β times its old value (β of that launch: later K slices
    /// accumulate). `b` and `c` are laid out as the panel says.
    pub fn reference(&self, b: &[f64], c: &mut [f64]) {
        let (n, ldb, ldc) = (self.panel.n, self.panel.ldb, self.panel.ldc);
        for (l, fr, _) in &self.launches {
            let mut s = vec![0.0f64; n];
            for p in fr.b.iter().flat_map(Clone::clone) {
                for (x, y) in s.iter_mut().zip(&b[p * ldb..p * ldb + n]) {
                    *x += y;
                }
            }
            for i in fr.c.iter().flat_map(Clone::clone) {
                for (x, y) in c[i * ldc..i * ldc + n].iter_mut().zip(&s) {
                    *x = match l.beta {
                        Beta::Zero => *y,
                        _ => y + l.beta.value() * *x,
                    };
                }
            }
        }
    }
}

/// How much faster the touch floor must run than the plain one for a `-touch` twin to be worth compiling.
pub const TOUCH_GAIN: f64 = 0.9;

/// Pairs of floor runs the touch check times.
const TOUCH_PAIRS: usize = 5;

/// Whether reading C before its β = 0 stores made the accesses faster: the touch floor's time at most
/// [`TOUCH_GAIN`] of the plain one's (false for times that are not finite and positive).
pub fn touch_pays(plain: f64, touch: f64) -> bool {
    plain.is_finite()
        && touch.is_finite()
        && plain > 0.0
        && touch > 0.0
        && touch <= TOUCH_GAIN * plain
}

/// The tuner's check before it compiles `variant`, a `-touch` twin at β = 0: the operator's access floor without
/// and with the read of C, timed in alternation on the tuning buffers (a few milliseconds of compiling, loops
/// only). Where the read does not make the accesses at least 1/[`TOUCH_GAIN`] faster, no twin can gain from it
/// and it is skipped with both times (on Mesa 25.0.7 the twins cost 221 s of the suite's compile for 13 choices
/// within the timing spread; on Mesa 22.3.6 on an Intel host they ran hex-p4-m0 2× faster: docs/perf.md).
/// `None`: compile it.
pub(crate) fn touch_check<T: Element>(
    gpu: &Gpu,
    op: &Operator,
    panel: Panel,
    variant: Variant,
    b: &GpuBuffer<T>,
    c: &GpuBuffer<T>,
) -> Result<Option<String>> {
    let time_pairs = |plain: &[Launch], touch: &[Launch]| -> Result<(f64, f64)> {
        let (p, t): (Vec<&Launch>, Vec<&Launch>) = (plain.iter().collect(), touch.iter().collect());
        gpu.run(&p)?;
        gpu.run(&t)?;
        let mut tp = gpu.time(&p, 0, 1)?;
        let mut tt = gpu.time(&t, 0, 1)?;
        for _ in 1..TOUCH_PAIRS {
            tp.samples.extend(gpu.time(&p, 0, 1)?.samples);
            tt.samples.extend(gpu.time(&t, 0, 1)?.samples);
        }
        Ok((tp.median(), tt.median()))
    };
    let floor = |touch| AccessFloor::new(gpu, op, T::DTYPE, 0.0, panel, variant.vec, touch);
    let (plain, touch) = (floor(false)?, floor(true)?);
    let (plain_s, touch_s) = time_pairs(&plain.plan(gpu, b, c)?, &touch.plan(gpu, b, c)?)?;
    Ok((!touch_pays(plain_s, touch_s)).then(|| {
        format!(
            "skipped: reading C before its stores does not make this operator's accesses faster here (access \
             floor {:.3} ms with the read, {:.3} ms without; a twin must gain ×{TOUCH_GAIN} there to be compiled)",
            touch_s * 1e3,
            plain_s * 1e3
        )
    }))
}

/// The rows of B a launch reads (those its rows use inside its K slice) and of C it writes.
fn floor_rows(rows: &[RowTerms], l: &Layout) -> FloorRows {
    let mut used: Vec<usize> = l
        .rows
        .iter()
        .flat_map(|r| l.terms(rows, r).into_iter().map(|(p, _)| p))
        .collect();
    used.sort_unstable();
    used.dedup();
    let written: Vec<usize> = l.rows.iter().filter(|&r| l.writes(rows, r)).collect();
    FloorRows {
        b: runs(&used),
        c: runs(&written),
    }
}

/// One floor launch's WGSL.
fn floor_wgsl(l: &Layout, fr: &FloorRows, dtype: DType, vec: u32, touch: bool) -> String {
    let variant = Variant::new(Family::BStream, vec, 1, false);
    let variant = if touch {
        variant.with_touch().unwrap_or(variant)
    } else {
        variant
    };
    let mut e = Emit::new(dtype, variant, l);
    e.header_named(
        &format!(
            "access floor {dtype} vec{vec}{}",
            if touch { " touch" } else { "" }
        ),
        "the operator's loads and stores, one add per load instead of its multiply-adds",
    );
    e.open_main();
    let (vt, v) = (e.vt(), vec as usize);
    let mut s = std::mem::take(&mut e.out);
    s += "    if (col >= NV) {\n        return;\n    }\n";
    let _ = writeln!(s, "    var s = {vt}();");
    // A run of rows may span binding blocks: split it at their edges.
    let pieces = |runs: &[Range<usize>], blocks: &[Range<usize>]| -> Vec<(usize, Range<usize>)> {
        let mut out = Vec::new();
        for r in runs {
            for (j, blk) in blocks.iter().enumerate() {
                let (lo, hi) = (r.start.max(blk.start), r.end.min(blk.end));
                if lo < hi {
                    out.push((j, lo - blk.start..hi - blk.start));
                }
            }
        }
        out
    };
    for (j, r) in pieces(&fr.b, &l.b_blocks) {
        let _ = writeln!(
            s,
            "    for (var q = {}u; q < {}u; q++) {{\n        s += b{j}[col + q * {}u];\n    }}",
            r.start,
            r.end,
            l.ldb / v
        );
    }
    for (j, r) in pieces(&fr.c, &l.c_blocks) {
        let at = format!("c{j}[col + q * {}u]", l.ldc / v);
        if let Some(stmt) = e.store_to(&at, Some("s")) {
            let _ = writeln!(
                s,
                "    for (var q = {}u; q < {}u; q++) {{\n        {stmt}\n    }}",
                r.start, r.end
            );
        }
    }
    s += "}\n";
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::specialise::tests::random_operator;
    use bespoke_gpu::validate_everywhere;

    #[test]
    fn touch_pays_only_for_a_clear_gain() {
        assert!(touch_pays(1.0, 0.5));
        assert!(touch_pays(1.0, TOUCH_GAIN));
        assert!(!touch_pays(1.0, 0.95));
        assert!(!touch_pays(1.0, 1.2));
        for bad in [f64::NAN, f64::INFINITY, 0.0, -1.0] {
            assert!(!touch_pays(bad, 0.5), "{bad}");
            assert!(!touch_pays(1.0, bad), "{bad}");
        }
    }

    #[test]
    fn runs_of_consecutive_rows() {
        assert_eq!(runs(&[]), Vec::<Range<usize>>::new());
        assert_eq!(runs(&[0, 1, 2, 5, 7, 8]), vec![0..3, 5..6, 7..9]);
    }

    /// Every floor kernel validates under naga (both precisions, vec1/2/4, every β, one binding each or B and C
    /// split across bindings and launches), reads each row of B its launch's rows use and no other, and writes
    /// each row of C its launch must write, once.
    #[test]
    fn floor_kernels_validate_and_touch_the_operators_rows() {
        let mut kernels = 0;
        for (i, zeros) in [0.0, 0.6, 0.97].into_iter().enumerate() {
            let op = random_operator(13, 11, zeros, 40 + i as u64);
            let rows = op.rows();
            for beta in [Beta::Zero, Beta::One, Beta::Other(-0.5)] {
                let single = Layout::single(&rows, op.k, beta, 64, 64, 68)
                    .into_iter()
                    .collect();
                let b: Vec<_> = (0..op.k).step_by(5).map(|s| s..(s + 5).min(op.k)).collect();
                let c: Vec<_> = (0..op.m).step_by(3).map(|s| s..(s + 3).min(op.m)).collect();
                let split = plan_layouts(
                    &rows,
                    beta,
                    &b,
                    &c,
                    (64, 64, 68),
                    6,
                    LaunchCap::Terms(usize::MAX),
                )
                .unwrap();
                for layouts in [single, split] {
                    for l in &layouts {
                        let fr = floor_rows(&rows, l);
                        let mut used: Vec<usize> = l
                            .rows
                            .iter()
                            .flat_map(|r| l.terms(&rows, r))
                            .map(|t| t.0)
                            .collect();
                        used.sort_unstable();
                        used.dedup();
                        let read: Vec<usize> = fr.b.iter().flat_map(Clone::clone).collect();
                        assert_eq!(read, used);
                        let written: Vec<usize> = fr.c.iter().flat_map(Clone::clone).collect();
                        let want: Vec<usize> =
                            l.rows.iter().filter(|&r| l.writes(&rows, r)).collect();
                        assert_eq!(written, want);
                        for (dtype, vec, touch) in [DType::F32, DType::F64]
                            .into_iter()
                            .flat_map(|d| [1, 2, 4].map(|v| (d, v)))
                            .flat_map(|(d, v)| [(d, v, false), (d, v, true)])
                        {
                            {
                                let src = floor_wgsl(l, &fr, dtype, vec, touch);
                                validate_everywhere(&src, dtype.caps()).unwrap_or_else(|e| {
                                    panic!("{dtype} vec{vec} touch {touch} {beta:?}: {e}\n{src}")
                                });
                                // At β = 0 a touch floor reads every row of C it stores; otherwise C is read
                                // only where β ≠ 0.
                                let reads_c = src.contains("let t = c");
                                assert_eq!(
                                    reads_c,
                                    touch && beta == Beta::Zero && !fr.c.is_empty()
                                );
                                // One loop per run of rows within a binding: never more loads or stores
                                // spelt out than runs, whatever the operator's size.
                                let loops = src.matches("for (var q").count();
                                assert!(loops <= fr.b.len() + fr.c.len() + l.bindings(), "{src}");
                                kernels += 1;
                            }
                        }
                    }
                }
            }
        }
        assert!(kernels > 3 * 3 * 12 * 2, "{kernels} kernels");
    }
}
