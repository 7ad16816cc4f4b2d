//! The device driver: k explicit Euler steps x ← x + Δt·L·x without reading back in between.

use bespoke_comm::ExactSum;
use bespoke_gpu::wgpu::TextureFormat;
use bespoke_gpu::{Arg, Gpu, GpuBuffer, GpuTexture, Kernel, Launch, Timing};

use crate::error::{FvError, Result};
use crate::kernel::{
    DType, KernelKind, Layout, MAX_TETS, Shape, WG, padded4, step_rows_wgsl, texture_width,
};
use crate::operator::{Boundary, Operator};

mod layout;
mod shape;

pub use layout::{LayoutChoice, layout_for, layouts, step_layout, step_layout_in};
pub use shape::{
    ShapeChoice, TET_CANDIDATES, WORKGROUPS, candidates, step_shape, step_shape_in, user_cache,
};

/// f32 or f64 on the device: the device layer's one element trait, named for what it holds here.
pub use bespoke_gpu::Element as Real;

/// An operator on the device with two x buffers.
#[derive(Debug)]
pub struct Diffusion<'g, T: Real> {
    pub(crate) gpu: &'g Gpu,
    pub(crate) n: usize,
    /// The device holds x − shift, shift being the steady state (the Dirichlet value, or the volume-weighted mean
    /// of the last `set_x`): differences, and so L·x, do not change, while f32 rounding of x + Δt·L·x shrinks
    /// with the distance to the steady state instead of staying at half an ulp of x. Near the steady state the
    /// same roundings repeat every step, and unshifted they added up to a mass drift of ~1e-6 per 1000 steps.
    pub(crate) shift: f64,
    /// Cell volumes for the zero-flux mean (None at a Dirichlet boundary).
    volumes: Option<Vec<f64>>,
    /// Where the ghost sits in x: n, or padded4(n) for the four-tets-per-invocation layout. It holds the Dirichlet
    /// value − shift = 0 (zero-flux slots point at their own tet and never read it).
    pub(crate) ghost_at: usize,
    pub(crate) x: [GpuBuffer<T>; 2],
    pub(crate) launches: [Launch; 2],
    pub(crate) parity: usize,
    kind: KernelKind,
    layout: Layout,
    shape: Shape,
    dt: f64,
    _keep: (Vec<GpuBuffer<T>>, Vec<GpuBuffer<u32>>, Vec<GpuTexture>),
}

/// A shape `kind` in `layout` launches on `gpu`: a workgroup size the adapter launches, and tets per invocation
/// only where the kernel takes several.
fn check_shape(gpu: &Gpu, kind: KernelKind, layout: Layout, shape: Shape) -> Result<()> {
    if !candidates(gpu, kind).contains(&shape.workgroup) {
        return Err(FvError::param(
            "workgroup",
            shape.workgroup,
            format!(
                "the {} kernel launches {:?} invocations per workgroup on adapter `{}`",
                kind.name(),
                candidates(gpu, kind),
                gpu.adapter_name()
            ),
        ));
    }
    let takes_several = kind == KernelKind::Gather && !layout.four_tets();
    if !(1..=MAX_TETS).contains(&shape.tets) || (shape.tets > 1 && !takes_several) {
        return Err(FvError::param(
            "tets per invocation",
            shape.tets,
            format!(
                "the gather kernel (not in the four-tet layout) takes 1 to {MAX_TETS}; the {} kernel in the {} \
                 layout takes 1",
                kind.name(),
                layout.name()
            ),
        ));
    }
    Ok(())
}

/// The operator's arrays on the device: values and indices as buffers (by slot or by tet), or as textures.
type Arrays<'a, T> = (&'a [GpuBuffer<T>], &'a [GpuBuffer<u32>], &'a [GpuTexture]);

