//! A specialised kernel for one problem: its launches' layouts and generated sources, compiled on demand and
//! bound to device buffers.

use std::sync::Arc;
use std::time::Instant;

use bespoke_gpu::{Arg, Gpu, GpuBuffer, Grid, Kernel, Launch};

use super::families::{PARAMS_WORDS, TableSize, rolled_table};
use super::generate::{MAX_TERMS, generate_for, launch_cap};
use super::layout::{LaunchCap, Layout, RowTerms, plan_layouts};
use super::operator::Operator;
use super::variant::{Beta, Variant, WG_X};
use crate::dense::Element;
use crate::dtype::DType;
use crate::error::{MmError, Result};
use crate::reference::Shape;

/// N and the leading dimensions of B (K×N) and C (M×N).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Panel {
    pub n: usize,
    pub ldb: usize,
    pub ldc: usize,
}

impl Panel {
    /// ldb = ldc = N, as PyFR lays its panels out.
    pub fn packed(n: usize) -> Self {
        Self { n, ldb: n, ldc: n }
    }
    pub fn check(&self) -> Result<()> {
        if self.n == 0 {
            return Err(MmError::Shape("N = 0: nothing to multiply".into()));
        }
        for (name, ld) in [("ldb", self.ldb), ("ldc", self.ldc)] {
            if ld < self.n {
                return Err(MmError::Shape(format!(
                    "{name} = {ld} is less than N = {}",
                    self.n
                )));
            }
            if ld > u32::MAX as usize / 2 {
                return Err(MmError::Shape(format!(
                    "{name} = {ld} exceeds 32-bit indexing"
                )));
            }
        }
        Ok(())
    }
    /// Widest vector width (4, 2, 1) dividing N, ldb and ldc.
    pub fn alignment(&self) -> usize {
        [4, 2, 1]
            .into_iter()
            .find(|v| {
                [self.n, self.ldb, self.ldc]
                    .iter()
                    .all(|d| d.is_multiple_of(*v))
            })
            .unwrap_or(1)
    }
}

/// Time spent turning one variant into pipelines.
#[derive(Clone, Copy, Debug, Default)]
pub struct CompileTime {
    /// Writing the WGSL text.
    pub generate_seconds: f64,
    /// naga parse and validation.
    pub validate_seconds: f64,
    /// Driver shader-module and pipeline creation.
    pub pipeline_seconds: f64,
    /// Total bytes of WGSL.
    pub source_bytes: usize,
}

/// One variant generated for one operator, precision, β and panel: a kernel per launch layout.
#[derive(Clone, Debug)]
pub struct SpecKernel {
    pub variant: Variant,
    pub dtype: DType,
    pub beta: f64,
    pub m: usize,
    pub k: usize,
    pub panel: Panel,
    launches: Vec<(Layout, Kernel)>,
    /// Non-zeros of A each launch unrolls (rolled launches unroll none).
    launch_terms: Vec<usize>,
    /// Loads and stores of B and C each launch's source spells out (what its compile cost grows with).
    launch_accesses: Vec<usize>,
    /// The rolled family's tables, one per launch (empty for the unrolled families).
    tables: Vec<Arc<Table>>,
    pub compile: CompileTime,
}

/// One rolled launch's table as the bytes of its two uniform bindings (block offsets and columns; coefficients
/// in the precision), each padded to the declared size, and its row count and block count for the parameters.
#[derive(Debug)]
struct Table {
    tab: Vec<u8>,
    coef: Vec<u8>,
    blocks: usize,
    rows: usize,
}

/// Row blocks of a row-major array of `dtype` that each fit one binding.
pub(crate) fn row_blocks(
    gpu: &Gpu,
    dtype: DType,
    rows: usize,
    ld: usize,
) -> Result<Vec<std::ops::Range<usize>>> {
    Ok(match dtype {
        DType::F32 => gpu.row_blocks::<f32>(rows, &[ld], &[1])?,
        DType::F64 => gpu.row_blocks::<f64>(rows, &[ld], &[1])?,
    })
}

