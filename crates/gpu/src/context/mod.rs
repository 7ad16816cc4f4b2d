//! The `Gpu` context: adapter choice, device with the adapter's own limits and optional features, info.
//! `options.rs` holds what opens one and what it reports, `adapters.rs` the adapter list, `close.rs` the serial
//! close.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use crate::disk::{DiskCache, Lookup};
use crate::error::{GpuError, Result};
use crate::kernel::Kernel;
use crate::pipeline::{CachedPipeline, CompileTarget, PipelineCache};

mod adapters;
mod close;
mod options;

pub use adapters::{AdapterSummary, list_adapters};
use close::{CloseDone, CloseTurn};
pub use options::{
    AdapterClass, GpuInfo, GpuOptions, KernelLimits, LimitsProfile, Quirks, WANTED_FEATURES,
    env_flag,
};

/// One opened device plus everything kernels share: the pipeline cache and the error sink.
pub struct Gpu {
    /// Dropped first: waits for this process's turn to close a device (see [`CloseTurn`]).
    _close_turn: CloseTurn,
    pub(crate) device: wgpu::Device,
    pub(crate) queue: wgpu::Queue,
    pub(crate) adapter_info: wgpu::AdapterInfo,
    pub(crate) features: wgpu::Features,
    /// What a downlevel backend lacks (e.g. GL without f16 packing); validation honours it.
    pub(crate) downlevel: wgpu::DownlevelFlags,
    pub(crate) limits: wgpu::Limits,
    pub(crate) binding_limit: u64,
    /// `GpuOptions::adapter_class`, or the adapter's own.
    pub(crate) class: AdapterClass,
    pub(crate) quirks: Quirks,
    /// What the options emulate, appended to [`Gpu::adapter_key`] so that tuned choices made under an
    /// emulation never key the adapter's own (empty: none).
    pub(crate) emulation: String,
    pipelines: PipelineCache,
    pub(crate) driver_cache: Option<wgpu::PipelineCache>,
    /// Bytes written through the queue since the last flush (`Gpu::write`).
    pub(crate) staged: std::sync::atomic::AtomicU64,
    /// Errors wgpu raised outside an error scope, and device loss; checked after every wait.
    pub(crate) async_errors: Arc<Mutex<Vec<String>>>,
    pub(crate) lost: Arc<Mutex<Option<String>>>,
    /// Until when the clocks count as raised by the heater's last run (`Gpu::time`).
    pub(crate) warm_until: Mutex<Option<std::time::Instant>>,
    /// Seconds per launch of the heater's fastest batch seen on this device (`heater.rs`; None before its first
    /// warm-up); the lock is held while the heater runs.
    pub(crate) heater_fastest: Mutex<Option<f64>>,
    /// `GpuOptions::skip_warm_up`.
    skip_warm_up: bool,
    /// `GpuOptions::refuse_pipelines`.
    refuse_pipelines: Option<String>,
    /// The copy probe's walk, chosen once per device (`copy_bandwidth`): a choice remade at every call from a few
    /// noisy runs picked the blocked walk now and then on an H200, whose copies then read 1200–1700 GB/s, not 4000.
    pub(crate) copy_variant: Mutex<Option<crate::copy_walk::CopyVariant>>,
    /// Whether conversions to f16 round to nearest even here, once measured (`Gpu::rounds_f16_to_nearest_even`).
    pub(crate) f16_nearest: Mutex<Option<bool>>,
    /// Opened for a rank (`GpuOptions::node_rank`): the machine's adapters of this one's kind, which its ranks
    /// take in turn.
    rank_adapters: Option<usize>,
    /// Dropped last: the next device may close.
    _close_done: CloseDone,
}

impl std::fmt::Debug for Gpu {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gpu")
            .field("adapter", &self.adapter_info.name)
            .finish_non_exhaustive()
    }
}

impl Gpu {
    /// Opens the best adapter: `WGPU_BACKEND` / `WGPU_ADAPTER_NAME` (name or PCI bus id) if set, else discrete over
    /// integrated over CPU, GPUs in PCI bus order.
    pub fn new() -> Result<Self> {
        Self::with_options(GpuOptions::default())
    }

