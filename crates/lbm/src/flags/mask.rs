//! Walls from PNG masks: a staircase of solid cells, or a level set of the image's lightness with interpolated
//! bounce-back on its contour.

use std::path::Path;

use super::{Cell, Flags};
use crate::error::{LbmError, Result};

impl Flags {
    /// Solid cells from a PNG mask scaled to nx × ny (nearest pixel): dark pixels (lightness < 50 %, after
    /// compositing over white, so transparent pixels are open) are walls. The image's top row is the lattice's top
    /// (y = ny − 1).
    pub fn add_png_mask(&mut self, path: &Path) -> Result<usize> {
        let img = read_mask(path)?;
        Ok(self.add_mask_staircase(&img))
    }

    /// [`Flags::add_png_mask`] of a read mask, a row at a time from its image row's runs of dark pixels: a row
    /// costs its walls and its pixel row's runs, not its cells (every rank builds the whole domain's flags).
    pub(crate) fn add_mask_staircase(&mut self, img: &Mask) -> usize {
        let (w, h, nx, ny) = (img.width, img.height, self.nx, self.ny);
        // Each image row's runs of dark pixels, [u0, u1).
        let dark: Vec<Vec<(usize, usize)>> = img
            .lightness
            .chunks_exact(w)
            .map(|row| {
                let mut runs = Vec::new();
                let mut u = 0;
                while u < w {
                    if row[u] < 0.5 {
                        let u0 = u;
                        while u < w && row[u] < 0.5 {
                            u += 1;
                        }
                        runs.push((u0, u));
                    } else {
                        u += 1;
                    }
                }
                runs
            })
            .collect();
        let mut walls = 0;
        for y in 0..ny {
            let py = ((ny - 1 - y) * h / ny).min(h - 1);
            for &(u0, u1) in &dark[py] {
                // Cell x takes pixel ⌊x·w/nx⌋, which lies in [u0, u1) for x from ⌈u0·nx/w⌉ to ⌈u1·nx/w⌉.
                for x in (u0 * nx).div_ceil(w)..(u1 * nx).div_ceil(w).min(nx) {
                    self.set(x, y, Cell::Wall);
                    walls += 1;
                }
            }
        }
        walls
    }

    /// Walls from a PNG mask with interpolated bounce-back on their edges: the image's lightness, interpolated
    /// bilinearly between pixel centres (the image stretched over the lattice), is a level set whose 50 % contour
    /// is the wall (`add_shape`). An anti-aliased image thus gives smooth walls at sub-cell positions, where
    /// `add_png_mask` gives a staircase; a hard-edged one gives walls half-way between its pixels' centres.
    pub fn add_png_mask_interpolated(&mut self, path: &Path) -> Result<usize> {
        let img = read_mask(path)?;
        Ok(self.add_mask_interpolated(&img))
    }

    /// [`Flags::add_png_mask_interpolated`] of a read mask, testing only the cells near its dark pixels (every
    /// rank builds the whole domain's flags: a small body in a large image is O(its box) a rank, not O(cells)).
    pub(crate) fn add_mask_interpolated(&mut self, img: &Mask) -> usize {
        let region = dark_region(img, self.nx, self.ny);
        let phi = mask_phi(img, self.nx, self.ny);
        self.add_shape_within(region, phi, |_, _| [0.0, 0.0], true)
    }
}

/// The level set of `img` stretched over an nx × ny lattice: its lightness, interpolated bilinearly between pixel
/// centres, less one half (≤ 0: wall).
pub(crate) fn mask_phi(img: &Mask, nx: usize, ny: usize) -> impl Fn(f64, f64) -> f64 + '_ {
    let (nx, ny) = (nx as f64, ny as f64);
    let (w, h) = (img.width, img.height);
    move |x: f64, y: f64| {
        // Pixel coordinates (centres at integers) of lattice point (x, y); image rows run top down.
        let u = ((x + 0.5) * w as f64 / nx - 0.5).clamp(0.0, (w - 1) as f64);
        let v = ((ny - 0.5 - y) * h as f64 / ny - 0.5).clamp(0.0, (h - 1) as f64);
        let (u0, v0) = (u.floor() as usize, v.floor() as usize);
        let (u1, v1) = ((u0 + 1).min(w - 1), (v0 + 1).min(h - 1));
        let (fu, fv) = (u - u0 as f64, v - v0 as f64);
        let at = |px: usize, py: usize| img.lightness[py * w + px];
        let top = at(u0, v0) * (1.0 - fu) + at(u1, v0) * fu;
        let bottom = at(u0, v1) * (1.0 - fu) + at(u1, v1) * fu;
        top * (1.0 - fv) + bottom * fv - 0.5
    }
}

