//! Typed device buffers: upload, poison fill, readback, and binding windows for data past the binding limit.

use std::marker::PhantomData;

use bytemuck::Pod;

use crate::context::Gpu;
use crate::error::{GpuError, Result};

/// Staging granularity for readback and fills: bounds host memory and keeps `write_buffer` copies modest.
const STAGING_BYTES: u64 = 64 << 20;
/// Bytes of writes staged before they are flushed ([`Gpu::stage`]).
const MAX_PENDING_STAGING: u64 = 256 << 20;

/// A storage buffer of `len` elements of `T` (padded to a multiple of 4 bytes, as copies require).
pub struct GpuBuffer<T: Pod> {
    pub(crate) raw: wgpu::Buffer,
    len: usize,
    _t: PhantomData<T>,
}

impl<T: Pod> std::fmt::Debug for GpuBuffer<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "GpuBuffer<{}>[{}]", std::any::type_name::<T>(), self.len)
    }
}

/// A range of elements `offset .. offset + len` that can be bound on its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    pub offset: usize,
    pub len: usize,
}

impl<T: Pod> GpuBuffer<T> {
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// Bytes holding the elements (without the padding).
    pub fn byte_len(&self) -> u64 {
        (self.len * size_of::<T>()) as u64
    }
    /// The wgpu buffer, for code inside bespoke-gpu's own crates that must go beyond the dispatch path.
    /// Whether `other` is this very allocation (of any element type).
    pub fn is<U: Pod>(&self, other: &GpuBuffer<U>) -> bool {
        self.raw() == other.raw()
    }
    pub fn raw(&self) -> &wgpu::Buffer {
        &self.raw
    }
}

fn padded_bytes(bytes: u64) -> u64 {
    bytes.div_ceil(wgpu::COPY_BUFFER_ALIGNMENT).max(1) * wgpu::COPY_BUFFER_ALIGNMENT
}

/// `len` elements of `T` rounded up to a whole number of `align_bytes` (a storage offset alignment): the stride of
/// arrays packed one after another in one buffer, each bound as a window of it. Without a device, for checking
/// sizes against another adapter's limits.
pub fn packed_len<T: Pod>(len: usize, align_bytes: u32) -> usize {
    let elem = size_of::<T>() as u64;
    let align = u64::from(align_bytes).max(4);
    // Elements per aligned granule: the smallest count whose bytes are a multiple of the alignment.
    let granule = (align / gcd(align, elem)) as usize;
    len.div_ceil(granule) * granule
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 { a } else { gcd(b, a % b) }
}

impl Gpu {
    /// Whether a buffer of `len` elements of `T` fits the adapter's buffer size, without allocating it: callers
    /// that build large host-side data for a buffer check first, so a size past the device is an error naming
    /// `what` before host memory runs out. Returns the size in bytes, padded as allocated.
    pub fn check_len<T: Pod>(&self, len: usize, what: &str) -> Result<u64> {
        let bytes = (len as u64)
            .checked_mul(size_of::<T>() as u64)
            .ok_or_else(|| GpuError::LimitExceeded {
                what: format!("{what}: buffer of {len} elements"),
                asked: u64::MAX,
                max: self.limits.max_buffer_size,
            })?;
        let size = padded_bytes(bytes);
        if size > self.limits.max_buffer_size {
            return Err(GpuError::LimitExceeded {
                what: format!(
                    "{what}: buffer size in bytes ({len} × {} B)",
                    size_of::<T>()
                ),
                asked: size,
                max: self.limits.max_buffer_size,
            });
        }
        Ok(size)
    }

