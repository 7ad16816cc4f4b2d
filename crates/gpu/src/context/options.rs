//! How a `Gpu` is opened and what it reports: options, adapter class, emulated driver quirks, limits, info.

/// Optional features requested whenever the adapter has them.
pub const WANTED_FEATURES: &[(wgpu::Features, &str)] = &[
    (wgpu::Features::TIMESTAMP_QUERY, "TIMESTAMP_QUERY"),
    (wgpu::Features::SHADER_F64, "SHADER_F64"),
    (wgpu::Features::SHADER_F16, "SHADER_F16"),
    (wgpu::Features::SUBGROUP, "SUBGROUP"),
    (wgpu::Features::IMMEDIATES, "IMMEDIATES"),
    (wgpu::Features::PIPELINE_CACHE, "PIPELINE_CACHE"),
];

/// How to open a `Gpu`. `Default` honours `WGPU_BACKEND` and `WGPU_ADAPTER_NAME`.
#[derive(Clone, Debug, Default)]
pub struct GpuOptions {
    /// Substring of the adapter name or PCI bus id to pick (case-insensitive; `bespoke adapters` lists both);
    /// `None` reads `WGPU_ADAPTER_NAME`.
    pub adapter_name: Option<String>,
    /// Lower the per-binding size used for chunking (tests use this to exercise chunking on small data).
    pub max_binding_bytes: Option<u64>,
    /// Request the device with uniform bindings of at most this many bytes (at least 256): what an adapter with
    /// small uniform bindings grants (tests use it to make kernels split their uniform tables).
    pub max_uniform_binding_bytes: Option<u64>,
    /// Load and save wgpu's driver pipeline cache under [`Gpu::cache_dir`](crate::Gpu::cache_dir) where the adapter supports it.
    pub persist_pipeline_cache: bool,
    /// A rank of a distributed run, counted among the ranks on its machine (`Comm::node_rank` of bespoke-comm):
    /// take the `node_rank mod k`-th of the machine's k adapters of the best kind in PCI bus order (one GPU per
    /// rank where the machine has as many; several ranks on a GPU in turn where it has fewer).
    pub node_rank: Option<usize>,
    /// Request the device with buffers of at most this many bytes (`max_buffer_size`): what a GPU's limit does
    /// to work sized for it (an H200 grants 4 292 870 144 B), made to happen on a small adapter in tests.
    pub max_buffer_bytes: Option<u64>,
    /// Request the device with at most this many storage buffers per shader stage (at least 4): kernels that
    /// bind more split into more launches, as they do on an adapter with few.
    pub max_storage_buffers_per_stage: Option<u32>,
    /// Treat the adapter as this class wherever kernels choose by it ([`Gpu::is_cpu`](crate::Gpu::is_cpu)): tests run the GPU
    /// branch of a choice on lavapipe, and the CPU branch on a GPU. `None`: the adapter's own class.
    pub adapter_class: Option<AdapterClass>,
    /// Driver behaviours to emulate (tests make a GPU driver's choices happen on lavapipe).
    pub quirks: Quirks,
    /// Open the device without these optional features even where the adapter has them: an adapter without
    /// SHADER_F64 (Apple's GPUs through Metal, Intel's Arc), SHADER_F16 or TIMESTAMP_QUERY made to happen on any
    /// adapter. `BESPOKE_WITHOUT_FEATURES` (their names, comma-separated: `SHADER_F64,SHADER_F16`) adds to it, so
    /// a whole command runs so.
    pub without_features: wgpu::Features,
    /// Time without raising a GPU's clocks first ([`Gpu::time`](crate::Gpu::time)'s warm-up of 0.5–2 s after an
    /// idle spell): for tests of results, not of speed, on a GPU (the shared test device; a GPU's test suite
    /// tunes hundreds of kernels). Choices tuned so are keyed apart from the adapter's own (`-nowarm`).
    pub skip_warm_up: bool,
    /// Request the device with no limit better than this profile's (each of the adapter's limits or the profile's,
    /// whichever is worse): what WebGPU guarantees on every adapter, made to happen on any adapter.
    /// `BESPOKE_LIMITS=webgpu` (or `downlevel`) sets it for a whole command.
    pub limits: Option<LimitsProfile>,
    /// Fail the pipeline of every kernel whose name contains this, as a driver that refuses a pipeline does
    /// (a shader compiler past its own limits, Metal's per-pipeline threadgroup size): tests make a candidate
    /// fail on lavapipe and check that what tunes among candidates goes on without it.
    pub refuse_pipelines: Option<String>,
}

