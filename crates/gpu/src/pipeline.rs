//! Kernel → validated naga module → compute pipeline, cached by `KernelId`.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use crate::error::{GpuError, Result, scoped};
use crate::kernel::{Kernel, KernelId};
use crate::validate::{resource_use_of, validate_named, validate_with_info};

/// The grid prelude (`shaders/grid.wgsl`): prepend it to a kernel whose grid may exceed 65535 workgroups in a
/// dimension, and address workgroups with `bespoke_workgroup(wid)` instead of `wid`.
pub const GRID_WGSL: &str = include_str!("../shaders/grid.wgsl");

/// A compiled kernel and what the dispatch path needs to know about it.
#[derive(Debug)]
pub struct CachedPipeline {
    pub name: String,
    pub(crate) pipeline: wgpu::ComputePipeline,
    /// The kernel declares `bespoke_grid`, so its dispatches may be split.
    pub uses_grid: bool,
    /// Seconds spent in naga parse + validation.
    pub validate_seconds: f64,
    /// Seconds spent creating the shader module and pipeline (driver compile).
    pub create_seconds: f64,
}

/// What a kernel is compiled for: the device, the naga capabilities it validates against, the driver's pipeline
/// cache and the adapter's name (for errors). It needs no `Gpu`: the cache stands below the device.
pub(crate) struct CompileTarget<'a> {
    pub device: &'a wgpu::Device,
    pub caps: naga::valid::Capabilities,
    pub driver_cache: Option<&'a wgpu::PipelineCache>,
    pub adapter: &'a str,
    /// The device's limits, held against what the kernel uses before the driver sees it.
    pub limits: &'a wgpu::Limits,
    /// Fill workgroup memory with poison as each workgroup starts (`Quirks::stale_workgroup_memory`).
    pub poison_workgroup_memory: bool,
    /// Run each dispatch's workgroups in the reverse order of their ids (`Quirks::reversed_workgroups`).
    pub reverse_workgroups: bool,
    /// Run each workgroup's invocations in the reverse order of their ids (`Quirks::reversed_invocations`).
    pub reverse_invocations: bool,
    /// Fuse every float multiply-add (`Quirks::fuses_multiply_add`).
    pub fuse_multiply_add: bool,
    /// Flush every subnormal float value (`Quirks::flushes_subnormals`).
    pub flush_subnormals: bool,
    /// Compute every f32 and f16 quotient and square root inexactly (`Quirks::divides_inexactly`).
    pub inexact_division: bool,
    /// Wrap every array index past its array's end (`Quirks::wraps_out_of_bounds`).
    pub wrap_out_of_bounds: bool,
    /// Round every `pack2x16float` toward zero (`Quirks::packs_toward_zero`).
    pub pack_toward_zero: bool,
}

/// Compiled pipelines by [`KernelId`], each compiled once.
#[derive(Default)]
pub(crate) struct PipelineCache {
    compiled: Mutex<HashMap<KernelId, Arc<CachedPipeline>>>,
}

impl PipelineCache {
    /// Returns the compiled pipeline for `kernel`, compiling it on first use, and whether this call compiled it.
    pub fn get_or_compile(
        &self,
        target: &CompileTarget<'_>,
        kernel: &Kernel,
    ) -> Result<(Arc<CachedPipeline>, bool)> {
        if let Some(p) = self
            .compiled
            .lock()
            .ok()
            .and_then(|m| m.get(&kernel.id()).cloned())
        {
            return Ok((p, false));
        }
        let cached = Arc::new(compile(target, kernel)?);
        if let Ok(mut m) = self.compiled.lock() {
            m.insert(kernel.id(), cached.clone());
        }
        Ok((cached, true))
    }

    /// Number of distinct kernels compiled so far.
    pub fn len(&self) -> usize {
        self.compiled.lock().map(|m| m.len()).unwrap_or(0)
    }
}