    pub fn with_options(opts: GpuOptions) -> Result<Self> {
        pollster::block_on(Self::open(opts))
    }

    async fn open(opts: GpuOptions) -> Result<Self> {
        let desc = wgpu::InstanceDescriptor::new_without_display_handle_from_env();
        let backends = desc.backends;
        let instance = wgpu::Instance::new(desc);
        let mut adapters = instance.enumerate_adapters(backends).await;
        let infos: Vec<wgpu::AdapterInfo> = adapters.iter().map(wgpu::Adapter::get_info).collect();
        let seen: Vec<String> = infos
            .iter()
            .map(|i| match i.device_pci_bus_id.as_str() {
                "" => format!("{} ({:?})", i.name, i.backend),
                bus => format!("{} ({:?}, {bus})", i.name, i.backend),
            })
            .collect();
        let wanted_name = opts.adapter_name.clone().or_else(|| {
            std::env::var("WGPU_ADAPTER_NAME")
                .ok()
                .filter(|s| !s.is_empty())
        });
        let order = adapters::preference(&infos, wanted_name.as_deref(), opts.node_rank);
        let rank_adapters = opts.node_rank.map(|_| order.len());
        let pick = order.first().copied();
        let adapter = pick.map(|i| adapters.swap_remove(i));
        let Some(adapter) = adapter else {
            let mut detail = format!("backends tried: {backends:?}");
            if let Some(name) = wanted_name {
                detail += &format!("; none named like `{name}` among [{}]", seen.join(", "));
            }
            return Err(GpuError::NoAdapter { detail });
        };

        let info = adapter.get_info();
        let downlevel = adapter.get_downlevel_capabilities().flags;
        let wanted = WANTED_FEATURES
            .iter()
            .fold(wgpu::Features::empty(), |acc, (f, _)| acc | *f);
        let without = opts.without_features
            | options::features_off_from_env().map_err(GpuError::InvalidArgument)?;
        let features = adapter.features() & wanted & !without;
        // The defaults (256 invocations, 16 KiB workgroup memory, 256 MiB buffers) are far below real hardware.
        let profile = match opts.limits {
            Some(p) => Some(p),
            None => options::limits_from_env().map_err(GpuError::InvalidArgument)?,
        };
        let mut limits = match profile {
            Some(p) => p.hold(adapter.limits()),
            None => adapter.limits(),
        };
        // Keyed only where the profile lowered something (as a feature taken away, below).
        let held_to = profile.filter(|_| limits != adapter.limits());
        if let Some(u) = opts.max_uniform_binding_bytes {
            limits.max_uniform_buffer_binding_size =
                limits.max_uniform_buffer_binding_size.min(u.max(256));
        }
        if let Some(b) = opts.max_buffer_bytes {
            limits.max_buffer_size = limits.max_buffer_size.min(b.max(1 << 16));
            limits.max_storage_buffer_binding_size = limits
                .max_storage_buffer_binding_size
                .min(limits.max_buffer_size);
        }
        if let Some(n) = opts.max_storage_buffers_per_stage {
            limits.max_storage_buffers_per_shader_stage =
                limits.max_storage_buffers_per_shader_stage.min(n.max(4));
        }
        let (device, queue) = adapter
            .request_device(&wgpu::DeviceDescriptor {
                label: Some("bespoke"),
                required_features: features,
                required_limits: limits.clone(),
                memory_hints: wgpu::MemoryHints::Performance,
                ..Default::default()
            })
            .await
            .map_err(|e| GpuError::RequestDevice {
                adapter: info.name.clone(),
                message: e.to_string(),
            })?;

        let async_errors = Arc::new(Mutex::new(Vec::new()));
        let sink = async_errors.clone();
        // Without a handler wgpu panics on an uncaptured error; we turn it into an Err at the next wait.
        device.on_uncaptured_error(Arc::new(move |e: wgpu::Error| {
            if let Ok(mut v) = sink.lock() {
                v.push(e.to_string());
            }
        }));
        let lost = Arc::new(Mutex::new(None));
        let lost_sink = lost.clone();
        device.set_device_lost_callback(move |reason, msg| {
            if reason != wgpu::DeviceLostReason::Destroyed
                && let Ok(mut l) = lost_sink.lock()
            {
                *l = Some(format!("{reason:?}: {msg}"));
            }
        });

        let device_binding = limits
            .max_storage_buffer_binding_size
            .min(limits.max_buffer_size);
        let binding_limit = opts
            .max_binding_bytes
            .map_or(device_binding, |b| b.min(device_binding))
            .max(256);

        let class = opts.adapter_class.unwrap_or(match info.device_type {
            wgpu::DeviceType::Cpu => AdapterClass::Cpu,
            _ => AdapterClass::Gpu,
        });
        let mut emulation = String::new();
        if let Some(b) = opts.max_binding_bytes {
            emulation += &format!("-binding{b}");
        }
        if let Some(u) = opts.max_uniform_binding_bytes {
            emulation += &format!("-uniform{u}");
        }
        if let Some(b) = opts.max_buffer_bytes {
            emulation += &format!("-maxbuf{b}");
        }
        if let Some(n) = opts.max_storage_buffers_per_stage {
            emulation += &format!("-sbufs{n}");
        }
        if let Some(p) = held_to {
            emulation += &format!("-limits{}", p.name());
        }
        if opts.adapter_class.is_some() {
            emulation += &format!("-as{class:?}");
        }
        let quirks = opts
            .quirks
            .or(options::quirks_from_env().map_err(GpuError::InvalidArgument)?);
        emulation += &quirks.tag();
        if opts.skip_warm_up {
            emulation += "-nowarm";
        }
        if let Some(p) = &opts.refuse_pipelines {
            let tag: String = p.chars().filter(|c| c.is_ascii_alphanumeric()).collect();
            emulation += &format!("-refuse{tag}");
        }
        // Only what the adapter had and the device lacks: an option that takes away nothing keys nothing.
        let taken = adapter.features() & wanted & without;
        for (f, name) in WANTED_FEATURES {
            if taken.contains(*f) {
                emulation += &format!("-no{name}");
            }
        }
        let mut gpu = Self {
            device,
            queue,
            class,
            emulation,
            quirks,
            adapter_info: info,
            features,
            downlevel,
            limits,
            binding_limit,
            pipelines: PipelineCache::default(),
            staged: std::sync::atomic::AtomicU64::new(0),
            driver_cache: None,
            async_errors,
            lost,
            warm_until: Mutex::new(None),
            heater_fastest: Mutex::new(None),
            skip_warm_up: opts.skip_warm_up,
            refuse_pipelines: opts.refuse_pipelines.clone(),
            copy_variant: Mutex::new(None),
            f16_nearest: Mutex::new(None),
            rank_adapters,
            _close_turn: CloseTurn,
            _close_done: CloseDone,
        };
        if opts.persist_pipeline_cache {
            gpu.driver_cache = gpu.load_driver_cache();
        }
        Ok(gpu)
    }