/// A set of limits an adapter may be held to ([`GpuOptions::limits`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LimitsProfile {
    /// WebGPU's defaults (`wgpu::Limits::default()`): 256 invocations a workgroup (256 × 256 × 64), 16 KiB of
    /// workgroup memory, 8 storage buffers a stage, 128 MiB bindings, 256 MiB buffers, 64 KiB uniform bindings.
    /// WebGPU guarantees these on every adapter; native Vulkan's own minimums are lower still (128 invocations).
    WebGpu,
    /// wgpu's downlevel defaults (`wgpu::Limits::downlevel_defaults()`): as [`LimitsProfile::WebGpu`], but 4
    /// storage buffers a stage and 16 KiB uniform bindings (what a GLES 3.1 device grants).
    Downlevel,
}

impl LimitsProfile {
    /// The name `BESPOKE_LIMITS` takes and device keys carry.
    pub fn name(self) -> &'static str {
        match self {
            Self::WebGpu => "webgpu",
            Self::Downlevel => "downlevel",
        }
    }

    /// The profile's limits.
    pub fn limits(self) -> wgpu::Limits {
        match self {
            Self::WebGpu => wgpu::Limits::default(),
            Self::Downlevel => wgpu::Limits::downlevel_defaults(),
        }
    }

    /// `adapter`'s limits held to the profile: each the worse of the two.
    pub fn hold(self, adapter: wgpu::Limits) -> wgpu::Limits {
        adapter.or_worse_values_from(&self.limits())
    }
}

/// The profile `BESPOKE_LIMITS` names (`None` when unset or empty); an unknown name is an error listing the names.
pub(crate) fn limits_from_env() -> Result<Option<LimitsProfile>, String> {
    parse_profile(&std::env::var("BESPOKE_LIMITS").unwrap_or_default())
}

fn parse_profile(value: &str) -> Result<Option<LimitsProfile>, String> {
    match value.trim() {
        "" => Ok(None),
        v => [LimitsProfile::WebGpu, LimitsProfile::Downlevel]
            .into_iter()
            .find(|p| p.name() == v)
            .map(Some)
            .ok_or_else(|| format!("BESPOKE_LIMITS names `{v}`; it may name webgpu or downlevel")),
    }
}

/// The features `BESPOKE_WITHOUT_FEATURES` names (none when unset or empty); an unknown name is an error listing
/// the names it may hold.
pub(crate) fn features_off_from_env() -> Result<wgpu::Features, String> {
    let value = std::env::var("BESPOKE_WITHOUT_FEATURES").unwrap_or_default();
    parse_features(&value)
}

/// Optional features by name, comma-separated (spaces around a name ignored).
fn parse_features(value: &str) -> Result<wgpu::Features, String> {
    let mut out = wgpu::Features::empty();
    for name in value.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        let Some((f, _)) = WANTED_FEATURES.iter().find(|(_, n)| *n == name) else {
            let names: Vec<&str> = WANTED_FEATURES.iter().map(|(_, n)| *n).collect();
            return Err(format!(
                "BESPOKE_WITHOUT_FEATURES names `{name}`; it may name {}",
                names.join(", ")
            ));
        };
        out |= *f;
    }
    Ok(out)
}

/// Whether the environment variable `name` is set as a flag: to anything but empty or `0` (`BESPOKE_REQUIRE_GPU`,
/// the CLI's `BESPOKE_SKIP_WARM_UP`).
pub fn env_flag(name: &str) -> bool {
    flag_value(std::env::var(name).ok().as_deref())
}

fn flag_value(value: Option<&str>) -> bool {
    value.is_some_and(|v| !v.is_empty() && v != "0")
}

/// Whether an adapter runs kernels on a CPU (one workgroup per thread) or on a GPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AdapterClass {
    Cpu,
    Gpu,
}