/// `module` with the quirks applied (`crate::fused_multiply_add` or `crate::flushed_subnormals`, then the prologues
/// of `crate::stale_workgroup`, `crate::reversed_workgroups` and `crate::reversed_invocations`, whose prologues run
/// last first), validated again;
/// `module` as it was where the target emulates none.
fn with_quirks(
    target: &CompileTarget<'_>,
    kernel: &Kernel,
    mut module: naga::Module,
    info: &naga::valid::ModuleInfo,
) -> Result<naga::Module> {
    let mut quirks = Vec::new();
    if target.fuse_multiply_add {
        quirks.push("fused-multiply-add");
    }
    if target.inexact_division {
        quirks.push("inexact-division");
    }
    if target.flush_subnormals {
        quirks.push("flushed-subnormals");
    }
    if target.poison_workgroup_memory {
        quirks.push("stale-workgroup-memory");
    }
    if target.reverse_workgroups {
        quirks.push("reversed-workgroups");
    }
    if target.reverse_invocations {
        quirks.push("reversed-invocations");
    }
    if target.wrap_out_of_bounds {
        quirks.push("wrapped-out-of-bounds");
    }
    if target.pack_toward_zero {
        quirks.push("packed-toward-zero");
    }
    if quirks.is_empty() {
        return Ok(module);
    }
    let invalid = |diagnostic: String| GpuError::InvalidShader {
        kernel: kernel.name().to_owned(),
        diagnostic,
    };
    if target.fuse_multiply_add {
        // First: it reads the operands' types from the validation of the module as written.
        let wide = target.caps.contains(naga::valid::Capabilities::FLOAT64);
        crate::fused_multiply_add::fuse_multiply_adds(&mut module, info, wide);
    }
    // The next two read the values' types from a validation of the module as it is now.
    let validate = |module: &naga::Module, after: &str| {
        naga::valid::Validator::new(naga::valid::ValidationFlags::all(), target.caps)
            .validate(module)
            .map_err(|e| invalid(format!("invalid after the {after} quirk: {e}")))
    };
    if target.inexact_division {
        let now = if target.fuse_multiply_add {
            &validate(&module, "fused-multiply-add")?
        } else {
            info
        };
        crate::inexact_division::divide_inexactly(&mut module, now);
    }
    if target.flush_subnormals {
        let now = match (target.fuse_multiply_add, target.inexact_division) {
            (false, false) => info,
            (_, true) => &validate(&module, "inexact-division")?,
            (true, false) => &validate(&module, "fused-multiply-add")?,
        };
        crate::flushed_subnormals::flush_subnormals(&mut module, now);
    }
    if target.pack_toward_zero {
        // Needs no validation: it finds the packs by their function (and may follow the rewrites above, which
        // add functions the module's validation does not know).
        crate::packed_toward_zero::pack_toward_zero(&mut module);
    }
    if target.poison_workgroup_memory {
        // Needs the validation of the module as written (which workgroup variables the entry points use).
        crate::stale_workgroup::poison_workgroup_memory(&mut module, info).map_err(|e| {
            invalid(format!(
                "the stale-workgroup-memory quirk cannot fill it: {e}"
            ))
        })?;
    }
    if target.reverse_workgroups {
        crate::reversed_workgroups::reverse_workgroups(&mut module).map_err(|e| {
            invalid(format!(
                "the reversed-workgroups quirk cannot reverse it: {e}"
            ))
        })?;
    }
    if target.reverse_invocations {
        // After the workgroups' reversal, whose prologue reads the raw ids: this one reverses those reads too.
        crate::reversed_invocations::reverse_invocations(&mut module).map_err(|e| {
            invalid(format!(
                "the reversed-invocations quirk cannot reverse it: {e}"
            ))
        })?;
    }
    if target.wrap_out_of_bounds {
        // Last: the prologues' own accesses are wrapped too (all in bounds), and the types it reads are the
        // module's as the other quirks left it.
        let now = if quirks.len() > 1 {
            &validate(&module, "earlier")?
        } else {
            info
        };
        crate::wrapped_out_of_bounds::wrap_out_of_bounds(&mut module, now);
    }
    naga::valid::Validator::new(naga::valid::ValidationFlags::all(), target.caps)
        .validate(&module)
        .map_err(|e| {
            invalid(format!(
                "invalid after the quirk{} {}: {}",
                if quirks.len() > 1 { "s" } else { "" },
                quirks.join(" and "),
                e.emit_to_string(kernel.source())
            ))
        })?;
    Ok(module)
}