/// The two step launches (x[0] → x[1], x[1] → x[0]) of `kind` in `layout` and `shape` over n tets.
fn step_launches<T: Real>(
    gpu: &Gpu,
    (kind, layout, shape): (KernelKind, Layout, Shape),
    n: usize,
    dt: f64,
    (vals, idx, textures): Arrays<'_, T>,
    x: &[GpuBuffer<T>; 2],
) -> Result<[Launch; 2]> {
    // SAFETY: every index was checked by `Diffusion::with_shape` to be ≤ n (remapped to the ghost at padded4(n) ≤
    // len − 4 for the four-tet layouts, whose pads point at 0 or at themselves); the 16-bit offsets decode to
    // exactly those indices and a far row's number is below the far table's length (`kernel::d16_indices`,
    // `d16_quads`, tested on the CPU as the kernels decode them); the x buffers hold n + 1 (four-tet:
    // padded4(n) + 4) entries; slot arrays hold n (four-tet: padded4(n)) entries and are read below N (four-tet: G
    // groups); workgroup indices stay below B.
    // Where the shape alternates, the pair's second launch walks the blocks backwards (`Shape::alternate`).
    let kernel = |descending: bool| unsafe {
        Kernel::new(
            format!(
                "fv-{}-{}-{}-{}{}",
                kind.name(),
                layout.name(),
                T::DTYPE.wgsl(),
                Shape {
                    alternate: false,
                    ..shape
                }
                .name()
                .replace(' ', "-"),
                if descending { "-desc" } else { "" }
            ),
            step_rows_wgsl(kind, layout, T::DTYPE, n, dt, 0..n, shape, descending),
        )
        .without_bounds_checks()
    };
    let grid = gpu.grid_for(n as u64, shape.per_group(kind, layout), shape.grid)?;
    let forward = kernel(false);
    let backward = shape.alternate.then(|| kernel(true));
    let prepare = |from: &GpuBuffer<T>, to: &GpuBuffer<T>, kernel: &Kernel| -> Result<Launch> {
        let mut args: Vec<Arg<'_>> = textures.iter().map(|t| t.arg()).collect();
        args.extend(vals.iter().map(|b| b.arg()));
        args.extend(idx.iter().map(|b| b.arg()));
        args.push(from.arg());
        if layout.four_tets() {
            args.push(from.arg());
        }
        args.push(to.arg());
        Ok(gpu.prepare(kernel, &args, grid)?)
    };
    Ok([
        prepare(&x[0], &x[1], &forward)?,
        prepare(&x[1], &x[0], backward.as_ref().unwrap_or(&forward))?,
    ])
}

impl<'g, T: Real> Diffusion<'g, T> {
    /// Uploads `op` in `layout` and prepares both step directions, launched in the shape chosen on the device
    /// ([`step_shape`]: timed once per adapter, kernel, layout and precision, then cached). Δt must lie in
    /// (0, 1 / max row sum).
    pub fn new(
        gpu: &'g Gpu,
        op: &Operator,
        kind: KernelKind,
        layout: Layout,
        dt: f64,
    ) -> Result<Self> {
        Self::check_kernel(gpu, kind, layout)?;
        let shape = step_shape::<T>(gpu, kind, layout)?.shape;
        Self::with_shape(gpu, op, kind, layout, dt, shape)
    }

    /// The kernel, layout and precision go together on `gpu` (checked before any tuning).
    fn check_kernel(gpu: &Gpu, kind: KernelKind, layout: Layout) -> Result<()> {
        if layout == Layout::Texture && T::DTYPE != DType::F32 {
            return Err(FvError::param(
                "layout",
                layout.name(),
                "textures hold f32 values only; use slot-major for f64",
            ));
        }
        if T::DTYPE == DType::F64 && !gpu.has_f64() {
            return Err(FvError::Unsupported(format!(
                "f64 needs SHADER_F64, which adapter `{}` lacks",
                gpu.adapter_name()
            )));
        }
        if layout.four_tets() && kind != KernelKind::Gather {
            return Err(FvError::param(
                "layout",
                layout.name(),
                "four tets per invocation is built for the gather kernel only",
            ));
        }
        if let KernelKind::BlockCached { block } = kind {
            check_kernel_block::<T>(gpu, block)?;
        }
        let (count, max) = (
            layout.storage_buffers(),
            gpu.limits().max_storage_buffers_per_shader_stage,
        );
        if count > max {
            let fewer: Vec<String> = layout::layouts(kind, T::DTYPE)
                .iter()
                .filter(|l| l.storage_buffers() <= max)
                .map(|l| format!("{} {}", l.name(), l.storage_buffers()))
                .collect();
            return Err(FvError::Unsupported(format!(
                "the {} layout binds {count} storage buffers per kernel; adapter `{}` allows {max} (layouts that \
                 bind fewer: {})",
                layout.name(),
                gpu.adapter_name(),
                fewer.join(", ")
            )));
        }
        Ok(())
    }

