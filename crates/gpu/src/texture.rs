//! 2-D textures: read-only ones for constant data that kernels gather from (`textureLoad`, no sampler), and
//! writable (storage) ones.
//!
//! Why: some adapters fetch texels far more cheaply than storage-buffer elements at scattered addresses
//! (llvmpipe gathers texels with vector instructions but loads storage elements one lane at a time), and on
//! GPUs the texture path has its own cache. Data is laid out row by row, `width` texels per row; element `i` is
//! texel `(i % width, i / width)`.

use bytemuck::Pod;

use crate::context::Gpu;
use crate::error::{GpuError, Result};

/// Rows written per `write_texture` call, to bound staging memory.
const ROWS_PER_WRITE: u32 = 256;

/// A sampled 2-D texture of `texels` elements in rows of `width`.
pub struct GpuTexture {
    pub(crate) raw: wgpu::Texture,
    pub(crate) view: wgpu::TextureView,
    width: u32,
    texels: usize,
}

impl std::fmt::Debug for GpuTexture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "GpuTexture[{:?}, {} texels in rows of {}]",
            self.raw.format(),
            self.texels,
            self.width
        )
    }
}

impl GpuTexture {
    /// Texels per row.
    pub fn width(&self) -> u32 {
        self.width
    }
    pub fn texels(&self) -> usize {
        self.texels
    }
    pub fn view(&self) -> &wgpu::TextureView {
        &self.view
    }
}

/// Bytes per texel of the formats this layer uploads.
fn texel_bytes(format: wgpu::TextureFormat) -> Option<u32> {
    use wgpu::TextureFormat as F;
    match format {
        F::R32Float | F::R32Uint | F::R32Sint => Some(4),
        F::Rg32Float | F::Rg32Uint | F::Rg32Sint => Some(8),
        F::Rgba32Float | F::Rgba32Uint | F::Rgba32Sint => Some(16),
        _ => None,
    }
}

impl Gpu {
    /// A zeroed 2-D (array) texture of `size` = [width, height, layers], checked against the adapter's limits.
    fn create_texture(
        &self,
        format: wgpu::TextureFormat,
        size: [u32; 3],
        usage: wgpu::TextureUsages,
    ) -> Result<wgpu::Texture> {
        let [width, height, layers] = size;
        let (max, max_layers) = (
            self.limits.max_texture_dimension_2d,
            self.limits.max_texture_array_layers,
        );
        if width == 0
            || height == 0
            || layers == 0
            || width.max(height) > max
            || layers > max_layers
        {
            return Err(GpuError::LimitExceeded {
                what: format!(
                    "2-D texture of {width} × {height} × {layers} texels (the adapter allows {max} × {max} × \
                     {max_layers})"
                ),
                asked: u64::from(width.max(height)),
                max: u64::from(max),
            });
        }
        self.scoped(
            &format!("allocating a {width} × {height} × {layers} {format:?} texture"),
            || {
                self.device.create_texture(&wgpu::TextureDescriptor {
                    label: Some("bespoke texture"),
                    size: wgpu::Extent3d {
                        width,
                        height,
                        depth_or_array_layers: layers,
                    },
                    mip_level_count: 1,
                    sample_count: 1,
                    dimension: wgpu::TextureDimension::D2,
                    format,
                    usage,
                    view_formats: &[],
                })
            },
        )
    }

    /// A zeroed texture of `layers` layers of `width` × `height` texels that kernels write with `textureStore`
    /// (`texture_storage_2d_array<…, write>`, or `texture_storage_2d` for one layer) and, bound in a later
    /// dispatch, read with `textureLoad`. Beware llvmpipe: after a storage-texture write its timestamps go wrong
    /// for the rest of the process (`Gpu::time` notices and uses the wall clock).
    pub fn alloc_storage_texture(
        &self,
        format: wgpu::TextureFormat,
        width: u32,
        height: u32,
        layers: u32,
    ) -> Result<GpuTexture> {
        let raw = self.create_texture(
            format,
            [width, height, layers],
            wgpu::TextureUsages::STORAGE_BINDING | wgpu::TextureUsages::TEXTURE_BINDING,
        )?;
        let view = raw.create_view(&wgpu::TextureViewDescriptor {
            dimension: Some(if layers > 1 {
                wgpu::TextureViewDimension::D2Array
            } else {
                wgpu::TextureViewDimension::D2
            }),
            ..Default::default()
        });
        Ok(GpuTexture {
            raw,
            view,
            width,
            texels: width as usize * height as usize * layers as usize,
        })
    }

