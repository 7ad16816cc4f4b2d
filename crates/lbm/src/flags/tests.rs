use super::*;

#[test]
fn distances_overwritten_by_edge_cells_are_pruned() {
    let mut f = Flags::fluid(30, 12);
    // A circle through the bottom row and the inlet column.
    f.add_circle([1.4, 2.2], 3.3, true);
    let all = f.wall_distances().count();
    f.channel_walls();
    for y in 1..11 {
        f.set(0, y, Cell::Inlet([0.02, 0.0]));
    }
    assert!(
        f.encode().is_err(),
        "distances from walls or into an inlet must not encode"
    );
    let dropped = f.prune_wall_distances();
    assert!(dropped > 0 && dropped < all, "{dropped} of {all}");
    f.encode().expect("pruned flags encode");
    assert_eq!(f.prune_wall_distances(), 0);
}

#[test]
fn a_palette_holds_the_distinct_cells_and_fluid_flags_hold_no_array() {
    let mut f = Flags::fluid(64, 48);
    f.set(5, 5, Cell::Fluid);
    assert!(f.kinds.is_fluid() && f.all_fluid());
    assert_eq!(f.fluid_cells(), 64 * 48);
    f.box_walls();
    for x in 1..63 {
        f.set(x, 47, Cell::MovingWall([0.1, 0.0]));
    }
    f.add_circle([30.0, 20.0], 6.5, true);
    // Fluid, wall, the lid: three palette entries, and at most about a byte a cell (runs while they cost
    // less, give or take their vectors' spare room), where a Cell takes 24 bytes.
    assert_eq!(f.palette.len(), 3);
    assert!(f.index_bytes() <= 2 * 64 * 48, "{} B", f.index_bytes());
    assert_eq!(f.get(10, 47), Cell::MovingWall([0.1, 0.0]));
    assert_eq!(f.get(0, 47), Cell::Wall);
    assert_eq!(f.get(30, 20), Cell::Wall);
    assert_eq!(f.get(10, 10), Cell::Fluid);
    assert!(!f.all_fluid());
    let solid = f.cells().filter(|c| c.is_solid()).count();
    assert_eq!(f.fluid_cells(), 64 * 48 - solid);
    // A cell set back to fluid is fluid again; equal cells make equal flags whatever order filled the palette.
    let mut g = Flags::fluid(64, 48);
    g.add_circle([30.0, 20.0], 6.5, true);
    for x in 1..63 {
        g.set(x, 47, Cell::MovingWall([0.1, 0.0]));
    }
    g.set(3, 3, Cell::Outlet(1.0));
    g.set(3, 3, Cell::Fluid);
    assert_ne!(f, g);
    g.box_walls();
    for x in 1..63 {
        g.set(x, 47, Cell::MovingWall([0.1, 0.0]));
    }
    assert_ne!(f.palette, g.palette);
    assert_eq!(f, g);
    // A window carries each cell and wall distance across, wrapping around the domain; also one wider and
    // taller than the domain (a block spanning it, with its halo on both sides).
    for (origin, size) in [([60, 40], [10, 12]), ([63, 47], [66, 50])] {
        let w = f.window(origin, size);
        for ly in 0..size[1] {
            for lx in 0..size[0] {
                let (x, y) = ((origin[0] + lx) % 64, (origin[1] + ly) % 48);
                assert_eq!(w.get(lx, ly), f.get(x, y), "({lx}, {ly})");
                for d in 1..9 {
                    assert_eq!(w.wall_distance(lx, ly, d), f.wall_distance(x, y, d));
                }
            }
        }
    }
    let w = f.window([24, 14], [12, 12]);
    assert!(w.has_wall_distances());
    assert_eq!(
        w.wall_distances().count(),
        f.wall_distances()
            .filter(|((x, y, _), _)| (24..36).contains(x) && (14..26).contains(y))
            .count()
    );
    assert!(Flags::fluid(8, 8).window([4, 4], [8, 8]).kinds.is_fluid());
}