    /// [`Diffusion::new`] launched in `shape` (the results are bit-identical whatever the workgroup size; the
    /// lab's `no_gather` ablation is not the physics).
    pub fn with_shape(
        gpu: &'g Gpu,
        op: &Operator,
        kind: KernelKind,
        layout: Layout,
        dt: f64,
        shape: Shape,
    ) -> Result<Self> {
        Self::check_kernel(gpu, kind, layout)?;
        check_shape(gpu, kind, layout, shape)?;
        let n = op.n();
        if n == 0 {
            return Err(FvError::Shape("the operator has no tets".into()));
        }
        check_dt(op, dt)?;
        if let Some((t, j)) = op
            .indices
            .iter()
            .enumerate()
            .flat_map(|(t, r)| r.iter().map(move |&j| (t, j)))
            .find(|&(_, j)| j as usize > n)
        {
            return Err(FvError::Shape(format!(
                "tet {t} refers to tet {j}, past {n} (+ ghost)"
            )));
        }
        if layout == Layout::Texture
            && let Some(why) = layout.misfit_on(gpu, n, T::DTYPE.size())
        {
            return Err(FvError::Unsupported(format!(
                "{n} tets in the texture layout: it {why}"
            )));
        }
        let largest = layout.largest_binding(n, T::DTYPE.size());
        if largest > gpu.binding_limit() {
            return Err(FvError::Unsupported(format!(
                "{n} tets in the {} layout bind {largest} bytes at once, past adapter `{}`'s largest binding \
                 ({} bytes){}",
                layout.name(),
                gpu.adapter_name(),
                gpu.binding_limit(),
                if layout == Layout::TetMajor {
                    "; the slot-major layout binds a quarter as much"
                } else {
                    ""
                }
            )));
        }
        let mut textures = Vec::new();
        let (vals, idx) = match layout {
            Layout::SlotMajor => {
                let mut vals = Vec::with_capacity(4);
                let mut idx = Vec::with_capacity(4);
                for s in 0..4 {
                    let v: Vec<T> = op.values.iter().map(|r| T::from_f64(r[s])).collect();
                    let i: Vec<u32> = op.indices.iter().map(|r| r[s]).collect();
                    vals.push(gpu.upload(&v)?);
                    idx.push(gpu.upload(&i)?);
                }
                (vals, idx)
            }
            Layout::TetMajor | Layout::TetMajorD16 => {
                let v: Vec<T> = op
                    .values
                    .iter()
                    .flatten()
                    .map(|&a| T::from_f64(a))
                    .collect();
                let idx = if layout == Layout::TetMajor {
                    let i: Vec<u32> = op.indices.iter().flatten().copied().collect();
                    vec![gpu.upload(&i)?]
                } else {
                    // The offsets, then the far tets' rows (`kernel::d16_indices`).
                    let (near, far) = crate::kernel::d16_indices(&op.indices);
                    let near: Vec<u32> = near.into_iter().flatten().collect();
                    let far: Vec<u32> = far.into_iter().flatten().collect();
                    vec![gpu.upload(&near)?, gpu.upload(&far)?]
                };
                (vec![gpu.upload(&v)?], idx)
            }
            Layout::SlotMajorX4 | Layout::SlotMajorX4D16 => {
                // Pads: value 0, neighbour 0 (x4-d16: themselves, an offset of 0); the ghost moves to
                // padded4(n), past the pads.
                let (np, ghost_at) = (padded4(n), padded4(n) as u32);
                // Tet t's neighbours as the kernel reads them (t past n: a pad).
                let row = |t: usize| -> [u32; 4] {
                    match op.indices.get(t) {
                        Some(r) => r.map(|j| if j as usize == n { ghost_at } else { j }),
                        None if layout == Layout::SlotMajorX4D16 => [t as u32; 4],
                        None => [0; 4],
                    }
                };
                let mut vals = Vec::with_capacity(4);
                for s in 0..4 {
                    let mut v: Vec<T> = op.values.iter().map(|r| T::from_f64(r[s])).collect();
                    v.resize(np, T::from_f64(0.0));
                    vals.push(gpu.upload(&v)?);
                }
                let idx = if layout == Layout::SlotMajorX4D16 {
                    let rows: Vec<[u32; 4]> = (0..np).map(row).collect();
                    let (quads, far) = crate::kernel::d16_quads(&rows);
                    let quads: Vec<u32> = quads.into_iter().flatten().collect();
                    let far: Vec<u32> = far.into_iter().flatten().collect();
                    vec![gpu.upload(&quads)?, gpu.upload(&far)?]
                } else {
                    // One slot at a time: no copy of the whole table beside the operator's.
                    (0..4)
                        .map(|s| gpu.upload(&(0..np).map(|t| row(t)[s]).collect::<Vec<u32>>()))
                        .collect::<std::result::Result<Vec<_>, _>>()?
                };
                (vals, idx)
            }
            Layout::Texture => {
                // Checked above (`misfit_on`): the rows fit the texture side.
                let width = texture_width(n).ok_or_else(|| {
                    FvError::Shape(format!(
                        "{n} tets are more than the texture layout's 8192 × 8192"
                    ))
                })?;
                let v: Vec<[f32; 4]> = op.values.iter().map(|r| r.map(|a| a as f32)).collect();
                textures.push(gpu.upload_texture(TextureFormat::Rgba32Float, width, &v)?);
                textures.push(gpu.upload_texture(TextureFormat::Rgba32Uint, width, &op.indices)?);
                (Vec::new(), Vec::new())
            }
        };
        let (shift, volumes) = match op.boundary {
            Boundary::Dirichlet(v) => (v, None),
            Boundary::ZeroFlux => (0.0, Some(op.volumes.clone())),
        };
        let (len, ghost_at) = if layout.four_tets() {
            (padded4(n) + 4, padded4(n))
        } else {
            (n + 1, n)
        };
        let x = [
            gpu.alloc_filled(len, T::from_f64(0.0))?,
            gpu.alloc_filled(len, T::from_f64(0.0))?,
        ];
        let launches = step_launches::<T>(
            gpu,
            (kind, layout, shape),
            n,
            dt,
            (&vals, &idx, &textures),
            &x,
        )?;
        Ok(Self {
            gpu,
            n,
            shift,
            volumes,
            ghost_at,
            x,
            launches,
            parity: 0,
            kind,
            layout,
            shape,
            dt,
            _keep: (vals, idx, textures),
        })
    }

