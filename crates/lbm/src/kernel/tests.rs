//! Every kernel the generator makes validates without a device.

use super::collide::cu_expr;
use super::*;
use bespoke_gpu::{caps_for, validate_everywhere};

#[test]
fn every_kernel_validates_without_a_device() {
    let mut n = 0;
    // ny 6 pairs f16 rows; ny 7 stores one f16 per cell (and needs SHADER_F16).
    for (storage, ny) in [(Storage::F32, 6), (Storage::F16, 6), (Storage::F16, 7)] {
        for collision in [Collision::Bgk { omega: 1.3 }, Collision::trt(0.7)] {
            for (force, smagorinsky) in [
                ([0.0, 0.0], 0.0),
                ([1e-5, -2e-6], 0.0),
                ([1e-5, -2e-6], 0.17),
            ] {
                for (flags, curved) in [(false, false), (true, false), (true, true)] {
                    for phase in [Phase::Ab, Phase::AaEven, Phase::AaOdd] {
                        // The macroscopic kernel also with its three outputs in one buffer, and every kernel
                        // with the in-place stash after the boundary table (as on four storage buffers).
                        for (mode, one_buffer, packed_macros, packed_stash) in
                            [Mode::Step, Mode::Macro, Mode::Probe]
                                .into_iter()
                                .flat_map(|m| [(m, 0, false, false), (m, 256, false, false)])
                                .chain([
                                    (Mode::Macro, 0, true, false),
                                    (Mode::Macro, 256, true, false),
                                    (Mode::Step, 256, false, true),
                                    (Mode::Macro, 256, true, true),
                                    (Mode::Probe, 256, false, true),
                                ])
                        {
                            let spec = KernelSpec {
                                nx: 37,
                                ny,
                                storage,
                                collision,
                                force,
                                smagorinsky,
                                flags,
                                curved,
                                phase,
                                mode,
                                edges: Edges::whole(37, ny),
                                region: Region::All,
                                folded_f16: false,
                                // Stores rounded explicitly (a device whose pack does not round to nearest)
                                // with TRT, so both kinds meet every layout, kernel and phase.
                                exact_f16: matches!(collision, Collision::Trt { .. }),
                                // A step kernel at a launch shape other than the default: 2 or 4 cells per
                                // invocation by phase (kernels of other modes take 1 whatever they are told).
                                wg: if mode == Mode::Step { 256 } else { WG },
                                cells: match phase {
                                    Phase::Ab => 2,
                                    Phase::AaEven => 1,
                                    Phase::AaOdd => 4,
                                },
                                ablation: None,
                                // Nine bindings, or one buffer for all directions 256 words apart.
                                one_buffer,
                                packed_macros,
                                packed_stash,
                                // Blocks in descending order (step kernels over every cell) with a flag field,
                                // at 1, 2 and 4 cells per invocation by phase.
                                descending: flags,
                            };
                            assert_eq!(
                                spec.per_invocation() > 1,
                                mode == Mode::Step && phase != Phase::AaEven
                            );
                            let src = spec.generate();
                            let f16 = spec.layout() == Layout::F16Single;
                            validate_everywhere(&src, caps_for(false, f16))
                                .unwrap_or_else(|e| panic!("{}: {e}\n{src}", spec.name()));
                            let decl = src.matches("@group(0) @binding(").count();
                            assert_eq!(decl, spec.storage_bindings(), "{}", spec.name());
                            n += 1;
                        }
                    }
                }
            }
        }
    }
    assert_eq!(n, 1782);
}

#[test]
fn cu_expressions() {
    assert_eq!(cu_expr(0, "ux", "uy"), "0.0");
    assert_eq!(cu_expr(1, "ux", "uy"), "(ux)");
    assert_eq!(cu_expr(7, "ux", "uy"), "(- ux - uy)");
    assert_eq!(cu_expr(8, "ux", "uy"), "(ux - uy)");
}

/// The WGSL of one step kernel per streaming phase and storage, pinned as insta snapshots
/// (`src/kernel/snapshots/`): a generator change shows up as a reviewable diff. Accept an intended change with
/// `cargo insta review` (or `INSTA_UPDATE=always cargo test -p bespoke-lbm --lib snapshots`).
#[test]
fn snapshots_of_one_kernel_per_phase_and_storage() {
    for (storage, ny, phase, collision) in [
        (Storage::F32, 6, Phase::Ab, Collision::Bgk { omega: 1.3 }),
        (Storage::F16, 6, Phase::AaEven, Collision::trt(0.7)),
        (Storage::F16, 7, Phase::AaOdd, Collision::trt(0.7)),
    ] {
        let spec = KernelSpec {
            nx: 37,
            ny,
            storage,
            collision,
            force: [1e-5, -2e-6],
            smagorinsky: 0.17,
            flags: true,
            curved: true,
            phase,
            mode: Mode::Step,
            edges: Edges::whole(37, ny),
            region: Region::All,
            folded_f16: false,
            exact_f16: false,
            wg: WG,
            cells: 1,
            ablation: None,
            one_buffer: 0,
            packed_macros: false,
            packed_stash: false,
            descending: false,
        };
        insta::assert_snapshot!(spec.name(), spec.generate());
    }
}

#[test]
fn ablated_step_kernels_validate() {
    for ablation in [Ablation::NoCollision, Ablation::MaskWrap, Ablation::NoPull] {
        for (storage, ny) in [(Storage::F32, 32), (Storage::F16, 32), (Storage::F16, 31)] {
            for flags in [false, true] {
                for phase in [Phase::Ab, Phase::AaEven, Phase::AaOdd] {
                    let spec = KernelSpec {
                        nx: 64,
                        ny,
                        storage,
                        collision: Collision::Bgk { omega: 1.0 },
                        force: [0.0, 0.0],
                        smagorinsky: 0.0,
                        flags,
                        curved: false,
                        phase,
                        mode: Mode::Step,
                        edges: Edges::whole(64, ny),
                        region: Region::All,
                        folded_f16: false,
                        exact_f16: false,
                        wg: 128,
                        cells: 1,
                        ablation: Some(ablation),
                        one_buffer: 0,
                        packed_macros: false,
                        packed_stash: false,
                        descending: false,
                    };
                    let src = spec.generate();
                    let f16 = spec.layout() == Layout::F16Single;
                    validate_everywhere(&src, caps_for(false, f16))
                        .unwrap_or_else(|e| panic!("{}: {e}\n{src}", spec.name()));
                    assert!(spec.name().ends_with(ablation.name()), "{}", spec.name());
                }
            }
        }
    }
}