#[test]
fn a_channel_with_an_inlet_profile_and_a_body_takes_a_few_runs_a_row() {
    // The cylinder case's shape at 4096 × 1024: walls, a parabolic inlet (a palette entry a row), an outlet,
    // a body with wall distances. As an array this was 2 B a cell (8 MB); as runs, under 96 B a row.
    let (nx, ny) = (4096, 1024);
    let mut f = Flags::fluid(nx, ny);
    f.add_circle([800.0, 500.0], 90.0, true);
    f.channel_walls();
    for y in 1..ny - 1 {
        let s = y as f64 / ny as f64;
        f.set(0, y, Cell::Inlet([0.2 * s * (1.0 - s), 0.0]));
        f.set(nx - 1, y, Cell::Outlet(1.0));
    }
    assert!(f.palette.len() > 256, "an inlet value a row");
    assert!(f.index_bytes() < 96 * ny, "{} B", f.index_bytes());
    assert_eq!(
        f.get(0, 300),
        Cell::Inlet([0.2 * (300.0 / 1024.0) * (1.0 - 300.0 / 1024.0), 0.0])
    );
    assert_eq!(f.get(800, 500), Cell::Wall);
    assert_eq!(f.get(nx - 1, 7), Cell::Outlet(1.0));
    assert_eq!(f.fluid_cells(), f.cells().filter(|c| !c.is_solid()).count());
    assert_eq!(f.cells().len(), nx * ny);
    f.encode().expect("encodes");
}

#[test]
fn masks_mark_solid_pull_sources() {
    let mut f = Flags::fluid(4, 5);
    f.channel_walls();
    let e = f.encode().expect("encodes");
    // Cell (1, 1) pulls from y = 0 for directions with c_y = +1: 2, 5, 6.
    let code = e.codes[5 + 1];
    assert_eq!(code & TYPE_MASK, TYPE_FLUID);
    let mask = (code >> MASK_SHIFT) & 0x1ff;
    assert_eq!(mask, (1 << 2) | (1 << 5) | (1 << 6));
    // Periodic in x: (0, 2) has no solid sources.
    assert_eq!((e.codes[2 * 4] >> MASK_SHIFT) & 0x1ff, 0);
}

#[test]
fn rejects_bad_boundaries() {
    let mut f = Flags::fluid(8, 8);
    f.set(3, 3, Cell::Inlet([0.05, 0.0]));
    let e = f.encode().expect_err("interior inlet accepted").to_string();
    assert!(e.contains("edge"), "{e}");
    let mut f = Flags::fluid(8, 8);
    f.set(0, 3, Cell::MovingWall([0.5, 0.0]));
    assert!(
        f.encode()
            .expect_err("Mach 0.87 lid accepted")
            .to_string()
            .contains("Mach")
    );
    let mut f = Flags::fluid(8, 8);
    f.set(7, 3, Cell::Outlet(-1.0));
    assert!(f.encode().is_err());
}

