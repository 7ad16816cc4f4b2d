//! The reversed-workgroups quirk (`Quirks::reversed_workgroups`, `BESPOKE_QUIRKS=reversed-workgroups`): a
//! dispatch's workgroups run last id first, so a kernel that counts on lavapipe's id order fails on any adapter,
//! and one that does not gives the same bits.

use super::*;
use bespoke_gpu::Quirks;

fn reversed(shared: &Gpu) -> Gpu {
    emulating(
        shared,
        GpuOptions {
            quirks: Quirks {
                reversed_workgroups: true,
                ..Default::default()
            },
            ..Default::default()
        },
    )
}

/// Each workgroup (of one invocation) takes a ticket from a counter: `order[w]` is when workgroup w ran.
/// `split`: through the grid prelude, so a grid past 65 535 workgroups is dispatched in pieces.
fn tickets(gpu: &Gpu, groups: u32, split: bool) -> Vec<u32> {
    let (prelude, id) = if split {
        (bespoke_gpu::GRID_WGSL, "bespoke_workgroup(w).x")
    } else {
        ("", "w.x")
    };
    let src = format!(
        "{prelude}
@group(0) @binding(0) var<storage, read_write> counter: atomic<u32>;
@group(0) @binding(1) var<storage, read_write> order: array<u32>;
@compute @workgroup_size(1)
fn main(@builtin(workgroup_id) w: vec3<u32>) {{
    order[{id}] = atomicAdd(&counter, 1u);
}}"
    );
    let counter = gpu.alloc_filled(1, 0u32).unwrap();
    let order = gpu.alloc_filled(groups as usize, u32::MAX).unwrap();
    let k = Kernel::new(if split { "tickets-split" } else { "tickets" }, src);
    let l = gpu
        .prepare(&k, &[counter.arg(), order.arg()], Grid::d1(groups))
        .unwrap();
    gpu.run(&[&l]).unwrap();
    gpu.read(&order).unwrap()
}

/// Every workgroup ran once: the tickets are 0 … n − 1.
fn assert_each_once(what: &str, order: &[u32]) {
    let mut sorted = order.to_vec();
    sorted.sort_unstable();
    assert!(
        sorted.iter().enumerate().all(|(i, &t)| t == i as u32),
        "{what}: not every workgroup ran once"
    );
}

/// The fraction of neighbouring ids whose workgroups ran in id order (the higher id later).
fn in_id_order(order: &[u32]) -> f64 {
    let rising = order.windows(2).filter(|p| p[0] < p[1]).count();
    rising as f64 / (order.len() - 1) as f64
}

#[test]
fn workgroups_run_last_id_first_under_the_quirk() {
    let Some(shared) = test_gpu() else { return };
    let gpu = reversed(shared);
    assert!(gpu.quirks().reversed_workgroups);
    assert!(
        gpu.adapter_key().contains("-revwg"),
        "{}",
        gpu.adapter_key()
    );
    let plain = tickets(shared, 512, false);
    let rev = tickets(&gpu, 512, false);
    assert_each_once("plain", &plain);
    assert_each_once("reversed", &rev);
    let (p, r) = (in_id_order(&plain), in_id_order(&rev));
    eprintln!("neighbouring workgroups run in id order: plain {p:.3}, reversed {r:.3}");
    // lavapipe's threads each take a run of consecutive ids and go through it in id order; a GPU's order is its
    // own, so only on a CPU adapter is the plain order known (and only where `BESPOKE_QUIRKS` left it plain).
    if shared.is_cpu() {
        if !shared.quirks().reversed_workgroups {
            assert!(p > 0.75, "plain: {plain:?}");
        }
        assert!(r < 0.25, "reversed: {rev:?}");
    }
}

#[test]
fn a_split_grid_still_runs_each_workgroup_once_under_the_quirk() {
    let Some(shared) = test_gpu() else { return };
    let gpu = reversed(shared);
    let groups = gpu.limits().max_compute_workgroups_per_dimension + 1000;
    assert_each_once("split", &tickets(&gpu, groups, true));
}

#[test]
fn the_global_invocation_id_follows_its_workgroup_under_the_quirk() {
    let Some(shared) = test_gpu() else { return };
    let gpu = reversed(shared);
    let src = "
@group(0) @binding(0) var<storage, read_write> counter: atomic<u32>;
@group(0) @binding(1) var<storage, read_write> order: array<u32>;
@group(0) @binding(2) var<storage, read_write> ids: array<u32>;
@compute @workgroup_size(4)
fn main(@builtin(global_invocation_id) g: vec3<u32>, @builtin(local_invocation_index) l: u32) {
    ids[g.x] = g.x;
    if l == 0u { order[g.x / 4u] = atomicAdd(&counter, 1u); }
}";
    let groups = 300;
    let counter = gpu.alloc_filled(1, 0u32).unwrap();
    let order = gpu.alloc_filled(groups, u32::MAX).unwrap();
    let ids = gpu.alloc_filled(groups * 4, u32::MAX).unwrap();
    let l = gpu
        .prepare(
            &Kernel::new("global-tickets", src),
            &[counter.arg(), order.arg(), ids.arg()],
            Grid::d1(groups as u32),
        )
        .unwrap();
    gpu.run(&[&l]).unwrap();
    let ids = gpu.read(&ids).unwrap();
    assert!(ids.iter().enumerate().all(|(i, &v)| v == i as u32));
    let order = gpu.read(&order).unwrap();
    assert_each_once("global", &order);
    if shared.is_cpu() {
        assert!(in_id_order(&order) < 0.25, "{order:?}");
    }
}

/// Workgroup w of 64 sums, through workgroup memory, x's blocks 0 … w mirrored: a loop bounded by the workgroup
/// id with barriers inside it (the dense GEMM's K loop has that shape).
const PREFIX: &str = "
var<workgroup> s: array<f32, 64>;
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) w: vec3<u32>, @builtin(local_invocation_index) l: u32) {
    var acc = 0.0;
    for (var b = 0u; b <= w.x; b++) {
        s[l] = x[b * 64u + l];
        workgroupBarrier();
        acc += s[63u - l];
        workgroupBarrier();
    }
    y[w.x * 64u + l] = acc;
}";

#[test]
fn a_kernel_that_does_not_count_on_the_order_gives_the_same_bits_under_the_quirk() {
    let Some(shared) = test_gpu() else { return };
    let gpu = reversed(shared);
    let groups = 41;
    let mut r = rng();
    let x: Vec<f32> = (0..64 * groups)
        .map(|_| r.random_range(-1.0..1.0))
        .collect();
    let want: Vec<f32> = (0..x.len())
        .map(|i| {
            let (w, l) = (i / 64, i % 64);
            (0..=w).fold(0.0f32, |acc, b| acc + x[b * 64 + 63 - l])
        })
        .collect();
    for (what, dev) in [("plain", shared), ("reversed", &gpu)] {
        let xb = dev.upload(&x).unwrap();
        let yb = dev.alloc_filled(x.len(), f32::NAN).unwrap();
        let l = dev
            .prepare(
                &Kernel::new("prefix", PREFIX),
                &[xb.arg(), yb.arg()],
                Grid::d1(groups as u32),
            )
            .unwrap();
        dev.run(&[&l]).unwrap();
        let y = dev.read(&yb).unwrap();
        assert_eq!(bespoke_gpu::testing::differing_bits(&y, &want), 0, "{what}");
    }
}
