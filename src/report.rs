//! JSON shapes shared by `bespoke info --json` and `bespoke bench --json`.

use bespoke_gpu::{CopyProbe, Gpu};
use serde_json::{Value, json};

/// `{"name", "backend", "device_type", "driver", "driver_info"}`: the adapter object every report carries.
pub fn adapter_json(gpu: &Gpu) -> Value {
    let i = gpu.info();
    json!({
        "name": i.name,
        "backend": i.backend,
        "device_type": i.device_type,
        "driver": i.driver,
        "driver_info": i.driver_info,
    })
}

/// Features and the limits kernels care about.
pub fn capabilities_json(gpu: &Gpu) -> Value {
    let i = gpu.info();
    let l = &i.limits;
    json!({
        "features": i.features,
        "limits": {
            "max_buffer_size": l.max_buffer_size,
            "max_storage_buffer_binding_size": l.max_storage_buffer_binding_size,
            "max_uniform_buffer_binding_size": l.max_uniform_buffer_binding_size,
            "max_storage_buffers_per_shader_stage": l.max_storage_buffers_per_shader_stage,
            "max_compute_invocations_per_workgroup": l.max_compute_invocations_per_workgroup,
            "max_compute_workgroup_size": l.max_compute_workgroup_size,
            "max_compute_workgroup_storage_size": l.max_compute_workgroup_storage_size,
            "max_compute_workgroups_per_dimension": l.max_compute_workgroups_per_dimension,
            "min_storage_buffer_offset_alignment": l.min_storage_buffer_offset_alignment,
            "min_uniform_buffer_offset_alignment": l.min_uniform_buffer_offset_alignment,
            "max_immediate_size": l.max_immediate_size,
            "subgroup_min_size": l.subgroup_min_size,
            "subgroup_max_size": l.subgroup_max_size,
        },
        "binding_limit": i.binding_limit,
    })
}

/// The probe's details (`copy_gbps` itself sits at the top level of every report).
pub fn probe_json(p: &CopyProbe) -> Value {
    json!({
        "bytes": p.bytes,
        "bytes_moved": 2 * p.bytes,
        "gbps": p.gbps,
        "median_seconds": p.median_seconds,
        "variant": p.variant,
        "reps": p.reps,
        "timing": p.timing.as_str(),
    })
}