/// The cells of an nx × ny lattice where [`mask_phi`] can be ≤ 0, as x and y ranges: those within a pixel of a
/// pixel of lightness ≤ ½ (a bilinear value mixes the four pixels around it, so it is > ½ wherever they all
/// are), a cell of margin each side; empty where no pixel is that dark.
fn dark_region(img: &Mask, nx: usize, ny: usize) -> [std::ops::Range<usize>; 2] {
    let (w, h) = (img.width, img.height);
    let (mut px, mut py) = ((usize::MAX, 0), (usize::MAX, 0));
    for (k, &l) in img.lightness.iter().enumerate() {
        if l <= 0.5 {
            let (u, v) = (k % w, k / w);
            px = (px.0.min(u), px.1.max(u));
            py = (py.0.min(v), py.1.max(v));
        }
    }
    if px.0 == usize::MAX {
        return [0..0, 0..0];
    }
    // Pixel u's centre lies at lattice x = (u + ½)·nx/w − ½; it weighs in within one pixel of it. Rows run from
    // the top: pixel v's centre at y = ny − ½ − (v + ½)·ny/h.
    let (sx, sy) = (nx as f64 / w as f64, ny as f64 / h as f64);
    let span = |lo: f64, hi: f64, n: usize| {
        let lo = (lo.floor() - 1.0).max(0.0).min(n as f64) as usize;
        let hi = (hi.ceil() + 2.0).clamp(0.0, n as f64) as usize;
        lo..hi
    };
    let x = span(
        (px.0 as f64 - 0.5) * sx - 0.5,
        (px.1 as f64 + 1.5) * sx - 0.5,
        nx,
    );
    let y = span(
        ny as f64 - 0.5 - (py.1 as f64 + 1.5) * sy,
        ny as f64 - 0.5 - (py.0 as f64 - 0.5) * sy,
        ny,
    );
    [x, y]
}

pub(crate) struct Mask {
    pub(super) width: usize,
    pub(super) height: usize,
    /// Per pixel, row-major from the top: lightness in [0, 1] composited over white.
    pub(super) lightness: Vec<f64>,
}

/// A PNG's reader past its header, with 16-bit samples stripped and palettes expanded.
fn open_png(path: &Path) -> Result<png::Reader<std::io::BufReader<std::fs::File>>> {
    let file = std::fs::File::open(path).map_err(|e| LbmError::io(path, e))?;
    let mut decoder = png::Decoder::new(std::io::BufReader::new(file));
    decoder.set_transformations(png::Transformations::EXPAND | png::Transformations::STRIP_16);
    decoder
        .read_info()
        .map_err(|e| LbmError::file(path, format!("not a readable PNG: {e}")))
}

/// Whether the mask decodes, row by row, holding one row at a time (`cases::check`, before a device is opened;
/// the run reads it whole).
pub(crate) fn check_mask(path: &Path) -> Result<()> {
    let mut reader = open_png(path)?;
    let (w, h) = reader.info().size();
    if w == 0 || h == 0 {
        return Err(LbmError::file(path, "empty image"));
    }
    while reader
        .next_row()
        .map_err(|e| LbmError::file(path, format!("PNG data: {e}")))?
        .is_some()
    {}
    Ok(())
}

/// The decoded pixels (`decoded` bytes) and their lightness (8 B a pixel) are held at once: refused where the
/// host has less memory `available`, instead of ending in the OOM killer (a 439 kB PNG of 20 000² pixels took
/// 3.6 GB).
pub(super) fn fits_memory(
    path: &Path,
    (w, h): (u32, u32),
    decoded: usize,
    available: Option<u64>,
) -> Result<()> {
    let bytes = decoded as u64 + 8 * u64::from(w) * u64::from(h);
    match available {
        Some(have) if bytes > have => Err(LbmError::file(
            path,
            format!(
                "a {w}×{h} image needs about {:.1} GB of host memory to read, and this host has {:.1} GB \
                 available: scale it down (the lattice samples it at its own size)",
                bytes as f64 / 1e9,
                have as f64 / 1e9
            ),
        )),
        _ => Ok(()),
    }
}

/// The mask decoded whole: each pixel's lightness, composited over white.
pub(crate) fn read_mask(path: &Path) -> Result<Mask> {
    let mut reader = open_png(path)?;
    let (w, h) = reader.info().size();
    let decoded = reader
        .output_buffer_size()
        .ok_or_else(|| LbmError::file(path, "PNG too large"))?;
    fits_memory(path, (w, h), decoded, bespoke_gpu::available_memory())?;
    let mut buf = vec![0; decoded];
    let info = reader
        .next_frame(&mut buf)
        .map_err(|e| LbmError::file(path, format!("PNG data: {e}")))?;
    let (width, height) = (info.width as usize, info.height as usize);
    if width == 0 || height == 0 {
        return Err(LbmError::file(path, "empty image"));
    }
    let channels = info.color_type.samples();
    let lightness = buf[..info.buffer_size()]
        .chunks(channels)
        .take(width * height)
        .map(|px| {
            let luma = if channels >= 3 {
                0.299 * f64::from(px[0]) + 0.587 * f64::from(px[1]) + 0.114 * f64::from(px[2])
            } else {
                f64::from(px[0])
            } / 255.0;
            // Over white: transparent pixels count as open.
            let alpha = f64::from(match channels {
                2 => px[1],
                4 => px[3],
                _ => 255,
            }) / 255.0;
            1.0 - alpha * (1.0 - luma)
        })
        .collect();
    Ok(Mask {
        width,
        height,
        lightness,
    })
}
