//! `bespoke bench` at a GPU's sizes against an H200's limits, without a device: every buffer each section
//! allocates fits the largest buffer and every binding the binding limit, and every grid can be dispatched. On
//! 2026-11-26 the mm section stopped on an H200 (hex-p6-m132's B at N = 2^20 passed the 4 292 870 144 B buffer
//! limit); this test fails on that configuration (`an_unsplit_panel_is_caught`). The figures are the H200's
//! (`bespoke info` on that card, 2026-11-26; docs/gpu.md); an H100 reports the same buffer and binding limits.

use bespoke::bench::{MM_MATRICES, MM_OPERATORS, Sizes};
use bespoke::fv::kernel::texture_width;
use bespoke::gpu::Grid;
use bespoke::lbm::{Collision, Config, Storage, Streaming, check_fits_within};
use bespoke::mm::DType;
use bespoke::mm::specialise::{ColumnBlocks, parse_mtx};

/// An H200's limits as wgpu 30 granted them (NVIDIA 580.159.04).
const MAX_BUFFER: u64 = 4_292_870_144;
const MAX_BINDING: u64 = 2_147_483_644;
const MAX_TEXTURE_SIDE: u32 = 32_768;

fn gpu() -> Sizes {
    Sizes::of(false, false)
}

/// Every buffer of a lattice is one direction's words; the bench's lattices and the scale section's strong
/// domain (two blocks side by side) fit one binding, in both storages and streamings; their grids dispatch.
#[test]
fn lattices_fit_one_binding_per_direction() {
    let s = gpu();
    for (nx, ny) in [(s.lbm_side, s.lbm_side), (2 * s.scale_side, s.scale_side)] {
        for storage in [Storage::F32, Storage::F16] {
            for streaming in [Streaming::Ab, Streaming::InPlace] {
                let cfg = Config {
                    storage,
                    streaming,
                    ..Config::new(nx, ny, Collision::Bgk { omega: 1.0 })
                };
                check_fits_within(MAX_BINDING, &cfg)
                    .unwrap_or_else(|e| panic!("{nx}x{ny} {storage:?} {streaming:?}: {e}"));
                let words = cfg.layout().words(cfg.cells()) as u64;
                assert!(4 * words <= MAX_BUFFER);
                Grid::cover((nx * ny) as u64, bespoke::lbm::kernel::WG)
                    .unwrap_or_else(|e| panic!("{nx}x{ny}: {e}"));
            }
        }
    }
}

/// One buffer for all nine directions (a launch-shape candidate, and the lab's `one-buffer` rows) at the bench's
/// side: f16 fits one binding, f32 does not (9 × 268 MB past 2 GiB), so the lab says so for f32 instead of
/// timing it, and the tuner does not time it for such a lattice.
#[test]
fn one_buffer_fits_the_bench_lattice_in_f16_only() {
    let s = gpu();
    // NVIDIA's storage offset alignment is at most wgpu's default of 256 bytes.
    let bytes = |storage| {
        let cfg = Config {
            storage,
            ..Config::new(s.lbm_side, s.lbm_side, Collision::Bgk { omega: 1.0 })
        };
        bespoke::lbm::shape::one_buffer_bytes(cfg.layout().words(cfg.cells()), 256)
    };
    assert!(bytes(Storage::F16) <= MAX_BINDING.min(MAX_BUFFER));
    assert!(bytes(Storage::F32) > MAX_BINDING);
}