/// Whether the adapter launches `variant`'s workgroup: its invocations (bstream-msplit-s8: 512) and the workgroup
/// memory it stages through (`-smem48`: 48 KiB); `NotApplicable` naming the limit if not.
fn workgroup_fits(gpu: &Gpu, variant: Variant) -> Result<()> {
    let l = gpu.limits();
    let (x, y) = variant.workgroup();
    let refuse = |reason: String| {
        Err(MmError::NotApplicable {
            variant: variant.name(),
            reason,
        })
    };
    if x * y > l.max_compute_invocations_per_workgroup || y > l.max_compute_workgroup_size_y {
        return refuse(format!(
            "a workgroup of {x}×{y} invocations passes the adapter's limits ({} invocations, {} along y)",
            l.max_compute_invocations_per_workgroup, l.max_compute_workgroup_size_y
        ));
    }
    let stage = variant.stage_bytes();
    if variant.family.splits() && stage > l.max_compute_workgroup_storage_size as usize {
        return refuse(format!(
            "{stage} bytes of workgroup memory pass the adapter's {}",
            l.max_compute_workgroup_storage_size
        ));
    }
    Ok(())
}

impl SpecKernel {
    /// Generates `variant` for `op` (zeros dropped, entries inlined), splitting the problem into launches that
    /// fit `gpu`'s binding limits. `NotApplicable` says why a variant does not fit this operator or panel.
    pub fn new(
        gpu: &Gpu,
        op: &Operator,
        variant: Variant,
        dtype: DType,
        beta: f64,
        panel: Panel,
    ) -> Result<Self> {
        check_args(gpu, dtype, beta, panel, "specialised matmul")?;
        op.check_precision(dtype)?;
        workgroup_fits(gpu, variant)?;
        let nnz = op.nnz();
        let unrolled = variant.family.unrolled();
        if unrolled && nnz > MAX_TERMS {
            return Err(MmError::NotApplicable {
                variant: variant.name(),
                reason: format!(
                    "{nnz} non-zeros exceed the {MAX_TERMS}-term cap on unrolled source"
                ),
            });
        }
        let t0 = Instant::now();
        let rows = op.rows();
        let b = row_blocks(gpu, dtype, op.k, panel.ldb)?;
        let c = row_blocks(gpu, dtype, op.m, panel.ldc)?;
        let max = gpu.limits().max_storage_buffers_per_shader_stage as usize;
        let table_size = TableSize::for_limit(gpu.limits().max_uniform_buffer_binding_size);
        // The rolled kernel binds one block of B and one of C (its tables are uniform) and is not unrolled;
        // its launches hold as many rows as their tables fit.
        let (bindings, cap) = if unrolled {
            (max, launch_cap(gpu, variant))
        } else {
            let r = variant.split as usize;
            (
                2,
                LaunchCap::Table {
                    r,
                    tab_words: table_size.tab_words(),
                    coef_elems: table_size.coef_elems(dtype),
                },
            )
        };
        let layouts = plan_layouts(
            &rows,
            Beta::of(beta),
            &b,
            &c,
            (panel.n, panel.ldb, panel.ldc),
            bindings,
            cap,
        )
        .map_err(MmError::Shape)?;
        let launches = Self::generate_all(&rows, &layouts, variant, dtype, table_size, &op.name)?;
        let launch_terms = layouts
            .iter()
            .map(|l| {
                if unrolled {
                    l.rows.iter().map(|i| l.terms(&rows, i).len()).sum()
                } else {
                    0
                }
            })
            .collect();
        let launch_accesses = launches
            .iter()
            .map(|(_, k)| storage_accesses(k.source()))
            .collect();
        let tables = if unrolled {
            Vec::new()
        } else {
            layouts
                .iter()
                .map(|l| {
                    let t = rolled_table(&rows, l, variant.split as usize);
                    let (tab, coef) =
                        t.bytes(dtype, table_size)
                            .map_err(|reason| MmError::NotApplicable {
                                variant: variant.name(),
                                reason,
                            })?;
                    Ok(Arc::new(Table {
                        tab,
                        coef,
                        blocks: t.blocks,
                        rows: l.rows.len(),
                    }))
                })
                .collect::<Result<Vec<_>>>()?
        };
        let compile = CompileTime {
            generate_seconds: t0.elapsed().as_secs_f64(),
            source_bytes: launches.iter().map(|(_, k)| k.source().len()).sum(),
            ..Default::default()
        };
        Ok(Self {
            variant,
            dtype,
            beta,
            m: op.m,
            k: op.k,
            panel,
            launches,
            launch_terms,
            launch_accesses,
            tables,
            compile,
        })
    }