/// Behaviours that Vulkan leaves to the driver and that some driver has, emulated by the kernel generators so
/// that code depending on them is tested on any adapter.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Quirks {
    /// The compiler removes a round trip through 16 bits (`unpack2x16float(pack2x16float(v))` gives `v` back
    /// unrounded), as NVIDIA's Vulkan driver 580 did on an H200: generators that round a value that way emit
    /// the value itself. Vulkan leaves the precision of that round trip to the driver.
    pub folds_f16_round_trip: bool,
    /// Workgroup memory holds, as a workgroup starts, whatever an earlier workgroup or kernel left there: Vulkan
    /// leaves it undefined unless zero-initialised, and bespoke asks wgpu not to zero it. Emulated by the pipeline
    /// layer, which fills every workgroup variable a kernel uses with NaN (floats) or 0xDEADBEEF (integers) as
    /// each workgroup starts, so a kernel that reads workgroup memory it did not write fails its test on any
    /// adapter (on lavapipe such a read often finds zeros left by nothing).
    pub stale_workgroup_memory: bool,
    /// A dispatch's workgroups run in any order, thousands at once: a GPU does not run them in id order as
    /// lavapipe does. Emulated by the pipeline layer, which hands each kernel `num_workgroups − 1 −
    /// workgroup_id` for its workgroup id, so the last workgroup runs first and a kernel whose workgroup reads
    /// what a lower-numbered one of the same dispatch writes fails on any adapter.
    pub reversed_workgroups: bool,
    /// A workgroup's invocations run in an order of the hardware's: a GPU runs them in warps or waves at once,
    /// lavapipe a SIMD row at a time in id order, which hides a missing barrier where a higher-numbered
    /// invocation reads workgroup memory a lower-numbered one writes. Emulated by the pipeline layer, which hands
    /// each kernel `S − 1 − local_invocation_id` (S the workgroup size) for its invocation id, with the matching
    /// index and global id, so the last invocation runs first and such a kernel fails on any adapter.
    pub reversed_invocations: bool,
    /// The compiler contracts a float multiply and the add that takes its product into one fused multiply-add
    /// (rounded once): SPIR-V allows it wherever `NoContraction` is absent, which naga never writes, and GPU
    /// compilers do it (lavapipe does not). Emulated by the pipeline layer, which fuses every float `a * b ± c`
    /// and `c − a * b` of a kernel (a vector times a scalar too), so a test that holds a kernel to its
    /// reference's bits where a compiler may fuse fails on any adapter.
    pub fuses_multiply_add: bool,
    /// Subnormal floats are flushed to zero: WGSL allows it on the input and output of any operation and Vulkan
    /// leaves it to the driver where a module asks nothing, as naga's do; GPUs flush (lavapipe does not).
    /// Emulated by the pipeline layer, which flushes every float value a kernel loads, converts or computes, so
    /// a kernel or test that counts on a subnormal fails on any adapter.
    pub flushes_subnormals: bool,
    /// f32 and f16 quotients and square roots are not correctly rounded: Vulkan allows 2.5 ULP for `x / y` and
    /// gives `sqrt` the precision of `1 / inversesqrt`, and NVIDIA divides through a reciprocal (lavapipe rounds
    /// both correctly). Emulated by the pipeline layer, which computes every such `a / b` as `a * (1 / b)` and
    /// `sqrt(x)` as `1 / inverseSqrt(x)`, so a test that holds a kernel to its reference's bits through a division
    /// fails on any adapter.
    pub divides_inexactly: bool,
    /// An array index past its array's end reads and writes another element of it: WGSL and Vulkan's robust
    /// buffer access let an out-of-bounds load return any value of the buffer and a store write anywhere in it,
    /// nothing guards workgroup memory in a module without bounds checks, and Metal has no robust buffer access;
    /// lavapipe reads zeros and drops the writes, which hides a read one element too far. Emulated by the pipeline
    /// layer, which gives every load, store and atomic through an array element the index `index mod length`
    /// (an i32 index below zero: the last element), so such a kernel fails on any adapter.
    pub wraps_out_of_bounds: bool,
    /// `pack2x16float` rounds toward zero: WGSL lets a conversion to f16 give either neighbour of a value between
    /// two, AMD's GPUs have an instruction that packs two f32s toward zero, and Mesa lets its AMD and NVIDIA
    /// compilers use such a pack (lavapipe rounds to nearest even).
    /// Emulated by the pipeline layer, which steps every packed half that was rounded away from zero one f16
    /// down, so a kernel or test that counts on f16 stores rounded to nearest fails on any adapter.
    pub packs_toward_zero: bool,
}