    pub fn device(&self) -> &wgpu::Device {
        &self.device
    }
    pub fn queue(&self) -> &wgpu::Queue {
        &self.queue
    }
    pub fn features(&self) -> wgpu::Features {
        self.features
    }
    pub fn limits(&self) -> &wgpu::Limits {
        &self.limits
    }
    pub fn has_f64(&self) -> bool {
        self.features.contains(wgpu::Features::SHADER_F64)
    }
    pub fn has_f16(&self) -> bool {
        self.features.contains(wgpu::Features::SHADER_F16)
    }
    pub fn has_timestamps(&self) -> bool {
        self.features.contains(wgpu::Features::TIMESTAMP_QUERY)
    }
    pub fn has_subgroups(&self) -> bool {
        self.features.contains(wgpu::Features::SUBGROUP)
    }
    /// Largest byte size one storage binding may have (what chunking splits by).
    pub fn binding_limit(&self) -> u64 {
        self.binding_limit
    }
    /// A software rasteriser on the host CPU (llvmpipe, WARP, SwiftShader): one workgroup runs on one thread.
    /// `GpuOptions::adapter_class` overrides it (tests of a choice's other branch).
    pub fn is_cpu(&self) -> bool {
        self.class == AdapterClass::Cpu
    }
    /// Whether timings first raise the clocks (`Gpu::time`'s warm-up): a GPU's, unless opened with
    /// `GpuOptions::skip_warm_up`; never a CPU adapter's.
    pub fn warms_up(&self) -> bool {
        !self.is_cpu() && !self.skip_warm_up
    }
    /// Whether the device was opened with `GpuOptions::skip_warm_up` (whatever its class).
    pub fn skips_warm_up(&self) -> bool {
        self.skip_warm_up
    }
    /// The driver behaviours this device emulates (`GpuOptions::quirks`; none unless asked for).
    pub fn quirks(&self) -> Quirks {
        self.quirks
    }
    /// Opened for a rank of a distributed run (`GpuOptions::node_rank`): how many adapters of this one's kind
    /// the machine has, which the ranks on it take in turn (more ranks than that share them); None otherwise.
    pub fn rank_adapters(&self) -> Option<usize> {
        self.rank_adapters
    }

