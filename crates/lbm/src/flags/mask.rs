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
        let mut walls = 0;
        for y in 0..self.ny {
            let py = ((self.ny - 1 - y) * img.height / self.ny).min(img.height - 1);
            for x in 0..self.nx {
                let px = (x * img.width / self.nx).min(img.width - 1);
                if img.lightness[py * img.width + px] < 0.5 {
                    self.set(x, y, Cell::Wall);
                    walls += 1;
                }
            }
        }
        Ok(walls)
    }

    /// Walls from a PNG mask with interpolated bounce-back on their edges: the image's lightness, interpolated
    /// bilinearly between pixel centres (the image stretched over the lattice), is a level set whose 50 % contour
    /// is the wall (`add_shape`). An anti-aliased image thus gives smooth walls at sub-cell positions, where
    /// `add_png_mask` gives a staircase; a hard-edged one gives walls half-way between its pixels' centres.
    pub fn add_png_mask_interpolated(&mut self, path: &Path) -> Result<usize> {
        let img = read_mask(path)?;
        let (nx, ny) = (self.nx as f64, self.ny as f64);
        let (w, h) = (img.width, img.height);
        let phi = |x: f64, y: f64| {
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
        };
        Ok(self.add_shape(phi, |_, _| [0.0, 0.0], true))
    }
}

pub(crate) struct Mask {
    width: usize,
    height: usize,
    /// Per pixel, row-major from the top: lightness in [0, 1] composited over white.
    lightness: Vec<f64>,
}

pub(crate) fn read_mask(path: &Path) -> Result<Mask> {
    let file = std::fs::File::open(path).map_err(|e| LbmError::io(path, e))?;
    let mut decoder = png::Decoder::new(std::io::BufReader::new(file));
    decoder.set_transformations(png::Transformations::EXPAND | png::Transformations::STRIP_16);
    let mut reader = decoder
        .read_info()
        .map_err(|e| LbmError::file(path, format!("not a readable PNG: {e}")))?;
    let mut buf = vec![
        0;
        reader
            .output_buffer_size()
            .ok_or_else(|| LbmError::file(path, "PNG too large"))?
    ];
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