/// A quirk's flag in [`Quirks`].
type Flag = fn(&mut Quirks) -> &mut bool;

impl Quirks {
    /// Each quirk: its name in `BESPOKE_QUIRKS`, its mark in the emulation tag (`GpuInfo::emulation`, the
    /// caches' keys) and its flag. The one list of them: a quirk added here is parsed, combined and tagged.
    const TABLE: [(&'static str, &'static str, Flag); 9] = [
        ("folds-f16-round-trip", "-foldf16", |q| {
            &mut q.folds_f16_round_trip
        }),
        ("stale-workgroup-memory", "-stalewg", |q| {
            &mut q.stale_workgroup_memory
        }),
        ("reversed-workgroups", "-revwg", |q| {
            &mut q.reversed_workgroups
        }),
        ("reversed-invocations", "-revinv", |q| {
            &mut q.reversed_invocations
        }),
        ("fused-multiply-add", "-fma", |q| &mut q.fuses_multiply_add),
        ("flushed-subnormals", "-ftz", |q| &mut q.flushes_subnormals),
        ("inexact-division", "-div", |q| &mut q.divides_inexactly),
        ("wrapped-out-of-bounds", "-oob", |q| {
            &mut q.wraps_out_of_bounds
        }),
        ("packed-toward-zero", "-rtz", |q| &mut q.packs_toward_zero),
    ];

    fn set(&mut self, name: &str) -> bool {
        match Self::TABLE.iter().find(|(n, ..)| *n == name) {
            Some((.., flag)) => *flag(self) = true,
            None => return false,
        }
        true
    }

    /// Both sets' quirks.
    pub fn or(self, mut other: Self) -> Self {
        let mut out = self;
        for (.., flag) in Self::TABLE {
            *flag(&mut out) |= *flag(&mut other);
        }
        out
    }

    /// The marks of the quirks set, in the table's order (`-stalewg-revwg`): part of the emulation tag.
    pub(crate) fn tag(mut self) -> String {
        Self::TABLE
            .iter()
            .filter_map(|(_, mark, flag)| (*flag(&mut self)).then_some(*mark))
            .collect()
    }
}

/// The quirks `BESPOKE_QUIRKS` names (comma-separated: `stale-workgroup-memory,reversed-workgroups`), so a whole
/// command runs with them; an unknown name is an error listing the names.
pub(crate) fn quirks_from_env() -> Result<Quirks, String> {
    parse_quirks(&std::env::var("BESPOKE_QUIRKS").unwrap_or_default())
}

fn parse_quirks(value: &str) -> Result<Quirks, String> {
    let mut q = Quirks::default();
    for name in value.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        if !q.set(name) {
            return Err(format!(
                "BESPOKE_QUIRKS names `{name}`; it may name {}",
                Quirks::TABLE.map(|(n, ..)| n).join(", ")
            ));
        }
    }
    Ok(q)
}

/// The limits kernels care about, as granted to the device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelLimits {
    pub max_buffer_size: u64,
    pub max_storage_buffer_binding_size: u64,
    pub max_uniform_buffer_binding_size: u64,
    pub max_storage_buffers_per_shader_stage: u32,
    pub max_compute_invocations_per_workgroup: u32,
    pub max_compute_workgroup_size: [u32; 3],
    pub max_compute_workgroup_storage_size: u32,
    pub max_compute_workgroups_per_dimension: u32,
    pub min_storage_buffer_offset_alignment: u32,
    pub min_uniform_buffer_offset_alignment: u32,
    pub max_immediate_size: u32,
    pub subgroup_min_size: u32,
    pub subgroup_max_size: u32,
}