    pub fn adapter_name(&self) -> &str {
        &self.adapter_info.name
    }

    /// naga capabilities matching the device's features, for validating kernels before pipeline creation.
    pub fn naga_capabilities(&self) -> naga::valid::Capabilities {
        wgpu_naga_bridge::features_to_naga_capabilities(self.features, self.downlevel)
    }

    pub fn info(&self) -> GpuInfo {
        let l = &self.limits;
        let i = &self.adapter_info;
        GpuInfo {
            name: i.name.clone(),
            backend: format!("{:?}", i.backend).to_lowercase(),
            device_type: format!("{:?}", i.device_type),
            driver: if i.driver.is_empty() {
                i.driver_info.clone()
            } else {
                i.driver.clone()
            },
            driver_info: i.driver_info.clone(),
            pci_bus_id: i.device_pci_bus_id.clone(),
            features: WANTED_FEATURES
                .iter()
                .filter(|(f, _)| self.features.contains(*f))
                .map(|(_, n)| *n)
                .collect(),
            limits: KernelLimits {
                max_buffer_size: l.max_buffer_size,
                max_storage_buffer_binding_size: l.max_storage_buffer_binding_size,
                max_uniform_buffer_binding_size: l.max_uniform_buffer_binding_size,
                max_storage_buffers_per_shader_stage: l.max_storage_buffers_per_shader_stage,
                max_compute_invocations_per_workgroup: l.max_compute_invocations_per_workgroup,
                max_compute_workgroup_size: [
                    l.max_compute_workgroup_size_x,
                    l.max_compute_workgroup_size_y,
                    l.max_compute_workgroup_size_z,
                ],
                max_compute_workgroup_storage_size: l.max_compute_workgroup_storage_size,
                max_compute_workgroups_per_dimension: l.max_compute_workgroups_per_dimension,
                min_storage_buffer_offset_alignment: l.min_storage_buffer_offset_alignment,
                min_uniform_buffer_offset_alignment: l.min_uniform_buffer_offset_alignment,
                max_immediate_size: l.max_immediate_size,
                subgroup_min_size: i.subgroup_min_size,
                subgroup_max_size: i.subgroup_max_size,
            },
            binding_limit: self.binding_limit,
        }
    }

    /// Per-user cache folder for this project (`BESPOKE_CACHE_DIR`, else `$XDG_CACHE_HOME/bespoke`, else
    /// `~/.cache/bespoke`). Later crates keep per-adapter tuning results here.
    pub fn cache_dir() -> Option<PathBuf> {
        crate::disk::user_cache_dir()
    }

    /// Returns the compiled pipeline for `kernel`, compiling it on first use.
    pub fn pipeline(&self, kernel: &Kernel) -> Result<Arc<CachedPipeline>> {
        Ok(self.compile(kernel)?.0)
    }