/// A circle tests only the cells of its bounding box: the same cells and wall distances as the whole domain's
/// test with its `phi`, for circles inside the domain, across its edges and corners, past it, tiny and larger
/// than it, on channel walls and earlier bodies.
#[test]
fn a_circle_in_its_bounding_box_marks_what_the_whole_domain_test_marks() {
    let seed = bespoke_gpu::testing::fresh_seed();
    use bespoke_gpu::rng::Rng;
    let mut rng = bespoke_gpu::rng::seeded(seed);
    let (nx, ny) = (37, 23);
    for case in 0..300 {
        let centre = [
            rng.random_range(-6.0..nx as f64 + 6.0),
            rng.random_range(-6.0..ny as f64 + 6.0),
        ];
        let radius: f64 = if case % 10 == 0 {
            rng.random_range(20.0..40.0)
        } else {
            rng.random_range(0.2..7.0)
        };
        // Whole centres and radii put cells on the circle, at the box's edges.
        let (centre, radius) = if case % 4 == 1 {
            (centre.map(f64::round), radius.round().max(1.0))
        } else {
            (centre, radius)
        };
        let interpolated = case % 3 != 0;
        let mut base = Flags::fluid(nx, ny);
        if case % 2 == 0 {
            base.channel_walls();
        }
        base.add_circle([10.5, 11.2], 2.2, true);
        let mut bounded = base.clone();
        bounded.add_circle(centre, radius, interpolated);
        let mut whole = base;
        let phi =
            |x: f64, y: f64| (x - centre[0]).powi(2) + (y - centre[1]).powi(2) - radius * radius;
        let mut boxed = whole.clone();
        whole.add_shape(phi, |_, _| [0.0, 0.0], interpolated);
        // The public form with a box past the domain's far edges: cut to the domain.
        let lo = |c: f64| (c - radius - 1.0).floor().max(0.0) as usize;
        let hi = |c: f64| (c + radius + 2.0).max(0.0) as usize + 50;
        boxed.add_shape_within(
            [lo(centre[0])..hi(centre[0]), lo(centre[1])..hi(centre[1])],
            phi,
            |_, _| [0.0, 0.0],
            interpolated,
        );
        assert!(
            boxed == whole,
            "seed {seed}, circle {centre:?} r {radius}: a box past the domain"
        );
        let what = format!("seed {seed}, circle {centre:?} r {radius}");
        assert!(bounded.cells().eq(whole.cells()), "{what}: cells differ");
        let sorted = |f: &Flags| {
            let mut d: Vec<_> = f.wall_distances().map(|(k, q)| (k, q.to_bits())).collect();
            d.sort();
            d
        };
        assert_eq!(sorted(&bounded), sorted(&whole), "{what}: distances differ");
    }
}

/// An interpolated mask tests only the cells near its dark pixels: the same cells and wall distances as the whole
/// domain's test with its level set, for masks smaller and larger than the lattice, dark pixels at the image's
/// edges and corners, anti-aliased values around ½ (one exactly ½), none dark at all, on channel walls.
#[test]
fn an_interpolated_mask_near_its_dark_pixels_marks_what_the_whole_domain_test_marks() {
    use super::mask::{Mask, mask_phi};
    use bespoke_gpu::rng::Rng;
    let seed = bespoke_gpu::testing::fresh_seed();
    let mut rng = bespoke_gpu::rng::seeded(seed);
    let sorted = |f: &Flags| {
        let mut d: Vec<_> = f.wall_distances().map(|(k, q)| (k, q.to_bits())).collect();
        d.sort();
        d
    };
    let mut marked = 0;
    for case in 0..200 {
        let (nx, ny) = (rng.random_range(8..60), rng.random_range(8..60));
        let (w, h) = (rng.random_range(1..40), rng.random_range(1..40));
        let mut lightness = vec![1.0; w * h];
        // A few dark blobs, each a pixel or a small rectangle, with grey around; some at the edges.
        for _ in 0..rng.random_range(0..3) {
            let (u, v) = match case % 4 {
                0 => (0, 0),
                1 => (w - 1, h - 1),
                _ => (rng.random_range(0..w), rng.random_range(0..h)),
            };
            let (bw, bh) = (rng.random_range(1..4), rng.random_range(1..4));
            for y in v..(v + bh).min(h) {
                for x in u..(u + bw).min(w) {
                    lightness[y * w + x] = rng.random_range(0.0..0.5);
                }
            }
            if u + bw < w {
                lightness[v * w + u + bw] = if case % 5 == 0 { 0.5 } else { 0.6 };
            }
        }
        let img = Mask {
            width: w,
            height: h,
            lightness,
        };
        let mut base = Flags::fluid(nx, ny);
        if case % 2 == 0 {
            base.channel_walls();
        }
        let mut near = base.clone();
        let n = near.add_mask_interpolated(&img);
        let mut whole = base;
        let m = whole.add_shape(mask_phi(&img, nx, ny), |_, _| [0.0, 0.0], true);
        let what = format!("seed {seed}, case {case}: {w}x{h} mask on {nx}x{ny}");
        assert_eq!(n, m, "{what}: cells inside");
        assert!(near.cells().eq(whole.cells()), "{what}: cells differ");
        assert_eq!(sorted(&near), sorted(&whole), "{what}: distances differ");
        marked += n;
    }
    assert!(marked > 200, "the masks marked {marked} cells in all");
}