    /// Makes the step kernel again in `shape` on the same buffers and state, as [`Diffusion::with_shape`] would
    /// have made it: a tuner or the lab times several shapes of one operator without uploading it for each (at
    /// 16.5 M tets a layout's upload is half a gigabyte). x carries on from where it is. Refused, with the
    /// operator unchanged, where [`Diffusion::with_shape`] refuses the shape.
    pub fn reshape(&mut self, shape: Shape) -> Result<()> {
        check_shape(self.gpu, self.kind, self.layout, shape)?;
        let (vals, idx, textures) = &self._keep;
        self.launches = step_launches::<T>(
            self.gpu,
            (self.kind, self.layout, shape),
            self.n,
            self.dt,
            (vals, idx, textures),
            &self.x,
        )?;
        self.shape = shape;
        Ok(())
    }

    /// Step launches (per parity) that update only the tets `rows` (the four-tet layouts: the groups of four
    /// `kernel::quads_of` gives); None for the block-cached kernel, which updates whole blocks, and for no rows.
    pub(crate) fn row_launches(&self, rows: std::ops::Range<usize>) -> Result<Option<[Launch; 2]>> {
        let four = self.layout.four_tets();
        let quads = crate::kernel::quads_of(&rows, self.n);
        if self.kind != KernelKind::Gather || rows.is_empty() || (four && quads.is_empty()) {
            return Ok(None);
        }
        // SAFETY: as for the whole-range kernel in `new`: the same bindings, indices checked ≤ n, and rows within
        // 0..n (four-tet: groups within 0..padded4(n) / 4).
        let kernel = unsafe {
            Kernel::new(
                format!(
                    "fv-gather-{}-{}-{}-rows",
                    self.layout.name(),
                    T::DTYPE.wgsl(),
                    // These launches walk forward whatever the shape (`Shape::alternate`).
                    Shape {
                        alternate: false,
                        ..self.shape
                    }
                    .name()
                    .replace(' ', "-")
                ),
                step_rows_wgsl(
                    self.kind,
                    self.layout,
                    T::DTYPE,
                    self.n,
                    self.dt,
                    rows.clone(),
                    self.shape,
                    false,
                ),
            )
            .without_bounds_checks()
        };
        let tets = if four { 4 * quads.len() } else { rows.len() };
        let grid = self.gpu.grid_for(
            tets as u64,
            self.shape.per_group(self.kind, self.layout),
            self.shape.grid,
        )?;
        let (vals, idx, textures) = &self._keep;
        let prepare = |from: &GpuBuffer<T>, to: &GpuBuffer<T>| -> Result<Launch> {
            let mut args: Vec<Arg<'_>> = textures.iter().map(|t| t.arg()).collect();
            args.extend(vals.iter().map(|b| b.arg()));
            args.extend(idx.iter().map(|b| b.arg()));
            args.push(from.arg());
            if four {
                args.push(from.arg());
            }
            args.push(to.arg());
            Ok(self.gpu.prepare(&kernel, &args, grid)?)
        };
        Ok(Some([
            prepare(&self.x[0], &self.x[1])?,
            prepare(&self.x[1], &self.x[0])?,
        ]))
    }