    fn create_storage<T: Pod>(&self, len: usize, what: &str) -> Result<GpuBuffer<T>> {
        let size = self.check_len::<T>(len, what)?;
        let raw = self.scoped(&format!("allocating {size} bytes for {what}"), || {
            self.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some(what),
                size,
                usage: wgpu::BufferUsages::STORAGE
                    | wgpu::BufferUsages::COPY_SRC
                    | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            })
        })?;
        Ok(GpuBuffer {
            raw,
            len,
            _t: PhantomData,
        })
    }

    /// A zero-filled buffer (wgpu zero-initialises on first use).
    pub fn alloc<T: Pod>(&self, len: usize) -> Result<GpuBuffer<T>> {
        self.create_storage(len, "buffer")
    }

    /// A buffer filled with `value`; use NaN for outputs so an element a kernel forgets to write fails the test.
    /// Zero bits need no writes: wgpu zero-initialises every buffer (a 4096² lattice's 18 zero-filled buffers
    /// staged 1.2 GB of host memory).
    pub fn alloc_filled<T: Pod>(&self, len: usize, value: T) -> Result<GpuBuffer<T>> {
        let buf = self.create_storage(len, "poisoned buffer")?;
        if bytemuck::bytes_of(&value).iter().any(|&b| b != 0) {
            self.fill(&buf, value)?;
        }
        Ok(buf)
    }

    /// Uploads `data` into a new buffer.
    pub fn upload<T: Pod>(&self, data: &[T]) -> Result<GpuBuffer<T>> {
        let buf = self.create_storage(data.len(), "uploaded buffer")?;
        self.write(&buf, 0, data)?;
        Ok(buf)
    }

    /// Counts `bytes` about to be staged by a write; past [`MAX_PENDING_STAGING`] since the last submission,
    /// submits what is queued and waits for it, so that wgpu frees the staging copies. Without it, uploads with
    /// no submission between them (a lattice's initial state, a mesh's operator) each kept a host copy alive
    /// until the next kernel ran: gigabytes on a 4096² lattice. Every submission goes through `submit_commands`,
    /// which starts the count again.
    fn stage(&self, bytes: u64) -> Result<()> {
        use std::sync::atomic::Ordering;
        let pending = self.staged.fetch_add(bytes, Ordering::Relaxed) + bytes;
        if pending > MAX_PENDING_STAGING {
            let index = self.submit_commands([]);
            self.wait(Some(index), "flushing staged writes")?;
        }
        Ok(())
    }

    /// Submits command buffers: the one place this crate submits, so the count of staged writes restarts here.
    pub(crate) fn submit_commands(
        &self,
        commands: impl IntoIterator<Item = wgpu::CommandBuffer>,
    ) -> wgpu::SubmissionIndex {
        self.staged.store(0, std::sync::atomic::Ordering::Relaxed);
        self.queue.submit(commands)
    }

    /// Overwrites every element with `value`.
    pub fn fill<T: Pod>(&self, buf: &GpuBuffer<T>, value: T) -> Result<()> {
        let chunk = (STAGING_BYTES as usize / size_of::<T>().max(1))
            .min(buf.len)
            .max(1);
        let pattern = vec![value; chunk];
        let mut at = 0;
        while at < buf.len {
            let n = chunk.min(buf.len - at);
            self.write(buf, at, &pattern[..n])?;
            at += n;
        }
        Ok(())
    }

    /// Writes `data` at element `offset`. Byte offset and the written span must stay 4-byte aligned except at
    /// the buffer's end, where the tail is padded.
    pub fn write<T: Pod>(&self, buf: &GpuBuffer<T>, offset: usize, data: &[T]) -> Result<()> {
        if offset
            .checked_add(data.len())
            .is_none_or(|end| end > buf.len)
        {
            return Err(GpuError::InvalidArgument(format!(
                "write of {} elements at offset {offset} into a buffer of {}",
                data.len(),
                buf.len
            )));
        }
        let off = (offset * size_of::<T>()) as u64;
        let bytes: &[u8] = bytemuck::cast_slice(data);
        if !off.is_multiple_of(wgpu::COPY_BUFFER_ALIGNMENT) {
            return Err(GpuError::InvalidArgument(format!(
                "write at byte offset {off}: not a multiple of 4"
            )));
        }
        if bytes.is_empty() {
            return Ok(());
        }
        self.stage(bytes.len() as u64)?;
        let rem = bytes.len() % wgpu::COPY_BUFFER_ALIGNMENT as usize;
        if rem == 0 {
            self.queue.write_buffer(&buf.raw, off, bytes);
        } else if offset + data.len() == buf.len {
            let mut padded = bytes.to_vec();
            padded.resize(bytes.len() + wgpu::COPY_BUFFER_ALIGNMENT as usize - rem, 0);
            self.queue.write_buffer(&buf.raw, off, &padded);
        } else {
            return Err(GpuError::InvalidArgument(format!(
                "write of {} bytes inside a buffer: not a multiple of 4",
                bytes.len()
            )));
        }
        self.check_async_errors("writing a buffer")
    }

    /// Reads the whole buffer back.
    pub fn read<T: Pod>(&self, buf: &GpuBuffer<T>) -> Result<Vec<T>> {
        self.read_range(buf, 0..buf.len)
    }

    /// Reads elements `range` back, through a bounded staging buffer.
    pub fn read_range<T: Pod>(
        &self,
        buf: &GpuBuffer<T>,
        range: std::ops::Range<usize>,
    ) -> Result<Vec<T>> {
        if range.start > range.end || range.end > buf.len {
            return Err(GpuError::InvalidArgument(format!(
                "readback of elements {range:?} from a buffer of {}",
                buf.len
            )));
        }
        let mut out: Vec<T> = vec![T::zeroed(); range.len()];
        let dst: &mut [u8] = bytemuck::cast_slice_mut(&mut out);
        let start = (range.start * size_of::<T>()) as u64;
        // Copies must start and span multiples of 4 bytes: widen, then cut.
        let a0 = start / 4 * 4;
        let a1 = padded_bytes(start + dst.len() as u64).min(buf.raw.size());
        let staging_size = (a1 - a0).clamp(4, STAGING_BYTES);
        let staging = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("readback staging"),
            size: staging_size,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let mut pos = a0;
        while pos < a1 {
            let n = (a1 - pos).min(staging_size);
            let mut enc = self.device.create_command_encoder(&Default::default());
            enc.copy_buffer_to_buffer(&buf.raw, pos, &staging, 0, n);
            self.submit_and_map(enc, &staging, n, "reading a buffer back")?;
            {
                let view = staging.get_mapped_range(0..n).map_err(|e| GpuError::Wgpu {
                    context: "viewing a readback buffer".into(),
                    message: format!("{e:?}"),
                })?;
                // Overlap of [pos, pos+n) with the requested [start, start+len) in destination coordinates.
                let lo = pos.max(start);
                let hi = (pos + n).min(start + dst.len() as u64);
                if hi > lo {
                    dst[(lo - start) as usize..(hi - start) as usize]
                        .copy_from_slice(&view[(lo - pos) as usize..(hi - pos) as usize]);
                }
            }
            staging.unmap();
            pos += n;
        }
        Ok(out)
    }

    /// Submits `enc` with a read mapping of `staging[..bytes]` and waits until the mapping is usable.
    pub(crate) fn submit_and_map(
        &self,
        enc: wgpu::CommandEncoder,
        staging: &wgpu::Buffer,
        bytes: u64,
        context: &str,
    ) -> Result<()> {
        let (tx, rx) = std::sync::mpsc::channel();
        enc.map_buffer_on_submit(staging, wgpu::MapMode::Read, 0..bytes, move |r| {
            let _ = tx.send(r);
        });
        let idx = self.submit_commands([enc.finish()]);
        self.wait_mapped(Some(idx), &rx, context)
    }

    /// Waits for submission `index`, then for the mapping whose callback reports on `rx`.
    pub(crate) fn wait_mapped(
        &self,
        index: Option<wgpu::SubmissionIndex>,
        rx: &std::sync::mpsc::Receiver<std::result::Result<(), wgpu::BufferAsyncError>>,
        context: &str,
    ) -> Result<()> {
        self.wait(index, context)?;
        rx.recv()
            .map_err(|_| {
                GpuError::DeviceLost(format!("{context}: the mapping callback was dropped"))
            })?
            .map_err(|e| GpuError::Wgpu {
                context: context.to_owned(),
                message: e.to_string(),
            })
    }

    /// Splits `rows` rows into blocks for row-major arrays that share the partition (say A and C of a GEMM),
    /// with leading dimensions `lds` (elements) and `copies[i]` stacked copies of array `i` bound together.
    /// Every block starts at a byte offset that is legal for each array and binds at most the binding limit.
    pub fn row_blocks<T: Pod>(
        &self,
        rows: usize,
        lds: &[usize],
        copies: &[usize],
    ) -> Result<Vec<std::ops::Range<usize>>> {
        let (granule, bytes_per_row) = self.row_granule::<T>(lds, copies);
        let fit = self.binding_limit / bytes_per_row.max(1);
        let per = fit / granule * granule;
        if per == 0 && rows > 0 {
            return Err(GpuError::LimitExceeded {
                what: format!(
                    "bytes of {granule} aligned row(s) of a row-major array in one binding"
                ),
                asked: granule * bytes_per_row,
                max: self.binding_limit,
            });
        }
        let per = per.max(1) as usize;
        Ok((0..rows.div_ceil(per))
            .map(|i| i * per..((i + 1) * per).min(rows))
            .collect())
    }

    /// The smallest binding limit under which [`row_blocks`](Self::row_blocks) can split these arrays: one block
    /// of the fewest rows whose byte length is a multiple of the storage offset alignment for every array (with
    /// WebGPU's 256-byte alignment, 16 rows of 260 f32, 16 640 B). Tests that lower the binding limit to make
    /// launches split ask for at least this, so they split on any adapter's alignment.
    pub fn row_block_bytes<T: Pod>(&self, lds: &[usize], copies: &[usize]) -> u64 {
        let (granule, bytes_per_row) = self.row_granule::<T>(lds, copies);
        granule * bytes_per_row
    }

    /// Rows in the smallest aligned block of [`row_blocks`](Self::row_blocks), and the bytes a row binds.
    fn row_granule<T: Pod>(&self, lds: &[usize], copies: &[usize]) -> (u64, u64) {
        let elem = size_of::<T>() as u64;
        let align = u64::from(self.limits.min_storage_buffer_offset_alignment).max(4);
        // Smallest row count whose byte length is a multiple of the alignment for every array.
        let granule = lds.iter().fold(1u64, |g, &ld| {
            let row_bytes = (ld.max(1) as u64) * elem;
            let need = align / gcd(align, row_bytes);
            g / gcd(g, need) * need
        });
        let bytes_per_row = lds
            .iter()
            .zip(copies.iter().chain(std::iter::repeat(&1)))
            .map(|(&ld, &c)| ld as u64 * elem * c as u64)
            .max()
            .unwrap_or(elem);
        (granule, bytes_per_row)
    }

    /// `len` elements of `T` rounded up so that an array placed right after them in the same buffer starts at a
    /// legal binding offset ([`packed_len`] with this adapter's storage offset alignment).
    pub fn packed_len<T: Pod>(&self, len: usize) -> usize {
        packed_len::<T>(len, self.limits.min_storage_buffer_offset_alignment)
    }

    /// Splits `len` elements of `T` into windows that each fit one binding and start at a legal offset.
    /// Window lengths are multiples of `granule` elements (e.g. 4 for vec4 access, a row length for panels),
    /// except possibly the last.
    pub fn windows<T: Pod>(&self, len: usize, granule: usize) -> Result<Vec<Window>> {
        let elem = size_of::<T>() as u64;
        let align = u64::from(self.limits.min_storage_buffer_offset_alignment).max(4);
        let granule_bytes = granule.max(1) as u64 * elem;
        // Each window's byte length must be a multiple of the offset alignment and of the granule.
        let step = align / gcd(align, granule_bytes) * granule_bytes;
        let per_window = self.binding_limit / step * step;
        if per_window == 0 {
            return Err(GpuError::LimitExceeded {
                what: format!("one binding of a {granule}-element granule of {elem}-byte elements"),
                asked: step,
                max: self.binding_limit,
            });
        }
        let per = (per_window / elem) as usize;
        let mut out = Vec::with_capacity(len.div_ceil(per).max(1));
        let mut at = 0;
        while at < len {
            let n = per.min(len - at);
            out.push(Window { offset: at, len: n });
            at += n;
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::packed_len;

    /// Packed arrays start at multiples of the alignment whatever the element size; an exact fit is not padded.
    #[test]
    fn packed_lengths_round_to_the_offset_alignment() {
        assert_eq!(packed_len::<u32>(100, 256), 128);
        assert_eq!(packed_len::<u32>(128, 256), 128);
        assert_eq!(packed_len::<f64>(3, 256), 32);
        // 12-byte elements: 64 of them are the first whole multiple of 256 bytes.
        assert_eq!(packed_len::<[f32; 3]>(1, 256), 64);
        assert_eq!(packed_len::<u32>(0, 256), 0);
        // No alignment asked: whole 4-byte words.
        assert_eq!(packed_len::<u32>(5, 0), 5);
        assert_eq!(packed_len::<u16>(5, 0), 6);
        for (len, align) in [(7usize, 16u32), (1000, 64), (12345, 256)] {
            let p = packed_len::<u16>(len, align);
            assert!(
                p >= len && (p * 2).is_multiple_of(align as usize),
                "{len} {align}: {p}"
            );
        }
    }
}
