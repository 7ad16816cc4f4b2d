//! Bind → dispatch: a prepared `Launch` holds bind groups and the (possibly split) grid, so repeated runs
//! only record commands.

use std::sync::Arc;

use bytemuck::Pod;
use wgpu::util::DeviceExt;

use crate::buffer::{GpuBuffer, Window};
use crate::context::Gpu;
use crate::error::{GpuError, Result};
use crate::kernel::Kernel;
use crate::pipeline::CachedPipeline;

/// Batches of a `Gpu::run_n` submitted and unfinished at most: one runs while the next waits queued and a third
/// is recorded.
const IN_FLIGHT: usize = 2;

/// One binding of group 0; argument `i` goes to `@binding(i)`.
#[derive(Clone, Debug)]
pub enum Arg<'a> {
    /// A storage buffer range in bytes.
    Storage {
        buffer: &'a wgpu::Buffer,
        offset: u64,
        size: u64,
    },
    /// Bytes for a `var<uniform>`; the layer makes the buffer.
    Uniform(Vec<u8>),
    /// A texture read with `textureLoad` (a `texture_2d<…>` binding).
    Texture(&'a wgpu::TextureView),
}

impl Arg<'static> {
    /// A uniform argument from a plain-old-data value (mind WGSL's alignment rules when laying it out).
    pub fn uniform<T: Pod>(value: &T) -> Self {
        Arg::Uniform(bytemuck::bytes_of(value).to_vec())
    }
}

impl<T: Pod> GpuBuffer<T> {
    /// The whole buffer as a storage argument.
    pub fn arg(&self) -> Arg<'_> {
        Arg::Storage {
            buffer: &self.raw,
            offset: 0,
            size: self.raw.size(),
        }
    }

    /// Rows `rows` of a row-major array with leading dimension `ld`, clipped to the buffer's length.
    pub fn rows_arg(&self, rows: std::ops::Range<usize>, ld: usize) -> Arg<'_> {
        let start = (rows.start * ld).min(self.len());
        let end = (rows.end * ld).min(self.len());
        self.window_arg(Window {
            offset: start,
            len: end - start,
        })
    }

    /// Elements `w.offset .. w.offset + w.len` as a storage argument (the kernel sees them from index 0).
    pub fn window_arg(&self, w: Window) -> Arg<'_> {
        let elem = size_of::<T>() as u64;
        let size = (w.len as u64 * elem).div_ceil(4) * 4;
        Arg::Storage {
            buffer: &self.raw,
            offset: w.offset as u64 * elem,
            size,
        }
    }
}

/// A logical grid of workgroups. Past the per-dimension limit it is split into several dispatches; the kernel
/// must then include [`crate::GRID_WGSL`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Grid {
    pub x: u32,
    pub y: u32,
    pub z: u32,
}

impl Grid {
    pub fn d1(x: u32) -> Self {
        Self { x, y: 1, z: 1 }
    }
    pub fn d2(x: u32, y: u32) -> Self {
        Self { x, y, z: 1 }
    }
    pub fn d3(x: u32, y: u32, z: u32) -> Self {
        Self { x, y, z }
    }
    /// Enough 1-D workgroups of `per_group` items to cover `items`.
    pub fn cover(items: u64, per_group: u32) -> Result<Self> {
        let n = items.div_ceil(u64::from(per_group.max(1)));
        let x = u32::try_from(n).map_err(|_| GpuError::LimitExceeded {
            what: format!("workgroups to cover {items} items at {per_group} per workgroup"),
            asked: n,
            max: u64::from(u32::MAX),
        })?;
        Ok(Self::d1(x))
    }
    /// Enough workgroups of `per_group` items to cover `items`, laid out in rows of at most `row` workgroups (a
    /// 2-D grid): past the per-dimension limit ([`Gpu::max_workgroups_per_dimension`] as `row`) the grid stays
    /// one dispatch, where [`Grid::cover`]'s 1-D grid is split into several, each a barrier apart. The kernel
    /// addresses it with `bespoke_workgroup_linear` and returns early in the workgroups past `items`.
    ///
    /// As few rows as `row` allows, of equal length: fewer than one surplus workgroup per row. Rows of `row` each
    /// left up to a whole row idle — 65 536 workgroups made two rows of 65 535, 65 534 of them empty, and the
    /// f32 in-place D2Q9 step at 2048² (workgroups of 64) took 1.8× as long on lavapipe as on the split 1-D grid;
    /// at 8192² (17 rows) 6 % of an H200's workgroups returned at once.
    pub fn rows(items: u64, per_group: u32, row: u32) -> Result<Self> {
        let n = items.div_ceil(u64::from(per_group.max(1)));
        let rows = n.div_ceil(u64::from(row.max(1)));
        let x = n.div_ceil(rows.max(1)).max(1);
        let y = n.div_ceil(x);
        let fit = |v: u64| {
            u32::try_from(v).map_err(|_| GpuError::LimitExceeded {
                what: format!(
                    "rows of {x} workgroups to cover {items} items at {per_group} per workgroup"
                ),
                asked: v,
                max: u64::from(u32::MAX),
            })
        };
        Ok(Self::d2(fit(x)?, fit(y)?))
    }
    pub fn total(&self) -> u64 {
        u64::from(self.x) * u64::from(self.y) * u64::from(self.z)
    }
}