    /// Sets x (n entries), stored less the steady state it tends to (see `shift`).
    pub fn set_x(&mut self, x: &[f64]) -> Result<()> {
        check_field(x, self.n)?;
        if let Some(vol) = &self.volumes {
            // Exact sums: the same bits in any tet order (an ordering's, a partition's: `DistDiffusion`).
            let (mut m, mut w) = (ExactSum::new(), ExactSum::new());
            for (x, v) in x.iter().zip(vol) {
                m.add(x * v);
                w.add(*v);
            }
            self.shift = m.value() / w.value();
        }
        let shift = self.shift;
        self.upload(x.iter().map(|&a| a - shift))
    }

    /// Sets the stored x to `x` − `shift` as given (n entries): a rank of a distributed run stores the
    /// whole domain's shift, so that its values round as the single domain's do.
    pub(crate) fn set_x_shifted(&mut self, x: &[f64], shift: f64) -> Result<()> {
        if x.len() != self.n {
            return Err(FvError::Shape(format!(
                "{} values for {} tets",
                x.len(),
                self.n
            )));
        }
        self.shift = shift;
        self.upload(x.iter().map(|&a| a - shift))
    }

    /// The state a restart needs to continue bit for bit: the stored values (x − shift as the device holds them, n
    /// entries, each exact in f64) and the shift. x itself, shifted back in f64, would not round back to them.
    pub fn stored(&self) -> Result<(Vec<f64>, f64)> {
        let mut v: Vec<f64> = self
            .gpu
            .read(&self.x[self.parity])?
            .into_iter()
            .map(|a| a.to_f64())
            .collect();
        v.truncate(self.n);
        Ok((v, self.shift))
    }

    /// Restores what [`stored`](Self::stored) returned (n finite values, each rounded to the precision: exact
    /// for values that came from it).
    pub fn set_stored(&mut self, stored: &[f64], shift: f64) -> Result<()> {
        check_field(stored, self.n)?;
        if !shift.is_finite() {
            return Err(FvError::param("shift", shift, "must be finite"));
        }
        self.shift = shift;
        self.upload(stored.iter().copied())
    }