/// A staircase mask set from each image row's runs of dark pixels marks the cells the nearest-pixel rule marks
/// cell by cell: masks smaller and larger than the lattice, runs at the image's edges, a pixel exactly ½ (open).
#[test]
fn a_staircase_mask_marks_the_nearest_pixel_rule_cells() {
    use super::mask::Mask;
    use bespoke_gpu::rng::Rng;
    let seed = bespoke_gpu::testing::fresh_seed();
    let mut rng = bespoke_gpu::rng::seeded(seed);
    let mut marked = 0;
    for case in 0..200 {
        let (nx, ny) = (rng.random_range(1..70), rng.random_range(1..70));
        let (w, h) = (rng.random_range(1..50), rng.random_range(1..50));
        let lightness: Vec<f64> = (0..w * h)
            .map(|k| match (case + k) % 7 {
                0 => 0.5,
                1 | 2 => rng.random_range(0.0..0.5),
                _ => rng.random_range(0.0..1.0),
            })
            .collect();
        let mut expect = Flags::fluid(nx, ny);
        let mut want = 0;
        for y in 0..ny {
            let py = ((ny - 1 - y) * h / ny).min(h - 1);
            for x in 0..nx {
                let px = (x * w / nx).min(w - 1);
                if lightness[py * w + px] < 0.5 {
                    expect.set(x, y, Cell::Wall);
                    want += 1;
                }
            }
        }
        let img = Mask {
            width: w,
            height: h,
            lightness,
        };
        let mut got = Flags::fluid(nx, ny);
        let n = got.add_mask_staircase(&img);
        let what = format!("seed {seed}, case {case}: {w}x{h} mask on {nx}x{ny}");
        assert_eq!(n, want, "{what}: walls");
        assert!(got.cells().eq(expect.cells()), "{what}: cells differ");
        marked += n;
    }
    assert!(marked > 1000, "the masks marked {marked} cells in all");
}

/// The device-free check decodes the image row by row: a whole PNG passes, one cut inside its pixel data is
/// refused by name, as the run's whole read refuses it.
#[test]
fn the_mask_check_decodes_every_row() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("m.png");
    let (w, h) = (37u32, 23u32);
    let px: Vec<u8> = (0..w * h).map(|i| (i * 37 % 251) as u8).collect();
    let mut bytes = Vec::new();
    {
        let mut enc = png::Encoder::new(&mut bytes, w, h);
        enc.set_color(png::ColorType::Grayscale);
        enc.set_compression(png::Compression::NoCompression);
        let mut writer = enc.write_header().expect("header");
        writer.write_image_data(&px).expect("pixels");
    }
    std::fs::write(&path, &bytes).expect("write");
    super::check_mask(&path).expect("a whole PNG");
    let m = super::mask::read_mask(&path).expect("read");
    assert_eq!((m.width, m.height), (37, 23));
    assert_eq!(m.lightness[40], f64::from(px[40]) / 255.0);
    // Cut inside the pixel data (uncompressed, so well past the header): the rows run out.
    std::fs::write(&path, &bytes[..bytes.len() / 2]).expect("write");
    // The whole read needs the pixels and 8 B a pixel of lightness: past the host's available memory, refused.
    let fits = |have| super::mask::fits_memory(&path, (20_000, 20_000), 400_000_000, Some(have));
    let e = fits(3_000_000_000).unwrap_err().to_string();
    assert!(
        e.contains("a 20000×20000 image needs about 3.6 GB") && e.contains("3.0 GB"),
        "{e}"
    );
    assert!(fits(4_000_000_000).is_ok());
    assert!(super::mask::fits_memory(&path, (20_000, 20_000), 400_000_000, None).is_ok());
    for e in [
        super::check_mask(&path).unwrap_err(),
        super::mask::read_mask(&path).err().expect("a cut PNG read"),
    ] {
        let e = e.to_string();
        assert!(e.contains("m.png") && e.contains("PNG data"), "{e}");
    }
}