/// How [`Gpu::grid_for`] lays out a 1-D range of workgroups.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize,
)]
pub enum GridLayout {
    /// Rows of the adapter's per-dimension limit ([`Grid::rows`]): one dispatch at any size.
    #[default]
    Rows,
    /// One row ([`Grid::cover`]), split into a dispatch per `max_compute_workgroups_per_dimension` workgroups,
    /// each a barrier apart: what every step kernel did until 2026-11-26 (the lab's comparison).
    Split,
    /// Rows of this many workgroups (tests: a 2-D grid at sizes a CPU adapter runs).
    RowsOf(u32),
}

/// A kernel bound to its arguments over a grid, ready to be recorded any number of times.
#[derive(Debug)]
pub struct Launch {
    pipeline: Arc<CachedPipeline>,
    group0: Option<wgpu::BindGroup>,
    /// One entry per hardware dispatch: the grid-origin bind group (if the kernel has one) and the counts.
    parts: Vec<(Option<wgpu::BindGroup>, [u32; 3])>,
}

impl Launch {
    pub fn name(&self) -> &str {
        &self.pipeline.name
    }
    /// How many hardware dispatches the logical grid became.
    pub fn dispatch_count(&self) -> usize {
        self.parts.len()
    }
    /// The same pipeline and bindings over one workgroup, the grid's first: a driver that compiles a pipeline
    /// at its first dispatch (llvmpipe) compiles it there, at almost no cost of the kernel's own, so that the
    /// first full run after it times the kernel rather than its compile.
    pub fn one_group(&self) -> Launch {
        Launch {
            pipeline: self.pipeline.clone(),
            group0: self.group0.clone(),
            parts: self
                .parts
                .first()
                .map(|(origin, _)| (origin.clone(), [1, 1, 1]))
                .into_iter()
                .collect(),
        }
    }
    pub(crate) fn record(&self, pass: &mut wgpu::ComputePass<'_>) {
        pass.set_pipeline(&self.pipeline.pipeline);
        if let Some(g) = &self.group0 {
            pass.set_bind_group(0, g, &[]);
        }
        for (grid_bg, [x, y, z]) in &self.parts {
            if let Some(b) = grid_bg {
                pass.set_bind_group(1, b, &[]);
            }
            pass.dispatch_workgroups(*x, *y, *z);
        }
    }
}

/// Splits `0..n` into ranges of at most `max`.
fn split(n: u32, max: u32) -> Vec<(u32, u32)> {
    (0..n.div_ceil(max))
        .map(|i| (i * max, max.min(n - i * max)))
        .collect()
}

impl Gpu {
    /// Workgroups of `per_group` items covering `items`, laid out as `layout` says.
    pub fn grid_for(&self, items: u64, per_group: u32, layout: GridLayout) -> Result<Grid> {
        match layout {
            GridLayout::Rows => Grid::rows(items, per_group, self.max_workgroups_per_dimension()),
            GridLayout::Split => Grid::cover(items, per_group),
            GridLayout::RowsOf(row) => Grid::rows(items, per_group, row),
        }
    }

    /// The most workgroups a dispatch has along one dimension (65 535 on most adapters).
    pub fn max_workgroups_per_dimension(&self) -> u32 {
        self.limits.max_compute_workgroups_per_dimension
    }