    /// Uploads `data` (whole texels of `format`, e.g. `[f32; 4]` for `Rgba32Float`) into a new texture of rows
    /// of `width` texels that kernels read with `textureLoad`. The last row is padded with zero texels.
    pub fn upload_texture<T: Pod>(
        &self,
        format: wgpu::TextureFormat,
        width: u32,
        data: &[T],
    ) -> Result<GpuTexture> {
        let bpt = texel_bytes(format).ok_or_else(|| {
            GpuError::InvalidArgument(format!(
                "texture format {format:?} is not one of the 32-bit formats bespoke uploads"
            ))
        })?;
        let bytes: &[u8] = bytemuck::cast_slice(data);
        if !bytes.len().is_multiple_of(bpt as usize) {
            return Err(GpuError::InvalidArgument(format!(
                "{} bytes are not a whole number of {format:?} texels ({bpt} B each)",
                bytes.len()
            )));
        }
        let texels = bytes.len() / bpt as usize;
        let max = self.limits.max_texture_dimension_2d;
        let rows = (texels as u64).div_ceil(u64::from(width.max(1))).max(1);
        if width == 0 || width > max || rows > u64::from(max) {
            return Err(GpuError::LimitExceeded {
                what: format!(
                    "2-D texture side for {texels} texels in rows of {width} (the adapter allows {max} × {max})"
                ),
                asked: u64::from(width).max(rows),
                max: u64::from(max),
            });
        }
        let rows = rows as u32;
        let what = format!("a {width} × {rows} {format:?} texture");
        let raw = self.create_texture(
            format,
            [width, rows, 1],
            wgpu::TextureUsages::TEXTURE_BINDING | wgpu::TextureUsages::COPY_DST,
        )?;
        let row_bytes = (width * bpt) as usize;
        let mut padded_row = vec![0u8; row_bytes];
        self.scoped(&format!("writing {what}"), || {
            let mut row = 0u32;
            while row < rows {
                let n = ROWS_PER_WRITE.min(rows - row);
                let start = row as usize * row_bytes;
                let end = (start + n as usize * row_bytes).min(bytes.len());
                let full = (end - start) / row_bytes;
                let write = |data: &[u8], at: u32, count: u32| {
                    self.queue.write_texture(
                        wgpu::TexelCopyTextureInfo {
                            texture: &raw,
                            mip_level: 0,
                            origin: wgpu::Origin3d { x: 0, y: at, z: 0 },
                            aspect: wgpu::TextureAspect::All,
                        },
                        data,
                        wgpu::TexelCopyBufferLayout {
                            offset: 0,
                            bytes_per_row: Some(width * bpt),
                            rows_per_image: Some(count),
                        },
                        wgpu::Extent3d {
                            width,
                            height: count,
                            depth_or_array_layers: 1,
                        },
                    );
                };
                if full > 0 {
                    write(&bytes[start..start + full * row_bytes], row, full as u32);
                }
                if full < n as usize {
                    // The last, partial row.
                    let tail = &bytes[start + full * row_bytes..end];
                    padded_row[..tail.len()].copy_from_slice(tail);
                    padded_row[tail.len()..].fill(0);
                    write(&padded_row, row + full as u32, 1);
                }
                row += n;
            }
        })?;
        let view = raw.create_view(&wgpu::TextureViewDescriptor::default());
        Ok(GpuTexture {
            raw,
            view,
            width,
            texels,
        })
    }
}

impl GpuTexture {
    /// The texture as a `textureLoad` argument.
    pub fn arg(&self) -> crate::dispatch::Arg<'_> {
        crate::dispatch::Arg::Texture(&self.view)
    }
}