    /// [`Gpu::pipeline`], and whether this call compiled it (false: it was cached), so that a caller can count
    /// the compile time it caused whatever other threads compile meanwhile.
    pub fn compile(&self, kernel: &Kernel) -> Result<(Arc<CachedPipeline>, bool)> {
        if let Some(p) = self.refuse_pipelines.as_deref()
            && kernel.name().contains(p)
        {
            return Err(GpuError::Wgpu {
                context: format!("creating the pipeline of `{}`", kernel.name()),
                message: format!(
                    "the driver refused it (emulated: GpuOptions::refuse_pipelines `{p}`)"
                ),
            });
        }
        let target = CompileTarget {
            device: &self.device,
            caps: self.naga_capabilities(),
            driver_cache: self.driver_cache.as_ref(),
            adapter: &self.adapter_info.name,
            limits: &self.limits,
            poison_workgroup_memory: self.quirks.stale_workgroup_memory,
            reverse_workgroups: self.quirks.reversed_workgroups,
            reverse_invocations: self.quirks.reversed_invocations,
            fuse_multiply_add: self.quirks.fuses_multiply_add,
            flush_subnormals: self.quirks.flushes_subnormals,
            inexact_division: self.quirks.divides_inexactly,
            wrap_out_of_bounds: self.quirks.wraps_out_of_bounds,
            pack_toward_zero: self.quirks.packs_toward_zero,
        };
        self.pipelines.get_or_compile(&target, kernel)
    }

    /// Compiles `kernels` on every core (a sweep's or a tuner's candidates before they are timed one by one, so
    /// the timing loop finds them compiled: a driver's compiler, not the device, is what a long candidate list
    /// waits for). Returns how many this call compiled; a kernel that fails is left out, and reports its error
    /// where it is used.
    pub fn compile_all(&self, kernels: &[Kernel]) -> usize {
        let threads = std::thread::available_parallelism().map_or(1, usize::from);
        self.compile_each(kernels, threads)
            .iter()
            .filter(|r| matches!(r, Ok(Some(_))))
            .count()
    }