/// The nine shipped operators at the GPU's N in f32 and f64: each block's B and C fits one buffer, the blocks
/// cover N, and the leading dimension stays inside 32-bit indexing.
#[test]
fn operator_panels_fit_in_column_blocks() {
    let s = gpu();
    assert_eq!(s.mm_operators, MM_OPERATORS);
    assert_eq!(MM_MATRICES.len(), MM_OPERATORS);
    let mut split = Vec::new();
    for (name, text) in MM_MATRICES {
        let op = parse_mtx(text, name).unwrap();
        for dtype in [DType::F32, DType::F64] {
            let b = ColumnBlocks::within(MAX_BUFFER, op.m, op.k, dtype, s.mm_n).unwrap();
            let bytes = |rows: usize| (rows * b.width * dtype.size()) as u64;
            assert!(
                bytes(op.k) <= MAX_BUFFER && bytes(op.m) <= MAX_BUFFER,
                "{name} {dtype}: {b:?}"
            );
            assert!(b.panel().check().is_ok(), "{name} {dtype}: {b:?}");
            assert_eq!(
                (0..b.count).map(|i| b.columns(i).len()).sum::<usize>(),
                s.mm_n
            );
            if b.count > 1 {
                split.push(format!("{name} {dtype} in {}", b.count));
            }
        }
    }
    // hex-p6-m132 (K = 1029) is the one past a buffer at N = 2^20.
    assert_eq!(
        split,
        ["hex-p6-m132 f32 in 2", "hex-p6-m132 f64 in 3"],
        "{split:?}"
    );
}

/// What the mm section allocated before column blocks: the whole panel in one buffer. The check above would
/// have failed on it; here it must.
#[test]
fn an_unsplit_panel_is_caught() {
    let s = gpu();
    let (name, text) = MM_MATRICES
        .iter()
        .find(|(n, _)| *n == "hex-p6-m132")
        .unwrap();
    let op = parse_mtx(text, name).unwrap();
    let whole = (op.k * s.mm_n * DType::F32.size()) as u64;
    assert_eq!(whole, 4_315_938_816);
    assert!(whole > MAX_BUFFER);
}

/// The fv section's and the scale section's meshes: the operator's largest array (four f32 or u32 per tet)
/// fits a binding, and the texture layout finds a width within the 8192-row side it assumes.
#[test]
fn meshes_fit_their_bindings_and_textures() {
    let s = gpu();
    let box_tets = |c: [usize; 3]| 6 * c[0] * c[1] * c[2];
    let (c, strong) = (s.scale_cubes, s.scale_cubes * 5 / 4);
    for tets in [
        box_tets([s.fv_cubes; 3]),
        box_tets([c; 3]),
        box_tets([2 * c, c, c]),
        box_tets([strong; 3]),
    ] {
        assert!((16 * tets) as u64 <= MAX_BINDING, "{tets} tets");
        let w = texture_width(tets).unwrap_or_else(|| panic!("{tets} tets: no texture width"));
        assert!(w <= MAX_TEXTURE_SIDE && tets.div_ceil(w as usize) <= 8192);
        Grid::cover(tets as u64, 256).unwrap();
    }
}

/// The dense section's shapes: A, B and C each fit one binding.
#[test]
fn dense_shapes_fit() {
    let s = gpu();
    let [m, n, k] = s.dense_pyfr;
    for (m, n, k) in [(s.dense_square, s.dense_square, s.dense_square), (m, n, k)] {
        for dtype in [DType::F32, DType::F64] {
            for elems in [m * k, k * n, m * n] {
                assert!((elems * dtype.size()) as u64 <= MAX_BINDING, "{m}x{n}x{k}");
            }
        }
    }
}

/// A GPU call is scarce: every dense tiling the device session names (`--params KEY`, and `KEY-u` from its loop)
/// must parse here first.
#[test]
fn every_tiling_the_gpu_session_names_parses() {
    use bespoke::mm::dense::DenseParams;
    let script = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/benches/gpu/session.sh"
    ))
    .unwrap();
    let keys: Vec<&str> = script
        .split(|c: char| c.is_whitespace() || matches!(c, ':' | '"' | '$' | ';'))
        .filter(|w| w.starts_with('t') && w.contains("-w") && w.contains("-k"))
        .collect();
    assert!(keys.len() >= 3, "{keys:?}");
    for k in keys {
        let p = DenseParams::parse(k).unwrap_or_else(|| panic!("session.sh names `{k}`"));
        assert!(!p.unroll, "{k}: the script adds -u itself");
        assert_eq!(DenseParams::parse(&format!("{k}-u")), Some(p.unrolled()));
    }
}