    /// Compiles (or fetches) `kernel`, binds `args` and plans the grid.
    pub fn prepare(&self, kernel: &Kernel, args: &[Arg<'_>], grid: Grid) -> Result<Launch> {
        let pipeline = self.pipeline(kernel)?;
        let max = self.limits.max_compute_workgroups_per_dimension;
        let oversize = grid.x > max || grid.y > max || grid.z > max;
        if oversize && !pipeline.uses_grid {
            return Err(GpuError::LimitExceeded {
                what: format!(
                    "workgroups per dimension for kernel `{}` (grid {}×{}×{}); prepend bespoke_gpu::GRID_WGSL \
                     to let the grid be split",
                    kernel.name(),
                    grid.x,
                    grid.y,
                    grid.z
                ),
                asked: u64::from(grid.x.max(grid.y).max(grid.z)),
                max: u64::from(max),
            });
        }
        for (i, a) in args.iter().enumerate() {
            if let Arg::Storage { offset, size, .. } = a {
                if *size > self.binding_limit {
                    return Err(GpuError::LimitExceeded {
                        what: format!(
                            "binding {i} of kernel `{}` in bytes (split it with Gpu::windows)",
                            kernel.name()
                        ),
                        asked: *size,
                        max: self.binding_limit,
                    });
                }
                let align = u64::from(self.limits.min_storage_buffer_offset_alignment);
                if !offset.is_multiple_of(align) {
                    return Err(GpuError::InvalidArgument(format!(
                        "binding {i} of kernel `{}` starts at byte {offset}, not a multiple of the adapter's \
                         storage offset alignment {align}",
                        kernel.name()
                    )));
                }
            }
        }

        let context = format!("binding the arguments of kernel `{}`", kernel.name());
        let (group0, parts) = self.scoped(&context, || {
            let uniforms: Vec<Option<wgpu::Buffer>> =
                args.iter()
                    .map(|a| match a {
                        Arg::Uniform(bytes) => {
                            let mut padded = bytes.clone();
                            padded.resize(bytes.len().div_ceil(16).max(1) * 16, 0);
                            Some(self.device.create_buffer_init(
                                &wgpu::util::BufferInitDescriptor {
                                    label: Some("kernel uniform"),
                                    contents: &padded,
                                    usage: wgpu::BufferUsages::UNIFORM,
                                },
                            ))
                        }
                        Arg::Storage { .. } | Arg::Texture(_) => None,
                    })
                    .collect();
            let entries: Vec<wgpu::BindGroupEntry<'_>> = args
                .iter()
                .zip(&uniforms)
                .enumerate()
                .map(|(i, (a, u))| wgpu::BindGroupEntry {
                    binding: i as u32,
                    resource: match (a, u) {
                        (
                            Arg::Storage {
                                buffer,
                                offset,
                                size,
                            },
                            _,
                        ) => wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                            buffer,
                            offset: *offset,
                            size: wgpu::BufferSize::new(*size),
                        }),
                        (Arg::Uniform(_), Some(u)) => u.as_entire_binding(),
                        (Arg::Texture(view), _) => wgpu::BindingResource::TextureView(view),
                        (Arg::Uniform(_), None) => {
                            unreachable!("every uniform argument has a buffer")
                        }
                    },
                })
                .collect();
            let group0 = (!entries.is_empty()).then(|| {
                self.device.create_bind_group(&wgpu::BindGroupDescriptor {
                    label: Some(kernel.name()),
                    layout: &pipeline.pipeline.get_bind_group_layout(0),
                    entries: &entries,
                })
            });
            let parts = self.plan_grid(&pipeline, grid);
            (group0, parts)
        })?;
        Ok(Launch {
            pipeline,
            group0,
            parts,
        })
    }

    fn plan_grid(
        &self,
        pipeline: &CachedPipeline,
        grid: Grid,
    ) -> Vec<(Option<wgpu::BindGroup>, [u32; 3])> {
        if grid.total() == 0 {
            return Vec::new();
        }
        let max = self.limits.max_compute_workgroups_per_dimension;
        if !pipeline.uses_grid {
            return vec![(None, [grid.x, grid.y, grid.z])];
        }
        let boxes: Vec<[(u32, u32); 3]> = split(grid.z, max)
            .into_iter()
            .flat_map(|z| split(grid.y, max).into_iter().map(move |y| (y, z)))
            .flat_map(|(y, z)| split(grid.x, max).into_iter().map(move |x| [x, y, z]))
            .collect();
        // One uniform buffer holds every part's origin, each at an aligned offset.
        let stride = u64::from(self.limits.min_uniform_buffer_offset_alignment).max(32);
        let mut bytes = vec![0u8; boxes.len() * stride as usize];
        for (i, b) in boxes.iter().enumerate() {
            let words = [b[0].0, b[1].0, b[2].0, 0, grid.x, grid.y, grid.z, 0];
            bytes[i * stride as usize..][..32].copy_from_slice(bytemuck::cast_slice(&words));
        }
        let origins = self
            .device
            .create_buffer_init(&wgpu::util::BufferInitDescriptor {
                label: Some("grid origins"),
                contents: &bytes,
                usage: wgpu::BufferUsages::UNIFORM,
            });
        let layout = pipeline.pipeline.get_bind_group_layout(1);
        boxes
            .iter()
            .enumerate()
            .map(|(i, b)| {
                let bg = self.device.create_bind_group(&wgpu::BindGroupDescriptor {
                    label: Some("grid origin"),
                    layout: &layout,
                    entries: &[wgpu::BindGroupEntry {
                        binding: 0,
                        resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                            buffer: &origins,
                            offset: i as u64 * stride,
                            size: wgpu::BufferSize::new(32),
                        }),
                    }],
                });
                (Some(bg), [b[0].1, b[1].1, b[2].1])
            })
            .collect()
    }

    /// Records `launches` in order, `times` times over, and waits for them. Work is submitted in batches so a
    /// long run (e.g. thousands of time steps) never builds one huge command buffer; nothing is read back. At
    /// most two batches are submitted and unfinished at once: a queue accepts submissions as fast as
    /// the host records them whatever the device's pace, and a run of 10⁹ short steps would otherwise hold
    /// millions of command buffers before its end (llvmpipe's queue blocks by itself; a GPU driver's need not).
    pub fn run_n(&self, launches: &[&Launch], times: usize) -> Result<()> {
        const BATCH: usize = 256;
        let mut in_flight = std::collections::VecDeque::with_capacity(IN_FLIGHT + 1);
        let mut done = 0;
        while done < times {
            let n = BATCH.min(times - done);
            let mut enc = self.device.create_command_encoder(&Default::default());
            {
                let mut pass = enc.begin_compute_pass(&Default::default());
                for _ in 0..n {
                    for l in launches {
                        l.record(&mut pass);
                    }
                }
            }
            if in_flight.len() == IN_FLIGHT {
                // The device still has the newer batch queued while this one is recorded and submitted.
                self.wait(in_flight.pop_front(), "running kernels")?;
            }
            in_flight.push_back(self.submit_commands([enc.finish()]));
            done += n;
            self.check_async_errors("submitting kernels")?;
        }
        self.wait(in_flight.pop_back(), "running kernels")
    }

    /// Runs `steps` launches alternating between `pair[first]` and `pair[1 - first]` (ping-pong buffers or
    /// even/odd kernels), batched like [`Gpu::run_n`]; returns the index in `pair` that runs next.
    pub fn run_alternating(&self, pair: [&Launch; 2], first: usize, steps: u64) -> Result<usize> {
        let first = first & 1;
        let pairs = usize::try_from(steps / 2).map_err(|_| {
            GpuError::InvalidArgument(format!("{steps} steps do not fit this platform's usize"))
        })?;
        if pairs > 0 {
            self.run_n(&[pair[first], pair[1 - first]], pairs)?;
        }
        if steps % 2 == 1 {
            self.run(&[pair[first]])?;
            return Ok(1 - first);
        }
        Ok(first)
    }

    /// Records `launches` once, in order, and waits.
    pub fn run(&self, launches: &[&Launch]) -> Result<()> {
        self.run_n(launches, 1)
    }
}