    /// Writes `stored` (n values of x − shift) into the current x, rounded to the precision, zeros past them to
    /// the ghost.
    fn upload(&mut self, stored: impl Iterator<Item = f64>) -> Result<()> {
        let mut v: Vec<T> = Vec::with_capacity(self.ghost_at + 1);
        for (i, a) in stored.enumerate() {
            let t = T::from_f64(a);
            // Past the precision's range it would be ±∞ on the device, and every later value NaN.
            if !t.to_f64().is_finite() {
                return Err(FvError::param(
                    "x",
                    a + self.shift,
                    format!(
                        "entry {i} less the steady state it tends to ({:e}, the Dirichlet value or the mean) is \
                         {a:e}, past {}'s range: use f64",
                        self.shift,
                        T::DTYPE.wgsl()
                    ),
                ));
            }
            v.push(t);
        }
        v.resize(self.ghost_at, T::from_f64(0.0));
        v.push(T::from_f64(0.0));
        self.gpu.write(&self.x[self.parity], 0, &v)?;
        Ok(())
    }

    /// Reads x back (n entries).
    pub fn x(&self) -> Result<Vec<f64>> {
        let (v, shift) = self.stored()?;
        Ok(v.into_iter().map(|a| a + shift).collect())
    }

    /// The launch shape the step runs in.
    pub fn shape(&self) -> Shape {
        self.shape
    }

    /// Runs `k` steps.
    pub fn step(&mut self, k: usize) -> Result<()> {
        self.parity = self.gpu.run_alternating(
            [&self.launches[0], &self.launches[1]],
            self.parity,
            k as u64,
        )?;
        Ok(())
    }

    /// Times `reps` pairs of steps after `warmup` pairs; samples are seconds per pair.
    pub fn time_pairs(&mut self, warmup: usize, reps: usize) -> Result<Timing> {
        let p = self.parity;
        Ok(self
            .gpu
            .time(&[&self.launches[p], &self.launches[1 - p]], warmup, reps)?)
    }

    /// Fills the buffer the next step writes with NaN (ghost kept), so an unwritten entry shows.
    #[doc(hidden)]
    pub fn poison_spare(&self) -> Result<()> {
        let spare = &self.x[1 - self.parity];
        self.gpu.fill(spare, T::nan())?;
        self.gpu.write(spare, self.ghost_at, &[T::from_f64(0.0)])?;
        Ok(())
    }
}

/// Explicit Euler on `op` is stable for 0 < Δt < 1 / max row sum.
pub(crate) fn check_dt(op: &Operator, dt: f64) -> Result<()> {
    check_dt_bound(op.max_row_sum(), dt)
}

/// [`check_dt`] for an operator whose largest row sum is `max_row_sum`.
pub(crate) fn check_dt_bound(max_row_sum: f64, dt: f64) -> Result<()> {
    let bound = 1.0 / max_row_sum;
    if !(dt > 0.0 && dt < bound) {
        return Err(FvError::param(
            "dt",
            dt,
            format!("explicit Euler needs 0 < Δt < 1 / max row sum = {bound:e}"),
        ));
    }
    Ok(())
}

/// A field for `n` tets: n finite values.
pub(crate) fn check_field(x: &[f64], n: usize) -> Result<()> {
    if x.len() != n {
        return Err(FvError::Shape(format!("{} values for {n} tets", x.len())));
    }
    if let Some(i) = x.iter().position(|v| !v.is_finite()) {
        return Err(FvError::param(
            "x",
            x[i],
            format!("entry {i} is not finite"),
        ));
    }
    Ok(())
}

/// Whether `block` is a block the block-cached kernel can run with values of type `T` on `gpu`: a non-zero
/// multiple of the workgroup size whose slice of x fits workgroup memory.
pub fn check_kernel_block<T: Real>(gpu: &Gpu, block: u32) -> Result<()> {
    let bytes = u64::from(block) * T::DTYPE.size() as u64;
    let limit = u64::from(gpu.limits().max_compute_workgroup_storage_size);
    if block == 0 || !block.is_multiple_of(WG) || bytes > limit {
        return Err(FvError::param(
            "block-size",
            block,
            format!(
                "the block-cached kernel needs a multiple of {WG} whose x fits the adapter's {limit} bytes of \
                 workgroup memory"
            ),
        ));
    }
    Ok(())
}