    fn generate_all(
        rows: &[RowTerms],
        layouts: &[Layout],
        variant: Variant,
        dtype: DType,
        table_size: TableSize,
        name: &str,
    ) -> Result<Vec<(Layout, Kernel)>> {
        layouts
            .iter()
            .enumerate()
            .map(|(i, l)| {
                let src = generate_for(rows, l, variant, dtype, table_size).map_err(|s| {
                    MmError::NotApplicable {
                        variant: variant.name(),
                        reason: s.0,
                    }
                })?;
                let kname = format!("mm_{name}_{}_{dtype}_{i}", variant.name());
                // SAFETY: B and C are addressed as `col + offset` with `col < N / vec` (early return or clamp)
                // and offsets inside the row blocks this layout binds; `plan` refuses buffers shorter than the
                // panels, so every window holds the rows it is bound for. Workgroup arrays are indexed by
                // constants below their size plus `lid.x < WG_X`. The rolled kernel's indices come from the
                // table `rolled_table` builds for this very layout (checked to fit the declared uniform
                // arrays): block offsets within the table, columns within the bound K slice, rows read from the
                // table and each stored only below the parameter `rows` of the bound C block; its columns of B
                // are clamped below N.
                let kernel = unsafe { Kernel::new(kname, src).without_bounds_checks() };
                Ok((l.clone(), kernel))
            })
            .collect()
    }

    /// The generated sources, one per launch.
    pub fn sources(&self) -> Vec<&str> {
        self.launches.iter().map(|(_, k)| k.source()).collect()
    }

    /// The kernels, one per launch (to compile many candidates at once before timing them).
    pub fn kernels(&self) -> Vec<Kernel> {
        self.launches.iter().map(|(_, k)| k.clone()).collect()
    }

    /// Non-zeros of A each launch unrolls (zeros for the rolled family).
    pub fn launch_terms(&self) -> &[usize] {
        &self.launch_terms
    }

    /// Loads and stores of B and C spelt out in each launch's source (an unrolled kernel's compile cost grows
    /// with these: docs/perf.md).
    pub fn launch_accesses(&self) -> &[usize] {
        &self.launch_accesses
    }

    /// Compiles every launch's pipeline (cached by the device layer) and records validation and driver time.
    pub fn compile(&mut self, gpu: &Gpu) -> Result<CompileTime> {
        let (mut v, mut p) = (0.0, 0.0);
        for (_, k) in &self.launches {
            let (c, compiled) = gpu.compile(k)?;
            if compiled {
                v += c.validate_seconds;
                p += c.create_seconds;
            }
        }
        self.compile.validate_seconds += v;
        self.compile.pipeline_seconds += p;
        Ok(self.compile)
    }

    /// Binds the launches to `b` (K×N, ldb) and `c` (M×N, ldc).
    pub fn plan<T: Element>(
        &self,
        gpu: &Gpu,
        b: &GpuBuffer<T>,
        c: &GpuBuffer<T>,
    ) -> Result<Vec<Launch>> {
        check_buffers(self.dtype, (self.m, self.k, self.panel), b, c)?;
        let nv = (self.panel.n / self.variant.vec as usize) as u64;
        let grid = Grid::cover(nv, WG_X)?;
        let mut out = Vec::with_capacity(self.launches.len());
        let v = self.variant.vec as usize;
        for (i, (l, k)) in self.launches.iter().enumerate() {
            if let Some(t) = self.tables.get(i) {
                let c_rows = l.c_blocks[0].clone();
                let mut params = [0u32; PARAMS_WORDS];
                params[..6].copy_from_slice(&[
                    nv as u32,
                    (l.ldb / v) as u32,
                    (l.ldc / v) as u32,
                    t.blocks as u32,
                    t.rows as u32,
                    (l.rows.span().start - c_rows.start) as u32,
                ]);
                let args = [
                    b.rows_arg(l.ks.clone(), l.ldb),
                    c.rows_arg(c_rows, l.ldc),
                    Arg::Uniform(t.tab.clone()),
                    Arg::Uniform(t.coef.clone()),
                    Arg::uniform(&params),
                ];
                out.push(gpu.prepare(k, &args, grid)?);
                continue;
            }
            out.push(bind_layout(gpu, l, k, b, c, grid)?);
        }
        Ok(out)
    }
}

