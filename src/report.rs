//! JSON shapes shared by `bespoke info --json` and `bespoke bench --json`.

use bespoke_gpu::{CopyProbe, Gpu};
use serde_json::{Value, json};

/// `{"name", "backend", "device_type", "driver", "driver_info", "pci_bus_id", "emulation"}`: the adapter object every report
/// carries (`emulation`: what the device was made to emulate, `Gpu::emulation`; empty for the adapter as it is).
pub fn adapter_json(gpu: &Gpu) -> Value {
    let i = gpu.info();
    json!({
        "name": i.name,
        "backend": i.backend,
        "device_type": i.device_type,
        "driver": i.driver,
        "driver_info": i.driver_info,
        "pci_bus_id": i.pci_bus_id,
        "emulation": gpu.emulation(),
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

/// A dense tiling as JSON: its fields and its key.
pub fn params_json(p: &bespoke_mm::dense::DenseParams) -> Value {
    let mut v = serde_json::to_value(p).unwrap_or(Value::Null);
    v["key"] = json!(p.key());
    v
}

/// A checked pick and what decided it: each timed candidate (key, sample shape [m, n, k], GFLOP/s) and the two
/// finalists' second rounds.
pub fn check_json(c: &bespoke_mm::dense::CheckedPick) -> Value {
    let timed: Vec<Value> = c
        .timed
        .iter()
        .map(|(p, [m, n, k], g)| json!({"params": p.key(), "sample": [m, n, k], "gflops": g}))
        .collect();
    let confirmed: Vec<Value> = c
        .confirmed
        .iter()
        .map(|(p, g)| json!({"params": p.key(), "gflops": g}))
        .collect();
    json!({
        "pick": c.params.key(), "model_pick": c.model_pick.key(), "cached": c.cached,
        "timed": timed, "confirmed": confirmed,
    })
}

/// The dense model's measured inputs and what it derives from them.
pub fn machine_json(m: &bespoke_mm::dense::Machine) -> Value {
    let mut v = serde_json::to_value(m).unwrap_or(Value::Null);
    let fill: serde_json::Map<String, Value> = [32u32, 64, 128, 256, 512, 1024]
        .iter()
        .map(|t| (t.to_string(), json!(m.groups_to_fill(*t))))
        .collect();
    v["derived"] = json!({
        "fma_peak_gflops": m.peak_gflops(),
        "fmas_in_flight": m.fmas_in_flight(),
        "groups_to_fill": fill,
    });
    v
}
