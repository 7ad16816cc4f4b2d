//! A small raster plot (no text: the legend is printed by the CLI) of throughput against block size.

use std::path::Path;

use crate::error::{FvError, Result};

/// A series of (log2 block size, GB/s) points drawn as a line, or as markers when `line` is false; markers are
/// filled squares, or outlines when `hollow`.
#[derive(Clone, Debug)]
pub struct Series {
    pub points: Vec<(f64, f64)>,
    pub colour: [u8; 3],
    pub line: bool,
    pub hollow: bool,
}

const W: usize = 800;
const H: usize = 500;
const PAD: usize = 50;

/// Writes an RGB PNG: x from `x_range` (log2 block size), y from 0 to `y_max` GB/s, a grey horizontal line at
/// `reference` (the copy bandwidth), tick marks at every integer x and every `y_tick`.
pub fn write_plot(
    path: &Path,
    series: &[Series],
    x_range: (f64, f64),
    y_max: f64,
    reference: f64,
) -> Result<()> {
    let mut img = vec![255u8; W * H * 3];
    let px = |x: f64| {
        PAD as f64 + (x - x_range.0) / (x_range.1 - x_range.0).max(1e-9) * (W - 2 * PAD) as f64
    };
    let py = |y: f64| (H - PAD) as f64 - y / y_max.max(1e-30) * (H - 2 * PAD) as f64;
    let put = |img: &mut Vec<u8>, x: i64, y: i64, c: [u8; 3]| {
        if x >= 0 && y >= 0 && (x as usize) < W && (y as usize) < H {
            let k = (y as usize * W + x as usize) * 3;
            img[k..k + 3].copy_from_slice(&c);
        }
    };
    let line = |img: &mut Vec<u8>, a: (f64, f64), b: (f64, f64), c: [u8; 3]| {
        let steps = ((b.0 - a.0).abs().max((b.1 - a.1).abs()) as usize).max(1);
        for s in 0..=steps {
            let t = s as f64 / steps as f64;
            let (x, y) = (a.0 + t * (b.0 - a.0), a.1 + t * (b.1 - a.1));
            for d in [(0, 0), (1, 0), (0, 1)] {
                put(img, x.round() as i64 + d.0, y.round() as i64 + d.1, c);
            }
        }
    };
    let black = [0, 0, 0];
    let (x0, x1) = (px(x_range.0), px(x_range.1));
    line(&mut img, (x0, py(0.0)), (x1, py(0.0)), black);
    line(&mut img, (x0, py(0.0)), (x0, py(y_max)), black);
    let mut x = x_range.0.ceil();
    while x <= x_range.1 {
        line(&mut img, (px(x), py(0.0)), (px(x), py(0.0) + 6.0), black);
        x += 1.0;
    }
    let tick = nice_tick(y_max);
    let mut y = 0.0;
    while y <= y_max {
        line(&mut img, (x0 - 6.0, py(y)), (x0, py(y)), black);
        y += tick;
    }
    if reference > 0.0 && reference <= y_max {
        let mut x = x0;
        while x < x1 {
            line(
                &mut img,
                (x, py(reference)),
                ((x + 6.0).min(x1), py(reference)),
                [150, 150, 150],
            );
            x += 12.0;
        }
    }
    for s in series {
        let pts: Vec<(f64, f64)> = s.points.iter().map(|&(x, y)| (px(x), py(y))).collect();
        if s.line {
            for w in pts.windows(2) {
                line(&mut img, w[0], w[1], s.colour);
            }
        }
        for &(x, y) in &pts {
            for dx in -3i64..=3 {
                for dy in -3i64..=3 {
                    if s.hollow && dx.abs() < 3 && dy.abs() < 3 {
                        continue;
                    }
                    put(
                        &mut img,
                        x.round() as i64 + dx,
                        y.round() as i64 + dy,
                        s.colour,
                    );
                }
            }
        }
    }
    let io = |e: std::io::Error| FvError::io(path, e);
    let png_err = |e: png::EncodingError| io(std::io::Error::other(e.to_string()));
    // Encoded in memory, then written whole or not at all: a failed write keeps any older plot of that name.
    let mut bytes = Vec::new();
    let mut enc = png::Encoder::new(&mut bytes, W as u32, H as u32);
    enc.set_color(png::ColorType::Rgb);
    enc.set_depth(png::BitDepth::Eight);
    let mut w = enc.write_header().map_err(png_err)?;
    w.write_image_data(&img).map_err(png_err)?;
    w.finish().map_err(png_err)?;
    bespoke_gpu::write_atomic(path, &bytes).map_err(io)
}

/// 1, 2 or 5 × 10^k, giving 4–10 ticks up to `max`.
fn nice_tick(max: f64) -> f64 {
    let raw = max / 6.0;
    let p = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * p)
        .find(|&t| t >= raw)
        .unwrap_or(p * 10.0)
}