#[cfg(test)]
mod tests {
    use super::{Grid, split};

    #[test]
    fn split_covers_exactly() {
        assert_eq!(split(10, 4), vec![(0, 4), (4, 4), (8, 2)]);
        assert_eq!(split(65535, 65535), vec![(0, 65535)]);
        assert_eq!(split(65536, 65535), vec![(0, 65535), (65535, 1)]);
        assert!(split(0, 7).is_empty());
    }

    #[test]
    fn rows_are_few_and_even() {
        // 1 048 576 workgroups (8192² cells at 64 each) under a limit of 65 535: 17 rows of 61 681, one surplus.
        let g = Grid::rows(8192 * 8192, 64, 65535).unwrap();
        assert_eq!((g.x, g.y, g.z), (61681, 17, 1));
        assert_eq!(g.total() - (1 << 20), 1);
        // 65 536 (2048² at 64): two rows of 32 768, none idle (two rows of 65 535 left 65 534 idle).
        assert_eq!(
            Grid::rows(2048 * 2048, 64, 65535).unwrap(),
            Grid::d2(32768, 2)
        );
        assert_eq!(Grid::rows(100, 64, 65535).unwrap(), Grid::d2(2, 1));
        assert_eq!(Grid::rows(0, 64, 7).unwrap(), Grid::d2(1, 0));
        assert_eq!(Grid::rows(64 * 15, 64, 7).unwrap(), Grid::d2(5, 3));
        assert_eq!(Grid::rows(64 * 16, 64, 7).unwrap(), Grid::d2(6, 3));
        // Every count up to a few rows: the fewest rows within the limit, covering, fewer idle than rows.
        for row in [1u32, 2, 7, 64] {
            for n in 1..=5 * u64::from(row) {
                let g = Grid::rows(n, 1, row).unwrap();
                assert!(
                    g.x <= row && u64::from(g.y) == n.div_ceil(u64::from(row)),
                    "{n} {row} {g:?}"
                );
                assert!(
                    g.total() >= n && g.total() - n < u64::from(g.y),
                    "{n} {row} {g:?}"
                );
            }
        }
    }
}