/// What `bespoke info` prints: who the adapter is, what it can do.
#[derive(Clone, Debug)]
pub struct GpuInfo {
    pub name: String,
    pub backend: String,
    pub device_type: String,
    pub driver: String,
    pub driver_info: String,
    /// The PCI bus id (`0000:1b:00.0`) where the backend reports one (which GPU of a machine), else empty.
    pub pci_bus_id: String,
    pub features: Vec<&'static str>,
    pub limits: KernelLimits,
    /// The per-binding size the chunking logic uses (≤ the device limit; lowered by `GpuOptions`).
    pub binding_limit: u64,
}

#[cfg(test)]
mod tests {
    #[test]
    fn features_are_taken_away_by_name() {
        use wgpu::Features;
        assert_eq!(super::parse_features(""), Ok(Features::empty()));
        assert_eq!(
            super::parse_features(" SHADER_F64, TIMESTAMP_QUERY ,"),
            Ok(Features::SHADER_F64 | Features::TIMESTAMP_QUERY)
        );
        let e = super::parse_features("SHADER_F64,f16").unwrap_err();
        assert!(e.contains("`f16`") && e.contains("SHADER_F16"), "{e}");
    }

    #[test]
    fn quirks_are_named() {
        use super::{Quirks, parse_quirks};
        assert_eq!(parse_quirks(""), Ok(Quirks::default()));
        let q = parse_quirks(" stale-workgroup-memory ,").unwrap();
        assert!(q.stale_workgroup_memory && !q.folds_f16_round_trip);
        let both = parse_quirks("folds-f16-round-trip,stale-workgroup-memory").unwrap();
        assert!(both.stale_workgroup_memory && both.folds_f16_round_trip);
        let e = parse_quirks("stale").unwrap_err();
        assert!(
            e.contains("`stale`") && e.contains("stale-workgroup-memory"),
            "{e}"
        );
        // Every quirk by its name sets its own flag alone, and marks the tag with its own mark; `or` keeps both
        // sides' and the tag follows the table's order whatever order the names came in.
        let mut all = Quirks::default();
        for (name, mark, flag) in Quirks::TABLE {
            let mut q = parse_quirks(name).unwrap();
            assert_eq!(q.tag(), mark, "{name}");
            assert!(*flag(&mut q), "{name}");
            *flag(&mut q) = false;
            assert_eq!(q, Quirks::default(), "{name} set another flag");
            all = parse_quirks(name).unwrap().or(all);
        }
        let names: Vec<_> = Quirks::TABLE.iter().rev().map(|(n, ..)| *n).collect();
        assert_eq!(parse_quirks(&names.join(",")), Ok(all));
        assert_eq!(
            all.tag(),
            "-foldf16-stalewg-revwg-revinv-fma-ftz-div-oob-rtz"
        );
    }

    #[test]
    fn a_limits_profile_is_named_and_holds_the_worse_value() {
        use super::{LimitsProfile, parse_profile};
        assert_eq!(parse_profile(""), Ok(None));
        assert_eq!(parse_profile(" webgpu "), Ok(Some(LimitsProfile::WebGpu)));
        assert_eq!(
            parse_profile("downlevel"),
            Ok(Some(LimitsProfile::Downlevel))
        );
        let e = parse_profile("tiny").unwrap_err();
        assert!(e.contains("`tiny`") && e.contains("webgpu"), "{e}");
        // An adapter better than the profile in one limit and worse in another keeps the worse of each.
        let adapter = wgpu::Limits {
            max_compute_invocations_per_workgroup: 1024,
            max_compute_workgroup_storage_size: 8192,
            min_storage_buffer_offset_alignment: 32,
            ..wgpu::Limits::default()
        };
        let held = LimitsProfile::WebGpu.hold(adapter);
        assert_eq!(held.max_compute_invocations_per_workgroup, 256);
        assert_eq!(held.max_compute_workgroup_storage_size, 8192);
        assert_eq!(held.min_storage_buffer_offset_alignment, 256);
        assert_eq!(
            LimitsProfile::Downlevel
                .hold(wgpu::Limits::default())
                .max_storage_buffers_per_shader_stage,
            4
        );
    }

    #[test]
    fn a_flag_is_set_by_anything_but_absent_empty_or_zero() {
        for (v, set) in [
            (None, false),
            (Some(""), false),
            (Some("0"), false),
            (Some("1"), true),
            (Some("yes"), true),
        ] {
            assert_eq!(super::flag_value(v), set, "{v:?}");
        }
    }
}