    /// Compiles `kernels` on `threads` workers at once (at least one, at most one a kernel), each taking the next
    /// kernel not yet taken. For each kernel, in order: the seconds its compile took on its worker (naga's
    /// validation and the driver's pipeline creation: [`CachedPipeline`]) where this call compiled it, `None`
    /// where it was compiled before, or its error. A kernel listed twice is compiled once: the second finds it
    /// cached, or, if both workers took it at once, compiles it again and keeps one. On a driver that compiles
    /// at pipeline creation (a GPU's) the seconds are the compile; one that compiles at the first dispatch
    /// (llvmpipe) does the rest there, on its queue's thread.
    pub fn compile_each(&self, kernels: &[Kernel], threads: usize) -> Vec<Result<Option<f64>>> {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let next = AtomicUsize::new(0);
        let threads = threads.clamp(1, kernels.len().max(1));
        let done: Vec<Vec<(usize, Result<Option<f64>>)>> = std::thread::scope(|s| {
            let workers: Vec<_> = (0..threads)
                .map(|_| {
                    s.spawn(|| {
                        let mut done = Vec::new();
                        loop {
                            let i = next.fetch_add(1, Ordering::Relaxed);
                            let Some(k) = kernels.get(i) else {
                                return done;
                            };
                            let r = self.compile(k).map(|(p, compiled)| {
                                compiled.then_some(p.validate_seconds + p.create_seconds)
                            });
                            done.push((i, r));
                        }
                    })
                })
                .collect();
            workers
                .into_iter()
                .map(|w| w.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
                .collect()
        });
        let mut out: Vec<Option<Result<Option<f64>>>> = (0..kernels.len()).map(|_| None).collect();
        for (i, r) in done.into_iter().flatten() {
            out[i] = Some(r);
        }
        out.into_iter().map(|r| r.unwrap_or(Ok(None))).collect()
    }

    /// Number of distinct kernels compiled so far.
    pub fn cached_pipelines(&self) -> usize {
        self.pipelines.len()
    }

    /// What this device emulates (`GpuOptions`' lowered limits, adapter class, quirks, features taken away,
    /// `BESPOKE_LIMITS`, `BESPOKE_QUIRKS`, `BESPOKE_WITHOUT_FEATURES`), as the suffix [`Gpu::adapter_key`] carries:
    /// `-limitswebgpu-stalewg`; empty for the adapter as it is.
    pub fn emulation(&self) -> &str {
        &self.emulation
    }

    /// A string that names this adapter and driver, for keying on-disk caches.
    pub fn adapter_key(&self) -> String {
        let i = &self.adapter_info;
        let raw = format!(
            "{}-{:?}-{}-{}-{}{}",
            i.name, i.backend, i.vendor, i.device, i.driver_info, self.emulation
        );
        raw.chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                    c
                } else {
                    '_'
                }
            })
            .collect()
    }

    /// Returns Err if the device was lost or wgpu raised an error since the last check.
    pub(crate) fn check_async_errors(&self, context: &str) -> Result<()> {
        if let Some(reason) = self.lost.lock().ok().and_then(|l| l.clone()) {
            return Err(GpuError::DeviceLost(reason));
        }
        let errors: Vec<String> = self
            .async_errors
            .lock()
            .map(|mut v| std::mem::take(&mut *v))
            .unwrap_or_default();
        if errors.is_empty() {
            Ok(())
        } else {
            Err(GpuError::Wgpu {
                context: context.to_owned(),
                message: errors.join("; "),
            })
        }
    }

    /// Runs `f` inside validation and out-of-memory error scopes and turns a captured error into `Err`.
    pub(crate) fn scoped<T>(&self, context: &str, f: impl FnOnce() -> T) -> Result<T> {
        crate::error::scoped(&self.device, context, f)
    }

    /// Blocks until `index` (or all work) is done; surfaces device loss and uncaptured errors.
    pub(crate) fn wait(&self, index: Option<wgpu::SubmissionIndex>, context: &str) -> Result<()> {
        self.device
            .poll(wgpu::PollType::Wait {
                submission_index: index,
                timeout: None,
            })
            .map_err(|e| GpuError::Wgpu {
                context: context.to_owned(),
                message: e.to_string(),
            })?;
        self.check_async_errors(context)
    }

    /// The driver cache's namespace and key: one entry per adapter, driver and driver version.
    fn driver_cache_entry(&self) -> Option<(DiskCache, String)> {
        let key = wgpu::util::pipeline_cache_key(&self.adapter_info)?;
        Some((DiskCache::user("driver-pipelines", 1)?, key))
    }

    fn load_driver_cache(&self) -> Option<wgpu::PipelineCache> {
        if !self.features.contains(wgpu::Features::PIPELINE_CACHE) {
            return None;
        }
        let (cache, key) = self.driver_cache_entry()?;
        let data = match cache.get(&key) {
            Lookup::Hit(d) => Some(d),
            Lookup::Miss => None,
            Lookup::Corrupt(why) => {
                crate::disk::report(&why);
                None
            }
        };
        // SAFETY: the data was written by `save_pipeline_cache` for an adapter with the same cache key (the
        // entry's checksum and stored key say it is whole and ours), and `fallback: true` makes the driver
        // discard data it does not accept.
        let cache = unsafe {
            self.device
                .create_pipeline_cache(&wgpu::PipelineCacheDescriptor {
                    label: Some("bespoke driver cache"),
                    data: data.as_deref(),
                    fallback: true,
                })
        };
        Some(cache)
    }

    /// Writes the driver pipeline cache to disk (no-op where the adapter has none or it was not requested).
    pub fn save_pipeline_cache(&self) -> Result<()> {
        let Some(cache) = &self.driver_cache else {
            return Ok(());
        };
        let (Some(data), Some((disk, key))) = (cache.get_data(), self.driver_cache_entry()) else {
            return Ok(());
        };
        disk.put(&key, &data)
    }
}