/// Refuses a bad panel, a precision the adapter lacks (naming `what` needs it) and a β not finite in it.
pub(crate) fn check_args(
    gpu: &Gpu,
    dtype: DType,
    beta: f64,
    panel: Panel,
    what: &str,
) -> Result<()> {
    panel.check()?;
    dtype.require(gpu, what)?;
    if !beta.is_finite() {
        return Err(MmError::NonFinite {
            what: "beta",
            value: beta,
        });
    }
    if dtype == DType::F32 && !(beta as f32).is_finite() {
        return Err(MmError::Range {
            what: "beta".into(),
            value: beta,
            dtype: dtype.wgsl(),
        });
    }
    Ok(())
}

/// Refuses buffers of another precision than `dtype` or shorter than the panels of an M×K operator.
pub(crate) fn check_buffers<T: Element>(
    dtype: DType,
    (m, k, panel): (usize, usize, Panel),
    b: &GpuBuffer<T>,
    c: &GpuBuffer<T>,
) -> Result<()> {
    if T::DTYPE != dtype {
        return Err(MmError::Shape(format!(
            "buffers hold {} but the kernel is {dtype}",
            T::DTYPE
        )));
    }
    crate::error::check_apart(("C", c), &[("B", b)])?;
    check_panels(m, k, panel, b.len(), c.len())
}

/// One launch of a layout's kernel with its row blocks of B and C bound in order (`b0, b1, …, c0, …`).
pub(crate) fn bind_layout<T: Element>(
    gpu: &Gpu,
    l: &Layout,
    k: &Kernel,
    b: &GpuBuffer<T>,
    c: &GpuBuffer<T>,
    grid: Grid,
) -> Result<Launch> {
    let mut args: Vec<_> = l
        .b_blocks
        .iter()
        .map(|r| b.rows_arg(r.clone(), l.ldb))
        .collect();
    args.extend(l.c_blocks.iter().map(|r| c.rows_arg(r.clone(), l.ldc)));
    Ok(gpu.prepare(k, &args, grid)?)
}

/// Buffer lengths against the panel: B must hold K rows of ldb, C M rows of ldc (last rows unpadded).
pub(crate) fn check_panels(m: usize, k: usize, p: Panel, b_len: usize, c_len: usize) -> Result<()> {
    for (name, len, sh) in [
        ("B", b_len, Shape::new(k, p.n, p.ldb)),
        ("C", c_len, Shape::new(m, p.n, p.ldc)),
    ] {
        if len < sh.min_len() {
            return Err(MmError::Shape(format!(
                "{name} holds {len} elements, a {}×{} panel with leading dimension {} needs {}",
                sh.rows,
                sh.cols,
                sh.ld,
                sh.min_len()
            )));
        }
    }
    Ok(())
}

/// Indexed accesses of the B and C bindings (`b0[…]`, `c1[…]`) written out in a generated source.
pub(crate) fn storage_accesses(src: &str) -> usize {
    let bytes = src.as_bytes();
    let mut n = 0;
    for (i, &ch) in bytes.iter().enumerate() {
        if ch != b'[' {
            continue;
        }
        let mut j = i;
        while j > 0 && bytes[j - 1].is_ascii_digit() {
            j -= 1;
        }
        let named = j < i && j > 0 && matches!(bytes[j - 1], b'b' | b'c');
        let starts = j < 2 || !(bytes[j - 2].is_ascii_alphanumeric() || bytes[j - 2] == b'_');
        if named && starts {
            n += 1;
        }
    }
    n
}