fn compile(target: &CompileTarget<'_>, kernel: &Kernel) -> Result<CachedPipeline> {
    let t0 = Instant::now();
    let module = match validate_with_info(kernel.name(), kernel.source(), target.caps) {
        Ok((m, info)) => {
            if let Some((what, asked, max)) = resource_use_of(&m, &info).past(target.limits) {
                return Err(GpuError::LimitExceeded {
                    what: format!(
                        "{what} (kernel `{}` on adapter `{}`)",
                        kernel.name(),
                        target.adapter
                    ),
                    asked,
                    max,
                });
            }
            with_quirks(target, kernel, m, &info)?
        }
        Err(e) => return Err(explain_invalid(target, kernel, e)),
    };
    let validate_seconds = t0.elapsed().as_secs_f64();
    let uses_grid = module
        .global_variables
        .iter()
        .any(|(_, g)| g.name.as_deref() == Some("bespoke_grid"));

    let t1 = Instant::now();
    let constants: Vec<(&str, f64)> = kernel
        .constants()
        .iter()
        .map(|(n, v)| (n.as_str(), *v))
        .collect();
    let device = target.device;
    let pipeline = scoped(
        device,
        &format!("creating the pipeline for kernel `{}`", kernel.name()),
        || {
            let desc = wgpu::ShaderModuleDescriptor {
                label: Some(kernel.name()),
                // Hand over the module we already validated instead of making wgpu parse the text again.
                source: wgpu::ShaderSource::Naga(Cow::Owned(module)),
            };
            let module = if kernel.bounds_checked() {
                device.create_shader_module(desc)
            } else {
                // SAFETY: `Kernel::without_bounds_checks` is unsafe; whoever called it promised that every
                // access is in bounds for the arguments the kernel is bound to.
                unsafe {
                    device
                        .create_shader_module_trusted(desc, wgpu::ShaderRuntimeChecks::unchecked())
                }
            };
            device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                label: Some(kernel.name()),
                layout: None,
                module: &module,
                entry_point: Some(kernel.entry_point()),
                compilation_options: wgpu::PipelineCompilationOptions {
                    constants: &constants,
                    zero_initialize_workgroup_memory: false,
                },
                cache: target.driver_cache,
            })
        },
    )?;
    Ok(CachedPipeline {
        name: kernel.name().to_owned(),
        pipeline,
        uses_grid,
        validate_seconds,
        create_seconds: t1.elapsed().as_secs_f64(),
    })
}

/// A source that fails only for lack of a device feature gets an error naming the feature.
fn explain_invalid(target: &CompileTarget<'_>, kernel: &Kernel, err: GpuError) -> GpuError {
    use naga::valid::Capabilities as C;
    let caps = target.caps;
    for (cap, feature) in [
        (C::FLOAT64, "SHADER_F64"),
        (C::SHADER_FLOAT16, "SHADER_F16"),
        (
            C::SHADER_FLOAT16_IN_FLOAT32,
            "SHADER_F16_IN_F32 (downlevel flag)",
        ),
    ] {
        if !caps.contains(cap) && validate_named(kernel.name(), kernel.source(), caps | cap).is_ok()
        {
            return GpuError::MissingFeature {
                kernel: kernel.name().to_owned(),
                feature,
                adapter: target.adapter.to_owned(),
            };
        }
    }
    err
}
